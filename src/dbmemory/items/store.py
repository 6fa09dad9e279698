"""Memory items: add, edit, soft delete, restore, purge, clear, list, mark used, and the
auto-item limit. Every writer runs in the caller's transaction (:func:`dbmemory.store.units.write_unit`)
and writes its audit event there; nothing here commits.

Rules:

* **Live** item: ``deleted_at`` is NULL and ``expires_at`` is NULL or later than now. Only live
  items are listed by default and used in conversations: a soft-deleted item stops being used
  at once, and so does an expired one even before the expiry job soft-deletes it.
* ``expires_at`` = last change (create, edit, restore) or last use (an injection into a turn
  or a search hit, :func:`~dbmemory.items.mark_items_used`), whichever is later, + the class's
  days (:class:`~dbmemory.items.settings.OrgSettings`); NULL for ``permanent``. An expired item
  stays expired until restored.
* Soft delete keeps the row until the purge (grace period, ``grace_days``); restore works until
  then. The purge deletes the row for good (:func:`purge_items`, and the expiry job).
* At most :data:`~dbmemory.items.model.MAX_AUTO_ITEMS` live auto items per user: adding one
  more soft-deletes the least recently used auto item (``item_evict``); manual items never give
  way. Writers that check the count lock the user's switch row first, so two extractions of
  one user cannot both pass the limit, and the count sees what the previous holder committed
  at every isolation level (:func:`~dbmemory.items.settings.lock_user_to_count`): at
  PostgreSQL's and MySQL/MariaDB's REPEATABLE READ (and PostgreSQL's SERIALIZABLE) a writer
  whose snapshot predates the previous holder's commit is refused with a
  :class:`~dbmemory.errors.ConflictError` (code ``serialization_failure``) and writes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.core.keys import validate_component
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.schema import items as _it
from dbmemory.errors import ConflictError, InvalidArgumentError, NotFoundError, StorageError
from dbmemory.items import audit
from dbmemory.items.model import (
    DEFAULT_ORG,
    MAX_AUTO_ITEMS,
    Item,
    check_class,
    check_confidence,
    check_item_text,
    check_kind,
    check_org,
    text_hash,
    user_id_of,
    user_key_of,
)
from dbmemory.items.retention import purge_deleted
from dbmemory.items.settings import OrgSettings, get_org_settings, lock_user_to_count
from dbmemory.store.units import write_unit

__all__ = [
    "add_item",
    "edit_item",
    "delete_item",
    "restore_item",
    "purge_items",
    "clear_items",
    "get_item",
    "list_items",
    "count_items",
    "enforce_auto_item_limit",
    "live_rule",
]

def live_rule(now: Any) -> sa.ColumnElement[bool]:
    """SQL: the item is live at ``now`` (not deleted, not expired)."""
    return sa.and_(
        _it.c.deleted_at.is_(None),
        sa.or_(_it.c.expires_at.is_(None), _it.c.expires_at > now),
    )


def to_item(row: Any) -> Item:
    m = row._mapping
    return Item(
        item_id=int(m["item_id"]),
        org_id=m["org_id"],
        user_id=user_id_of(m["user_key"]) or "",
        text=m["item_text"],
        kind=m["item_kind"],
        retention_class=m["retention_class"],
        confidence=None if m["confidence"] is None else float(m["confidence"]),
        source_chat_id=m["source_chat_id"],
        source_turn_at=m["source_turn_at"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        last_used_at=m["last_used_at"],
        expires_at=m["expires_at"],
        deleted_at=m["deleted_at"],
        version=int(m["version_no"]),
        char_count=int(m["char_count"]),
        text_hash=m["text_hash"],
    )


def _expiry(settings: OrgSettings, retention_class: str, changed: dt.datetime) -> dt.datetime | None:
    days = settings.retention_days(retention_class)
    return None if days is None else changed + dt.timedelta(days=days)


def _now(now: object) -> dt.datetime:
    return _v.check_now(now) or utcnow()


def _owner(user_id: object, org_id: object) -> tuple[str, str]:
    return check_org(org_id), user_key_of(user_id)


def _lock_item(conn: Connection, org: str, key: str, item_id: int) -> Any:
    row = conn.execute(
        sa.select(_it)
        .where(_it.c.item_id == item_id, _it.c.org_id == org, _it.c.user_key == key)
        .with_for_update()
    ).first()
    if row is None:
        raise NotFoundError(
            f"memory item {item_id} of user {user_id_of(key)!r} in organisation {org!r} does not "
            "exist (or was purged): list the user's items to find its id",
            code="item_not_found",
        )
    return row


def _reread(conn: Connection, org: str, key: str, item_id: int) -> Item:
    """The item as written, addressed by its user and id (the shard key first: docs/scaling.md)."""
    return to_item(conn.execute(sa.select(_it).where(_mine(org, key), _it.c.item_id == item_id)).one())


def _mine(org: str, key: str) -> sa.ColumnElement[bool]:
    """The rows of one user of one organisation: every per-user statement names its user, so
    each stays on the user's shard when the items are distributed by ``user_key``."""
    return sa.and_(_it.c.org_id == org, _it.c.user_key == key)


