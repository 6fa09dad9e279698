"""PostgreSQL API, the MEMORY tool's Unicode rules for ``run_command``: Python's ``repr`` and
:func:`dbmemory.core.paths.quote_value` of any character, and :func:`normalize_path`'s
per-character and per-segment refusals of non-ASCII paths, from the tables of
:mod:`dbmemory.sqlgen.unicode_tables` (for :mod:`dbmemory.sqlgen.postgresql.tool_text`)."""

from __future__ import annotations

from dbmemory.sqlgen.postgresql.rules import S, q
from dbmemory.sqlgen.tool_text import path_rule
from dbmemory.sqlgen.unicode_tables import (
    CHARACTER_SAMPLES,
    RESERVED_SUFFIX,
    UNICODE_VERSION,
    tables,
)

__all__ = ["unicode_helpers", "char_rules", "HEX"]


def _concat(parts: list[str]) -> str:
    return "(" + " || ".join(parts) + ")"


HEX = "upper(CASE WHEN length(to_hex({c})) < 4 THEN lpad(to_hex({c}), 4, '0') ELSE to_hex({c}) END)"
_ESCAPE = ("CASE WHEN {c} < 256 THEN '\\x' || lpad(to_hex({c}), 2, '0')"
           " WHEN {c} < 65536 THEN '\\u' || lpad(to_hex({c}), 4, '0')"
           " ELSE '\\U' || lpad(to_hex({c}), 8, '0') END")
_ESCAPE_WIDE = ("CASE WHEN {c} < 65536 THEN '\\u' || lpad(to_hex({c}), 4, '0')"
                " ELSE '\\U' || lpad(to_hex({c}), 8, '0') END")


def char_rules() -> dict[str, str]:
    """The rule texts (after the shown path) of the per-character and per-segment refusals as
    PostgreSQL expressions of ``v_char``, ``v_code``, ``i`` (1-based position), ``v_tag`` and
    ``v_seg``, read from :func:`normalize_path`'s messages for sample characters."""
    what = tables().what
    what_sql = ("CASE WHEN v_code < 128 THEN 'a control character' ELSE CASE v_tag "
                + " ".join(f"WHEN '{tag}' THEN {q(words)}" for tag, words in sorted(what.items()))
                + " END END")
    hex_sql = "'U+' || " + HEX.format(c="v_code")
    pos = "(i - 1)::text"
    name = f"{S}._uni_name(v_code)"
    samples = CHARACTER_SAMPLES
    return {
        "refused": path_rule("/memories/a\tb", "' ", q, _concat, {
            "a control character": what_sql, "'\\t'": f"{S}._py_repr(v_char)", "U+0009": hex_sql, "11": pos}),
        "slash": path_rule(f"/memories/a{samples['SL']}b", "' ", q, _concat, {
            repr(samples["SL"]): f"{S}._py_repr(v_char)", f"U+{ord(samples['SL']):04X}": hex_sql, "11": pos}),
        "invisible": path_rule(f"/memories/a{samples['IN']}b", "' ", q, _concat, {
            "'\\ufe0f'": f"{S}._quote_value(v_char)", "U+FE0F VARIATION SELECTOR-16": f"{hex_sql} || {name}",
            "11": pos}),
        "spacelike": path_rule(f"/memories/a{samples['WS']}b", "' ", q, _concat, {
            "'\\u3000'": f"{S}._quote_value(v_char)", "U+3000 IDEOGRAPHIC SPACE": f"{hex_sql} || {name}",
            "11": pos}),
        "dotlike": path_rule("/memories/\u3002\u3002", "' ", q, _concat, {
            "'\u3002\u3002'": f"{S}._quote_value(v_seg)"}),
        "combining": path_rule("/memories/\u0301\u0301", "' ", q, _concat, {
            "\\u0301\\u0301": f"{S}._escape_chars(left(v_seg, 100))"}),
    }


def unicode_helpers() -> str:
    """The functions (statements separated by a blank line after ``;``)."""
    t = tables()
    return f"""CREATE OR REPLACE FUNCTION {S}._range_tag(p_code integer, p_table text, p_width integer)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $f$
-- the tag of the range of p_table (entries SSSSSSEEEEEE<tag>, p_width characters, sorted) that
-- holds code point p_code, NULL when none does (dbmemory.sqlgen.unicode_tables)
DECLARE
    v_lo integer := 0;
    v_hi integer := length(p_table) / p_width - 1;
    v_mid integer;
    v_entry text;
BEGIN
    WHILE v_lo <= v_hi LOOP
        v_mid := (v_lo + v_hi) / 2;
        v_entry := substr(p_table, v_mid * p_width + 1, p_width);
        IF p_code < ('x' || lpad(substr(v_entry, 1, 6), 8, '0'))::bit(32)::integer THEN
            v_hi := v_mid - 1;
        ELSIF p_code > ('x' || lpad(substr(v_entry, 7, 6), 8, '0'))::bit(32)::integer THEN
            v_lo := v_mid + 1;
        ELSE
            RETURN substr(v_entry, 13);
        END IF;
    END LOOP;
    RETURN NULL;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_nonprintable(p_code integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $f$
    -- not str.isprintable() (Unicode {UNICODE_VERSION})
    SELECT {S}._range_tag(p_code, '{t.nonprintable}', 12) IS NOT NULL
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_invisible(p_code integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $f$
    -- printable, but escaped by dbmemory.core.paths.quote_value (Unicode {UNICODE_VERSION})
    SELECT {S}._range_tag(p_code, '{t.invisible}', 12) IS NOT NULL
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_refused(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- normalize_path's per-character refusal (Unicode {UNICODE_VERSION}): SL, IN, WS or the category
    SELECT {S}._range_tag(p_code, '{t.refused}', 14)
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_skeleton(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- what the character leaves of a segment's dot skeleton: M nothing, 1 or 2 dots, NULL a visible character
    SELECT {S}._range_tag(p_code, '{t.skeleton}', 13)
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_name(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- ' <Unicode name>' of an invisible or space-like character, else {RESERVED_SUFFIX!r}
    SELECT coalesce(
        (SELECT split_part(substr(t.n, strpos(t.n, '|' || k.h) + 7), '|', 1)
           FROM (SELECT {q(t.names)}::text AS n) t,
                (SELECT lpad(upper(to_hex(p_code)), 6, '0') AS h) k
          WHERE strpos(t.n, '|' || k.h) > 0),
        {q(RESERVED_SUFFIX)})
$f$;

CREATE OR REPLACE FUNCTION {S}._py_escape(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- repr()'s escape of a character it does not print
    SELECT {_ESCAPE.format(c="p_code")}
$f$;

CREATE OR REPLACE FUNCTION {S}._escape_chars(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.core.paths._escape_char of every character
    SELECT coalesce(string_agg({_ESCAPE_WIDE.format(c="ascii(c)")}, '' ORDER BY n), '')
      FROM unnest(string_to_array(p_text, NULL)) WITH ORDINALITY u(c, n)
$f$;

CREATE OR REPLACE FUNCTION {S}._escape_invisible(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.core.paths._escape_invisible
    SELECT CASE WHEN p_text ~ '^[\\x01-\\x7f]*$' THEN p_text ELSE
        (SELECT string_agg(CASE WHEN ascii(c) > 127 AND {S}._uni_invisible(ascii(c))
                                THEN {S}._escape_chars(c) ELSE c END, '' ORDER BY n)
           FROM unnest(string_to_array(p_text, NULL)) WITH ORDINALITY u(c, n)) END
$f$"""
