"""Reads' touches and the expiry per backend: the upsert of ``dbm_file_reads``
(:func:`file_read_upsert`), the expiry's job lock (:func:`job_lock`), the batch's candidate
select and its locks (:func:`expiry_candidates`, :func:`lock_expiry_candidates`,
:func:`lock_skip_locked`), the isolation a batch runs at (:func:`batch_isolation`,
:func:`snapshot_isolation`, :func:`is_autocommit`), how a text's UTF-8 length is measured in SQL
(:func:`utf8_length`), whether a delete returns its rows (:func:`delete_returning`) and the
set-up of the touch pool's connections (:func:`touch_connection_setup`).

Tables come in as arguments (``dbm_file_reads``, ``dbm_job_locks``), so this module imports
nothing of :mod:`dbmemory.db.schema`."""

from __future__ import annotations

import warnings
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Connection, Dialect, Engine

from dbmemory.db.dialect.base import backend
from dbmemory.db.dialect.types import UtcDateTime

__all__ = [
    "file_read_upsert",
    "job_lock",
    "lock_expiry_candidates",
    "expiry_candidates",
    "utf8_length",
    "delete_returning",
    "set_based_expiry",
    "touch_connection_setup",
    "is_autocommit",
    "batch_isolation",
    "snapshot_isolation",
    "lock_skip_locked",
]


def file_read_upsert(bind: Connection | Engine | Dialect, file_reads: sa.Table) -> sa.Executable:
    """The statement recording a read of ``:p_fid`` (of store ``:p_sid``) at ``:p_now`` in
    ``file_reads`` (the table
    ``dbm_file_reads``: insert, or move ``read_at`` forward, never back), for the touch
    connection of a server backend.

    PostgreSQL ``INSERT ... ON CONFLICT DO UPDATE``; MySQL/MariaDB ``INSERT ... ON DUPLICATE KEY
    UPDATE`` with ``GREATEST``; Oracle ``MERGE`` (two sessions merging one new key can still
    raise ORA-00001: the caller retries once). SQLite records reads inline with the portable
    :data:`dbmemory.store.statements.reads.INSERT_FILE_READ` / ``UPDATE_FILE_READ`` pair instead.
    """
    name = backend(bind)
    sid = sa.bindparam("p_sid", type_=sa.BigInteger())
    fid = sa.bindparam("p_fid", type_=sa.BigInteger())
    now = sa.bindparam("p_now", type_=UtcDateTime())
    if name == "postgresql":
        pg = postgresql.insert(file_reads).values(store_id=sid, file_id=fid, read_at=now)
        return pg.on_conflict_do_update(
            index_elements=[file_reads.c.store_id, file_reads.c.file_id],
            set_={"read_at": pg.excluded.read_at},
            where=file_reads.c.read_at < pg.excluded.read_at,
        )
    if name in ("mysql", "mariadb"):
        my = mysql.insert(file_reads).values(store_id=sid, file_id=fid, read_at=now)
        return my.on_duplicate_key_update(
            read_at=sa.func.greatest(file_reads.c.read_at, my.inserted.read_at)
        )
    if name == "oracle":
        return sa.text(
            "MERGE INTO dbm_file_reads r "
            "USING (SELECT :p_sid AS store_id, :p_fid AS file_id, :p_now AS read_at FROM dual) s "
            "ON (r.store_id = s.store_id AND r.file_id = s.file_id) "
            "WHEN MATCHED THEN UPDATE SET r.read_at = s.read_at WHERE r.read_at < s.read_at "
            "WHEN NOT MATCHED THEN INSERT (store_id, file_id, read_at) "
            "VALUES (s.store_id, s.file_id, s.read_at)"
        ).bindparams(sid, fid, now)
    raise ValueError(f"no touch upsert for {name}: reads are recorded inline there")


def job_lock(
    bind: Connection | Engine | Dialect,
    lock_row: sa.Select[Any],
    *,
    shared: bool,
    wait_seconds: int | None = None,
) -> sa.Executable:
    """Lock the expiry's ``dbm_job_locks`` row (``lock_row`` selects it): exclusive for an
    expiry batch, shared for a read's touch (touches never wait for one another, only for a
    running batch).

    PostgreSQL ``FOR SHARE`` / ``FOR UPDATE``, MySQL/MariaDB ``LOCK IN SHARE MODE`` / ``FOR
    UPDATE``. Oracle has no shared row lock, so there the lock is a table lock on
    ``dbm_job_locks``: ``ROW SHARE`` for a touch (compatible with other touches), ``EXCLUSIVE``
    for an expiry batch, with ``WAIT n`` when ``wait_seconds`` is given (the servers bound the
    wait by the session's lock timeout instead, see :func:`touch_connection_setup`). SQLite:
    nothing is locked (``FOR UPDATE`` is not rendered); ``BEGIN IMMEDIATE`` already serialises.
    """

    if backend(bind) == "oracle":
        mode = "ROW SHARE" if shared else "EXCLUSIVE"
        wait = f" WAIT {int(wait_seconds)}" if wait_seconds is not None else ""
        return sa.text(f"LOCK TABLE dbm_job_locks IN {mode} MODE{wait}")
    return lock_row.with_for_update(read=shared)


