"""``install.sql`` and ``uninstall.sql``: alembic's offline upgrade and downgrade, tidied for
each database's own client (see :mod:`dbmemory.sqlgen`)."""

from __future__ import annotations

import re

from dbmemory.db.migrate import ORACLE_CHARACTER_SET, ORACLE_SCHEMA_PRIVILEGES, offline_sql
from dbmemory.db.schema import VERSION_TABLE
from dbmemory.sqlgen._common import (
    MYSQL_DAYS_FUNC,
    MYSQL_EVENT,
    ORACLE_JOB,
    PG_JOB,
    PLSQL_START,
    PROC,
    VERSION_DELETE,
    VERSION_INSERT_RETURNING,
    script_header,
    tidy,
)
from dbmemory.sqlgen.api_common import (
    ADMIN_SUFFIX,
    API_NAME,
    OWNER_SUFFIX,
    ROLE_PREFIX_CHARS,
    USER_SUFFIX,
)
from dbmemory.sqlgen.mysql.api import mysql_uninstall
from dbmemory.sqlgen.postgresql.security import UNINSTALL as PG_API_UNINSTALL

_ITEMS_PROC = "dbm_expire_items"
"""The memory items' procedure (:mod:`dbmemory.sqlgen.item_jobs`)."""

__all__ = ["render_install", "render_uninstall"]


def _oracle_statements(raw: str) -> str:
    """Turn alembic's Oracle output (statements separated by ``/`` lines, no ``;``) into
    SQL*Plus style: ``;`` after SQL statements, a ``/`` line after PL/SQL blocks only."""
    chunks = re.split(r"^/\s*$", raw, flags=re.MULTILINE)
    out: list[str] = []
    for chunk in chunks:
        chunk = chunk.strip("\n")
        if not chunk.strip():
            continue
        comments = [ln for ln in chunk.splitlines() if ln.startswith("--")]
        body = "\n".join(ln for ln in chunk.splitlines() if not ln.startswith("--")).strip()
        out.extend(comments)
        if comments and body:
            out.append("")
        if body:
            out.append(f"{body}\n/" if PLSQL_START.match(body) else f"{body};")
        out.append("")
    return "\n".join(out)


def _fix_version_statements(
    sql: str, *, drop_version_table: bool, terminator: str, purge: bool = False
) -> str:
    # alembic renders the version insert with RETURNING (Oracle: "... INTO :ret_0", a bind
    # SQL*Plus never declares): a plain INSERT is what an install script needs.
    sql = VERSION_INSERT_RETURNING.sub(lambda m: m.group(1) + terminator, sql)
    if drop_version_table:
        drop = f"DROP TABLE {VERSION_TABLE}{' PURGE' if purge else ''}{terminator}"
        sql = VERSION_DELETE.sub(drop, sql)
    return sql


_ORACLE_PROLOGUE = "WHENEVER SQLERROR EXIT SQL.SQLCODE ROLLBACK\nSET DEFINE OFF\n"
"""SQL*Plus settings of the Oracle install and uninstall scripts: stop at the first error and
roll back the pending data changes (SQL*Plus commits them on ``EXIT`` by default)."""


def _oracle_install_preflight() -> str:
    """A PL/SQL block that stops install.sql before its first DDL, with the statement a DBA
    runs, when the schema lacks a privilege or tablespace quota, or the database is not
    AL32UTF8: the same rules as :func:`dbmemory.db.migrate.oracle_preflight`."""
    needs = "\n".join(f"  need('{privilege}');" for privilege in ORACLE_SCHEMA_PRIVILEGES)
    return f"""-- Stop before creating anything unless the database is {ORACLE_CHARACTER_SET} and this schema has
-- {', '.join(ORACLE_SCHEMA_PRIVILEGES)} and a quota on its default tablespace.
DECLARE
  v_charset  VARCHAR2(128);
  v_user     VARCHAR2(128);
  v_space    VARCHAR2(128);
  v_missing  VARCHAR2(4000);
  v_count    PLS_INTEGER;
  PROCEDURE need(p_privilege IN VARCHAR2) IS
  BEGIN
    SELECT COUNT(*) INTO v_count FROM session_privs
     WHERE privilege IN (p_privilege, REPLACE(p_privilege, 'CREATE ', 'CREATE ANY '));
    IF v_count = 0 THEN
      v_missing := v_missing || ' GRANT ' || p_privilege || ' TO ' || v_user || ';';
    END IF;
  END need;
BEGIN
  SELECT value INTO v_charset FROM nls_database_parameters WHERE parameter = 'NLS_CHARACTERSET';
  IF v_charset <> '{ORACLE_CHARACTER_SET}' THEN
    RAISE_APPLICATION_ERROR(-20010, 'dbmemory needs an {ORACLE_CHARACTER_SET} database, this one is '
      || v_charset || ': other character sets replace or split characters silently');
  END IF;
  SELECT username, default_tablespace INTO v_user, v_space FROM user_users;
{needs}
  SELECT COUNT(*) INTO v_count FROM session_privs WHERE privilege = 'UNLIMITED TABLESPACE';
  IF v_count = 0 THEN
    SELECT COUNT(*) INTO v_count FROM user_ts_quotas
     WHERE tablespace_name = v_space AND (max_bytes = -1 OR max_bytes > bytes);
    IF v_count = 0 THEN
      v_missing := v_missing || ' ALTER USER ' || v_user || ' QUOTA UNLIMITED ON ' || v_space || ';';
    END IF;
  END IF;
  IF v_missing IS NOT NULL THEN
    RAISE_APPLICATION_ERROR(-20011, 'nothing was installed; as a DBA run:' || v_missing);
  END IF;
END;
/
"""


