"""The in-database API for MySQL 8 / MariaDB 10.6+: routines ``dbm_memory_<call>`` (``SQL
SECURITY DEFINER``), errors ``SIGNAL SQLSTATE '45000'`` with ``MYSQL_ERRNO`` 20701..20707 (see
:mod:`dbmemory.sqlgen.api`)."""

from __future__ import annotations

from dbmemory.keys import SCOPES
from dbmemory.paths import ROOT
from dbmemory.db.dialect import PATH_KEY_CHARS
from dbmemory.sqlgen.api_common import (
    ADMIN_ACTOR,
    API_CALLS,
    DAYS_RULE,
    EXPIRY_API_ACTOR,
    MARKER,
    MAX_ACTOR_CHARS,
    MIRRORED as M,
    RESERVED,
    SCOPE_LIST,
    own_store_condition,
    protocol_parts,
)
from dbmemory.sqlgen.api_mysql_rules import (
    P,
    BIN,
    _q,
    _U,
    _FAIL,
    _NEED_TRX,
    _COMPONENT,
    _PATH,
    _CHECK_ID,
    _audit,
    _CAPS_AND_STORE_ROW,
    _HANDLER,
    _lock_store,
)

__all__ = ["mysql_statements", "mysql_script_body", "mysql_grants", "mysql_uninstall", "ROUTINES"]

def _resolve() -> str:
    def chk(value: str, what: str) -> str:
        return f"CALL {P}_check_component({value}, '{what}', p_scope);"

    return f"""CREATE FUNCTION {P}_store_key(
    p_scope TEXT {_U}, p_agent_code TEXT {_U}, p_user_id TEXT {_U},
    p_session_id TEXT {_U}, p_store_code TEXT {_U}, p_context_key TEXT {_U},
    p_context_value TEXT {_U}) RETURNS VARCHAR(1000) {_U}
    NO SQL SQL SECURITY DEFINER
BEGIN
    -- dbmemory.keys.build_store_key: every component checked, the reserved namespace unreachable
    DECLARE v_key VARCHAR(1000) {_U};
    DECLARE v_what VARCHAR(300) {_U};
    IF p_scope = '{RESERVED}' THEN
        CALL {P}_fail('invalid_scope', 'scope ''{RESERVED}'' holds the stores dbmemory owns itself (user profiles, memory items, organisation memory) and no agent configuration can name it: pick one of {SCOPE_LIST}');
    END IF;
    IF p_scope IS NULL OR CAST(p_scope AS BINARY) NOT IN ({", ".join(f"CAST('{s}' AS BINARY)" for s in SCOPES)}) THEN
        CALL {P}_fail('invalid_scope', CONCAT('scope ', QUOTE(COALESCE(p_scope, 'NULL')), ' is not one of {SCOPE_LIST}: pick one of them'));
    END IF;
    CASE p_scope
        WHEN 'agent' THEN
            {chk("p_agent_code", "an agent code")}
            SET v_key = CONCAT('agent:', p_agent_code);
        WHEN 'user' THEN
            {chk("p_agent_code", "an agent code")}
            {chk("p_user_id", "a user id")}
            SET v_key = CONCAT('user:', p_agent_code, ':', p_user_id);
        WHEN 'session' THEN
            {chk("p_session_id", "a session id")}
            SET v_key = CONCAT('session:', p_session_id);
        WHEN 'shared' THEN
            {chk("p_store_code", "a store code")}
            SET v_key = CONCAT('shared:', p_store_code);
        WHEN 'global' THEN
            SET v_key = 'global';
        ELSE
            IF p_store_code IS NOT NULL THEN
                {chk("p_store_code", "a store code")}
                SET v_key = CONCAT('context:{MARKER}:', p_store_code);
            ELSE
                {chk("p_agent_code", "an agent code or a store code")}
                SET v_key = CONCAT('context:', p_agent_code);
            END IF;
            {chk("p_context_key", "a context key")}
            SET v_what = CONCAT('a context value for ', QUOTE(p_context_key));
            CALL {P}_check_component(p_context_value, v_what, p_scope);
            SET v_key = CONCAT(v_key, ':', p_context_key, ':', p_context_value);
    END CASE;
    RETURN v_key;
END"""


_KEY_PARAMS = (
    f"p_scope TEXT {_U}, p_agent_code TEXT {_U}, p_user_id TEXT {_U},\n"
    f"    p_session_id TEXT {_U}, p_store_code TEXT {_U}, p_context_key TEXT {_U},\n"
    f"    p_context_value TEXT {_U}"
)
_KEY_CALL = (
    f"{P}_store_key(p_scope, p_agent_code, p_user_id, p_session_id, p_store_code,\n"
    "        p_context_key, p_context_value)"
)

_RESOLVE = f"""CREATE FUNCTION {P}resolve_store_id(
    {_KEY_PARAMS}) RETURNS BIGINT
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.stores.resolve_store_id: build_store_key, then find_store_id
    DECLARE v_key VARCHAR(1000) {_U} DEFAULT {_KEY_CALL};
    DECLARE v_id BIGINT;
    SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key {BIN};
    IF v_id IS NULL THEN
        CALL {P}_fail('not_found', CONCAT('store ', v_key, ' does not exist (it is created on its first write)'));
    END IF;
    RETURN v_id;
END"""

_OPEN_PARAMS = "IN " + _KEY_PARAMS.replace(", p_", ", IN p_").replace("\n    p_", "\n    IN p_")

