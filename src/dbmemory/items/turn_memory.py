"""What a turn loads and injects besides the profile: organisation memory and items (issue 9).

:func:`load_turn_items` runs in one database step of the turn (its short transaction, or the
caller's): the memory switch, the organisation's settings, its organisation memory and the user's
live items, all plain ``SELECT`` statements (no lock, no touch). :func:`choose` then selects the
items **outside** any transaction (an embedding model may be called).
:func:`dbmemory.items.inject.memory_sections` renders the blocks.

Items injected are marked used after the turn, by the post-processing, in a short transaction
of its own (:func:`dbmemory.items.store.mark_items_used` given the Engine), never in the turn's
transaction: it holds no lock there.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from dbmemory.items.select import Selection, select_items

__all__ = ["TurnItems", "load_turn_items", "choose"]


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

    Returns:
        A :class:`TurnItems`; with the switch off only ``memory_on=False`` and the settings.
    """
    from dbmemory.items.org import get_org_memory
    from dbmemory.items.settings import get_memory_switch, get_org_settings
    from dbmemory.items.store import list_items

    settings = get_org_settings(conn, org_id)
    if not get_memory_switch(conn, user_id, org_id=org_id):
        return TurnItems(org_id, False, settings)
    return TurnItems(
        org_id,
        True,
        settings,
        org_memory=get_org_memory(conn, org_id),
        items=list_items(conn, user_id, org_id=org_id, now=now),
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
