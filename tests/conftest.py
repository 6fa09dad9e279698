"""Backend fixtures shared by every contract test.

Backends (ids of the ``engine`` fixture's parameters):

* ``sqlite-memory``: in-memory SQLite (one shared connection, :class:`StaticPool`);
* ``sqlite-file``: a SQLite file under pytest's temporary folder (WAL);
* ``postgres``: ``DBMEMORY_TEST_POSTGRES_URL`` (e.g. ``postgresql+psycopg://postgres@127.0.0.1:5432/test``);
* ``mysql``: ``DBMEMORY_TEST_MYSQL_URL`` (e.g. ``mysql+pymysql://root@127.0.0.1:3306/test``);
* ``oracle``: ``DBMEMORY_TEST_ORACLE_URL`` (e.g. ``oracle+oracledb://dbm:dbm@127.0.0.1:1522/?service_name=FREEPDB1``).

A server backend whose variable is unset is skipped with a reason naming the variable; in CI
(``CI`` set and not ``false``/``0``) a missing PostgreSQL/MySQL variable is a usage error and an
unreachable server fails the run.

Several engineers and CI runs share the same servers: each pytest session creates its own
database ``dbmt_<pid>_<random>`` on PostgreSQL and MariaDB/MySQL from the given URL (the URL's
database is only used to connect), migrates it once with :func:`dbmemory.db.migrate.upgrade`
and drops it at the end. Oracle uses the URL's schema as is (one session per schema at a time).
Every test starts from empty tables (rows are deleted before the test, which is fast).

Fixtures: ``backend_name``, ``engine`` (migrated, empty tables), ``conn`` (a Connection with no
transaction begun), ``other_connection`` (opens a second connection that sees only committed
data), ``empty_engine`` (a database without dbmemory's schema, for migration tests),
``server_name`` + ``make_empty_database`` (fresh empty server databases, for script tests).
"""

from __future__ import annotations

import os

# Before anything can import litellm: no network for the model price map (DATABASES.md).
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "true"

import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import NullPool

from backends import (
    BACKENDS,
    DEPLOY_SERVERS,
    SERVERS,
    Server,
    _admin_engine,
    _drop_stale_databases,
    clean_tables,
    deploy_urls,
    in_ci,
)
from dbmemory.core import clock
from dbmemory.db import migrate
from dbmemory.db.engine import create_engine, normalize_url, redact_url
from dbmemory.sqlgen.api_common import derived_role_base

__all__ = ["SERVERS", "other_connection_for"]





SERVER_BACKENDS = [p for p in BACKENDS if p.values[0] in ("postgres", "mysql")]




def pytest_configure(config: pytest.Config) -> None:
    """In CI, a missing PostgreSQL or MariaDB URL is an error, never a silent skip."""
    if not in_ci():
        return
    missing = [
        s.env_var for s in SERVERS.values() if s.required_in_ci and not os.environ.get(s.env_var)
    ]
    if missing:
        raise pytest.UsageError(
            f"CI is set but {', '.join(missing)} is not: CI must test PostgreSQL and MariaDB "
            "(see .ci/run), set the variable(s) or unset CI to skip those backends locally"
        )


def _unavailable(server: Server, why: str) -> None:
    """Skip (locally) or fail (in CI, for a required server) with a clear reason."""
    message = f"{server.display} backend unavailable: {why}"
    if in_ci() and server.required_in_ci:
        pytest.fail(f"{message} (CI requires it)", pytrace=False)
    pytest.skip(message)


# -- server databases --------------------------------------------------------------------------




_SWEPT: set[tuple[str, str | None, int | None]] = set()
"""The servers whose stale test databases this session has dropped (once each)."""


def _create_database(server: Server, base_url: URL) -> URL:
    """Create ``dbmt_<pid>_<random>`` on the server of ``base_url``; return its URL. The first
    time in a session for a server, stale test databases of killed runs are dropped first."""
    name = f"dbmt_{os.getpid()}_{secrets.token_hex(4)}"
    admin = _admin_engine(base_url)
    try:
        where = (server.name, base_url.host, base_url.port)
        if where not in _SWEPT:
            _SWEPT.add(where)
            with admin.connect() as c:
                _drop_stale_databases(server, c)
        with admin.connect() as c:
            if server.name == "postgres":
                c.exec_driver_sql(f'CREATE DATABASE "{name}"')
            else:
                c.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        admin.dispose()
    return base_url.set(database=name)


