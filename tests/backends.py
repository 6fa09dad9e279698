"""The backends the tests run on (SQLite always; PostgreSQL, MariaDB, Oracle and the deployment
servers from their URLs), and helpers that reach them: importable by any test module (conftest
modules are not, once folders have their own)."""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import NullPool

from dbmemory.db.engine import normalize_url, redact_url

BACKENDS = [
    pytest.param("sqlite-memory", id="sqlite-memory"),
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mysql", marks=pytest.mark.mysql),
    pytest.param("oracle", id="oracle", marks=pytest.mark.oracle),
    # deployment backends (issue 13, block at the end of this file): only the modules of
    # DEPLOY_MODULES run on them
    pytest.param("galera", id="galera", marks=pytest.mark.galera),
    pytest.param("pgbouncer", id="pgbouncer", marks=pytest.mark.pgbouncer),
]


def clean_tables(engine: Engine) -> None:
    """Delete every row of dbmemory's tables (fast; identities are not reset)."""
    with engine.begin() as c:
        name = engine.dialect.name
        if name == "postgresql":
            c.exec_driver_sql("SET LOCAL lock_timeout = '20s'")
        elif name in ("mysql", "mariadb"):  # keep the engine's own lock timeout afterwards
            c.exec_driver_sql("SET @dbm_lock_wait = @@session.innodb_lock_wait_timeout")
            c.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 20")
        for table in DATA_TABLES:
            c.exec_driver_sql(f"DELETE FROM {table}")
        if name in ("mysql", "mariadb"):
            c.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = @dbm_lock_wait")


@dataclass(frozen=True)
class Server:
    """A database server backend of the test suite."""

    name: str
    env_var: str
    display: str
    required_in_ci: bool
    own_database: bool = True
    """Whether each session creates (and drops) its own database; False: use the URL as is."""


DEPLOY_SERVERS: dict[str, Server] = {
    "galera": Server("galera", "DBMEMORY_TEST_GALERA_URLS", "MariaDB Galera cluster", True),
    "pgbouncer": Server("pgbouncer", "DBMEMORY_TEST_PGBOUNCER_URL", "PgBouncer", True),
    "pgcron": Server(
        "pgcron", "DBMEMORY_TEST_PGCRON_URL", "PostgreSQL with pg_cron", True, own_database=False
    ),
    "patroni": Server("patroni", "DBMEMORY_TEST_PATRONI_URL", "PostgreSQL Patroni cluster", True),
}


def deploy_urls(kind: str) -> list[URL]:
    """The URLs of deployment server ``kind`` (``galera``: three), or skip/fail naming the
    variable."""
    server = DEPLOY_SERVERS[kind]
    raw = os.environ.get(server.env_var, "").strip()
    if not raw:
        _deploy_unavailable(server, f"set {server.env_var} to run these tests (see .ci/{kind})")
    urls = [normalize_url(part.strip()) for part in raw.split(",") if part.strip()]
    if kind == "galera" and len(urls) != 3:
        _deploy_unavailable(server, f"{server.env_var} must list three node URLs, got {len(urls)}")
    for url in urls:
        admin = _admin_engine(url)
        try:
            with admin.connect() as c:
                c.exec_driver_sql("SELECT 1")
        except Exception as exc:
            _deploy_unavailable(
                server,
                f"cannot connect to {redact_url(url)} ({server.env_var}): "
                f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
            )
        finally:
            admin.dispose()
    return urls




DATA_TABLES = (
    "dbm_episodes",
    "dbm_items",
    "dbm_org_settings",
    "dbm_memory_switches",
    "dbm_item_marks",
    "dbm_audit_events",
    "dbm_file_reads",
    "dbm_files",
    "dbm_stores",
    "dbm_agents",
    "dbm_user_settings",
)
"""dbmemory's tables, children first: the order rows are deleted in between tests."""




def _admin_engine(url: URL) -> Engine:
    backend = url.get_backend_name()
    timeout_arg = "tcp_connect_timeout" if backend == "oracle" else "connect_timeout"
    connect_args = {timeout_arg: 10}
    return sa.create_engine(
        url, poolclass=NullPool, isolation_level="AUTOCOMMIT", connect_args=connect_args
    )


def _deploy_unavailable(server: Server, why: str) -> None:
    message = f"{server.display} unavailable: {why}"
    if in_ci():
        pytest.fail(f"{message} (CI requires it: .ci/run starts it)", pytrace=False)
    pytest.skip(message)




def in_ci() -> bool:
    """Whether the run is CI: ``CI`` is set to something other than ``""``, ``false`` or ``0``."""
    return os.environ.get("CI", "").strip().lower() not in ("", "false", "0")


SERVERS: dict[str, Server] = {
    "postgres": Server("postgres", "DBMEMORY_TEST_POSTGRES_URL", "PostgreSQL", True),
    "mysql": Server("mysql", "DBMEMORY_TEST_MYSQL_URL", "MariaDB/MySQL", True),
    "oracle": Server("oracle", "DBMEMORY_TEST_ORACLE_URL", "Oracle", False, own_database=False),
}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _drop_stale_databases(server: Server, conn: sa.Connection) -> None:
    """Drop ``dbmt_<pid>_*`` databases a killed test run left behind: those whose pid is not a
    live process on this machine (a live run's databases are never touched)."""
    query = "SELECT datname FROM pg_database" if server.name == "postgres" else "SHOW DATABASES"
    for name in [n for n in conn.exec_driver_sql(query).scalars() if n.startswith("dbmt_")]:
        pid = name.split("_")[1] if name.count("_") >= 2 else ""
        if not pid.isdigit() or _pid_alive(int(pid)):
            continue
        with suppress(sa.exc.DBAPIError):  # dropped by another session meanwhile
            if server.name == "postgres":
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            else:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
