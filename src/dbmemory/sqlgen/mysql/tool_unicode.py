"""MySQL/MariaDB API, the MEMORY tool's Unicode rules for ``run_command``: Python's ``repr`` and
:func:`dbmemory.core.paths.quote_value` of any character, and :func:`normalize_path`'s
per-character and per-segment refusals of non-ASCII paths, from the tables of
:mod:`dbmemory.sqlgen.unicode_tables` (the same tables as PostgreSQL's,
:mod:`dbmemory.sqlgen.postgresql.tool_unicode`), for :mod:`dbmemory.sqlgen.mysql.tool_text`."""

from __future__ import annotations

from dbmemory.sqlgen.mysql.rules import P, q
from dbmemory.sqlgen.tool_text import path_rule
from dbmemory.sqlgen.unicode_tables import (
    CHARACTER_SAMPLES,
    RESERVED_SUFFIX,
    UNICODE_VERSION,
    tables,
)

__all__ = ["unicode_helpers", "char_rules", "HEX_CODE", "TB", "table_function"]

TB = "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
_F = "DETERMINISTIC NO SQL SQL SECURITY DEFINER"
_BS = "CHAR(92 USING utf8mb4)"


def _concat(parts: list[str]) -> str:
    return "CONCAT(" + ", ".join(parts) + ")" if len(parts) > 1 else parts[0]


HEX_CODE = "IF(CHAR_LENGTH(HEX({c})) < 4, LPAD(HEX({c}), 4, '0'), HEX({c}))"
"""``f"{{code:04X}}"`` of code point ``{c}``."""


def char_rules() -> dict[str, str]:
    """The rule texts (after the shown path) of the per-character and per-segment refusals as
    MariaDB expressions of ``v_char``, ``v_code``, ``i`` (1-based position), ``v_tag`` and
    ``v_seg``, read from :func:`normalize_path`'s messages for sample characters."""
    what = tables().what
    what_sql = ("CASE WHEN v_code < 128 THEN 'a control character' ELSE CASE v_tag "
                + " ".join(f"WHEN '{tag}' THEN {q(words)}" for tag, words in sorted(what.items()))
                + " END END")
    hex_sql = "CONCAT('U+', " + HEX_CODE.format(c="v_code") + ")"
    pos = "CAST(i - 1 AS CHAR)"
    name = f"{P}_uni_name(v_code)"
    samples = CHARACTER_SAMPLES
    return {
        "refused": path_rule("/memories/a\tb", "' ", q, _concat, {
            "a control character": what_sql, "'\\t'": f"{P}_py_repr(v_char)", "U+0009": hex_sql, "11": pos}),
        "slash": path_rule(f"/memories/a{samples['SL']}b", "' ", q, _concat, {
            repr(samples["SL"]): f"{P}_py_repr(v_char)", f"U+{ord(samples['SL']):04X}": hex_sql, "11": pos}),
        "invisible": path_rule(f"/memories/a{samples['IN']}b", "' ", q, _concat, {
            "'\\ufe0f'": f"{P}_quote_value(v_char, 100)",
            "U+FE0F VARIATION SELECTOR-16": f"CONCAT({hex_sql}, {name})", "11": pos}),
        "spacelike": path_rule(f"/memories/a{samples['WS']}b", "' ", q, _concat, {
            "'\\u3000'": f"{P}_quote_value(v_char, 100)",
            "U+3000 IDEOGRAPHIC SPACE": f"CONCAT({hex_sql}, {name})", "11": pos}),
        "dotlike": path_rule("/memories/\u3002\u3002", "' ", q, _concat, {
            "'\u3002\u3002'": f"{P}_quote_value(v_seg, 100)"}),
        "combining": path_rule("/memories/\u0301\u0301", "' ", q, _concat, {
            "\\u0301\\u0301": f"{P}_escape_chars(LEFT(v_seg, 100))"}),
    }