def add_item(
    conn: Connection,
    user_id: str,
    text: str,
    *,
    org_id: str = DEFAULT_ORG,
    kind: str = "manual",
    retention_class: str | None = None,
    confidence: float | None = None,
    source_chat_id: str | None = None,
    source_turn_at: dt.datetime | None = None,
    actor: str = "user",
    now: dt.datetime | None = None,
) -> Item:
    """Add a memory item for a user (``item_add`` audit event), in the caller's transaction.

    Args:
        conn: the caller's connection.
        user_id: the host's user id (any text; encoded like the profile's).
        text: the fact, 1..1,000 characters once stripped; no NUL.
        org_id: the organisation.
        kind: ``manual`` (default) or ``auto``.
        retention_class: default ``standard`` for manual, ``auto`` for auto items.
        confidence: 0..1, auto items only.
        source_chat_id: the chat (a store-key component) the fact came from, auto items.
        source_turn_at: the time of that turn.
        actor: recorded in the audit event.
        now: the current time (tests); default: UTC now.

    Returns:
        The new :class:`~dbmemory.items.model.Item`. An auto item at the user's limit first
        evicts the least recently used auto item (:func:`enforce_auto_item_limit`).

    Raises:
        InvalidArgumentError: bad text, kind, class (code ``invalid_retention_class``),
            confidence, time or actor.
        InvalidScopeError: invalid user, organisation or chat id.
    """
    check_arguments(conn=conn, actor=actor)
    org, key = _owner(user_id, org_id)
    body = check_item_text(text)
    kind = check_kind(kind)
    cls = check_class(retention_class or ("auto" if kind == "auto" else "standard"), kind)
    conf = check_confidence(confidence, kind)
    if source_chat_id is not None:
        validate_component(source_chat_id, "source chat id")
    turn_at = _v.check_now(source_turn_at, "source_turn_at")
    now = _now(now)
    settings = get_org_settings(conn, org)
    with write_unit(conn, "adding a memory item"):
        if kind == "auto":
            _enforce(conn, org, key, MAX_AUTO_ITEMS, 1, actor, now)
        values = {
            "org_id": org,
            "user_key": key,
            "item_text": body,
            "char_count": len(body),
            "text_hash": text_hash(body),
            "item_kind": kind,
            "retention_class": cls,
            "confidence": conf,
            "source_chat_id": source_chat_id,
            "source_turn_at": turn_at,
            "created_at": now,
            "updated_at": now,
            "last_used_at": None,
            "expires_at": _expiry(settings, cls, now),
            "deleted_at": None,
            "version_no": 1,
        }
        inserted = conn.execute(sa.insert(_it).values(**values)).inserted_primary_key
        if inserted is None:  # pragma: no cover - every supported driver returns the new id
            raise StorageError("the database returned no id for the new item: nothing was added")
        item_id = int(inserted[0])
        audit.record(
            conn, "item_add", actor=actor, org_id=org, user_key=key, item_id=item_id,
            before=None, after=len(body), detail=f"kind={kind} class={cls}", now=now,
        )
        return _reread(conn, org, key, item_id)