def _drop_database(server: Server, url: URL) -> None:
    """Drop the session database, disconnecting anything still connected to it."""
    name = url.database
    assert name and name.startswith("dbmt_"), name
    base = url.set(database=_base_url(server).database)
    admin = _admin_engine(base)
    try:
        with admin.connect() as c:
            if server.name == "postgres":
                try:
                    c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                except sa.exc.ProgrammingError:  # PostgreSQL < 13: no WITH (FORCE)
                    c.exec_driver_sql(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
                    )
                    c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
            else:
                c.exec_driver_sql("SET SESSION lock_wait_timeout = 30")
                ids = c.exec_driver_sql(
                    "SELECT id FROM information_schema.processlist "
                    f"WHERE db = '{name}' AND id <> CONNECTION_ID()"
                ).scalars()
                for thread_id in list(ids):
                    with suppress(sa.exc.DBAPIError):  # already gone
                        c.exec_driver_sql(f"KILL {int(thread_id)}")
                c.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
            _drop_derived_roles(c, server.name, name)
    finally:
        admin.dispose()


def _drop_derived_roles(c: Connection, server_name: str, database: str) -> None:
    """The roles the SQL API's installer named after ``database`` (roles outlive databases)."""
    base = derived_role_base(database)
    if server_name == "postgres":
        names = c.exec_driver_sql(
            f"SELECT rolname FROM pg_roles WHERE rolname LIKE '{base}%%'").scalars().all()
        for role in names:
            c.exec_driver_sql(f'DROP ROLE IF EXISTS "{role}"')
    else:
        names = c.exec_driver_sql(
            f"SELECT user, host FROM mysql.user WHERE user LIKE '{base}%%'").all()
        for user, host in names:
            if host == "":  # a MariaDB role (MySQL 8 roles are accounts of host '%')
                c.exec_driver_sql(f"DROP ROLE IF EXISTS {user}")
            else:
                host = host.replace("%", "%%")  # the driver formats the statement
                c.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'{host}'")


_CONTAINER_IMAGES = {
    "postgres": ("testcontainers.postgres", "PostgresContainer", "postgres:16"),
    "mysql": ("testcontainers.mysql", "MySqlContainer", "mariadb:11"),
    "oracle": ("testcontainers.oracle", "OracleDbContainer", "gvenzl/oracle-free:slim"),
}
_CONTAINERS: list[Any] = []


def _container_url(server: Server) -> str | None:
    """A throw-away server from testcontainers when it is installed and a Docker engine answers
    (``pip install "testcontainers[postgres,mysql,oracle]"``); ``None`` otherwise. Never in CI,
    where the servers of ``.ci/run`` are the ones to test."""
    if in_ci() or os.environ.get("DBMEMORY_TEST_NO_CONTAINERS"):
        return None
    module_name, class_name, image = _CONTAINER_IMAGES[server.name]
    try:
        import importlib

        module = importlib.import_module(module_name)
        container = getattr(module, class_name)(image)
        container.start()  # raises at once without a Docker engine
    except Exception:
        return None
    _CONTAINERS.append(container)
    return str(container.get_connection_url())


def _stop_containers() -> None:
    while _CONTAINERS:
        with suppress(Exception):
            _CONTAINERS.pop().stop()


def _base_url(server: Server) -> URL:
    raw = os.environ.get(server.env_var, "").strip() or _container_url(server)
    if not raw:
        _unavailable(
            server,
            f"set {server.env_var} to run these tests (or install testcontainers where Docker runs)",
        )
    return normalize_url(raw)


def _check_reachable(server: Server, url: URL) -> None:
    admin = _admin_engine(url)
    try:
        with admin.connect() as c:
            c.exec_driver_sql("SELECT 1 FROM dual" if server.name == "oracle" else "SELECT 1")
    except Exception as exc:
        _unavailable(
            server,
            f"cannot connect to {redact_url(url)} ({server.env_var}): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
        )
    finally:
        admin.dispose()