def table_function(name: str, table: str, width: int, comment: str) -> tuple[str, str, str]:
    """A function of code point ``p_code`` that returns its tag in ``table`` (NULL when none)."""
    return ("FUNCTION", f"{P}{name}", f"""CREATE FUNCTION {P}{name}(p_code INT) RETURNS VARCHAR(12)
    {_F}
    -- {comment} (Unicode {UNICODE_VERSION})
    RETURN {P}_range_tag(p_code, '{table}', {width})""")



def _nfc() -> list[tuple[str, str, str]]:
    t = tables()
    return [
        table_function("_uni_nfc_check", t.nfc_check, 12, "'' when NFC may change the character or join it to the one before"),
        table_function("_uni_nfkc_check", t.nfkc_check, 12, "'' when NFKC may change the character or join it to the one before"),
        table_function("_uni_ccc", t.ccc, 15, "the canonical combining class (three digits), NULL for 0"),
        ("FUNCTION", f"{P}_uni_compose", f"""CREATE FUNCTION {P}_uni_compose(p_first INT, p_second INT) RETURNS INT
    {_F}
BEGIN
    -- the primary composite of two code points (Unicode {UNICODE_VERSION}; Hangul by rule), NULL when none
    DECLARE v_table LONGTEXT DEFAULT '{t.compositions}';
    DECLARE v_at INT;
    IF p_first BETWEEN 4352 AND 4370 AND p_second BETWEEN 4449 AND 4469 THEN
        RETURN 44032 + ((p_first - 4352) * 21 + (p_second - 4449)) * 28;
    END IF;
    IF p_first BETWEEN 44032 AND 55203 AND MOD(p_first - 44032, 28) = 0 AND p_second BETWEEN 4520 AND 4546 THEN
        RETURN p_first + p_second - 4519;
    END IF;
    SET v_at = LOCATE(CONCAT('|', LPAD(HEX(p_first), 6, '0'), LPAD(HEX(p_second), 6, '0'), '='), v_table);
    RETURN IF(v_at = 0, NULL, CONV(SUBSTRING(v_table, v_at + 14, 6), 16, 10));
END"""),
        _normalizer("_nfc", "_uni_nfc_check", t.decompositions, "NFC", "canonical"),
        _normalizer("_nfkc", "_uni_nfkc_check", t.kdecompositions, "NFKC", "compatibility"),
    ]


