"""Per-user administration: a data-subject access export (:func:`export_user`) and forgetting a
user (:func:`forget_user`).

What the package holds about one user, and so what both cover, table by table, is the registry
:data:`dbmemory.items.user_rows.USER_ROWS` (every other table is declared in
:data:`~dbmemory.items.user_rows.NO_USER_DATA`; a test checks that each table of the schema is in
one of them):

* the **profile**: every store ``reserved:profile:<root folder>:<encoded user id>``;
* the user's **memory items** in the organisation (deleted ones included until purged);
* the user's **episodes** in the organisation and their full-text index rows;
* the user's **stores** (:mod:`dbmemory.items.user_rows`): ``user:<AGENT>:<user id>`` of every
  agent; the context stores whose context key is one of :data:`CONTEXT_USER_KEYS` (``user``,
  ``user_id``) and whose value is the user id (``document_id``... name a thing, not a person, and
  are left alone); the **session stores** of the chats the user's items, episodes and
  extraction marks record; the **LangGraph namespaces** ``("users", <user id>, ...)`` (also
  ``"user"``, ``"user_id"``), with their files and the files' last-read times;
* the **switches** (the memory switch in the organisation, the profile opt-out) and the
  extraction **marks** (last extraction per chat, last profile fold);
* the **audit events** about them (events naming the user, and events of the user's stores,
  also of stores deleted before).

User and context stores carry the user id as the host passed it to the agent (a store-key
component: ``[A-Za-z0-9_.-]``, so never an id such as an e-mail address, which the host must
map first); the profile and the items carry the encoded id
(:func:`dbmemory.profile.store.encode_user_id`).

Neither shows nor deletes what another user or organisation shares
(:mod:`dbmemory.items.user_share`): a session store whose chat is recorded for another user too
is exported by key only (``shared_stores``) and kept by a forget; while the user holds items,
episodes, marks or a switch in another organisation, a forget in one organisation keeps the
organisation-less stores and the profile opt-out (``stores_kept``, ``other_orgs``) and a forget
with ``org_id=None`` (every organisation) deletes them.

:func:`forget_user` deletes all of it but the audit events, which it **redacts**: the file
names of the user's file events (``file_path``, and a rename's target in ``detail_text``) are
cleared. What stays: content-free audit events (action, actor, time, sizes in characters,
counts, the organisation, the user's encoded id and the user's store keys, which carry the
user id), among them one ``user_forget`` event, the tombstone the forget rule reads. No audit
column ever holds memory text.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.schema import audit_events as _ae
from dbmemory.db.schema import episodes as _ep
from dbmemory.db.schema import file_reads as _fr
from dbmemory.db.schema import files as _files
from dbmemory.db.schema import item_marks as _mk
from dbmemory.db.schema import items as _it
from dbmemory.db.schema import memory_switches as _sw
from dbmemory.db.schema import stores as _stores
from dbmemory.db.schema import user_settings as _us
from dbmemory.errors import ConflictError
from dbmemory.items import audit
from dbmemory.items.episodes import delete_episodes, list_episodes
from dbmemory.items.model import DEFAULT_ORG, check_org, user_key_of
from dbmemory.items.settings import get_memory_switch
from dbmemory.items.store import list_items
from dbmemory.items.user_rows import (
    CONTEXT_USER_KEYS,
    UserKeys,
    store_key_rule,
    user_keys,
    user_store_kind,
)
from dbmemory.items.user_share import SHARED_WITH_USERS, Sharing, sharing_of, user_orgs
from dbmemory.profile.optout import is_user_memory_enabled
from dbmemory.store.drop import drop_stores
from dbmemory.store.units import write_unit

__all__ = [
    "CONTEXT_USER_KEYS",
    "EXPORT_FORMAT",
    "FORGOTTEN_DETAIL",
    "user_chat_ids",
    "user_stores",
    "export_user",
    "forget_user",
]

EXPORT_FORMAT = "dbmemory-user-export/1"
"""``format`` field of :func:`export_user`'s result."""