@dataclass
class _Backends:
    """Session-wide engines, created on first use and torn down at session end."""

    tmp_factory: pytest.TempPathFactory
    engines: dict[str, Engine] = field(default_factory=dict)
    failures: dict[str, BaseException] = field(default_factory=dict)
    created: list[tuple[Server, URL]] = field(default_factory=list)
    oracle_installed_here: bool = False

    def engine(self, name: str) -> Engine:
        if name in self.failures:  # the same error (skip/fail) for every test
            raise self.failures[name]
        if name not in self.engines:
            try:
                self.engines[name] = self._make(name)
            except (pytest.skip.Exception, pytest.fail.Exception) as exc:
                self.failures[name] = exc
                raise
        return self.engines[name]

    def _make(self, name: str) -> Engine:
        if name == "sqlite-memory":
            engine = create_engine("sqlite://")
        elif name == "sqlite-file":
            path = self.tmp_factory.mktemp("sqlite") / "dbmemory.db"
            engine = create_engine(f"sqlite:///{path.as_posix()}")
        elif name in DEPLOY_BACKENDS:
            engine = _deploy_engine(self, name)
        else:
            server = SERVERS[name]
            base = _base_url(server)
            _check_reachable(server, base)
            if server.own_database:
                url = _create_database(server, base)
                self.created.append((server, url))
            else:
                url = base
            engine = create_engine(url)
            if name == "oracle":
                self.oracle_installed_here = migrate.current(engine) is None
        migrate.upgrade(engine)
        return engine

    def close(self) -> None:
        for name, engine in self.engines.items():
            if name == "oracle" and self.oracle_installed_here:
                with suppress(Exception):  # best effort: leave the schema as found
                    migrate.downgrade(engine)
            engine.dispose()
        for server, url in self.created:
            try:
                _drop_database(server, url)
            except Exception as exc:
                print(f"\nwarning: could not drop test database {url.database}: {exc}")
        _drop_deploy_databases()
        _stop_containers()


@pytest.fixture(scope="session")
def _backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Backends]:
    backends = _Backends(tmp_path_factory)
    try:
        yield backends
    finally:
        backends.close()


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    """The backend of this test: ``sqlite-memory``, ``sqlite-file``, ``postgres``, ``mysql``
    or ``oracle``."""
    return request.param


@pytest.fixture
def engine(backend_name: str, _backends: _Backends) -> Engine:
    """A dbmemory-configured Engine on a migrated database whose tables are empty."""
    eng = _backends.engine(backend_name)
    clean_tables(eng)
    return eng


@pytest.fixture
def reset_tables() -> Callable[[Engine], None]:
    """``reset_tables(engine)`` deletes every row of dbmemory's tables (between two phases of a
    test)."""
    return clean_tables


@pytest.fixture
def conn(engine: Engine) -> Iterator[Connection]:
    """A Connection of ``engine`` with NO transaction begun: the test decides (``conn.begin()``,
    ``conn.commit()``, or SQLAlchemy's autobegin). Closed (rolling back) after the test."""
    with engine.connect() as connection:
        yield connection


@contextmanager
def other_connection_for(engine: Engine) -> Iterator[Connection]:
    """A second connection that sees only committed data (for transaction tests).

    Use it to read: on SQLite it comes from a plain engine on the same file (no ``BEGIN
    IMMEDIATE``), so reading never waits for the first connection's write lock. In-memory
    SQLite has a single shared connection, so the test is skipped there.
    """
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        if database in (None, "", ":memory:"):
            pytest.skip("in-memory SQLite has one shared connection: no second view of the data")
        reader = sa.create_engine(engine.url, poolclass=NullPool)
        try:
            with reader.connect() as c:
                yield c
        finally:
            reader.dispose()
        return
    # READ COMMITTED: every statement sees the latest committed data (MariaDB's default
    # REPEATABLE READ would freeze the view at the first read of a transaction).
    with engine.connect().execution_options(isolation_level="READ COMMITTED") as c:
        yield c


@pytest.fixture
def other_connection(engine: Engine) -> Callable[..., AbstractContextManager[Connection]]:
    """Factory: ``with other_connection() as c2:`` opens a second connection on the test's
    engine (or ``other_connection(some_engine)``) that sees only committed data."""

    def open_other(eng: Engine | None = None) -> AbstractContextManager[Connection]:
        return other_connection_for(eng if eng is not None else engine)

    return open_other


