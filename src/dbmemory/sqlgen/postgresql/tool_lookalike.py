"""PostgreSQL API, the MEMORY tool's look-alike path rules for ``run_command``: rule 5's NFKC
fold (:func:`normalize` with ``NFKC``; a character whose NFKC form holds ``/``, ``\\`` or ``%``
refused) and rule 11 (:func:`dbmemory.core.lookalikes.lookalike_problem`: a combining mark on an
ASCII character, a word mixing scripts, a word of ASCII look-alikes), from the tables of
:mod:`dbmemory.sqlgen.unicode_tables`, for :mod:`dbmemory.sqlgen.postgresql.tool_text`."""

from __future__ import annotations

import re

from dbmemory.sqlgen.postgresql.rules import S, q
from dbmemory.sqlgen.postgresql.tool_unicode import HEX
from dbmemory.sqlgen.tool_text import path_rule
from dbmemory.sqlgen.unicode_tables import (
    CONFUSABLES_VERSION,
    SCRIPT_NAMES,
    UNICODE_VERSION,
    tables,
)

__all__ = ["lookalike_helpers", "fold_rule"]

_ASCII = "'^[\\x01-\\x7f]*$'"


def _literal(text: str) -> str:
    """A literal of ``text`` with its non-ASCII characters as code points (the scripts are ASCII)."""
    pieces = re.split(r"([^\x00-\x7f])", text)
    parts = [f"chr({ord(p)})"
             if len(p) == 1 and not p.isascii() else q(p) for p in pieces if p]
    return _concat(parts) if len(parts) > 1 else parts[0]


def _concat(parts: list[str]) -> str:
    return "(" + " || ".join(parts) + ")"


def _named(code: str, char: str) -> str:
    """``dbmemory.core.lookalikes._named``: ``'р' (U+0440 CYRILLIC SMALL LETTER ER)``."""
    return f"({S}._py_repr({char}) || ' (U+' || {HEX.format(c=code)} || {S}._uni_cname({code}) || ')')"


def fold_rule() -> str:
    """Rule 5's refusal of a character whose NFKC form holds a separator, as an expression of
    ``v_char``, ``v_code``, ``v_tag`` (S, B or P) and ``i``."""
    return path_rule("/memories/a\u2100b", "' ", _literal, _concat, {
        "'\u2100'": f"{S}._py_repr(v_char)", "U+2100": "'U+' || " + HEX.format(c="v_code"),
        "11": "(i - 1)::text", "'a/c'": f"{S}._py_repr(normalize(v_char, NFKC))",
        "'/'": "CASE v_tag WHEN 'S' THEN '''/''' WHEN 'B' THEN '''\\\\''' ELSE '''%''' END"})

def escape_rule() -> str:
    """Rule 5's refusal of a fold that completes a percent-escape (``%aﬁ`` is ``%afi``), as an
    expression of ``v_decoded`` (the folded text)."""
    return path_rule("/memories/%a\ufb01", "' ", _literal, _concat, {
        "'/memories/%afi'": f"{S}._quote_value(v_decoded)",
        "'%af'": "('''' || substring(v_decoded from '%[0-9A-Fa-f]{2}') || '''')"})


