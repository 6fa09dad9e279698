"""What a turn loads and injects besides the profile: organisation memory and items.

:func:`load_turn_items` runs in one database step of the turn (its short transaction, or the
caller's): the memory switch, the organisation's settings, its organisation memory and the user's
live items, plain ``SELECT`` statements (no lock, no touch): one for all but the items, and one
for the item rows only when they changed since this process last read them
(:mod:`dbmemory.items.turn_cache`). :func:`choose` then selects the
items **outside** any transaction (an embedding model may be called).
:func:`dbmemory.items.inject.memory_sections` renders the blocks.

Items injected are marked used after the turn, by the post-processing, in a short transaction
of its own (:func:`dbmemory.items.usage.mark_items_used` given the Engine), never in the turn's
transaction: it holds no lock there.
"""

from __future__ import annotations

import datetime as dt
import operator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core.arguments import check_arguments
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.schema import files, stores
from dbmemory.db.schema import items as it
from dbmemory.items import turn_cache
from dbmemory.items.model import check_org, user_key_of
from dbmemory.items.org import ORG_MEMORY_PATH, org_memory_store_key
from dbmemory.items.select import ItemPool, Selection, select_items
from dbmemory.items.settings import DEFAULTS, OrgSettings, from_text
from dbmemory.items.store import live_rule

__all__ = [
    "TurnItems", "TurnItem", "load_turn_items", "choose", "turn_items_stmt", "turn_rows_stmt", "org_memory_stmt",
]


@dataclass(frozen=True)
class TurnItem:
    """The columns of a live item a turn needs (a lean row: no text hash, no retention data).

    Attributes:
        item_id, text, kind, version: as :class:`dbmemory.items.Item`.
        updated_at, last_used_at: UTC (``last_used_at`` None: never injected); ``updated_at``
            is never before the creation, so recency needs no ``created_at``.
        expires_at: UTC, None when it never expires.
    """

    item_id: int
    text: str
    kind: str
    version: int
    updated_at: Any
    last_used_at: Any
    expires_at: Any = None


_STATEMENTS: dict[str, Any] = {}


def turn_items_stmt() -> sa.Select[Any]:
    """``SELECT`` of a user's live items with the columns of :class:`TurnItem`, oldest first;
    binds ``org_id``, ``user_key`` and ``now`` (built once per process)."""
    stmt = _STATEMENTS.get("items")
    if stmt is None:
        stmt = _STATEMENTS["items"] = (
            sa.select(
                it.c.item_id, it.c.item_text, it.c.item_kind, it.c.version_no,
                it.c.updated_at, it.c.last_used_at,
            )
            .where(
                it.c.org_id == sa.bindparam("org_id"),
                it.c.user_key == sa.bindparam("user_key"),
                live_rule(sa.bindparam("now", type_=it.c.created_at.type)),
            )
            .order_by(it.c.created_at, it.c.item_id)
        )
    return stmt


def org_memory_stmt() -> sa.Select[Any]:
    """``SELECT`` of an organisation memory's text (no version, no token count); binds
    ``store_key`` (:func:`dbmemory.items.org.org_memory_store_key`)."""
    stmt = _STATEMENTS.get("org")
    if stmt is None:
        stmt = _STATEMENTS["org"] = (
            sa.select(files.c.body)
            .select_from(stores.join(files, files.c.store_id == stores.c.store_id))
            .where(stores.c.store_key == sa.bindparam("store_key"), files.c.file_path == ORG_MEMORY_PATH)
        )
    return stmt


@dataclass
class TurnItems:
    """The item memory of one turn.

    Attributes:
        org_id: the organisation.
        memory_on: the user's memory switch; off: nothing injected, no extraction.
        settings: the organisation's :class:`~dbmemory.items.settings.OrgSettings`.
        org_memory: the organisation memory text (``""`` when none).
        items: the user's live items.
        recent: the same items most recently used or changed first, or None (then sorted by
            :func:`choose`).
        lines: the user's rendered item lines (:data:`dbmemory.items.inject.LineCache`, kept
            with the cached rows; pass it to :func:`~dbmemory.items.inject.memory_sections`),
            or None.
        pool: ``items`` prepared for ranking (:class:`~dbmemory.items.select.ItemPool`, kept
            with the cached rows), or None (then built by :func:`choose`).
        selection: the chosen items (after :func:`choose`).
        injected: the items that fitted the budget and went into the prompt.
        searched: the searched block of the turn
            (:class:`~dbmemory.items.search_inject.SearchBlock`), or None when not searched.
    """

    org_id: str
    memory_on: bool
    settings: Any = None
    org_memory: str = ""
    items: list[Any] = field(default_factory=list)
    recent: list[Any] | None = None
    pool: ItemPool | None = None
    lines: dict[Any, Any] | None = None
    selection: Selection | None = None
    injected: tuple[Any, ...] = ()
    searched: Any = None


