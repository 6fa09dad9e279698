"""PostgreSQL API, the MEMORY tool's JSON text helpers for ``run_command``: ``repr`` of the
float Python's ``json.loads`` makes of a JSON number, the detail of json's error for a text it
cannot read, and ``run_command(store_id, command text, actor)`` for a command that arrives as
text (it may not be JSON at all, as a model's arguments may not be), for
:mod:`dbmemory.sqlgen.postgresql.tool`."""

from __future__ import annotations

from dbmemory.sqlgen.postgresql.rules import S, T, q
from dbmemory.sqlgen.postgresql.tool_text import msg
from dbmemory.sqlgen.tool_text import Text
from dbmemory.tool import messages as m

__all__ = ["JSON_HELPERS", "RUN_TEXT", "NUL_REFUSED"]

E = q(m.ERROR_MARKER)

NUL_REFUSED = (
    "the command contains a NUL character (\\u0000), which PostgreSQL cannot hold in text: "
    "remove it (no memory file may hold one)"
)
"""The one answer of the PostgreSQL ``run_command`` that is not the MEMORY tool's: a command
with a JSON ``\\u0000`` escape anywhere (Python reads it and names the parameter; PostgreSQL's
``text`` has no NUL, so the command cannot be read at all)."""
_WS = "(32, 9, 10, 13)"