FORGOTTEN_DETAIL = "file name forgotten"
"""``detail_text`` of a file event of a forgotten user's store (its ``file_path`` is cleared)."""


def user_chat_ids(conn: Connection, user_id: str, *, org_id: str | None = DEFAULT_ORG) -> list[str]:
    """The chat ids the user's items, episodes and extraction marks record in the organisation
    (``None``: in every one), sorted: the session ids of the user's session stores."""
    key = user_key_of(user_id)
    stmts: list[Any] = [
        sa.select(_it.c.source_chat_id).where(_it.c.user_key == key, _it.c.source_chat_id.is_not(None)),
        sa.select(_ep.c.chat_id).where(_ep.c.user_key == key, _ep.c.chat_id.is_not(None)),
        sa.select(_mk.c.mark_key).where(_mk.c.user_key == key),
    ]
    if org_id is not None:
        org = check_org(org_id)
        stmts = [s.where(t.c.org_id == org) for s, t in zip(stmts, (_it, _ep, _mk), strict=True)]
    found: set[str] = set()
    for stmt in stmts[:2]:
        found.update(str(v) for (v,) in conn.execute(stmt.distinct()))
    for (mark,) in conn.execute(stmts[2]):
        if str(mark).startswith("chat:"):
            found.add(str(mark)[len("chat:") :])
    return sorted(found)


def _keys_of(conn: Connection, user_id: str, org_id: str | None) -> UserKeys:
    return user_keys(user_id, user_chat_ids(conn, user_id, org_id=org_id))


@functools.lru_cache(maxsize=1024)
def _stores_stmt(keys: UserKeys) -> sa.Select[Any]:
    """The ``SELECT`` of the stores that may be the user's (built once per user and chat set:
    building its ``OR`` of key rules costs more than running it; statements are immutable)."""
    rule = store_key_rule(_stores.c.store_key, keys)
    return sa.select(_stores.c.store_id, _stores.c.store_key).where(rule).order_by(_stores.c.store_key)


def _stores_of(conn: Connection, keys: UserKeys) -> list[tuple[int, str, str]]:
    found: list[tuple[int, str, str]] = []
    for store_id, key in conn.execute(_stores_stmt(keys)):
        kind = user_store_kind(key, keys)
        if kind is not None:
            found.append((int(store_id), key, kind))
    return found


def user_stores(
    conn: Connection, user_id: str, *, org_id: str | None = None
) -> list[tuple[int, str, str]]:
    """The stores that belong to ``user_id`` (see :mod:`dbmemory.items.user_rows`), as
    ``(store_id, store_key, kind)`` with kind ``profile``, ``items``, ``user``, ``context``,
    ``langgraph`` or (when ``org_id`` names the organisation whose chats count) ``session``,
    ordered by key.

    Raises:
        InvalidScopeError: invalid user or organisation id.
    """
    chats = () if org_id is None else user_chat_ids(conn, user_id, org_id=org_id)
    return _stores_of(conn, user_keys(user_id, chats))


def _audit_store_keys(
    conn: Connection, keys: UserKeys, sharing: Sharing, *, kept_too: bool = True
) -> list[str]:
    """Store keys of the user's stores in the audit trail, stores deleted before included;
    never a session store shared with other users, and (``kept_too`` false) none that
    ``sharing`` keeps."""
    rows = conn.execute(
        sa.select(_ae.c.store_key).where(store_key_rule(_ae.c.store_key, keys)).distinct()
    ).all()
    out = []
    for (k,) in rows:
        kind = user_store_kind(k, keys)
        if kind is None:
            continue
        reason = sharing.reason(k, kind)
        if reason == SHARED_WITH_USERS or (reason is not None and not kept_too):
            continue
        out.append(k)
    return sorted(out)


def _in_chunks(column: Any, values: list[Any]) -> list[Any]:
    return [column.in_(values[i : i + 1000]) for i in range(0, len(values), 1000)]


