"""MySQL/MariaDB API, the MEMORY tool in SQL: ``dbm_memory_run_command(store_id, command,
actor, OUT result)`` answers the six commands with the text
:class:`dbmemory.tool.memory_tool.MemoryTool` returns (texts from :mod:`dbmemory.tool.messages`
through :mod:`dbmemory.sqlgen.tool_text`), writing with the API's own store lock, cap checks and
audit rows (for :mod:`dbmemory.sqlgen.mysql.api`). The steps are those of the PostgreSQL
function (:mod:`dbmemory.sqlgen.postgresql.tool`), in MariaDB's procedure language."""

from __future__ import annotations

from dbmemory.core.paths import ROOT
from dbmemory.sqlgen.mysql.rules import HANDLER, NUMBER, P, U, lock_store, q
from dbmemory.sqlgen.mysql.tool_json import JSON_HELPERS
from dbmemory.sqlgen.mysql.tool_lookalike import lookalike_helpers
from dbmemory.sqlgen.mysql.tool_render import RENDER
from dbmemory.sqlgen.mysql.tool_text import TB, TEXT_HELPERS, eq, msg
from dbmemory.sqlgen.mysql.tool_unicode import unicode_helpers
from dbmemory.sqlgen.mysql.tool_writes import (
    CREATE,
    DELETE,
    EDIT,
    HASH,
    PT,
    RENAME,
    E,
    V,
    err,
    ret,
    under,
)
from dbmemory.sqlgen.tool_text import Int, Text, Value, root_refused_text
from dbmemory.tool import messages as m
from dbmemory.tool.args import EXPECTED_LINE as _LINE
from dbmemory.tool.args import EXPECTED_PATH as _PATH
from dbmemory.tool.args import EXPECTED_TEXT as _TEXT
from dbmemory.tool.args import WRAPPER_KEYS
from dbmemory.tool.messages import COMMANDS

__all__ = ["TOOL"]

def _get(name: str) -> str:
    """The JSON text of parameter ``name`` of the command (SQL NULL when absent)."""
    return f"JSON_EXTRACT(v_data, '$.{name}')"


def _absent(expr: str) -> str:
    return f"({expr} IS NULL OR JSON_TYPE({expr}) = 'NULL')"


def _param_text(name: str, command: str, expected: str) -> str:
    """The statements that read text parameter ``name`` into ``v_s`` (or return its error)."""
    return f"""SET v_value = {_get(name)};
        IF {_absent("v_value")} THEN
            {err(msg(m.missing_parameter, name, command, expected))}
        END IF;
        IF JSON_TYPE(v_value) <> 'STRING' THEN
            {err(msg(m.wrong_type, name, _TEXT, V))}
        END IF;
        SET v_s = JSON_UNQUOTE(v_value);"""


def _written(name: str) -> str:
    """dbmemory.tool.args._check_written_text: no NUL in text to be written."""
    return f"""IF LOCATE(CHAR(0 USING utf8mb4), v_s) > 0 THEN
            {err(msg(m.nul_in_text, name, Int("LOCATE(CHAR(0 USING utf8mb4), v_s) - 1")))}
        END IF;"""


def _param_path(name: str, command: str, into: str) -> str:
    return f"""{_param_text(name, command, _PATH)}
        SET {into} = {P}_tool_path(v_s, '{name}');
        IF LEFT({into}, {len(m.ERROR_MARKER)}) = {E} THEN
            {ret(into)}
        END IF;"""


_WRAPPERS = ", ".join(q(k) for k in WRAPPER_KEYS)
_LOCK = lock_store("v_key", True).replace("p_store_id", "v_sid")



