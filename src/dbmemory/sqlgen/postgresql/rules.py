"""PostgreSQL API, the shared rules: errors, key components, the path subset, the path hash,
audit rows, the caps fragment, the store lock and the store key (:mod:`dbmemory.sqlgen.postgresql.api`)."""

from __future__ import annotations

from dbmemory.core.keys import SCOPES
from dbmemory.core.paths import ROOT
from dbmemory.db.dialect.types import PATH_KEY_CHARS
from dbmemory.sqlgen.api_common import (
    ADMIN_ACTOR,
    API_ERRORS,
    API_NAME,
    COMPONENT_RULE,
    MARKER,
    MAX_ACTOR_CHARS,
    MAX_DETAIL_CHARS,
    PATH_RULE,
    RESERVED,
    RESERVED_PREFIX,
    RESERVED_STORE_RULE,
    SCOPE_LIST,
)
from dbmemory.sqlgen.api_common import (
    MIRRORED as M,
)

__all__ = [
    "S",
    "T",
    "SCOPES_SQL",
    "q",
    "FAIL",
    "COMPONENT",
    "PATH",
    "HASH",
    "CHECK_ID",
    "RESERVED_CHECK",
    "IDENTITY",
    "IDENTITY_SETTING",
    "AUDIT",
    "CAPS_AND_STORE_ROW",
    "LOCK_STORE",
    "CREATION_CAPS",
    "KEY_PARAMS",
    "STORE_KEY",
]


S = API_NAME
T = "@dbm_tables@"
"""Stands for the (quoted) schema of dbmemory's tables in every table name of the API: the
functions run with ``search_path = pg_catalog, pg_temp``, so each table is written schema-qualified
and :func:`dbmemory.sqlgen.postgresql.api.pg_statements` (or psql, in api.sql) puts the schema in."""
SCOPES_SQL = ", ".join(f"'{s}'" for s in SCOPES)


def q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


FAIL = f"""CREATE OR REPLACE FUNCTION {S}._fail(p_code text, p_message text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
    -- SQLSTATEs of dbmemory.sqlgen.api_common.API_ERRORS
    RAISE EXCEPTION USING MESSAGE = p_code || ': ' || p_message, ERRCODE = CASE p_code
{chr(10).join(f"        WHEN '{e.name}' THEN '{e.sqlstate}'" for e in API_ERRORS)}
        ELSE 'MD703' END;
END
$f$"""

# dbmemory.core.keys.validate_component (MAX_COMPONENT_CHARS, [A-Za-z0-9_.-]), checked on code points
COMPONENT = f"""CREATE OR REPLACE FUNCTION {S}._check_component(p_value text, p_what text, p_scope text)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
    v_code integer;
BEGIN
    IF p_value IS NULL THEN
        PERFORM {S}._fail('missing_context_key',
            format('scope %L needs %s: pass it', p_scope, p_what));
    END IF;
    IF p_value = '' THEN
        PERFORM {S}._fail('invalid_scope',
            format('%s is empty: pass 1 to {M["MAX_COMPONENT_CHARS"]} characters', p_what));
    END IF;
    IF length(p_value) > {M["MAX_COMPONENT_CHARS"]} THEN  -- dbmemory.core.keys.MAX_COMPONENT_CHARS
        PERFORM {S}._fail('invalid_scope', format(
            '%s is %s characters long; the limit is {M["MAX_COMPONENT_CHARS"]}: use a shorter identifier',
            p_what, length(p_value)));
    END IF;
    FOR i IN 1 .. length(p_value) LOOP
        v_code := ascii(substr(p_value, i, 1));
        IF NOT (v_code BETWEEN 48 AND 57 OR v_code BETWEEN 65 AND 90 OR v_code BETWEEN 97 AND 122
                OR v_code IN (95, 46, 45)) THEN
            PERFORM {S}._fail('invalid_scope', format(
                '%s %L {COMPONENT_RULE.replace(chr(39), chr(39) * 2)}: map other characters (spaces, '':'', ''/'', ''@'', newlines, accents) before passing it',
                p_what, left(p_value, 100)));
        END IF;
    END LOOP;
    RETURN p_value;
END
$f$"""

