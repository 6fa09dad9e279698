"""PostgreSQL API, the install steps that keep it from escalating anyone's rights, for
:mod:`dbmemory.sqlgen.postgresql.api`.

The rules (the CVE-2018-1058 class: a definer function that resolves a name in a schema others
can create objects in runs their code with its owner's rights):

* every function is ``SECURITY DEFINER SET search_path = pg_catalog, pg_temp`` and names every
  table ``<schema>.dbm_<table>`` and every API function ``dbm_memory.<name>``: built-in
  functions, operators, types and collations resolve in ``pg_catalog`` only, which no ordinary
  role can create objects in, and ``pg_temp`` is never searched for functions or operators;
* the functions and the schema ``dbm_memory`` belong to a dedicated ``NOLOGIN`` role,
  ``<base>_owner`` (:func:`dbmemory.sqlgen.api_common.derived_role_base` of the database name),
  holding only SELECT, INSERT, UPDATE, DELETE on the tables the API uses: not the tables' owner,
  never a superuser. When the installer cannot create roles (neither superuser nor
  CREATEROLE), the installer keeps owning the API and a NOTICE says so;
* the install refuses, with the reason, when any role other than the owner (and roles that can
  become it, and superusers) or PUBLIC may CREATE in ``dbm_memory``, when ``dbm_memory``
  belongs to a role the installer cannot become, or when ``<base>_owner`` exists and can log in
  or is a superuser.

Each DO block sets ``search_path = pg_catalog, pg_temp`` for its transaction first, so the
installer's own statements resolve nothing in a schema others write either.
"""

from __future__ import annotations

from dbmemory.sqlgen.api_common import (
    ADMIN_CALLS,
    ADMIN_SUFFIX,
    DERIVED,
    OWNER_SUFFIX,
    ROLE_BASE_SQL,
    TOOL_CALLS,
    USER_CALLS,
    USER_SUFFIX,
)
from dbmemory.sqlgen.postgresql.rules import S, T

__all__: list[str] = []  # internal: the pieces of :mod:`dbmemory.sqlgen.postgresql.api`

SAFE_PATH = "pg_catalog, pg_temp"

_PIN = f"PERFORM pg_catalog.set_config('search_path', '{SAFE_PATH}', true);"
"""Pin the search path for the block (``v_saved_path`` keeps the caller's)."""

_SAVE = "v_saved_path text := pg_catalog.current_setting('search_path');"
_UNPIN = "PERFORM pg_catalog.set_config('search_path', v_saved_path, true);"
"""Give the caller's search path back: a pin ``true`` (local) would last to the end of the
transaction, and uninstall.sql drops the tables by name after this block in one transaction."""

_CREATORS = f"""SELECT pg_catalog.string_agg(ro.rolname::text, ', ' ORDER BY ro.rolname)
      INTO v_others
      FROM pg_catalog.pg_roles ro, pg_catalog.pg_namespace ns
     WHERE ns.nspname = '{S}' AND NOT ro.rolsuper
       AND pg_catalog.has_schema_privilege(ro.oid, ns.oid, 'CREATE')
       AND NOT pg_catalog.pg_has_role(ro.oid, ns.nspowner, 'MEMBER');
    IF pg_catalog.has_schema_privilege('public', '{S}', 'CREATE') THEN
        v_others := 'PUBLIC (every role)';
    END IF;
    IF v_others IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
            'refusing to install the memory API: %s may CREATE in schema {S}, so they could plant functions or operators its definer functions would run; REVOKE CREATE ON SCHEMA {S} FROM them first',
            v_others);
    END IF;"""


def preflight() -> str:
    """The first statement: checks, and the owner role chosen (setting ``dbm_memory.api_owner``)."""
    return f"""DO $preflight$
DECLARE
    {_SAVE}
    v_owner text := {ROLE_BASE_SQL} || '{OWNER_SUFFIX}';
    v_role record;
    v_schema_owner text;
    v_others text;
BEGIN
    {_PIN}
    BEGIN
        PERFORM 1 FROM {T}.dbm_stores WHERE false;
    EXCEPTION WHEN undefined_table OR invalid_schema_name THEN
        RAISE EXCEPTION 'dbmemory''s tables are not in schema {T}: run install.sql (or dbmemory db upgrade) first, then install the API for the schema that holds dbm_stores';
    END;
    SELECT pg_catalog.pg_get_userbyid(n.nspowner) INTO v_schema_owner
      FROM pg_catalog.pg_namespace n WHERE n.nspname = '{S}';
    IF v_schema_owner IS NOT NULL THEN
        IF NOT pg_catalog.pg_has_role(current_user, v_schema_owner, 'MEMBER') THEN
            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
                'refusing to install the memory API: schema {S} belongs to role %s, which %s cannot act as; drop the schema or install as its owner',
                v_schema_owner, current_user);
        END IF;
        {_CREATORS}
    END IF;
    SELECT r.rolcanlogin, r.rolsuper INTO v_role FROM pg_catalog.pg_roles r WHERE r.rolname = v_owner;
    IF FOUND THEN
        IF v_role.rolcanlogin OR v_role.rolsuper THEN
            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
                'refusing to install the memory API: role %s exists and is a LOGIN or SUPERUSER role; the API''s owner must be NOLOGIN with no other right than DML on dbmemory''s tables: drop or rename that role',
                v_owner);
        END IF;
        IF NOT pg_catalog.pg_has_role(current_user, v_owner, 'MEMBER') THEN
            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
                'refusing to install the memory API: role %s (the API''s owner) exists but %s is not a member: GRANT %s TO %s, or drop that role',
                v_owner, current_user, v_owner, current_user);
        END IF;
    ELSIF (SELECT r.rolsuper OR r.rolcreaterole FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN NOINHERIT', v_owner);
        EXECUTE pg_catalog.format('GRANT %I TO %I', v_owner, current_user);
    ELSE
        RAISE NOTICE 'role % cannot create roles: the memory API is owned by % itself (a dedicated NOLOGIN owner holding only DML on the tables needs CREATEROLE or a superuser at install time)',
            current_user, current_user;
        v_owner := current_user;
    END IF;
    PERFORM pg_catalog.set_config('{S}.api_owner', v_owner, false);
    {_UNPIN}
END
$preflight$"""


