"""Per-user administration: a data-subject access export (:func:`export_user`) and forgetting a
user (:func:`forget_user`).

What the package holds about one user, and so what both cover:

* the **profile**: every store ``reserved:profile:<root folder>:<encoded user id>``;
* the user's **memory items** in the organisation (deleted ones included until purged);
* **user-scoped stores** ``user:<AGENT>:<user id>`` of every agent;
* **context stores keyed by that user**: a context store whose context key is one of
  :data:`CONTEXT_USER_KEYS` (``user``, ``user_id``) and whose context value is the user id,
  agent-keyed (``context:<AGENT>:user_id:<id>``) or store-code keyed
  (``context:store:<CODE>:user_id:<id>``). Other context keys (``document_id``...) name a
  thing, not a person, and are left alone;
* the **switches**: the memory switch in the organisation and the profile opt-out;
* the **audit events** about them (events naming the user, and events of the stores above).

User and context stores carry the user id as the host passed it to the agent (a store-key
component: ``[A-Za-z0-9_.-]``, so never an id such as an e-mail address, which the host must
map first); the profile and the items carry the encoded id
(:func:`dbmemory.profile.store.encode_user_id`).

:func:`forget_user` deletes the profile stores, the items, the user and context stores above
and the switches; what remains are audit events that name actions, sizes and paths, never
memory text (no audit column ever holds any), plus one ``user_forget`` event.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.core.keys import parse_store_key, validate_component
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.schema import files as _files
from dbmemory.db.schema import item_marks as _mk
from dbmemory.db.schema import items as _it
from dbmemory.db.schema import memory_switches as _sw
from dbmemory.db.schema import stores as _stores
from dbmemory.db.schema import user_settings as _us
from dbmemory.errors import ConflictError, InvalidScopeError
from dbmemory.items import audit
from dbmemory.items.episodes import delete_episodes, list_episodes
from dbmemory.items.model import DEFAULT_ORG, check_org, user_key_of
from dbmemory.items.settings import get_memory_switch
from dbmemory.items.store import list_items
from dbmemory.profile.optout import is_user_memory_enabled
from dbmemory.store.drop import drop_stores
from dbmemory.store.units import write_unit

__all__ = ["CONTEXT_USER_KEYS", "EXPORT_FORMAT", "user_stores", "export_user", "forget_user"]

CONTEXT_USER_KEYS: tuple[str, ...] = ("user", "user_id")
"""Context keys whose value is a user id: context stores under them belong to that user."""

EXPORT_FORMAT = "dbmemory-user-export/1"
"""``format`` field of :func:`export_user`'s result."""


def _suffix_match(column: Any, suffix: str) -> Any:
    """SQL: ``column`` ends with ``suffix`` exactly (no LIKE: ``_`` would be a wildcard)."""
    n = len(suffix)
    return sa.and_(
        sa.func.length(column) > n,
        sa.func.substr(column, sa.func.length(column) - n + 1) == suffix,
    )


def user_stores(conn: Connection, user_id: str) -> list[tuple[int, str, str]]:
    """The stores that belong to ``user_id`` (see the module doc), as ``(store_id, store_key,
    kind)`` with kind ``profile``, ``user`` or ``context``, ordered by key."""
    user_key = user_key_of(user_id)
    try:
        raw = validate_component(user_id, "user id")
    except InvalidScopeError:
        raw = None  # no agent store can carry it
    suffixes = {":" + user_key}
    if raw is not None:
        suffixes.add(":" + raw)
    stmt = sa.select(_stores.c.store_id, _stores.c.store_key).where(
        sa.or_(*(_suffix_match(_stores.c.store_key, s) for s in sorted(suffixes)))
    )
    found: list[tuple[int, str, str]] = []
    for store_id, key in conn.execute(stmt.order_by(_stores.c.store_key)):
        try:
            parts = parse_store_key(key)
        except InvalidScopeError:
            continue
        last = parts.components[-1] if parts.components else None
        if parts.scope == "reserved" and parts.kind == "profile" and last == user_key:
            found.append((int(store_id), key, "profile"))
        elif raw is not None and parts.scope == "user" and last == raw:
            found.append((int(store_id), key, "user"))
        elif (
            raw is not None
            and parts.scope == "context"
            and last == raw
            and parts.components[-2] in CONTEXT_USER_KEYS
        ):
            found.append((int(store_id), key, "context"))
    return found


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _store_files(conn: Connection, store_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        sa.select(_files.c.file_path, _files.c.body, _files.c.version_no, _files.c.updated_at)
        .where(_files.c.store_id == store_id)
        .order_by(_files.c.path_hash)
    ).all()
    out = [
        {"path": r.file_path, "text": r.body or "", "version": int(r.version_no), "updated_at": _iso(r.updated_at)}
        for r in rows
    ]
    return sorted(out, key=lambda f: f["path"])