_OPEN = f"""CREATE PROCEDURE {P}open_store(
    {_OPEN_PARAMS},
    OUT p_store_id BIGINT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store_lock.get_or_create_store with a StoreRef without caps: the store id, the
    -- row created when missing with dbmemory.caps.creation_caps (the strictest enabled
    -- configurations that name the store, else the defaults); no audit event, as in Python
    DECLARE v_key VARCHAR(1000) {_U} DEFAULT {_KEY_CALL};
    DECLARE v_fc INT;
    DECLARE v_nf INT;
    DECLARE v_sc BIGINT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    SET p_store_id = NULL;
    SELECT store_id INTO p_store_id FROM dbm_stores WHERE store_key = v_key {BIN};
    IF p_store_id IS NULL THEN
        CALL {P}_need_transaction();
        SELECT MIN(a.max_file_chars), MIN(a.max_files), MIN(a.max_store_chars)
          INTO v_fc, v_nf, v_sc
          FROM dbm_agents a
         WHERE a.memory_enabled = 1 AND a.scope_name = p_scope
           AND ((p_scope IN ('agent', 'user') AND a.agent_code = p_agent_code {BIN} AND a.store_code IS NULL)
                OR (p_scope = 'shared' AND a.store_code = p_store_code {BIN})
                OR p_scope = 'global'
                OR (p_scope = 'context' AND a.context_key = p_context_key {BIN}
                    AND ((p_store_code IS NULL AND a.store_code IS NULL AND a.agent_code = p_agent_code {BIN})
                         OR a.store_code = p_store_code {BIN})));
        -- a no-op update on a duplicate (dbmemory.db.dialect.insert_store_statement)
        INSERT INTO dbm_stores
            (store_key, scope_name, agent_code, store_code, created_at, updated_at,
             max_file_chars, max_files, max_store_chars, file_count, total_chars)
        VALUES (v_key, p_scope,
                IF(p_scope IN ('agent', 'user', 'session')
                   OR (p_scope = 'context' AND p_store_code IS NULL), p_agent_code, NULL),
                IF(p_scope IN ('shared', 'context'), p_store_code, NULL),
                v_now, v_now, COALESCE(v_fc, {M["DEFAULT_MAX_FILE_CHARS"]}),
                COALESCE(v_nf, {M["DEFAULT_MAX_FILES"]}), v_sc, 0, 0)
        ON DUPLICATE KEY UPDATE store_id = store_id;
        SELECT store_id INTO p_store_id FROM dbm_stores WHERE store_key = v_key {BIN}
          LOCK IN SHARE MODE;
    END IF;
END"""


_LIST = f"""CREATE PROCEDURE {P}list_files(IN p_store_id BIGINT)
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.files.list_files: every file without its text, by path in code-point order
    CALL {P}_check_store_id(p_store_id);
    SELECT file_path AS path, char_count AS chars, version_no AS version,
           created_at, updated_at, last_accessed_at
      FROM dbm_files WHERE store_id = p_store_id
     ORDER BY CAST(file_path AS BINARY);
END"""

_GET = f"""CREATE FUNCTION {P}get_file(p_store_id BIGINT, p_path LONGTEXT {_U})
    RETURNS LONGTEXT {_U}
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.files.get_file (touch=False): the text, '' for an empty file
    DECLARE v_id BIGINT;
    DECLARE v_body LONGTEXT {_U};
    CALL {P}_check_store_id(p_store_id);
    CALL {P}_check_path(p_path);
    SELECT file_id, body INTO v_id, v_body FROM dbm_files
     WHERE store_id = p_store_id AND path_hash = SHA2(p_path, 256);
    IF v_id IS NULL THEN
        CALL {P}_fail('not_found', CONCAT('the path ', p_path, ' does not exist'));
    END IF;
    RETURN COALESCE(v_body, '');
END"""

_DIR_EXACT = (
    "CAST(SUBSTRING(file_path, 1, CHAR_LENGTH(p_path) + 1) AS BINARY)"
    " = CAST(CONCAT(p_path, '/') AS BINARY)"
)
_DIR_PROBE = f"""-- files under p_path/ (it is a directory): the range probe of ix_dbm_files_prefix
            -- (dbmemory.db.dialect.PathKey: the utf8mb4_bin column) when the prefix fits the key
            -- ({PATH_KEY_CHARS} characters), then the exact test; the scan form otherwise
            IF CHAR_LENGTH(p_path) + 1 <= {PATH_KEY_CHARS} THEN
                SELECT COUNT(*) INTO v_bad FROM dbm_files WHERE store_id = p_store_id
                   AND file_path >= CONCAT(p_path, '/') {BIN}
                   AND file_path < CONCAT(p_path, '0') {BIN}
                   AND {_DIR_EXACT}
                 LOCK IN SHARE MODE;
            ELSE
                SELECT COUNT(*) INTO v_bad FROM dbm_files WHERE store_id = p_store_id
                   AND {_DIR_EXACT}
                 LOCK IN SHARE MODE;
            END IF;"""