# dbmemory.sqlgen.api_common.PATH_RULE (a strict subset of what dbmemory.core.paths.normalize_path
# returns unchanged), checked on code points
PATH = f"""CREATE OR REPLACE FUNCTION {S}._check_path(p_path text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
    v_len integer;
    v_code integer;
    v_start integer;
    v_seg text;
    v_shown text;
BEGIN
    IF p_path IS NULL OR p_path = '' THEN
        PERFORM {S}._fail('invalid_path', 'path is empty or NULL: pass a path such as ''{ROOT}/notes.md''');
    END IF;
    v_len := length(p_path);
    v_shown := quote_literal(left(p_path, 100)) || CASE WHEN v_len > 100 THEN '...' ELSE '' END;
    IF v_len > {M["MAX_PATH_CHARS"]} THEN  -- dbmemory.core.paths.MAX_PATH_CHARS
        PERFORM {S}._fail('invalid_path', format(
            'path %s is %s characters long; the limit is {M["MAX_PATH_CHARS"]:,} characters: use a shorter path',
            v_shown, v_len));
    END IF;
    FOR i IN 1 .. v_len LOOP
        v_code := ascii(substr(p_path, i, 1));
        IF v_code < 32 OR v_code > 126 THEN
            PERFORM {S}._fail('invalid_path', format(
                'path %s has U+%s at position %s: %s; write it through the Python API, or use ASCII names',
                v_shown, upper(CASE WHEN v_code < 4096 THEN lpad(to_hex(v_code), 4, '0') ELSE to_hex(v_code) END), i - 1, {q(PATH_RULE)}));
        END IF;
        IF v_code = 92 THEN
            PERFORM {S}._fail('invalid_path', format(
                'path %s contains a backslash at position %s: separate segments with ''/''',
                v_shown, i - 1));
        END IF;
        IF v_code = 37 THEN
            PERFORM {S}._fail('invalid_path', format(
                'path %s contains ''%%'' at position %s: the Python rules decode percent-escapes, so write the characters themselves',
                v_shown, i - 1));
        END IF;
    END LOOP;
    IF p_path = '{ROOT}' THEN
        RETURN p_path;
    END IF;
    IF substr(p_path, 1, {len(ROOT) + 1}) <> '{ROOT}/' THEN
        PERFORM {S}._fail('invalid_path', format(
            'path %s must be {ROOT} or start with {ROOT}/: write it as ''{ROOT}/<name>''', v_shown));
    END IF;
    v_start := {len(ROOT) + 2};
    FOR i IN {len(ROOT) + 2} .. v_len + 1 LOOP
        IF i > v_len OR ascii(substr(p_path, i, 1)) = 47 THEN
            v_seg := substr(p_path, v_start, i - v_start);
            IF v_seg = '' THEN
                PERFORM {S}._fail('invalid_path', format(
                    'path %s has an empty segment (''//'' or a trailing ''/''): remove it; %s',
                    v_shown, {q(PATH_RULE)}));
            END IF;
            IF v_seg = '..' THEN
                PERFORM {S}._fail('invalid_path', format(
                    'path %s must stay under {ROOT}: remove ''..'' segments', v_shown));
            END IF;
            IF v_seg = '.' THEN
                PERFORM {S}._fail('invalid_path', format(
                    'path %s contains a ''.'' segment: remove it', v_shown));
            END IF;
            IF left(v_seg, 1) = ' ' OR right(v_seg, 1) = ' ' THEN
                PERFORM {S}._fail('invalid_path', format(
                    'path %s has a segment %L that starts or ends with whitespace: remove the surrounding spaces',
                    v_shown, v_seg));
            END IF;
            v_start := i + 1;
        END IF;
    END LOOP;
    RETURN p_path;
END
$f$"""

# dbmemory.core.paths.path_hash: SHA-256 hex of the UTF-8 bytes
HASH = f"""CREATE OR REPLACE FUNCTION {S}._path_hash(p_path text) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    SELECT encode(sha256(convert_to(p_path, 'UTF8')), 'hex')
$f$"""

CHECK_ID = f"""CREATE OR REPLACE FUNCTION {S}._check_store_id(p_store_id bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
    IF p_store_id IS NULL OR p_store_id < 1 THEN
        PERFORM {S}._fail('invalid_argument', format(
            'store_id must be a whole number from 1 to 2**63-1, got %s: look it up with {S}.resolve_store_id(...)',
            coalesce(p_store_id::text, 'NULL')));
    END IF;
    RETURN p_store_id;
END
$f$"""

