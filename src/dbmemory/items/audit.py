"""Audit events of items, settings, switches, organisation memory and user administration.

Every change writes one append-only ``dbm_audit_events`` row in the caller's transaction
(:func:`record`): actor, action, organisation, subject user (encoded), item, before/after size
in characters, time, and a short content-free detail (a setting's name and values, a class).
**Never any memory text**: an item's or profile's words are not in any audit column (not even a
hash, which a short fact could be guessed back from), so deleting the item really removes its
content. :func:`audit_events` queries them; the view ``dbm_audit_report_v`` exposes them to
reports.

Actions written here (:data:`ACTIONS`); file events (``create``, ``edit``, ``delete``,
``expire``...) come from the store layer (:mod:`dbmemory.store.audit`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.outcome import note_audit_row
from dbmemory.db.schema import audit_events as _ae
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.model import AuditEvent, check_org, user_id_of, user_key_of

__all__ = ["ACTIONS", "record", "record_many", "audit_events", "MAX_AUDIT_LIMIT"]

ACTIONS: tuple[str, ...] = (
    "item_add",
    "item_edit",
    "item_delete",
    "item_restore",
    "item_purge",
    "item_expire",
    "item_evict",
    "setting_set",
    "switch_set",
    "optout_set",
    "org_memory_set",
    "user_export",
    "user_forget",
    "episode_add",
    "episode_delete",
    "episode_expire",
)
"""Actions of the events this module writes (at most 30 characters: ``action_name``)."""

MAX_AUDIT_LIMIT = 100_000
"""Most events one :func:`audit_events` call returns."""

INSERT_EVENT = sa.insert(_ae)
"""Insert audit events (one dict per row: every column but ``event_id``)."""


def event_row(
    action: str,
    *,
    actor: str,
    org_id: str | None = None,
    user_key: str | None = None,
    item_id: int | None = None,
    before: int | None = None,
    after: int | None = None,
    detail: str | None = None,
    store_key: str | None = None,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    return {
        "store_id": None,
        "store_key": store_key,
        "file_path": None,
        "action_name": action,
        "actor_name": (actor or "unknown")[:500],
        "chars_before": before,
        "chars_after": after,
        "detail_text": detail[:1000] if detail else None,
        "created_at": now or utcnow(),
        "org_id": org_id,
        "user_key": user_key,
        "item_id": item_id,
    }


def record(conn: Connection, action: str, **fields: Any) -> None:
    """Write one audit event in the caller's transaction (see :func:`record_many`)."""
    record_many(conn, [event_row(action, **fields)])


def record_many(conn: Connection, rows: Iterable[dict[str, Any]]) -> None:
    """Write audit event rows (built by :func:`event_row`) in the caller's transaction, at once."""
    rows = list(rows)
    if rows:
        note_audit_row(conn, conn.execute(INSERT_EVENT, rows), rows)


def _since(value: object, name: str) -> dt.datetime | None:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    since: dt.datetime | None = _v.check_now(value, name)
    return since


def select_events(
    *,
    org_id: str | None = None,
    user_key: str | None = None,
    action: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    store_keys: list[str] | None = None,
    limit: int | None = 1000,
) -> sa.Select[Any]:
    """The audit query: filters ANDed; ``user_key`` also matches the events of ``store_keys``
    (a user's stores); newest first."""
    stmt = sa.select(_ae)
    if org_id is not None:
        stmt = stmt.where(_ae.c.org_id == org_id)
    if user_key is not None:
        who = _ae.c.user_key == user_key
        if store_keys:
            who = sa.or_(who, _ae.c.store_key.in_(store_keys[:1000]))
        stmt = stmt.where(who)
    if action is not None:
        stmt = stmt.where(_ae.c.action_name == action)
    if since is not None:
        stmt = stmt.where(_ae.c.created_at >= since)
    if until is not None:
        stmt = stmt.where(_ae.c.created_at < until)
    stmt = stmt.order_by(_ae.c.created_at.desc(), _ae.c.event_id.desc())
    return stmt if limit is None else stmt.limit(limit)


def to_event(row: Any) -> AuditEvent:
    m = row._mapping
    return AuditEvent(
        event_id=int(m["event_id"]),
        created_at=m["created_at"],
        action=m["action_name"],
        actor=m["actor_name"],
        org_id=m["org_id"],
        user_id=user_id_of(m["user_key"]),
        item_id=None if m["item_id"] is None else int(m["item_id"]),
        store_key=m["store_key"],
        file_path=m["file_path"],
        chars_before=m["chars_before"],
        chars_after=m["chars_after"],
        detail=m["detail_text"],
        session_user=m["session_user_name"],
    )


def audit_events(
    conn: Connection,
    *,
    org_id: str | None = None,
    user_id: str | None = None,
    action: str | None = None,
    since: dt.datetime | dt.date | None = None,
    until: dt.datetime | dt.date | None = None,
    limit: int = 1000,
) -> list[AuditEvent]:
    """Audit events matching every filter given, newest first.

    Args:
        conn: a connection (read only; no lock).
        org_id: only events of this organisation (item, setting, switch and organisation
            memory events carry one; file events do not).
        user_id: only events about this user (the host's id; matched by its encoded key).
        action: only this action, e.g. ``"item_delete"`` (:data:`ACTIONS`, or a file action
            such as ``"create"``).
        since: events at or after this time (a ``date`` means its midnight UTC).
        until: events before this time.
        limit: at most this many (1..100,000).

    Returns:
        List of :class:`~dbmemory.items.model.AuditEvent`, newest first.

    Raises:
        InvalidArgumentError: a filter of the wrong type; ``since`` after ``until``.
        InvalidScopeError: an invalid organisation or user id.
    """
    check_arguments(conn=conn)
    org = None if org_id is None else check_org(org_id)
    user_key = None if user_id is None else user_key_of(user_id)
    _v.check_text(action, "action", optional=True, max_chars=30)
    start = _since(since, "since")
    end = _since(until, "until")
    if start is not None and end is not None and start > end:
        raise InvalidArgumentError("since is after until: swap them")
    _v.check_int(limit, "limit", minimum=1, maximum=MAX_AUDIT_LIMIT)
    stmt = select_events(
        org_id=org, user_key=user_key, action=action, since=start, until=end, limit=limit
    )
    try:
        return [to_event(row) for row in conn.execute(stmt)]
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading audit events") from exc