def lock_expiry_candidates(
    bind: Connection | Engine | Dialect, stmt: sa.Select[Any], limit: int
) -> sa.Select[Any]:
    """``stmt`` limited to ``limit`` rows and locked ``FOR UPDATE SKIP LOCKED`` (rows a writer
    holds are skipped: they are being written, so they are not expiring).

    Oracle refuses ``FETCH FIRST`` with ``FOR UPDATE`` (ORA-02014): there the limit is
    ``ROWNUM <= n``. PostgreSQL locks only the ``dbm_files`` rows (``FOR UPDATE OF``), never the
    rows of the tables in its subqueries. SQLite has no row locks (``BEGIN IMMEDIATE``).
    """
    name = backend(bind)
    if name == "sqlite":
        return stmt.limit(limit)
    table = stmt.get_final_froms()[0]
    if name == "oracle":
        return stmt.where(sa.text(f"ROWNUM <= {int(limit)}")).with_for_update(skip_locked=True)
    if name == "postgresql":
        return stmt.limit(limit).with_for_update(skip_locked=True, of=table)
    return stmt.limit(limit).with_for_update(skip_locked=True)


def expiry_candidates(
    bind: Connection | Engine | Dialect, stmt: sa.Select[Any], limit: int
) -> sa.Select[Any]:
    """``stmt`` limited to ``limit`` rows, without a lock (the expiry locks the candidates'
    store rows next, ``SKIP LOCKED``: writers' order, store row first). Oracle 19c: ``FETCH
    FIRST``; elsewhere ``LIMIT``."""
    return stmt.limit(limit)


def utf8_length(bind: Connection | Engine | Dialect, column: Any) -> Any:
    """SQL for the UTF-8 length in bytes of a text column, or ``None`` where the database
    cannot give it (Oracle: ``LENGTHB`` refuses a CLOB in a multibyte character set; the caller
    then reads the text and measures it). ``NULL`` stays ``NULL``.

    PostgreSQL (UTF8 database) and MySQL/MariaDB (``utf8mb4`` column): ``OCTET_LENGTH``;
    SQLite (UTF-8 database, its default): ``LENGTH(CAST(x AS BLOB))``.
    """
    name = backend(bind)
    if name == "oracle":
        return None
    if name == "sqlite":
        return sa.func.length(sa.cast(column, sa.LargeBinary()))
    return sa.func.octet_length(column)


def delete_returning(bind: Connection | Engine | Dialect) -> bool:
    """Whether the expiry learns what it deleted from ``DELETE ... RETURNING`` (PostgreSQL,
    MariaDB 10.0.5+). Elsewhere it selects which candidates are left, in the same transaction
    with the candidates locked: MySQL 8 has no ``DELETE ... RETURNING``, Oracle's needs OUT
    binds, and on SQLite (one local writer) the extra select is cheap (measured: ~8% of a
    batch) and keeps every statement the package runs there compilable for Oracle
    (``tests/db/test_oracle_compile_runtime.py``)."""
    dia = bind if isinstance(bind, Dialect) else bind.dialect
    return bool(dia.delete_returning) and dia.name in ("postgresql", "mysql", "mariadb")


def set_based_expiry(bind: Connection | Engine | Dialect) -> bool:
    """Whether an expiry batch keeps its candidates in a temporary table rather than sending
    their ids in ``IN`` lists (:mod:`dbmemory.store.statements.expiry_set`): SQLite, where one
    writer holds the database from ``BEGIN IMMEDIATE`` (no store-row locks to take, so the
    candidates never need to come back to Python) and SQLAlchemy's expansion of 1,000-id lists
    into five statements cost more than the deletes (issue 19: 0.13x the floor's rows/s)."""
    return backend(bind) == "sqlite"


def touch_connection_setup(
    name: str, lock_timeout_s: float, *, transaction_pooling: bool = False
) -> list[str]:
    """Session statements for a new connection of the touch pool (:mod:`dbmemory.store.touches`): bound
    every lock wait to ``lock_timeout_s`` seconds, so a touch never waits long for a running
    expiry batch. Oracle bounds the wait in the lock statement itself (``WAIT n``). Behind a
    transaction-mode pooler none (each transaction sets ``SET LOCAL lock_timeout`` from the
    touch engine's ``dbmemory_lock_timeout_ms`` execution option)."""
    if transaction_pooling:
        return []
    if name == "postgresql":
        return [f"SET lock_timeout = '{int(lock_timeout_s * 1000)}ms'"]
    if name in ("mysql", "mariadb"):
        return [f"SET SESSION innodb_lock_wait_timeout = {max(1, int(lock_timeout_s))}"]
    return []


