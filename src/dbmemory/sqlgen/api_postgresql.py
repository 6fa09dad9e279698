"""The in-database API for PostgreSQL: schema ``dbm_memory`` of PL/pgSQL functions, ``SECURITY
DEFINER`` with a fixed ``search_path`` (see :mod:`dbmemory.sqlgen.api`)."""

from __future__ import annotations

from dbmemory.sqlgen.api_common import (
    ADMIN_ACTOR,
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
from dbmemory.paths import ROOT
from dbmemory.sqlgen.api_postgresql_rules import (
    S,
    _SCOPES_SQL,
    _q,
    _FAIL,
    _COMPONENT,
    _PATH,
    _HASH,
    _CHECK_ID,
    _AUDIT,
    _CAPS_AND_STORE_ROW,
    _LOCK_STORE,
    _CREATION_CAPS,
    _KEY_PARAMS,
    _STORE_KEY,
)

__all__ = ["pg_statements", "pg_public_functions", "GRANT_BLOCK"]

_RESOLVE = f"""CREATE OR REPLACE FUNCTION {S}.resolve_store_id(
{_KEY_PARAMS}
) RETURNS bigint LANGUAGE plpgsql STABLE AS $f$
-- dbmemory.stores.resolve_store_id: build_store_key, then find_store_id
DECLARE
    v_key text := {S}._store_key(p_scope, p_agent_code, p_user_id, p_session_id, p_store_code,
                                 p_context_key, p_context_value);
    v_id bigint;
BEGIN
    SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key;
    IF v_id IS NULL THEN
        PERFORM {S}._fail('not_found', format(
            'store %s does not exist (it is created on its first write)', v_key));
    END IF;
    RETURN v_id;
END
$f$"""

_OPEN = f"""CREATE OR REPLACE FUNCTION {S}.open_store(
{_KEY_PARAMS}
) RETURNS bigint LANGUAGE plpgsql AS $f$
-- dbmemory.store_lock.get_or_create_store with a StoreRef without caps: the store id, the row
-- created when missing with dbmemory.caps.creation_caps (the strictest enabled configurations
-- that name the store, else the defaults); no audit event, as in Python
DECLARE
    v_key text := {S}._store_key(p_scope, p_agent_code, p_user_id, p_session_id, p_store_code,
                                 p_context_key, p_context_value);
    v_id bigint;
    v_fc integer;
    v_nf integer;
    v_sc bigint;
    v_now timestamptz := clock_timestamp();
BEGIN
    SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key;
    IF v_id IS NOT NULL THEN
        RETURN v_id;
    END IF;
    {_CREATION_CAPS}
    INSERT INTO dbm_stores
        (store_key, scope_name, agent_code, store_code, created_at, updated_at,
         max_file_chars, max_files, max_store_chars, file_count, total_chars)
    VALUES (v_key, p_scope,
            CASE WHEN p_scope IN ('agent', 'user', 'session')
                      OR (p_scope = 'context' AND p_store_code IS NULL) THEN p_agent_code END,
            CASE WHEN p_scope IN ('shared', 'context') THEN p_store_code END,
            v_now, v_now, coalesce(v_fc, {M["DEFAULT_MAX_FILE_CHARS"]}),
            coalesce(v_nf, {M["DEFAULT_MAX_FILES"]}), v_sc, 0, 0)
    ON CONFLICT (store_key) DO NOTHING;
    SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key;
    IF v_id IS NULL THEN
        PERFORM {S}._fail('conflict', format(
            'store %s was created by a transaction that committed after this one took its snapshot (REPEATABLE READ or SERIALIZABLE): roll back and retry',
            v_key));
    END IF;
    RETURN v_id;
END
$f$"""

_LIST = f"""CREATE OR REPLACE FUNCTION {S}.list_files(p_store_id bigint)
RETURNS TABLE (path text, chars integer, version integer, created_at timestamptz,
               updated_at timestamptz, last_accessed_at timestamptz)
LANGUAGE plpgsql STABLE AS $f$
-- dbmemory.files.list_files: every file without its text, by path in code-point order
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    RETURN QUERY
        SELECT f.file_path::text, f.char_count, f.version_no, f.created_at, f.updated_at,
               f.last_accessed_at
          FROM dbm_files f
         WHERE f.store_id = p_store_id
         ORDER BY f.file_path COLLATE "C";
END
$f$"""

_GET = f"""CREATE OR REPLACE FUNCTION {S}.get_file(p_store_id bigint, p_path text) RETURNS text
LANGUAGE plpgsql STABLE AS $f$
-- dbmemory.files.get_file (touch=False): the text, '' for an empty file
DECLARE
    v_body text;
    v_found boolean;
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    PERFORM {S}._check_path(p_path);
    SELECT true, f.body INTO v_found, v_body FROM dbm_files f
     WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(p_path);
    IF v_found IS NULL THEN
        PERFORM {S}._fail('not_found', format('the path %s does not exist', p_path));
    END IF;
    RETURN coalesce(v_body, '');
END
$f$"""

_PUT = f"""CREATE OR REPLACE FUNCTION {S}.put_file(
    p_store_id bigint, p_path text, p_text text, p_actor text DEFAULT '{ADMIN_ACTOR}'
) RETURNS integer LANGUAGE plpgsql AS $f$
-- dbmemory.files.put_file (enforce_caps, no expected version, expiry flag kept): create or
-- replace; returns the file's version after the write
DECLARE
    v_store record;
    v_hash text;
    v_file record;
    v_chars bigint;
    v_now timestamptz := clock_timestamp();
    v_anc text[] := '{{}}';
    v_bad bigint;
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    PERFORM {S}._check_path(p_path);
    IF p_path = '{ROOT}' THEN
        PERFORM {S}._fail('invalid_path', 'cannot write the memory root {ROOT}: name a file or directory inside it');
    END IF;
    IF p_text IS NULL THEN
        PERFORM {S}._fail('invalid_argument', 'file text must be text, got NULL: pass '''' for an empty file');
    END IF;
    v_hash := {S}._path_hash(p_path);
    v_chars := length(p_text);
    SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
    SELECT f.file_id, f.char_count, f.version_no, f.body INTO v_file
      FROM dbm_files f WHERE f.store_id = p_store_id AND f.path_hash = v_hash FOR UPDATE;
    IF v_file.file_id IS NULL THEN
        IF v_chars > v_store.max_file_chars THEN
            PERFORM {S}._check_caps(p_path, v_store.max_file_chars, v_store.max_files,
                v_store.max_store_chars, v_store.file_count, v_store.total_chars, v_chars, NULL);
        END IF;
        -- dbmemory.store_lock._check_new_file_shape
        FOR i IN {len(ROOT) + 2} .. length(p_path) LOOP
            IF substr(p_path, i, 1) = '/' THEN
                v_anc := v_anc || {S}._path_hash(substr(p_path, 1, i - 1));
            END IF;
        END LOOP;
        SELECT count(*) INTO v_bad FROM dbm_files
         WHERE store_id = p_store_id AND path_hash = ANY (v_anc);
        IF v_bad > 0 THEN
            PERFORM {S}._fail('invalid_path', format(
                'cannot use %s: a file exists where one of its parent directories would be; a path cannot be a file and a directory at once: choose another path',
                p_path));
        END IF;
        IF {S}._has_files_under(p_store_id, p_path) THEN
            PERFORM {S}._fail('invalid_path', format(
                '%s is a directory: choose a file path inside it or another name', p_path));
        END IF;
        PERFORM {S}._check_caps(p_path, v_store.max_file_chars, v_store.max_files,
            v_store.max_store_chars, v_store.file_count, v_store.total_chars, v_chars, NULL);
        INSERT INTO dbm_files
            (store_id, file_path, path_hash, body, char_count, version_no, expiry_exempt,
             created_at, updated_at, last_accessed_at)
        VALUES (p_store_id, p_path, v_hash, nullif(p_text, ''), v_chars, 1, false,
                v_now, v_now, v_now);
        PERFORM {S}._store_row_update(p_store_id, 1, v_chars, v_now);
        PERFORM {S}._audit(p_store_id, v_store.store_key, p_path, 'put', p_actor,
                           NULL, v_chars, NULL, v_now);
        RETURN 1;
    END IF;
    IF v_file.char_count = v_chars AND coalesce(v_file.body, '') = p_text THEN
        RETURN v_file.version_no;  -- unchanged: nothing written, no audit event
    END IF;
    PERFORM {S}._check_caps(p_path, v_store.max_file_chars, v_store.max_files,
        v_store.max_store_chars, v_store.file_count, v_store.total_chars, v_chars,
        v_file.char_count);
    UPDATE dbm_files
       SET body = nullif(p_text, ''), char_count = v_chars, version_no = v_file.version_no + 1,
           updated_at = v_now, last_accessed_at = v_now
     WHERE file_id = v_file.file_id;
    PERFORM {S}._store_row_update(p_store_id, 0, v_chars - v_file.char_count, v_now);
    PERFORM {S}._audit(p_store_id, v_store.store_key, p_path, 'put', p_actor,
                       v_file.char_count, v_chars, NULL, v_now);
    RETURN v_file.version_no + 1;
END
$f$"""

_DELETE = f"""CREATE OR REPLACE FUNCTION {S}.delete_file(
    p_store_id bigint, p_path text, p_actor text DEFAULT '{ADMIN_ACTOR}'
) RETURNS boolean LANGUAGE plpgsql AS $f$
-- dbmemory.files.delete_file: true when the file existed, false when nothing was there
DECLARE
    v_store record;
    v_file record;
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    PERFORM {S}._check_path(p_path);
    IF p_path = '{ROOT}' THEN
        PERFORM {S}._fail('invalid_path', 'cannot delete the memory root {ROOT}: name a file or directory inside it');
    END IF;
    SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
    SELECT f.file_id, f.char_count INTO v_file FROM dbm_files f
     WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(p_path) FOR UPDATE;
    IF v_file.file_id IS NULL THEN
        IF {S}._has_files_under(p_store_id, p_path) THEN
            PERFORM {S}._fail('invalid_path', format(
                '%s is a directory, not a file: delete_file deletes one file', p_path));
        END IF;
        RETURN false;
    END IF;
    DELETE FROM dbm_files WHERE file_id = v_file.file_id;
    PERFORM {S}._store_row_update(p_store_id, -1, -v_file.char_count, v_now);
    PERFORM {S}._audit(p_store_id, v_store.store_key, p_path, 'delete', p_actor,
                       v_file.char_count, NULL, NULL, v_now);
    RETURN true;
END
$f$"""

_CLEAR = f"""CREATE OR REPLACE FUNCTION {S}.clear_store_files(
    p_store_id bigint, p_actor text DEFAULT '{ADMIN_ACTOR}'
) RETURNS integer LANGUAGE plpgsql AS $f$
-- dbmemory.files.clear_store_files: every file deleted, one 'clear' event each; the store stays
DECLARE
    v_store record;
    v_now timestamptz := clock_timestamp();
    v_count integer;
    v_chars bigint;
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
    WITH gone AS (
        DELETE FROM dbm_files WHERE store_id = p_store_id
        RETURNING file_path, char_count
    ), events AS (
        INSERT INTO dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, detail_text, created_at)
        SELECT p_store_id, v_store.store_key, g.file_path, 'clear',
               left(coalesce(nullif(coalesce(p_actor, '{ADMIN_ACTOR}'), ''), 'unknown'), {MAX_ACTOR_CHARS}),
               g.char_count, NULL, NULL, v_now
          FROM gone g ORDER BY g.file_path COLLATE "C"
        RETURNING chars_before
    )
    SELECT count(*), coalesce(sum(chars_before), 0) INTO v_count, v_chars FROM events;
    IF v_count > 0 THEN
        PERFORM {S}._store_row_update(p_store_id, -v_count, -v_chars, v_now);
    END IF;
    RETURN v_count;
END
$f$"""

_CAPS_TEXT = (
    "format('max_file_chars=%s max_files=%s max_store_chars=%s', v_fc, v_nf, "
    "coalesce(p_max_store_chars::text, 'none'))"
)

_ENABLE = f"""CREATE OR REPLACE FUNCTION {S}.enable_for_agent(
    p_agent_code text,
    p_scope text DEFAULT 'agent',
    p_store_code text DEFAULT NULL,
    p_context_key text DEFAULT NULL,
    p_max_file_chars bigint DEFAULT NULL,
    p_max_files bigint DEFAULT NULL,
    p_max_store_chars bigint DEFAULT NULL
) RETURNS integer LANGUAGE plpgsql AS $f$
-- dbmemory.stores.enable_for_agent: upsert the configuration (NULL cap = default), set the caps
-- of the existing stores it names; returns how many stores got them
DECLARE
    v_fc bigint := coalesce(p_max_file_chars, {M["DEFAULT_MAX_FILE_CHARS"]});  -- dbmemory.model.DEFAULT_MAX_FILE_CHARS
    v_nf bigint := coalesce(p_max_files, {M["DEFAULT_MAX_FILES"]});  -- dbmemory.model.DEFAULT_MAX_FILES
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
    -- dbmemory.stores._refuse_reserved_names
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
    IF p_scope IS NULL OR p_scope NOT IN ({_SCOPES_SQL}) THEN
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
    -- dbmemory.model.Caps: positive, within INTEGER / BIGINT
    IF v_fc < 1 OR v_nf < 1 OR v_fc > {M["INT32_MAX"]} OR v_nf > {M["INT32_MAX"]} OR p_max_store_chars < 1 THEN
        PERFORM {S}._fail('invalid_argument', format(
            'caps must be positive whole numbers (max_file_chars and max_files at most {M["INT32_MAX"]}), got max_file_chars=%s max_files=%s max_store_chars=%s',
            v_fc, v_nf, coalesce(p_max_store_chars::text, 'none')));
    END IF;
    v_code := CASE WHEN p_scope IN ('shared', 'context') THEN p_store_code END;
    v_ctx := CASE WHEN p_scope = 'context' THEN p_context_key END;
    PERFORM 1 FROM dbm_agents WHERE agent_code = p_agent_code FOR UPDATE;
    IF FOUND THEN
        UPDATE dbm_agents
           SET scope_name = p_scope, store_code = v_code, context_key = v_ctx,
               memory_enabled = true, updated_at = v_now, max_file_chars = v_fc,
               max_files = v_nf, max_store_chars = p_max_store_chars
         WHERE agent_code = p_agent_code;
    ELSE
        INSERT INTO dbm_agents
            (agent_code, scope_name, store_code, context_key, max_file_chars, max_files,
             max_store_chars, memory_enabled, created_at, updated_at)
        VALUES (p_agent_code, p_scope, v_code, v_ctx, v_fc, v_nf, p_max_store_chars, true,
                v_now, v_now);
    END IF;
    -- dbmemory.caps.configured_store_key
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
            -- dbmemory.stores._strictest_configured: the strictest enabled configurations
            -- naming the same stores (this one included)
            SELECT min(a.max_file_chars), min(a.max_files), min(a.max_store_chars)
              INTO v_sfc, v_snf, v_ssc
              FROM dbm_agents a
             WHERE a.memory_enabled AND a.scope_name = p_scope
               AND (p_scope = 'global'
                    OR (a.store_code = v_code
                        AND (p_scope = 'shared' OR a.context_key = v_ctx)));
        END IF;
        UPDATE dbm_stores s
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

_DISABLE = f"""CREATE OR REPLACE FUNCTION {S}.disable_for_agent(
    p_agent_code text, p_drop_store boolean DEFAULT false
) RETURNS integer LANGUAGE plpgsql AS $f$
-- dbmemory.stores.disable_for_agent (+ drop_stores of its own stores): returns stores dropped
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
    PERFORM 1 FROM dbm_agents WHERE agent_code = p_agent_code;
    IF NOT FOUND THEN
        PERFORM {S}._fail('not_found', format(
            'agent %L has no memory configuration: call enable_for_agent first', p_agent_code));
    END IF;
    UPDATE dbm_agents SET memory_enabled = false, updated_at = v_now
     WHERE agent_code = p_agent_code;
    PERFORM {S}._audit(NULL, NULL, NULL, 'agent_disable', '{ADMIN_ACTOR}', NULL, NULL,
                       p_agent_code, v_now);
    IF NOT p_drop_store THEN
        RETURN 0;
    END IF;
    -- dbmemory.stores._own_store_ids: agent:<A>, user:<A>:<U>, context:<A>:<K>:<V>, by exact
    -- key; all locked first, in ascending key order (dbmemory.stores.drop_stores)
    PERFORM 1 FROM dbm_stores s WHERE {_OWN}
     ORDER BY s.store_key FOR UPDATE;
    FOR v_store IN SELECT s.store_id, s.store_key FROM dbm_stores s WHERE {_OWN}
                    ORDER BY s.store_id
    LOOP
        SELECT count(*), coalesce(sum(char_count), 0) INTO v_files, v_chars
          FROM dbm_files WHERE store_id = v_store.store_id;
        DELETE FROM dbm_files WHERE store_id = v_store.store_id;
        DELETE FROM dbm_stores WHERE store_id = v_store.store_id;
        PERFORM {S}._audit(v_store.store_id, v_store.store_key, NULL, 'store_drop', '{ADMIN_ACTOR}',
                           v_chars, NULL, v_files || ' files', v_now);
        v_dropped := v_dropped + 1;
    END LOOP;
    RETURN v_dropped;
END
$f$"""

_EXPIRE = f"""CREATE OR REPLACE FUNCTION {S}.expire_files(
    p_days numeric, p_store_id bigint DEFAULT NULL
) RETURNS bigint LANGUAGE plpgsql AS $f$
-- dbmemory.expiry.expire_files: the rule of dbmemory.statements.expiry_rule in the caller's
-- transaction, never committed here; returns the number of files deleted
DECLARE
    c_batch_size CONSTANT integer := 1000;  -- dbmemory.expiry.expire_files(batch_size=1000)
    -- dbmemory.touch.TOUCH_INTERVAL
    c_touch_interval CONSTANT interval := make_interval(secs => {M["TOUCH_INTERVAL_S"]});
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz;
    v_batch bigint;
    v_total bigint := 0;
BEGIN
    -- dbmemory.expiry.validate_days (MIN_EXPIRY_DAYS, MAX_EXPIRY_DAYS)
    IF p_days IS NULL OR p_days * 86400 < {M["TOUCH_INTERVAL_S"]} THEN
        PERFORM {S}._fail('invalid_argument', format('{DAYS_RULE}, got %s: pass e.g. days=30',
            coalesce(p_days::text, 'NULL')));
    END IF;
    IF p_days > {M["MAX_EXPIRY_DAYS"]} THEN
        PERFORM {S}._fail('invalid_argument', format(
            'days=%s is too large: pass at most {M["MAX_EXPIRY_DAYS"]} (about 270 years)', p_days));
    END IF;
    IF p_store_id IS NOT NULL THEN
        PERFORM {S}._check_store_id(p_store_id);
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {S}._fail('invalid_argument',
            'expire_files needs a READ COMMITTED transaction: a REPEATABLE READ or SERIALIZABLE snapshot taken before the expiry lock would hide reads recorded meanwhile');
    END IF;
    v_cutoff := v_now - make_interval(secs => p_days * 86400) - c_touch_interval;
    LOOP
        -- reads being recorded hold this row FOR SHARE (dbmemory.touch)
        PERFORM 1 FROM dbm_job_locks WHERE lock_name = 'expiry' FOR UPDATE;
        -- dbmemory.expiry._expire_batch: candidates without a lock, then their store rows
        -- FOR UPDATE SKIP LOCKED (the writers' lock order: store row first; a store being
        -- written waits for the next run), the delete with the rule again, the counters of
        -- each held store moved by what is really gone (statements.ADJUST_STORE)
        WITH candidates AS (
            SELECT f.file_id, f.store_id FROM dbm_files f
             WHERE (p_store_id IS NULL OR f.store_id = p_store_id)
               AND f.expiry_exempt = false
               AND f.last_accessed_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM dbm_file_reads r
                                WHERE r.file_id = f.file_id AND r.read_at >= v_cutoff)
             ORDER BY f.file_id
             LIMIT c_batch_size
        ), held AS (
            SELECT s.store_id, s.store_key FROM dbm_stores s
             WHERE s.store_id IN (SELECT c.store_id FROM candidates c)
             ORDER BY s.store_id
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM dbm_files f USING candidates c, held h
             WHERE f.file_id = c.file_id
               AND h.store_id = c.store_id
               AND f.expiry_exempt = false
               AND f.last_accessed_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM dbm_file_reads r
                                WHERE r.file_id = f.file_id AND r.read_at >= v_cutoff)
            RETURNING f.file_id, f.store_id, f.file_path, f.char_count
        ), counted AS (
            UPDATE dbm_stores s
               SET file_count = s.file_count - t.n, total_chars = s.total_chars - t.chars,
                   updated_at = v_now
              FROM (SELECT g.store_id, count(*) AS n, sum(g.char_count) AS chars
                      FROM gone g GROUP BY g.store_id) t
             WHERE s.store_id = t.store_id
        ), forgotten AS (
            DELETE FROM dbm_file_reads fr USING gone g WHERE fr.file_id = g.file_id
        )
        INSERT INTO dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, detail_text, created_at)
        SELECT g.store_id, h.store_key, g.file_path, 'expire', '{EXPIRY_API_ACTOR}',
               g.char_count, NULL, NULL, v_now
          FROM gone g JOIN held h ON h.store_id = g.store_id
         ORDER BY g.file_id;
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        v_total := v_total + v_batch;
        EXIT WHEN v_batch < c_batch_size;
    END LOOP;
    -- recorded reads older than the cutoff of files that are gone
    LOOP
        DELETE FROM dbm_file_reads WHERE file_id IN (
            SELECT r.file_id FROM dbm_file_reads r
             WHERE r.read_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM dbm_files f WHERE f.file_id = r.file_id)
             LIMIT c_batch_size FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        EXIT WHEN v_batch < c_batch_size;
    END LOOP;
    RETURN v_total;
