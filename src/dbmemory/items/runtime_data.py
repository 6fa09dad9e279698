"""Database steps of the item runtime: marks, and the item API calls of the extraction (internal).

``dbm_item_marks`` holds one time per organisation, user and mark key (revision 0003):

- ``chat:<chat id>``: the last item extraction in that chat (the skip window);
- ``summary``: items changed after it are not yet folded into the profile.

Statements are built by the ``*_stmt`` functions and run by the others, on the caller's
connection and in its transaction (nothing here commits).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.db.schema import item_marks as _mk
from dbmemory.errors import ConflictError, NotFoundError
from dbmemory.items.changes import MANUAL_ITEM
from dbmemory.items.model import check_org, user_key_of
from dbmemory.items.retention import SUMMARY_MARK
from dbmemory.items.settings import OrgSettings, get_org_settings, lock_user
from dbmemory.items.store import add_item, edit_item, enforce_auto_item_limit, list_items
from dbmemory.items.usage import mark_items_used
from dbmemory.profile.optout import forget_mark

if TYPE_CHECKING:
    from dbmemory.items.changes import Change, ExtractionResult

__all__ = [
    "chat_mark",
    "load_settings",
    "memory_on",
    "forget_mark_of",
    "claim_chat",
    "live_items",
    "apply_changes",
    "items_since_fold",
    "changed_at",
    "set_fold_mark",
    "clear_marks",
    "mark_select_stmt",
    "mark_claim_stmt",
    "mark_insert_stmt",
    "mark_set_stmt",
]

EXTRACTION_ACTOR = "extraction"
"""Actor of the audit events the extraction writes."""

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def chat_mark(chat_id: str) -> str:
    """Mark key of a chat's last extraction."""
    return f"chat:{chat_id}"


def _where(org_id: str, user_key: str, mark_key: str) -> sa.ColumnElement[bool]:
    return sa.and_(_mk.c.org_id == org_id, _mk.c.user_key == user_key, _mk.c.mark_key == mark_key)


def mark_select_stmt(org_id: str, user_key: str, mark_key: str) -> sa.Select[Any]:
    """``SELECT marked_at`` of one mark."""
    return sa.select(_mk.c.marked_at).where(_where(org_id, user_key, mark_key))


def mark_claim_stmt(
    org_id: str, user_key: str, mark_key: str, when: dt.datetime, window_s: int
) -> sa.Update:
    """Move a mark to ``when`` unless it lies within ``window_s`` seconds before ``when``."""
    since = when - dt.timedelta(seconds=window_s)
    return (
        sa.update(_mk)
        .where(_where(org_id, user_key, mark_key))
        .where(sa.or_(_mk.c.marked_at <= since, _mk.c.marked_at > when))
        .values(marked_at=when)
    )


def mark_insert_stmt(org_id: str, user_key: str, mark_key: str, when: dt.datetime) -> sa.Insert:
    """Insert a new mark."""
    return sa.insert(_mk).values(org_id=org_id, user_key=user_key, mark_key=mark_key, marked_at=when)


def mark_set_stmt(org_id: str, user_key: str, mark_key: str, when: dt.datetime) -> sa.Update:
    """Set an existing mark to ``when``."""
    return sa.update(_mk).where(_where(org_id, user_key, mark_key)).values(marked_at=when)


def load_settings(conn: Connection, org_id: str) -> OrgSettings:
    """The organisation's settings (defaults for what it never changed)."""
    return get_org_settings(conn, org_id)


def memory_on(conn: Connection, org_id: str, user_id: str, now: dt.datetime) -> bool:
    """The user's memory switch (on when never set), its row locked and created when missing
    (:func:`~dbmemory.items.settings.lock_user`): the row then exists before the extraction's
    model call, so a forget committed during it deletes a row the write's snapshot can see
    (PostgreSQL REPEATABLE READ reports the concurrent delete instead of missing it)."""
    return lock_user(conn, check_org(org_id), user_key_of(user_id), now)


def forget_mark_of(conn: Connection, org_id: str, user_id: str) -> int:
    """The user's forget mark in the organisation (:func:`dbmemory.profile.optout.forget_mark`)."""
    return forget_mark(conn, user_id, org_id=check_org(org_id))


def _insert_or_false(conn: Connection, stmt: sa.Insert) -> bool:
    savepoint = conn.begin_nested()
    try:
        conn.execute(stmt)
    except sa.exc.IntegrityError:
        savepoint.rollback()
        return False
    savepoint.commit()
    return True


def claim_chat(
    conn: Connection, org_id: str, user_id: str, chat_id: str, when: dt.datetime, *, window_s: int
) -> bool:
    """Claim the chat's extraction at ``when``: False when the chat had one less than
    ``window_s`` seconds before (skip this message), else True and the mark moves to ``when``.

    Of two transactions claiming one chat at once, one wins: the conditional ``UPDATE`` locks
    the mark row, and two first claims race on the primary key (the loser gets False).
    """
    key = user_key_of(user_id)
    mark = chat_mark(chat_id)
    if conn.execute(mark_claim_stmt(org_id, key, mark, when, window_s)).rowcount:
        return True
    if conn.execute(mark_select_stmt(org_id, key, mark)).first() is not None:
        return False
    return _insert_or_false(conn, mark_insert_stmt(org_id, key, mark, when))


