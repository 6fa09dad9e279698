"""Oracle API, the agent configuration calls of the package body: ``enable_for_agent`` and
``disable_for_agent`` (mirroring :mod:`dbmemory.store.agents` and :mod:`dbmemory.store.drop`),
for :mod:`dbmemory.sqlgen.oracle.api`."""

from __future__ import annotations

from dbmemory.sqlgen.api_common import ADMIN_ACTOR, MARKER, RESERVED, SCOPE_LIST
from dbmemory.sqlgen.api_common import MIRRORED as M
from dbmemory.sqlgen.oracle.rules import OWN, audit

__all__ = [
    "AGENTS",
]


AGENTS = f"""  FUNCTION enable_for_agent_n (
    p_agent_code IN VARCHAR2, p_scope IN VARCHAR2 DEFAULT c_scope_agent,
    p_store_code IN VARCHAR2 DEFAULT NULL, p_context_key IN VARCHAR2 DEFAULT NULL,
    p_max_file_chars IN NUMBER DEFAULT NULL, p_max_files IN NUMBER DEFAULT NULL,
    p_max_store_chars IN NUMBER DEFAULT NULL
  ) RETURN NUMBER IS
    -- dbmemory.store.agents.enable_for_agent: upsert the configuration (NULL cap = default), set the
    -- caps of the existing stores it names; returns how many stores got them
    v_fc      NUMBER := NVL(p_max_file_chars, {M["DEFAULT_MAX_FILE_CHARS"]});  -- dbmemory.core.model.DEFAULT_MAX_FILE_CHARS
    v_nf      NUMBER := NVL(p_max_files, {M["DEFAULT_MAX_FILES"]});  -- dbmemory.core.model.DEFAULT_MAX_FILES
    v_sfc     NUMBER;
    v_snf     NUMBER;
    v_ssc     NUMBER;
    v_code    VARCHAR2(200 CHAR);
    v_ctx     VARCHAR2(200 CHAR);
    v_key     VARCHAR2(700 CHAR);
    v_prefix  NUMBER;
    v_owned   NUMBER;
    v_found   NUMBER;
    v_changed NUMBER := 0;
    v_now     TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  BEGIN
    -- dbmemory.store.agents.refuse_reserved_names
    IF same(p_scope, '{RESERVED}') THEN
      fail('invalid_scope', 'scope ''{RESERVED}'' holds the stores dbmemory owns itself (user profiles, memory items, organisation memory) and no agent can use it: pick one of {SCOPE_LIST}');
    END IF;
    IF same(LOWER(p_agent_code), '{RESERVED}') OR same(LOWER(p_store_code), '{RESERVED}') THEN
      fail('invalid_scope', 'that name is the name of the namespace dbmemory keeps for its own stores (user profiles, memory items, organisation memory): choose another name');
    END IF;
    v_code := component(p_agent_code, 'agent code', p_scope);
    IF NOT (same(p_scope, c_scope_agent) OR same(p_scope, c_scope_user) OR same(p_scope, c_scope_session)
            OR same(p_scope, c_scope_shared) OR same(p_scope, c_scope_global) OR same(p_scope, c_scope_context)) THEN
      fail('invalid_scope', 'scope ''' || p_scope || ''' is not one of {SCOPE_LIST}: pick one of them');
    END IF;
    IF p_store_code IS NOT NULL THEN
      v_code := component(p_store_code, 'store code', p_scope);
    END IF;
    IF p_context_key IS NOT NULL THEN
      v_ctx := component(p_context_key, 'context key', p_scope);
    END IF;
    IF same(p_scope, c_scope_shared) AND p_store_code IS NULL THEN
      fail('missing_context_key', 'scope ''shared'' needs store_code: pass the shared store''s code');
    END IF;
    IF same(p_scope, c_scope_context) AND p_context_key IS NULL THEN
      fail('missing_context_key', 'scope ''context'' needs context_key: pass the run-context key that names the store');
    END IF;
    -- dbmemory.core.model.Caps: positive whole numbers within INTEGER / BIGINT
    IF v_fc < 1 OR v_nf < 1 OR v_fc > {M["INT32_MAX"]} OR v_nf > {M["INT32_MAX"]} OR p_max_store_chars < 1
       OR v_fc <> TRUNC(v_fc) OR v_nf <> TRUNC(v_nf) OR p_max_store_chars <> TRUNC(p_max_store_chars) THEN
      fail('invalid_argument', 'caps must be positive whole numbers, got max_file_chars=' || v_fc
        || ' max_files=' || v_nf || ' max_store_chars=' || NVL(TO_CHAR(p_max_store_chars), 'none'));
    END IF;
    v_code := CASE WHEN p_scope IN (c_scope_shared, c_scope_context) THEN p_store_code END;
    v_ctx := CASE WHEN p_scope = c_scope_context THEN p_context_key END;
    SELECT COUNT(*) INTO v_found FROM dbm_agents WHERE agent_code = p_agent_code;
    IF v_found > 0 THEN
      FOR r IN (SELECT agent_code FROM dbm_agents WHERE agent_code = p_agent_code FOR UPDATE) LOOP
        NULL;
      END LOOP;
      UPDATE dbm_agents
         SET scope_name = p_scope, store_code = v_code, context_key = v_ctx, memory_enabled = 1,
             updated_at = v_now, max_file_chars = v_fc, max_files = v_nf,
             max_store_chars = p_max_store_chars
       WHERE agent_code = p_agent_code;
    ELSE
      BEGIN
        INSERT INTO dbm_agents
          (agent_code, scope_name, store_code, context_key, max_file_chars, max_files,
           max_store_chars, memory_enabled, created_at, updated_at)
        VALUES (p_agent_code, p_scope, v_code, v_ctx, v_fc, v_nf, p_max_store_chars, 1, v_now, v_now);
      EXCEPTION
        WHEN DUP_VAL_ON_INDEX THEN
          -- another transaction configured the agent at the same time (the Python API's
          -- ConflictError for the same race)
          fail('conflict', 'agent ''' || p_agent_code || ''' was configured by another transaction at the same time: roll back and retry');
      END;
    END IF;
    -- dbmemory.store.caps.configured_store_key
    v_key := CASE p_scope
      WHEN c_scope_agent THEN 'agent:' || p_agent_code
      WHEN c_scope_user THEN 'user:' || p_agent_code || ':'
      WHEN c_scope_shared THEN 'shared:' || v_code
      WHEN c_scope_global THEN 'global'
      WHEN c_scope_context THEN 'context:'
        || CASE WHEN v_code IS NOT NULL THEN '{MARKER}:' || v_code ELSE p_agent_code END
        || ':' || v_ctx || ':'
      END;
    v_prefix := CASE WHEN p_scope IN (c_scope_user, c_scope_context) THEN 1 ELSE 0 END;
    v_owned := CASE WHEN p_scope IN (c_scope_agent, c_scope_user)
                      OR (p_scope = c_scope_context AND v_code IS NULL) THEN 1 ELSE 0 END;
    IF v_key IS NOT NULL THEN
      IF v_owned = 1 THEN
        v_sfc := v_fc; v_snf := v_nf; v_ssc := p_max_store_chars;
      ELSE
        -- dbmemory.store.agents._strictest_configured (this configuration included)
        SELECT MIN(a.max_file_chars), MIN(a.max_files), MIN(a.max_store_chars)
          INTO v_sfc, v_snf, v_ssc
          FROM dbm_agents a
         WHERE a.memory_enabled = 1 AND a.scope_name = p_scope
           AND (p_scope = c_scope_global
                OR (a.store_code = v_code AND (p_scope = c_scope_shared OR a.context_key = v_ctx)));
      END IF;
      UPDATE dbm_stores s
         SET max_file_chars = v_sfc, max_files = v_snf, max_store_chars = v_ssc, updated_at = v_now
       WHERE ((v_prefix = 1 AND SUBSTR(s.store_key, 1, LENGTH(v_key)) = v_key)
              OR (v_prefix = 0 AND s.store_key = v_key))
         AND s.scope_name = p_scope
         AND (p_scope IN (c_scope_shared, c_scope_global)
              OR (((v_owned = 1 AND s.agent_code = p_agent_code) OR (v_owned = 0 AND s.agent_code IS NULL))
                  AND ((v_code IS NULL AND s.store_code IS NULL) OR s.store_code = v_code)));
      v_changed := SQL%ROWCOUNT;
    END IF;
    {audit("NULL", "NULL", "NULL", "agent_enable", f"'{ADMIN_ACTOR}'", "NULL", "NULL",
            "p_agent_code || ':' || p_scope || '; max_file_chars=' || v_fc || ' max_files=' || v_nf"
            " || ' max_store_chars=' || NVL(TO_CHAR(p_max_store_chars), 'none') || '; ' || v_changed || ' stores'")};
    RETURN v_changed;
  END enable_for_agent_n;

  FUNCTION disable_for_agent_n (p_agent_code IN VARCHAR2, p_drop_store IN NUMBER DEFAULT 0)
    RETURN NUMBER IS
    -- dbmemory.store.agents.disable_for_agent (+ drop_stores of its own stores); p_drop_store 1/0
    v_found   NUMBER;
    v_files   NUMBER;
    v_chars   NUMBER;
    v_dropped NUMBER := 0;
    v_now     TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
    v_code    VARCHAR2(200 CHAR);
  BEGIN
    v_code := component(p_agent_code, 'agent code', c_scope_agent);
    IF p_drop_store IS NULL OR p_drop_store NOT IN (0, 1) THEN
      fail('invalid_argument', 'drop_store must be 1 or 0');
    END IF;
    SELECT COUNT(*) INTO v_found FROM dbm_agents WHERE agent_code = p_agent_code;
    IF v_found = 0 THEN
      fail('not_found', 'agent ''' || p_agent_code || ''' has no memory configuration: call enable_for_agent first');
    END IF;
    UPDATE dbm_agents SET memory_enabled = 0, updated_at = v_now WHERE agent_code = p_agent_code;
    {audit("NULL", "NULL", "NULL", "agent_disable", f"'{ADMIN_ACTOR}'", "NULL", "NULL", "p_agent_code")};
    IF p_drop_store = 0 THEN
      RETURN 0;
    END IF;
    -- dbmemory.store.drop.own_store_ids by exact key; all locked first, ascending keys
    FOR s IN (SELECT s.store_id FROM dbm_stores s WHERE {OWN}
               ORDER BY s.store_key FOR UPDATE) LOOP
      NULL;
    END LOOP;
    FOR s IN (SELECT s.store_id, s.store_key FROM dbm_stores s WHERE {OWN}
               ORDER BY s.store_id) LOOP
      SELECT COUNT(*), NVL(SUM(char_count), 0) INTO v_files, v_chars
        FROM dbm_files WHERE store_id = s.store_id;
      DELETE FROM dbm_files WHERE store_id = s.store_id;
      DELETE FROM dbm_stores WHERE store_id = s.store_id;
      {audit("s.store_id", "s.store_key", "NULL", "store_drop", f"'{ADMIN_ACTOR}'", "v_chars", "NULL", "v_files || ' files'")};
      v_dropped := v_dropped + 1;
    END LOOP;
    RETURN v_dropped;
  END disable_for_agent_n;

"""
"""The package body's agent configuration functions, each followed by a blank line (the body drops blank lines)."""
