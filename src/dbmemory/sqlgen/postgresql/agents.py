"""PostgreSQL API, the agent configuration calls: ``enable_for_agent`` and ``disable_for_agent``
(mirroring :mod:`dbmemory.store.agents` and :mod:`dbmemory.store.drop`), for
:mod:`dbmemory.sqlgen.postgresql.api`."""

from __future__ import annotations

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
from dbmemory.sqlgen.postgresql.rules import SCOPES_SQL, S, T

__all__ = [
    "ENABLE",
    "ENABLE_REFERENCE",
    "DISABLE",
]


_CAPS_TEXT = (
    "format('max_file_chars=%s max_files=%s max_store_chars=%s', v_fc, v_nf, "
    "coalesce(p_max_store_chars::text, 'none'))"
)


ENABLE = f"""CREATE OR REPLACE FUNCTION {S}.enable_for_agent(
    p_agent_code text,
    p_scope text DEFAULT 'agent',
    p_store_code text DEFAULT NULL,
    p_context_key text DEFAULT NULL,
    p_max_file_chars bigint DEFAULT NULL,
    p_max_files bigint DEFAULT NULL,
    p_max_store_chars bigint DEFAULT NULL
) RETURNS integer LANGUAGE plpgsql AS $f$
-- dbmemory.store.agents.enable_for_agent: upsert the configuration (NULL cap = default), set the caps
-- of the existing stores it names; returns how many stores got them
DECLARE
    v_fc bigint := coalesce(p_max_file_chars, {M["DEFAULT_MAX_FILE_CHARS"]});  -- dbmemory.core.model.DEFAULT_MAX_FILE_CHARS
    v_nf bigint := coalesce(p_max_files, {M["DEFAULT_MAX_FILES"]});  -- dbmemory.core.model.DEFAULT_MAX_FILES
    v_sfc integer;
    v_snf integer;
    v_ssc bigint;
    v_code text;
    v_ctx text;
    v_key text;
    v_prefix boolean := false;
    v_owned boolean;
    v_now timestamptz := clock_timestamp();
    v_changed integer := 0;
BEGIN
    -- dbmemory.store.agents.refuse_reserved_names
    IF p_scope = '{RESERVED}' THEN
        PERFORM {S}._fail('invalid_scope',
            'scope ''{RESERVED}'' holds the stores dbmemory owns itself (user profiles, memory items, organisation memory) and no agent can use it: pick one of {SCOPE_LIST}');
    END IF;
    IF lower(p_agent_code) = '{RESERVED}' OR lower(p_store_code) = '{RESERVED}' THEN
        PERFORM {S}._fail('invalid_scope', format(
            '%L is the name of the namespace dbmemory keeps for its own stores (user profiles, memory items, organisation memory): choose another name',
            CASE WHEN lower(p_agent_code) = '{RESERVED}' THEN p_agent_code ELSE p_store_code END));
    END IF;
    PERFORM {S}._check_component(coalesce(p_agent_code, ''), 'agent code', p_scope);
    IF p_scope IS NULL OR p_scope NOT IN ({SCOPES_SQL}) THEN
        PERFORM {S}._fail('invalid_scope', format(
            'scope %L is not one of {SCOPE_LIST}: pick one of them', p_scope));
    END IF;
    IF p_store_code IS NOT NULL THEN
        PERFORM {S}._check_component(p_store_code, 'store code', p_scope);
    END IF;
    IF p_context_key IS NOT NULL THEN
        PERFORM {S}._check_component(p_context_key, 'context key', p_scope);
    END IF;
    IF p_scope = 'shared' AND p_store_code IS NULL THEN
        PERFORM {S}._fail('missing_context_key',
            'scope ''shared'' needs store_code: pass the shared store''s code');
    END IF;
    IF p_scope = 'context' AND p_context_key IS NULL THEN
        PERFORM {S}._fail('missing_context_key',
            'scope ''context'' needs context_key: pass the run-context key that names the store');
    END IF;
    -- dbmemory.core.model.Caps: positive, within INTEGER / BIGINT
    IF v_fc < 1 OR v_nf < 1 OR v_fc > {M["INT32_MAX"]} OR v_nf > {M["INT32_MAX"]} OR p_max_store_chars < 1 THEN
        PERFORM {S}._fail('invalid_argument', format(
            'caps must be positive whole numbers (max_file_chars and max_files at most {M["INT32_MAX"]}), got max_file_chars=%s max_files=%s max_store_chars=%s',
            v_fc, v_nf, coalesce(p_max_store_chars::text, 'none')));
    END IF;
    v_code := CASE WHEN p_scope IN ('shared', 'context') THEN p_store_code END;
    v_ctx := CASE WHEN p_scope = 'context' THEN p_context_key END;
    PERFORM 1 FROM {T}.dbm_agents WHERE agent_code = p_agent_code FOR UPDATE;
    IF FOUND THEN
        UPDATE {T}.dbm_agents
           SET scope_name = p_scope, store_code = v_code, context_key = v_ctx,
               memory_enabled = true, updated_at = v_now, max_file_chars = v_fc,
               max_files = v_nf, max_store_chars = p_max_store_chars
         WHERE agent_code = p_agent_code;
    ELSE
        BEGIN
            INSERT INTO {T}.dbm_agents
                (agent_code, scope_name, store_code, context_key, max_file_chars, max_files,
                 max_store_chars, memory_enabled, created_at, updated_at)
            VALUES (p_agent_code, p_scope, v_code, v_ctx, v_fc, v_nf, p_max_store_chars, true,
                    v_now, v_now);
        EXCEPTION WHEN unique_violation THEN
            -- another transaction configured the agent at the same time (the Python API's
            -- ConflictError for the same race)
            PERFORM {S}._fail('conflict', format(
                'agent %L was configured by another transaction at the same time: roll back and retry',
                p_agent_code));
        END;
    END IF;
    -- dbmemory.store.caps.configured_store_key
    v_key := CASE p_scope
        WHEN 'agent' THEN 'agent:' || p_agent_code
        WHEN 'user' THEN 'user:' || p_agent_code || ':'
        WHEN 'shared' THEN 'shared:' || v_code
        WHEN 'global' THEN 'global'
        WHEN 'context' THEN 'context:' || coalesce('{MARKER}:' || v_code, p_agent_code) || ':' || v_ctx || ':'
        END;
    v_prefix := p_scope IN ('user', 'context');
    v_owned := p_scope IN ('agent', 'user') OR (p_scope = 'context' AND v_code IS NULL);
    IF v_key IS NOT NULL THEN
        IF v_owned THEN
            v_sfc := v_fc; v_snf := v_nf; v_ssc := p_max_store_chars;
        ELSE
            -- dbmemory.store.agents._strictest_configured: the strictest enabled configurations
            -- naming the same stores (this one included)
            SELECT min(a.max_file_chars), min(a.max_files), min(a.max_store_chars)
              INTO v_sfc, v_snf, v_ssc
              FROM {T}.dbm_agents a
             WHERE a.memory_enabled AND a.scope_name = p_scope
               AND (p_scope = 'global'
                    OR (a.store_code = v_code
                        AND (p_scope = 'shared' OR a.context_key = v_ctx)));
        END IF;
        UPDATE {T}.dbm_stores s
           SET max_file_chars = v_sfc, max_files = v_snf, max_store_chars = v_ssc,
               updated_at = v_now
         WHERE (CASE WHEN v_prefix THEN substr(s.store_key, 1, length(v_key)) = v_key
                     ELSE s.store_key = v_key END)
           AND s.scope_name = p_scope
           AND (p_scope IN ('shared', 'global')
                OR ((CASE WHEN v_owned THEN s.agent_code = p_agent_code ELSE s.agent_code IS NULL END)
                    AND (CASE WHEN v_code IS NULL THEN s.store_code IS NULL ELSE s.store_code = v_code END)));
        GET DIAGNOSTICS v_changed = ROW_COUNT;
    END IF;
    PERFORM {S}._audit(NULL, NULL, NULL, 'agent_enable', '{ADMIN_ACTOR}', NULL, NULL,
        format('%s:%s; %s; %s stores', p_agent_code, p_scope, {_CAPS_TEXT}, v_changed), v_now);
    RETURN v_changed;
END
$f$"""


