"""The user's items kept per process between turns, validated by a change marker (internal).

A turn reads, in **one** ``SELECT`` (:func:`turn_state_stmt`): the memory switch, the
organisation memory's text, every organisation setting and a *change marker* of the user's
item rows. Only when the marker differs from the cached one are the item rows read again
(:func:`dbmemory.items.turn_memory.load_turn_items`).

The marker is computed over **all** the user's rows (live, expired and soft-deleted alike):
the row count, the sum and the maximum of the item ids, the sum of the versions, the latest
``last_used_at`` and the count of used rows, the latest ``updated_at`` and the sum of the
character counts; the organisation's stored settings are part of it too. Every item write
moves it:

* add: the count and the id sum (and the latest ``updated_at``: the time of the add);
* edit, delete, restore, expiry (Python and SQL jobs): the version sum (each bumps
  ``version_no``);
* purge, clear, forget-user: the count and the id sum;
* marked used (no version): the latest ``last_used_at`` or the count of used rows;
* a retention setting change (which moves ``expires_at`` without a version): the settings.

What the marker does not see is a set of changes that cancel out in every one of these
figures at once, for example rows hard-deleted and as many re-added with the same ids,
versions and lengths at the very same ``updated_at`` (SQLite reuses the largest row id after it
was deleted; the servers never reuse an id; the same time needs an injected clock), or two
different items marked used at exactly the same time by
another process (the recency order of tied items could then lag until the next change). The
turn's post-processing reads the items again after marking them used and extracting
(:func:`dbmemory.agent.item_memory.after_turn`), so the next turn of the user finds them cached.

Expiry needs no marker: the cached rows carry ``expires_at`` and each turn leaves out those
expired at its own ``now``. The marker is read in the caller's transaction, so the turn's
own uncommitted writes are seen, and a rollback changes the marker back, so the next turn
reads again.

Entries are kept per :class:`~sqlalchemy.engine.Engine` object (weakly: a disposed and
collected engine takes its entries with it), then per organisation and user key, bounded to
:data:`MAX_USERS` users per engine (least recently used dropped).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from dbmemory.db.schema import files, stores
from dbmemory.db.schema import items as it
from dbmemory.db.schema import memory_switches as sw
from dbmemory.db.schema import org_settings as os_
from dbmemory.items.org import ORG_MEMORY_PATH
from dbmemory.items.settings import DEFAULTS

__all__ = ["MAX_USERS", "Entry", "turn_state_stmt", "get", "peek", "put", "clear"]

MAX_USERS = 2048
"""Users kept per engine."""


@dataclass(frozen=True)
class Entry:
    """The user's non-deleted item rows read under one marker.

    Attributes:
        marker: the change marker the rows were read under (a tuple).
        items: :class:`~dbmemory.items.turn_memory.TurnItem` rows, oldest first.
        min_expires: the earliest ``expires_at`` among them (None: none expires).
        recent: the same rows most recently used or changed first
            (:func:`dbmemory.items.select.by_recency`).
        pool: the rows prepared for ranking (:class:`dbmemory.items.select.ItemPool`), or None.
        lines: the user's rendered item lines (:data:`dbmemory.items.inject.LineCache`),
            carried over to the next entry of the user for the texts it still holds.
    """

    marker: tuple[Any, ...]
    items: tuple[Any, ...]
    min_expires: Any
    recent: tuple[Any, ...] = ()
    pool: Any = None
    lines: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)


_lock = threading.Lock()
entries: weakref.WeakKeyDictionary[Any, OrderedDict[tuple[str, str], Entry]] = weakref.WeakKeyDictionary()
_STATEMENTS: dict[str, Any] = {}


def turn_state_stmt() -> sa.Select[Any]:
    """The turn's one ``SELECT``: switch, organisation memory text, every setting's stored text
    (in :data:`~dbmemory.items.settings.DEFAULTS` order, NULL when unset) and the item marker.

    Binds ``org_id``, ``user_key`` and ``store_key``. Columns: ``switch`` (NULL: no row, on),
    ``org_body``, ``s_<name>`` per setting, then ``m0`` .. ``m7`` (the item figures of the marker).
    """
    stmt = _STATEMENTS.get("state")
    if stmt is None:
        # constants inlined (setting names are identifiers): fewer parameters to bind per turn
        _ZERO = sa.literal_column("0", sa.Integer())
        org: sa.BindParameter[Any] = sa.bindparam("org_id")
        user: sa.BindParameter[Any] = sa.bindparam("user_key")
        store_key: sa.BindParameter[Any] = sa.bindparam("store_key")
        mine = sa.and_(it.c.org_id == org, it.c.user_key == user)
        marker = (
            sa.select(
                sa.func.count().label("m0"),
                sa.func.coalesce(sa.func.sum(it.c.item_id), _ZERO).label("m1"),
                sa.func.max(it.c.item_id).label("m2"),
                sa.func.coalesce(sa.func.sum(it.c.version_no), _ZERO).label("m3"),
                sa.func.max(it.c.last_used_at).label("m4"),
                sa.func.count(it.c.last_used_at).label("m5"),
                sa.func.max(it.c.updated_at).label("m6"),
                sa.func.coalesce(sa.func.sum(it.c.char_count), _ZERO).label("m7"),
            )
            .where(mine)
            .subquery("m")
        )
        switch = (
            sa.select(sw.c.memory_on).where(sw.c.org_id == org, sw.c.user_key == user).scalar_subquery()
        )
        body = (
            sa.select(files.c.body)
            .select_from(stores.join(files, files.c.store_id == stores.c.store_id))
            .where(stores.c.store_key == store_key, files.c.file_path == ORG_MEMORY_PATH)
            .scalar_subquery()
        )
        settings = [
            sa.select(os_.c.setting_value)
            .where(os_.c.org_id == org, os_.c.setting_name == sa.literal_column(f"'{name}'"))
            .scalar_subquery()
            .label(f"s_{name}")
            for name in DEFAULTS
        ]
        stmt = _STATEMENTS["state"] = sa.select(
            switch.label("switch"), body.label("org_body"), *settings, *marker.c
        ).select_from(marker)
    return stmt


def _users(engine: Any) -> OrderedDict[tuple[str, str], Entry]:
    users = entries.get(engine)
    if users is None:
        users = entries[engine] = OrderedDict()
    return users


def get(engine: Any, org: str, user_key: str, marker: tuple[Any, ...]) -> Entry | None:
    """The entry of (engine, org, user) if it was read under exactly ``marker``, else None."""
    with _lock:
        users = entries.get(engine)
        entry = None if users is None else users.get((org, user_key))
        if entry is None or entry.marker != marker:
            return None
        users.move_to_end((org, user_key))  # type: ignore[union-attr]
        return entry


def peek(engine: Any, org: str, user_key: str) -> Entry | None:
    """The entry of (engine, org, user) whatever its marker (the one a new read replaces), or
    None; its recency in the LRU order is left as it is."""
    with _lock:
        users = entries.get(engine)
        return None if users is None else users.get((org, user_key))


def put(engine: Any, org: str, user_key: str, entry: Entry) -> None:
    """Keep ``entry`` for (engine, org, user), dropping the least recently used users past
    :data:`MAX_USERS`."""
    with _lock:
        users = _users(engine)
        users[(org, user_key)] = entry
        users.move_to_end((org, user_key))
        while len(users) > MAX_USERS:
            users.popitem(last=False)


def clear() -> None:
    """Forget every entry (tests, or after writing item rows behind the package's back)."""
    with _lock:
        entries.clear()
