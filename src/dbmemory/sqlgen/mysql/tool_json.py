"""MySQL/MariaDB API, the MEMORY tool's JSON helpers for ``run_command``: the values Python's
``json.loads`` makes of a command's JSON text, as :mod:`dbmemory.tool.messages` shows them
(``repr``, ``_json_type``, ``_show``), read as whole numbers (:func:`dbmemory.tool.args._as_int`),
and the detail of json's error for a text it cannot read, for :mod:`dbmemory.sqlgen.mysql.tool`."""

from __future__ import annotations

from dbmemory.sqlgen.mysql.rules import P
from dbmemory.sqlgen.mysql.tool_text import BACKSLASH as _BS
from dbmemory.sqlgen.mysql.tool_text import FUNCTION_OPTIONS as _F
from dbmemory.sqlgen.mysql.tool_text import TB, ch

__all__ = ["JSON_HELPERS"]

_PY_FLOAT = f"""CREATE FUNCTION {P}_py_float(p_number VARCHAR(400)) RETURNS VARCHAR(400)
    {_F}
BEGIN
    -- repr() of the float Python's json.loads makes of the JSON number p_number: the shortest
    -- digits that read back to the same double, fixed notation when the decimal exponent is
    -- from -4 to 15, else d.ddde+XX
    DECLARE v_text VARCHAR(400) DEFAULT p_number;
    DECLARE v_sign VARCHAR(1) DEFAULT '';
    DECLARE v_mant VARCHAR(400);
    DECLARE v_exp INT DEFAULT 0;
    DECLARE v_digits VARCHAR(400);
    DECLARE v_point INT;
    DECLARE v_at INT;
    DECLARE v_pass INT DEFAULT 1;
    IF LEFT(TRIM(p_number), 1) = '-' THEN
        SET v_sign = '-';  -- the number's own sign: MariaDB writes -0.0 as 0
    END IF;
    -- pass 1 reads the JSON number itself (past the double range Python reads inf), pass 2 the
    -- shortest digits of its double
    digits: LOOP
        SET v_text = TRIM(LEADING '-' FROM TRIM(v_text));
        SET v_at = LOCATE('e', LOWER(v_text));
        IF v_at > 0 THEN
            SET v_mant = LEFT(v_text, v_at - 1);
            SET v_exp = CAST(SUBSTRING(v_text, v_at + 1) AS SIGNED);
        ELSE
            SET v_mant = v_text;
        END IF;
        SET v_point = LOCATE('.', v_mant);
        IF v_point = 0 THEN
            SET v_point = CHAR_LENGTH(v_mant) + 1;
        END IF;
        SET v_digits = REPLACE(v_mant, '.', '');
        -- value = 0.<v_digits> * 10^(v_point - 1 + v_exp), without leading or trailing zeros
        SET v_exp = v_exp + v_point - 1;
        WHILE LEFT(v_digits, 1) = '0' AND CHAR_LENGTH(v_digits) > 1 DO
            SET v_digits = SUBSTRING(v_digits, 2);
            SET v_exp = v_exp - 1;
        END WHILE;
        SET v_digits = TRIM(TRAILING '0' FROM v_digits);
        IF v_pass = 2 THEN
            LEAVE digits;
        END IF;
        IF v_digits <> '' AND v_exp > 309 THEN
            RETURN CONCAT(v_sign, 'inf');
        END IF;
        SET v_text = CAST(CAST(p_number AS DOUBLE) AS CHAR);
        SET v_exp = 0;
        SET v_pass = 2;
    END LOOP digits;
    IF v_digits = '' THEN
        RETURN CONCAT(v_sign, '0.0');
    END IF;
    IF v_exp > 16 OR v_exp < -3 THEN
        RETURN CONCAT(v_sign, LEFT(v_digits, 1),
            IF(CHAR_LENGTH(v_digits) > 1, CONCAT('.', SUBSTRING(v_digits, 2)), ''),
            'e', IF(v_exp - 1 < 0, '-', '+'), IF(ABS(v_exp - 1) < 10, '0', ''), ABS(v_exp - 1));
    END IF;
    IF v_exp <= 0 THEN
        RETURN CONCAT(v_sign, '0.', REPEAT('0', -v_exp), v_digits);
    END IF;
    IF CHAR_LENGTH(v_digits) <= v_exp THEN
        RETURN CONCAT(v_sign, RPAD(v_digits, v_exp, '0'), '.0');
    END IF;
    RETURN CONCAT(v_sign, LEFT(v_digits, v_exp), '.', SUBSTRING(v_digits, v_exp + 1));
END"""

