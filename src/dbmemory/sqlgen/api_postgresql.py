"""The in-database API for PostgreSQL: schema ``dbm_memory`` of PL/pgSQL functions, ``SECURITY
DEFINER`` with a fixed ``search_path`` (see :mod:`dbmemory.sqlgen.api`)."""

from __future__ import annotations

from dbmemory.sqlgen.api_common import MIRRORED as M, protocol_parts
# the calls, one module per part of the Python API they mirror (every name re-exported)
from dbmemory.sqlgen.api_postgresql_agents import _CAPS_TEXT, _DISABLE, _ENABLE, _OWN  # noqa: F401
from dbmemory.sqlgen.api_postgresql_expiry import _EXPIRE
from dbmemory.sqlgen.api_postgresql_files import _CLEAR, _DELETE, _GET, _LIST, _PUT
from dbmemory.sqlgen.api_postgresql_rules import (
    S,
    _AUDIT,
    _CAPS_AND_STORE_ROW,
    _CHECK_ID,
    _COMPONENT,
    _CREATION_CAPS,
    _FAIL,
    _HASH,
    _KEY_PARAMS,
    _LOCK_STORE,
    _PATH,
    _RESERVED,
    _STORE_KEY,
    _q,
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
        _FAIL, _COMPONENT, _PATH, _HASH, _CHECK_ID, *_RESERVED.split(";\n\n"), _AUDIT,
        *_CAPS_AND_STORE_ROW.split(";\n\n"), _LOCK_STORE,
        _STORE_KEY, _RESOLVE, _OPEN, _LIST, _GET, _PUT, _DELETE, _CLEAR, _ENABLE, _DISABLE, _EXPIRE, _PROTOCOL,
    ]
    return [f"CREATE SCHEMA IF NOT EXISTS {S}", *body, _HARDEN]


def pg_public_functions() -> list[str]:
    """The public function names, schema-qualified."""
    from dbmemory.sqlgen.api_common import API_CALLS

    return [f"{S}.{name}" for name in API_CALLS]