def edit_item(
    conn: Connection,
    user_id: str,
    item_id: int,
    text: str | None = None,
    *,
    org_id: str = DEFAULT_ORG,
    retention_class: str | None = None,
    confidence: float | None = None,
    expected_version: int | None = None,
    actor: str = "user",
    now: dt.datetime | None = None,
) -> Item:
    """Change a live item's text and/or class (``item_edit`` audit event); kind stays.

    ``expected_version`` makes it a compare-and-set (an extraction that merged into an old
    version fails instead of overwriting a newer edit).

    Raises:
        NotFoundError: no such item of this user (code ``item_not_found``), or it is deleted
            (code ``item_deleted``: restore it first).
        ConflictError: the item is not at ``expected_version``.
        InvalidArgumentError: bad text, class or confidence; nothing to change.
    """
    check_arguments(conn=conn, actor=actor)
    org, key = _owner(user_id, org_id)
    _v.check_id(item_id, "item_id")
    body = None if text is None else check_item_text(text)
    _v.check_int(expected_version, "expected_version", minimum=1, maximum=_v.INT32_MAX, optional=True)
    if body is None and retention_class is None and confidence is None:
        raise InvalidArgumentError(
            "an edit needs new text, a retention class or a confidence: pass one of them"
        )
    now = _now(now)
    settings = get_org_settings(conn, org)
    with write_unit(conn, f"editing memory item {item_id}"):
        row = _lock_item(conn, org, key, item_id)
        if row.deleted_at is not None:
            raise NotFoundError(
                f"memory item {item_id} is deleted: restore it first (dbmemory items restore)",
                code="item_deleted",
            )
        if expected_version is not None and row.version_no != expected_version:
            raise ConflictError(
                f"memory item {item_id} is at version {row.version_no}, not {expected_version}: "
                "it changed meanwhile; read it again and redo the edit"
            )
        cls = row.retention_class if retention_class is None else check_class(retention_class, row.item_kind)
        conf = row.confidence if confidence is None else check_confidence(confidence, row.item_kind)
        new_text = row.item_text if body is None else body
        conn.execute(
            sa.update(_it)
            .where(_mine(org, key), _it.c.item_id == item_id)
            .values(
                item_text=new_text,
                char_count=len(new_text),
                text_hash=text_hash(new_text),
                retention_class=cls,
                confidence=conf,
                updated_at=now,
                expires_at=_expiry(settings, cls, now),
                version_no=row.version_no + 1,
            )
        )
        detail = None if cls == row.retention_class else f"class: {row.retention_class} -> {cls}"
        audit.record(
            conn, "item_edit", actor=actor, org_id=org, user_key=key, item_id=item_id,
            before=row.char_count, after=len(new_text), detail=detail, now=now,
        )
        return _reread(conn, org, key, item_id)


def _soft_delete(
    conn: Connection, rows: Sequence[Any], action: str, actor: str, now: dt.datetime
) -> int:
    if not rows:
        return 0
    ids = [int(r.item_id) for r in rows]
    owners = {(r.org_id, r.user_key) for r in rows}
    mine = _mine(*owners.pop()) if len(owners) == 1 else sa.true()  # one user: its shard
    for chunk in (ids[i : i + 1000] for i in range(0, len(ids), 1000)):
        conn.execute(
            sa.update(_it)
            .where(mine, _it.c.item_id.in_(chunk), _it.c.deleted_at.is_(None))
            .values(deleted_at=now, version_no=_it.c.version_no + 1)
        )
    audit.record_many(
        conn,
        [
            audit.event_row(
                action, actor=actor, org_id=r.org_id, user_key=r.user_key, item_id=int(r.item_id),
                before=int(r.char_count), after=0, now=now,
            )
            for r in rows
        ],
    )
    return len(ids)


def delete_item(
    conn: Connection,
    user_id: str,
    item_id: int,
    *,
    org_id: str = DEFAULT_ORG,
    actor: str = "user",
    now: dt.datetime | None = None,
) -> Item:
    """Soft-delete an item: it stops being used at once and is purged after the grace period
    (``item_delete`` audit event). Returns the deleted item (restorable until purged).

    Raises:
        NotFoundError: no such item (code ``item_not_found``) or already deleted
            (code ``item_deleted``).
    """
    check_arguments(conn=conn, actor=actor)
    org, key = _owner(user_id, org_id)
    _v.check_id(item_id, "item_id")
    now = _now(now)
    with write_unit(conn, f"deleting memory item {item_id}"):
        row = _lock_item(conn, org, key, item_id)
        if row.deleted_at is not None:
            raise NotFoundError(f"memory item {item_id} is already deleted", code="item_deleted")
        _soft_delete(conn, [row], "item_delete", actor, now)
        return _reread(conn, org, key, item_id)