def live_items(conn: Connection, org_id: str, user_id: str, *, now: dt.datetime) -> list[Any]:
    """The user's live items (oldest first)."""
    return list_items(conn, user_id, org_id=org_id, now=now)


def apply_changes(
    conn: Connection,
    org_id: str,
    user_id: str,
    changes: Sequence[Change],
    *,
    chat_id: str | None,
    now: dt.datetime,
    result: ExtractionResult,
    forget_mark: int | None = None,
) -> str | None:
    """Write the planned changes in the caller's transaction (see :mod:`dbmemory.items.extract`,
    step 5): ``same`` items are marked used first (so the LRU rule never evicts them), updates
    are compare-and-set on the version read (a changed or deleted item drops the fact as
    ``conflict``), then room is made for the new facts and they are added as auto items. An
    update of a ``manual`` item is never written: the fact is added as a new auto item beside
    it, counted in ``result.refused_updates`` (:data:`~dbmemory.items.changes.MANUAL_ITEM`).

    First the user's switch row is locked (:func:`~dbmemory.items.settings.lock_user`) and
    read again: the extraction checked it before its model call, and a user who switched
    memory off meanwhile gets nothing written (a switch change waits for this transaction).
    Then, when ``forget_mark`` is given (the mark the extraction read before its model call),
    the forget mark is read again: a user forgotten meanwhile gets nothing written either
    (:func:`dbmemory.items.forget_user` takes the switch row first, so an uncommitted forget
    waits for this transaction and then deletes what it wrote).

    Returns:
        Why nothing was written (``"memory switch off"``, ``"user forgotten"``), or None when
        the changes were written."""
    org = check_org(org_id)
    if not lock_user(conn, org, user_key_of(user_id), now):
        return "memory switch off"
    if forget_mark is not None and forget_mark_of(conn, org, user_id) != forget_mark:
        return "user forgotten"
    same = [c.item for c in changes if c.action == "same"]
    if same:
        mark_items_used(conn, [i.item_id for i in same], now=now, user_id=user_id)
        result.same.extend(i.item_id for i in same)
    beside: list[Change] = []
    for change in changes:
        if change.action != "update":
            continue
        item = change.item
        if item.kind != "auto":  # what the user (or an admin) wrote is never rewritten
            result.refuse_update(MANUAL_ITEM)
            beside.append(replace(change, action="add", item=None))
            continue
        try:
            edited = edit_item(
                conn, user_id, item.item_id, change.text, org_id=org_id,
                confidence=change.confidence, expected_version=item.version,
                actor=EXTRACTION_ACTOR, now=now,
            )
        except (ConflictError, NotFoundError):
            result.drop("conflict")
            continue
        result.updated.append(edited.item_id)
    new = [c for c in changes if c.action == "add"] + beside
    if not new:
        return None
    result.evicted += enforce_auto_item_limit(
        conn, user_id, org_id=org_id, incoming=len(new), actor=EXTRACTION_ACTOR, now=now
    )
    for change in new:
        added = add_item(
            conn, user_id, change.text, org_id=org_id, kind="auto", confidence=change.confidence,
            source_chat_id=chat_id, source_turn_at=now, actor=EXTRACTION_ACTOR, now=now,
        )
        result.added.append(added.item_id)
    return None


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


def changed_at(item: Any) -> dt.datetime:
    """An item's last change (UTC)."""
    return _aware(item.updated_at)


def items_since_fold(conn: Connection, org_id: str, user_id: str, *, now: dt.datetime | None) -> list[Any]:
    """Items changed after the last summary fold (all of them before the first fold): the live
    ones and the auto items past their ``expires_at`` that the expiry has not soft-deleted (it
    waits for their fold: :func:`dbmemory.items.retention.held_rule`)."""
    key = user_key_of(user_id)
    row = conn.execute(mark_select_stmt(org_id, key, SUMMARY_MARK)).first()
    since = _EPOCH if row is None or row[0] is None else _aware(row[0])
    when = now or dt.datetime.now(dt.timezone.utc)
    return [
        i
        for i in list_items(conn, user_id, org_id=org_id, include_deleted=True, now=when)
        if i.deleted_at is None
        and changed_at(i) > since
        and (i.kind == "auto" or i.expires_at is None or _aware(i.expires_at) > when)
    ]


def set_fold_mark(conn: Connection, org_id: str, user_id: str, when: dt.datetime) -> None:
    """Move the summary mark to ``when`` (never backwards)."""
    key = user_key_of(user_id)
    row = conn.execute(mark_select_stmt(org_id, key, SUMMARY_MARK)).first()
    if row is None:
        if _insert_or_false(conn, mark_insert_stmt(org_id, key, SUMMARY_MARK, when)):
            return
        row = conn.execute(mark_select_stmt(org_id, key, SUMMARY_MARK)).first()
    current = row[0] if row is not None else None
    if current is None or _aware(current) < when:
        conn.execute(mark_set_stmt(org_id, key, SUMMARY_MARK, when))


def clear_marks(conn: Connection, org_id: str, user_id: str) -> int:
    """Delete the user's marks in the organisation (a fresh replay, forget-user); the count."""
    key = user_key_of(user_id)
    return int(conn.execute(sa.delete(_mk).where(_mk.c.org_id == org_id, _mk.c.user_key == key)).rowcount)
