"""MySQL/MariaDB API, the MEMORY tool's text helpers for ``run_command``: Python's number and
string formatting (``f"{n:,}"``, ``repr``, :func:`dbmemory.core.paths.quote_value`,
:func:`dbmemory.tool.messages.show_text`, :func:`dbmemory.tool.render.format_size`), the JSON
values as Python's ``json.loads`` makes and shows them, and the tool's path rules
(:func:`dbmemory.core.paths.normalize_path`), for :mod:`dbmemory.sqlgen.mysql.tool`. The texts
come from :mod:`dbmemory.sqlgen.tool_text`, the one source every backend renders."""

from __future__ import annotations

from collections.abc import Callable

from dbmemory.core.paths import MAX_DECODE_ROUNDS, MAX_PATH_CHARS, MAX_RAW_PATH_CHARS, ROOT
from dbmemory.sqlgen.mysql.rules import P, q
from dbmemory.sqlgen.mysql.tool_lookalike import escape_rule, fold_rule
from dbmemory.sqlgen.mysql.tool_unicode import char_rules
from dbmemory.sqlgen.tool_text import join_pieces, path_rule, rule_of, template
from dbmemory.sqlgen.unicode_tables import UNICODE_VERSION
from dbmemory.tool import messages as m

__all__ = ["msg", "TB", "ch", "eq", "FUNCTION_OPTIONS", "BACKSLASH", "TEXT_HELPERS"]

TB = "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
"""The type of every text the tool handles: code-point comparisons, ``LOCATE`` and ``REPLACE``
case-sensitive (``=`` still pads: compare with :func:`eq`)."""


def ch(code: int) -> str:
    """One character by code point, as text (``CHAR(n)`` alone is binary)."""
    return f"CHAR({code} USING utf8mb4)"


def eq(a: str, b: str) -> str:
    """``a`` equals ``b`` code point for code point (no trailing-space padding)."""
    return f"CAST({a} AS BINARY) = CAST({b} AS BINARY)"


def _concat(parts: list[str]) -> str:
    return "CONCAT(" + ", ".join(parts) + ")" if len(parts) > 1 else (parts[0] if parts else "''")


def msg(function: Callable[..., str], *args: object, **kwargs: object) -> str:
    """A message of :mod:`dbmemory.tool.messages` as one MariaDB text expression."""
    return join_pieces(
        template(function, *args, **kwargs),
        q,
        lambda expr, grouped: f"{P}_fmt_int({expr})" if grouped else f"CAST({expr} AS CHAR)",
        _concat,
    )


def _rule(raw: str, shown_end: str, **values: str) -> str:
    return path_rule(raw, shown_end, q, _concat, values)


_CHARS = char_rules()
_RULES = {
    "empty": q(rule_of("")),
    "long_raw": _rule("/" + "a" * MAX_RAW_PATH_CHARS, " characters) ",
                      **{f"{MAX_RAW_PATH_CHARS + 1:,}": f"{P}_fmt_int(CHAR_LENGTH(p_raw))"}),
    "deep": _rule("/memories/%" + "25" * (MAX_DECODE_ROUNDS + 1) + "41", "' "),
    "utf8": _rule("/memories/%ff", "' "),
    "backslash": _rule("/memories/a\\b", "' ", **{"11": "CAST(i - 1 AS CHAR)"}),
    "outside": _rule("/other", "' "),
    "dotdot": _rule("/memories/..", "' "),
    "dot": _rule("/memories/.", "' "),
    "space": _rule("/memories/ a", "' ", **{"' a'": f"{P}_quote_value(v_seg, 100)"}),
    "long": _rule("/memories/" + "a" * MAX_PATH_CHARS, " characters) ",
                  **{f"{MAX_PATH_CHARS + 10:,}": f"{P}_fmt_int(CHAR_LENGTH(v_text))"}),
}

FUNCTION_OPTIONS = _F = "DETERMINISTIC NO SQL SQL SECURITY DEFINER"
BACKSLASH = _BS = ch(92)

