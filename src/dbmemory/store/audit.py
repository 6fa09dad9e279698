"""Audit events of the store layer: one append-only ``dbm_audit_events`` row per change,
written in the same transaction as the change (the file API, the expiry, agent configuration and
store drops). :func:`audit_event` builds one event (a dict of the row's columns),
:func:`audit` inserts events, :func:`audit_write` inserts a write's events and moves the locked
store row's counters (one statement on PostgreSQL for one event, two elsewhere). The audit rows
of items and users are written by :mod:`dbmemory.items.audit`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from dbmemory.core.clock import utcnow
from dbmemory.db import raw
from dbmemory.db.dialect.base import raw_reads
from dbmemory.db.dialect.outcome import note_audit_row
from dbmemory.db.dialect.writes import store_bump
from dbmemory.store.statements import reads as st
from dbmemory.store.statements.writes import INSERT_AUDIT, INSERT_AUDIT_ADJUST, INSERT_AUDIT_ONE

__all__ = [
    "audit",
    "audit_write",
    "audit_event",
]


def audit(conn: Connection, events: Sequence[dict[str, Any]]) -> None:
    if not events:
        return
    rows = _audit_rows(events, utcnow())
    if len(rows) == 1 and raw_reads(conn):  # SQLite: one event on the driver's cursor
        raw.row_count(conn, INSERT_AUDIT_ONE, {f"p_a_{k}": v for k, v in rows[0].items()})
        note_audit_row(conn, None, rows)  # the result is read on MySQL/MariaDB only
        return
    note_audit_row(conn, conn.execute(INSERT_AUDIT, rows), rows)


def _audit_rows(events: Sequence[dict[str, Any]], now: dt.datetime) -> list[dict[str, Any]]:
    return [
        {
            "store_id": e.get("store_id"),
            "store_key": e.get("store_key"),
            "file_path": e.get("file_path"),
            "action_name": e["action_name"],
            "actor_name": (e.get("actor_name") or "unknown")[:500],
            "chars_before": e.get("chars_before"),
            "chars_after": e.get("chars_after"),
            "detail_text": (e.get("detail_text") or None) and e["detail_text"][:1000],
            "created_at": now,
        }
        for e in events
    ]


def audit_write(
    conn: Connection,
    store_id: int,
    events: Sequence[dict[str, Any]],
    files: int = 0,
    chars: int = 0,
) -> None:
    """Write a store change's audit events and move the locked store row's counters by
    ``files`` files and ``chars`` characters (:data:`dbmemory.store.statements.reads.ADJUST_STORE`, which
    also sets ``updated_at``): in the same statement on PostgreSQL for one event
    (:data:`dbmemory.store.statements.writes.INSERT_AUDIT_ADJUST`), one statement more elsewhere. Every
    write that changes a store calls this under its store lock, so every write modifies the
    store row (:func:`dbmemory.db.dialect.writes.bump_store_on_write`)."""
    now = utcnow()
    if len(events) == 1 and store_bump(conn) == "cte":
        row = _audit_rows(events, now)[0]
        params = {"p_sid": store_id, "p_df": files, "p_dc": chars, "p_now": now}
        params.update({f"p_a_{k}": v for k, v in row.items()})
        note_audit_row(conn, conn.execute(INSERT_AUDIT_ADJUST, params), row)
        return
    raw.row_count(conn, st.ADJUST_STORE, {"p_sid": store_id, "p_df": files, "p_dc": chars, "p_now": now})
    audit(conn, events)


def audit_event(
    store_id: int | None,
    store_key: str | None,
    path: str | None,
    action: str,
    actor: str,
    before: int | None,
    after: int | None,
    detail: str | None = None,
) -> dict[str, Any]:
    return {
        "store_id": store_id,
        "store_key": store_key,
        "file_path": path,
        "action_name": action,
        "actor_name": actor,
        "chars_before": before,
        "chars_after": after,
        "detail_text": detail,
    }