RUN = f"""CREATE PROCEDURE {P}run_command(
    IN p_store_id {NUMBER}, IN p_command LONGTEXT {U}, IN p_actor TEXT {U}, OUT p_result LONGTEXT {U})
    MODIFIES SQL DATA SQL SECURITY DEFINER
main: BEGIN
    -- dbmemory.tool.memory_tool.MemoryTool.execute on one store: the same six commands and the
    -- same texts in p_result; a failure changes nothing. A bad store id (missing, reserved,
    -- fractional) raises as every call of the API does. p_actor NULL = 'memory-tool'.
    DECLARE v_sid BIGINT;
    DECLARE v_data {TB};
    DECLARE v_value {TB};
    DECLARE v_inner {TB};
    DECLARE v_cmd {TB};
    DECLARE v_raw {TB};
    DECLARE v_s {TB};
    DECLARE v_key VARCHAR(700) {U};
    DECLARE p_path {TB};
    DECLARE v_new {TB};
    DECLARE v_old_str {TB};
    DECLARE v_new_str {TB};
    DECLARE v_text {TB};
    DECLARE v_parent {TB};
    DECLARE v_found {TB};
    DECLARE v_line DECIMAL(65, 0);
    DECLARE v_start DECIMAL(65, 0);
    DECLARE v_end DECIMAL(65, 0);
    DECLARE v_range BOOLEAN DEFAULT FALSE;
    DECLARE v_known BOOLEAN;
    DECLARE v_n BIGINT;
    DECLARE v_hits BIGINT;
    DECLARE v_pos BIGINT;
    DECLARE v_prev BIGINT;
    DECLARE v_first BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_limit BIGINT;
    DECLARE v_nl VARCHAR(2) {U};
    DECLARE v_mfc INT;
    DECLARE v_mf INT;
    DECLARE v_msc BIGINT;
    DECLARE v_nfiles BIGINT;
    DECLARE v_nchars BIGINT;
    DECLARE v_fid BIGINT;
    DECLARE v_old BIGINT;
    DECLARE v_body {TB};
    DECLARE v_touched DATETIME(6);
    DECLARE v_read DATETIME(6);
    DECLARE v_exact BOOLEAN;
    DECLARE v_errno INT;
    DECLARE i BIGINT;
    DECLARE k INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_actor TEXT {U} DEFAULT COALESCE(p_actor, 'memory-tool');
    CALL {P}_check_reachable(p_store_id);
    SET v_sid = p_store_id;
    SELECT store_key INTO v_key FROM dbm_stores WHERE store_id = v_sid;
    IF v_key IS NULL THEN
        CALL {P}_fail('not_found', CONCAT('store ', v_sid, ' does not exist: check the store id'));
    END IF;
    -- dbmemory.tool.args._to_mapping and _unwrap
    IF p_command IS NULL OR {P}_py_strip(p_command) = '' THEN
        {err(msg(m.invalid_json, "the text is empty"))}
    END IF;
    -- MariaDB reads a few texts Python refuses (an unknown escape such as \\x, a control
    -- character in a string): those are scanned as Python's json reads them
    IF NOT JSON_VALID(p_command) OR (p_command REGEXP '[\\\\x00-\\\\x1f]|\\\\\\\\[^"\\\\\\\\/bfnrtu]|\\\\\\\\u(?![0-9A-Fa-f]{{4}})'
                                     AND {P}_json_error(p_command) IS NOT NULL) THEN
        {err(msg(m.invalid_json, Text(f"{P}_json_error(p_command)")))}
    END IF;
    SET v_data = p_command;
    IF JSON_TYPE(v_data) = 'STRING' AND LEFT(LTRIM(JSON_UNQUOTE(v_data)), 1) = '{{' THEN
        SET v_inner = JSON_UNQUOTE(v_data);
        IF NOT JSON_VALID(v_inner) THEN
            {err(msg(m.invalid_json, Text(f"{P}_json_error(v_inner)")))}
        END IF;
        SET v_data = v_inner;
    END IF;
    IF JSON_TYPE(v_data) <> 'OBJECT' THEN
        SET v_value = v_data;
        {err(msg(m.arguments_not_an_object, V))}
    END IF;
    IF NOT JSON_CONTAINS_PATH(v_data, 'one', '$.command') THEN
        SET v_known = FALSE;
        SET k = 1;
        WHILE k <= {len(WRAPPER_KEYS)} DO
            IF JSON_CONTAINS_PATH(v_data, 'one', CONCAT('$.', ELT(k, {_WRAPPERS}))) THEN
                SET v_known = TRUE;
            END IF;
            SET k = k + 1;
        END WHILE;
        SET k = IF(v_known, 1, 0);
        SET v_s = NULL;
        unwrap: WHILE k <= {len(WRAPPER_KEYS)} DO
            IF k = 0 THEN
                IF JSON_LENGTH(v_data) <> 1 THEN
                    LEAVE unwrap;
                END IF;
                SET v_inner = JSON_EXTRACT(v_data, CONCAT('$.', JSON_EXTRACT(JSON_KEYS(v_data), '$[0]')));
                SET k = {len(WRAPPER_KEYS) + 1};
            ELSE
                SET v_inner = JSON_EXTRACT(v_data, CONCAT('$.', ELT(k, {_WRAPPERS})));
                SET k = k + 1;
            END IF;
            IF v_inner IS NOT NULL AND JSON_TYPE(v_inner) = 'STRING' THEN
                SET v_inner = JSON_UNQUOTE(v_inner);
                IF NOT v_known AND LEFT(LTRIM(v_inner), 1) <> '{{' THEN
                    ITERATE unwrap;
                END IF;
                -- a known wrapper whose text cannot be read reports that error (the first one)
                IF {P}_py_strip(v_inner) = '' THEN
                    SET v_s = COALESCE(v_s, {msg(m.invalid_json, "the text is empty")});
                    ITERATE unwrap;
                END IF;
                IF NOT JSON_VALID(v_inner) THEN
                    SET v_s = COALESCE(v_s, {msg(m.invalid_json, Text(f"{P}_json_error(v_inner)"))});
                    ITERATE unwrap;
                END IF;
                IF JSON_TYPE(v_inner) = 'STRING' AND LEFT(LTRIM(JSON_UNQUOTE(v_inner)), 1) = '{{' THEN
                    SET v_inner = JSON_UNQUOTE(v_inner);
                    IF NOT JSON_VALID(v_inner) THEN
                        SET v_s = COALESCE(v_s, {msg(m.invalid_json, Text(f"{P}_json_error(v_inner)"))});
                        ITERATE unwrap;
                    END IF;
                END IF;
                IF JSON_TYPE(v_inner) <> 'OBJECT' THEN
                    SET v_value = v_inner;
                    SET v_s = COALESCE(v_s, {msg(m.arguments_not_an_object, V)});
                    ITERATE unwrap;
                END IF;
            END IF;
            IF v_inner IS NULL OR JSON_TYPE(v_inner) <> 'OBJECT' THEN
                ITERATE unwrap;
            END IF;
            IF JSON_CONTAINS_PATH(v_inner, 'one', '$.command') THEN
                SET v_data = v_inner;
                SET v_s = NULL;
                LEAVE unwrap;
            END IF;
        END WHILE unwrap;
        IF v_s IS NOT NULL THEN
            {err("v_s")}
        END IF;
    END IF;
    SET v_value = {_get("command")};
    IF {_absent("v_value")} THEN
        {err(msg(m.missing_command))}
    END IF;
    IF JSON_TYPE(v_value) <> 'STRING' THEN
        {err(msg(m.wrong_type, "command", "one of " + ", ".join(COMMANDS), V))}
    END IF;
    SET v_raw = JSON_UNQUOTE(v_value);
    SET v_cmd = LOWER({P}_py_strip(v_raw));

    IF {eq("v_cmd", "'view'")} THEN
        {_param_path("path", "view", "p_path")}
        IF NOT {eq("p_path", f"'{ROOT}'")} THEN
            SELECT f.file_id, f.body, f.last_accessed_at,
                   (SELECT fr.read_at FROM dbm_file_reads fr WHERE fr.file_id = f.file_id)
              INTO v_fid, v_body, v_touched, v_read FROM dbm_files f
             WHERE f.store_id = v_sid AND f.path_hash = {HASH.format("p_path")};
            IF v_fid IS NOT NULL THEN
                -- dbmemory.tool.args.coerce_view_range
                SET v_value = {_get("view_range")};
                SET v_inner = v_value;
                IF v_value IS NOT NULL AND JSON_TYPE(v_value) = 'STRING' THEN
                    SET v_s = {P}_py_strip(JSON_UNQUOTE(v_value));
                    IF CHAR_LENGTH(v_s) = 0 THEN
                        SET v_value = NULL;
                    ELSEIF CHAR_LENGTH(v_s) > 100 THEN
                        {err(msg(m.view_range_malformed, V))}
                    ELSE
                        SET v_inner = IF(LEFT(v_s, 1) = '[', v_s, CONCAT('[', v_s, ']'));
                        IF NOT JSON_VALID(v_inner) THEN
                            {err(msg(m.view_range_malformed, V))}
                        END IF;
                    END IF;
                END IF;
                IF v_value IS NOT NULL AND JSON_TYPE(v_value) <> 'NULL' THEN
                    IF JSON_TYPE(v_inner) <> 'ARRAY' OR JSON_LENGTH(v_inner) NOT IN (0, 2) THEN
                        {err(msg(m.view_range_malformed, V))}
                    END IF;
                    IF JSON_LENGTH(v_inner) = 2 THEN
                        SET v_start = {P}_as_int(JSON_EXTRACT(v_inner, '$[0]'));
                        SET v_end = {P}_as_int(JSON_EXTRACT(v_inner, '$[1]'));
                        IF JSON_TYPE(JSON_EXTRACT(v_inner, '$[0]')) = 'BOOLEAN'
                           OR JSON_TYPE(JSON_EXTRACT(v_inner, '$[1]')) = 'BOOLEAN'
                           OR v_start IS NULL OR v_end IS NULL THEN
                            {err(msg(m.view_range_malformed, V))}
                        END IF;
                        SET v_range = TRUE;
                    END IF;
                END IF;
                -- dbmemory.store.touches: the read recorded (in this transaction) when the
                -- file's last touch is older than the touch interval
                IF GREATEST(v_touched, COALESCE(v_read, v_touched)) < v_now - INTERVAL 1 HOUR THEN
                    INSERT INTO dbm_file_reads (file_id, read_at) VALUES (v_fid, v_now)
                    ON DUPLICATE KEY UPDATE read_at = VALUES(read_at);
                END IF;
                {ret(f"{P}_render_file(p_path, COALESCE(v_body, ''), v_range, v_start, v_end)")}
            END IF;
            IF NOT {under("p_path")} THEN
                {err(msg(m.path_not_found, PT))}
            END IF;
        END IF;
        {ret(f"{P}_render_listing(v_sid, p_path)")}
    END IF;

    IF {eq("v_cmd", "'create'")} THEN
        {_param_path("path", "create", "p_path")}
        {_param_text("file_text", "create", "the file's full text as a string ('' for empty)")}
        {_written("file_text")}
        SET v_text = v_s;
        IF {eq("p_path", f"'{ROOT}'")} THEN
            {err(q(root_refused_text("create")))}
        END IF;
    ELSEIF {eq("v_cmd", "'str_replace'")} OR {eq("v_cmd", "'insert'")} THEN
        IF {eq("v_cmd", "'str_replace'")} THEN
            {_param_path("path", "str_replace", "p_path")}
            {_param_text("old_str", "str_replace", "the exact text to replace (it must occur once)")}
            SET v_old_str = v_s;
            SET v_value = {_get("new_str")};
            IF v_value IS NOT NULL AND JSON_TYPE(v_value) NOT IN ('NULL', 'STRING') THEN
                {err(msg(m.wrong_type, "new_str", _TEXT + " or null", V))}
            END IF;
            SET v_s = IF(JSON_TYPE(v_value) = 'STRING', JSON_UNQUOTE(v_value), '');
            {_written("new_str")}
            SET v_new_str = v_s;
        ELSE
            {_param_path("path", "insert", "p_path")}
            SET v_value = {_get("insert_line")};
            IF {_absent("v_value")} THEN
                {err(msg(m.missing_parameter, "insert_line", "insert", _LINE))}
            END IF;
            SET v_line = IF(JSON_TYPE(v_value) <> 'BOOLEAN', {P}_as_int(v_value), NULL);
            IF v_line IS NULL THEN
                {err(msg(m.wrong_type, "insert_line", _LINE, V))}
            END IF;
            IF {_absent(_get("insert_text"))} AND JSON_TYPE({_get("new_str")}) = 'STRING' THEN
                SET v_s = JSON_UNQUOTE({_get("new_str")});
                {_written("new_str")}
            ELSE
                {_param_text("insert_text", "insert", "the text to insert as a string")}
                {_written("insert_text")}
            END IF;
            SET v_new_str = v_s;
        END IF;
        IF {eq("p_path", f"'{ROOT}'")} THEN
            {err(q(root_refused_text("edit")))}
        END IF;
    ELSEIF {eq("v_cmd", "'delete'")} THEN
        {_param_path("path", "delete", "p_path")}
        IF {eq("p_path", f"'{ROOT}'")} THEN
            {err(msg(m.cannot_delete_root))}
        END IF;
    ELSEIF {eq("v_cmd", "'rename'")} THEN
        IF NOT {_absent(_get("old_path"))} OR {_absent(_get("path"))} THEN
            {_param_path("old_path", "rename", "p_path")}
        ELSE
            {_param_path("path", "rename", "p_path")}
        END IF;
        {_param_path("new_path", "rename", "v_new")}
        IF {eq("p_path", f"'{ROOT}'")} OR {eq("v_new", f"'{ROOT}'")} THEN
            {err(msg(m.cannot_rename_root))}
        END IF;
        IF {eq("p_path", "v_new")} THEN
            {err(msg(m.rename_same_path, PT))}
        END IF;
        IF {eq("LEFT(v_new, CHAR_LENGTH(p_path) + 1)", "CONCAT(p_path, '/')")} THEN
            {err(msg(m.rename_into_itself, PT, Text("v_new")))}
        END IF;
    ELSE
        {err(msg(m.unknown_command, Value("", f"{P}_quote_value(v_raw, 100)")))}
    END IF;

    -- the writes: a transaction, the store row locked, this call's writes undone on a failure
    CALL {P}_need_transaction();
    SAVEPOINT {P}write;
    write_block: BEGIN
        {HANDLER}
        {_LOCK}
        IF {eq("v_cmd", "'create'")} THEN
            {CREATE}
        ELSEIF {eq("v_cmd", "'delete'")} THEN
            {DELETE}
        ELSEIF {eq("v_cmd", "'rename'")} THEN
            {RENAME}
        ELSE
            {EDIT}
        END IF;
    END write_block;
END"""

TOOL: list[tuple[str, str, str]] = [*unicode_helpers(), *lookalike_helpers(), *TEXT_HELPERS, *JSON_HELPERS, *RENDER, ("PROCEDURE", f"{P}run_command", RUN)]
"""``(kind, name, body)`` of the tool's routines, in creation order."""