def harden(tables: list[str]) -> str:
    """The last statement: definer rights, the pinned ``search_path``, the owner and its DML
    rights on ``tables`` (names without schema), no EXECUTE for PUBLIC, the CREATE check again."""
    qualified = ", ".join(f"{T}.{t}" for t in tables)
    return f"""DO $harden$
DECLARE
    {_SAVE}
    v_owner text := pg_catalog.current_setting('{S}.api_owner');
    v_others text;
    r record;
BEGIN
    {_PIN}
    IF v_owner <> current_user THEN
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA {T} TO %I', v_owner);
        EXECUTE pg_catalog.format('GRANT SELECT, INSERT, UPDATE, DELETE ON {qualified} TO %I', v_owner);
        EXECUTE pg_catalog.format('ALTER SCHEMA {S} OWNER TO %I', v_owner);
    END IF;
    FOR r IN SELECT p.oid::pg_catalog.regprocedure AS sig FROM pg_catalog.pg_proc p
               JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = '{S}'
    LOOP
        -- definer rights, a search_path no caller can change, and no EXECUTE for PUBLIC
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = {SAFE_PATH}', r.sig);
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', r.sig, v_owner);
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', r.sig);
    END LOOP;
    EXECUTE 'REVOKE CREATE ON SCHEMA {S} FROM PUBLIC';
    {_CREATORS}
    {_UNPIN}
END
$harden$"""


def _array(names: tuple[str, ...]) -> str:
    return "ARRAY[" + ", ".join(f"'{n}'" for n in names) + "]::text[]"


GRANT_BLOCK = f"""DO $grant$
DECLARE
    {_SAVE}
    v_base text := {ROLE_BASE_SQL};
    v_user text := pg_catalog.current_setting('{S}.api_role', true);
    v_admin text := pg_catalog.current_setting('{S}.api_admin_role', true);
    v_role text;
    v_calls text[];
    r record;
BEGIN
    {_PIN}
    -- '{DERIVED}': the derived default; '' or unset: no such role
    IF v_user = '{DERIVED}' THEN v_user := v_base || '{USER_SUFFIX}'; END IF;
    IF v_admin = '{DERIVED}' THEN v_admin := v_base || '{ADMIN_SUFFIX}'; END IF;
    FOR i IN 1 .. 2 LOOP
        v_role := CASE i WHEN 1 THEN v_user ELSE v_admin END;
        v_calls := CASE i WHEN 1 THEN {_array((*USER_CALLS, *TOOL_CALLS))} ELSE {_array(ADMIN_CALLS)} END;
        CONTINUE WHEN v_role IS NULL OR v_role = '';
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', v_role);
        END IF;
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA {S} TO %I', v_role);
        FOR r IN SELECT p.oid::pg_catalog.regprocedure AS sig FROM pg_catalog.pg_proc p
                   JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                  WHERE n.nspname = '{S}' AND p.proname::text = ANY (v_calls)
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', r.sig, v_role);
        END LOOP;
    END LOOP;
    {_UNPIN}
END
$grant$"""
"""Create the user role (setting ``dbm_memory.api_role``) and the admin role (setting
``dbm_memory.api_admin_role``) when missing (``-``: the derived names ``<base>_user`` /
``<base>_admin``; empty: none) and let them execute :data:`USER_CALLS` / :data:`ADMIN_CALLS`:
no right on any table, and neither role may run the other's calls."""


UNINSTALL = f"""DO $uninstall$
DECLARE
    {_SAVE}
    v_base text := {ROLE_BASE_SQL};
    v_owner text := v_base || '{OWNER_SUFFIX}';
    v_role text;
BEGIN
    {_PIN}
    DROP SCHEMA IF EXISTS {S} CASCADE;
    -- the dedicated owner (never the installer itself): its grants on the tables, then the role
    IF v_owner <> current_user AND EXISTS (
            SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = v_owner AND NOT r.rolcanlogin) THEN
        EXECUTE pg_catalog.format('DROP OWNED BY %I', v_owner);
        EXECUTE pg_catalog.format('DROP ROLE %I', v_owner);
    END IF;
    -- the user and admin roles: the derived names, and those named in the setting
    -- dbm_memory.uninstall_roles (comma-separated); their only rights died with the schema.
    -- Never a role that can log in, never the caller.
    FOREACH v_role IN ARRAY ARRAY[v_base || '{USER_SUFFIX}', v_base || '{ADMIN_SUFFIX}']
            || pg_catalog.string_to_array(
                   coalesce(pg_catalog.current_setting('{S}.uninstall_roles', true), ''), ',')
    LOOP
        IF v_role <> '' AND v_role <> current_user AND EXISTS (
                SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = v_role AND NOT r.rolcanlogin) THEN
            EXECUTE pg_catalog.format('DROP ROLE %I', v_role);
        END IF;
    END LOOP;
    {_UNPIN}
END
$uninstall$"""
"""Remove the schema ``dbm_memory``, the dedicated owner role the install created, and the
user and admin roles (the derived names and those in ``dbm_memory.uninstall_roles``)."""