# -- empty databases (migration and script tests) ----------------------------------------------


@pytest.fixture
def empty_engine(backend_name: str, _backends: _Backends, tmp_path: Path) -> Iterator[Engine]:
    """A dbmemory-configured Engine on a database without dbmemory's schema.

    SQLite: a new database; PostgreSQL/MariaDB: a new server database, dropped afterwards;
    Oracle: the session schema downgraded to base, upgraded again afterwards.
    """
    if backend_name == "sqlite-memory":
        eng = create_engine("sqlite://")
        yield eng
        eng.dispose()
        return
    if backend_name == "sqlite-file":
        eng = create_engine(f"sqlite:///{(tmp_path / 'empty.db').as_posix()}")
        yield eng
        eng.dispose()
        return
    if backend_name == "oracle":
        eng = _backends.engine("oracle")
        migrate.downgrade(eng)
        try:
            yield eng
        finally:
            migrate.upgrade(eng)
        return
    _backends.engine(backend_name)  # skip/fail early with the usual reason
    if backend_name in DEPLOY_BACKENDS:
        yield from _deploy_empty_engine(backend_name)
        return
    server = SERVERS[backend_name]
    url = _create_database(server, _base_url(server))
    eng = create_engine(url)
    try:
        yield eng
    finally:
        eng.dispose()
        _drop_database(server, url)


@pytest.fixture(params=SERVER_BACKENDS)
def server_name(request: pytest.FixtureRequest, _backends: _Backends) -> str:
    """``postgres`` or ``mysql`` (skipped, or failed in CI, when not available)."""
    _backends.engine(request.param)
    return request.param


@pytest.fixture
def server_engine(server_name: str, _backends: _Backends) -> Engine:
    """The session engine (migrated, empty tables) of ``server_name``."""
    eng = _backends.engine(server_name)
    clean_tables(eng)
    return eng


@pytest.fixture
def make_empty_database(server_name: str) -> Iterator[Callable[[], URL]]:
    """Factory of fresh, empty databases on ``server_name``'s server; all dropped afterwards.

    Returns URLs (``postgresql+psycopg://...`` / ``mysql+pymysql://...``).
    """
    server = SERVERS[server_name]
    made: list[URL] = []

    def make() -> URL:
        url = _create_database(server, _base_url(server))
        made.append(url)
        return url

    yield make
    for url in made:
        _drop_database(server, url)


# -- the MEMORY tool of agent QA (contract and case suites) -------------------------------------


@pytest.fixture
def tool(conn: Connection) -> Any:
    """A MemoryTool of agent QA (default caps) on ``conn``; the agent row is committed."""
    from dbmemory import enable_for_agent
    from dbmemory.tool import MemoryTool

    enable_for_agent(conn, "QA")
    conn.commit()
    return MemoryTool(conn, "QA")


@pytest.fixture
def run(tool: Any) -> Callable[..., str]:
    """``run(command, **params)`` -> the tool's text."""

    def call(command: str, **params: Any) -> str:
        return tool.execute({"command": command, **params})

    return call


# -- deployment backends (issue 13): Galera cluster, PgBouncer, pg_cron; Patroni (issue 22) -----
#
# Started by .ci/galera, .ci/pgbouncer, .ci/pgcron and .ci/patroni (CI: .ci/run). Skipped with
# the variable named when it is unset outside CI; in CI an unset variable or an unreachable
# server fails.
#
# * ``galera``: DBMEMORY_TEST_GALERA_URLS, three comma-separated node URLs
#   (mysql+pymysql://root@127.0.0.1:3311/test,...:3312/test,...:3313/test). The ``engine``
#   backend ``galera`` is node 1; ``galera_engines`` gives one engine per node on the session
#   database (created on node 1, replicated).
# * ``pgbouncer``: DBMEMORY_TEST_PGBOUNCER_URL, PgBouncer in transaction pooling mode in front
#   of PostgreSQL (postgresql+psycopg://postgres@127.0.0.1:6432/test); engines are made with
#   ``transaction_pooling=True``.
# * ``pgcron``: DBMEMORY_TEST_PGCRON_URL, a PostgreSQL cluster with pg_cron preloaded and
#   ``cron.database_name`` = the URL's database (used as is, not a session database).
# * ``patroni``: DBMEMORY_TEST_PATRONI_URL, one libpq multi-host URL with
#   ``target_session_attrs=read-write`` that reaches whichever node of the two-node Patroni
#   cluster is primary; tests/deploy/test_patroni.py makes its own session database there.