def _raw(dialect: str, direction: str) -> str:
    return offline_sql(dialect, direction)


def render_install(dialect: str) -> str:
    """The install script for ``dialect`` (``"oracle"``, ``"postgresql"`` or ``"mysql"``).

    Returns:
        SQL text: alembic's offline upgrade base -> head with a header, plain INSERT for the
        version row (no ``RETURNING``). On Oracle: SQL*Plus terminators, a pre-flight block
        before the first DDL (AL32UTF8, ``CREATE TABLE``/``CREATE VIEW``, tablespace quota:
        the rules of :func:`dbmemory.db.migrate.oracle_preflight`), ``ROLLBACK`` on error and
        a final ``COMMIT``.
    """
    raw = _raw(dialect, "upgrade")
    if dialect == "oracle":
        body = _fix_version_statements(
            _oracle_statements(raw), drop_version_table=False, terminator=";"
        )
        header = script_header(
            dialect,
            "install script",
            [
                "-- Run as the schema owner: sqlplus user@db @install.sql",
                "-- Each DDL statement commits: after a failure, run uninstall.sql, or let",
                "-- 'dbmemory db upgrade' finish the job (it skips what already exists).",
            ],
        )
        preflight = _oracle_install_preflight()
        # the data changes after the last DDL (version stamp, key moves) commit here
        return tidy(f"{header}\n{_ORACLE_PROLOGUE}\n{preflight}\n{body}\nCOMMIT;\n")
    body = _fix_version_statements(raw, drop_version_table=False, terminator=";")
    hint = {
        "postgresql": "-- Run: psql -v ON_ERROR_STOP=1 -d <database> -f install.sql",
        "mysql": "-- Run: mysql <database> < install.sql",
    }[dialect]
    return tidy(f"{script_header(dialect, 'install script', [hint])}\n{body}")


def _uninstall_prologue(dialect: str) -> str:
    """Statements that remove the expiry job and procedure before the tables go."""
    if dialect == "oracle":
        return f"""-- Remove the expiry job and procedure of expiry_job.sql, when installed.
DECLARE
  v_count PLS_INTEGER;
BEGIN
  SELECT COUNT(*) INTO v_count FROM user_scheduler_jobs WHERE job_name = '{ORACLE_JOB}';
  IF v_count > 0 THEN
    DBMS_SCHEDULER.DROP_JOB(job_name => '{ORACLE_JOB}', force => TRUE);
  END IF;
  SELECT COUNT(*) INTO v_count FROM user_objects
   WHERE object_name = '{PROC.upper()}' AND object_type = 'PROCEDURE';
  IF v_count > 0 THEN
    EXECUTE IMMEDIATE 'DROP PROCEDURE {PROC}';
  END IF;
  SELECT COUNT(*) INTO v_count FROM user_objects
   WHERE object_name = '{_ITEMS_PROC.upper()}' AND object_type = 'PROCEDURE';
  IF v_count > 0 THEN
    EXECUTE IMMEDIATE 'DROP PROCEDURE {_ITEMS_PROC}';
  END IF;
  -- the memory API of api.sql, when installed (it would stay behind INVALID)
  SELECT COUNT(*) INTO v_count FROM user_objects
   WHERE object_name = '{API_NAME.upper()}' AND object_type = 'PACKAGE';
  IF v_count > 0 THEN
    EXECUTE IMMEDIATE 'DROP PACKAGE {API_NAME}';
  END IF;
END;
/
"""
    if dialect == "postgresql":
        return f"""-- Remove the expiry job and procedure of expiry_job.sql, when installed.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
    PERFORM cron.unschedule(jobid) FROM cron.job WHERE jobname = '{PG_JOB}';
  END IF;
END
$$;

DROP PROCEDURE IF EXISTS {PROC}(numeric, bigint);
DROP PROCEDURE IF EXISTS {_ITEMS_PROC}(bigint, bigint);

-- The memory API of api.sql, when installed: its schema, its owner role and the roles named
-- after this database.
{PG_API_UNINSTALL};
"""
    api = "\n".join(f"{statement};" for statement in mysql_uninstall())
    return f"""-- Remove the expiry event, procedure and setting of expiry_job.sql, when installed.
DROP EVENT IF EXISTS {MYSQL_EVENT};
DROP PROCEDURE IF EXISTS {PROC};
DROP PROCEDURE IF EXISTS {_ITEMS_PROC};
DROP FUNCTION IF EXISTS {MYSQL_DAYS_FUNC};

-- The memory API of api.sql / install-api, when installed: its routines, then (when this account
-- may drop accounts) the definer account and the roles named after this database.
{api}
{_mysql_drop_derived()}
"""