END
$f$"""


def _protocol_expr() -> str:
    """dbmemory.prompts.get_memory_protocol as one expression of ASCII literals and chr()."""
    lines = [" || ".join(parts) if parts else "''" for parts in protocol_parts(_q, lambda c: f"chr({ord(c)})")]
    return "\n        || chr(10) || ".join(lines)


_PROTOCOL = f"""CREATE OR REPLACE FUNCTION {S}.get_memory_protocol() RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.prompts.get_memory_protocol(), character for character
    SELECT {_protocol_expr()}
$f$"""

_HARDEN = f"""DO $harden$
DECLARE
    v_schema text;
    r record;
BEGIN
    -- the schema of dbmemory's tables (install.sql made them there)
    SELECT n.nspname INTO v_schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relname = 'dbm_stores' AND pg_table_is_visible(c.oid);
    IF v_schema IS NULL THEN
        RAISE EXCEPTION 'dbm_stores is not on the search_path: run install.sql (or dbmemory db upgrade) first';
    END IF;
    FOR r IN SELECT p.oid::regprocedure AS sig FROM pg_proc p
               JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = '{S}'
    LOOP
        -- definer rights, a search_path no caller can change, and no EXECUTE for PUBLIC
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp',
                       r.sig, v_schema);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', r.sig);
    END LOOP;
