"""What a turn loads and injects besides the profile: organisation memory and items.

:func:`load_turn_items` runs in one database step of the turn (its short transaction, or the
caller's): the memory switch, the organisation's settings, its organisation memory and the user's
live items, all plain ``SELECT`` statements (no lock, no touch). :func:`choose` then selects the
items **outside** any transaction (an embedding model may be called).
:func:`dbmemory.items.inject.memory_sections` renders the blocks.

Items injected are marked used after the turn, by the post-processing, in a short transaction
of its own (:func:`dbmemory.items.usage.mark_items_used` given the Engine), never in the turn's
transaction: it holds no lock there.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

import sqlalchemy as sa

from dbmemory.items.select import Selection, select_items

__all__ = ["TurnItems", "TurnItem", "load_turn_items", "choose", "turn_items_stmt", "org_memory_stmt"]


@dataclass(frozen=True)
class TurnItem:
    """The columns of a live item a turn needs (a lean row: no text hash, no retention data).

    Attributes:
        item_id, text, kind, version: as :class:`dbmemory.items.Item`.
        updated_at, last_used_at: UTC (``last_used_at`` None: never injected); ``updated_at``
            is never before the creation, so recency needs no ``created_at``.
    """

    item_id: int
    text: str
    kind: str
    version: int
    updated_at: Any
    last_used_at: Any


_STATEMENTS: dict[str, Any] = {}


def turn_items_stmt() -> sa.Select[Any]:
    """``SELECT`` of a user's live items with the columns of :class:`TurnItem`, oldest first;
    binds ``org_id``, ``user_key`` and ``now`` (built once per process)."""
    stmt = _STATEMENTS.get("items")
    if stmt is None:
        from dbmemory.db.schema import items as it
        from dbmemory.items.store import live_rule

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
        from dbmemory.db.schema import files, stores
        from dbmemory.items.org import ORG_MEMORY_PATH

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
        selection: the chosen items (after :func:`choose`).
        injected: the items that fitted the budget and went into the prompt.
    """

    org_id: str
    memory_on: bool
    settings: Any = None
    org_memory: str = ""
    items: list[Any] = field(default_factory=list)
    selection: Selection | None = None
    injected: tuple[Any, ...] = ()


def load_turn_items(
    conn: Connection, *, org_id: str, user_id: str, now: dt.datetime | None = None
) -> TurnItems:
    """Read the switch, settings, organisation memory and live items (caller's transaction).

    Four ``SELECT`` statements: settings, switch, organisation memory, items (lean rows,
    :class:`TurnItem`).

    Returns:
        A :class:`TurnItems`; with the switch off only ``memory_on=False`` and the settings.
    """
    from dbmemory.items.model import check_org, user_key_of
    from dbmemory.items.settings import get_memory_switch, get_org_settings

    org = check_org(org_id)
    settings = get_org_settings(conn, org)
    if not get_memory_switch(conn, user_id, org_id=org):
        return TurnItems(org, False, settings)
    when = now or dt.datetime.now(dt.timezone.utc)
    from dbmemory.items.org import org_memory_store_key

    body = conn.execute(org_memory_stmt(), {"store_key": org_memory_store_key(org)}).scalar()
    rows = conn.execute(turn_items_stmt(), {"org_id": org, "user_key": user_key_of(user_id), "now": when}).all()
    return TurnItems(
        org,
        True,
        settings,
        org_memory=body or "",
        items=[TurnItem(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5]) for r in rows],
    )


def choose(loaded: TurnItems, question: str, *, timeout: float | None = None) -> Selection:
    """Select the items for ``question`` with the organisation's threshold, top-k and embedding
    model (:func:`dbmemory.items.select.select_items`); stored on ``loaded.selection``."""
    settings = loaded.settings
    selection = select_items(
        loaded.items,
        question,
        threshold=settings.selection_threshold,
        top_k=settings.top_k,
        embedding_model=settings.embedding_model or None,
        timeout=timeout,
    )
    loaded.selection = selection
    return selection