IDENTITY_SETTING = "dbm_memory.user_id"
"""The session setting that names the user a request serves (``SET dbm_memory.user_id = ...`` or
``set_config('dbm_memory.user_id', ..., true)`` per request)."""

# callers bound to their stores: a user-scope store (user:<agent>:<user>) is reachable only when
# the session's dbm_memory.user_id is its user, unless the login can act as the API's owner (who
# reads the tables directly anyway); inside a definer function current_user is that owner
IDENTITY = f"""CREATE OR REPLACE FUNCTION {S}._check_identity(p_store_id bigint, p_store_key text)
RETURNS void LANGUAGE plpgsql STABLE AS $f$
DECLARE
    v_user text := current_setting('{IDENTITY_SETTING}', true);
BEGIN
    -- a store id with no store (p_store_key NULL) answers a bound caller as another user's
    -- store does: walking ids tells nothing about who owns what
    IF p_store_key IS NULL AND p_store_id IS NULL THEN
        RETURN;
    END IF;
    IF p_store_key IS NOT NULL AND left(p_store_key, 5) COLLATE "C" <> 'user:' THEN
        RETURN;
    END IF;
    IF pg_has_role(session_user, current_user, 'MEMBER') THEN
        RETURN;
    END IF;
    IF p_store_key IS NULL OR v_user IS NULL OR v_user = ''
       OR split_part(p_store_key, ':', 3) COLLATE "C" <> v_user COLLATE "C" THEN
        PERFORM {S}._fail('not_found', format(
            'store %s does not exist or belongs to another user than this session''s {IDENTITY_SETTING} (%s): set {IDENTITY_SETTING} to the user the request serves',
            coalesce(p_store_id::text, p_store_key), coalesce(nullif(v_user, ''), 'not set')));
    END IF;
END
$f$"""

# dbmemory.core.keys.is_reserved_key (RESERVED_PREFIX): the reserved namespace is unreachable by
# store id too; _lock_store checks the row it locks, _check_reachable reads it for the readers
RESERVED_CHECK = f"""CREATE OR REPLACE FUNCTION {S}._refuse_reserved(p_store_id bigint, p_store_key text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
    IF left(p_store_key, {len(RESERVED_PREFIX)}) COLLATE "C" = '{RESERVED_PREFIX}' THEN
        PERFORM {S}._fail('invalid_scope', format('store %s {RESERVED_STORE_RULE}', p_store_id));
    END IF;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._check_reachable(p_store_id bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $f$
-- the readers and expire_files: store_id checked, a reserved store refused (a missing one is
-- left to the caller, no file or nothing to expire, unless the caller is bound: _check_identity)
DECLARE
    v_key text;
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    SELECT s.store_key INTO v_key FROM {T}.dbm_stores s WHERE s.store_id = p_store_id;
    PERFORM {S}._refuse_reserved(p_store_id, v_key);
    PERFORM {S}._check_identity(p_store_id, v_key);
END
$f$"""

AUDIT = f"""CREATE OR REPLACE FUNCTION {S}._audit(
    p_store_id bigint, p_store_key text, p_path text, p_action text, p_actor text,
    p_before bigint, p_after bigint, p_detail text, p_now timestamptz
) RETURNS void LANGUAGE sql AS $f$
    -- dbmemory.store.audit._audit_rows: actor cut at {MAX_ACTOR_CHARS}, '' -> 'unknown'; detail cut at {MAX_DETAIL_CHARS}
    INSERT INTO {T}.dbm_audit_events
        (store_id, store_key, file_path, action_name, actor_name,
         chars_before, chars_after, detail_text, created_at)
    VALUES (p_store_id, p_store_key, p_path, p_action,
            left(coalesce(nullif(coalesce(p_actor, '{ADMIN_ACTOR}'), ''), 'unknown'), {MAX_ACTOR_CHARS}),
            p_before, p_after, nullif(left(p_detail, {MAX_DETAIL_CHARS}), ''), p_now)
$f$"""

