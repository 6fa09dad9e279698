"""PostgreSQL API, the MEMORY tool's text helpers for ``run_command``: Python's number and
string formatting (``f"{n:,}"``, ``repr``, :func:`dbmemory.core.paths.quote_value`,
:func:`dbmemory.tool.messages.show_text`, :func:`dbmemory.tool.render.format_size`), the JSON
values as Python shows them, and the tool's path rules (:func:`dbmemory.core.paths.normalize_path`
for paths that stay ASCII), for :mod:`dbmemory.sqlgen.postgresql.tool`."""

from __future__ import annotations

from collections.abc import Callable

from dbmemory.core.paths import (
    MAX_DECODE_ROUNDS,
    MAX_PATH_CHARS,
    MAX_RAW_PATH_CHARS,
    ROOT,
)
from dbmemory.sqlgen.postgresql.rules import S, q
from dbmemory.sqlgen.postgresql.tool_lookalike import escape_rule, fold_rule
from dbmemory.sqlgen.postgresql.tool_unicode import char_rules
from dbmemory.sqlgen.tool_text import join_pieces, path_rule, rule_of, template
from dbmemory.sqlgen.unicode_tables import UNICODE_VERSION, tables
from dbmemory.tool import messages as m

__all__ = ["msg", "TEXT_HELPERS"]


def msg(function: Callable[..., str], *args: object, **kwargs: object) -> str:
    """A message of :mod:`dbmemory.tool.messages` as one PostgreSQL text expression."""
    return join_pieces(
        template(function, *args, **kwargs),
        q,
        lambda expr, grouped: f"{S}._fmt_int({expr})" if grouped else f"({expr})::text",
        lambda parts: "(" + " || ".join(parts) + ")" if parts else "''",
    )


def _concat(parts: list[str]) -> str:
    return "(" + " || ".join(parts) + ")"


def _rule(raw: str, shown_end: str, **values: str) -> str:
    return path_rule(raw, shown_end, q, _concat, values)


_CHARS = char_rules()
_RULES = {
    "empty": q(rule_of("")),
    "long_raw": _rule("/" + "a" * MAX_RAW_PATH_CHARS, " characters) ",
                          **{f"{MAX_RAW_PATH_CHARS + 1:,}": f"{S}._fmt_int(length(p_raw))"}),
    "deep": _rule("/memories/%" + "25" * (MAX_DECODE_ROUNDS + 1) + "41", "' "),
    "utf8": _rule("/memories/%ff", "' "),
    "empty_decoded": None,
    "backslash": _rule("/memories/a\\b", "' ", **{"11": "(i - 1)::text"}),
    "outside": _rule("/other", "' "),
    "dotdot": _rule("/memories/..", "' "),
    "dot": _rule("/memories/.", "' "),
    "space": _rule("/memories/ a", "' ", **{"' a'": f"{S}._quote_value(v_seg)"}),
    "long": _rule("/memories/" + "a" * MAX_PATH_CHARS, " characters) ",
                      **{f"{MAX_PATH_CHARS + 10:,}": f"{S}._fmt_int(length(v_text))"}),
}