JSON_HELPERS = f"""CREATE OR REPLACE FUNCTION {S}._py_float(p_number text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- repr() of the float Python's json.loads makes of the JSON number p_number: the shortest digits
-- that read back to the same double (float8out), fixed notation for a decimal exponent from -4
-- to 15, else d.ddde+XX
DECLARE
    v_text text;
    v_sign text := '';
    v_mant text;
    v_exp integer := 0;
    v_digits text;
    v_point integer;
BEGIN
    BEGIN
        v_text := p_number::double precision::text;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        -- past the double range: Python reads inf, or 0.0 for an exponent far below it
        v_text := CASE WHEN p_number ~ '[eE]-' THEN '0' ELSE 'Infinity' END;
        IF left(ltrim(p_number), 1) = '-' THEN
            v_text := '-' || v_text;
        END IF;
    END;
    IF v_text IN ('Infinity', '-Infinity', 'NaN') THEN
        RETURN CASE v_text WHEN 'Infinity' THEN 'inf' WHEN '-Infinity' THEN '-inf' ELSE 'nan' END;
    END IF;
    IF left(v_text, 1) = '-' THEN
        v_sign := '-';
        v_text := substr(v_text, 2);
    END IF;
    IF strpos(v_text, 'e') > 0 THEN
        v_mant := split_part(v_text, 'e', 1);
        v_exp := split_part(v_text, 'e', 2)::integer;
    ELSE
        v_mant := v_text;
    END IF;
    v_point := strpos(v_mant, '.');
    IF v_point = 0 THEN
        v_point := length(v_mant) + 1;
    END IF;
    v_digits := replace(v_mant, '.', '');
    -- the value is 0.<digits> * 10^v_exp, without leading or trailing zeros
    v_exp := v_exp + v_point - 1;
    WHILE left(v_digits, 1) = '0' AND length(v_digits) > 1 LOOP
        v_digits := substr(v_digits, 2);
        v_exp := v_exp - 1;
    END LOOP;
    v_digits := rtrim(v_digits, '0');
    IF v_digits = '' THEN
        RETURN v_sign || '0.0';
    END IF;
    IF v_exp > 16 OR v_exp < -3 THEN
        RETURN v_sign || left(v_digits, 1)
            || CASE WHEN length(v_digits) > 1 THEN '.' || substr(v_digits, 2) ELSE '' END
            || 'e' || CASE WHEN v_exp - 1 < 0 THEN '-' ELSE '+' END || CASE WHEN abs(v_exp - 1) < 10 THEN '0' ELSE '' END || abs(v_exp - 1)::text;
    END IF;
    IF v_exp <= 0 THEN
        RETURN v_sign || '0.' || repeat('0', -v_exp) || v_digits;
    END IF;
    IF length(v_digits) <= v_exp THEN
        RETURN v_sign || rpad(v_digits, v_exp, '0') || '.0';
    END IF;
    RETURN v_sign || left(v_digits, v_exp) || '.' || substr(v_digits, v_exp + 1);
END
$f$;

CREATE OR REPLACE FUNCTION {S}._json_error(p_text text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- the detail of the error Python's json.loads reports for p_text ('<msg> at line L column C', as
-- dbmemory.tool.args._load_json writes it): the C scanner's checks in its order, without
-- recursion (a stack of the open containers); NULL when Python reads the text
DECLARE
    n integer := length(p_text);
    i integer := 1;
    j integer;
    v_code integer;
    v_stack text := '';
    v_state text := 'value';
    v_msg text;
    v_token text;
    v_before text;
BEGIN
    <<scan>>
    LOOP
        WHILE i <= n AND ascii(substr(p_text, i, 1)) IN {_WS} LOOP
            i := i + 1;
        END LOOP;
        IF v_state = 'key' AND (i > n OR substr(p_text, i, 1) <> '"') THEN
            v_msg := 'Expecting property name enclosed in double quotes';
            EXIT scan;
        END IF;
        IF v_state IN ('value', 'key') THEN
            IF i > n THEN
                v_msg := 'Expecting value';
                EXIT scan;
            END IF;
            v_code := ascii(substr(p_text, i, 1));
            IF v_code = 34 THEN
                j := i + 1;
                <<chars>>
                LOOP
                    IF j > n THEN
                        v_msg := 'Unterminated string starting at';
                        EXIT scan;
                    END IF;
                    v_code := ascii(substr(p_text, j, 1));
                    EXIT chars WHEN v_code = 34;
                    IF v_code < 32 THEN
                        v_msg := 'Invalid control character at';
                        i := j;
                        EXIT scan;
                    END IF;
                    IF v_code = 92 THEN
                        IF j + 1 > n THEN
                            v_msg := 'Unterminated string starting at';
                            EXIT scan;
                        END IF;
                        IF substr(p_text, j + 1, 1) = 'u' THEN
                            IF substr(p_text, j + 2, 4) !~ '^[0-9A-Fa-f]{{4}}$' THEN
                                v_msg := 'Invalid \\uXXXX escape';
                                i := j + 1;
                                EXIT scan;
                            END IF;
                            j := j + 6;
                            CONTINUE chars;
                        END IF;
                        IF strpos('"/bfnrt\\', substr(p_text, j + 1, 1)) = 0 THEN
                            v_msg := 'Invalid \\escape';
                            i := j;
                            EXIT scan;
                        END IF;
                        j := j + 2;
                        CONTINUE chars;
                    END IF;
                    j := j + 1;
                END LOOP;
                i := j + 1;
                IF v_state = 'key' THEN
                    WHILE i <= n AND ascii(substr(p_text, i, 1)) IN {_WS} LOOP
                        i := i + 1;
                    END LOOP;
                    IF i > n OR substr(p_text, i, 1) <> ':' THEN
                        v_msg := 'Expecting '':'' delimiter';
                        EXIT scan;
                    END IF;
                    i := i + 1;
                    v_state := 'value';
                    CONTINUE scan;
                END IF;
                v_state := 'after';
            ELSIF v_code IN (123, 91) THEN
                v_stack := v_stack || CASE WHEN v_code = 123 THEN 'o' ELSE 'a' END;
                i := i + 1;
                WHILE i <= n AND ascii(substr(p_text, i, 1)) IN {_WS} LOOP
                    i := i + 1;
                END LOOP;
                IF i <= n AND substr(p_text, i, 1) = (CASE WHEN v_code = 123 THEN '}}' ELSE ']' END) THEN
                    v_stack := left(v_stack, -1);
                    i := i + 1;
                    v_state := 'after';
                ELSE
                    v_state := CASE WHEN v_code = 123 THEN 'key' ELSE 'value' END;
                END IF;
            ELSE
                v_token := substr(p_text, i, 400);
                v_token := CASE
                    WHEN left(v_token, 4) IN ('null', 'true') THEN left(v_token, 4)
                    WHEN left(v_token, 5) = 'false' THEN 'false'
                    WHEN left(v_token, 3) = 'NaN' THEN 'NaN'
                    WHEN left(v_token, 8) = 'Infinity' THEN 'Infinity'
                    WHEN left(v_token, 9) = '-Infinity' THEN '-Infinity'
                    ELSE substring(v_token FROM '^-?(?:0|[1-9][0-9]*)(?:[.][0-9]+)?(?:[eE][-+]?[0-9]+)?') END;
                IF v_token IS NULL OR v_token = '' THEN
                    v_msg := 'Expecting value';
                    EXIT scan;
                END IF;
                i := i + length(v_token);
                v_state := 'after';
            END IF;
        ELSE
            -- a value ended: close the containers it ends, or take the next item
            IF v_stack = '' THEN
                IF i <= n THEN
                    v_msg := 'Extra data';
                    EXIT scan;
                END IF;
                RETURN NULL;
            END IF;
            IF i <= n AND substr(p_text, i, 1) = ',' THEN
                i := i + 1;
                v_state := CASE WHEN right(v_stack, 1) = 'o' THEN 'key' ELSE 'value' END;
            ELSIF i <= n AND substr(p_text, i, 1) = (CASE WHEN right(v_stack, 1) = 'o' THEN '}}' ELSE ']' END) THEN
                v_stack := left(v_stack, -1);
                i := i + 1;
            ELSE
                v_msg := 'Expecting '','' delimiter';
                EXIT scan;
            END IF;
        END IF;
    END LOOP;
    -- Python's position is 0-based: line = LFs before it + 1, column = characters since the last LF
    v_before := left(p_text, i - 1);
    RETURN v_msg || ' at line ' || (length(v_before) - length(replace(v_before, chr(10), '')) + 1)::text
        || ' column ' || (i - 1 - CASE WHEN strpos(v_before, chr(10)) = 0 THEN -1
                                      ELSE length(v_before) - strpos(reverse(v_before), chr(10)) END)::text;
END
$f$"""