def _isolation(conn: Connection) -> str | None:
    level = conn.get_execution_options().get("isolation_level")
    if level is None:
        level = getattr(conn.dialect, "_on_connect_isolation_level", None)
    return None if level is None else str(level).upper().replace("_", " ")


def is_autocommit(conn: Connection) -> bool:
    """Whether ``conn`` runs in ``AUTOCOMMIT`` mode (each statement commits on its own).

    Runs for every write and every SQLite ``BEGIN``: :func:`_isolation` spelled out with the
    common cases (no level set; the exact name) answered first."""
    level = conn.get_execution_options().get("isolation_level")
    if level is None:
        level = getattr(conn.dialect, "_on_connect_isolation_level", None)
        if level is None:
            return False
    if level == "AUTOCOMMIT" or str(level).upper().replace("_", " ") == "AUTOCOMMIT":
        _restore_driver_autocommit(conn)
        return True
    return False


def _restore_driver_autocommit(conn: Connection) -> None:
    """Make the driver connection of an AUTOCOMMIT ``conn`` really autocommit.

    SQLAlchemy applies the ``isolation_level`` execution option to the DB-API connection it
    had when the option was set; when that server connection is lost and ``conn`` reconnects
    (after the ``rollback()`` the lost connection's error asks for), the new DB-API connection
    has the driver's default, autocommit off, while the option still says AUTOCOMMIT: every
    statement then runs in a driver transaction nobody commits. Here the option wins, as the
    caller asked: statements already run on the new connection are committed (under AUTOCOMMIT
    they were meant to be) and the level is applied again through SQLAlchemy, which also
    resets it when the connection goes back to the pool. PostgreSQL (psycopg,
    psycopg2) and MySQL/MariaDB (PyMySQL, mysqlclient) drivers; SQLite and Oracle connections
    are left alone (dbmemory runs SQLite's transactions itself; Oracle is not tested live)."""
    if backend(conn) not in ("postgresql", "mysql", "mariadb"):
        return
    fairy = getattr(conn, "_dbapi_connection", None)  # None: closed or invalidated
    if fairy is None and conn.invalidated and not conn.in_transaction():
        # lost, and rolled back as its error asked: reconnect now, before the write reads
        # the connection's state (the statement would reconnect anyway)
        try:
            fairy = conn.connection
        except sa.exc.SQLAlchemyError:
            return  # the write's first statement fails and says why
    driver = getattr(fairy, "driver_connection", None)
    if driver is None:
        return
    state = getattr(driver, "autocommit", None)
    if callable(state):  # PyMySQL/mysqlclient: autocommit(bool) sets, get_autocommit() reads
        getter = getattr(driver, "get_autocommit", None)
        state = getter() if callable(getter) else None
    if state is not False:
        return
    driver.commit()
    # through SQLAlchemy, so the pool also resets the level when the connection is returned
    # (set on the driver alone, it would stay AUTOCOMMIT for the pool's next borrower)
    with warnings.catch_warnings():  # "already in a Transaction": an empty autobegun one
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        conn.dialect.set_connection_execution_options(conn, {"isolation_level": "AUTOCOMMIT"})


def batch_isolation(bind: Connection | Engine | Dialect) -> str:
    """The isolation level for a transaction dbmemory opens itself on a connection that is in
    AUTOCOMMIT mode: READ COMMITTED (every statement sees the latest committed rows), or
    ``SERIALIZABLE`` on SQLite (pysqlite knows no other name for a normal transaction)."""
    return "SERIALIZABLE" if backend(bind) == "sqlite" else "READ COMMITTED"


def snapshot_isolation(conn: Connection) -> bool:
    """Whether ``conn`` reads from one snapshot per transaction that a locking statement does
    not refresh: PostgreSQL (and Oracle) at REPEATABLE READ or SERIALIZABLE. There a
    transaction's later plain reads never see rows committed after its first statement, even
    after waiting for a lock. (MySQL/MariaDB DELETEs read the rows of their subqueries with
    locking reads, which see the latest rows, at any level; SQLite has one writer.)"""
    name = conn.dialect.name
    if name not in ("postgresql", "oracle"):
        return False
    level = _isolation(conn)
    if level is None and name == "postgresql":
        level = str(conn.get_isolation_level()).upper().replace("_", " ")
    return level in ("REPEATABLE READ", "SERIALIZABLE")


def lock_skip_locked(stmt: sa.Select[Any], bind: Connection | Engine) -> sa.Select[Any]:
    """``FOR UPDATE SKIP LOCKED`` where the backend has it (SQLite has no row locks)."""
    if bind.dialect.name == "sqlite":
        return stmt
    return stmt.with_for_update(skip_locked=True)