def export_user(
    conn: Connection, user_id: str, *, org_id: str = DEFAULT_ORG, actor: str = "admin"
) -> dict[str, Any]:
    """Everything the package holds about one user, as a JSON-able dict (a data-subject
    access request), and a ``user_export`` audit event in the caller's transaction.

    Returns:
        ``{"format", "user_id", "user_key", "org_id", "exported_at", "profile": [{"store_key",
        "files": [{"path", "text", "version", "updated_at"}]}], "items": [Item.to_dict()...]
        (deleted ones too), "episodes": [Episode.to_dict()...] (oldest turn first), "stores": [{"store_key", "kind": "user"|"context", "files"}],
        "switches": {"memory_switch_on", "profile_memory_enabled"}, "audit_events":
        [AuditEvent.to_dict()...] (oldest first)}``.

    Raises:
        InvalidScopeError: invalid user or organisation id.
    """
    check_arguments(conn=conn, actor=actor)
    org = check_org(org_id)
    key = user_key_of(user_id)
    try:
        found = user_stores(conn, user_id)
        profile = [
            {"store_key": k, "files": _store_files(conn, sid)} for sid, k, kind in found if kind == "profile"
        ]
        others = [
            {"store_key": k, "kind": kind, "files": _store_files(conn, sid)}
            for sid, k, kind in found
            if kind != "profile"
        ]
        items = [i.to_dict() for i in list_items(conn, user_id, org_id=org, include_deleted=True)]
        kept = [e.to_dict() for e in list_episodes(conn, user_id, org_id=org, include_expired=True)]
        events = [
            audit.to_event(r).to_dict()
            for r in conn.execute(
                audit.select_events(user_key=key, store_keys=[k for _, k, _ in found], limit=None)
            )
        ]
        switches = {
            "memory_switch_on": get_memory_switch(conn, user_id, org_id=org),
            "profile_memory_enabled": is_user_memory_enabled(conn, user_id),
        }
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "exporting a user") from exc
    with write_unit(conn, "recording a user export"):
        audit.record(
            conn, "user_export", actor=actor, org_id=org, user_key=key,
            detail=f"{len(items)} items, {len(profile) + len(others)} stores",
        )
    return {
        "format": EXPORT_FORMAT,
        "user_id": user_id,
        "user_key": key,
        "org_id": org,
        "exported_at": utcnow().isoformat(),
        "profile": profile,
        "items": items,
        "episodes": kept,
        "stores": others,
        "switches": switches,
        "audit_events": list(reversed(events)),
    }


def _lock_row(conn: Connection, table: sa.Table, key: Any, values: dict[str, Any]) -> int:
    """Lock one row (``FOR UPDATE``), inserting it when missing; 1 when this inserted it.

    Raises:
        ConflictError: the row was created by a writer this transaction's snapshot cannot
            see (PostgreSQL REPEATABLE READ / SERIALIZABLE): its rows would be invisible to
            the forget too, so roll back and retry.
    """
    lock = sa.select(*table.primary_key.columns).where(key).with_for_update()
    if conn.execute(lock).first() is not None:
        return 0
    try:
        with conn.begin_nested():
            conn.execute(sa.insert(table).values(**values))
    except sa.exc.IntegrityError:
        if conn.execute(lock).first() is None:  # created concurrently, after our snapshot
            raise ConflictError(
                "a write for this user committed while the forget waited, after this "
                "transaction's snapshot: roll back and retry the forget",
                code="serialization_failure",
            ) from None
        return 0
    return 1