DEPLOY_BACKENDS = ("galera", "pgbouncer")
"""``engine`` backends that run only the modules of :data:`DEPLOY_MODULES` (CI time)."""

DEPLOY_MODULES: dict[str, frozenset[str]] = {
    "galera": frozenset({"test_tool_contract.py", "test_caps.py", "test_doctor.py"}),
    "pgbouncer": frozenset(
        {
            "test_tool_contract.py",
            "test_caps.py",
            "test_transactions.py",
            "test_agents_and_scopes.py",
            "test_expiry_and_touches.py",
            "test_doctor.py",
            "test_pgbouncer.py",
        }
    ),
}
"""The contract modules each deployment backend runs (other tests are deselected there)."""

_DEPLOY_CREATED: list[tuple[str, URL, URL]] = []  # (kind, admin URL, session database URL)


SLOW_MODULES = frozenset(
    {
        "test_tool_load.py",
        "test_tool_model_property.py",
        "test_write_races.py",
        "test_write_races_random.py",
        "test_items_extract_race.py",
        "test_items_forget_race.py",
        "test_items_auto_cap_isolation.py",
        "test_langgraph_differential.py",
        "test_anthropic_dropin.py",
        "test_scaling.py",
        "test_galera.py",
        "test_pgbouncer.py",
        "test_patroni.py",
        "test_scheduled_jobs.py",
    }
)
"""Modules of races, soaks, random sequences and deployments: marked ``slow``."""


_SLOW_LEFT_OUT = pytest.StashKey[int]()


def run_slow_tests(config: pytest.Config) -> bool:
    """Whether ``slow`` tests run: always in CI, with ``DBMEMORY_TEST_SLOW=1``, or when ``-m``
    names a marker expression (``-m slow``, ``-m "not postgres"``). A newcomer's plain
    ``python -m pytest`` leaves them out and says how to run them."""
    if in_ci() or os.environ.get("DBMEMORY_TEST_SLOW", "").strip() not in ("", "0", "false"):
        return True
    return bool(config.getoption("markexpr", ""))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark :data:`SLOW_MODULES` ``slow`` and deselect them unless :func:`run_slow_tests`;
    deselect the deployment backends' parameters outside :data:`DEPLOY_MODULES`."""
    slow = run_slow_tests(config)
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    skipped_slow = 0
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        if not slow and item.get_closest_marker("slow") is not None:
            dropped.append(item)
            skipped_slow += 1
            continue
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend_name") if callspec is not None else None
        if backend in DEPLOY_MODULES and item.path.name not in DEPLOY_MODULES[backend]:
            dropped.append(item)
        else:
            kept.append(item)
    config.stash[_SLOW_LEFT_OUT] = skipped_slow
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept






def _deploy_engine(backends: _Backends, name: str) -> Engine:
    """The session engine of deployment backend ``name`` (on a database of its own)."""
    base = deploy_urls(name)[0]
    kind = "postgres" if name == "pgbouncer" else "mysql"
    url = _create_database(SERVERS[kind], base)
    _DEPLOY_CREATED.append((kind, base, url))
    if name == "pgbouncer":
        return create_engine(url, transaction_pooling=True)
    return create_engine(url)


def _drop_deploy_databases() -> None:
    while _DEPLOY_CREATED:
        kind, base, url = _DEPLOY_CREATED.pop()
        admin = _admin_engine(base)
        try:
            with admin.connect() as c:
                if kind == "postgres":
                    c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)')
                else:
                    c.exec_driver_sql(f"DROP DATABASE IF EXISTS `{url.database}`")
        except Exception as exc:
            print(f"\nwarning: could not drop test database {url.database}: {exc}")
        finally:
            admin.dispose()