_FMT_INT = f"""CREATE FUNCTION {P}_fmt_int(p_n DECIMAL(65, 0)) RETURNS VARCHAR(100)
    {_F}
    -- Python's f"{{n:,}}"
    RETURN FORMAT(p_n, 0, 'en_US')"""

_PY_REPR = f"""CREATE FUNCTION {P}_py_repr(p_text {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- Python's repr() of a str (str.isprintable() from dbmemory.sqlgen.unicode_tables)
    DECLARE v_quote VARCHAR(1) DEFAULT IF(LOCATE('''', p_text) > 0 AND LOCATE('"', p_text) = 0, '"', '''');
    DECLARE v_out {TB} DEFAULT '';
    DECLARE v_char {TB};
    DECLARE v_code INT;
    DECLARE i INT DEFAULT 1;
    DECLARE n INT DEFAULT CHAR_LENGTH(p_text);
    WHILE i <= n DO
        SET v_char = SUBSTRING(p_text, i, 1);
        SET v_code = ORD(CONVERT(v_char USING utf32));
        SET v_out = CONCAT(v_out, CASE
            WHEN v_code = 92 THEN CONCAT({_BS}, {_BS})
            WHEN {eq("v_char", "v_quote")} THEN CONCAT({_BS}, v_quote)
            WHEN v_code = 10 THEN CONCAT({_BS}, 'n')
            WHEN v_code = 13 THEN CONCAT({_BS}, 'r')
            WHEN v_code = 9 THEN CONCAT({_BS}, 't')
            WHEN v_code < 32 OR v_code = 127 THEN CONCAT({_BS}, 'x', LOWER(LPAD(HEX(v_code), 2, '0')))
            WHEN v_code > 127 AND {P}_uni_nonprintable(v_code) IS NOT NULL THEN {P}_py_escape(v_code)
            ELSE v_char END);
        SET i = i + 1;
    END WHILE;
    RETURN CONCAT(v_quote, v_out, v_quote);
END"""

_QUOTE_VALUE = f"""CREATE FUNCTION {P}_quote_value(p_text {TB}, p_max INT) RETURNS {TB}
    {_F}
    -- dbmemory.core.paths.quote_value: repr, invisible printable characters as \\uXXXX, clipped
    RETURN IF(CHAR_LENGTH(p_text) <= p_max, {P}_escape_invisible({P}_py_repr(p_text)),
              CONCAT({P}_escape_invisible({P}_py_repr(LEFT(p_text, p_max))), '... (',
                     {P}_fmt_int(CHAR_LENGTH(p_text)), ' characters)'))"""

_ESCAPE_INVISIBLE = f"""CREATE FUNCTION {P}_escape_invisible(p_text {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- dbmemory.core.paths._escape_invisible
    DECLARE v_out {TB} DEFAULT '';
    DECLARE v_char {TB};
    DECLARE v_code INT;
    DECLARE i INT DEFAULT 1;
    IF CHAR_LENGTH(p_text) = LENGTH(p_text) THEN
        RETURN p_text;
    END IF;
    WHILE i <= CHAR_LENGTH(p_text) DO
        SET v_char = SUBSTRING(p_text, i, 1);
        SET v_code = ORD(CONVERT(v_char USING utf32));
        SET v_out = CONCAT(v_out, IF(v_code > 127 AND {P}_uni_invisible(v_code) IS NOT NULL,
                                     {P}_escape_chars(v_char), v_char));
        SET i = i + 1;
    END WHILE;
    RETURN v_out;
END"""

_SHOW_TEXT = f"""CREATE FUNCTION {P}_show_text(p_text {TB}) RETURNS {TB}
    {_F}
    -- dbmemory.tool.messages.show_text
    RETURN IF(CHAR_LENGTH(p_text) <= 200, CONCAT('`', p_text, '`'),
              CONCAT('`', LEFT(p_text, 200), '`... (', {P}_fmt_int(CHAR_LENGTH(p_text)), ' characters)'))"""