_PUT = f"""CREATE PROCEDURE {P}put_file(
    IN p_store_id BIGINT, IN p_path LONGTEXT {_U}, IN p_text LONGTEXT {_U}, IN p_actor TEXT {_U},
    OUT p_version INT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.files.put_file (enforce_caps, no expected version, expiry flag kept): create or
    -- replace; p_version = the file's version after the write; p_actor NULL = '{ADMIN_ACTOR}'
    DECLARE v_key VARCHAR(700) {_U};
    DECLARE v_mfc INT;
    DECLARE v_mf INT;
    DECLARE v_msc BIGINT;
    DECLARE v_nfiles BIGINT;
    DECLARE v_nchars BIGINT;
    DECLARE v_hash CHAR(64);
    DECLARE v_fid BIGINT;
    DECLARE v_old BIGINT;
    DECLARE v_ver INT;
    DECLARE v_body LONGTEXT {_U};
    DECLARE v_chars BIGINT;
    DECLARE v_bad BIGINT;
    DECLARE v_errno INT;
    DECLARE i INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_actor TEXT {_U} DEFAULT COALESCE(p_actor, '{ADMIN_ACTOR}');
    CALL {P}_check_store_id(p_store_id);
    CALL {P}_check_path(p_path);
    IF CAST(p_path AS BINARY) = CAST('{ROOT}' AS BINARY) THEN
        CALL {P}_fail('invalid_path', 'cannot write the memory root {ROOT}: name a file or directory inside it');
    END IF;
    IF p_text IS NULL THEN
        CALL {P}_fail('invalid_argument', 'file text must be text, got NULL: pass '''' for an empty file');
    END IF;
    IF LOCATE(CHAR(0), p_text) > 0 THEN
        CALL {P}_fail('invalid_argument', 'file text contains a NUL character (U+0000), which cannot be stored: remove it');
    END IF;
    CALL {P}_need_transaction();
    SET v_hash = SHA2(p_path, 256);
    SET v_chars = CHAR_LENGTH(p_text);
    SAVEPOINT {P}write;
    BEGIN
        {_HANDLER}
        {_lock_store("v_key", True)}
        SELECT file_id, char_count, version_no, body INTO v_fid, v_old, v_ver, v_body
          FROM dbm_files WHERE store_id = p_store_id AND path_hash = v_hash FOR UPDATE;
        IF v_fid IS NULL THEN
            IF v_chars > v_mfc THEN
                CALL {P}_check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, NULL);
            END IF;
            -- dbmemory.store_lock._check_new_file_shape
            SET i = {len(ROOT) + 2};
            WHILE i <= CHAR_LENGTH(p_path) DO
                IF ORD(SUBSTRING(p_path, i, 1)) = 47 THEN
                    SELECT COUNT(*) INTO v_bad FROM dbm_files
                     WHERE store_id = p_store_id AND path_hash = SHA2(SUBSTRING(p_path, 1, i - 1), 256)
                     LOCK IN SHARE MODE;
                    IF v_bad > 0 THEN
                        CALL {P}_fail('invalid_path', CONCAT('cannot use ', p_path,
                            ': a file exists where one of its parent directories would be; a path cannot be a file and a directory at once: choose another path'));
                    END IF;
                END IF;
                SET i = i + 1;
            END WHILE;
            {_DIR_PROBE}
            IF v_bad > 0 THEN
                CALL {P}_fail('invalid_path', CONCAT(p_path, ' is a directory: choose a file path inside it or another name'));
            END IF;
            CALL {P}_check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, NULL);
            INSERT INTO dbm_files
                (store_id, file_path, path_hash, body, char_count, version_no, expiry_exempt,
                 created_at, updated_at, last_accessed_at)
            VALUES (p_store_id, p_path, v_hash, NULLIF(p_text, ''), v_chars, 1, 0,
                    v_now, v_now, v_now);
            CALL {P}_store_row_update(p_store_id, 1, v_chars, v_now);
            {_audit("p_store_id", "v_key", "p_path", "put", "v_actor", "NULL", "v_chars", "NULL", "v_now")};
            SET p_version = 1;
        ELSEIF v_old = v_chars AND CAST(COALESCE(v_body, '') AS BINARY) = CAST(p_text AS BINARY) THEN
            SET p_version = v_ver;  -- unchanged: nothing written, no audit event
        ELSE
            CALL {P}_check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, v_old);
            UPDATE dbm_files
               SET body = NULLIF(p_text, ''), char_count = v_chars, version_no = v_ver + 1,
                   updated_at = v_now, last_accessed_at = v_now
             WHERE file_id = v_fid;
            CALL {P}_store_row_update(p_store_id, 0, v_chars - v_old, v_now);
            {_audit("p_store_id", "v_key", "p_path", "put", "v_actor", "v_old", "v_chars", "NULL", "v_now")};
            SET p_version = v_ver + 1;
        END IF;
    END;
END"""