def restore_item(
    conn: Connection,
    user_id: str,
    item_id: int,
    *,
    org_id: str = DEFAULT_ORG,
    actor: str = "admin",
    now: dt.datetime | None = None,
) -> Item:
    """Undo a soft delete (or an expiry) until the item is purged (``item_restore`` audit
    event). The restore counts as a change: ``expires_at`` starts again from now.

    Raises:
        NotFoundError: no such item, or purged (code ``item_not_found``).
        InvalidArgumentError: the item is not deleted (code ``item_not_deleted``).
    """
    check_arguments(conn=conn, actor=actor)
    org, key = _owner(user_id, org_id)
    _v.check_id(item_id, "item_id")
    now = _now(now)
    settings = get_org_settings(conn, org)
    with write_unit(conn, f"restoring memory item {item_id}"):
        row = _lock_item(conn, org, key, item_id)
        if row.deleted_at is None:
            raise InvalidArgumentError(
                f"memory item {item_id} is not deleted: there is nothing to restore"
                + (
                    " (it expired by its retention class, and an expired item stays expired: "
                    "add it again to keep it)"
                    if row.expires_at is not None
                    and row.expires_at.replace(tzinfo=row.expires_at.tzinfo or dt.timezone.utc) <= now
                    else ""
                ),
                code="item_not_deleted",
            )
        if row.item_kind == "auto":
            _enforce(conn, org, key, MAX_AUTO_ITEMS, 1, actor, now)
        conn.execute(
            sa.update(_it)
            .where(_mine(org, key), _it.c.item_id == item_id)
            .values(
                deleted_at=None,
                updated_at=now,
                expires_at=_expiry(settings, row.retention_class, now),
                version_no=row.version_no + 1,
            )
        )
        audit.record(
            conn, "item_restore", actor=actor, org_id=org, user_key=key, item_id=item_id,
            before=0, after=int(row.char_count), now=now,
        )
        return _reread(conn, org, key, item_id)


def clear_items(
    conn: Connection,
    user_id: str,
    *,
    org_id: str = DEFAULT_ORG,
    actor: str = "user",
    now: dt.datetime | None = None,
) -> int:
    """Soft-delete every live item of the user (one ``item_delete`` event each). Returns how
    many."""
    check_arguments(conn=conn, actor=actor)
    org, key = _owner(user_id, org_id)
    now = _now(now)
    with write_unit(conn, "clearing memory items"):
        rows = conn.execute(
            sa.select(_it.c.item_id, _it.c.org_id, _it.c.user_key, _it.c.char_count)
            .where(_it.c.org_id == org, _it.c.user_key == key, _it.c.deleted_at.is_(None))
            .with_for_update()
        ).all()
        return _soft_delete(conn, rows, "item_delete", actor, now)


def purge_items(
    conn: Connection,
    *,
    org_id: str | None = None,
    user_id: str | None = None,
    item_ids: Iterable[int] | None = None,
    include_grace: bool = False,
    actor: str = "admin",
    now: dt.datetime | None = None,
) -> int:
    """Delete soft-deleted items for good (``item_purge`` audit events, content-free).

    By default only items whose grace period (the organisation's ``grace_days``) is over;
    ``include_grace=True`` purges the ones still in it too (an administrator's "delete now").
    Live items are never purged here.

    Args:
        org_id: only this organisation (None: all).
        user_id: only this user (needs nothing else).
        item_ids: only these items.
        include_grace: also items deleted less than ``grace_days`` ago.
        now: the current time (tests).

    Returns:
        The number of items purged.
    """
    check_arguments(conn=conn, actor=actor)
    org = None if org_id is None else check_org(org_id)
    key = None if user_id is None else user_key_of(user_id)
    ids = None if item_ids is None else _v.check_each(list(item_ids), "item_ids", _v.check_id)
    _v.check_bool(include_grace, "include_grace")
    now = _now(now)
    with write_unit(conn, "purging memory items"):
        return purge_deleted(
            conn, now, org=org, user_key=key, item_ids=ids, include_grace=include_grace, actor=actor
        )