def _normalizer(name: str, check: str, decompositions: str, form: str, kind: str) -> tuple[str, str, str]:
    """``unicodedata.normalize(form, ...)`` as a function: NFC with the canonical decompositions,
    NFKC with the compatibility ones (composition is canonical in both)."""
    at = "SUBSTRING(v_seq, 6 * ({k}) - 5, 6)"
    return ("FUNCTION", f"{P}{name}", f"""CREATE FUNCTION {P}{name}(p_text {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- unicodedata.normalize('{form}', p_text) (Unicode {UNICODE_VERSION}): full {kind} decomposition,
    -- canonical ordering, canonical composition (UAX #15); the text itself when no character can change
    DECLARE v_seq LONGTEXT DEFAULT '';
    DECLARE v_decomp LONGTEXT DEFAULT '{decompositions}';
    DECLARE v_out {TB} DEFAULT '';
    DECLARE v_code INT;
    DECLARE v_at INT;
    DECLARE v_s INT;
    DECLARE v_n INT;
    DECLARE v_swapped BOOLEAN DEFAULT TRUE;
    DECLARE v_a INT;
    DECLARE v_b INT;
    DECLARE v_starter INT;
    DECLARE v_last INT;
    DECLARE v_class INT;
    DECLARE v_comp INT;
    DECLARE v_put INT;
    DECLARE i INT DEFAULT 1;
    DECLARE v_change BOOLEAN DEFAULT FALSE;
    IF CHAR_LENGTH(p_text) = LENGTH(p_text) THEN
        RETURN p_text;
    END IF;
    WHILE i <= CHAR_LENGTH(p_text) AND NOT v_change DO
        SET v_code = ORD(CONVERT(SUBSTRING(p_text, i, 1) USING utf32));
        SET v_change = v_code BETWEEN 44032 AND 55203 OR (v_code > 127 AND {P}{check}(v_code) IS NOT NULL);
        SET i = i + 1;
    END WHILE;
    IF NOT v_change THEN
        RETURN p_text;
    END IF;
    -- decompose: six hex digits a code point
    SET i = 1;
    WHILE i <= CHAR_LENGTH(p_text) DO
        SET v_code = ORD(CONVERT(SUBSTRING(p_text, i, 1) USING utf32));
        IF v_code BETWEEN 44032 AND 55203 THEN
            SET v_s = v_code - 44032;
            SET v_seq = CONCAT(v_seq, LPAD(HEX(4352 + v_s DIV 588), 6, '0'),
                               LPAD(HEX(4449 + (v_s MOD 588) DIV 28), 6, '0'),
                               IF(v_s MOD 28 = 0, '', LPAD(HEX(4519 + v_s MOD 28), 6, '0')));
        ELSE
            SET v_at = IF(v_code > 127, LOCATE(CONCAT('|', LPAD(HEX(v_code), 6, '0'), '='), v_decomp), 0);
            SET v_seq = CONCAT(v_seq, IF(v_at = 0, LPAD(HEX(v_code), 6, '0'),
                SUBSTRING(v_decomp, v_at + 8, LOCATE('|', v_decomp, v_at + 1) - v_at - 8)));
        END IF;
        SET i = i + 1;
    END WHILE;
    SET v_n = LENGTH(v_seq) DIV 6;
    -- canonical ordering: a stable sort of each run of non-starters by combining class
    WHILE v_swapped DO
        SET v_swapped = FALSE;
        SET i = 1;
        WHILE i < v_n DO
            SET v_a = COALESCE({P}_uni_ccc(CONV({at.format(k="i")}, 16, 10)), 0);
            SET v_b = COALESCE({P}_uni_ccc(CONV({at.format(k="i + 1")}, 16, 10)), 0);
            IF v_b <> 0 AND v_a > v_b THEN
                SET v_seq = CONCAT(LEFT(v_seq, 6 * i - 6), {at.format(k="i + 1")}, {at.format(k="i")},
                                   SUBSTRING(v_seq, 6 * i + 7));
                SET v_swapped = TRUE;
            END IF;
            SET i = i + 1;
        END WHILE;
    END WHILE;
    -- canonical composition (UAX #15's reference algorithm)
    SET v_starter = 1;
    SET v_last = COALESCE({P}_uni_ccc(CONV({at.format(k="1")}, 16, 10)), 0);
    IF v_last <> 0 THEN
        SET v_last = 256;
    END IF;
    SET v_put = 2;
    SET i = 2;
    WHILE i <= v_n DO
        SET v_code = CONV({at.format(k="i")}, 16, 10);
        SET v_class = COALESCE({P}_uni_ccc(v_code), 0);
        SET v_comp = {P}_uni_compose(CONV({at.format(k="v_starter")}, 16, 10), v_code);
        IF v_comp IS NOT NULL AND (v_last < v_class OR v_last = 0) THEN
            SET v_seq = CONCAT(LEFT(v_seq, 6 * v_starter - 6), LPAD(HEX(v_comp), 6, '0'), SUBSTRING(v_seq, 6 * v_starter + 1));
        ELSE
            IF v_class = 0 THEN
                SET v_starter = v_put;
            END IF;
            SET v_last = v_class;
            SET v_seq = CONCAT(LEFT(v_seq, 6 * v_put - 6), LPAD(HEX(v_code), 6, '0'), SUBSTRING(v_seq, 6 * v_put + 1));
            SET v_put = v_put + 1;
        END IF;
        SET i = i + 1;
    END WHILE;
    SET i = 1;
    WHILE i < v_put DO
        SET v_out = CONCAT(v_out, CONVERT(CHAR(CONV({at.format(k="i")}, 16, 10) USING utf32) USING utf8mb4));
        SET i = i + 1;
    END WHILE;
    RETURN v_out;
END""")


