"""The turn's item memory: organisation memory and memory items around the profile (internal).

:func:`dbmemory.agent.turn.run_turn` and ``arun_turn`` call these helpers (one loop, two
drivers): :func:`load` in a database step before the profile (the memory switch decides whether
anything is loaded at all), :func:`blocks` to build the system-prompt blocks in injection order
(organisation memory, profile, items), and :func:`after_turn` in the post-processing job, after
the profile consolidation: the injected items are marked used in a short transaction of their
own, then the items are extracted from the exchange (:func:`dbmemory.items.extract.extract_items`),
then read again so the next turn finds them cached (:mod:`dbmemory.items.turn_cache`).
Every failure here is logged and counted (``dbmemory_items_failures_total{stage}``), never raised
into the turn: a failed load injects no items and the turn goes on.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Connection, Engine

from dbmemory.items.episodes import record_episode
from dbmemory.items.extract import extract_items
from dbmemory.items.inject import count_item_lines, memory_sections
from dbmemory.items.runtime_metrics import item_metrics
from dbmemory.items.search_inject import search_block
from dbmemory.items.turn_memory import choose, load_turn_items
from dbmemory.items.usage import mark_items_used
from dbmemory.profile.tokens import count_tokens
from dbmemory.store.units import clear_single_unit, mark_single_unit

__all__ = [
    "PROFILE_SHARE", "ITEMS_SHARE", "load", "search", "blocks", "total_budget", "after_turn", "record", "count_failure",
]

logger = logging.getLogger("dbmemory.agent.turn")


def count_failure(stage: str) -> None:
    """Count a swallowed failure of the item memory (best effort)."""
    try:
        item_metrics().failure(stage)
    except Exception:  # metrics are best effort
        logger.debug("could not count an item memory failure", exc_info=True)


def load(conn: Connection, *, org_id: str, user_id: str, now: dt.datetime | None) -> Any:
    """The switch, settings, organisation memory and live items (in a savepoint, so a failed
    read never poisons the caller's transaction)."""
    with conn.begin_nested():
        return load_turn_items(conn, org_id=org_id, user_id=user_id, now=now)


def search(
    conn: Connection, loaded: Any, *, user_id: str, message: str, model: str | None, now: dt.datetime | None
) -> None:
    """Search the user's episodes and files for ``message`` and keep the block on ``loaded``
    (``loaded.searched``), within the organisation's ``search_token_budget``; a failure is
    logged and counted and the turn goes on without it (in a savepoint)."""
    if loaded is None or not loaded.memory_on or not message.strip():
        return
    try:
        with conn.begin_nested():
            loaded.searched = search_block(
                conn, user_id=user_id, message=message, org_id=loaded.org_id, model=model,
                max_tokens=loaded.settings.search_token_budget, now=now,
            )
    except Exception:  # noqa: BLE001 - the turn goes on without the searched block
        logger.warning("searching the user's memory failed; the turn runs without it", exc_info=True)
        count_failure("search")


PROFILE_SHARE = 0.15
"""Most of a turn's total memory budget the profile block may take (``memory_token_budget``)."""

ITEMS_SHARE = 0.10
"""Most of a turn's total memory budget the items block may take."""


def total_budget(loaded: Any, override: int | None = None) -> int | None:
    """The turn's total memory budget in tokens: ``override`` when given, else the
    organisation's ``memory_token_budget`` (None when it is 0: no total)."""
    if override is not None:
        return override
    settings = getattr(loaded, "settings", None)
    value = int(getattr(settings, "memory_token_budget", 0) or 0)
    return value or None


def blocks(
    loaded: Any,
    profile_section: str,
    question: str,
    *,
    model: str,
    timeout: float | None,
    total: int | None = None,
) -> list[str]:
    """The memory blocks of the system prompt in injection order (organisation memory,
    profile, items, then the searched block of :func:`search`); ``[profile_section]`` (or
    nothing) when the items could not be loaded. Records what was injected on ``loaded``.

    With a ``total`` (tokens of the whole memory, blocks joined by a blank line), the blocks
    share it in order: the organisation memory (within its own budget; never cut for the
    others), the profile (already cut by the caller to :data:`PROFILE_SHARE` of it), the items
    (within :data:`ITEMS_SHARE` of it and their own budget), and the searched block takes what
    is left, within its own budget (re-rendered from the same hits,
    :meth:`~dbmemory.items.search_inject.SearchBlock.fitted`); a block with no room is left out.
    """
    if loaded is None or not loaded.memory_on:
        return [profile_section] if profile_section else []
    try:
        selection = choose(loaded, question, timeout=timeout)
        settings = loaded.settings
        items_budget = settings.item_token_budget
        if total is not None:
            items_budget = max(1, min(items_budget, int(total * ITEMS_SHARE)))
        parts, block = memory_sections(
            org_memory=loaded.org_memory,
            profile_section=profile_section,
            items=selection.items,
            model=model,
            org_max_tokens=settings.org_memory_token_budget,
            items_max_tokens=items_budget,
            lines=loaded.lines,
        )
        loaded.injected = block.items
        item_metrics().selection("fallback" if selection.fallback else selection.mode)
        searched = loaded.searched
        if searched is not None and searched.text and total is not None:
            used = count_tokens("\n\n".join(parts), model) + (2 if parts else 0)
            searched = loaded.searched = searched.fitted(total - used, model)
        if searched is not None and searched.text:
            parts.append(searched.text)
        return parts
    except Exception:  # noqa: BLE001 - the turn goes on with the profile alone
        logger.warning("selecting memory items failed; the turn runs without them", exc_info=True)
        count_failure("load")
        return [profile_section] if profile_section else []


def after_turn(
    engine: Engine,
    loaded: Any,
    *,
    user_id: str,
    chat_id: str | None,
    user_message: str,
    assistant_message: str,
    complete: Callable[..., Any],
    model: str,
    now: dt.datetime | None,
    timeout: float | None,
    profile_config: Any,
    skip_window: bool = True,
    earlier_messages: Any = (),
    keep_episode: bool = True,
) -> Any:
    """Keep the exchange as an episode (``keep_episode``, :func:`record`), mark the injected
    items used, then extract items from the exchange; the
    :class:`~dbmemory.items.extract.ExtractionResult`, or None when the switch is off or the
    items could not be loaded. Never raises."""
    if loaded is None or not loaded.memory_on:
        return None
    if keep_episode:
        record(engine, loaded, user_id=user_id, chat_id=chat_id, user_message=user_message,
               assistant_message=assistant_message, now=now)
    try:
        if loaded.injected:
            mark_items_used(engine, [i.item_id for i in loaded.injected], now=now, settings=loaded.settings,
                            user_id=user_id)
    except Exception:  # noqa: BLE001
        logger.warning("marking memory items used failed", exc_info=True)
        count_failure("mark_used")
    result = extract_items(
        engine,
        org_id=loaded.org_id,
        user_id=user_id,
        chat_id=chat_id,
        user_message=user_message,
        assistant_message=assistant_message,
        complete=complete,
        model=model,
        now=now,
        timeout=timeout if timeout is not None else 60.0,
        profile_config=profile_config,
        skip_window=skip_window,
        earlier_messages=tuple(earlier_messages)[-10:],
    )
    _rewarm(engine, loaded.org_id, user_id, now, model)
    return result


def record(
    engine: Engine,
    loaded: Any,
    *,
    user_id: str,
    chat_id: str | None,
    user_message: str,
    assistant_message: str,
    now: dt.datetime | None,
) -> int | None:
    """Keep the exchange as an episode (:func:`dbmemory.items.episodes.record_episode`, its
    own short transaction; the switches are read again there, so an opt-out committed during
    the turn is obeyed). Returns the episode id, or None; never raises."""
    if loaded is None or not loaded.memory_on:
        return None
    try:
        with engine.connect() as conn, conn.begin() as transaction:
            mark_single_unit(conn, transaction)  # one INSERT: no savepoint around it
            try:
                return record_episode(
                    conn, user_id, user_message, assistant_message, org_id=loaded.org_id,
                    chat_id=chat_id, turn_at=now, retention_days=loaded.settings.episode_retention_days,
                )
            finally:
                clear_single_unit(conn)
    except Exception:  # noqa: BLE001 - the answer is given; the episode is lost, not the turn
        logger.warning("keeping the conversation episode failed", exc_info=True)
        count_failure("episode")
        return None


def _rewarm(engine: Engine, org_id: str, user_id: str, now: dt.datetime | None, model: str | None = None) -> None:
    """Read the user's items again after the post-processing changed them (marked used,
    extracted), so the next turn finds them cached (:mod:`dbmemory.items.turn_cache`), and
    render and count the lines of those not counted yet for ``model``
    (:func:`dbmemory.items.inject.count_item_lines`), so the next turn's rendering counts none."""
    try:
        with engine.connect() as conn, conn.begin():
            loaded = load_turn_items(conn, org_id=org_id, user_id=user_id, now=now)
        if loaded.memory_on and loaded.lines is not None:
            count_item_lines(loaded.items, model=model, lines=loaded.lines)
    except Exception:  # noqa: BLE001 - a cold cache only costs the next turn a read
        logger.debug("re-reading memory items after the turn failed", exc_info=True)