_DELETE = f"""CREATE PROCEDURE {P}delete_file(
    IN p_store_id BIGINT, IN p_path LONGTEXT {_U}, IN p_actor TEXT {_U}, OUT p_deleted BOOLEAN)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.files.delete_file: p_deleted = TRUE when the file existed; p_actor NULL = '{ADMIN_ACTOR}'
    DECLARE v_key VARCHAR(700) {_U};
    DECLARE v_fid BIGINT;
    DECLARE v_old BIGINT;
    DECLARE v_bad BIGINT;
    DECLARE v_errno INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_actor TEXT {_U} DEFAULT COALESCE(p_actor, '{ADMIN_ACTOR}');
    CALL {P}_check_store_id(p_store_id);
    CALL {P}_check_path(p_path);
    IF CAST(p_path AS BINARY) = CAST('{ROOT}' AS BINARY) THEN
        CALL {P}_fail('invalid_path', 'cannot delete the memory root {ROOT}: name a file or directory inside it');
    END IF;
    CALL {P}_need_transaction();
    SAVEPOINT {P}write;
    BEGIN
        {_HANDLER}
        {_lock_store("v_key", False)}
        SELECT file_id, char_count INTO v_fid, v_old FROM dbm_files
         WHERE store_id = p_store_id AND path_hash = SHA2(p_path, 256) FOR UPDATE;
        IF v_fid IS NULL THEN
            {_DIR_PROBE}
            IF v_bad > 0 THEN
                CALL {P}_fail('invalid_path', CONCAT(p_path, ' is a directory, not a file: delete_file deletes one file'));
            END IF;
            SET p_deleted = FALSE;
        ELSE
            DELETE FROM dbm_files WHERE file_id = v_fid;
            CALL {P}_store_row_update(p_store_id, -1, -v_old, v_now);
            {_audit("p_store_id", "v_key", "p_path", "delete", "v_actor", "v_old", "NULL", "NULL", "v_now")};
            SET p_deleted = TRUE;
        END IF;
    END;
END"""

_CLEAR = f"""CREATE PROCEDURE {P}clear_store_files(
    IN p_store_id BIGINT, IN p_actor TEXT {_U}, OUT p_count INT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.files.clear_store_files: every file deleted, one 'clear' event each
    DECLARE v_key VARCHAR(700) {_U};
    DECLARE v_chars BIGINT;
    DECLARE v_errno INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_actor TEXT {_U} DEFAULT COALESCE(p_actor, '{ADMIN_ACTOR}');
    CALL {P}_check_store_id(p_store_id);
    CALL {P}_need_transaction();
    SAVEPOINT {P}write;
    BEGIN
        {_HANDLER}
        {_lock_store("v_key", False)}
        INSERT INTO dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, detail_text, created_at)
        SELECT p_store_id, v_key, file_path, 'clear',
               LEFT(COALESCE(NULLIF(v_actor, ''), 'unknown'), {MAX_ACTOR_CHARS}),
               char_count, NULL, NULL, v_now
          FROM dbm_files WHERE store_id = p_store_id ORDER BY CAST(file_path AS BINARY)
          LOCK IN SHARE MODE;
        SET p_count = ROW_COUNT();
        SELECT COALESCE(SUM(char_count), 0) INTO v_chars FROM dbm_files WHERE store_id = p_store_id
          LOCK IN SHARE MODE;
        DELETE FROM dbm_files WHERE store_id = p_store_id;
        IF p_count > 0 THEN
            CALL {P}_store_row_update(p_store_id, -p_count, -v_chars, v_now);
        END IF;
    END;
END"""

