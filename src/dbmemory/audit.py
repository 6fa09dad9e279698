"""Audit events: one append-only ``dbm_audit_events`` row per change, written in the same
transaction as the change (the file API, the expiry, agent configuration and store drops)."""

from __future__ import annotations


import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from dbmemory import statements as st
from dbmemory.db import dialect

__all__: list[str] = []  # internal to the store layer: _event, _audit, _audit_write


def _audit(conn: Connection, events: Sequence[dict[str, Any]]) -> None:
    if not events:
        return
    conn.execute(st.INSERT_AUDIT, _audit_rows(events, dialect.utcnow()))


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


def _audit_write(conn: Connection, store_id: int, events: Sequence[dict[str, Any]]) -> None:
    """Write a store change's audit events and, where the backend needs it for caps and shape
    to hold at REPEATABLE READ / SERIALIZABLE (:func:`dbmemory.db.dialect.bump_store_on_write`),
    modify the locked store row (``updated_at``): in the same statement on PostgreSQL
    (:data:`dbmemory.statements.INSERT_AUDIT_BUMP`), one statement more on Oracle, nothing on
    MySQL/MariaDB and SQLite. Every write that changes a store calls this under its store lock,
    so a writer whose snapshot predates this write's commit fails to lock the store row."""
    bump = dialect.store_bump(conn)
    if bump == "cte" and events:
        now = dialect.utcnow()
        rows = [
            {"p_sid": store_id, "p_now": now, **{f"p_a_{k}": v for k, v in row.items()}}
            for row in _audit_rows(events, now)
        ]
        conn.execute(st.INSERT_AUDIT_BUMP, rows)
        return
    if bump is not None:
        conn.execute(st.BUMP_STORE, {"p_sid": store_id, "p_now": dialect.utcnow()})
    _audit(conn, events)


def _event(
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