def unicode_helpers() -> list[tuple[str, str, str]]:
    """``(kind, name, body)`` of the functions, in creation order."""
    t = tables()
    return [
        ("FUNCTION", f"{P}_range_tag", f"""CREATE FUNCTION {P}_range_tag(p_code INT, p_table LONGTEXT, p_width INT)
    RETURNS VARCHAR(12)
    {_F}
BEGIN
    -- the tag of the range of p_table (entries SSSSSSEEEEEE<tag>, p_width characters, sorted)
    -- that holds code point p_code, NULL when none does (dbmemory.sqlgen.unicode_tables)
    DECLARE v_lo INT DEFAULT 0;
    DECLARE v_hi INT DEFAULT LENGTH(p_table) DIV p_width - 1;
    DECLARE v_mid INT;
    DECLARE v_entry VARCHAR(30);
    WHILE v_lo <= v_hi DO
        SET v_mid = (v_lo + v_hi) DIV 2;
        SET v_entry = SUBSTRING(p_table, v_mid * p_width + 1, p_width);
        IF p_code < CONV(SUBSTRING(v_entry, 1, 6), 16, 10) THEN
            SET v_hi = v_mid - 1;
        ELSEIF p_code > CONV(SUBSTRING(v_entry, 7, 6), 16, 10) THEN
            SET v_lo = v_mid + 1;
        ELSE
            RETURN SUBSTRING(v_entry, 13);
        END IF;
    END WHILE;
    RETURN NULL;
END"""),
        table_function("_uni_nonprintable", t.nonprintable, 12, "'' when not str.isprintable()"),
        table_function("_uni_invisible", t.invisible, 12, "'' when printable but escaped by quote_value"),
        table_function("_uni_refused", t.refused, 14, "normalize_path's per-character refusal: SL, IN, WS or the category"),
        table_function("_uni_skeleton", t.skeleton, 13, "what the character leaves of a dot skeleton: M, 1, 2"),
        ("FUNCTION", f"{P}_uni_name", f"""CREATE FUNCTION {P}_uni_name(p_code INT) RETURNS VARCHAR(200)
    {_F}
BEGIN
    -- ' <Unicode name>' of an invisible or space-like character, else {RESERVED_SUFFIX!r}
    DECLARE v_names LONGTEXT DEFAULT {q(t.names)};
    DECLARE v_at INT DEFAULT LOCATE(CONCAT('|', LPAD(HEX(p_code), 6, '0')), v_names);
    IF v_at = 0 THEN
        RETURN {q(RESERVED_SUFFIX)};
    END IF;
    RETURN SUBSTRING(v_names, v_at + 7, LOCATE('|', v_names, v_at + 1) - v_at - 7);
END"""),
        ("FUNCTION", f"{P}_escape_chars", f"""CREATE FUNCTION {P}_escape_chars(p_text {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- dbmemory.core.paths._escape_char of every character
    DECLARE v_out {TB} DEFAULT '';
    DECLARE v_code INT;
    DECLARE i INT DEFAULT 1;
    WHILE i <= CHAR_LENGTH(p_text) DO
        SET v_code = ORD(CONVERT(SUBSTRING(p_text, i, 1) USING utf32));
        SET v_out = CONCAT(v_out, {_BS}, IF(v_code < 65536, CONCAT('u', LOWER(LPAD(HEX(v_code), 4, '0'))),
                                             CONCAT('U', LOWER(LPAD(HEX(v_code), 8, '0')))));
        SET i = i + 1;
    END WHILE;
    RETURN v_out;
END"""),
        ("FUNCTION", f"{P}_py_escape", f"""CREATE FUNCTION {P}_py_escape(p_code INT) RETURNS VARCHAR(10)
    {_F}
    -- repr()'s escape of a character it does not print
    RETURN CONCAT({_BS}, CASE WHEN p_code < 256 THEN CONCAT('x', LOWER(LPAD(HEX(p_code), 2, '0')))
                               WHEN p_code < 65536 THEN CONCAT('u', LOWER(LPAD(HEX(p_code), 4, '0')))
                               ELSE CONCAT('U', LOWER(LPAD(HEX(p_code), 8, '0'))) END)"""),
        *_nfc(),
    ]
