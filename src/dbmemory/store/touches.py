"""Read touches: recording that a file was read, durably, before the read returns.

Expiry deletes files neither written nor read for N days (:mod:`dbmemory.store.expiry`). A write
touches a file by setting ``dbm_files.last_accessed_at``; a read records its time in
``dbm_file_reads`` (one row per file, no foreign key), never in the file row, so a read takes no
lock a writer holds and never turns a REPEATABLE READ writer's later edit of the same file into
a serialisation failure.

* **At most one touch per file per** :data:`TOUCH_INTERVAL`: the read statement carries the
  file's last recorded read (``read_at``, a primary-key subquery), so a read within the interval
  of the file's last touch (write or read) costs nothing more. The expiry adds the interval to
  its cutoff (``now - days - TOUCH_INTERVAL``), so such unrecorded reads are still honoured.
* **SQLite**: the touch runs inline, on the caller's connection, and **joins the caller's
  transaction** (it rolls back with it, like the read's other effects). The caller's
  transaction already holds SQLite's only write lock (``BEGIN IMMEDIATE``), so no expiry can
  run in between; a second connection would wait for the caller and deadlock.
* **PostgreSQL, MariaDB/MySQL, Oracle**: the touch is synchronous and committed before the read
  returns, on a connection of its own from a small pool dedicated to touches (made with
  ``engine.pool.recreate()``: the same creator, connect arguments and pool events, but never
  the caller's pool slots, so a ``pool_size=1`` caller cannot starve it). One short READ
  COMMITTED transaction: lock the ``expiry`` row of ``dbm_job_locks`` shared (this waits only
  while an expiry batch runs, at most :data:`TOUCH_LOCK_TIMEOUT` seconds), check that the file
  still exists, upsert ``dbm_file_reads``, commit. It never holds a lock in the caller's
  transaction and never waits for a writer's lock on the file row (different table, no foreign
  key).

The guarantee: **a read that returns a file's text has a committed touch** (or needed none).
When the file was removed meanwhile (an expiry batch or a delete committed between the read and
its touch) the read reports the file as not found. When the touch cannot be recorded (the lock
wait timed out behind a long expiry, the database is unreachable) the read fails with a
retryable error rather than return text whose touch was lost: a failed read is visible and
retried at once, a lost touch would silently turn into a deleted file days later.

"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.base import OptionEngine
from sqlalchemy.pool import Pool

from dbmemory.core.clock import utcnow
from dbmemory.db import raw
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.expiry import file_read_upsert, job_lock, touch_connection_setup
from dbmemory.db.dialect.txn import touch_inline, transaction_pooling
from dbmemory.db.schema import file_reads
from dbmemory.errors import NotFoundError
from dbmemory.store.statements import reads as st
from dbmemory.store.statements.bulk import SELECT_JOB_LOCK

__all__ = [
    "TOUCH_INTERVAL",
    "TOUCH_LOCK_TIMEOUT",
    "needs_touch",
    "touch_after_read",
    "EXPIRY_LOCK_INFO",
    "touch_engine",
]

log = logging.getLogger(__name__)

TOUCH_INTERVAL = dt.timedelta(hours=1)
"""A read records a touch only when the file's last touch (write or recorded read) is older
than this. The expiry adds it to its cutoff, and ``days`` may not be smaller."""

TOUCH_LOCK_TIMEOUT = 5.0
"""Seconds a touch waits for a running expiry batch (the only holder of the lock it needs)
before the read fails with a retry text."""

EXPIRY_LOCK_INFO = "dbmemory.expiry_lock"
"""``Connection.info`` key: the transaction of this connection that holds the expiry lock
(set by :func:`dbmemory.store.expiry.expire_files`). A read in that transaction touches inline: no
expiry can interleave, and a separate connection would wait for the caller's own lock."""


def needs_touch(
    last_accessed_at: dt.datetime, read_at: dt.datetime | None, now: dt.datetime
) -> bool:
    """Whether a read at ``now`` must record a touch: the file's last touch (its last write,
    or its last recorded read) is older than :data:`TOUCH_INTERVAL`."""
    last = last_accessed_at if read_at is None else max(last_accessed_at, read_at)
    return last < now - TOUCH_INTERVAL


def touch_after_read(
    conn: Connection,
    store_id: int,
    file_id: int,
    last_accessed_at: dt.datetime,
    read_at: dt.datetime | None = None,
    *,
    path: str = "the file",
) -> None:
    """Record a read of ``file_id`` (when :func:`needs_touch`), durably, before returning.

    Args:
        conn: the caller's connection (SQLite: the touch joins its transaction; elsewhere it is
            only used when the file is not visible to the touch connection, to tell the
            caller's own uncommitted file from a removed one).
        store_id: the store of the file read (every touch statement filters by it).
        file_id: the file read.
        last_accessed_at: its ``last_accessed_at`` as read.
        read_at: its last recorded read as read (``None``: none recorded).
        path: the file's path, for messages.

    Raises:
        NotFoundError: the file was removed (expired or deleted) since it was read.
        ConflictError: the touch waited longer than :data:`TOUCH_LOCK_TIMEOUT` seconds for an
            expiry batch: retry the read.
        StorageError: the touch could not be recorded (database unreachable, ...).
    """
    now = utcnow()
    if not needs_touch(last_accessed_at, read_at, now):
        return
    params = {"p_sid": store_id, "p_fid": file_id, "p_now": now}
    holder = conn.info.get(EXPIRY_LOCK_INFO)
    if touch_inline(conn) or (
        holder is not None and conn.in_transaction() and holder is conn.get_transaction()
    ):
        try:
            _record_inline(conn, params)
        except sa.exc.SQLAlchemyError as exc:
            log.warning("the read of %s could not be recorded", path, exc_info=True)
            raise translate_db_error(exc, f"recording the read of {path}") from exc
        return
    _record_apart(conn, params, path)