def load_turn_items(
    conn: Connection, *, org_id: str, user_id: str, now: dt.datetime | None = None
) -> TurnItems:
    """Read the switch, settings, organisation memory and live items (caller's transaction).

    One ``SELECT`` reads the switch, the organisation memory, the settings and the change
    marker of the user's items (:func:`dbmemory.items.turn_cache.turn_state_stmt`); a second
    one reads the item rows (lean, :class:`TurnItem`) only when the marker differs from the one
    they were last read under in this process for this engine (:mod:`dbmemory.items.turn_cache`).
    Items expired at ``now`` are left out either way.

    Returns:
        A :class:`TurnItems`; with the switch off only ``memory_on=False`` and the settings.

    Raises:
        InvalidScopeError: invalid user or organisation id.
        StorageError: the database failed (``dbmemory db upgrade`` missing?).
    """
    check_arguments(conn=conn)
    org = check_org(org_id)
    key = user_key_of(user_id)
    params = {"org_id": org, "user_key": key, "store_key": org_memory_store_key(org)}
    try:
        row = conn.execute(turn_cache.turn_state_stmt(), params).one()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading the memory items of a turn") from exc
    values = dict(DEFAULTS)
    for name, text in zip(DEFAULTS, row[2 : 2 + len(DEFAULTS)], strict=False):
        if text is not None:
            values[name] = from_text(name, text)
    settings = OrgSettings(org_id=org, **values)
    if row[0] is not None and not bool(row[0]):
        return TurnItems(org, False, settings)
    marker = tuple(row[2:])  # the settings' texts, then the item figures
    engine = conn.engine
    entry = turn_cache.get(engine, org, key, marker)
    if entry is None:
        try:
            rows = conn.execute(turn_rows_stmt(), params).all()
        except sa.exc.SQLAlchemyError as exc:
            raise translate_db_error(exc, "reading the memory items of a turn") from exc
        cached = tuple(TurnItem(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5], r[6]) for r in rows)
        expiring = [i.expires_at for i in cached if i.expires_at is not None]
        pool = ItemPool(cached)
        entry = turn_cache.Entry(
            marker, cached, min(expiring, key=_aware) if expiring else None, pool.recent, pool,
            _carried_lines(turn_cache.peek(engine, org, key), cached),
        )
        turn_cache.put(engine, org, key, entry)
    when = _aware(now or dt.datetime.now(dt.timezone.utc))
    if entry.min_expires is None or _aware(entry.min_expires) > when:
        live, recent, pool = list(entry.items), list(entry.recent), entry.pool
    else:
        def alive(i: TurnItem) -> bool:
            return i.expires_at is None or _aware(i.expires_at) > when

        live, recent = [i for i in entry.items if alive(i)], [i for i in entry.recent if alive(i)]
        pool = ItemPool(live, recent)
    return TurnItems(
        org, True, settings, org_memory=row[1] or "", items=live, recent=recent, pool=pool, lines=entry.lines
    )


def _carried_lines(old: Any, rows: tuple[TurnItem, ...]) -> dict[Any, Any]:
    """The rendered lines of ``old`` (the entry being replaced) for the texts ``rows`` still
    hold: an unchanged item is not rendered and counted again after a re-read."""
    if old is None or not old.lines:
        return {}
    keep = {(i.text, i.kind) for i in rows}
    return {k: v for k, v in old.lines.items() if (k[0], k[1]) in keep}


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


def turn_rows_stmt() -> sa.Select[Any]:
    """``SELECT`` of a user's non-deleted items (expired ones included: the caller filters by
    its ``now``) with the columns of :class:`TurnItem`, oldest first; binds ``org_id`` and
    ``user_key`` (built once per process)."""
    stmt = _STATEMENTS.get("rows")
    if stmt is None:
        stmt = _STATEMENTS["rows"] = (
            sa.select(
                it.c.item_id, it.c.item_text, it.c.item_kind, it.c.version_no,
                it.c.updated_at, it.c.last_used_at, it.c.expires_at,
            )
            .where(
                it.c.org_id == sa.bindparam("org_id"),
                it.c.user_key == sa.bindparam("user_key"),
                it.c.deleted_at.is_(None),
            )
            .order_by(it.c.created_at, it.c.item_id)
        )
    return stmt


def choose(loaded: TurnItems, question: str, *, timeout: float | None = None) -> Selection:
    """Select the items for ``question`` with the organisation's threshold, top-k and embedding
    model (:func:`dbmemory.items.select.select_items`); stored on ``loaded.selection``."""
    settings = loaded.settings
    pool = loaded.pool
    if pool is not None and (
        len(pool) != len(loaded.items) or not all(map(operator.is_, pool.items, loaded.items))
    ):
        pool = None  # the caller changed ``items``: rank what it holds now
    selection = select_items(
        loaded.items if pool is None else pool,
        question,
        threshold=settings.selection_threshold,
        top_k=settings.top_k,
        embedding_model=settings.embedding_model or None,
        timeout=timeout,
        recent=loaded.recent if pool is None else None,
    )
    loaded.selection = selection
    return selection
