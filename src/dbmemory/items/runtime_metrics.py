"""Prometheus metrics of item extraction, the profile summary fold and selection.

Registered on the profile's registry (:func:`dbmemory.profile.metrics.default_metrics`, or the
registry of the :class:`~dbmemory.profile.metrics.ProfileMetrics` passed), namespace
``dbmemory``, subsystem ``items``. Every label is a closed set (anything else becomes
``"other"``); no label holds a user, an organisation or item text.

* ``dbmemory_items_extraction_total{outcome}``: outcome in :data:`EXTRACTION_OUTCOMES`
* ``dbmemory_items_extraction_duration_seconds``
* ``dbmemory_items_written_total{action}``: ``added``, ``updated``, ``same``, ``evicted``
* ``dbmemory_items_dropped_total{reason}``: candidates not written, reason in :data:`DROP_REASONS`
* ``dbmemory_items_update_refused_total{reason}``: ``update`` decisions not written, reason in
  :data:`REFUSED_UPDATE_REASONS` (``manual_item``: an extraction never rewrites a manual item;
  the fact is added as an auto item beside it, counted in ``written{action="added"}``)
* ``dbmemory_items_model_call_errors_total{purpose}``: purpose ``extract``, ``scrub``,
  ``decide``, ``embed``
* ``dbmemory_items_summary_total{outcome}``: profile summary folds by the consolidation outcome
* ``dbmemory_items_selection_total{mode}``: ``none``, ``all``, ``ranked``, ``fallback``
* ``dbmemory_items_failures_total{stage}``: failures logged and swallowed (``extract``,
  ``summary``, ``mark_used``, ``load``)
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, Counter, Histogram

from dbmemory.items.changes import MANUAL_ITEM
from dbmemory.profile.metrics import MetricOptions, default_metrics

__all__ = [
    "ItemMetrics",
    "item_metrics",
    "EXTRACTION_OUTCOMES",
    "DROP_REASONS",
    "WRITE_ACTIONS",
    "REFUSED_UPDATE_REASONS",
]

EXTRACTION_OUTCOMES = (
    "written", "nothing", "skipped", "disabled", "rejected", "scrub_veto", "error",
)
DROP_REASONS = (
    "low_confidence", "invalid", "scrub", "scrub_veto", "detector", "undecided",
    "decide_error", "conflict", "limit",
)
WRITE_ACTIONS = ("added", "updated", "same", "evicted")
REFUSED_UPDATE_REASONS = (MANUAL_ITEM,)
_PURPOSES = ("extract", "scrub", "decide", "embed")
_SUMMARY = ("noop", "unchanged", "updated", "rejected", "scrub_veto", "conflict", "disabled", "error")
_MODES = ("none", "all", "ranked", "fallback")
_STAGES = ("extract", "summary", "mark_used", "load")
_SECONDS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def _closed(value: str, allowed: tuple[str, ...]) -> str:
    return value if value in allowed else "other"


class ItemMetrics:
    """The item metrics on one registry (create through :func:`item_metrics`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        common = MetricOptions(namespace="dbmemory", subsystem="items", registry=registry)
        self.extraction_total = Counter("extraction", "Item extractions by outcome.", ["outcome"], **common)
        self.extraction_seconds = Histogram(
            "extraction_duration_seconds", "Time of one item extraction.", buckets=_SECONDS, **common
        )
        self.written_total = Counter("written", "Item writes by extraction, by action.", ["action"], **common)
        self.dropped_total = Counter("dropped", "Candidate facts not written, by reason.", ["reason"], **common)
        self.update_refused_total = Counter(
            "update_refused", "Update decisions of an extraction not written, by reason.",
            ["reason"], **common,
        )
        self.model_errors = Counter(
            "model_call_errors", "Failed model calls of the item pipeline.", ["purpose"], **common
        )
        self.summary_total = Counter("summary", "Profile summary folds by outcome.", ["outcome"], **common)
        self.selection_total = Counter("selection", "Item selections by mode.", ["mode"], **common)
        self.failures_total = Counter(
            "failures", "Item memory failures logged and not raised, by stage.", ["stage"], **common
        )

    def extraction(self, outcome: str, seconds: float) -> None:
        """Count one extraction."""
        self.extraction_total.labels(_closed(outcome, EXTRACTION_OUTCOMES)).inc()
        self.extraction_seconds.observe(max(0.0, seconds))

    def written(self, action: str, count: int = 1) -> None:
        """Count item writes."""
        if count:
            self.written_total.labels(_closed(action, WRITE_ACTIONS)).inc(count)

    def dropped(self, reason: str, count: int = 1) -> None:
        """Count candidates not written."""
        if count:
            self.dropped_total.labels(_closed(reason, DROP_REASONS)).inc(count)

    def update_refused(self, reason: str, count: int = 1) -> None:
        """Count ``update`` decisions not written."""
        if count:
            self.update_refused_total.labels(_closed(reason, REFUSED_UPDATE_REASONS)).inc(count)

    def model_error(self, purpose: str) -> None:
        """Count a failed model call."""
        self.model_errors.labels(_closed(purpose, _PURPOSES)).inc()

    def summary(self, outcome: str) -> None:
        """Count one profile summary fold."""
        self.summary_total.labels(_closed(outcome, _SUMMARY)).inc()

    def selection(self, mode: str) -> None:
        """Count one selection."""
        self.selection_total.labels(_closed(mode, _MODES)).inc()

    def failure(self, stage: str) -> None:
        """Count a failure that was logged and swallowed."""
        self.failures_total.labels(_closed(stage, _STAGES)).inc()


_by_registry: dict[int, tuple[CollectorRegistry, ItemMetrics]] = {}
_lock = threading.Lock()


def item_metrics(profile_metrics: object = None) -> ItemMetrics:
    """The :class:`ItemMetrics` on the registry of ``profile_metrics`` (default: the process-wide
    profile metrics), created once per registry."""
    if profile_metrics is None:
        profile_metrics = default_metrics()
    registry = profile_metrics.registry  # type: ignore[attr-defined]
    with _lock:
        found = _by_registry.get(id(registry))
        if found is None or found[0] is not registry:
            found = (registry, ItemMetrics(registry))
            _by_registry[id(registry)] = found
        return found[1]
