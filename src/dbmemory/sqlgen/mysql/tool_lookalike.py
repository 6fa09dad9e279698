"""MySQL/MariaDB API, the MEMORY tool's look-alike path rules for ``run_command``: rule 5's
NFKC fold (``{P}_nfkc`` of :mod:`dbmemory.sqlgen.mysql.tool_unicode`, generated from
:mod:`unicodedata`; a character whose NFKC form holds ``/``, ``\\`` or ``%`` refused), the
character rules (:func:`dbmemory.core.paths._check_characters`) and the dot skeleton as
functions, and rule 11 (:func:`dbmemory.core.lookalikes.lookalike_problem`), from the tables of
:mod:`dbmemory.sqlgen.unicode_tables` (those of PostgreSQL's
:mod:`dbmemory.sqlgen.postgresql.tool_lookalike`), for :mod:`dbmemory.sqlgen.mysql.tool_text`."""

from __future__ import annotations

import re

from dbmemory.core.paths import MAX_RAW_PATH_CHARS
from dbmemory.sqlgen.mysql.rules import P, q
from dbmemory.sqlgen.mysql.tool_unicode import HEX_CODE, TB, char_rules, table_function
from dbmemory.sqlgen.tool_text import path_rule
from dbmemory.sqlgen.unicode_tables import (
    CONFUSABLES_VERSION,
    SCRIPT_NAMES,
    UNICODE_VERSION,
    tables,
)

__all__ = ["lookalike_helpers", "fold_rule"]

_F = "DETERMINISTIC NO SQL SQL SECURITY DEFINER"
_CODE = "ORD(CONVERT({c} USING utf32))"


def _literal(text: str) -> str:
    """A literal of ``text`` with its non-ASCII characters as code points (the scripts are ASCII)."""
    pieces = re.split(r"([^\x00-\x7f])", text)
    parts = [f"CONVERT(CHAR({ord(p)} USING utf32) USING utf8mb4)"
             if len(p) == 1 and not p.isascii() else q(p) for p in pieces if p]
    return _concat(parts) if len(parts) > 1 else parts[0]


def _concat(parts: list[str]) -> str:
    return "CONCAT(" + ", ".join(parts) + ")" if len(parts) > 1 else parts[0]


def _hex(code: str) -> str:
    return "CONCAT('U+', " + HEX_CODE.format(c=code) + ")"


def _named(code: str, char: str) -> str:
    """``dbmemory.core.lookalikes._named``: ``'р' (U+0440 CYRILLIC SMALL LETTER ER)``."""
    return f"CONCAT({P}_py_repr({char}), ' (', {_hex(code)}, {P}_uni_cname({code}), ')')"


def fold_rule() -> str:
    """Rule 5's refusal of a character whose NFKC form holds a separator, as an expression of
    ``v_char``, ``v_code``, ``v_tag`` (S, B or P) and ``i``."""
    return path_rule("/memories/a\u2100b", "' ", _literal, _concat, {
        "'\u2100'": f"{P}_py_repr(v_char)", "U+2100": _hex("v_code"), "11": "CAST(i - 1 AS CHAR)",
        "'a/c'": f"{P}_py_repr({P}_nfkc(v_char))",
        "'/'": f"CASE v_tag WHEN 'S' THEN {q(repr('/'))} WHEN 'B' THEN {q(repr(chr(92)))} ELSE {q(repr('%'))} END"})

def escape_rule() -> str:
    """Rule 5's refusal of a fold that completes a percent-escape (``%aﬁ`` is ``%afi``), as an
    expression of ``v_folded`` (the folded text)."""
    return path_rule("/memories/%a\ufb01", "' ", _literal, _concat, {
        "'/memories/%afi'": f"{P}_quote_value(v_folded, 100)",
        "'%af'": "CONCAT('''', REGEXP_SUBSTR(v_folded, '%[0-9A-Fa-f]{2}'), '''')"})


def _char_rule() -> str:
    chars = char_rules()
    backslash = path_rule("/memories/a\\b", "' ", _literal, _concat, {"11": "CAST(i - 1 AS CHAR)"})
    return f"""CREATE FUNCTION {P}_path_char_rule(p_text {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- dbmemory.core.paths._check_characters, in its order (the tables of
    -- dbmemory.sqlgen.unicode_tables for the non-ASCII characters): the rule text, NULL when none
    DECLARE v_char {TB};
    DECLARE v_code INT;
    DECLARE v_tag VARCHAR(12);
    DECLARE i INT DEFAULT 1;
    WHILE i <= CHAR_LENGTH(p_text) DO
        SET v_char = SUBSTRING(p_text, i, 1);
        SET v_code = {_CODE.format(c="v_char")};
        IF v_code = 92 THEN
            RETURN {backslash};
        END IF;
        IF v_code < 32 OR v_code > 126 THEN
            SET v_tag = IF(v_code > 127, {P}_uni_refused(v_code), NULL);
            IF v_tag = 'SL' THEN
                RETURN {chars["slash"]};
            ELSEIF v_code < 128 OR v_tag IN ({", ".join(q(t) for t in sorted(tables().what))}) THEN
                RETURN {chars["refused"]};
            ELSEIF v_tag = 'IN' THEN
                RETURN {chars["invisible"]};
            ELSEIF v_tag = 'WS' THEN
                RETURN {chars["spacelike"]};
            END IF;
        END IF;
        SET i = i + 1;
    END WHILE;
    RETURN NULL;
END"""