TEXT_HELPERS = f"""CREATE OR REPLACE FUNCTION {S}._fmt_int(p_n numeric) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- Python's f"{{n:,}}"
    SELECT pg_catalog.regexp_replace(p_n::text, '(\\d)(?=(\\d{{3}})+$)', '\\1,', 'g')
$f$;

CREATE OR REPLACE FUNCTION {S}._py_repr(p_text text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- Python's repr() of a str (str.isprintable() from dbmemory.sqlgen.unicode_tables)
DECLARE
    v_quote text := CASE WHEN strpos(p_text, '''') > 0 AND strpos(p_text, '"') = 0 THEN '"' ELSE '''' END;
    v_out text := '';
    v_char text;
    v_code integer;
BEGIN
    FOR i IN 1 .. length(p_text) LOOP
        v_char := substr(p_text, i, 1);
        v_code := ascii(v_char);
        v_out := v_out || CASE
            WHEN v_char = '\\' THEN '\\\\'
            WHEN v_char = v_quote THEN '\\' || v_quote
            WHEN v_code = 10 THEN '\\n'
            WHEN v_code = 13 THEN '\\r'
            WHEN v_code = 9 THEN '\\t'
            WHEN v_code < 32 OR v_code = 127 THEN '\\x' || lpad(to_hex(v_code), 2, '0')
            WHEN v_code > 127 AND {S}._uni_nonprintable(v_code) THEN {S}._py_escape(v_code)
            ELSE v_char END;
    END LOOP;
    RETURN v_quote || v_out || v_quote;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._quote_value(p_text text, p_max integer DEFAULT 100) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.core.paths.quote_value: repr, invisible printable characters as \\uXXXX, clipped
    SELECT CASE WHEN length(p_text) <= p_max THEN {S}._escape_invisible({S}._py_repr(p_text))
           ELSE {S}._escape_invisible({S}._py_repr(left(p_text, p_max))) || '... ('
                || {S}._fmt_int(length(p_text)) || ' characters)' END
$f$;

CREATE OR REPLACE FUNCTION {S}._show_text(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.tool.messages.show_text
    SELECT CASE WHEN length(p_text) <= 200 THEN '`' || p_text || '`'
           ELSE '`' || left(p_text, 200) || '`... (' || {S}._fmt_int(length(p_text)) || ' characters)' END
$f$;

CREATE OR REPLACE FUNCTION {S}._py_json(p_value json) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- repr() of the value Python's json.loads makes of p_value
DECLARE
    v_text text := p_value::text;
    v_float double precision;
BEGIN
    CASE json_typeof(p_value)
    WHEN 'string' THEN RETURN {S}._py_repr(p_value #>> '{{}}');
    WHEN 'boolean' THEN RETURN CASE WHEN p_value::text = 'true' THEN 'True' ELSE 'False' END;
    WHEN 'null' THEN RETURN 'None';
    WHEN 'number' THEN
        IF v_text ~ '^-?[0-9]+$' THEN
            RETURN v_text::numeric::text;
        END IF;
        RETURN {S}._py_float(v_text);
    WHEN 'array' THEN
        RETURN '[' || coalesce((SELECT string_agg({S}._py_json(e.value), ', ' ORDER BY e.n)
                                  FROM json_array_elements(p_value) WITH ORDINALITY e(value, n)), '') || ']';
    ELSE
        RETURN '{{' || coalesce((SELECT string_agg({S}._py_repr(e.key) || ': ' || {S}._py_json(e.value), ', ' ORDER BY e.n)
                                  FROM json_each(p_value) WITH ORDINALITY e(key, value, n)), '') || '}}';
    END CASE;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._json_type(p_value json) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    SELECT CASE json_typeof(p_value) WHEN 'string' THEN 'string' WHEN 'number' THEN 'number'
           WHEN 'boolean' THEN 'boolean' WHEN 'null' THEN 'null' WHEN 'array' THEN 'array'
           ELSE 'object' END
$f$;

CREATE OR REPLACE FUNCTION {S}._show(p_value json) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.tool.messages._show of the JSON value: strings quoted, lists cut at 10 items, 100 characters
DECLARE
    v_text text;
BEGIN
    IF json_typeof(p_value) = 'string' THEN
        RETURN {S}._quote_value(p_value #>> '{{}}', 100);
    END IF;
    IF json_typeof(p_value) = 'array' AND json_array_length(p_value) > 10 THEN
        v_text := '[' || (SELECT string_agg({S}._py_json(e.value), ', ' ORDER BY e.n)
                            FROM json_array_elements(p_value) WITH ORDINALITY e(value, n) WHERE e.n <= 10)
                  || ', ''...'']';
    ELSE
        v_text := {S}._py_json(p_value);
    END IF;
    IF length(v_text) > 100 THEN
        v_text := left(v_text, 100) || '...';
    END IF;
    RETURN v_text;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._as_int(p_value json) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.tool.args._as_int: an int, an integral float or an ASCII digit string; never a boolean
DECLARE
    v_text text;
    v_float double precision;
BEGIN
    IF json_typeof(p_value) = 'number' THEN
        v_text := p_value::text;
        IF v_text ~ '^-?[0-9]+$' THEN
            RETURN v_text::numeric;
        END IF;
        BEGIN
            v_float := v_text::double precision;
        EXCEPTION WHEN numeric_value_out_of_range THEN
            RETURN CASE WHEN v_text ~ '[eE]-' THEN 0 END;  -- inf is no whole number, a tiny one is 0
        END;
        RETURN CASE WHEN v_float = trunc(v_float) THEN trunc(v_float::numeric) END;
    END IF;
    IF json_typeof(p_value) = 'string' THEN
        v_text := p_value #>> '{{}}';
        IF v_text ~ '^[ \\t\\r\\n]*[+-]?[0-9]{{1,18}}[ \\t\\r\\n]*$' THEN
            RETURN btrim(v_text, E' \\t\\r\\n')::numeric;
        END IF;
    END IF;
    RETURN NULL;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._format_size(p_chars bigint) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.tool.render.format_size: base 1024, one decimal rounded half to even, K M G T
DECLARE
    v_div numeric := 1;
    v_tenths numeric;
    v_rest numeric;
    v_unit text;
BEGIN
    IF p_chars < 1024 THEN
        RETURN p_chars::text;
    END IF;
    FOREACH v_unit IN ARRAY ARRAY['K', 'M', 'G', 'T'] LOOP
        v_div := v_div * 1024;
        v_tenths := floor(p_chars * 10 / v_div);
        v_rest := p_chars * 10 - v_tenths * v_div;
        IF v_rest * 2 > v_div OR (v_rest * 2 = v_div AND mod(v_tenths, 2) = 1) THEN
            v_tenths := v_tenths + 1;
        END IF;
        IF v_tenths < 10240 OR v_unit = 'T' THEN
            RETURN (div(v_tenths, 10))::text || '.' || mod(v_tenths, 10)::text || v_unit;
        END IF;
    END LOOP;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._path_char_rule(p_text text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.core.paths._check_characters, in its order (the tables of
-- dbmemory.sqlgen.unicode_tables for the non-ASCII characters): the rule text, NULL when none
DECLARE
    v_char text;
    v_code integer;
    v_tag text;
BEGIN
    FOR i IN 1 .. length(p_text) LOOP
        v_char := substr(p_text, i, 1);
        v_code := ascii(v_char);
        IF v_char = '\\' THEN
            RETURN {_RULES["backslash"]};
        END IF;
        CONTINUE WHEN v_code BETWEEN 32 AND 126;
        v_tag := CASE WHEN v_code > 127 THEN {S}._uni_refused(v_code) END;
        IF v_tag = 'SL' THEN
            RETURN {_CHARS["slash"]};
        ELSIF v_code < 128 OR v_tag IN ({", ".join(q(t) for t in sorted(tables().what))}) THEN
            RETURN {_CHARS["refused"]};
        ELSIF v_tag = 'IN' THEN
            RETURN {_CHARS["invisible"]};
        ELSIF v_tag = 'WS' THEN
            RETURN {_CHARS["spacelike"]};
        END IF;
    END LOOP;
    RETURN NULL;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._tool_path(p_raw text, p_name text, OUT path text, OUT error text)
LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.core.paths.normalize_path with the MEMORY tool's message (dbmemory.tool.args._path),
-- the same rules for every character (Unicode {UNICODE_VERSION})
DECLARE
    v_text text := p_raw;
    v_decoded text;
    v_char text;
    v_hex text;
    v_seg text;
    v_shown text;
    v_rule text;
    v_code integer;
    v_tag text;
    v_changed boolean := true;
BEGIN
    IF p_raw = '' THEN
        v_rule := {_RULES["empty"]};
    ELSIF length(p_raw) > {MAX_RAW_PATH_CHARS} THEN
        v_shown := {S}._quote_value(p_raw);
        v_rule := {_RULES["long_raw"]};
    END IF;
    IF v_rule IS NULL THEN
        -- urllib.parse.unquote until the text stops changing, at most {MAX_DECODE_ROUNDS} rounds
        FOR r IN 1 .. {MAX_DECODE_ROUNDS} LOOP
            EXIT WHEN strpos(v_text, '%') = 0;
            BEGIN
                v_decoded := convert_from(decode(
                    (SELECT string_agg(CASE WHEN m[1] IS NOT NULL THEN lower(m[1]) ELSE encode(convert_to(m[2], 'UTF8'), 'hex') END, '' ORDER BY n)
                       FROM regexp_matches(v_text, '%([0-9A-Fa-f]{{2}})|(%|[^%]+)', 'g') WITH ORDINALITY t(m, n)),
                    'hex'), 'UTF8');
            EXCEPTION WHEN others THEN
                v_shown := {S}._quote_value(p_raw) || CASE WHEN v_text <> p_raw
                    THEN ' (decoded: ' || {S}._quote_value(v_text) || ')' ELSE '' END;
                v_rule := {_RULES["utf8"]};
                EXIT;
            END;
            IF v_decoded = v_text THEN
                v_changed := false;
                EXIT;
            END IF;
            v_text := v_decoded;
            IF r = {MAX_DECODE_ROUNDS} THEN
                v_shown := {S}._quote_value(p_raw);
                v_rule := {_RULES["deep"]};
            END IF;
        END LOOP;
    END IF;
    IF v_rule IS NULL THEN
        v_text := normalize(v_text, NFC);
        v_shown := {S}._quote_value(p_raw) || CASE WHEN v_text <> p_raw
            THEN ' (decoded: ' || {S}._quote_value(v_text) || ')' ELSE '' END;
        v_rule := {S}._path_char_rule(v_text);
    END IF;
    IF v_rule IS NULL AND v_text !~ '^[\\x01-\\x7f]*$' THEN
        -- rule 9's look-alikes of '.' and '..', named before the fold
        FOREACH v_seg IN ARRAY string_to_array(v_text, '/') LOOP
            IF v_seg !~ '^[\\x01-\\x7f]*$' AND {S}._dot_shape(v_seg) = 'D' THEN
                v_rule := {_CHARS["dotlike"]};
                EXIT;
            END IF;
        END LOOP;
        -- rule 5's NFKC fold (Unicode {UNICODE_VERSION}): a character whose NFKC form holds '/',
        -- a backslash or '%' is refused, the folded text meets the character rules again
        v_decoded := normalize(v_text, NFKC);
        IF v_rule IS NULL AND v_decoded <> v_text THEN
            FOR i IN 1 .. length(v_text) LOOP
                v_char := substr(v_text, i, 1);
                v_code := ascii(v_char);
                v_tag := CASE WHEN v_code > 127 THEN {S}._uni_separator(v_code) END;
                IF v_tag IS NOT NULL THEN
                    v_rule := {fold_rule()};
                    EXIT;
                END IF;
            END LOOP;
            IF v_rule IS NULL AND v_decoded ~ '%[0-9A-Fa-f]{{2}}' THEN
                v_rule := {escape_rule()};
            END IF;
            IF v_rule IS NULL THEN
                v_text := v_decoded;
                v_shown := {S}._quote_value(p_raw) || CASE WHEN v_text <> p_raw
                    THEN ' (decoded: ' || {S}._quote_value(v_text) || ')' ELSE '' END;
                v_rule := {S}._path_char_rule(v_text);
            END IF;
        END IF;
    END IF;
    IF v_rule IS NULL THEN
        v_text := regexp_replace(v_text, '/{{2,}}', '/', 'g');
        IF length(v_text) > 1 AND right(v_text, 1) = '/' THEN
            v_text := left(v_text, -1);
        END IF;
        IF v_text <> '{ROOT}' AND left(v_text, {len(ROOT) + 1}) <> '{ROOT}/' THEN
            v_rule := {_RULES["outside"]};
        ELSIF v_text <> '{ROOT}' THEN
            FOREACH v_seg IN ARRAY string_to_array(substr(v_text, {len(ROOT) + 2}), '/') LOOP
                IF v_seg = '..' THEN
                    v_rule := {_RULES["dotdot"]};
                ELSIF v_seg = '.' THEN
                    v_rule := {_RULES["dot"]};
                ELSIF v_seg !~ '^[\\x01-\\x7f]*$' AND {S}._dot_shape(v_seg) = 'D' THEN
                    v_rule := {_CHARS["dotlike"]};
                ELSIF v_seg !~ '^[\\x01-\\x7f]*$' AND {S}._dot_shape(v_seg) = 'C' THEN
                    v_rule := {_CHARS["combining"]};
                END IF;
                IF v_rule IS NULL AND (left(v_seg, 1) = ' ' OR right(v_seg, 1) = ' ') THEN
                    v_rule := {_RULES["space"]};
                END IF;
                IF v_rule IS NULL THEN
                    v_rule := {S}._lookalike_rule(v_seg);
                END IF;
                EXIT WHEN v_rule IS NOT NULL;
            END LOOP;
        END IF;
        IF v_rule IS NULL AND length(v_text) > {MAX_PATH_CHARS} THEN
            v_shown := {S}._quote_value(p_raw);
            v_rule := {_RULES["long"]};
        END IF;
    END IF;
    IF v_rule IS NULL THEN
        path := v_text;
        RETURN;
    END IF;
    error := {q(m.ERROR_MARKER)} || CASE WHEN p_raw = '' THEN '' ELSE 'path ' || v_shown || ' ' END || v_rule;
    IF p_name <> 'path' AND substr(error, {len(m.ERROR_MARKER) + 1}, 5) = 'path ' THEN
        error := {q(m.ERROR_MARKER)} || p_name || substr(error, {len(m.ERROR_MARKER) + 5});
    END IF;
END
$f$"""