def lookalike_helpers() -> str:
    """The functions (statements separated by a blank line after ``;``)."""
    t = tables()
    latin = f"{SCRIPT_NAMES.index('Latin'):02X}"
    names = "ARRAY[" + ", ".join(q(n) for n in SCRIPT_NAMES) + "]"
    seg = f"{S}._quote_value(p_seg)"
    mark = path_rule("/memories/x\u0301.md", "' ", _literal, _concat, {
        "'x\u0301.md'": seg, "'\u0301' (U+0301 COMBINING ACUTE ACCENT)": _named("v_code", "v_char"),
        "'x'": f"CASE WHEN i = 1 THEN 'the start of the segment' ELSE {S}._py_repr(substr(p_seg, i - 1, 1)) END"})
    mixed = path_rule("/memories/\u0440refs.md", "' ", _literal, _concat, {
        "'\u0440refs.md'": seg, "'\u0440refs'": f"{S}._py_repr(v_word)", "Cyrillic and Latin": "v_names",
        " ('\u0440' (U+0440 CYRILLIC SMALL LETTER ER) looks like 'p')": "v_example"})
    whole = path_rule("/memories/\u0430\u0441\u0435.md", "' ", _literal, _concat, {
        "'\u0430\u0441\u0435.md'": seg, "'\u0430\u0441\u0435'": f"{S}._py_repr(v_word)", "'ace'": f"{S}._py_repr(v_shown)"})
    return f"""CREATE OR REPLACE FUNCTION {S}._uni_class(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- M a combining mark (Mn, Me, Mc), W a letter or digit (L*, N*), else NULL (Unicode {UNICODE_VERSION})
    SELECT {S}._range_tag(p_code, '{t.classes}', 13)
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_script(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- the script (two hex digits, an index into the names of {S}._lookalike_rule) and the writing
    -- systems it joins (a digit of bits), NULL for Common and Inherited (data: {CONFUSABLES_VERSION})
    SELECT {S}._range_tag(p_code, '{t.scripts}', 15)
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_looks(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.core.lookalikes.ascii_lookalike (data: {CONFUSABLES_VERSION}), NULL when none
    SELECT convert_from(decode(substr(k.t, 2, 2 * substr(k.t, 1, 1)::integer), 'hex'), 'UTF8')
      FROM (SELECT {S}._range_tag(p_code, '{t.lookalikes}', 21) AS t) k
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_separator(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- S, B or P when the NFKC form of the character holds '/', a backslash or '%' (Unicode {UNICODE_VERSION})
    SELECT {S}._range_tag(p_code, '{t.separators}', 13)
$f$;

CREATE OR REPLACE FUNCTION {S}._uni_cname(p_code integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- ' <Unicode name>' of a mark or a non-Latin ASCII look-alike, '' without one (Unicode {UNICODE_VERSION})
    SELECT coalesce(
        (SELECT split_part(substr(t.n, strpos(t.n, '|' || k.h) + 7), '|', 1)
           FROM (SELECT {q(t.cnames)}::text AS n) t,
                (SELECT lpad(upper(to_hex(p_code)), 6, '0') AS h) k
          WHERE strpos(t.n, '|' || k.h) > 0), '')
$f$;

CREATE OR REPLACE FUNCTION {S}._dot_shape(p_seg text) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.core.paths._dot_skeleton of a non-ASCII segment: D when it looks like '.' or
    -- '..', C when nothing visible is left (only combining marks), else NULL
    SELECT CASE WHEN NOT bool_or(k IS NULL) AND coalesce(sum(k), 0) IN (1, 2) THEN 'D'
                WHEN NOT bool_or(k IS NULL) AND coalesce(sum(k), 0) = 0 THEN 'C' END
      FROM (SELECT CASE WHEN c = '.' THEN 1 WHEN ascii(c) < 128 THEN NULL
                        ELSE CASE {S}._uni_skeleton(ascii(c)) WHEN 'M' THEN 0
                             WHEN '1' THEN 1 WHEN '2' THEN 2 END END AS k
              FROM unnest(string_to_array(p_seg, NULL)) c) d
$f$;

CREATE OR REPLACE FUNCTION {S}._lookalike_rule(p_seg text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.core.paths rule 11 (dbmemory.core.lookalikes.lookalike_problem) of an NFKC segment:
-- the rule text, NULL when the segment is legal (Unicode {UNICODE_VERSION}; data: {CONFUSABLES_VERSION})
DECLARE
    v_char text;
    v_code integer;
    v_word text := '';
    v_n integer;
    v_mask integer;
    v_names text;
    v_example text;
    v_shown text;
BEGIN
    IF p_seg ~ {_ASCII} THEN
        RETURN NULL;
    END IF;
    FOR i IN 1 .. length(p_seg) LOOP
        v_char := substr(p_seg, i, 1);
        v_code := ascii(v_char);
        IF v_code > 127 AND {S}._uni_class(v_code) = 'M' AND (i = 1 OR ascii(substr(p_seg, i - 1, 1)) < 128) THEN
            RETURN {mark};
        END IF;
    END LOOP;
    FOR i IN 1 .. length(p_seg) + 1 LOOP
        v_char := substr(p_seg, i, 1);
        v_code := ascii(v_char);
        IF i <= length(p_seg) AND (v_char ~ '^[A-Za-z0-9]$' OR (v_code > 127 AND {S}._uni_class(v_code) IS NOT NULL)) THEN
            v_word := v_word || v_char;
            CONTINUE;
        END IF;
        IF v_word !~ {_ASCII} THEN
            SELECT count(DISTINCT left(s, 2)), bit_and(substr(s, 3, 1)::integer) INTO v_n, v_mask
              FROM (SELECT {S}._uni_script(ascii(c)) AS s FROM unnest(string_to_array(v_word, NULL)) c) d
             WHERE s IS NOT NULL;
            IF v_n > 1 AND v_mask = 0 THEN
                SELECT string_agg(({names})[k + 1], ' and ' ORDER BY k) INTO v_names
                  FROM (SELECT DISTINCT ('x' || left({S}._uni_script(ascii(c)), 2))::bit(8)::integer AS k
                          FROM unnest(string_to_array(v_word, NULL)) c
                         WHERE {S}._uni_script(ascii(c)) IS NOT NULL) d;
                SELECT coalesce((SELECT ' (' || {_named("ascii(c)", "c")} || ' looks like '
                                        || {S}._py_repr({S}._uni_looks(ascii(c))) || ')'
                                   FROM unnest(string_to_array(v_word, NULL)) WITH ORDINALITY u(c, n)
                                  WHERE left({S}._uni_script(ascii(c)), 2) <> '{latin}'
                                    AND {S}._uni_looks(ascii(c)) IS NOT NULL
                                  ORDER BY n LIMIT 1), '') INTO v_example;
                RETURN {mixed};
            END IF;
            IF NOT EXISTS (SELECT 1 FROM unnest(string_to_array(v_word, NULL)) c
                            WHERE ascii(c) > 127 AND (left({S}._uni_script(ascii(c)), 2) = '{latin}'
                                                      OR {S}._uni_looks(ascii(c)) IS NULL)) THEN
                SELECT string_agg(CASE WHEN ascii(c) < 128 THEN c ELSE {S}._uni_looks(ascii(c)) END, '' ORDER BY n)
                  INTO v_shown FROM unnest(string_to_array(v_word, NULL)) WITH ORDINALITY u(c, n);
                RETURN {whole};
            END IF;
        END IF;
        v_word := '';
    END LOOP;
    RETURN NULL;
END
$f$"""