_ENABLE = f"""CREATE PROCEDURE {P}enable_for_agent(
    IN p_agent_code TEXT {_U}, IN p_scope TEXT {_U}, IN p_store_code TEXT {_U},
    IN p_context_key TEXT {_U}, IN p_max_file_chars BIGINT, IN p_max_files BIGINT,
    IN p_max_store_chars BIGINT, OUT p_changed INT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.stores.enable_for_agent: upsert the configuration (NULL cap = default), set the
    -- caps of the existing stores it names; p_changed = how many stores got them
    DECLARE v_fc BIGINT DEFAULT COALESCE(p_max_file_chars, {M["DEFAULT_MAX_FILE_CHARS"]});  -- dbmemory.model.DEFAULT_MAX_FILE_CHARS
    DECLARE v_nf BIGINT DEFAULT COALESCE(p_max_files, {M["DEFAULT_MAX_FILES"]});  -- dbmemory.model.DEFAULT_MAX_FILES
    DECLARE v_sfc INT;
    DECLARE v_snf INT;
    DECLARE v_ssc BIGINT;
    DECLARE v_code VARCHAR(200) {_U};
    DECLARE v_ctx VARCHAR(200) {_U};
    DECLARE v_key VARCHAR(700) {_U};
    DECLARE v_prefix BOOLEAN;
    DECLARE v_owned BOOLEAN;
    DECLARE v_found VARCHAR(200);
    DECLARE v_errno INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    -- dbmemory.stores._refuse_reserved_names
    IF p_scope = '{RESERVED}' THEN
        CALL {P}_fail('invalid_scope', 'scope ''{RESERVED}'' holds the stores dbmemory owns itself (user profiles, memory items, organisation memory) and no agent can use it: pick one of {SCOPE_LIST}');
    END IF;
    IF LOWER(p_agent_code) = '{RESERVED}' OR LOWER(p_store_code) = '{RESERVED}' THEN
        CALL {P}_fail('invalid_scope', CONCAT(QUOTE(IF(LOWER(p_agent_code) = '{RESERVED}', p_agent_code, p_store_code)),
            ' is the name of the namespace dbmemory keeps for its own stores (user profiles, memory items, organisation memory): choose another name'));
    END IF;
    CALL {P}_check_component(COALESCE(p_agent_code, ''), 'agent code', p_scope);
    IF p_scope IS NULL OR CAST(p_scope AS BINARY) NOT IN ({", ".join(f"CAST('{s}' AS BINARY)" for s in SCOPES)}) THEN
        CALL {P}_fail('invalid_scope', CONCAT('scope ', QUOTE(COALESCE(p_scope, 'NULL')), ' is not one of {SCOPE_LIST}: pick one of them'));
    END IF;
    IF p_store_code IS NOT NULL THEN
        CALL {P}_check_component(p_store_code, 'store code', p_scope);
    END IF;
    IF p_context_key IS NOT NULL THEN
        CALL {P}_check_component(p_context_key, 'context key', p_scope);
    END IF;
    IF p_scope = 'shared' AND p_store_code IS NULL THEN
        CALL {P}_fail('missing_context_key', 'scope ''shared'' needs store_code: pass the shared store''s code');
    END IF;
    IF p_scope = 'context' AND p_context_key IS NULL THEN
        CALL {P}_fail('missing_context_key', 'scope ''context'' needs context_key: pass the run-context key that names the store');
    END IF;
    -- dbmemory.model.Caps: positive, within INTEGER (dbmemory.validate.INT32_MAX) / BIGINT
    IF v_fc < 1 OR v_nf < 1 OR v_fc > {M["INT32_MAX"]} OR v_nf > {M["INT32_MAX"]} OR p_max_store_chars < 1 THEN
        CALL {P}_fail('invalid_argument', CONCAT('caps must be positive whole numbers (max_file_chars and max_files at most {M["INT32_MAX"]}), got max_file_chars=',
            v_fc, ' max_files=', v_nf, ' max_store_chars=', COALESCE(p_max_store_chars, 'none')));
    END IF;
    CALL {P}_need_transaction();
    SET v_code = IF(p_scope IN ('shared', 'context'), p_store_code, NULL);
    SET v_ctx = IF(p_scope = 'context', p_context_key, NULL);
    SAVEPOINT {P}write;
    BEGIN
        {_HANDLER}
        SELECT agent_code INTO v_found FROM dbm_agents WHERE agent_code = p_agent_code {BIN} FOR UPDATE;
        IF v_found IS NOT NULL THEN
            UPDATE dbm_agents
               SET scope_name = p_scope, store_code = v_code, context_key = v_ctx,
                   memory_enabled = 1, updated_at = v_now, max_file_chars = v_fc,
                   max_files = v_nf, max_store_chars = p_max_store_chars
             WHERE agent_code = p_agent_code {BIN};
        ELSE
            INSERT INTO dbm_agents
                (agent_code, scope_name, store_code, context_key, max_file_chars, max_files,
                 max_store_chars, memory_enabled, created_at, updated_at)
            VALUES (p_agent_code, p_scope, v_code, v_ctx, v_fc, v_nf, p_max_store_chars, 1,
                    v_now, v_now);
        END IF;
        -- dbmemory.caps.configured_store_key
        SET v_key = CASE p_scope
            WHEN 'agent' THEN CONCAT('agent:', p_agent_code)
            WHEN 'user' THEN CONCAT('user:', p_agent_code, ':')
            WHEN 'shared' THEN CONCAT('shared:', v_code)
            WHEN 'global' THEN 'global'
            WHEN 'context' THEN CONCAT('context:', COALESCE(CONCAT('{MARKER}:', v_code), p_agent_code), ':', v_ctx, ':')
            END;
        SET v_prefix = p_scope IN ('user', 'context');
        SET v_owned = p_scope IN ('agent', 'user') OR (p_scope = 'context' AND v_code IS NULL);
        SET p_changed = 0;
        IF v_key IS NOT NULL THEN
            IF v_owned THEN
                SET v_sfc = v_fc, v_snf = v_nf, v_ssc = p_max_store_chars;
            ELSE
                -- dbmemory.stores._strictest_configured (this configuration included)
                SELECT MIN(a.max_file_chars), MIN(a.max_files), MIN(a.max_store_chars)
                  INTO v_sfc, v_snf, v_ssc
                  FROM dbm_agents a
                 WHERE a.memory_enabled = 1 AND a.scope_name = p_scope
                   AND (p_scope = 'global'
                        OR (a.store_code = v_code {BIN}
                            AND (p_scope = 'shared' OR a.context_key = v_ctx {BIN})));
            END IF;
            UPDATE dbm_stores s
               SET max_file_chars = v_sfc, max_files = v_snf, max_store_chars = v_ssc,
                   updated_at = v_now
             WHERE IF(v_prefix, CAST(SUBSTRING(s.store_key, 1, CHAR_LENGTH(v_key)) AS BINARY) = CAST(v_key AS BINARY),
                      s.store_key = v_key {BIN})
               AND s.scope_name = p_scope
               AND (p_scope IN ('shared', 'global')
                    OR (IF(v_owned, s.agent_code = p_agent_code {BIN}, s.agent_code IS NULL)
                        AND IF(v_code IS NULL, s.store_code IS NULL, s.store_code = v_code {BIN})));
            SET p_changed = ROW_COUNT();
        END IF;
        {_audit("NULL", "NULL", "NULL", "agent_enable", f"'{ADMIN_ACTOR}'", "NULL", "NULL",
                "CONCAT(p_agent_code, ':', p_scope, '; max_file_chars=', v_fc, ' max_files=', v_nf, "
                "' max_store_chars=', COALESCE(p_max_store_chars, 'none'), '; ', p_changed, ' stores')",
                "v_now")};
    END;
END"""

_OWN = own_store_condition(
    lambda prefix: f"s.store_key = CONCAT('{prefix}', p_agent_code) {BIN}",
    lambda prefix, n: (
        f"CAST(SUBSTRING(s.store_key, 1, CHAR_LENGTH(p_agent_code) + {n}) AS BINARY)"
        f" = CAST(CONCAT('{prefix}', p_agent_code, ':') AS BINARY)"
    ),
    lambda count: f"CHAR_LENGTH(s.store_key) - CHAR_LENGTH(REPLACE(s.store_key, ':', '')) = {count}",
)