# ONE fragment: the cap checks (dbmemory.store.locks.check_file_chars, check_store_caps) from
# the locked store row's counters (revision 0004: file_count, total_chars), the store-row
# update of every write (dbmemory.store.statements.reads.ADJUST_STORE: the counters move by the write's
# deltas, updated_at set) and the store lock (dbmemory.store.locks.lock_store_caps).
CAPS_AND_STORE_ROW = f"""DROP FUNCTION IF EXISTS {S}._check_caps(bigint, text, integer, integer, bigint, bigint, bigint);

DROP FUNCTION IF EXISTS {S}._lock_store(bigint);

CREATE OR REPLACE FUNCTION {S}._check_caps(
    p_path text, p_max_file_chars integer, p_max_files integer, p_max_store_chars bigint,
    p_file_count bigint, p_total_chars bigint, p_new_chars bigint, p_old_chars bigint
) RETURNS void LANGUAGE plpgsql IMMUTABLE AS $f$
-- p_old_chars NULL: a new file (one file more); the counters are the locked row's
DECLARE
    v_add_files integer := CASE WHEN p_old_chars IS NULL THEN 1 ELSE 0 END;
    v_add_chars bigint := p_new_chars - coalesce(p_old_chars, 0);
BEGIN
    IF p_new_chars > p_max_file_chars AND (p_old_chars IS NULL OR p_new_chars > p_old_chars) THEN
        PERFORM {S}._fail('cap_exceeded', format(
            'file text would be %s characters, over the cap max_file_chars = %s: keep files small - split it, or merge and delete old content',
            p_new_chars, p_max_file_chars));
    END IF;
    IF v_add_files > 0 AND p_file_count + v_add_files > p_max_files THEN
        PERFORM {S}._fail('cap_exceeded', format(
            'cannot create %s: the store already holds %s files and the cap max_files is %s: merge related files or delete ones you no longer need, then retry',
            p_path, p_file_count, p_max_files));
    END IF;
    IF p_max_store_chars IS NOT NULL AND v_add_chars > 0
       AND p_total_chars + v_add_chars > p_max_store_chars THEN
        PERFORM {S}._fail('cap_exceeded', format(
            'writing %s would bring the store to %s characters, over the cap max_store_chars = %s: condense or delete old files, then retry',
            p_path, p_total_chars + v_add_chars, p_max_store_chars));
    END IF;
END
$f$;

CREATE OR REPLACE FUNCTION {S}._store_row_update(
    p_store_id bigint, p_add_files bigint, p_add_chars bigint, p_now timestamptz
) RETURNS void LANGUAGE sql AS $f$
    -- dbmemory.store.statements.reads.ADJUST_STORE, under the store lock the writer holds
    UPDATE {T}.dbm_stores
       SET file_count = file_count + p_add_files, total_chars = total_chars + p_add_chars,
           updated_at = p_now
     WHERE store_id = p_store_id
$f$;

CREATE OR REPLACE FUNCTION {S}._has_files_under(p_store_id bigint, p_path text)
RETURNS boolean LANGUAGE plpgsql STABLE AS $f$
-- files under p_path/ (it is a directory): the range probe of ix_dbm_files_prefix
-- (dbmemory.db.dialect.types.PathKey, dbmemory.store.statements.writes.INSERT_FILE_IF_FREE) when the prefix fits the key
-- ({PATH_KEY_CHARS} characters), then the exact substr test; the scan form otherwise
BEGIN
    IF length(p_path) + 1 <= {PATH_KEY_CHARS} THEN
        RETURN EXISTS (SELECT 1 FROM {T}.dbm_files f
                        WHERE f.store_id = p_store_id
                          AND (substr(f.file_path, 1, {PATH_KEY_CHARS}) COLLATE "C") >= (p_path || '/') COLLATE "C"
                          AND (substr(f.file_path, 1, {PATH_KEY_CHARS}) COLLATE "C") < (p_path || '0') COLLATE "C"
                          AND substr(f.file_path, 1, length(p_path) + 1) = p_path || '/');
    END IF;
    RETURN EXISTS (SELECT 1 FROM {T}.dbm_files f
                    WHERE f.store_id = p_store_id
                      AND substr(f.file_path, 1, length(p_path) + 1) = p_path || '/');
END
$f$"""

