"""Installing and removing the in-database API on a live database (``dbmemory db install-api`` /
``uninstall-api``): the statements of :mod:`dbmemory.sqlgen.api` plus the steps a static script
cannot take, because they depend on the database they run in.

* PostgreSQL: the schema of dbmemory's tables is read first and named in every statement; the
  whole install runs in one transaction (a refusal leaves nothing behind); the API's owner is
  the NOLOGIN role ``<base>_owner`` (:func:`dbmemory.sqlgen.api_common.derived_role_base`) when
  the installer may create roles, else the installer (said in the report).
* MySQL/MariaDB: the routines run as the locked account ``'<base>_owner'@'localhost'``
  (``ACCOUNT LOCK``: nobody logs in with it) holding only SELECT, INSERT, UPDATE, DELETE on the
  tables the routines use, CREATE TEMPORARY TABLES in the database and EXECUTE on the routines, when the installer may create accounts and
  name another definer (CREATE USER, GRANT OPTION, SET USER or SUPER); else they run as the
  installer (said in the report).
* Oracle: the package, then its compile errors read from ``USER_ERRORS`` (python-oracledb
  reports a package that compiled with errors, ORA-24344, only as warning DPY-7000), then the
  grants.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.db.dialect.base import driver_connection
from dbmemory.errors import InvalidArgumentError, StorageError
from dbmemory.sqlgen.api import (
    api_grant_statements,
    api_statements,
    api_uninstall_statements,
    check_role_name,
    derived_role_names,
    tables_schema,
)
from dbmemory.sqlgen.api_common import API_NAME, DERIVED, OWNER_SUFFIX, derived_role_base
from dbmemory.sqlgen.mysql.api import mysql_definer_execute, mysql_definer_setup, mysql_statements

__all__ = [
    "InstallReport",
    "install_api",
    "uninstall_api",
    "mysql_definer_account",
    "oracle_compile_report",
    "ORACLE_ERRORS_QUERY",
]


@dataclass
class InstallReport:
    """What :func:`install_api` did.

    Attributes:
        dialect: ``postgresql``, ``mysql`` or ``oracle``.
        owner: the role (PostgreSQL) or account (MySQL) the API's definer code runs as.
        role: the user role granted the file calls, or None.
        admin_role: the admin role granted the configuration calls, or None.
        notes: sentences for the operator (a weaker set-up chosen, and why).
    """

    dialect: str
    owner: str | None
    role: str | None
    admin_role: str | None = None
    notes: list[str] = field(default_factory=list)


def mysql_definer_account(database: str) -> str:
    """``'<base>_owner'@'localhost'``, quoted, for ``database``."""
    return f"'{derived_role_base(database)}{OWNER_SUFFIX}'@'localhost'"


def _run(engine: Engine, statements: list[tuple[str, dict[str, str]]], fetch: str | None = None) -> object:
    """Run ``statements`` on the raw driver in one transaction (no SQLAlchemy parsing of ':'
    or '%'); ``fetch``: a query whose first value is returned before the commit."""
    with engine.connect() as conn:
        dbapi = driver_connection(conn)
        cursor = dbapi.cursor()
        value = None
        try:
            for statement, params in statements:
                if params:
                    cursor.execute(statement, params)
                else:
                    cursor.execute(statement)
            if fetch is not None:
                cursor.execute(fetch)
                row = cursor.fetchone()
                value = None if row is None else row[0]
        except BaseException:
            dbapi.rollback()
            raise
        finally:
            cursor.close()
        dbapi.commit()
        return value


def _plain(statements: list[str]) -> list[tuple[str, dict[str, str]]]:
    return [(s, {}) for s in statements]


def _database_name(engine: Engine, dialect: str) -> str:
    query = {"postgresql": "SELECT current_database()", "mysql": "SELECT DATABASE()",
             "oracle": "SELECT USER FROM DUAL"}[dialect]
    with engine.connect() as conn:
        return str(conn.execute(sa.text(query)).scalar())


_GRANTEE = ("CONCAT(CHAR(39), SUBSTRING_INDEX(CURRENT_USER(), '@', 1), CHAR(39), '@', CHAR(39),"
            " SUBSTRING_INDEX(CURRENT_USER(), '@', -1), CHAR(39))")
"""``'user'@'host'`` of the session's account, as information_schema writes GRANTEE."""


def _mysql_may_create_roles(conn: sa.Connection) -> bool:
    """The session's account holds CREATE USER (or MySQL 8's CREATE ROLE) globally."""
    return bool(conn.execute(sa.text(
        "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES"
        " WHERE PRIVILEGE_TYPE IN ('CREATE USER', 'CREATE ROLE') AND GRANTEE = " + _GRANTEE
    )).scalar())