_DISABLE = f"""CREATE PROCEDURE {P}disable_for_agent(
    IN p_agent_code TEXT {_U}, IN p_drop_store BOOLEAN, OUT p_dropped INT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.stores.disable_for_agent (+ drop_stores of its own stores)
    DECLARE v_found VARCHAR(200);
    DECLARE v_sid BIGINT;
    DECLARE v_skey VARCHAR(700) {_U};
    DECLARE v_files BIGINT;
    DECLARE v_chars BIGINT;
    DECLARE v_done BOOLEAN DEFAULT FALSE;
    DECLARE v_errno INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    CALL {P}_check_component(COALESCE(p_agent_code, ''), 'agent code', 'agent');
    IF p_drop_store IS NULL THEN
        CALL {P}_fail('invalid_argument', 'drop_store must be true or false, got NULL');
    END IF;
    SELECT agent_code INTO v_found FROM dbm_agents WHERE agent_code = p_agent_code {BIN};
    IF v_found IS NULL THEN
        CALL {P}_fail('not_found', CONCAT('agent ', QUOTE(p_agent_code), ' has no memory configuration: call enable_for_agent first'));
    END IF;
    CALL {P}_need_transaction();
    SET p_dropped = 0;
    SAVEPOINT {P}write;
    BEGIN
        DECLARE c_own CURSOR FOR
            SELECT s.store_id, s.store_key FROM dbm_stores s WHERE {_OWN} ORDER BY s.store_id;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
        {_HANDLER}
        UPDATE dbm_agents SET memory_enabled = 0, updated_at = v_now WHERE agent_code = p_agent_code {BIN};
        {_audit("NULL", "NULL", "NULL", "agent_disable", f"'{ADMIN_ACTOR}'", "NULL", "NULL", "p_agent_code", "v_now")};
        IF p_drop_store THEN
            -- dbmemory.stores._own_store_ids by exact key; all locked first, ascending keys
            -- through the key index (dbmemory.stores.drop_stores)
            SELECT COUNT(*) INTO v_files FROM (
                SELECT s.store_id FROM dbm_stores s WHERE {_OWN}
                 ORDER BY s.store_key FOR UPDATE) locked;
            OPEN c_own;
            drop_loop: LOOP
                FETCH c_own INTO v_sid, v_skey;
                IF v_done THEN
                    LEAVE drop_loop;
                END IF;
                SELECT COUNT(*), COALESCE(SUM(char_count), 0) INTO v_files, v_chars
                  FROM dbm_files WHERE store_id = v_sid LOCK IN SHARE MODE;
                DELETE FROM dbm_files WHERE store_id = v_sid;
                DELETE FROM dbm_stores WHERE store_id = v_sid;
                {_audit("v_sid", "v_skey", "NULL", "store_drop", f"'{ADMIN_ACTOR}'", "v_chars", "NULL", "CONCAT(v_files, ' files')", "v_now")};
                SET p_dropped = p_dropped + 1;
            END LOOP drop_loop;
            CLOSE c_own;
        END IF;
    END;
END"""


def _expiry_rule(alias: str) -> str:
    """dbmemory.statements.expiry_rule on dbm_files ``alias`` at ``v_cutoff``."""
    return (
        f"{alias}.expiry_exempt = 0 AND {alias}.last_accessed_at < v_cutoff\n"
        f"               AND NOT EXISTS (SELECT 1 FROM dbm_file_reads r\n"
        f"                                WHERE r.file_id = {alias}.file_id AND r.read_at >= v_cutoff)"
    )