def _lookalike_rule() -> str:
    latin = f"{SCRIPT_NAMES.index('Latin'):02X}"
    seg = f"{P}_quote_value(p_seg, 100)"
    mark = path_rule("/memories/x\u0301.md", "' ", _literal, _concat, {
        "'x\u0301.md'": seg, "'\u0301' (U+0301 COMBINING ACUTE ACCENT)": _named("v_code", "v_char"),
        "'x'": f"IF(i = 1, 'the start of the segment', {P}_py_repr(SUBSTRING(p_seg, i - 1, 1)))"})
    mixed = path_rule("/memories/\u0440refs.md", "' ", _literal, _concat, {
        "'\u0440refs.md'": seg, "'\u0440refs'": f"{P}_py_repr(v_word)", "Cyrillic and Latin": "v_names",
        " ('\u0440' (U+0440 CYRILLIC SMALL LETTER ER) looks like 'p')": "v_example"})
    whole = path_rule("/memories/\u0430\u0441\u0435.md", "' ", _literal, _concat, {
        "'\u0430\u0441\u0435.md'": seg, "'\u0430\u0441\u0435'": f"{P}_py_repr(v_word)", "'ace'": f"{P}_py_repr(v_shown)"})
    names = ", ".join(q(n) for n in SCRIPT_NAMES)
    return f"""CREATE FUNCTION {P}_lookalike_rule(p_seg {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- dbmemory.core.paths rule 11 (dbmemory.core.lookalikes.lookalike_problem) of an NFKC segment:
    -- the rule text, NULL when the segment is legal (Unicode {UNICODE_VERSION}; data: {CONFUSABLES_VERSION})
    DECLARE v_char {TB};
    DECLARE v_code INT;
    DECLARE v_word {TB} DEFAULT '';
    DECLARE v_tags VARCHAR({MAX_RAW_PATH_CHARS}) DEFAULT '';
    DECLARE v_tag VARCHAR(12);
    DECLARE v_looks {TB};
    DECLARE v_mask INT;
    DECLARE v_n INT;
    DECLARE v_whole BOOLEAN;
    DECLARE v_names {TB};
    DECLARE v_example {TB};
    DECLARE v_shown {TB};
    DECLARE i INT DEFAULT 1;
    DECLARE k INT;
    IF CHAR_LENGTH(p_seg) = LENGTH(p_seg) THEN
        RETURN NULL;
    END IF;
    WHILE i <= CHAR_LENGTH(p_seg) DO
        SET v_char = SUBSTRING(p_seg, i, 1);
        SET v_code = {_CODE.format(c="v_char")};
        IF v_code > 127 AND {P}_uni_class(v_code) = 'M'
           AND (i = 1 OR {_CODE.format(c="SUBSTRING(p_seg, i - 1, 1)")} < 128) THEN
            RETURN {mark};
        END IF;
        SET i = i + 1;
    END WHILE;
    SET i = 1;
    WHILE i <= CHAR_LENGTH(p_seg) + 1 DO
        SET v_char = SUBSTRING(p_seg, i, 1);
        SET v_code = IF(i > CHAR_LENGTH(p_seg), 0, {_CODE.format(c="v_char")});
        IF i <= CHAR_LENGTH(p_seg) AND (v_code BETWEEN 48 AND 57 OR v_code BETWEEN 65 AND 90
           OR v_code BETWEEN 97 AND 122 OR (v_code > 127 AND {P}_uni_class(v_code) IS NOT NULL)) THEN
            SET v_word = CONCAT(v_word, v_char);
        ELSE
            IF CHAR_LENGTH(v_word) < LENGTH(v_word) THEN
                -- the scripts of the word (Common and Inherited are neutral), whether they form one
                -- writing system, its first non-Latin ASCII look-alike, its ASCII reading
                SET v_tags = '';
                SET v_mask = 7;
                SET v_n = 0;
                SET v_whole = TRUE;
                SET v_example = '';
                SET v_shown = '';
                SET k = 1;
                WHILE k <= CHAR_LENGTH(v_word) DO
                    SET v_code = {_CODE.format(c="SUBSTRING(v_word, k, 1)")};
                    SET v_tag = {P}_uni_script(v_code);
                    SET v_looks = IF(v_code > 127, {P}_uni_looks(v_code), NULL);
                    IF v_tag IS NOT NULL THEN
                        SET v_mask = v_mask & CAST(SUBSTRING(v_tag, 3, 1) AS UNSIGNED);
                        IF LOCATE(CONCAT(',', LEFT(v_tag, 2)), v_tags) = 0 THEN
                            SET v_tags = CONCAT(v_tags, ',', LEFT(v_tag, 2));
                            SET v_n = v_n + 1;
                        END IF;
                    END IF;
                    IF v_code > 127 AND (v_looks IS NULL OR LEFT(v_tag, 2) <=> '{latin}') THEN
                        SET v_whole = FALSE;
                    END IF;
                    IF v_example = '' AND v_tag IS NOT NULL AND LEFT(v_tag, 2) <> '{latin}' AND v_looks IS NOT NULL THEN
                        SET v_example = CONCAT(' (', {_named("v_code", "SUBSTRING(v_word, k, 1)")},
                                               ' looks like ', {P}_py_repr(v_looks), ')');
                    END IF;
                    SET v_shown = CONCAT(v_shown, IF(v_code < 128, SUBSTRING(v_word, k, 1), v_looks));
                    SET k = k + 1;
                END WHILE;
                IF v_n > 1 AND v_mask = 0 THEN
                    SET v_names = NULL;
                    SET k = 0;
                    WHILE k < {len(SCRIPT_NAMES)} DO
                        IF LOCATE(CONCAT(',', LPAD(HEX(k), 2, '0')), v_tags) > 0 THEN
                            SET v_names = CONCAT_WS(' and ', v_names, ELT(k + 1, {names}));
                        END IF;
                        SET k = k + 1;
                    END WHILE;
                    RETURN {mixed};
                END IF;
                IF v_whole THEN
                    RETURN {whole};
                END IF;
            END IF;
            SET v_word = '';
        END IF;
        SET i = i + 1;
    END WHILE;
    RETURN NULL;
END"""