def install_api(
    engine: Engine, dialect: str, role: str | None = None, admin_role: str | None = None
) -> InstallReport:
    """Install (or replace) the API on ``engine``; with ``role`` / ``admin_role``, create the
    user role / admin role when missing and let them execute their calls (:data:`DERIVED`:
    the name derived from the database, on Oracle from the schema: ``<base>_user`` /
    ``<base>_admin``).

    Raises:
        NotFoundError: PostgreSQL, no ``dbm_stores`` on the search_path.
        InvalidArgumentError: MySQL/MariaDB, roles asked for and the account may not create
            them (checked before anything is installed).
        StorageError: Oracle, the package did not compile (the errors of USER_ERRORS).
        Exception: the driver's own error when the database refused (PostgreSQL: the
            install's own checks, e.g. another role may CREATE in schema dbm_memory, with the
            reason in the message).
    """
    notes: list[str] = []
    if dialect == "oracle" and admin_role == DERIVED:
        admin_role = None
        notes.append("Oracle's API is one package with one EXECUTE grant: no admin role was "
                     "created; the user role may run every call")
    if DERIVED in (role, admin_role):
        user_name, admin_name = derived_role_names(_database_name(engine, dialect))
        role = user_name if role == DERIVED else role
        admin_role = admin_name if admin_role == DERIVED else admin_role
    wanted = role is not None or admin_role is not None
    grants = api_grant_statements(dialect, role, admin_role) if wanted else []
    if dialect == "postgresql":
        with engine.connect() as conn:
            schema = tables_schema(conn)
        owner = str(_run(engine, _plain(api_statements(dialect, schema)) + grants,
                         fetch=f"SELECT current_setting('{API_NAME}.api_owner'), current_user"))
        with engine.connect() as conn:
            me = conn.execute(sa.text("SELECT current_user")).scalar()
        if owner == me:
            notes.append(
                f"{me} may not create roles, so it owns the API itself: to give the API a NOLOGIN "
                "owner with DML only, install once as a role with CREATEROLE"
            )
        return InstallReport(dialect, owner, role, admin_role, notes)
    if dialect == "mysql":
        with engine.connect() as conn:
            database = conn.execute(sa.text("SELECT DATABASE()")).scalar()
            me = conn.execute(sa.text("SELECT CURRENT_USER()")).scalar()
            if wanted and not _mysql_may_create_roles(conn):
                raise InvalidArgumentError(
                    f"{me} may not create roles (it lacks the CREATE USER privilege; MySQL 8 also "
                    "accepts CREATE ROLE): nothing was installed. Ask a DBA for GRANT CREATE USER "
                    f"ON *.* TO {me} WITH GRANT OPTION, or install without --roles/--role/"
                    "--admin-role and let a DBA create the roles and grant them EXECUTE"
                )
        account: str | None = mysql_definer_account(str(database))
        try:
            _run(engine, _plain(mysql_definer_setup(str(account), str(database))))
            _run(engine, _plain(mysql_statements(account)))
        except engine.dialect.loaded_dbapi.Error as exc:  # the raw driver's error
            notes.append(
                f"{me} may not create the locked definer account {account} or name it as "
                f"DEFINER ({exc}): the routines run as {me}; grant CREATE USER, "
                "GRANT OPTION and SET USER (MariaDB) / SET_USER_ID (MySQL) to install them under "
                "an account with DML only"
            )
            account = None
            _run(engine, _plain(mysql_statements(None)))
        if account is not None:
            _run(engine, _plain(mysql_definer_execute(account)))
        if grants:
            _run(engine, grants)
        return InstallReport(dialect, account or str(me), role, admin_role, notes)
    _run(engine, _plain(api_statements(dialect)))
    with engine.connect() as conn:  # python-oracledb reports ORA-24344 only as warning DPY-7000
        errors = conn.execute(sa.text(ORACLE_ERRORS_QUERY), {"name": API_NAME.upper()}).all()
    if errors:
        raise StorageError(oracle_compile_report([tuple(row) for row in errors]))
    if grants:
        _run(engine, grants)
    return InstallReport(dialect, None, role, admin_role, notes)


ORACLE_ERRORS_QUERY = (
    "SELECT type, line, position, text FROM user_errors WHERE name = :name"
    " AND attribute = 'ERROR' ORDER BY type, sequence"
)
"""The compile errors of the package (spec and body) after ``CREATE OR REPLACE``."""


def oracle_compile_report(rows: list[tuple[object, ...]], shown: int = 10) -> str:
    """The message for a package that did not compile: the first ``shown`` rows of
    :data:`ORACLE_ERRORS_QUERY` (``type, line, position, text``), one per line."""
    lines = [f"  {kind} line {line}, column {position}: {str(text).strip()}"
             for kind, line, position, text in rows[:shown]]
    more = f"\n  ... and {len(rows) - shown} more" if len(rows) > shown else ""
    return (f"package {API_NAME.upper()} did not compile ({len(rows)} error(s) in USER_ERRORS); "
            "the API is installed but INVALID: fix the cause (often a missing privilege on a "
            "table, or an unsupported Oracle version) and run install-api again, or remove it "
            "with uninstall-api:\n" + "\n".join(lines) + more)


def uninstall_api(engine: Engine, dialect: str, roles: tuple[str, ...] = ()) -> None:
    """Remove the API, the owner role or definer account its install created, the derived user
    and admin roles (``<base>_user``, ``<base>_admin``) and ``roles`` (the names given to
    ``--role`` / ``--admin-role`` at install). A role that can log in is never dropped
    (PostgreSQL).

    Raises:
        InvalidArgumentError: a role name :func:`check_role_name` refuses.
        Exception: the driver's own error when the database refused (e.g. a role still has
            rights in another database).
    """
    for name in roles:
        check_role_name(name)
    statements: list[tuple[str, dict[str, str]]] = []
    if dialect == "postgresql":
        statements.append((f"SELECT set_config('{API_NAME}.uninstall_roles', %(roles)s, false)",
                           {"roles": ",".join(roles)}))
    statements += _plain(api_uninstall_statements(dialect))
    if dialect == "mysql":
        database = _database_name(engine, dialect)
        statements.append((f"DROP USER IF EXISTS {mysql_definer_account(database)}", {}))
        for name in (*derived_role_names(database), *roles):
            statements.append((f"DROP ROLE IF EXISTS {name}", {}))
    if dialect == "oracle":
        for name in roles:
            statements.append((_ORACLE_DROP_ROLE.format(role=name.upper()), {}))
    _run(engine, statements)


_ORACLE_DROP_ROLE = """BEGIN
  EXECUTE IMMEDIATE 'DROP ROLE {role}';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE <> -1919 THEN  -- ORA-01919: the role does not exist
      RAISE;
    END IF;
END;"""