def _user_events(
    key: str, store_keys: list[str], *, orgs: list[str] | None = None, not_keys: tuple[str, ...] = ()
) -> Any:
    """SQL: the audit events of the user (by ``user_key``, in ``orgs`` when given, of no store
    in ``not_keys``; or by one of ``store_keys``)."""
    own = [_ae.c.user_key == key]
    if orgs is not None:
        own.append(_ae.c.org_id.in_(orgs))
    if not_keys:
        own.append(sa.or_(_ae.c.store_key.is_(None), sa.not_(sa.or_(*_in_chunks(_ae.c.store_key, list(not_keys))))))
    return sa.or_(sa.and_(*own), *_in_chunks(_ae.c.store_key, store_keys))


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _store_files(conn: Connection, store_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        sa.select(
            _files.c.file_path, _files.c.body, _files.c.version_no, _files.c.updated_at, _fr.c.read_at
        )
        .select_from(_files.outerjoin(_fr, _fr.c.file_id == _files.c.file_id))
        .where(_files.c.store_id == store_id)
        .order_by(_files.c.path_hash)
    ).all()
    out = [
        {
            "path": r.file_path, "text": r.body or "", "version": int(r.version_no),
            "updated_at": _iso(r.updated_at), "read_at": _iso(r.read_at),
        }
        for r in rows
    ]
    return sorted(out, key=lambda f: f["path"])


def _marks(conn: Connection, org: str, key: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        sa.select(_mk.c.mark_key, _mk.c.marked_at)
        .where(_mk.c.org_id == org, _mk.c.user_key == key)
        .order_by(_mk.c.mark_key)
    ).all()
    return [{"mark": r.mark_key, "marked_at": _iso(r.marked_at)} for r in rows]


def export_user(
    conn: Connection, user_id: str, *, org_id: str = DEFAULT_ORG, actor: str = "admin"
) -> dict[str, Any]:
    """Everything the package holds about one user (every row of the tables of
    :data:`~dbmemory.items.user_rows.USER_ROWS`), as a JSON-able dict (a data-subject access
    request), and a ``user_export`` audit event in the caller's transaction.

    Returns:
        ``{"format", "user_id", "user_key", "org_id", "exported_at", "profile": [{"store_key",
        "files": [{"path", "text", "version", "updated_at", "read_at"}], "note"}], "items":
        [Item.to_dict()...] (deleted ones too), "episodes": [Episode.to_dict()...] (oldest turn
        first), "stores": [{"store_key", "kind": "user"|"context"|"session"|"langgraph"|"items",
        "files", "note"}], "shared_stores": [{"store_key", "kind": "session", "note"}] (the
        session stores of chats another user is in too: no files, no audit events),
        "other_orgs": [org...], "switches": {"memory_switch_on", "profile_memory_enabled"},
        "marks": [{"mark", "marked_at"}], "audit_events": [AuditEvent.to_dict()...] (oldest
        first)}``. ``note`` is None, or
        :data:`~dbmemory.items.user_share.HELD_IN_OTHER_ORGS` on the organisation-less stores
        (and session stores of chats recorded in those organisations too) while ``other_orgs``
        is not empty: they are exported, but a forget in this organisation keeps them.

    Raises:
        InvalidScopeError: invalid user or organisation id.
    """
    check_arguments(conn=conn, actor=actor)
    org = check_org(org_id)
    key = user_key_of(user_id)
    try:
        keys = _keys_of(conn, user_id, org)
        found = _stores_of(conn, keys)
        sharing = sharing_of(conn, key, org, keys.chats)
        notes = {k: sharing.reason(k, kind) for _, k, kind in found}
        shared = [
            {"store_key": k, "kind": kind, "note": SHARED_WITH_USERS}
            for _, k, kind in found
            if notes[k] == SHARED_WITH_USERS
        ]
        found = [f for f in found if notes[f[1]] != SHARED_WITH_USERS]
        profile = [
            {"store_key": k, "files": _store_files(conn, sid), "note": notes[k]}
            for sid, k, kind in found
            if kind == "profile"
        ]
        others = [
            {"store_key": k, "kind": kind, "files": _store_files(conn, sid), "note": notes[k]}
            for sid, k, kind in found
            if kind != "profile"
        ]
        items = [i.to_dict() for i in list_items(conn, user_id, org_id=org, include_deleted=True)]
        kept = [e.to_dict() for e in list_episodes(conn, user_id, org_id=org, include_expired=True)]
        events = [
            audit.to_event(r).to_dict()
            for r in conn.execute(
                sa.select(_ae)
                .where(_user_events(key, _audit_store_keys(conn, keys, sharing)))
                .order_by(_ae.c.created_at, _ae.c.event_id)
            )
        ]
        switches = {
            "memory_switch_on": get_memory_switch(conn, user_id, org_id=org),
            "profile_memory_enabled": is_user_memory_enabled(conn, user_id),
        }
        marks = _marks(conn, org, key)
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
        "shared_stores": shared,
        "other_orgs": list(sharing.other_orgs),
        "switches": switches,
        "marks": marks,
        "audit_events": events,
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