def lookalike_helpers() -> list[tuple[str, str, str]]:
    """``(kind, name, body)`` of the functions, in creation order."""
    t = tables()
    return [
        table_function("_uni_class", t.classes, 13, "M a combining mark (Mn, Me, Mc), W a letter or digit (L*, N*)"),
        table_function("_uni_script", t.scripts, 15, "the script (an index into the names of _lookalike_rule) and its "
                       f"writing systems (bits), NULL for Common and Inherited; data: {CONFUSABLES_VERSION}"),
        table_function("_uni_separator", t.separators, 13, "S, B or P when the NFKC form holds '/', a backslash or '%'"),
        ("FUNCTION", f"{P}_uni_looks", f"""CREATE FUNCTION {P}_uni_looks(p_code INT) RETURNS {TB}
    {_F}
BEGIN
    -- dbmemory.core.lookalikes.ascii_lookalike (data: {CONFUSABLES_VERSION}), NULL when none
    DECLARE v_tag VARCHAR(12) DEFAULT {P}_range_tag(p_code, '{t.lookalikes}', 21);
    RETURN IF(v_tag IS NULL, NULL, CONVERT(UNHEX(SUBSTRING(v_tag, 2, 2 * LEFT(v_tag, 1))) USING utf8mb4));
END"""),
        ("FUNCTION", f"{P}_uni_cname", f"""CREATE FUNCTION {P}_uni_cname(p_code INT) RETURNS VARCHAR(200)
    {_F}
BEGIN
    -- ' <Unicode name>' of a mark or a non-Latin ASCII look-alike, '' without one (Unicode {UNICODE_VERSION})
    DECLARE v_names LONGTEXT DEFAULT {q(t.cnames)};
    DECLARE v_at INT DEFAULT LOCATE(CONCAT('|', LPAD(HEX(p_code), 6, '0')), v_names);
    IF v_at = 0 THEN
        RETURN '';
    END IF;
    RETURN SUBSTRING(v_names, v_at + 7, LOCATE('|', v_names, v_at + 1) - v_at - 7);
END"""),
        ("FUNCTION", f"{P}_dot_shape", f"""CREATE FUNCTION {P}_dot_shape(p_seg {TB}) RETURNS VARCHAR(1)
    {_F}
BEGIN
    -- dbmemory.core.paths._dot_skeleton of a non-ASCII segment: D when it looks like '.' or
    -- '..', C when nothing visible is left (only combining marks), else NULL
    DECLARE v_dots INT DEFAULT 0;
    DECLARE v_code INT;
    DECLARE v_tag VARCHAR(12);
    DECLARE k INT DEFAULT 1;
    WHILE k <= CHAR_LENGTH(p_seg) DO
        SET v_code = {_CODE.format(c="SUBSTRING(p_seg, k, 1)")};
        SET v_tag = IF(v_code = 46, '1', IF(v_code < 128, NULL, {P}_uni_skeleton(v_code)));
        IF v_tag IS NULL THEN
            RETURN NULL;
        END IF;
        SET v_dots = v_dots + CASE v_tag WHEN '1' THEN 1 WHEN '2' THEN 2 ELSE 0 END;
        SET k = k + 1;
    END WHILE;
    RETURN CASE WHEN v_dots IN (1, 2) THEN 'D' WHEN v_dots = 0 THEN 'C' END;
END"""),
        ("FUNCTION", f"{P}_path_char_rule", _char_rule()),
        ("FUNCTION", f"{P}_lookalike_rule", _lookalike_rule()),
    ]
