"""Transactions on the driver's connection: SQLite's missing ``BEGIN`` before a savepoint
(:func:`join_driver_transaction`), the lock timeout of one transaction
(:func:`set_transaction_lock_timeout`), PgBouncer's transaction pooling
(:func:`transaction_pooling`, :func:`transaction_pooling_connect_args`), whether the driver and
the server are in a transaction (:func:`driver_in_transaction`, :func:`server_in_transaction`),
the transaction dbmemory opens itself on an ``AUTOCOMMIT`` connection
(:func:`begin_own_transaction`, :func:`end_own_transaction`) and whether a read's touch is
written inline (:func:`touch_inline`: SQLite)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.db.dialect.base import DEFAULT_LOCK_TIMEOUT_MS, driver_connection
from dbmemory.db.dialect.expiry import is_autocommit

__all__ = [
    "join_driver_transaction",
    "transaction_pooling",
    "transaction_pooling_connect_args",
    "set_transaction_lock_timeout",
    "driver_execute",
    "driver_in_transaction",
    "server_in_transaction",
    "begin_own_transaction",
    "end_own_transaction",
    "touch_inline",
]


def join_driver_transaction(conn: Connection) -> None:
    """Make sure a write on ``conn`` runs inside a real database transaction (SQLite only; no
    statement anywhere else, and none on dbmemory's own engines, whose ``BEGIN IMMEDIATE``
    already ran).

    On a SQLite engine that :func:`~dbmemory.db.dialect.setup.configure_engine` did not set up (a plain
    ``sqlalchemy.create_engine``), pysqlite's own transaction handling sends no ``BEGIN``
    before a ``SAVEPOINT``: the write's savepoint would open the database transaction itself
    and its ``RELEASE`` commit it, so the caller's rollback would keep the write. When the
    driver is in no transaction, this begins SQLAlchemy's one (as ``begin_nested`` would) and
    sends ``BEGIN IMMEDIATE``: the write joins a transaction that the caller's ``COMMIT`` or
    ``ROLLBACK`` ends, and takes the write lock before it reads, as on dbmemory's engines.
    Not for ``AUTOCOMMIT`` connections (:mod:`dbmemory.store.units` opens its own transaction there).
    """
    if conn.dialect.name != "sqlite" or is_autocommit(conn):
        return
    if not conn.in_transaction():
        conn.begin()  # on dbmemory's engines this sends the BEGIN IMMEDIATE (_on_begin)
    driver = driver_connection(conn)
    if getattr(driver, "in_transaction", True):
        return
    driver.execute("BEGIN IMMEDIATE")


def transaction_pooling(bind: Connection | Engine) -> bool:
    """Whether ``bind``'s engine was configured for a transaction-mode pooler
    (:func:`~dbmemory.db.dialect.setup.configure_engine`)."""
    engine = bind.engine
    while True:
        if getattr(engine, "_dbmemory_transaction_pooling", False):
            return True
        proxied = getattr(engine, "_proxied", None)  # execution_options() copies, touch engine
        if proxied is None:
            return False
        engine = proxied


def transaction_pooling_connect_args(backend: str) -> dict[str, Any]:
    """Driver connect arguments for a server behind a transaction-mode pooler: psycopg 3
    prepares a statement after its 5th execution on a connection (``prepare_threshold``);
    PgBouncer before 1.21 (or without ``max_prepared_statements``) would route the prepared
    statement's later executions to server connections that never saw it ("prepared
    statement ... does not exist"), so preparing is turned off."""
    if backend == "postgresql":
        return {"prepare_threshold": None}
    return {}


def set_transaction_lock_timeout(conn: Connection, lock_timeout_ms: int | None = None) -> None:
    """``SET LOCAL lock_timeout`` for the transaction just begun on ``conn`` (PostgreSQL behind a
    transaction-mode pooler: :func:`~dbmemory.db.dialect.setup.configure_engine`). ``lock_timeout_ms`` defaults to the
    connection's ``dbmemory_lock_timeout_ms`` execution option, then the engine's timeout."""
    if lock_timeout_ms is None:
        lock_timeout_ms = conn.get_execution_options().get("dbmemory_lock_timeout_ms")
    if lock_timeout_ms is None:
        lock_timeout_ms = _engine_lock_ms(conn)
    driver_execute(conn, f"SET LOCAL lock_timeout = '{int(lock_timeout_ms)}ms'")


def _engine_lock_ms(conn: Connection) -> int:
    engine = conn.engine
    while True:
        value = getattr(engine, "_dbmemory_lock_timeout_ms", None)
        if value is not None:
            return int(value)
        proxied = getattr(engine, "_proxied", None)
        if proxied is None:
            return DEFAULT_LOCK_TIMEOUT_MS
        engine = proxied