LOCK_STORE = f"""CREATE OR REPLACE FUNCTION {S}._lock_store(
    p_store_id bigint, OUT store_key text, OUT max_file_chars integer, OUT max_files integer,
    OUT max_store_chars bigint, OUT file_count bigint, OUT total_chars bigint
) LANGUAGE plpgsql AS $f$
-- OUT columns, not the row type of dbm_stores: no dependency that would stop a downgrade
BEGIN
    -- the writers' lock order (dbmemory.store.locks): the store row first, then file rows;
    -- the counters are exact under this lock
    SELECT s.store_key, s.max_file_chars, s.max_files, s.max_store_chars, s.file_count,
           s.total_chars
      INTO store_key, max_file_chars, max_files, max_store_chars, file_count, total_chars
      FROM {T}.dbm_stores s WHERE s.store_id = p_store_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM {S}._check_identity(p_store_id, NULL);  -- a bound caller: another user's answer
        PERFORM {S}._fail('not_found', format('store %s does not exist: check the store id', p_store_id));
    END IF;
    PERFORM {S}._refuse_reserved(p_store_id, store_key);  -- before any write
    PERFORM {S}._check_identity(p_store_id, store_key);
END
$f$"""

CREATION_CAPS = f"""SELECT min(a.max_file_chars), min(a.max_files), min(a.max_store_chars)
      INTO v_fc, v_nf, v_sc
      FROM {T}.dbm_agents a
     WHERE a.memory_enabled AND a.scope_name = p_scope
       AND ((p_scope IN ('agent', 'user') AND a.agent_code = p_agent_code AND a.store_code IS NULL)
            OR (p_scope = 'shared' AND a.store_code = p_store_code)
            OR p_scope = 'global'
            OR (p_scope = 'context' AND a.context_key = p_context_key
                AND ((p_store_code IS NULL AND a.store_code IS NULL AND a.agent_code = p_agent_code)
                     OR a.store_code = p_store_code)));"""
"""dbmemory.store.caps.creation_caps for a StoreRef without caps: select_configured_caps + names_store
(session stores: no configuration names them, so the defaults)."""

KEY_PARAMS = """    p_scope text,
    p_agent_code text DEFAULT NULL,
    p_user_id text DEFAULT NULL,
    p_session_id text DEFAULT NULL,
    p_store_code text DEFAULT NULL,
    p_context_key text DEFAULT NULL,
    p_context_value text DEFAULT NULL"""

STORE_KEY = f"""CREATE OR REPLACE FUNCTION {S}._store_key(
{KEY_PARAMS}
) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.core.keys.build_store_key: every component checked, the reserved namespace unreachable
DECLARE
    v_key text;
BEGIN
    IF p_scope = '{RESERVED}' THEN
        PERFORM {S}._fail('invalid_scope',
            'scope ''{RESERVED}'' holds the stores dbmemory owns itself (user profiles, memory items, organisation memory) and no agent configuration can name it: pick one of {SCOPE_LIST}');
    END IF;
    IF p_scope IS NULL OR p_scope NOT IN ({SCOPES_SQL}) THEN
        PERFORM {S}._fail('invalid_scope', format(
            'scope %L is not one of {SCOPE_LIST}: pick one of them', p_scope));
    END IF;
    v_key := CASE p_scope
        WHEN 'agent' THEN 'agent:' || {S}._check_component(p_agent_code, 'an agent code', p_scope)
        WHEN 'user' THEN 'user:' || {S}._check_component(p_agent_code, 'an agent code', p_scope)
                         || ':' || {S}._check_component(p_user_id, 'a user id', p_scope)
        WHEN 'session' THEN 'session:' || {S}._check_component(p_session_id, 'a session id', p_scope)
        WHEN 'shared' THEN 'shared:' || {S}._check_component(p_store_code, 'a store code', p_scope)
        WHEN 'global' THEN 'global'
        END;
    IF p_scope = 'context' THEN
        v_key := 'context:' || CASE WHEN p_store_code IS NOT NULL
                THEN '{MARKER}:' || {S}._check_component(p_store_code, 'a store code', p_scope)
                ELSE {S}._check_component(p_agent_code, 'an agent code or a store code', p_scope) END
            || ':' || {S}._check_component(p_context_key, 'a context key', p_scope)
            || ':' || {S}._check_component(p_context_value,
                          format('a context value for %L', p_context_key), p_scope);
    END IF;
    RETURN v_key;
END
$f$"""

