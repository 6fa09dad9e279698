"""What a turn injects from memory: the loads and the assembly, one implementation.

:func:`dbmemory.agent.turn.run_turn` (both drivers) calls :func:`load_items` and
:func:`load_profile` in its database steps and :func:`memory_blocks` to assemble the system
prompt's memory blocks; :func:`injected_memory` runs the same three on one connection and
returns the text, so the evaluation (:mod:`dbmemory.agent.eval`) scores exactly what a turn
would inject for a question. The order of the blocks is the turn's: organisation memory, the
profile ("What I know about you"), the selected memory items, then the searched block
(episodes and file snippets for the message within ``search_token_budget``,
:func:`search_memory_block`).

A new source of injected memory (episodes, file snippets) is added here: its read in a loader
next to :func:`load_items` (a database step of the turn), its block in :func:`memory_blocks`;
the turn and the evaluation then both see it.

Example:
    >>> with engine.connect() as conn:                                       # doctest: +SKIP
    ...     memory = injected_memory(conn, user_id="u-1", question="Where do I live?", model="gpt-4o-mini")
    >>> memory.text.startswith("## What I know about you")                   # doctest: +SKIP
    True
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection, Engine

from dbmemory.agent import item_memory
from dbmemory.profile.config import UserMemoryConfig
from dbmemory.profile.load import load_user_memory, memory_prompt_section

__all__ = [
    "LOAD_FAILED_NOTE",
    "InjectedMemory",
    "load_items",
    "load_profile",
    "memory_blocks",
    "search_memory_block",
    "injected_memory",
]

LOAD_FAILED_NOTE = (
    "## What I know about you\n\n"
    "(The memory of this user could not be loaded for this turn. That is not an empty memory: do "
    "not tell the user that you know nothing about them.)"
)
"""Put in the system prompt instead of the profile when loading it failed."""


def load_items(conn: Connection, *, org_id: str, user_id: str, now: dt.datetime | None) -> Any:
    """The memory switch, the organisation's settings and memory, and the user's live items at
    ``now`` (a :class:`dbmemory.items.turn_memory.TurnItems`), read in a savepoint.

    Raises:
        InvalidScopeError: invalid user or organisation id.
        StorageError: the database failed.
    """
    return item_memory.load(conn, org_id=org_id, user_id=user_id, now=now)


def search_memory_block(
    conn: Connection, items: Any, *, user_id: str, message: str, model: str | None, now: dt.datetime | None
) -> None:
    """Search the user's episodes and files for ``message`` and keep the block on ``items``
    (``items.searched``, assembled last by :func:`memory_blocks`); a failure is logged and the
    turn goes on without it (:func:`dbmemory.agent.item_memory.search`)."""
    item_memory.search(conn, items, user_id=user_id, message=message, model=model, now=now)


def load_profile(
    conn: Connection, user_id: str, *, config: UserMemoryConfig, model: str, step_logger: Any = None
) -> Any:
    """The user's profile within its budget (a :class:`dbmemory.profile.load.UserMemoryState`),
    or None (no profile yet, or opted out); read in a savepoint so a failed read does not
    poison the caller's transaction.

    Raises:
        StorageError: the database failed.
    """
    with conn.begin_nested():
        return load_user_memory(conn, user_id, config=config, model=model, step_logger=step_logger)


def memory_blocks(
    items: Any,
    state: Any,
    question: str,
    *,
    model: str,
    timeout: float | None,
    load_failed: bool = False,
    max_tokens: int | None = None,
) -> list[str]:
    """The memory blocks of the system prompt, in injection order (empty ones left out).

    Args:
        items: what :func:`load_items` returned, or None (item memory off or its load failed).
        state: what :func:`load_profile` returned, or None.
        question: the user's message of the turn (selects the items).
        model: the tokenizer's model (the profile's effective model).
        timeout: seconds for an embedding call of the selection, or None.
        load_failed: the profile could not be loaded (:data:`LOAD_FAILED_NOTE` stands in for it).
        max_tokens: the whole memory's budget in tokens; None: the organisation's
            ``memory_token_budget`` (0 there: no total). The profile gets at most
            :data:`~dbmemory.agent.item_memory.PROFILE_SHARE` of it, the items
            :data:`~dbmemory.agent.item_memory.ITEMS_SHARE`, the searched block the rest
            (:func:`dbmemory.agent.item_memory.blocks`).

    Returns:
        The Markdown blocks; records the injected items on ``items.injected``.
    """
    total = item_memory.total_budget(items, max_tokens)
    if state is not None:
        share = None if total is None else int(total * item_memory.PROFILE_SHARE)
        profile_section = memory_prompt_section(state, max_tokens=share, model=model)
    else:
        profile_section = LOAD_FAILED_NOTE if load_failed else ""
    if items is not None:
        return item_memory.blocks(items, profile_section, question, model=model, timeout=timeout, total=total)
    return [profile_section] if profile_section else []


@dataclass(frozen=True)
class InjectedMemory:
    """The memory one turn would inject for a question.

    Attributes:
        text: the blocks joined by a blank line, as they go into the system prompt (``""``:
            nothing injected).
        blocks: the blocks in order.
        items: the memory items injected (``TurnItem`` each), in block order.
        live_items: the user's live items at the time (those the selection chose from).
        profile_loaded: whether a profile was injected.
        seconds: wall time of the loads, the search and the assembly.
        search_tokens: tokens of the searched block (0: none).
        sources: where each searched snippet came from (``[{"source", "ref", "label"}]``).
        found: hits the search returned before the budget cut them.
        memory_on: False when the memory switch or the opt-out kept everything out.
    """

    text: str
    blocks: tuple[str, ...]
    items: tuple[Any, ...]
    live_items: int
    profile_loaded: bool
    seconds: float
    search_tokens: int = 0
    sources: tuple[dict[str, Any], ...] = ()
    found: int = 0
    memory_on: bool = True


def injected_memory(
    conn: Connection | Engine,
    *,
    user_id: str,
    question: str,
    model: str,
    org_id: str = "default",
    now: dt.datetime | None = None,
    config: UserMemoryConfig | None = None,
    timeout: float | None = None,
    search: bool = True,
    max_tokens: int | None = None,
) -> InjectedMemory:
    """What a turn of ``user_id`` asking ``question`` at ``now`` would inject from memory.

    The same loads, search and assembly as :func:`dbmemory.agent.turn.run_turn` (item memory,
    profile and ``memory_search`` on, the memory switch honoured); reads only, in the caller's
    transaction (each load in a savepoint); marks nothing used.

    Args:
        conn: a SQLAlchemy connection, or an Engine (a connection of its own, rolled back).
        user_id: whose memory.
        question: the user's message.
        model: the model whose tokenizer fits the budgets.
        org_id: the user's organisation.
        now: the turn's time (items and episodes expired by then are left out); None: the clock.
        config: the profile settings (default :class:`UserMemoryConfig`).
        timeout: seconds for an embedding call of the selection.
        search: include the searched block (``TurnConfig.memory_search``).
        max_tokens: the whole memory's budget in tokens (see :func:`memory_blocks`); None: the
            organisation's ``memory_token_budget``.

    Returns:
        An :class:`InjectedMemory`.

    Raises:
        InvalidScopeError: invalid user or organisation id.
        StorageError: the database failed.
    """
    if isinstance(conn, Engine):
        with conn.connect() as own:
            try:
                return injected_memory(
                    own, user_id=user_id, question=question, model=model, org_id=org_id, now=now,
                    config=config, timeout=timeout, search=search, max_tokens=max_tokens,
                )
            finally:
                own.rollback()
    started = time.perf_counter()
    cfg = config if config is not None else UserMemoryConfig()
    memory_model = cfg.effective_model(model) or model
    items = load_items(conn, org_id=org_id, user_id=user_id, now=now)
    if not items.memory_on:
        return InjectedMemory("", (), (), len(items.items), False, time.perf_counter() - started, memory_on=False)
    if search:
        search_memory_block(conn, items, user_id=user_id, message=question, model=memory_model, now=now)
    state = load_profile(conn, user_id, config=cfg, model=memory_model)
    blocks = memory_blocks(items, state, question, model=memory_model, timeout=timeout, max_tokens=max_tokens)
    seconds = time.perf_counter() - started
    searched = getattr(items, "searched", None)
    return InjectedMemory(
        text="\n\n".join(blocks),
        blocks=tuple(blocks),
        items=tuple(items.injected),
        live_items=len(items.items),
        profile_loaded=state is not None and bool(state.body.strip()),
        seconds=seconds,
        search_tokens=searched.tokens if searched is not None else 0,
        sources=tuple(searched.sources()) if searched is not None else (),
        found=searched.found if searched is not None else 0,
    )