_PY_JSON = f"""CREATE FUNCTION {P}_py_json(p_value {TB}, p_max INT) RETURNS {TB}
    {_F}
BEGIN
    -- repr() of the value Python's json.loads makes of the JSON text p_value, token by token
    -- (no recursion); stops once the text is longer than p_max characters
    DECLARE v_out {TB} DEFAULT '';
    DECLARE v_char VARCHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_token VARCHAR(400);
    DECLARE i INT DEFAULT 1;
    DECLARE j INT;
    DECLARE n INT DEFAULT CHAR_LENGTH(p_value);
    WHILE i <= n AND CHAR_LENGTH(v_out) <= p_max DO
        SET v_char = SUBSTRING(p_value, i, 1);
        IF v_char = '"' THEN
            SET j = i + 1;
            WHILE j <= n AND SUBSTRING(p_value, j, 1) <> '"' DO
                SET j = j + IF(ORD(SUBSTRING(p_value, j, 1)) = 92, 2, 1);
            END WHILE;
            SET v_out = CONCAT(v_out, {P}_py_repr(JSON_UNQUOTE(SUBSTRING(p_value, i, j - i + 1))));
            SET i = j + 1;
        ELSEIF ORD(v_char) IN (32, 9, 10, 13) THEN
            SET i = i + 1;
        ELSEIF v_char = ':' THEN
            SET v_out = CONCAT(v_out, ': ');
            SET i = i + 1;
        ELSEIF v_char = ',' THEN
            SET v_out = CONCAT(v_out, ', ');
            SET i = i + 1;
        ELSEIF v_char IN ('[', ']', '{{', '}}') THEN
            SET v_out = CONCAT(v_out, v_char);
            SET i = i + 1;
        ELSEIF v_char = 't' THEN
            SET v_out = CONCAT(v_out, 'True');
            SET i = i + 4;
        ELSEIF v_char = 'f' THEN
            SET v_out = CONCAT(v_out, 'False');
            SET i = i + 5;
        ELSEIF v_char = 'n' THEN
            SET v_out = CONCAT(v_out, 'None');
            SET i = i + 4;
        ELSE
            SET j = i;
            WHILE j <= n AND LOCATE(SUBSTRING(p_value, j, 1), '+-.eE0123456789') > 0 DO
                SET j = j + 1;
            END WHILE;
            SET v_token = SUBSTRING(p_value, i, j - i);
            SET v_out = CONCAT(v_out, IF(v_token REGEXP '^-?[0-9]+$',
                CAST(CAST(v_token AS DECIMAL(65, 0)) AS CHAR), {P}_py_float(v_token)));
            SET i = j;
        END IF;
    END WHILE;
    RETURN v_out;
END"""

_JSON_TYPE = f"""CREATE FUNCTION {P}_json_type(p_value {TB}) RETURNS VARCHAR(10)
    {_F}
    -- dbmemory.tool.messages._json_type of the value json.loads makes
    RETURN CASE JSON_TYPE(p_value) WHEN 'STRING' THEN 'string' WHEN 'INTEGER' THEN 'number'
           WHEN 'DOUBLE' THEN 'number' WHEN 'BOOLEAN' THEN 'boolean' WHEN 'NULL' THEN 'null'
           WHEN 'ARRAY' THEN 'array' ELSE 'object' END"""

_SHOW = f"""CREATE FUNCTION {P}_show(p_value {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- dbmemory.tool.messages._show of the JSON value: strings quoted, lists cut at 10 items, 100 characters
    DECLARE v_text {TB};
    DECLARE i INT DEFAULT 0;
    IF JSON_TYPE(p_value) = 'STRING' THEN
        RETURN {P}_quote_value(JSON_UNQUOTE(p_value), 100);
    END IF;
    IF JSON_TYPE(p_value) = 'ARRAY' AND JSON_LENGTH(p_value) > 10 THEN
        SET v_text = '[';
        WHILE i < 10 AND CHAR_LENGTH(v_text) <= 101 DO
            SET v_text = CONCAT(v_text, IF(i > 0, ', ', ''),
                                {P}_py_json(JSON_EXTRACT(p_value, CONCAT('$[', i, ']')), 101));
            SET i = i + 1;
        END WHILE;
        SET v_text = CONCAT(v_text, ', ''...'']');
    ELSE
        SET v_text = {P}_py_json(p_value, 101);
    END IF;
    IF CHAR_LENGTH(v_text) > 100 THEN
        SET v_text = CONCAT(LEFT(v_text, 100), '...');
    END IF;
    RETURN v_text;
END"""

