"""``api.sql``: the memory API inside the database, for callers that cannot import Python
(APEX pages, ORDS handlers, scheduler jobs, PL/pgSQL, MySQL procedures).

One contract with the Python API (:mod:`dbmemory.store.reads`, :mod:`dbmemory.store.files`,
:mod:`dbmemory.store.moves`, :mod:`dbmemory.store.agents`, :mod:`dbmemory.store.resolve`,
:mod:`dbmemory.store.drop`, :mod:`dbmemory.store.expiry`): the same store keys, path keys (SHA-256 of the UTF-8 path), caps,
shape rules, version bumps, audit events and lock order (store row, then file row). Every call
joins the caller's transaction and none commits or rolls back.

* Oracle: package ``dbm_memory`` (definer rights), ``GRANT EXECUTE`` to a role;
* PostgreSQL: schema ``dbm_memory`` of ``SECURITY DEFINER`` functions with a fixed
  ``search_path``;
* MySQL/MariaDB: routines ``dbm_memory_<call>`` (``SQL SECURITY DEFINER``).

The errors are :data:`dbmemory.sqlgen.api_common.API_ERRORS`.
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.errors import InvalidArgumentError, NotFoundError
from dbmemory.sqlgen._common import DIALECTS, script_header, tidy
from dbmemory.sqlgen.api_common import (
    ADMIN_SUFFIX,
    API_ERRORS,
    API_NAME,
    DERIVED,
    PATH_RULE,
    USER_SUFFIX,
    derived_role_base,
)
from dbmemory.sqlgen.mysql.api import (
    mysql_grants,
    mysql_script_body,
    mysql_statements,
    mysql_uninstall,
)
from dbmemory.sqlgen.oracle.api import (
    oracle_grants,
    oracle_script_body,
    oracle_statements,
    oracle_uninstall,
)
from dbmemory.sqlgen.postgresql.api import (
    TABLE_SCHEMA_QUERY,
    pg_script_body,
    pg_statements,
)
from dbmemory.sqlgen.postgresql.security import GRANT_BLOCK, UNINSTALL

__all__ = [
    "api_statements",
    "tables_schema",
    "api_grant_statements",
    "api_uninstall_statements",
    "render_api",
    "check_role_name",
    "derived_role_names",
]

_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,29}")


def check_role_name(role: str) -> str:
    """A role name safe to put in a statement: a letter or ``_`` first, then letters, digits
    and ``_``, at most 30 characters (Oracle's limit before 12.2).

    Raises:
        InvalidArgumentError: any other name.
    """
    if not isinstance(role, str) or _ROLE.fullmatch(role) is None:
        raise InvalidArgumentError(
            f"role name {role!r} must be a letter or '_' followed by up to 29 letters, digits "
            "or '_': pass e.g. app_memory_user"
        )
    return role


def api_statements(dialect: str, tables_schema: str = "public") -> list[str]:
    """The statements that (re)create the API, one by one for a driver (no client delimiters).

    ``tables_schema`` (PostgreSQL only): the schema of dbmemory's tables, which every statement
    names (:data:`dbmemory.sqlgen.postgresql.api.TABLE_SCHEMA_QUERY` finds it).

    Raises:
        ValueError: unknown dialect.
        InvalidArgumentError: a schema name PostgreSQL's API cannot name safely.
    """
    if dialect == "postgresql":
        return pg_statements(tables_schema)
    if dialect == "mysql":
        return mysql_statements()
    if dialect == "oracle":
        return oracle_statements()
    raise ValueError(f"dialect {dialect!r} must be one of {', '.join(DIALECTS)}")


def tables_schema(conn: Connection) -> str:
    """PostgreSQL: the schema of the ``dbm_stores`` table ``conn`` sees (for
    :func:`api_statements`).

    Raises:
        NotFoundError: no ``dbm_stores`` on the session's search_path.
    """
    found = conn.execute(sa.text(TABLE_SCHEMA_QUERY)).scalar()
    if found is None:
        raise NotFoundError(
            "dbm_stores is not on the search_path: run 'dbmemory db upgrade' (or install.sql) first"
        )
    return str(found)


def api_grant_statements(
    dialect: str, role: str | None = DERIVED, admin_role: str | None = None
) -> list[tuple[str, dict[str, str]]]:
    """``(statement, parameters)`` that create the user role ``role`` and the admin role
    ``admin_role`` when missing and let them execute their calls (:data:`USER_CALLS`,
    :data:`ADMIN_CALLS`) and nothing on the tables. None: no such role. PostgreSQL also takes
    :data:`DERIVED` (``-``) for the names derived from the database (``<base>_user``,
    ``<base>_admin``); for MySQL pass the names (:func:`derived_role_names`).

    Raises:
        InvalidArgumentError: a role name :func:`check_role_name` refuses; an admin role on
            Oracle (one package, one EXECUTE grant: not split yet).
        ValueError: unknown dialect.
    """
    for name in (role, admin_role):
        if name is not None and name != DERIVED:
            check_role_name(name)
    if dialect == "postgresql":
        return [
            (f"SELECT set_config('{API_NAME}.api_role', %(role)s, false),"
             f" set_config('{API_NAME}.api_admin_role', %(admin)s, false)",
             {"role": role or "", "admin": admin_role or ""}),
            (GRANT_BLOCK, {}),
        ]
    if DERIVED in (role, admin_role):
        raise InvalidArgumentError("pass the role names (derived_role_names(database)) on MySQL and Oracle")
    if dialect == "mysql":
        return [(s, {}) for s in mysql_grants(role, admin_role)]
    if dialect == "oracle":
        if admin_role is not None:
            raise InvalidArgumentError(
                "Oracle's API is one package with one EXECUTE grant: an admin role separate from "
                "the user role is not built for Oracle yet; pass --role only"
            )
        return [(s, {}) for s in oracle_grants(role)] if role is not None else []
    raise ValueError(f"dialect {dialect!r} must be one of {', '.join(DIALECTS)}")


def derived_role_names(database: str) -> tuple[str, str]:
    """``(<base>_user, <base>_admin)`` for ``database`` (:func:`derived_role_base`)."""
    base = derived_role_base(database)
    return base + USER_SUFFIX, base + ADMIN_SUFFIX


def api_uninstall_statements(dialect: str) -> list[str]:
    """The statements that remove the API (PostgreSQL: and the dedicated owner role it created;
    the role that executes it stays: drop it yourself if unused)."""
    if dialect == "postgresql":
        return [UNINSTALL]
    if dialect == "mysql":
        return mysql_uninstall()
    if dialect == "oracle":
        return oracle_uninstall()
    raise ValueError(f"dialect {dialect!r} must be one of {', '.join(DIALECTS)}")


def _error_lines(dialect: str) -> list[str]:
    lines = ["-- Errors (one range; the message starts with the code):"]
    for e in API_ERRORS:
        where = {
            "oracle": f"ORA{-e.number} e_{e.name}",
            "postgresql": f"SQLSTATE {e.sqlstate}",
            "mysql": f"SQLSTATE 45000, MYSQL_ERRNO {e.number}",
        }[dialect]
        lines.append(f"--   {where:<28} {e.name}: {e.meaning}")
    return lines


def _path_lines() -> list[str]:
    words = ("Paths: " + PATH_RULE + ". Anything else is refused with a message saying "
             "what is wrong, never changed.").split()
    lines, line = [], "--"
    for word in words:
        if len(line) + len(word) + 1 > 96:
            lines.append(line)
            line = "--"
        line += " " + word
    return [*lines, line]


def _postgresql() -> str:
    header = script_header(
        "postgresql",
        "memory API",
        [
            f"-- Creates schema {API_NAME}: SECURITY DEFINER functions that read and write",
            "-- dbmemory's tables with the Python API's rules; none commits. No escalation:",
            "-- search_path = pg_catalog, pg_temp and every table schema-qualified; owned by",
            "-- the NOLOGIN role dbm_<database>_<hash>_owner (DML on the tables, nothing else)",
            "-- when the installer may create roles; refuses to install while another role",
            f"-- (or PUBLIC) may CREATE in schema {API_NAME}.",
            "-- Run after install.sql as the owner of the tables:",
            "--   psql -v ON_ERROR_STOP=1 -d <database> -f api.sql",
            "--   (or: dbmemory db install-api --roles)",
            "-- Grants: the user role (-v api_role=NAME, default dbm_<database>_<hash>_user)",
            "-- may execute the file calls, the admin role (-v api_admin_role=NAME, default",
            "-- dbm_<database>_<hash>_admin) the configuration calls (enable_for_agent,",
            "-- disable_for_agent, expire_files); neither has a right on the tables. Skip a",
            "-- role with -v api_role= (empty), or -v api_admin_role= .",
            "-- Remove: dbmemory db uninstall-api (the schema and the owner role).",
            "-- An error aborts the caller's transaction, as every failed statement does on",
            "-- PostgreSQL: call inside a savepoint (BEGIN ... EXCEPTION in PL/pgSQL) to go on.",
            *_error_lines("postgresql"),
            *_path_lines(),
        ],
    )
    body = pg_script_body()
    grant = f"""-- The roles that may execute the API (and nothing else); '{DERIVED}': the derived name.
\\if :{{?api_role}}
\\else
\\set api_role '{DERIVED}'
\\endif
\\if :{{?api_admin_role}}
\\else
\\set api_admin_role '{DERIVED}'
\\endif
SELECT set_config('{API_NAME}.api_role', :'api_role', false),
       set_config('{API_NAME}.api_admin_role', :'api_admin_role', false);
{GRANT_BLOCK};
"""
    return f"{header}\n{body}\n{grant}"


def _mysql() -> str:
    header = script_header(
        "mysql",
        "memory API",
        [
            f"-- Creates the routines {API_NAME}_<call> (SQL SECURITY DEFINER) that read and",
            "-- write dbmemory's tables with the Python API's rules; none commits.",
            "-- Call the writers inside a transaction (START TRANSACTION ... COMMIT): with",
            "-- autocommit on and no transaction open they refuse (invalid_argument).",
            "-- Run after install.sql: mysql <database> < api.sql",
            "--   (or: dbmemory db install-api --roles: a user role for the file calls and an",
            "--   admin role for the configuration calls, named after the database, and the",
            "--   locked DML-only definer account)",
            "-- This script creates no role and no account: the routines run as the account",
            "-- that runs it.",
            "-- Remove: dbmemory db uninstall-api (DROP PROCEDURE/FUNCTION of each routine).",
            *_error_lines("mysql"),
            *_path_lines(),
        ],
    )
    return f"{header}\n{mysql_script_body()}"


def _oracle() -> str:
    header = script_header(
        "oracle",
        "memory API",
        [
            f"-- Creates package {API_NAME} (definer rights) that reads and writes dbmemory's",
            "-- tables with the Python API's rules; no call commits or rolls back.",
            "-- Run after install.sql as the schema owner (SQL*Plus or SQLcl):",
            "--   @api.sql      (or: dbmemory db install-api --role DBM_MEMORY_USER)",
            "-- Grants: the role named by DEFINE api_role (default DBM_MEMORY_USER) gets EXECUTE",
            "-- on the package, nothing on the tables; needs CREATE ROLE (to skip it, set the",
            "-- DEFINE near the end to '').",
            f"-- Remove: DROP PACKAGE {API_NAME}; (or dbmemory db uninstall-api).",
            "-- NOT YET RUN on a live Oracle server: see docs/sql.md (From SQL, APEX and ORDS).",
            *_error_lines("oracle"),
            *_path_lines(),
        ],
    )
    return f"{header}\n{oracle_script_body()}"


def render_api(dialect: str) -> str:
    """The ``api.sql`` script for ``dialect`` (its client's syntax; pure ASCII).

    Raises:
        ValueError: unknown dialect.
    """
    renderers = {"oracle": _oracle, "postgresql": _postgresql, "mysql": _mysql}
    if dialect not in renderers:
        raise ValueError(f"dialect {dialect!r} must be one of {', '.join(DIALECTS)}")
    return tidy(renderers[dialect]())
