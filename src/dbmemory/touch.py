"""Best-effort touches: recording that a file was read, for expiry.

A read must never fail, slow down, or hold a lock in the caller's transaction because of its
touch. So:

* at most one touch per file per :data:`TOUCH_INTERVAL` (the read already knows the file's last
  touch and skips the write when it is recent);
* on SQLite the touch is an inline ``UPDATE`` in the caller's transaction: the caller already
  holds SQLite's single write lock (``BEGIN IMMEDIATE``), so the touch takes no new lock, and a
  second connection would only wait for the caller (the deadlock to avoid);
* elsewhere the touch is queued to a daemon thread that runs it on its own connection with
  ``FOR UPDATE SKIP LOCKED``: a row the caller (or anyone) has locked is simply not touched
  this time. Failures are logged at DEBUG and dropped.

:func:`flush_touches` waits for queued touches (tests, orderly shutdown).
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import weakref
from typing import Any

from sqlalchemy.engine import Connection, Engine

from dbmemory import statements as st
from dbmemory.db import dialect

__all__ = ["TOUCH_INTERVAL", "touch_after_read", "flush_touches"]

log = logging.getLogger(__name__)

TOUCH_INTERVAL = dt.timedelta(hours=1)
"""A read touches a file only when its last touch is older than this."""


def touch_after_read(conn: Connection, file_id: int, last_accessed_at: dt.datetime) -> None:
    """Record a read of ``file_id`` if its last touch is older than :data:`TOUCH_INTERVAL`.

    Never raises and never blocks on a lock.
    """
    now = dialect.utcnow()
    threshold = now - TOUCH_INTERVAL
    if last_accessed_at >= threshold:
        return
    try:
        if dialect.touch_inline(conn):
            conn.execute(st.TOUCH_FILES, {"p_ids": [file_id], "p_now": now, "p_older": threshold})
        else:
            _worker_for(conn.engine).put((file_id, now, threshold))
    except Exception:  # a touch is best effort by definition
        log.debug("touch of file %s skipped", file_id, exc_info=True)


class _TouchWorker:
    def __init__(self, engine: Engine) -> None:
        self._engine_ref = weakref.ref(engine)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=10_000)
        self._thread = threading.Thread(target=self._run, name="dbmemory-touch", daemon=True)
        self._thread.start()

    def put(self, item: tuple[int, dt.datetime, dt.datetime]) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:  # under a flood of reads, dropping a touch is fine
            pass

    def join(self) -> None:
        self._queue.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            batch = [item]
            while len(batch) < 500:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._apply(batch)
            except Exception:
                log.debug("touch batch dropped", exc_info=True)
            finally:
                for _ in batch:
                    self._queue.task_done()

    def _apply(self, batch: list[tuple[int, dt.datetime, dt.datetime]]) -> None:
        engine = self._engine_ref()
        if engine is None:
            return
        now = max(b[1] for b in batch)
        threshold = min(b[2] for b in batch)
        ids = sorted({b[0] for b in batch})
        with engine.connect() as conn, conn.begin():
            candidates = dialect.lock_skip_locked(st.SELECT_TOUCH_CANDIDATES, conn)
            free = [row[0] for row in conn.execute(candidates, {"p_ids": ids, "p_older": threshold})]
            if free:
                conn.execute(st.TOUCH_FILES, {"p_ids": free, "p_now": now, "p_older": threshold})


_workers: weakref.WeakKeyDictionary[Engine, _TouchWorker] = weakref.WeakKeyDictionary()
_workers_lock = threading.Lock()


def _worker_for(engine: Engine) -> _TouchWorker:
    with _workers_lock:
        worker = _workers.get(engine)
        if worker is None:
            worker = _workers[engine] = _TouchWorker(engine)
        return worker


def flush_touches() -> None:
    """Block until every queued touch has been applied or dropped."""
    with _workers_lock:
        workers = list(_workers.values())
    for worker in workers:
        worker.join()