_OWN = own_store_condition(
    lambda prefix: f"s.store_key = '{prefix}' || p_agent_code",
    lambda prefix, n: f"substr(s.store_key, 1, length(p_agent_code) + {n}) = '{prefix}' || p_agent_code || ':'",
    lambda count: f"length(s.store_key) - length(replace(s.store_key, ':', '')) = {count}",
)


DISABLE = f"""CREATE OR REPLACE FUNCTION {S}.disable_for_agent(
    p_agent_code text, p_drop_store boolean DEFAULT false
) RETURNS integer LANGUAGE plpgsql AS $f$
-- dbmemory.store.agents.disable_for_agent (+ drop_stores of its own stores): returns stores dropped
DECLARE
    v_now timestamptz := clock_timestamp();
    v_store record;
    v_dropped integer := 0;
    v_files bigint;
    v_chars bigint;
BEGIN
    PERFORM {S}._check_component(coalesce(p_agent_code, ''), 'agent code', 'agent');
    IF p_drop_store IS NULL THEN
        PERFORM {S}._fail('invalid_argument', 'drop_store must be true or false, got NULL');
    END IF;
    PERFORM 1 FROM {T}.dbm_agents WHERE agent_code = p_agent_code;
    IF NOT FOUND THEN
        PERFORM {S}._fail('not_found', format(
            'agent %L has no memory configuration: call enable_for_agent first', p_agent_code));
    END IF;
    UPDATE {T}.dbm_agents SET memory_enabled = false, updated_at = v_now
     WHERE agent_code = p_agent_code;
    PERFORM {S}._audit(NULL, NULL, NULL, 'agent_disable', '{ADMIN_ACTOR}', NULL, NULL,
                       p_agent_code, v_now);
    IF NOT p_drop_store THEN
        RETURN 0;
    END IF;
    -- dbmemory.store.drop.own_store_ids: agent:<A>, user:<A>:<U>, context:<A>:<K>:<V>, by exact
    -- key; all locked first, in ascending key order (dbmemory.store.agents.drop_stores)
    PERFORM 1 FROM {T}.dbm_stores s WHERE {_OWN}
     ORDER BY s.store_key FOR UPDATE;
    FOR v_store IN SELECT s.store_id, s.store_key FROM {T}.dbm_stores s WHERE {_OWN}
                    ORDER BY s.store_id
    LOOP
        SELECT count(*), coalesce(sum(char_count), 0) INTO v_files, v_chars
          FROM {T}.dbm_files WHERE store_id = v_store.store_id;
        DELETE FROM {T}.dbm_files WHERE store_id = v_store.store_id;
        DELETE FROM {T}.dbm_stores WHERE store_id = v_store.store_id;
        PERFORM {S}._audit(v_store.store_id, v_store.store_key, NULL, 'store_drop', '{ADMIN_ACTOR}',
                           v_chars, NULL, v_files || ' files', v_now);
        v_dropped := v_dropped + 1;
    END LOOP;
    RETURN v_dropped;
END
$f$"""


ENABLE_REFERENCE = f"""CREATE OR REPLACE FUNCTION {S}.enable_for_agent(
    p_agent_code text,
    p_scope text,
    p_store_code text,
    p_context_key text,
    p_update_profile boolean,
    p_max_file_chars bigint,
    p_max_store_chars bigint,
    p_max_files bigint
) RETURNS integer LANGUAGE plpgsql AS $f$
-- the reference PL/SQL API's enable_for_agent, all eight arguments in its order (file chars,
-- store chars, files): a positional reference call sets each cap to its own value; the caps go
-- to dbmemory's enable_for_agent by name. Every argument is required, so no call of dbmemory's
-- own seven-argument form can match this one. p_update_profile changes nothing (dbmemory keeps
-- no agent profile or tool tag in the database)
BEGIN
    RETURN {S}.enable_for_agent(p_agent_code, p_scope, p_store_code, p_context_key,
                                p_max_file_chars => p_max_file_chars,
                                p_max_files => p_max_files,
                                p_max_store_chars => p_max_store_chars);
END
$f$"""
