"""MySQL/MariaDB API, the agent configuration calls: ``enable_for_agent`` and
``disable_for_agent`` (mirroring :mod:`dbmemory.store.agents` and :mod:`dbmemory.store.drop`),
for :mod:`dbmemory.sqlgen.mysql.api`."""

from __future__ import annotations

from dbmemory.core.keys import SCOPES
from dbmemory.sqlgen.api_common import (
    ADMIN_ACTOR,
    MARKER,
    RESERVED,
    SCOPE_LIST,
    own_store_condition,
)
from dbmemory.sqlgen.api_common import (
    MIRRORED as M,
)
from dbmemory.sqlgen.mysql.rules import BIN, HANDLER, NUMBER, P, U, audit, shown

__all__ = [
    "ENABLE",
    "DISABLE",
]


ENABLE = f"""CREATE PROCEDURE {P}enable_for_agent(
    IN p_agent_code TEXT {U}, IN p_scope TEXT {U}, IN p_store_code TEXT {U},
    IN p_context_key TEXT {U}, IN p_max_file_chars {NUMBER}, IN p_max_files {NUMBER},
    IN p_max_store_chars {NUMBER}, OUT p_changed INT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.agents.enable_for_agent: upsert the configuration (NULL cap = default), set the
    -- caps of the existing stores it names; p_changed = how many stores got them
    DECLARE v_fc {NUMBER} DEFAULT COALESCE(p_max_file_chars, {M["DEFAULT_MAX_FILE_CHARS"]});  -- dbmemory.core.model.DEFAULT_MAX_FILE_CHARS
    DECLARE v_nf {NUMBER} DEFAULT COALESCE(p_max_files, {M["DEFAULT_MAX_FILES"]});  -- dbmemory.core.model.DEFAULT_MAX_FILES
    DECLARE v_sfc INT;
    DECLARE v_snf INT;
    DECLARE v_ssc BIGINT;
    DECLARE v_code VARCHAR(200) {U};
    DECLARE v_ctx VARCHAR(200) {U};
    DECLARE v_key VARCHAR(700) {U};
    DECLARE v_prefix BOOLEAN;
    DECLARE v_owned BOOLEAN;
    DECLARE v_found VARCHAR(200);
    DECLARE v_errno INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    -- dbmemory.store.agents.refuse_reserved_names
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
    -- dbmemory.core.model.Caps: positive, within INTEGER (dbmemory.core.checks.INT32_MAX) / BIGINT
    IF v_fc < 1 OR v_nf < 1 OR v_fc > {M["INT32_MAX"]} OR v_nf > {M["INT32_MAX"]} OR p_max_store_chars < 1
       OR v_fc <> FLOOR(v_fc) OR v_nf <> FLOOR(v_nf) OR p_max_store_chars <> FLOOR(p_max_store_chars)
       OR p_max_store_chars > {M["INT64_MAX"]} THEN
        CALL {P}_fail('invalid_argument', CONCAT('caps must be positive whole numbers (max_file_chars and max_files at most {M["INT32_MAX"]}), got max_file_chars=',
            {shown("v_fc")}, ' max_files=', {shown("v_nf")}, ' max_store_chars=', COALESCE({shown("p_max_store_chars")}, 'none')));
    END IF;
    CALL {P}_need_transaction();
    SET v_code = IF(p_scope IN ('shared', 'context'), p_store_code, NULL);
    SET v_ctx = IF(p_scope = 'context', p_context_key, NULL);
    SAVEPOINT {P}write;
    BEGIN
        {HANDLER}
        SELECT agent_code INTO v_found FROM dbm_agents WHERE agent_code = p_agent_code {BIN} FOR UPDATE;
        IF v_found IS NOT NULL THEN
            UPDATE dbm_agents
               SET scope_name = p_scope, store_code = v_code, context_key = v_ctx,
                   memory_enabled = 1, updated_at = v_now, max_file_chars = v_fc,
                   max_files = v_nf, max_store_chars = p_max_store_chars
             WHERE agent_code = p_agent_code {BIN};
        ELSE
            BEGIN
                -- another transaction configured the agent at the same time (the Python API's
                -- ConflictError for the same race)
                DECLARE EXIT HANDLER FOR 1062
                    CALL {P}_fail('conflict', CONCAT('agent ', QUOTE(p_agent_code),
                        ' was configured by another transaction at the same time: roll back and retry'));
                INSERT INTO dbm_agents
                    (agent_code, scope_name, store_code, context_key, max_file_chars, max_files,
                     max_store_chars, memory_enabled, created_at, updated_at)
                VALUES (p_agent_code, p_scope, v_code, v_ctx, v_fc, v_nf, p_max_store_chars, 1,
                        v_now, v_now);
            END;
        END IF;
        -- dbmemory.store.caps.configured_store_key
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
                -- dbmemory.store.agents._strictest_configured (this configuration included)
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
        {audit("NULL", "NULL", "NULL", "agent_enable", f"'{ADMIN_ACTOR}'", "NULL", "NULL",
                f"CONCAT(p_agent_code, ':', p_scope, '; max_file_chars=', {shown('v_fc')}, ' max_files=', {shown('v_nf')}, "
                f"' max_store_chars=', COALESCE({shown('p_max_store_chars')}, 'none'), '; ', p_changed, ' stores')",
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


DISABLE = f"""CREATE PROCEDURE {P}disable_for_agent(
    IN p_agent_code TEXT {U}, IN p_drop_store BOOLEAN, OUT p_dropped INT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.agents.disable_for_agent (+ drop_stores of its own stores)
    DECLARE v_found VARCHAR(200);
    DECLARE v_sid BIGINT;
    DECLARE v_skey VARCHAR(700) {U};
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
        {HANDLER}
        UPDATE dbm_agents SET memory_enabled = 0, updated_at = v_now WHERE agent_code = p_agent_code {BIN};
        {audit("NULL", "NULL", "NULL", "agent_disable", f"'{ADMIN_ACTOR}'", "NULL", "NULL", "p_agent_code", "v_now")};
        IF p_drop_store THEN
            -- dbmemory.store.drop.own_store_ids by exact key; all locked first, ascending keys
            -- through the key index (dbmemory.store.agents.drop_stores)
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
                {audit("v_sid", "v_skey", "NULL", "store_drop", f"'{ADMIN_ACTOR}'", "v_chars", "NULL", "CONCAT(v_files, ' files')", "v_now")};
                SET p_dropped = p_dropped + 1;
            END LOOP drop_loop;
            CLOSE c_own;
        END IF;
    END;
END"""