_EXPIRE = f"""CREATE PROCEDURE {P}expire_files(
    IN p_days DECIMAL(12, 6), IN p_store_id BIGINT, OUT p_expired BIGINT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.expiry.expire_files in the caller's transaction, never committed here
    DECLARE c_batch_size INT DEFAULT 1000;  -- dbmemory.expiry.expire_files(batch_size=1000)
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_cutoff DATETIME(6);
    DECLARE v_batch BIGINT;
    DECLARE v_gone BIGINT;
    DECLARE v_lock VARCHAR(30);
    DECLARE v_errno INT;
    -- dbmemory.expiry.validate_days (MIN_EXPIRY_DAYS, MAX_EXPIRY_DAYS)
    IF p_days IS NULL OR p_days * 86400 < {M["TOUCH_INTERVAL_S"]} THEN
        CALL {P}_fail('invalid_argument', CONCAT('{DAYS_RULE}, got ', COALESCE(p_days, 'NULL'), ': pass e.g. days=30'));
    END IF;
    IF p_days > {M["MAX_EXPIRY_DAYS"]} THEN
        CALL {P}_fail('invalid_argument', CONCAT('days=', p_days, ' is too large: pass at most {M["MAX_EXPIRY_DAYS"]} (about 270 years)'));
    END IF;
    IF p_store_id IS NOT NULL THEN
        CALL {P}_check_store_id(p_store_id);
    END IF;
    CALL {P}_need_transaction();
    -- dbmemory.touch.TOUCH_INTERVAL
    SET v_cutoff = v_now - INTERVAL CAST(ROUND(p_days * 86400000000) AS SIGNED) MICROSECOND
                         - INTERVAL {M["TOUCH_INTERVAL_S"]} SECOND;
    SET p_expired = 0;
    SAVEPOINT {P}write;
    BEGIN
        {_HANDLER}
        CREATE TEMPORARY TABLE IF NOT EXISTS {P}expire_batch (
            file_id BIGINT NOT NULL PRIMARY KEY,
            store_id BIGINT NULL,
            file_path VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
            char_count INT NULL
        );
        CREATE TEMPORARY TABLE IF NOT EXISTS {P}expire_stores (
            store_id BIGINT NOT NULL PRIMARY KEY,
            store_key VARCHAR(700) {_U} {BIN} NULL
        );
        batch_loop: LOOP
            -- reads being recorded hold this row LOCK IN SHARE MODE (dbmemory.touch)
            SELECT lock_name INTO v_lock FROM dbm_job_locks WHERE lock_name = 'expiry' FOR UPDATE;
            DELETE FROM {P}expire_batch;
            DELETE FROM {P}expire_stores;
            -- dbmemory.expiry._expire_batch: candidates without a lock, then their store rows
            -- FOR UPDATE SKIP LOCKED (the writers' lock order: store row first; a store being
            -- written waits for the next run), the delete with the rule again, the counters
            -- of each held store moved by what is really gone (statements.ADJUST_STORE)
            -- (a cursor: a non-locking read; INSERT ... SELECT would share-lock the rows it
            -- reads at REPEATABLE READ and wait for a writer's file rows)
            BEGIN
                DECLARE v_done BOOLEAN DEFAULT FALSE;
                DECLARE v_fid BIGINT;
                DECLARE v_sid BIGINT;
                DECLARE v_fpath VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
                DECLARE v_fchars INT;
                DECLARE c_candidates CURSOR FOR
                    SELECT f.file_id, f.store_id, f.file_path, f.char_count
                      FROM dbm_files f
                     WHERE (p_store_id IS NULL OR f.store_id = p_store_id)
                       AND {_expiry_rule("f")}
                     ORDER BY f.file_id
                     LIMIT c_batch_size;
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
                SET v_batch = 0;
                OPEN c_candidates;
                candidate_loop: LOOP
                    FETCH c_candidates INTO v_fid, v_sid, v_fpath, v_fchars;
                    IF v_done THEN
                        LEAVE candidate_loop;
                    END IF;
                    INSERT INTO {P}expire_batch (file_id, store_id, file_path, char_count)
                    VALUES (v_fid, v_sid, v_fpath, v_fchars);
                    SET v_batch = v_batch + 1;
                END LOOP candidate_loop;
                CLOSE c_candidates;
            END;
            INSERT INTO {P}expire_stores (store_id, store_key)
                SELECT s.store_id, s.store_key FROM dbm_stores s
                 WHERE s.store_id IN (SELECT b.store_id FROM {P}expire_batch b)
                 ORDER BY s.store_id
                   FOR UPDATE SKIP LOCKED;
            DELETE b FROM {P}expire_batch b
              LEFT JOIN {P}expire_stores h ON h.store_id = b.store_id
             WHERE h.store_id IS NULL;
            -- STRAIGHT_JOIN: the batch drives, so only its rows are read (and locked) by
            -- primary key; a scan of dbm_files or dbm_stores would wait for rows writers hold
            -- one DELETE by primary key per candidate, its ROW_COUNT() saying whether THIS
            -- delete removed the file: a candidate read from the snapshot may already be gone
            -- (another writer deleted it and committed before the store lock was granted), and
            -- must not move the counters or be audited twice
            BEGIN
                DECLARE v_last BIGINT DEFAULT 0;
                DECLARE v_next BIGINT;
                delete_loop: LOOP
                    SET v_next = NULL;
                    SELECT MIN(b.file_id) INTO v_next FROM {P}expire_batch b WHERE b.file_id > v_last;
                    IF v_next IS NULL THEN
                        LEAVE delete_loop;
                    END IF;
                    SET v_last = v_next;
                    DELETE f FROM dbm_files f WHERE f.file_id = v_next AND {_expiry_rule("f")};
                    IF ROW_COUNT() = 0 THEN
                        DELETE FROM {P}expire_batch WHERE file_id = v_next;
                    END IF;
                END LOOP delete_loop;
            END;
            -- one UPDATE by primary key per store held (a join may scan dbm_stores and wait
            -- for a store row a writer holds, measured on MariaDB 10.11)
            BEGIN
                DECLARE v_done BOOLEAN DEFAULT FALSE;
                DECLARE v_sid BIGINT;
                DECLARE v_n BIGINT;
                DECLARE v_sum BIGINT;
                DECLARE c_gone CURSOR FOR
                    SELECT b.store_id, COUNT(*), SUM(b.char_count)
                      FROM {P}expire_batch b GROUP BY b.store_id ORDER BY b.store_id;
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
                OPEN c_gone;
                gone_loop: LOOP
                    FETCH c_gone INTO v_sid, v_n, v_sum;
                    IF v_done THEN
                        LEAVE gone_loop;
                    END IF;
                    UPDATE dbm_stores
                       SET file_count = file_count - v_n, total_chars = total_chars - v_sum,
                           updated_at = v_now
                     WHERE store_id = v_sid;
                END LOOP gone_loop;
                CLOSE c_gone;
            END;
            INSERT INTO dbm_audit_events
                (store_id, store_key, file_path, action_name, actor_name,
                 chars_before, chars_after, detail_text, created_at)
            SELECT b.store_id, h.store_key, b.file_path, 'expire', '{EXPIRY_API_ACTOR}',
                   b.char_count, NULL, NULL, v_now
              FROM {P}expire_batch b JOIN {P}expire_stores h ON h.store_id = b.store_id
             ORDER BY b.file_id;
            SET v_gone = ROW_COUNT();
            SET p_expired = p_expired + v_gone;
            DELETE fr FROM {P}expire_batch b STRAIGHT_JOIN dbm_file_reads fr ON fr.file_id = b.file_id;
            -- a batch that deleted nothing would choose the same candidates again
            IF v_batch < c_batch_size OR v_gone = 0 THEN
                LEAVE batch_loop;
            END IF;
        END LOOP batch_loop;
        purge_loop: LOOP
            DELETE FROM {P}expire_batch;
            INSERT INTO {P}expire_batch (file_id)
                SELECT r.file_id FROM dbm_file_reads r
                 WHERE r.read_at < v_cutoff
                   AND NOT EXISTS (SELECT 1 FROM dbm_files f WHERE f.file_id = r.file_id)
                 LIMIT c_batch_size FOR UPDATE SKIP LOCKED;
            SET v_batch = ROW_COUNT();
            DELETE fr FROM dbm_file_reads fr JOIN {P}expire_batch b ON b.file_id = fr.file_id;
            IF v_batch < c_batch_size THEN
                LEAVE purge_loop;
            END IF;
        END LOOP purge_loop;
        DROP TEMPORARY TABLE IF EXISTS {P}expire_batch;
        DROP TEMPORARY TABLE IF EXISTS {P}expire_stores;
    END;
END"""


