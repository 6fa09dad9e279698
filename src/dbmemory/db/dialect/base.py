"""Which database a bind talks to, and the facts the rest of the package asks before anything
else: the backend's name (:func:`backend`, :func:`is_sqlite`, :func:`is_mysql`,
:func:`is_memory_sqlite`), the default lock wait (:data:`DEFAULT_LOCK_TIMEOUT_MS`, in
milliseconds; :func:`lock_wait_seconds` for backends that count whole seconds), the engine
defaults per backend (:func:`engine_defaults`: READ COMMITTED on MySQL/MariaDB), the ``sql/``
folder of a backend's generated scripts (:func:`script_family`), whether the hot reads may run
on the DB-API cursor (:func:`raw_reads`), whether one read may run on a pooled DB-API connection
outside any transaction (:func:`lone_reads`, :func:`set_lone_read`) and whether writers lock by a no-op ``UPDATE``
(:func:`locks_by_update`: PostgreSQL).

Part of :mod:`dbmemory.db.dialect`, the one package that branches on the dialect name; the
facts behind each choice are in docs/databases.md."""

from __future__ import annotations

from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Dialect, Engine

__all__ = [
    "DEFAULT_LOCK_TIMEOUT_MS",
    "is_sqlite",
    "is_memory_sqlite",
    "engine_defaults",
    "lock_wait_seconds",
    "backend",
    "is_mysql",
    "script_family",
    "raw_reads",
    "lone_reads",
    "set_lone_read",
    "locks_by_update",
    "driver_connection",
]


def driver_connection(conn: Connection) -> Any:
    """The driver's own connection under ``conn`` (sqlite3, psycopg, PyMySQL, oracledb: typed
    ``Any``, each driver has its own class).

    Raises:
        sqlalchemy.exc.ResourceClosedError: ``conn`` holds no driver connection any more
            (closed or invalidated); callers translate it like any database error.
    """
    driver = conn.connection.driver_connection
    if driver is None:
        raise sa_exc.ResourceClosedError("the connection has no driver connection: it was closed")
    return driver


def is_sqlite(bind: Connection | Engine | Dialect) -> bool:
    """Whether ``bind`` talks to SQLite."""
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return dialect.name == "sqlite"


def is_memory_sqlite(engine: Engine) -> bool:
    """Whether ``engine`` is an in-memory SQLite database (no second connection can see it)."""
    if engine.dialect.name != "sqlite":
        return False
    database = engine.url.database
    return database in (None, "", ":memory:") or "mode=memory" in str(engine.url)


DEFAULT_LOCK_TIMEOUT_MS = 5_000
"""How long a statement waits for another transaction's lock before giving up, by default
(setting ``DBMEMORY_LOCK_TIMEOUT_MS``)."""


def lock_wait_seconds(lock_timeout_ms: int) -> int:
    """Whole seconds for backends that count lock waits in seconds (rounded up, at least 1)."""
    return max(1, -(-int(lock_timeout_ms) // 1000))


def backend(bind: Connection | Engine | Dialect) -> str:
    """The SQLAlchemy dialect name of ``bind``: ``"sqlite"``, ``"postgresql"``, ``"mysql"``,
    ``"mariadb"`` or ``"oracle"`` (what every branch of this package tests)."""
    return (bind if isinstance(bind, Dialect) else bind.dialect).name


def is_mysql(bind: Connection | Engine | Dialect) -> bool:
    """Whether ``bind`` talks to MySQL or MariaDB (SQLAlchemy names them ``mysql``/``mariadb``)."""
    return backend(bind) in ("mysql", "mariadb")


SCRIPT_FAMILIES = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql", "oracle": "oracle"}
"""Dialect name -> the ``sql/<family>/`` folder of its generated scripts (MariaDB shares MySQL's)."""


def script_family(bind: Connection | Engine | Dialect | str) -> str | None:
    """The ``sql/`` folder whose scripts (install, API, jobs) fit ``bind``'s database, or None
    for SQLite (which has no in-database API)."""
    name = bind if isinstance(bind, str) else backend(bind)
    return SCRIPT_FAMILIES.get(name)


def engine_defaults(backend: str) -> dict[str, Any]:
    """Keyword arguments :func:`dbmemory.db.engine.create_engine` adds for ``backend``
    (``"mysql"``, ``"postgresql"``, ``"sqlite"``, ``"oracle"``) unless the caller sets them.

    MySQL/MariaDB engines run at READ COMMITTED, as PostgreSQL and Oracle do by default: InnoDB
    then takes no gap locks, so writers of different stores never deadlock each other, and a
    plain read after the store lock sees the rows committed by the previous writer.
    """
    if backend in ("mysql", "mariadb"):
        return {"isolation_level": "READ COMMITTED"}
    return {}


# -- the indexed prefix check (revision 0004) ---------------------------------------------------


def raw_reads(bind: Connection | Engine | Dialect) -> bool:
    """Whether the MEMORY tool's hot reads may run on the DB-API cursor
    (:mod:`dbmemory.db.raw`): SQLite only, where SQLAlchemy's per-statement cost is several
    times the statement's own; the servers' round trip dwarfs it."""
    return backend(bind) == "sqlite"


def lone_reads(bind: Connection | Engine | Dialect) -> bool:
    """Whether one read statement may run on a pooled DB-API connection of an Engine outside any
    transaction (:func:`dbmemory.db.raw.engine_rows`): one statement is its own snapshot, so it
    needs no ``BEGIN``/``COMMIT`` round trips. SQLite (pysqlite's transaction handling is off:
    a ``SELECT`` opens none) and PostgreSQL with psycopg 3 (autocommit for the statement,
    :func:`set_lone_read`: no ``BEGIN``, nothing to roll back at check-in). Not MySQL/MariaDB
    (PyMySQL's autocommit switch is a round trip itself) nor Oracle (not run here)."""
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return dialect.name == "sqlite" or (dialect.name == "postgresql" and dialect.driver == "psycopg")


def set_lone_read(dialect: Dialect, driver: Any, on: bool) -> None:
    """Before (``on``) and after a lone read (:func:`lone_reads`) on the driver's connection
    ``driver``: psycopg's client-side autocommit switch (no round trip; it raises on a
    connection inside a transaction); nothing on SQLite."""
    if dialect.name == "postgresql":
        driver.autocommit = on


def locks_by_update(bind: Connection | Engine | Dialect) -> bool:
    """Whether a row a writer locks so that others serialise on it is locked by a no-op
    ``UPDATE ... RETURNING`` instead of ``SELECT ... FOR UPDATE``: PostgreSQL. A transaction
    there with an older snapshot (REPEATABLE READ, SERIALIZABLE) that waited for the writer's
    lock then fails with a serialization error instead of going on with a snapshot that cannot
    see the writer's rows (and, say, deleting everything of a user but them). MariaDB's locking
    reads see the latest rows at every level; SQLite has one writer; Oracle keeps its
    ``FOR UPDATE`` (not run here)."""
    return backend(bind) == "postgresql"