_AS_INT = f"""CREATE FUNCTION {P}_as_int(p_value {TB}) RETURNS DECIMAL(65, 0)
    {_F}
BEGIN
    -- dbmemory.tool.args._as_int: an int, an integral float or an ASCII digit string; never a boolean
    DECLARE v_text {TB};
    DECLARE v_float DOUBLE;
    IF p_value IS NULL THEN
        RETURN NULL;
    END IF;
    IF JSON_TYPE(p_value) IN ('INTEGER', 'DOUBLE') AND TRIM(p_value) REGEXP '^-?[0-9]{{1,65}}$' THEN
        RETURN CAST(TRIM(p_value) AS DECIMAL(65, 0));
    END IF;
    IF JSON_TYPE(p_value) IN ('INTEGER', 'DOUBLE') THEN
        IF {P}_py_float(TRIM(p_value)) IN ('inf', '-inf') THEN
            RETURN NULL;
        END IF;
        SET v_float = CAST(TRIM(p_value) AS DOUBLE);
        -- an integral float of 65 digits or more does not fit: read as no whole number
        RETURN IF(v_float = FLOOR(v_float) AND ABS(v_float) < 1e65, CAST(v_float AS DECIMAL(65, 0)), NULL);
    END IF;
    IF JSON_TYPE(p_value) = 'STRING' THEN
        SET v_text = JSON_UNQUOTE(p_value);
        IF v_text REGEXP '^[ \\t\\r\\n]*[+-]?[0-9]{{1,18}}[ \\t\\r\\n]*$' THEN
            RETURN CAST(TRIM(REPLACE(REPLACE(REPLACE(v_text, CHAR(9), ' '), CHAR(10), ' '), CHAR(13), ' ')) AS DECIMAL(65, 0));
        END IF;
    END IF;
    RETURN NULL;
END"""