def forget_user(
    conn: Connection, user_id: str, *, org_id: str = DEFAULT_ORG, actor: str = "admin"
) -> dict[str, int]:
    """Delete everything the package holds about one user (see the module doc), in the caller's
    transaction. Audit events stay, content-free: ``store_drop`` per store, ``item_purge`` per
    item, and one ``user_forget`` with the counts.

    **Nothing derived from before the forget is written after it commits.** An item extraction
    or profile consolidation in flight (its model call running) reads the user's forget mark
    (:func:`dbmemory.profile.optout.forget_mark`, the newest ``user_forget`` event) when it
    starts and again in its write transaction under its lock; this function takes the same
    locks first, in the same order (the switch row of :func:`~dbmemory.items.settings.lock_user`,
    then the ``dbm_user_settings`` row of :func:`~dbmemory.profile.optout.lock_user_memory_enabled`,
    each created when missing and deleted below), so the
    write either commits before them and its rows are deleted here, or waits and then sees the
    new ``user_forget`` event and writes nothing. The ``switches`` count holds only the rows
    that existed before.

    Returns:
        ``{"items": n, "stores": m, "switches": k, "episodes": e}`` (what was deleted; the
        episodes of the organisation, with a content-free ``episode_delete`` event).

    Raises:
        InvalidScopeError: invalid user or organisation id.
    """
    check_arguments(conn=conn, actor=actor)
    org = check_org(org_id)
    key = user_key_of(user_id)
    now = utcnow()
    with write_unit(conn, "forgetting a user"):
        # the locks the post-turn writes take, in their order, before anything is read: an
        # extraction or consolidation writing now finishes first (and its rows are deleted
        # below), one writing later waits and finds the user_forget event (the forget rule)
        created = _lock_row(
            conn, _sw, sa.and_(_sw.c.org_id == org, _sw.c.user_key == key),
            {"org_id": org, "user_key": key, "memory_on": True, "updated_at": now},
        )
        created += _lock_row(
            conn, _us, _us.c.user_key == key,
            {"user_key": key, "memory_enabled": True, "updated_at": now},
        )
        found = user_stores(conn, user_id)
        dropped = drop_stores(conn, [sid for sid, _, _ in found], actor=actor) if found else 0
        rows = conn.execute(
            sa.select(_it.c.item_id, _it.c.org_id, _it.c.user_key, _it.c.char_count)
            .where(_it.c.org_id == org, _it.c.user_key == key)
            .with_for_update()
        ).all()
        ids = [int(r.item_id) for r in rows]
        for i in range(0, len(ids), 1000):
            conn.execute(sa.delete(_it).where(_it.c.item_id.in_(ids[i : i + 1000])))
        audit.record_many(
            conn,
            [
                audit.event_row(
                    "item_purge", actor=actor, org_id=org, user_key=key, item_id=int(r.item_id),
                    before=int(r.char_count), detail="forget", now=now,
                )
                for r in rows
            ],
        )
        switches = conn.execute(
            sa.delete(_sw).where(_sw.c.org_id == org, _sw.c.user_key == key)
        ).rowcount
        switches += conn.execute(sa.delete(_us).where(_us.c.user_key == key)).rowcount
        switches -= created  # the lock rows made above were no switch of the user
        conn.execute(sa.delete(_mk).where(_mk.c.org_id == org, _mk.c.user_key == key))
        episodes = delete_episodes(conn, user_id, org_id=org, actor=actor, reason="forget", now=now)
        counts = {"items": len(ids), "stores": int(dropped), "switches": int(switches), "episodes": episodes}
        audit.record(
            conn, "user_forget", actor=actor, org_id=org, user_key=key,
            detail=f"{counts['items']} items, {counts['stores']} stores, {counts['switches']} switches",
            now=now,
        )
    return counts