def _mysql_drop_derived() -> str:
    """Drop ``'<base>_owner'@'localhost'``, ``<base>_user`` and ``<base>_admin``
    (:func:`dbmemory.sqlgen.api_common.derived_role_base` in SQL) when the account holds CREATE
    USER; a no-op statement otherwise, so the uninstall goes on."""
    base = ("CONCAT('dbm_', LEFT(LOWER(REGEXP_REPLACE(DATABASE(), '[^A-Za-z0-9_]', '_')), "
            f"{ROLE_PREFIX_CHARS}), '_', LEFT(MD5(DATABASE()), 4))")
    grantee = ("CONCAT(CHAR(39), SUBSTRING_INDEX(CURRENT_USER(), '@', 1), CHAR(39), '@', CHAR(39), "
               "SUBSTRING_INDEX(CURRENT_USER(), '@', -1), CHAR(39))")
    may = ("(SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = "
           f"'CREATE USER' AND GRANTEE = {grantee}) > 0")
    drops = [
        f"CONCAT('DROP USER IF EXISTS ', QUOTE(CONCAT(@dbm_base, '{OWNER_SUFFIX}')), '@', CHAR(39), 'localhost', CHAR(39))",
        f"CONCAT('DROP ROLE IF EXISTS ', @dbm_base, '{USER_SUFFIX}')",
        f"CONCAT('DROP ROLE IF EXISTS ', @dbm_base, '{ADMIN_SUFFIX}')",
    ]
    lines = [f"SET @dbm_base = {base};", f"SET @dbm_may = {may};"]
    for drop in drops:
        lines += [
            f"SET @dbm_sql = IF(@dbm_may, {drop}, 'DO 0');",
            "PREPARE dbm_stmt FROM @dbm_sql;",
            "EXECUTE dbm_stmt;",
            "DEALLOCATE PREPARE dbm_stmt;",
        ]
    return "\n".join(lines)


def render_uninstall(dialect: str) -> str:
    """The uninstall script for ``dialect``: drops the expiry job, the view, every dbmemory
    table and the version table (Oracle: ``DROP TABLE ... PURGE``, nothing left in the recycle
    bin). All memory data is lost.

    Returns:
        SQL text (alembic's offline downgrade head -> base, post-processed).
    """
    raw = _raw(dialect, "downgrade")
    warning = ["-- WARNING: drops every dbmemory table with all memory files and audit events."]
    prologue = _uninstall_prologue(dialect)
    if dialect == "oracle":
        body = _fix_version_statements(
            _oracle_statements(raw), drop_version_table=True, terminator=";", purge=True
        )
        header = script_header(dialect, "uninstall script", warning)
        return tidy(f"{header}\n{_ORACLE_PROLOGUE}\n{prologue}\n{body}")
    body = _fix_version_statements(raw, drop_version_table=True, terminator=";")
    if dialect == "postgresql":
        # Inside alembic's BEGIN; ... COMMIT; so the uninstall is all or nothing.
        body = body.replace("BEGIN;\n", f"BEGIN;\n\n{prologue}\n", 1)
        return tidy(f"{script_header(dialect, 'uninstall script', warning)}\n{body}")
    return tidy(f"{script_header(dialect, 'uninstall script', warning)}\n{prologue}\n{body}")


# -- expiry procedures --------------------------------------------------------------------------