def driver_execute(conn: Connection, statement: str) -> None:
    """Run a transaction-control statement on the DB-API connection, wrapping driver errors as
    SQLAlchemy would (so :func:`~dbmemory.db.dialect.errors.translate_db_error` sees them)."""
    dbapi_conn = driver_connection(conn)
    cursor = None
    try:
        if conn.dialect.name == "sqlite":
            dbapi_conn.execute(statement)
        else:
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(statement)
            finally:
                cursor.close()
    except Exception as exc:
        dbapi = conn.dialect.loaded_dbapi
        if not isinstance(exc, dbapi.Error):
            raise
        try:
            lost = bool(conn.dialect.is_disconnect(exc, dbapi_conn, cursor))
        except Exception:
            lost = False
        if lost:  # as SQLAlchemy does on a lost connection: it is never handed out again
            conn.invalidate(exc)
        raise sa.exc.DBAPIError.instance(
            statement, (), exc, dbapi.Error, connection_invalidated=lost, dialect=conn.dialect
        ) from exc


def driver_in_transaction(conn: Connection) -> bool | None:
    """Whether the database connection itself has a transaction open, where the driver knows
    it without a round trip (``None`` when it cannot tell).

    SQLite: ``sqlite3.Connection.in_transaction``. PostgreSQL (psycopg 3): the libpq
    transaction status. MySQL/MariaDB (PyMySQL): the server-status flag of the last reply.
    """
    try:
        dbapi_conn = driver_connection(conn)
    except Exception:
        return None
    name = conn.dialect.name
    try:
        if name == "sqlite":
            return bool(dbapi_conn.in_transaction)
        if name == "postgresql":
            info = getattr(dbapi_conn, "info", None)
            status = getattr(info, "transaction_status", None)
            if status is None:
                return None
            return int(status) != 0  # psycopg.pq.TransactionStatus.IDLE
        if name in ("mysql", "mariadb"):
            status = getattr(dbapi_conn, "server_status", None)
            return None if status is None else bool(status & 1)  # SERVER_STATUS_IN_TRANS
    except Exception:
        return None
    return None


def server_in_transaction(conn: Connection) -> bool | None:
    """Whether the database connection has a transaction open, as the server says it.

    :func:`driver_in_transaction` first; when that says "in a transaction" on MariaDB, the
    server is asked (``SELECT @@in_transaction``, one round trip, only then): MariaDB's status
    flag in its replies can stay set after the server ended the transaction (a DDL statement's
    implicit commit followed by its failure; on Galera, after a replayed commit), and joining a
    transaction that does not exist would run a write as autocommitted statements under a
    savepoint that is gone at once. MySQL has no such variable: its flag is used as is.
    """
    known = driver_in_transaction(conn)
    if known is not True or conn.dialect.name not in ("mysql", "mariadb"):
        return known
    if not getattr(conn.dialect, "is_mariadb", False):
        return known
    cursor = driver_connection(conn).cursor()
    try:
        cursor.execute("SELECT @@in_transaction")
        row = cursor.fetchone()
    except Exception:
        return known
    finally:
        cursor.close()
    return None if row is None else bool(int(row[0]))


def begin_own_transaction(conn: Connection) -> None:
    """Open a real transaction on an ``AUTOCOMMIT`` connection (see :mod:`dbmemory.store.units`).

    SQLite ``BEGIN IMMEDIATE`` (the write lock first), PostgreSQL ``BEGIN``, MySQL/MariaDB
    ``START TRANSACTION``; Oracle has no BEGIN: the driver's autocommit is switched off until
    :func:`end_own_transaction`.
    """
    name = conn.dialect.name
    if name == "oracle":
        driver_connection(conn).autocommit = False
        return
    statement = {"sqlite": "BEGIN IMMEDIATE", "postgresql": "BEGIN"}.get(name, "START TRANSACTION")
    driver_execute(conn, statement)
    if name == "postgresql" and transaction_pooling(conn):
        set_transaction_lock_timeout(conn)


def end_own_transaction(conn: Connection, *, commit: bool) -> None:
    """Commit or roll back the transaction :func:`begin_own_transaction` opened."""
    if conn.dialect.name == "oracle":
        dbapi_conn = driver_connection(conn)
        try:
            dbapi_conn.commit() if commit else dbapi_conn.rollback()
        finally:
            dbapi_conn.autocommit = True
        return
    driver_execute(conn, "COMMIT" if commit else "ROLLBACK")


def touch_inline(conn: Connection) -> bool:
    """Whether a read's touch runs inline, in the caller's transaction.

    True on SQLite: the caller's transaction already holds SQLite's single write lock (``BEGIN
    IMMEDIATE``), so the touch takes no new lock and no expiry can interleave, while a second
    connection would wait for the caller (a deadlock). Elsewhere the touch runs on a connection
    of its own (:mod:`dbmemory.store.touches`), so the caller's transaction never holds a lock because
    of a read.
    """
    return conn.dialect.name == "sqlite"
