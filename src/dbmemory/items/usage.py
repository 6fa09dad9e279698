"""Usage of memory items: ``last_used_at``, the least-recently-used order of the auto-item
limit (:func:`dbmemory.items.enforce_auto_item_limit`)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import validate as _v
from dbmemory.db import dialect
from dbmemory.db.schema import items as _it
from dbmemory.errors import DbMemoryError
from dbmemory.txn import write_unit

__all__ = ["mark_items_used"]

log = logging.getLogger(__name__)


def mark_items_used(
    engine_or_conn: Engine | Connection,
    item_ids: Iterable[int],
    *,
    now: dt.datetime | None = None,
) -> int:
    """Record that items were injected into a conversation (``last_used_at``; the LRU rule of
    the auto-item limit). Not a change: no version, no audit event.

    With an **Engine** (what a turn passes) the update runs in a short transaction of its own,
    committed here, never in the turn's transaction, so it holds no lock there; a failure is
    logged and counted as 0 (the turn goes on). With a **Connection** it joins that
    connection's transaction (the caller decides; a failure raises). On SQLite, whose writers
    take the database's one write lock, call it after the turn's own write transaction ended
    (else it waits for the busy timeout, then logs and returns 0).

    Returns:
        The number of rows updated.
    """
    _v.arguments(engine_or_conn=engine_or_conn)
    ids = _v.check_each(list(item_ids), "item_ids", _v.check_id)
    now = _v.check_now(now) or dialect.utcnow()
    if not ids:
        return 0

    def run(conn: Connection) -> int:
        total = 0
        for chunk in (ids[i : i + 1000] for i in range(0, len(ids), 1000)):
            total += conn.execute(
                sa.update(_it).where(_it.c.item_id.in_(chunk)).values(last_used_at=now)
            ).rowcount
        return total

    if isinstance(engine_or_conn, Connection):
        with write_unit(engine_or_conn, "marking memory items used"):
            return run(engine_or_conn)
    try:
        with engine_or_conn.begin() as conn:
            return run(conn)
    except (sa.exc.SQLAlchemyError, DbMemoryError) as exc:
        log.warning("marking %d memory items used failed: %s", len(ids), exc)
        return 0