_STRIP = f"""CREATE FUNCTION {P}_py_strip(p_text {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- Python's str.strip() for the ASCII whitespace (TAB..CR, the separators 28..31, space)
    DECLARE i INT DEFAULT 1;
    DECLARE j INT DEFAULT CHAR_LENGTH(p_text);
    WHILE i <= j AND (ORD(SUBSTRING(p_text, i, 1)) BETWEEN 9 AND 13 OR ORD(SUBSTRING(p_text, i, 1)) BETWEEN 28 AND 32) DO
        SET i = i + 1;
    END WHILE;
    WHILE j >= i AND (ORD(SUBSTRING(p_text, j, 1)) BETWEEN 9 AND 13 OR ORD(SUBSTRING(p_text, j, 1)) BETWEEN 28 AND 32) DO
        SET j = j - 1;
    END WHILE;
    RETURN SUBSTRING(p_text, i, j - i + 1);
END"""

_FORMAT_SIZE = f"""CREATE FUNCTION {P}_format_size(p_chars BIGINT) RETURNS VARCHAR(40)
    {_F}
BEGIN
    -- dbmemory.tool.render.format_size: base 1024, one decimal rounded half to even, K M G T
    DECLARE v_div DECIMAL(65, 0) DEFAULT 1;
    DECLARE v_tenths DECIMAL(65, 0);
    DECLARE v_rest DECIMAL(65, 0);
    DECLARE i INT DEFAULT 1;
    IF p_chars < 1024 THEN
        RETURN CAST(p_chars AS CHAR);
    END IF;
    WHILE i <= 4 DO
        SET v_div = v_div * 1024;
        SET v_tenths = FLOOR(p_chars * 10 / v_div);
        SET v_rest = p_chars * 10 - v_tenths * v_div;
        IF v_rest * 2 > v_div OR (v_rest * 2 = v_div AND MOD(v_tenths, 2) = 1) THEN
            SET v_tenths = v_tenths + 1;
        END IF;
        IF v_tenths < 10240 OR i = 4 THEN
            RETURN CONCAT(CAST(FLOOR(v_tenths / 10) AS CHAR), '.', CAST(MOD(v_tenths, 10) AS CHAR),
                          ELT(i, 'K', 'M', 'G', 'T'));
        END IF;
        SET i = i + 1;
    END WHILE;
    RETURN NULL;
END"""