def _delete_file_reads(conn: Connection, store_ids: list[int]) -> None:
    """Delete the last-read rows of the files of ``store_ids`` (the drop leaves them to the
    expiry's purge otherwise)."""
    for i in range(0, len(store_ids), 1000):
        chunk = store_ids[i : i + 1000]
        conn.execute(
            sa.delete(_fr).where(
                _fr.c.file_id.in_(sa.select(_files.c.file_id).where(_files.c.store_id.in_(chunk)))
            )
        )


def _redact_events(
    conn: Connection, keys: UserKeys, sharing: Sharing, orgs: list[str] | None, kept: tuple[str, ...]
) -> int:
    """Clear the file names of the user's file events (``file_path``; ``detail_text``, which
    holds a rename's target) in ``orgs`` (``None``: every organisation), but not those of the
    stores ``kept``: the number of events redacted."""
    store_keys = _audit_store_keys(conn, keys, sharing, kept_too=False)
    rule = sa.and_(
        _user_events(keys.user_key, store_keys, orgs=orgs, not_keys=kept), _ae.c.file_path.is_not(None)
    )
    return int(
        conn.execute(sa.update(_ae).where(rule).values(file_path=None, detail_text=FORGOTTEN_DETAIL)).rowcount
    )


def _forget_in_org(conn: Connection, org: str, key: str, user_id: str, actor: str, now: dt.datetime) -> list[int]:
    """Delete the user's items, switch, marks and episodes in one organisation: ``[items,
    switches, episodes]`` deleted."""
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
    switches = conn.execute(sa.delete(_sw).where(_sw.c.org_id == org, _sw.c.user_key == key)).rowcount
    conn.execute(sa.delete(_mk).where(_mk.c.org_id == org, _mk.c.user_key == key))
    episodes = delete_episodes(conn, user_id, org_id=org, actor=actor, reason="forget", now=now)
    return [len(ids), int(switches), int(episodes)]