@pytest.fixture
def galera_engines(_backends: _Backends) -> Iterator[list[Engine]]:
    """One engine per Galera node (nodes 1-3) on the session database, tables empty. Node 1's
    is the ``galera`` backend's engine; nodes 2 and 3 read with ``wsrep_sync_wait = 1`` (a
    read waits until the node has applied every write committed anywhere before it)."""
    first = _backends.engine("galera")
    clean_tables(first)
    urls = deploy_urls("galera")
    others = [
        create_engine(
            url.set(database=first.url.database),
            connect_args={"init_command": "SET SESSION wsrep_sync_wait = 1"},
        )
        for url in urls[1:]
    ]
    try:
        yield [first, *others]
    finally:
        for eng in others:
            eng.dispose()


@pytest.fixture
def pgcron_engine() -> Iterator[Engine]:
    """An engine on the pg_cron cluster's ``cron.database_name`` database, migrated, tables
    empty (the database is used as is)."""
    url = deploy_urls("pgcron")[0]
    eng = create_engine(url)
    try:
        migrate.upgrade(eng)
        clean_tables(eng)
        yield eng
    finally:
        eng.dispose()


def _deploy_empty_engine(name: str) -> Iterator[Engine]:
    """``empty_engine`` of a deployment backend: a fresh database, dropped afterwards."""
    base = deploy_urls(name)[0]
    kind = "postgres" if name == "pgbouncer" else "mysql"
    url = _create_database(SERVERS[kind], base)
    eng = create_engine(url, transaction_pooling=True) if name == "pgbouncer" else create_engine(url)
    _DEPLOY_CREATED.append((kind, base, url))
    try:
        yield eng
    finally:
        eng.dispose()


# -- the skip summary: one line naming the backends skipped and how to turn each on ----------

SKIP_SWITCHES: dict[str, tuple[str, str, str]] = {
    **{name: (s.display, s.env_var, f"set {s.env_var}") for name, s in SERVERS.items()},
    **{
        name: (s.display, s.env_var, f"set {s.env_var}; .ci/{name} starts it")
        for name, s in DEPLOY_SERVERS.items()
    },
    "llm": ("a real model", "DBMEMORY_TEST_MODEL", "set DBMEMORY_TEST_MODEL and the provider's key"),
}
"""Marker name -> (what the tests need, the variable, how to turn them on), for
:func:`pytest_terminal_summary`."""


def skipped_backends_line(reports: list[Any]) -> str:
    """``skipped backends: Oracle, 95 tests (set DBMEMORY_TEST_ORACLE_URL); ...`` or ``none``.

    A skipped test counts for the first marker of :data:`SKIP_SWITCHES` it carries (the
    ``postgres``/``mysql``/``oracle`` marks of the backend parameters, ``llm``) whose variable
    is unset (a test skipped for another reason on a configured backend is not listed).
    """
    counts: dict[str, int] = {}
    for report in reports:
        keywords = getattr(report, "keywords", {}) or {}
        for marker, (_what, env_var, _switch) in SKIP_SWITCHES.items():
            if marker in keywords and not os.environ.get(env_var):
                counts[marker] = counts.get(marker, 0) + 1
                break
    if not counts:
        return "skipped backends: none"
    parts = []
    for marker, count in counts.items():
        what, _env_var, switch = SKIP_SWITCHES[marker]
        parts.append(f"{what}, {count} test{'' if count == 1 else 's'} ({switch})")
    return "skipped backends: " + "; ".join(parts)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """End the report with one line: the backends whose tests were skipped, and the variable
    that turns each on; and a line for the slow tests left out."""
    terminalreporter.write_line(skipped_backends_line(terminalreporter.stats.get("skipped", [])))
    left_out = terminalreporter.config.stash.get(_SLOW_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"left out: {left_out} slow tests (races, soaks, random sequences, deployments); "
            "DBMEMORY_TEST_SLOW=1 or -m slow runs them, CI always does"
        )


@pytest.fixture
def set_clock() -> Iterator[Callable[[clock.Clock | None], None]]:
    """Set dbmemory's clock (:func:`dbmemory.core.clock.set_clock`) for one test; the clock set
    before the test is back after it."""
    previous = clock.set_clock(None)
    clock.set_clock(previous)
    yield clock.set_clock  # type: ignore[misc]
    clock.set_clock(previous)
