"""The in-database API for PostgreSQL: schema ``dbm_memory`` of PL/pgSQL functions, ``SECURITY
DEFINER`` with ``search_path = pg_catalog, pg_temp``, every table schema-qualified, owned by a
dedicated NOLOGIN role (see :mod:`dbmemory.sqlgen.postgresql.security` and
:mod:`dbmemory.sqlgen.api`)."""

from __future__ import annotations

import re

from dbmemory.errors import InvalidArgumentError
from dbmemory.sqlgen.api_common import API_CALLS, TOOL_CALLS, protocol_parts
from dbmemory.sqlgen.api_common import MIRRORED as M

# the calls, one module per part of the Python API they mirror
from dbmemory.sqlgen.postgresql.agents import DISABLE, ENABLE, ENABLE_REFERENCE
from dbmemory.sqlgen.postgresql.expiry import EXPIRE
from dbmemory.sqlgen.postgresql.files import CLEAR, DELETE, GET, LIST, PUT
from dbmemory.sqlgen.postgresql.rules import (
    AUDIT,
    CAPS_AND_STORE_ROW,
    CHECK_ID,
    COMPONENT,
    CREATION_CAPS,
    FAIL,
    HASH,
    IDENTITY,
    KEY_PARAMS,
    LOCK_STORE,
    PATH,
    RESERVED_CHECK,
    STORE_KEY,
    S,
    T,
    q,
)
from dbmemory.sqlgen.postgresql.security import harden, preflight
from dbmemory.sqlgen.postgresql.tool import TOOL
from dbmemory.sqlgen.postgresql.tool_json import JSON_HELPERS, RUN_TEXT
from dbmemory.sqlgen.postgresql.tool_lookalike import lookalike_helpers
from dbmemory.sqlgen.postgresql.tool_text import TEXT_HELPERS
from dbmemory.sqlgen.postgresql.tool_unicode import unicode_helpers

__all__ = [
    "pg_statements",
    "pg_script_body",
    "pg_public_functions",
    "quote_schema",
    "TABLE_SCHEMA_QUERY",
]


_RESOLVE = f"""CREATE OR REPLACE FUNCTION {S}.resolve_store_id(
{KEY_PARAMS}
) RETURNS bigint LANGUAGE plpgsql STABLE AS $f$
-- dbmemory.store.resolve.resolve_store_id: build_store_key, then find_store_id
DECLARE
    v_key text := {S}._store_key(p_scope, p_agent_code, p_user_id, p_session_id, p_store_code,
                                 p_context_key, p_context_value);
    v_id bigint;
BEGIN
    PERFORM {S}._check_identity(NULL, v_key);
    SELECT store_id INTO v_id FROM {T}.dbm_stores WHERE store_key = v_key;
    IF v_id IS NULL THEN
        PERFORM {S}._fail('not_found', format(
            'store %s does not exist (it is created on its first write)', v_key));
    END IF;
    RETURN v_id;
END
$f$"""


_OPEN = f"""CREATE OR REPLACE FUNCTION {S}.open_store(
{KEY_PARAMS}
) RETURNS bigint LANGUAGE plpgsql AS $f$
-- dbmemory.store.locks.get_or_create_store with a StoreRef without caps: the store id, the row
-- created when missing with dbmemory.store.caps.creation_caps (the strictest enabled configurations
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
    PERFORM {S}._check_identity(NULL, v_key);
    SELECT store_id INTO v_id FROM {T}.dbm_stores WHERE store_key = v_key;
    IF v_id IS NOT NULL THEN
        RETURN v_id;
    END IF;
    {CREATION_CAPS}
    INSERT INTO {T}.dbm_stores
        (store_key, scope_name, agent_code, store_code, created_at, updated_at,
         max_file_chars, max_files, max_store_chars, file_count, total_chars)
    VALUES (v_key, p_scope,
            CASE WHEN p_scope IN ('agent', 'user', 'session')
                      OR (p_scope = 'context' AND p_store_code IS NULL) THEN p_agent_code END,
            CASE WHEN p_scope IN ('shared', 'context') THEN p_store_code END,
            v_now, v_now, coalesce(v_fc, {M["DEFAULT_MAX_FILE_CHARS"]}),
            coalesce(v_nf, {M["DEFAULT_MAX_FILES"]}), v_sc, 0, 0)
    ON CONFLICT (store_key) DO NOTHING;
    SELECT store_id INTO v_id FROM {T}.dbm_stores WHERE store_key = v_key;
    IF v_id IS NULL THEN
        PERFORM {S}._fail('conflict', format(
            'store %s was created by a transaction that committed after this one took its snapshot (REPEATABLE READ or SERIALIZABLE): roll back and retry',
            v_key));
    END IF;
    RETURN v_id;
END
$f$"""