def get_item(conn: Connection, user_id: str, item_id: int, *, org_id: str = DEFAULT_ORG) -> Item:
    """One item of the user, deleted or not (no lock).

    Raises:
        NotFoundError: no such item of this user (code ``item_not_found``).
    """
    check_arguments(conn=conn)
    org, key = _owner(user_id, org_id)
    _v.check_id(item_id, "item_id")
    row = conn.execute(
        sa.select(_it).where(_it.c.item_id == item_id, _it.c.org_id == org, _it.c.user_key == key)
    ).first()
    if row is None:
        raise NotFoundError(
            f"memory item {item_id} of user {user_id!r} in organisation {org!r} does not exist",
            code="item_not_found",
        )
    return to_item(row)


def list_items(
    conn: Connection,
    user_id: str,
    *,
    org_id: str = DEFAULT_ORG,
    include_deleted: bool = False,
    kind: str | None = None,
    now: dt.datetime | None = None,
) -> list[Item]:
    """The user's items, oldest first (one ``SELECT``, no lock).

    Args:
        include_deleted: also soft-deleted and expired items (restorable until purged).
        kind: only ``manual`` or ``auto`` items.
        now: the time "live" is judged at (tests).

    Returns:
        List of :class:`~dbmemory.items.model.Item` ordered by creation time, then id.
    """
    check_arguments(conn=conn)
    org, key = _owner(user_id, org_id)
    _v.check_bool(include_deleted, "include_deleted")
    kind = None if kind is None else check_kind(kind)
    now = _now(now)
    stmt = sa.select(_it).where(_it.c.org_id == org, _it.c.user_key == key)
    if not include_deleted:
        stmt = stmt.where(live_rule(now))
    if kind is not None:
        stmt = stmt.where(_it.c.item_kind == kind)
    try:
        rows = conn.execute(stmt.order_by(_it.c.created_at, _it.c.item_id)).all()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "listing memory items") from exc
    return [to_item(r) for r in rows]


def count_items(
    conn: Connection, user_id: str, *, org_id: str = DEFAULT_ORG, now: dt.datetime | None = None
) -> dict[str, int]:
    """Live items of the user by kind: ``{"manual": n, "auto": m}``."""
    check_arguments(conn=conn)
    org, key = _owner(user_id, org_id)
    now = _now(now)
    rows = conn.execute(
        sa.select(_it.c.item_kind, sa.func.count())
        .where(_it.c.org_id == org, _it.c.user_key == key, live_rule(now))
        .group_by(_it.c.item_kind)
    ).all()
    out = {"manual": 0, "auto": 0}
    out.update({k: int(n) for k, n in rows})
    return out


def _enforce(
    conn: Connection, org: str, key: str, limit: int, incoming: int, actor: str, now: dt.datetime
) -> int:
    lock_user_to_count(conn, org, key, now)  # the count below then sees every earlier commit
    rows = conn.execute(
        sa.select(_it.c.item_id, _it.c.org_id, _it.c.user_key, _it.c.char_count)
        .where(
            _it.c.org_id == org,
            _it.c.user_key == key,
            _it.c.item_kind == "auto",
            live_rule(now),
        )
        .order_by(sa.func.coalesce(_it.c.last_used_at, _it.c.created_at), _it.c.item_id)
    ).all()
    excess = len(rows) + incoming - limit
    if excess <= 0:
        return 0
    return _soft_delete(conn, list(rows[:excess]), "item_evict", actor, now)


def enforce_auto_item_limit(
    conn: Connection,
    user_id: str,
    *,
    org_id: str = DEFAULT_ORG,
    limit: int = MAX_AUTO_ITEMS,
    incoming: int = 0,
    actor: str = "extraction",
    now: dt.datetime | None = None,
) -> int:
    """Make room so that the user keeps at most ``limit`` live auto items after ``incoming``
    more are added: the least recently used auto items (``last_used_at``, else
    ``created_at``) are soft-deleted (``item_evict``). Manual items are never touched.
    :func:`add_item` with ``kind="auto"`` calls this itself (``incoming=1``).

    Returns:
        The number of auto items evicted.
    """
    check_arguments(conn=conn, actor=actor)
    org, key = _owner(user_id, org_id)
    _v.check_int(limit, "limit", minimum=0, maximum=_v.INT32_MAX)
    _v.check_int(incoming, "incoming", minimum=0, maximum=_v.INT32_MAX)
    now = _now(now)
    with write_unit(conn, "enforcing the auto item limit"):
        return _enforce(conn, org, key, limit, incoming, actor, now)