_JSON_ERROR = f"""CREATE FUNCTION {P}_json_error(p_text {TB}) RETURNS {TB}
    {_F}
BEGIN
    -- the detail of the error Python's json.loads reports for p_text ('<msg> at line L column C',
    -- as dbmemory.tool.args._load_json writes it): the C scanner's checks in its order, without
    -- recursion (a stack of the open containers); NULL when Python reads the text
    DECLARE n BIGINT DEFAULT CHAR_LENGTH(p_text);
    DECLARE i BIGINT DEFAULT 1;
    DECLARE j BIGINT;
    DECLARE v_code INT;
    DECLARE v_stack VARCHAR(10000) DEFAULT '';
    DECLARE v_state VARCHAR(5) DEFAULT 'value';
    DECLARE v_msg VARCHAR(100);
    DECLARE v_at BIGINT;
    DECLARE v_token {TB};
    scan: LOOP
        -- skip whitespace (' ', TAB, LF, CR)
        WHILE i <= n AND ORD(SUBSTRING(p_text, i, 1)) IN (32, 9, 10, 13) DO
            SET i = i + 1;
        END WHILE;
        IF v_state = 'key' THEN
            IF i > n OR SUBSTRING(p_text, i, 1) <> '"' THEN
                SET v_msg = 'Expecting property name enclosed in double quotes';
                SET v_at = i;
                LEAVE scan;
            END IF;
        END IF;
        IF v_state IN ('value', 'key') THEN
            IF i > n THEN
                SET v_msg = 'Expecting value';
                SET v_at = i;
                LEAVE scan;
            END IF;
            SET v_code = ORD(SUBSTRING(p_text, i, 1));
            IF v_code = 34 THEN
                SET j = i + 1;
                string_chars: LOOP
                    IF j > n THEN
                        SET v_msg = 'Unterminated string starting at';
                        SET v_at = i;
                        LEAVE scan;
                    END IF;
                    SET v_code = ORD(SUBSTRING(p_text, j, 1));
                    IF v_code = 34 THEN
                        LEAVE string_chars;
                    END IF;
                    IF v_code < 32 THEN
                        SET v_msg = 'Invalid control character at';
                        SET v_at = j;
                        LEAVE scan;
                    END IF;
                    IF v_code = 92 THEN
                        IF j + 1 > n THEN
                            SET v_msg = 'Unterminated string starting at';
                            SET v_at = i;
                            LEAVE scan;
                        END IF;
                        IF SUBSTRING(p_text, j + 1, 1) = 'u' THEN
                            IF NOT SUBSTRING(p_text, j + 2, 4) REGEXP '^[0-9A-Fa-f]{{4}}$' THEN
                                SET v_msg = 'Invalid \\\\uXXXX escape';
                                SET v_at = j + 1;
                                LEAVE scan;
                            END IF;
                            SET j = j + 6;
                            ITERATE string_chars;
                        END IF;
                        IF LOCATE(SUBSTRING(p_text, j + 1, 1), CONCAT('"/bfnrt', {_BS})) = 0 THEN
                            SET v_msg = 'Invalid \\\\escape';
                            SET v_at = j;
                            LEAVE scan;
                        END IF;
                        SET j = j + 2;
                        ITERATE string_chars;
                    END IF;
                    SET j = j + 1;
                END LOOP;
                SET i = j + 1;
                IF v_state = 'key' THEN
                    WHILE i <= n AND ORD(SUBSTRING(p_text, i, 1)) IN (32, 9, 10, 13) DO
                        SET i = i + 1;
                    END WHILE;
                    IF i > n OR SUBSTRING(p_text, i, 1) <> ':' THEN
                        SET v_msg = 'Expecting '':'' delimiter';
                        SET v_at = i;
                        LEAVE scan;
                    END IF;
                    SET i = i + 1;
                    SET v_state = 'value';
                    ITERATE scan;
                END IF;
                SET v_state = 'after';
            ELSEIF v_code = 123 THEN
                SET v_stack = CONCAT(v_stack, 'o');
                SET i = i + 1;
                WHILE i <= n AND ORD(SUBSTRING(p_text, i, 1)) IN (32, 9, 10, 13) DO
                    SET i = i + 1;
                END WHILE;
                IF i <= n AND SUBSTRING(p_text, i, 1) = '}}' THEN
                    SET v_stack = LEFT(v_stack, CHAR_LENGTH(v_stack) - 1);
                    SET i = i + 1;
                    SET v_state = 'after';
                ELSE
                    SET v_state = 'key';
                END IF;
            ELSEIF v_code = 91 THEN
                SET v_stack = CONCAT(v_stack, 'a');
                SET i = i + 1;
                WHILE i <= n AND ORD(SUBSTRING(p_text, i, 1)) IN (32, 9, 10, 13) DO
                    SET i = i + 1;
                END WHILE;
                IF i <= n AND SUBSTRING(p_text, i, 1) = ']' THEN
                    SET v_stack = LEFT(v_stack, CHAR_LENGTH(v_stack) - 1);
                    SET i = i + 1;
                    SET v_state = 'after';
                END IF;
            ELSE
                SET v_token = SUBSTRING(p_text, i, 400);
                SET v_token = CASE
                    WHEN CAST(LEFT(v_token, 4) AS BINARY) IN ('null', 'true') THEN LEFT(v_token, 4)
                    WHEN CAST(LEFT(v_token, 5) AS BINARY) = 'false' THEN 'false'
                    WHEN CAST(LEFT(v_token, 3) AS BINARY) = 'NaN' THEN 'NaN'
                    WHEN CAST(LEFT(v_token, 8) AS BINARY) = 'Infinity' THEN 'Infinity'
                    WHEN CAST(LEFT(v_token, 9) AS BINARY) = '-Infinity' THEN '-Infinity'
                    ELSE REGEXP_SUBSTR(v_token, '^-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?') END;
                IF v_token IS NULL OR v_token = '' THEN
                    SET v_msg = 'Expecting value';
                    SET v_at = i;
                    LEAVE scan;
                END IF;
                SET i = i + CHAR_LENGTH(v_token);
                SET v_state = 'after';
            END IF;
        ELSE
            -- a value ended: close the containers it ends, or take the next item
            IF v_stack = '' THEN
                IF i <= n THEN
                    SET v_msg = 'Extra data';
                    SET v_at = i;
                    LEAVE scan;
                END IF;
                RETURN NULL;
            END IF;
            IF i <= n AND SUBSTRING(p_text, i, 1) = ',' THEN
                SET i = i + 1;
                SET v_state = IF(RIGHT(v_stack, 1) = 'o', 'key', 'value');
            ELSEIF i <= n AND SUBSTRING(p_text, i, 1) = IF(RIGHT(v_stack, 1) = 'o', '}}', ']') THEN
                SET v_stack = LEFT(v_stack, CHAR_LENGTH(v_stack) - 1);
                SET i = i + 1;
            ELSE
                SET v_msg = 'Expecting '','' delimiter';
                SET v_at = i;
                LEAVE scan;
            END IF;
        END IF;
    END LOOP;
    -- Python's position is 0-based: line = LFs before it + 1, column = characters since the last LF
    SET v_at = v_at - 1;
    SET v_token = LEFT(p_text, v_at);
    RETURN CONCAT(v_msg, ' at line ', CHAR_LENGTH(v_token) - CHAR_LENGTH(REPLACE(v_token, {ch(10)}, '')) + 1,
                  ' column ', v_at - IF(LOCATE({ch(10)}, v_token) = 0, -1,
                      CHAR_LENGTH(v_token) - LOCATE({ch(10)}, REVERSE(v_token))));
END"""

JSON_HELPERS: list[tuple[str, str, str]] = [
    ("FUNCTION", f"{P}_py_float", _PY_FLOAT),
    ("FUNCTION", f"{P}_py_json", _PY_JSON),
    ("FUNCTION", f"{P}_json_type", _JSON_TYPE),
    ("FUNCTION", f"{P}_show", _SHOW),
    ("FUNCTION", f"{P}_as_int", _AS_INT),
    ("FUNCTION", f"{P}_json_error", _JSON_ERROR),
]
"""``(kind, name, body)`` of the JSON helpers, in creation order."""