RUN_TEXT = f"""CREATE OR REPLACE FUNCTION {S}.run_command(
    p_store_id bigint, p_command text, p_actor text DEFAULT 'memory-tool'
) RETURNS text LANGUAGE plpgsql AS $f$
-- run_command for a command as text: JSON is read as the json form reads it; text that is not
-- JSON gets the MEMORY tool's answer (dbmemory.tool.args._load_json), after the store checks
DECLARE
    v_command json;
    v_detail text;
BEGIN
    IF p_command ~ '(^|[^\\\\])(\\\\\\\\)*\\\\u0000' THEN
        PERFORM {S}._check_reachable(p_store_id);
        IF NOT EXISTS (SELECT 1 FROM {T}.dbm_stores s WHERE s.store_id = p_store_id) THEN
            PERFORM {S}._fail('not_found', format('store %s does not exist: check the store id', p_store_id));
        END IF;
        RETURN {E} || {q(NUL_REFUSED)};
    END IF;
    BEGIN
        v_command := p_command::json;
    EXCEPTION WHEN others THEN
        v_command := NULL;
    END;
    IF v_command IS NULL THEN
        PERFORM {S}._check_reachable(p_store_id);
        IF NOT EXISTS (SELECT 1 FROM {T}.dbm_stores s WHERE s.store_id = p_store_id) THEN
            PERFORM {S}._fail('not_found', format('store %s does not exist: check the store id', p_store_id));
        END IF;
        v_detail := CASE WHEN btrim(coalesce(p_command, ''), E' \\t\\n\\r\\x0b\\x0c') = '' THEN 'the text is empty'
                         ELSE coalesce({S}._json_error(p_command), 'the text is not JSON PostgreSQL reads') END;
        RETURN {E} || {msg(m.invalid_json, Text("v_detail"))};
    END IF;
    RETURN {S}.run_command(p_store_id, v_command, p_actor);
END
$f$"""
