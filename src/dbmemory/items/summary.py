"""The profile summary: memory items folded into the user's one profile.

When ``items per profile summary`` (default 10) live items were added or changed since the last
fold (the ``summary`` mark in ``dbm_item_marks``), :func:`fold_items` hands them to the profile's
own rewrite path, :class:`dbmemory.profile.UserMemoryPostprocessor` (gate off): the rewrite
prompt, the mandatory scrub, the deterministic detectors, the budget and the compare-and-set
write on the profile's version all apply exactly as after a turn, so each user still has exactly
one profile and a fold computed from an old profile never overwrites a newer one (it re-runs
once on the newer profile, then gives up with ``conflict``).

**Fold before expiry**: an auto item is also folded, whatever the count, when it is due: its
``expires_at`` is at most ``fold_window_days`` (default 7; 0 turns this off) after the turn and
it is not folded yet (changed after the mark; an item folded and not changed since is folded).
The fold then takes every item changed since the mark, as a forced fold does, so what an
auto item says reaches the permanent profile before the expiry removes it.

The mark moves to the newest ``updated_at`` among the folded items only when the consolidation
finished without error (``updated``, ``unchanged`` or ``noop``), so items changed during the fold
are folded next time, and a failed fold is retried on the next turn. Failures are logged and
counted, never raised.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dbmemory.core.clock import utcnow
from dbmemory.items import runtime_data as data
from dbmemory.items.runtime_metrics import item_metrics
from dbmemory.profile.config import UserMemoryConfig
from dbmemory.profile.consolidate import UserMemoryPostprocessor
from dbmemory.profile.load import load_user_memory

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["fold_items", "fold_message", "FOLD_HEADER"]

log = logging.getLogger(__name__)

FOLD_HEADER = (
    "Facts noted about me in earlier conversations (memory items); keep what belongs in my "
    "profile:"
)
"""First line of the exchange a fold hands to the profile rewrite."""

_DONE = ("updated", "unchanged", "noop")


def fold_message(texts: Sequence[str]) -> str:
    """The "user message" of a fold: :data:`FOLD_HEADER` and one bullet per item text."""
    return FOLD_HEADER + "\n" + "\n".join(f"- {' '.join(t.split())}" for t in texts)


def _due(pending: Sequence[Any], window_days: int, now: dt.datetime | None) -> bool:
    """Whether an auto item among ``pending`` (not folded yet) expires within the window."""
    if window_days <= 0:
        return False
    until = (now or utcnow()) + dt.timedelta(days=window_days)
    return any(
        i.kind == "auto" and i.expires_at is not None and _utc(i.expires_at) <= until for i in pending
    )


def _utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


def fold_items(
    engine: Engine,
    *,
    org_id: str,
    user_id: str,
    complete: Callable[..., Any],
    model: str,
    config: Any = None,
    now: dt.datetime | None = None,
    timeout: float | None = 60.0,
    metrics: Any = None,
    force: bool = False,
) -> str | None:
    """Fold the items changed since the last fold into the profile when enough accumulated.

    Args:
        engine: the database (short transactions of its own; none during a model call).
        org_id: the organisation (its ``items per summary`` setting applies).
        user_id: the user.
        complete: the model call.
        model: the turn's model (the profile's effective model wins, as after a turn).
        config: the :class:`~dbmemory.profile.config.UserMemoryConfig`; None = defaults.
        now: the time stamped on the profile rewrite; None = the clock.
        timeout: seconds per model call.
        metrics: the :class:`~dbmemory.profile.metrics.ProfileMetrics` to count on.
        force: fold whatever changed, even fewer than the setting (at least one item).
            Without it a fold also runs when an unfolded auto item is due (module doc).

    Returns:
        The consolidation outcome (``"updated"``, ``"noop"``, ...) when a fold ran, None when
        too few items changed and none is due, or ``"error"`` when it failed before the consolidation.
    """
    counters = item_metrics(metrics)
    try:
        cfg = config if config is not None else UserMemoryConfig()
        cfg = cfg.model_copy(update={"gate_enabled": False})
        use_model = cfg.effective_model(model) or model
        with engine.begin() as conn:
            settings = data.load_settings(conn, org_id)
            pending = data.items_since_fold(conn, org_id, user_id, now=now)
            due = _due(pending, settings.fold_window_days, now)
            if not pending or (len(pending) < settings.summary_every_items and not force and not due):
                return None
            state = load_user_memory(conn, user_id, config=cfg, model=use_model)
        fixed = now
        kwargs: dict[str, Any] = {"complete": complete, "actor": "items summary", "timeout": timeout}
        if fixed is not None:
            kwargs["now"] = lambda: fixed
        processor = UserMemoryPostprocessor(engine, cfg, use_model, user_id, state, **kwargs)
        outcome = processor.run(fold_message([str(i.text) for i in pending]), "").outcome
        counters.summary(outcome)
        if outcome in _DONE:
            newest = max(data.changed_at(i) for i in pending)
            with engine.begin() as conn:
                data.set_fold_mark(conn, org_id, user_id, newest)
        return outcome
    except Exception as exc:  # noqa: BLE001 - never raised into the turn
        log.warning("folding memory items into the profile failed: %s", type(exc).__name__, exc_info=True)
        counters.failure("summary")
        counters.summary("error")
        return "error"