END
$harden$"""

GRANT_BLOCK = f"""DO $grant$
DECLARE
    v_role text := current_setting('{S}.api_role');
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = v_role) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA {S} TO %I', v_role);
    FOR r IN SELECT p.oid::regprocedure AS sig FROM pg_proc p
               JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = '{S}' AND left(p.proname, 1) <> '_'
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.sig, v_role);
    END LOOP;
END
$grant$"""
"""Create the role named by the setting ``dbm_memory.api_role`` (when missing) and let it
execute the public calls: no right on any table."""


def pg_statements() -> list[str]:
    """The statements that (re)create the API on PostgreSQL, for a driver, in order."""
    body = [
        _FAIL, _COMPONENT, _PATH, _HASH, _CHECK_ID, _AUDIT,
        *_CAPS_AND_STORE_ROW.split(";\n\n"), _LOCK_STORE,
        _STORE_KEY, _RESOLVE, _OPEN, _LIST, _GET, _PUT, _DELETE, _CLEAR, _ENABLE, _DISABLE, _EXPIRE, _PROTOCOL,
    ]
    return [f"CREATE SCHEMA IF NOT EXISTS {S}", *body, _HARDEN]


def pg_public_functions() -> list[str]:
    """The public function names, schema-qualified."""
    from dbmemory.sqlgen.api_common import API_CALLS

    return [f"{S}.{name}" for name in API_CALLS]
