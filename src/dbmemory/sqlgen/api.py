"""``api.sql``: the memory API inside the database, for callers that cannot import Python
(APEX pages, ORDS handlers, scheduler jobs, PL/pgSQL, MySQL procedures).

One contract with the Python API (:mod:`dbmemory.files`, :mod:`dbmemory.stores`,
:mod:`dbmemory.expiry`): the same store keys, path keys (SHA-256 of the UTF-8 path), caps,
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

from dbmemory.sqlgen._common import DIALECTS, _header, _tidy
from dbmemory.sqlgen.api_common import API_ERRORS, API_NAME, API_ROLE, PATH_RULE

__all__ = [
    "api_statements",
    "api_grant_statements",
    "api_uninstall_statements",
    "render_api",
    "check_role_name",
]

_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,29}")


def check_role_name(role: str) -> str:
    """A role name safe to put in a statement: a letter or ``_`` first, then letters, digits
    and ``_``, at most 30 characters (Oracle's limit before 12.2).

    Raises:
        InvalidArgumentError: any other name.
    """
    from dbmemory.errors import InvalidArgumentError

    if not isinstance(role, str) or _ROLE.fullmatch(role) is None:
        raise InvalidArgumentError(
            f"role name {role!r} must be a letter or '_' followed by up to 29 letters, digits "
            "or '_': pass e.g. dbm_memory_user"
        )
    return role


def api_statements(dialect: str) -> list[str]:
    """The statements that (re)create the API, one by one for a driver (no client delimiters).

    Raises:
        ValueError: unknown dialect.
    """
    if dialect == "postgresql":
        from dbmemory.sqlgen.api_postgresql import pg_statements

        return pg_statements()
    if dialect == "mysql":
        from dbmemory.sqlgen.api_mysql import mysql_statements

        return mysql_statements()
    if dialect == "oracle":
        from dbmemory.sqlgen.api_oracle import oracle_statements

        return oracle_statements()
    raise ValueError(f"dialect {dialect!r} must be one of {', '.join(DIALECTS)}")


def api_grant_statements(dialect: str, role: str = API_ROLE) -> list[tuple[str, dict[str, str]]]:
    """``(statement, parameters)`` that create ``role`` when missing and let it execute the
    API (and nothing on the tables).

    Raises:
        InvalidArgumentError: a role name :func:`check_role_name` refuses.
        ValueError: unknown dialect.
    """
    role = check_role_name(role)
    if dialect == "postgresql":
        from dbmemory.sqlgen.api_postgresql import GRANT_BLOCK

        return [
            (f"SELECT set_config('{API_NAME}.api_role', %(role)s, false)", {"role": role}),
            (GRANT_BLOCK, {}),
        ]
    if dialect == "mysql":
        from dbmemory.sqlgen.api_mysql import mysql_grants

        return [(s, {}) for s in mysql_grants(role)]
    if dialect == "oracle":
        from dbmemory.sqlgen.api_oracle import oracle_grants

        return [(s, {}) for s in oracle_grants(role)]
    raise ValueError(f"dialect {dialect!r} must be one of {', '.join(DIALECTS)}")


def api_uninstall_statements(dialect: str) -> list[str]:
    """The statements that remove the API (the role stays: drop it yourself if unused)."""
    if dialect == "postgresql":
        return [f"DROP SCHEMA IF EXISTS {API_NAME} CASCADE"]
    if dialect == "mysql":
        from dbmemory.sqlgen.api_mysql import mysql_uninstall

        return mysql_uninstall()
    if dialect == "oracle":
        from dbmemory.sqlgen.api_oracle import oracle_uninstall

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
    from dbmemory.sqlgen.api_postgresql import GRANT_BLOCK, pg_statements

    header = _header(
        "postgresql",
        "memory API",
        [
            f"-- Creates schema {API_NAME}: SECURITY DEFINER functions (fixed search_path) that",
            "-- read and write dbmemory's tables with the Python API's rules; none commits.",
            "-- Run after install.sql as the owner of the tables:",
            "--   psql -v ON_ERROR_STOP=1 -d <database> -f api.sql",
            f"--   (or: dbmemory db install-api --role {API_ROLE})",
            f"-- Grants: the role named by api_role (default {API_ROLE}) may execute the API",
            "-- and has no right on the tables. Skip it with -v api_role= (empty).",
            f"-- Remove: DROP SCHEMA {API_NAME} CASCADE; (or dbmemory db uninstall-api).",
            "-- An error aborts the caller's transaction, as every failed statement does on",
            "-- PostgreSQL: call inside a savepoint (BEGIN ... EXCEPTION in PL/pgSQL) to go on.",
            *_error_lines("postgresql"),
            *_path_lines(),
        ],
    )
    body = ";\n\n".join(pg_statements()) + ";\n"
    grant = f"""-- The role that may execute the API (and nothing else).
\\if :{{?api_role}}
\\else
\\set api_role {API_ROLE}
\\endif
SELECT :'api_role' <> '' AS dbm_grant \\gset
\\if :dbm_grant
SELECT set_config('{API_NAME}.api_role', :'api_role', false);
{GRANT_BLOCK};
\\endif
"""
    return f"{header}\n{body}\n{grant}"


def _mysql() -> str:
    from dbmemory.sqlgen.api_mysql import mysql_grants, mysql_script_body

    header = _header(
        "mysql",
        "memory API",
        [
            f"-- Creates the routines {API_NAME}_<call> (SQL SECURITY DEFINER) that read and",
            "-- write dbmemory's tables with the Python API's rules; none commits.",
            "-- Call the writers inside a transaction (START TRANSACTION ... COMMIT): with",
            "-- autocommit on and no transaction open they refuse (invalid_argument).",
            "-- Run after install.sql: mysql <database> < api.sql",
            f"--   (or: dbmemory db install-api --role {API_ROLE})",
            f"-- Grants: role {API_ROLE} may execute the API and has no right on the tables",
            "-- (edit the name in the last lines, or delete them).",
            "-- Remove: dbmemory db uninstall-api (DROP PROCEDURE/FUNCTION of each routine).",
            *_error_lines("mysql"),
            *_path_lines(),
        ],
    )
    grants = "\n".join(s + ";" for s in mysql_grants(API_ROLE))
    return f"{header}\n{mysql_script_body()}\n-- The role that may execute the API (and nothing else).\n{grants}\n"


def _oracle() -> str:
    from dbmemory.sqlgen.api_oracle import oracle_script_body

    header = _header(
        "oracle",
        "memory API",
        [
            f"-- Creates package {API_NAME} (definer rights) that reads and writes dbmemory's",
            "-- tables with the Python API's rules; no call commits or rolls back.",
            "-- Run after install.sql as the schema owner (SQL*Plus or SQLcl):",
            "--   @api.sql      (or: dbmemory db install-api --role DBM_MEMORY_USER)",
            f"-- Grants: the role named by DEFINE api_role (default {API_ROLE.upper()}) gets EXECUTE",
            "-- on the package, nothing on the tables; needs CREATE ROLE (to skip it, set the",
            "-- DEFINE near the end to '').",
            f"-- Remove: DROP PACKAGE {API_NAME}; (or dbmemory db uninstall-api).",
            "-- NOT YET RUN on a live Oracle server: see the README (From SQL, APEX and ORDS).",
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
    return _tidy(renderers[dialect]())