def _protocol_expr() -> str:
    """dbmemory.tool.protocol.get_memory_protocol as one expression of ASCII literals and chr()."""
    lines = [" || ".join(parts) if parts else "''" for parts in protocol_parts(q, lambda c: f"chr({ord(c)})")]
    return "\n        || chr(10) || ".join(lines)


_PROTOCOL = f"""CREATE OR REPLACE FUNCTION {S}.get_memory_protocol() RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.tool.protocol.get_memory_protocol(), character for character
    SELECT {_protocol_expr()}
$f$"""


def _templates() -> list[str]:
    """The statements with :data:`~dbmemory.sqlgen.postgresql.rules.T` for the tables' schema."""
    body = [
        FAIL, COMPONENT, PATH, HASH, CHECK_ID, IDENTITY, *RESERVED_CHECK.split(";\n\n"), AUDIT,
        *CAPS_AND_STORE_ROW.split(";\n\n"), LOCK_STORE,
        STORE_KEY, _RESOLVE, _OPEN, LIST, GET, PUT, DELETE, CLEAR, ENABLE, ENABLE_REFERENCE, DISABLE, EXPIRE, _PROTOCOL,
        *unicode_helpers().split(";\n\n"), *TEXT_HELPERS.split(";\n\n"), *lookalike_helpers().split(";\n\n"), *JSON_HELPERS.split(";\n\n"),
        *TOOL, RUN_TEXT,
    ]
    tables = sorted(set(re.findall(rf"{re.escape(T)}\.(dbm_\w+)", "\n".join(body))))
    return [preflight(), f"CREATE SCHEMA IF NOT EXISTS {S}", *body, harden(tables)]


def quote_schema(schema: str) -> str:
    """``schema`` as PostgreSQL's ``quote_ident`` writes it.

    Raises:
        InvalidArgumentError: a name with a quote, a NUL or more than 63 characters.
    """
    if not schema or len(schema) > 63 or any(c in schema for c in "'\"\x00"):
        raise InvalidArgumentError(
            f"schema name {schema!r} cannot hold dbmemory's tables for the SQL API: use a name "
            "of 1 to 63 characters without quotes"
        )
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", schema):
        return schema
    return f'"{schema}"'


def pg_statements(tables_schema: str = "public") -> list[str]:
    """The statements that (re)create the API on PostgreSQL, for a driver, in order, for
    dbmemory's tables in ``tables_schema`` (where install.sql or ``dbmemory db upgrade`` made
    them; :func:`table_schema_query` finds it).

    Raises:
        InvalidArgumentError: a schema name :func:`quote_schema` refuses.
    """
    quoted = quote_schema(tables_schema)
    return [statement.replace(T, quoted) for statement in _templates()]


TABLE_SCHEMA_QUERY = (
    "SELECT n.nspname FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
    " WHERE c.relname OPERATOR(pg_catalog.=) 'dbm_stores' AND c.relkind IN ('r', 'p')"
    " AND pg_catalog.pg_table_is_visible(c.oid)"
)
"""The schema of the ``dbm_stores`` table the session sees (no row: dbmemory is not installed)."""


def pg_script_body() -> str:
    """The statements for psql: the tables' schema read into ``:dbm_tables`` first, then each
    statement run with ``\\gexec`` after putting that schema in (psql substitutes no variable
    inside a function body)."""
    find = ("SELECT pg_catalog.quote_ident(n.nspname) AS dbm_tables FROM pg_catalog.pg_class c\n"
            "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace\n"
            " WHERE c.relname OPERATOR(pg_catalog.=) 'dbm_stores' AND c.relkind IN ('r', 'p')\n"
            "   AND pg_catalog.pg_table_is_visible(c.oid) \\gset")
    parts = [
        "-- The schema of dbmemory's tables (the dbm_stores this session sees): it replaces",
        f"-- {T} in every statement below, so each table is named with its schema.",
        "SELECT count(*) = 1 AS dbm_found FROM pg_catalog.pg_class c",
        " WHERE c.relname OPERATOR(pg_catalog.=) 'dbm_stores' AND c.relkind IN ('r', 'p')",
        "   AND pg_catalog.pg_table_is_visible(c.oid) \\gset",
        "\\if :dbm_found",
        "\\else",
        "DO $$ BEGIN RAISE EXCEPTION 'dbm_stores is not on the search_path: run install.sql (or dbmemory db upgrade) first'; END $$;",
        "\\endif",
        find,
        "",
    ]
    for statement in _templates():
        parts.append(f"SELECT pg_catalog.replace($dbm$\n{statement}\n$dbm$, '{T}', :'dbm_tables') \\gexec\n")
    return "\n".join(parts)


def pg_public_functions() -> list[str]:
    """The public function names, schema-qualified."""
    return [f"{S}.{name}" for name in (*API_CALLS, *TOOL_CALLS)]