def _record_inline(conn: Connection, params: dict[str, Any]) -> None:
    # on the raw cursor where it joins the caller's transaction (dbmemory.db.raw)
    if raw.row_count(conn, st.INSERT_FILE_READ, params) == 0:
        raw.row_count(conn, st.UPDATE_FILE_READ, params)


def _record_apart(conn: Connection, params: dict[str, Any], path: str) -> None:
    engine = touch_engine(conn.engine)
    lock = job_lock(engine, SELECT_JOB_LOCK, shared=True, wait_seconds=int(TOUCH_LOCK_TIMEOUT))
    upsert = file_read_upsert(engine, file_reads)
    for attempt in (1, 2):
        try:
            with engine.connect() as tc, tc.begin():
                tc.execute(lock)
                alive = tc.execute(st.SELECT_FILE_ALIVE, params).first() is not None
                if not alive and not _visible_to_caller(conn, params):
                    raise NotFoundError(f"the path {path} does not exist", code="not_found")
                tc.execute(upsert, params)
            return
        except sa.exc.IntegrityError as exc:  # Oracle: two MERGEs of one new key; again
            if attempt == 2:
                raise translate_db_error(exc, f"recording the read of {path}") from exc
        except sa.exc.SQLAlchemyError as exc:
            log.warning("the read of %s could not be recorded", path, exc_info=True)
            raise translate_db_error(exc, f"recording the read of {path}") from exc


def _visible_to_caller(conn: Connection, params: dict[str, Any]) -> bool:
    """The touch connection sees only committed rows: a file the caller's own transaction
    wrote (or, at REPEATABLE READ, one its snapshot still shows) is recorded all the same; one
    the caller no longer sees either was removed since the read."""
    try:
        return conn.execute(st.SELECT_FILE_ALIVE, params).first() is not None
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "checking a file after its read") from exc


# -- the touch connections ----------------------------------------------------------------------


class _TouchEngine(OptionEngine):
    """The caller's engine (dialect, URL, events, compiled cache) on a pool of its own."""

    def __init__(self, proxied: Engine, pool: Pool, options: dict[str, Any]) -> None:
        self._touch_pool = pool
        super().__init__(proxied, options)

    @property
    def pool(self) -> Pool:
        return self._touch_pool

    @pool.setter
    def pool(self, pool: Pool) -> None:
        self._touch_pool = pool


_lock = threading.Lock()
_ATTR = "_dbmemory_touch_engine"


def touch_engine(engine: Engine) -> Engine:
    """The engine whose connections record the touches of reads made through ``engine``.

    One per pool (an engine and its ``execution_options()`` copies share it): the caller's
    dialect, URL and events on a pool made by ``engine.pool.recreate()`` (same creator and
    connect arguments, same sizes, connections opened only when needed), READ COMMITTED, with
    every lock wait bounded by :data:`TOUCH_LOCK_TIMEOUT`. Disposed with ``engine``.
    """
    pool = engine.pool
    found: Engine | None = getattr(pool, _ATTR, None)
    if found is not None:
        return found
    with _lock:
        found = getattr(pool, _ATTR, None)
        if found is None:
            found = _make_touch_engine(engine, pool)
            setattr(pool, _ATTR, found)
    return found


def _make_touch_engine(engine: Engine, pool: Pool) -> Engine:
    own = pool.recreate()
    pooled = transaction_pooling(engine)
    setup = touch_connection_setup(
        engine.dialect.name, TOUCH_LOCK_TIMEOUT, transaction_pooling=pooled
    )
    if setup:

        @sa.event.listens_for(own, "connect")
        def _bound_lock_waits(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            try:
                for statement in setup:
                    cursor.execute(statement)
            finally:
                cursor.close()
            dbapi_conn.commit()

    options: dict[str, Any] = {"isolation_level": "READ COMMITTED"}
    if pooled:  # SET LOCAL lock_timeout per transaction (dialect.configure_engine)
        options["dbmemory_lock_timeout_ms"] = int(TOUCH_LOCK_TIMEOUT * 1000)
    touch = _TouchEngine(engine, own, options)

    def _dispose(_engine: Engine) -> None:
        if getattr(pool, _ATTR, None) is touch:
            delattr(pool, _ATTR)
        own.dispose()

    root = engine
    while isinstance(root, OptionEngine):  # disposing the engine that owns the pool
        root = root._proxied
    sa.event.listen(root, "engine_disposed", _dispose)
    return touch
