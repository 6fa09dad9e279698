"""Connection set-up of an engine, yours or dbmemory's: bounded lock waits on every backend, and
SQLite's serialisable transactions (pysqlite's transaction handling off, BEGIN IMMEDIATE, WAL)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import StaticPool

from dbmemory.db.dialect.base import (
    DEFAULT_LOCK_TIMEOUT_MS,
    driver_connection,
    engine_defaults,
    is_memory_sqlite,
    lock_wait_seconds,
)
from dbmemory.db.dialect.expiry import is_autocommit
from dbmemory.db.dialect.oracle import configure_oracle_session
from dbmemory.db.dialect.outcome import remember_server
from dbmemory.db.dialect.txn import set_transaction_lock_timeout, transaction_pooling_connect_args
from dbmemory.errors import DbMemoryError

__all__ = [
    "SQLITE_CACHE_KIB",
    "configure_engine",
    "engine_arguments",
]

SQLITE_CACHE_KIB = 65_536
"""Largest page cache of one SQLite connection to a file database, in KiB (``PRAGMA
cache_size = -65536``: 64 MiB; SQLite's default is 2 MiB)."""


def configure_engine(
    engine: Engine,
    *,
    lock_timeout_ms: int | None = None,
    busy_timeout_ms: int | None = None,
    transaction_pooling: bool = False,
    commit_outcome_wait_s: float | None = None,
) -> Engine:
    """Apply dbmemory's connection set-up to ``engine`` (yours or dbmemory's) and return it.

    Every backend gets a bounded lock wait of ``lock_timeout_ms`` milliseconds (default
    :data:`DEFAULT_LOCK_TIMEOUT_MS`), set on each new connection: PostgreSQL ``SET
    lock_timeout``, MySQL/MariaDB ``SET SESSION innodb_lock_wait_timeout`` (whole seconds,
    rounded up), SQLite ``PRAGMA busy_timeout``; Oracle has no session setting, so dbmemory's
    locking statements compile to ``FOR UPDATE WAIT n`` (seconds, rounded up) on this engine.
    A write that waits longer ends in a :class:`~dbmemory.errors.ConflictError` whose text says
    to retry.

    SQLite also gets: pysqlite's own transaction handling off, ``BEGIN IMMEDIATE`` at the start
    of every transaction SQLAlchemy begins (the write lock is taken before the first read, as
    SQLite ignores ``SELECT ... FOR UPDATE``; never on an ``AUTOCOMMIT`` connection, whose
    statements commit on their own), WAL for file databases and foreign keys. This is
    SQLAlchemy's documented recipe for serialisable SQLite transactions. A file database's
    page cache may grow to :data:`SQLITE_CACHE_KIB` per connection (SQLite's default, 2 MiB,
    makes a full-text search of a user with 20,000 episodes re-read its pages from the OS on
    every turn; memory is taken only as pages are read).

    The set-up runs when the pool opens a connection: call this before the engine's first
    connection (or ``engine.dispose()`` afterwards). Idempotent: a second call changes nothing.

    PostgreSQL behind a transaction-mode pooler (``transaction_pooling=True``, e.g. PgBouncer
    ``pool_mode = transaction``): consecutive transactions of one connection may run on
    different server connections, and a session ``SET`` would stay behind on a server
    connection other clients then get. ``lock_timeout`` is then set with ``SET LOCAL`` at the
    start of every transaction (SQLAlchemy's and dbmemory's own ones on ``AUTOCOMMIT``
    connections) and never per session.

    Args:
        lock_timeout_ms: lock wait bound in milliseconds (> 0).
        busy_timeout_ms: SQLite only: overrides ``lock_timeout_ms`` for the busy timeout.
        transaction_pooling: PostgreSQL only: per-transaction settings (see above).
        commit_outcome_wait_s: how long, in seconds (>= 0), dbmemory looks for the outcome of a
            ``COMMIT`` whose reply was lost before it answers "may or may not have been saved"
            (:func:`dbmemory.store.units.resolved_commit`; default 10).
    """
    if getattr(engine, "_dbmemory_configured", False):
        return engine
    lock_ms = int(lock_timeout_ms if lock_timeout_ms is not None else DEFAULT_LOCK_TIMEOUT_MS)
    if lock_ms <= 0:
        raise DbMemoryError("lock_timeout_ms must be a positive number of milliseconds")
    name = engine.dialect.name
    engine._dbmemory_configured = True  # type: ignore[attr-defined]
    engine._dbmemory_lock_timeout_ms = lock_ms  # type: ignore[attr-defined]
    if commit_outcome_wait_s is not None:
        if commit_outcome_wait_s < 0:
            raise DbMemoryError("commit_outcome_wait_s must be a number of seconds >= 0")
        engine._dbmemory_commit_outcome_wait_s = float(commit_outcome_wait_s)  # type: ignore[attr-defined]
    if name == "oracle":
        configure_oracle_session(engine)  # binary NLS_COMP/NLS_SORT on every connection
        engine.dialect._dbmemory_lock_wait_s = lock_wait_seconds(lock_ms)  # type: ignore[attr-defined]
        return engine
    if name == "postgresql" and transaction_pooling:
        engine._dbmemory_transaction_pooling = True  # type: ignore[attr-defined]

        @sa.event.listens_for(engine, "begin")
        def _on_pooled_begin(conn: Connection) -> None:
            if not is_autocommit(conn):
                set_transaction_lock_timeout(conn)

        return engine
    if name in ("postgresql", "mysql", "mariadb"):
        setting = (
            f"SET lock_timeout = '{lock_ms}ms'"
            if name == "postgresql"
            else f"SET SESSION innodb_lock_wait_timeout = {lock_wait_seconds(lock_ms)}"
        )

        @sa.event.listens_for(engine, "connect")
        def _on_server_connect(dbapi_conn: Any, record: Any) -> None:
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(setting)
            finally:
                cursor.close()
            autocommit = getattr(dbapi_conn, "autocommit", False)
            if callable(autocommit):  # PyMySQL: autocommit is a method; SET opens no transaction
                remember_server(dbapi_conn, record.info)  # for a lost COMMIT's look-up
                return
            if not autocommit:  # psycopg opened a transaction for the SET: keep the setting
                dbapi_conn.commit()

        return engine
    if name != "sqlite":
        return engine

    memory = is_memory_sqlite(engine)
    busy_ms = int(busy_timeout_ms if busy_timeout_ms is not None else lock_ms)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if not memory:
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = NORMAL")
                cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # An AUTOCOMMIT connection commits each statement on its own and SQLAlchemy will
        # never send COMMIT for it: a BEGIN here would swallow its writes and keep the write
        # lock until the connection closes. dbmemory's writes open their own transaction there
        # (dbmemory.store.units).
        if is_autocommit(conn):
            return
        # straight on the DB-API connection: Connection.exec_driver_sql costs ~15-25 µs more
        # per transaction (statement events, result set-up) for a statement with no result
        try:
            # driver_execute spelled out for SQLite (this runs for every transaction)
            driver_connection(conn).execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            # SQLAlchemy sets Connection.__in_begin before this event and clears it only after
            # the dialect's do_begin: left set, it would turn autobegin off for good, and every
            # later statement of the connection would commit on its own ("database is locked"
            # once, then silent autocommit).
            conn._Connection__in_begin = False  # type: ignore[attr-defined]
            dbapi = conn.dialect.loaded_dbapi
            if isinstance(exc, dbapi.Error):  # wrapped as SQLAlchemy would
                raise sa.exc.DBAPIError.instance(
                    "BEGIN IMMEDIATE", (), exc, dbapi.Error, dialect=conn.dialect
                ) from exc
            raise

    return engine


def engine_arguments(
    url: URL, kwargs: dict[str, Any], *, transaction_pooling: bool
) -> tuple[dict[str, Any], bool]:
    """The keyword arguments :func:`dbmemory.db.engine.create_engine` passes to
    ``sqlalchemy.create_engine(url, ...)`` for ``url``'s backend, the caller's own ``kwargs``
    winning, and whether transaction pooling applies (PostgreSQL only).

    Servers get ``pool_pre_ping`` (a pooled connection to a restarted server is replaced, not
    handed out); an in-memory SQLite database one shared connection (``StaticPool``, usable
    from every thread); the defaults of :func:`~dbmemory.db.dialect.base.engine_defaults`;
    for PostgreSQL with psycopg 3 (whether or not a transaction-mode pooler is declared) and
    behind a declared pooler, :func:`~dbmemory.db.dialect.txn.transaction_pooling_connect_args`
    (no server-side prepared statements, which would outlive the transaction on a pooler).
    """
    kwargs = dict(kwargs)
    name = url.get_backend_name()
    pooling = transaction_pooling and name == "postgresql"
    if name != "sqlite":  # a file or in-memory database has no server to restart
        kwargs.setdefault("pool_pre_ping", True)
    elif url.database in (None, "", ":memory:") or url.query.get("mode") == "memory":
        kwargs.setdefault("poolclass", StaticPool)
        connect_args = dict(kwargs.pop("connect_args", {}) or {})
        connect_args.setdefault("check_same_thread", False)
        kwargs["connect_args"] = connect_args
    for key, value in engine_defaults(name).items():
        kwargs.setdefault(key, value)
    if pooling or (name == "postgresql" and url.get_driver_name() == "psycopg"):
        # psycopg 3 prepares a statement on the server after its 5th execution: behind a
        # transaction-mode pooler (which dbmemory cannot tell from a plain server) the prepared
        # statement stays on one server connection and later transactions fail on others, so
        # it is off by default (the caller's own connect_args win)
        connect_args = dict(kwargs.pop("connect_args", {}) or {})
        for key, value in transaction_pooling_connect_args(name).items():
            connect_args.setdefault(key, value)
        kwargs["connect_args"] = connect_args
    return kwargs, pooling