_TOOL_PATH = f"""CREATE FUNCTION {P}_tool_path(p_raw {TB}, p_name VARCHAR(20)) RETURNS {TB}
    {_F}
BEGIN
    -- dbmemory.core.paths.normalize_path with the MEMORY tool's message (dbmemory.tool.args._path):
    -- the canonical path, or the error text (starting {q(m.ERROR_MARKER)}); the same rules for every
    -- character (Unicode {UNICODE_VERSION}; NFC by {P}_nfc, NFKC by {P}_nfkc)
    DECLARE v_text {TB} DEFAULT p_raw;
    DECLARE v_decoded LONGBLOB;
    DECLARE v_char {TB};
    DECLARE v_seg {TB};
    DECLARE v_shown {TB};
    DECLARE v_rule {TB};
    DECLARE v_error {TB};
    DECLARE v_code INT;
    DECLARE r INT DEFAULT 1;
    DECLARE i INT;
    DECLARE j INT;
    DECLARE n INT;
    DECLARE k INT;
    DECLARE v_tag VARCHAR(2);
    DECLARE v_folded {TB};
    IF CHAR_LENGTH(p_raw) = 0 THEN
        SET v_rule = {_RULES["empty"]};
    ELSEIF CHAR_LENGTH(p_raw) > {MAX_RAW_PATH_CHARS} THEN
        SET v_shown = {P}_quote_value(p_raw, 100);
        SET v_rule = {_RULES["long_raw"]};
    END IF;
    -- urllib.parse.unquote until the text stops changing, at most {MAX_DECODE_ROUNDS} rounds
    decode_rounds: WHILE v_rule IS NULL AND LOCATE('%', v_text) > 0 DO
        SET v_decoded = '';
        SET i = 1;
        SET n = CHAR_LENGTH(v_text);
        WHILE i <= n DO
            SET j = LOCATE('%', v_text, i);
            IF j = 0 THEN
                SET v_decoded = CONCAT(v_decoded, CAST(SUBSTRING(v_text, i) AS BINARY));
                SET i = n + 1;
            ELSE
                SET v_decoded = CONCAT(v_decoded, CAST(SUBSTRING(v_text, i, j - i) AS BINARY));
                IF SUBSTRING(v_text, j + 1, 2) REGEXP '^[0-9A-Fa-f]{{2}}$' THEN
                    SET v_decoded = CONCAT(v_decoded, UNHEX(SUBSTRING(v_text, j + 1, 2)));
                    SET i = j + 3;
                ELSE
                    SET v_decoded = CONCAT(v_decoded, CAST('%' AS BINARY));
                    SET i = j + 1;
                END IF;
            END IF;
        END WHILE;
        IF CAST(CONVERT(CONVERT(v_decoded USING utf8mb4) USING binary) AS BINARY) <> v_decoded
           OR CONVERT(v_decoded USING utf8mb4) IS NULL THEN
            SET v_shown = CONCAT({P}_quote_value(p_raw, 100), IF({eq("v_text", "p_raw")}, '',
                CONCAT(' (decoded: ', {P}_quote_value(v_text, 100), ')')));
            SET v_rule = {_RULES["utf8"]};
            LEAVE decode_rounds;
        END IF;
        IF v_decoded = CAST(v_text AS BINARY) THEN
            LEAVE decode_rounds;
        END IF;
        SET v_text = CONVERT(v_decoded USING utf8mb4);
        IF r = {MAX_DECODE_ROUNDS} THEN
            SET v_shown = {P}_quote_value(p_raw, 100);
            SET v_rule = {_RULES["deep"]};
        END IF;
        SET r = r + 1;
    END WHILE;
    IF v_rule IS NULL THEN
        SET v_text = {P}_nfc(v_text);
        SET v_shown = CONCAT({P}_quote_value(p_raw, 100), IF({eq("v_text", "p_raw")}, '',
            CONCAT(' (decoded: ', {P}_quote_value(v_text, 100), ')')));
        SET v_rule = {P}_path_char_rule(v_text);
    END IF;
    IF v_rule IS NULL AND CHAR_LENGTH(v_text) < LENGTH(v_text) THEN
        -- rule 9's look-alikes of '.' and '..', named before the fold
        SET i = 1;
        SET n = CHAR_LENGTH(v_text);
        WHILE v_rule IS NULL AND i <= n + 1 DO
            SET j = LOCATE('/', v_text, i);
            IF j = 0 THEN
                SET j = n + 1;
            END IF;
            SET v_seg = SUBSTRING(v_text, i, j - i);
            IF CHAR_LENGTH(v_seg) < LENGTH(v_seg) AND {P}_dot_shape(v_seg) <=> 'D' THEN
                SET v_rule = {_CHARS["dotlike"]};
            END IF;
            SET i = j + 1;
        END WHILE;
        -- rule 5's NFKC fold (Unicode {UNICODE_VERSION}; by {P}_nfkc): a character whose NFKC form
        -- holds '/', a backslash or '%' is refused, the folded text meets the character rules again
        SET v_folded = {P}_nfkc(v_text);
        IF v_rule IS NULL AND NOT {eq("v_folded", "v_text")} THEN
            SET i = 1;
            SET n = CHAR_LENGTH(v_text);
            WHILE v_rule IS NULL AND i <= n DO
                SET v_char = SUBSTRING(v_text, i, 1);
                SET v_code = ORD(CONVERT(v_char USING utf32));
                SET v_tag = IF(v_code > 127, {P}_uni_separator(v_code), NULL);
                IF v_tag IS NOT NULL THEN
                    SET v_rule = {fold_rule()};
                END IF;
                SET i = i + 1;
            END WHILE;
            IF v_rule IS NULL AND v_folded REGEXP '%[0-9A-Fa-f]{{2}}' THEN
                SET v_rule = {escape_rule()};
            END IF;
            IF v_rule IS NULL THEN
                SET v_text = v_folded;
                SET v_shown = CONCAT({P}_quote_value(p_raw, 100), IF({eq("v_text", "p_raw")}, '',
                    CONCAT(' (decoded: ', {P}_quote_value(v_text, 100), ')')));
                SET v_rule = {P}_path_char_rule(v_text);
            END IF;
        END IF;
    END IF;
    IF v_rule IS NULL THEN
        WHILE LOCATE('//', v_text) > 0 DO
            SET v_text = REPLACE(v_text, '//', '/');
        END WHILE;
        IF CHAR_LENGTH(v_text) > 1 AND RIGHT(v_text, 1) = '/' THEN
            SET v_text = LEFT(v_text, CHAR_LENGTH(v_text) - 1);
        END IF;
        IF NOT {eq("v_text", f"'{ROOT}'")} AND NOT {eq(f"LEFT(v_text, {len(ROOT) + 1})", f"'{ROOT}/'")} THEN
            SET v_rule = {_RULES["outside"]};
        ELSEIF NOT {eq("v_text", f"'{ROOT}'")} THEN
            SET i = {len(ROOT) + 2};
            SET n = CHAR_LENGTH(v_text);
            segments: WHILE i <= n + 1 DO
                SET j = LOCATE('/', v_text, i);
                IF j = 0 THEN
                    SET j = n + 1;
                END IF;
                SET v_seg = SUBSTRING(v_text, i, j - i);
                IF {eq("v_seg", "'..'")} THEN
                    SET v_rule = {_RULES["dotdot"]};
                ELSEIF {eq("v_seg", "'.'")} THEN
                    SET v_rule = {_RULES["dot"]};
                ELSEIF CHAR_LENGTH(v_seg) < LENGTH(v_seg) AND {P}_dot_shape(v_seg) <=> 'D' THEN
                    SET v_rule = {_CHARS["dotlike"]};
                ELSEIF CHAR_LENGTH(v_seg) < LENGTH(v_seg) AND {P}_dot_shape(v_seg) <=> 'C' THEN
                    SET v_rule = {_CHARS["combining"]};
                END IF;
                IF v_rule IS NULL AND (ORD(LEFT(v_seg, 1)) = 32 OR ORD(RIGHT(v_seg, 1)) = 32) THEN
                    SET v_rule = {_RULES["space"]};
                END IF;
                IF v_rule IS NULL THEN
                    SET v_rule = {P}_lookalike_rule(v_seg);
                END IF;
                IF v_rule IS NOT NULL THEN
                    LEAVE segments;
                END IF;
                SET i = j + 1;
            END WHILE;
        END IF;
        IF v_rule IS NULL AND CHAR_LENGTH(v_text) > {MAX_PATH_CHARS} THEN
            SET v_shown = {P}_quote_value(p_raw, 100);
            SET v_rule = {_RULES["long"]};
        END IF;
    END IF;
    IF v_rule IS NULL THEN
        RETURN v_text;
    END IF;
    SET v_error = IF(CHAR_LENGTH(p_raw) = 0, v_rule, CONCAT('path ', v_shown, ' ', v_rule));
    IF p_name <> 'path' AND LEFT(v_error, 5) = 'path ' THEN
        SET v_error = CONCAT(p_name, SUBSTRING(v_error, 5));
    END IF;
    RETURN CONCAT({q(m.ERROR_MARKER)}, v_error);
END"""


TEXT_HELPERS: list[tuple[str, str, str]] = [
    ("FUNCTION", f"{P}_fmt_int", _FMT_INT),
    ("FUNCTION", f"{P}_py_repr", _PY_REPR),
    ("FUNCTION", f"{P}_quote_value", _QUOTE_VALUE),
    ("FUNCTION", f"{P}_escape_invisible", _ESCAPE_INVISIBLE),
    ("FUNCTION", f"{P}_show_text", _SHOW_TEXT),
    ("FUNCTION", f"{P}_py_strip", _STRIP),
    ("FUNCTION", f"{P}_format_size", _FORMAT_SIZE),
    ("FUNCTION", f"{P}_tool_path", _TOOL_PATH),
]
"""``(kind, name, body)`` of the helpers, in creation order."""