def _protocol_expr() -> str:
    """dbmemory.prompts.get_memory_protocol as one expression of ASCII literals and code points."""
    lines = [
        f"CONCAT({', '.join(parts)})" if len(parts) > 1 else (parts[0] if parts else "''")
        for parts in protocol_parts(_q, lambda c: f"CONVERT(CHAR({ord(c)} USING utf32) USING utf8mb4)")
    ]
    return "CONVERT(CONCAT_WS(CHAR(10),\n        " + ",\n        ".join(lines) + f") USING utf8mb4)"


_PROTOCOL = f"""CREATE FUNCTION {P}get_memory_protocol() RETURNS TEXT {_U}
    DETERMINISTIC NO SQL SQL SECURITY DEFINER
    -- dbmemory.prompts.get_memory_protocol(), character for character
    RETURN {_protocol_expr()}"""

_BODIES = [
    ("PROCEDURE", f"{P}_fail", _FAIL),
    ("PROCEDURE", f"{P}_need_transaction", _NEED_TRX),
    ("PROCEDURE", f"{P}_check_component", _COMPONENT),
    ("PROCEDURE", f"{P}_check_path", _PATH),
    ("PROCEDURE", f"{P}_check_store_id", _CHECK_ID),
    ("PROCEDURE", f"{P}_check_caps", _CAPS_AND_STORE_ROW[0]),
    ("PROCEDURE", f"{P}_store_row_update", _CAPS_AND_STORE_ROW[1]),
    ("FUNCTION", f"{P}_store_key", _resolve()),
    ("FUNCTION", f"{P}resolve_store_id", _RESOLVE),
    ("PROCEDURE", f"{P}open_store", _OPEN),
    ("PROCEDURE", f"{P}list_files", _LIST),
    ("FUNCTION", f"{P}get_file", _GET),
    ("PROCEDURE", f"{P}put_file", _PUT),
    ("PROCEDURE", f"{P}delete_file", _DELETE),
    ("PROCEDURE", f"{P}clear_store_files", _CLEAR),
    ("PROCEDURE", f"{P}enable_for_agent", _ENABLE),
    ("PROCEDURE", f"{P}disable_for_agent", _DISABLE),
    ("PROCEDURE", f"{P}expire_files", _EXPIRE),
    ("FUNCTION", f"{P}get_memory_protocol", _PROTOCOL),
]

ROUTINES: tuple[tuple[str, str], ...] = tuple((kind, name) for kind, name, _ in _BODIES)
"""``(PROCEDURE|FUNCTION, name)`` of every routine, helpers (``dbm_memory__*``) first."""


def mysql_statements() -> list[str]:
    """The statements that (re)create the routines, for a driver, in order."""
    out: list[str] = []
    for kind, name, body in _BODIES:
        out += [f"DROP {kind} IF EXISTS {name}", body]
    return out


def mysql_script_body() -> str:
    """The routines for the mysql client (``DELIMITER //``)."""
    drops = "\n".join(f"DROP {kind} IF EXISTS {name};" for kind, name, _ in _BODIES)
    bodies = "\n\n".join(body + "//" for _, _, body in _BODIES)
    return f"{drops}\n\nDELIMITER //\n{bodies}\nDELIMITER ;\n"


def mysql_grants(role: str) -> list[str]:
    """Create ``role`` when missing and grant it EXECUTE on the public routines only."""
    public = {f"{P}{name}" for name in API_CALLS}
    grants = [
        f"GRANT EXECUTE ON {kind} {name} TO {role}"
        for kind, name, _ in _BODIES
        if name in public
    ]
    return [f"CREATE ROLE IF NOT EXISTS {role}", *grants]


def mysql_uninstall() -> list[str]:
    """Drop every routine of the API."""
    return [f"DROP {kind} IF EXISTS {name}" for kind, name, _ in reversed(_BODIES)]