def forget_user(
    conn: Connection, user_id: str, *, org_id: str | None = DEFAULT_ORG, actor: str = "admin"
) -> dict[str, Any]:
    """Delete everything the package holds about one user in the organisation ``org_id``
    (``None``: in every organisation the user has items, episodes, marks or a switch in; every
    table of :data:`~dbmemory.items.user_rows.USER_ROWS`, see the module doc), in the caller's
    transaction. Audit events stay, content-free and redacted (the file names of the user's
    file events cleared): ``store_drop`` per store, ``item_purge`` per item, and one
    ``user_forget`` per organisation with the counts.

    **Nothing of another user or organisation goes** (:mod:`dbmemory.items.user_share`): a
    session store whose chat is recorded for another user too is kept (reason ``shared with
    other users``); when the user still holds items, episodes, marks or a switch in another
    organisation, a forget in one organisation keeps the organisation-less data (the user,
    context, LangGraph, items and profile stores, the session stores of chats recorded in those
    organisations too, the profile opt-out) and names those organisations in ``other_orgs``:
    forget with ``org_id=None`` to delete them too.

    **Nothing derived from before the forget is written after it commits.** An item extraction
    or profile consolidation in flight (its model call running) reads the user's forget mark
    (:func:`dbmemory.profile.optout.forget_mark`, the newest ``user_forget`` event) when it
    starts and again in its write transaction under its lock; this function takes the same
    locks first, in the same order (the switch row of :func:`~dbmemory.items.settings.lock_user`
    of each organisation, then the ``dbm_user_settings`` row of
    :func:`~dbmemory.profile.optout.lock_user_memory_enabled`, each created when missing and
    deleted below), so the write either commits before them and its rows are deleted here, or
    waits and then sees the new ``user_forget`` event and writes nothing. The ``switches``
    count holds only the rows that existed before.

    Returns:
        ``{"items": n, "stores": m, "switches": k, "episodes": e, "events_redacted": r,
        "stores_kept": [{"store_key", "kind", "reason"}], "other_orgs": [org...],
        "org_ids": [org...]}``: what was deleted (the episodes with a content-free
        ``episode_delete`` event), the audit events whose file names were cleared, the user's
        stores kept and why, the other organisations that still hold the user (empty for
        ``org_id=None``) and the organisations forgotten in.

    Raises:
        InvalidScopeError: invalid user or organisation id.
    """
    check_arguments(conn=conn, actor=actor)
    scoped = None if org_id is None else check_org(org_id)
    key = user_key_of(user_id)
    now = utcnow()
    with write_unit(conn, "forgetting a user"):
        orgs = [scoped] if scoped is not None else (user_orgs(conn, key) or [DEFAULT_ORG])
        # the locks the post-turn writes take, in their order, before anything is read: an
        # extraction or consolidation writing now finishes first (and its rows are deleted
        # below), one writing later waits and finds the user_forget event (the forget rule)
        created = 0
        for org in orgs:
            created += _lock_row(
                conn, _sw, sa.and_(_sw.c.org_id == org, _sw.c.user_key == key),
                {"org_id": org, "user_key": key, "memory_on": True, "updated_at": now},
            )
        created_settings = _lock_row(
            conn, _us, _us.c.user_key == key,
            {"user_key": key, "memory_enabled": True, "updated_at": now},
        )
        keys = _keys_of(conn, user_id, scoped)  # before the items, episodes and marks go
        sharing = sharing_of(conn, key, scoped, keys.chats)
        found = _stores_of(conn, keys)
        kept = [(k, kind, sharing.reason(k, kind)) for _, k, kind in found]
        kept = [(k, kind, reason) for k, kind, reason in kept if reason is not None]
        kept_keys = tuple(k for k, _, _ in kept)
        store_ids = [sid for sid, k, _ in found if k not in kept_keys]
        _delete_file_reads(conn, store_ids)
        dropped = drop_stores(conn, store_ids, actor=actor) if store_ids else 0
        # the user's own events of every organisation, but those of the organisations kept
        redacted = _redact_events(conn, keys, sharing, orgs if sharing.other_orgs else None, kept_keys)
        per_org = {org: _forget_in_org(conn, org, key, user_id, actor, now) for org in orgs}
        if not sharing.other_orgs or created_settings:  # the opt-out is organisation-less
            settings = conn.execute(sa.delete(_us).where(_us.c.user_key == key)).rowcount
        else:
            settings = 0
        switches = sum(c[1] for c in per_org.values()) + int(settings) - created - created_settings
        counts: dict[str, Any] = {
            "items": sum(c[0] for c in per_org.values()), "stores": int(dropped), "switches": int(switches),
            "episodes": sum(c[2] for c in per_org.values()), "events_redacted": redacted,
            "stores_kept": [{"store_key": k, "kind": kind, "reason": r} for k, kind, r in kept],
            "other_orgs": list(sharing.other_orgs), "org_ids": list(orgs),
        }
        for n, org in enumerate(orgs):
            stores, sw = (counts["stores"], counts["switches"]) if n == 0 else (0, 0)
            audit.record(
                conn, "user_forget", actor=actor, org_id=org, user_key=key,
                detail=f"{per_org[org][0]} items, {stores} stores, {sw} switches"
                + (f", {len(kept)} stores kept" if kept and n == 0 else ""),
                now=now,
            )
    return counts
