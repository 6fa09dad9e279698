"""Prometheus metrics of the user profile.

:class:`ProfileMetrics` registers its metrics in **its own** ``CollectorRegistry`` unless the host
passes one (pass ``prometheus_client.REGISTRY`` to expose them with the host's other metrics).
Namespace ``dbmemory``, subsystem ``profile``. Every label is a closed set: outcomes, reasons,
purposes and detector kinds are fixed tuples (anything else becomes ``"other"``), and the model
label is the operator-configured model name (never a user or company id).

Metric names (``_total``/``_bucket`` suffixes added by the client):

* ``dbmemory_profile_load_total{outcome}``: outcome in :data:`LOAD_OUTCOMES`
* ``dbmemory_profile_load_duration_seconds``
* ``dbmemory_profile_postprocess_total{outcome}``: outcome in :data:`POSTPROCESS_OUTCOMES`
* ``dbmemory_profile_postprocess_duration_seconds{outcome}``
* ``dbmemory_profile_rejected_total{reason}``: model answers refused, reason in :data:`REJECT_REASONS`
* ``dbmemory_profile_model_call_duration_seconds{purpose,model}``
* ``dbmemory_profile_model_call_errors_total{purpose,model}``
* ``dbmemory_profile_model_tokens_total{purpose,model,kind}``: kind ``prompt`` or ``completion``
* ``dbmemory_profile_detector_hits_total{kind}``: kind in :data:`~dbmemory.profile.detectors.KINDS`
* ``dbmemory_profile_size_tokens`` and ``dbmemory_profile_size_chars``: sizes of loaded and
  written profiles (histograms)
* ``dbmemory_profile_fit_total{action}``: ``condensed`` or ``truncated``
* ``dbmemory_profile_repaired_total{rule}``: model answers repaired to keep the profile's rules,
  rule in :data:`~dbmemory.profile.rules.RULES`
"""

from __future__ import annotations

import threading
from typing import TypedDict

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from dbmemory.metrics import shared_registry
from dbmemory.profile.detectors import KINDS
from dbmemory.profile.prompts import PURPOSES
from dbmemory.profile.rules import RULES

__all__ = [
    "MetricOptions",
    "ProfileMetrics",
    "LOAD_OUTCOMES",
    "POSTPROCESS_OUTCOMES",
    "REJECT_REASONS",
    "default_metrics",
]

LOAD_OUTCOMES = ("loaded", "empty", "disabled", "truncated", "error")
POSTPROCESS_OUTCOMES = (
    "noop",
    "unchanged",
    "updated",
    "rejected",
    "scrub_veto",
    "conflict",
    "disabled",
    "error",
)
REJECT_REASONS = (
    "empty",
    "truncated",
    "model_error",
    "missing_sections",
    "duplicate_sections",
    "extra_sections",
    "not_a_profile",
    "scrub_error",
    "scrub_invalid",
    "invalid_topic_date",
    "other",
)
FIT_ACTIONS = ("condensed", "truncated")

_TOKEN_BUCKETS = (100, 250, 500, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 12000)
_CHAR_BUCKETS = (500, 1000, 2500, 5000, 7500, 10000, 15000, 25000, 40000)
_SECONDS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def _closed(value: str, allowed: tuple[str, ...]) -> str:
    return value if value in allowed else "other"


def _model_label(model: str | None) -> str:
    return (model or "none")[:100]


class MetricOptions(TypedDict):
    """The keyword arguments every metric of one registry shares (``Counter(..., **options)``)."""

    namespace: str
    subsystem: str
    registry: CollectorRegistry


class ProfileMetrics:
    """The profile metrics, in one registry.

    Args:
        registry: where to register; default a new private ``CollectorRegistry``.
        namespace: metric name prefix (default ``"dbmemory"``).
    """

    def __init__(self, registry: CollectorRegistry | None = None, namespace: str = "dbmemory"):
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        common = MetricOptions(namespace=namespace, subsystem="profile", registry=self.registry)
        self.load_total = Counter("load", "Profile loads by outcome.", ["outcome"], **common)
        self.load_seconds = Histogram(
            "load_duration_seconds", "Time to load a profile.", buckets=_SECONDS, **common
        )
        self.postprocess_total = Counter(
            "postprocess", "Post-turn consolidations by outcome.", ["outcome"], **common
        )
        self.postprocess_seconds = Histogram(
            "postprocess_duration_seconds",
            "Time of one post-turn consolidation.",
            ["outcome"],
            buckets=_SECONDS,
            **common,
        )
        self.rejected_total = Counter(
            "rejected", "Model answers refused (old profile kept) by reason.", ["reason"], **common
        )
        self.model_seconds = Histogram(
            "model_call_duration_seconds",
            "Duration of model calls by purpose and model.",
            ["purpose", "model"],
            buckets=_SECONDS,
            **common,
        )
        self.model_errors = Counter(
            "model_call_errors", "Failed model calls by purpose and model.", ["purpose", "model"],
            **common,
        )
        self.model_tokens = Counter(
            "model_tokens",
            "Tokens used by model calls (provider-reported).",
            ["purpose", "model", "kind"],
            **common,
        )
        self.detector_hits = Counter(
            "detector_hits", "Values redacted by the deterministic checks.", ["kind"], **common
        )
        self.size_tokens = Histogram(
            "size_tokens", "Profile size in tokens.", buckets=_TOKEN_BUCKETS, **common
        )
        self.size_chars = Histogram(
            "size_chars", "Profile size in characters.", buckets=_CHAR_BUCKETS, **common
        )
        self.fit_total = Counter(
            "fit", "Over-budget profiles condensed or truncated.", ["action"], **common
        )
        self.repaired_total = Counter(
            "repaired", "Repairs of model answers that broke a profile rule.", ["rule"], **common
        )

    # -- recording helpers (closed label sets enforced here) --------------------------------

    def load(self, outcome: str, seconds: float) -> None:
        """Count one load and its duration."""
        self.load_total.labels(_closed(outcome, LOAD_OUTCOMES)).inc()
        self.load_seconds.observe(max(0.0, seconds))

    def postprocess(self, outcome: str, seconds: float) -> None:
        """Count one consolidation and its duration."""
        label = _closed(outcome, POSTPROCESS_OUTCOMES)
        self.postprocess_total.labels(label).inc()
        self.postprocess_seconds.labels(label).observe(max(0.0, seconds))

    def repaired(self, counts: dict[str, int]) -> None:
        """Count the repairs of one answer (rule name -> count)."""
        for rule, count in counts.items():
            if count > 0:
                self.repaired_total.labels(_closed(rule, RULES)).inc(count)

    def rejected(self, reason: str) -> None:
        """Count one refused model answer."""
        self.rejected_total.labels(_closed(reason, REJECT_REASONS)).inc()

    def model_call(
        self,
        purpose: str,
        model: str | None,
        seconds: float,
        *,
        error: bool,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> None:
        """Record one model call."""
        labels = (_closed(purpose, PURPOSES), _model_label(model))
        self.model_seconds.labels(*labels).observe(max(0.0, seconds))
        if error:
            self.model_errors.labels(*labels).inc()
        if prompt_tokens:
            self.model_tokens.labels(*labels, "prompt").inc(prompt_tokens)
        if completion_tokens:
            self.model_tokens.labels(*labels, "completion").inc(completion_tokens)

    def detector(self, counts: dict[str, int]) -> None:
        """Add detector hits per kind."""
        for kind, count in counts.items():
            if count:
                self.detector_hits.labels(_closed(kind, KINDS)).inc(count)

    def size(self, tokens: int, chars: int) -> None:
        """Observe one profile size."""
        self.size_tokens.observe(tokens)
        self.size_chars.observe(chars)

    def fit(self, *, condensed: bool, truncated: bool) -> None:
        """Count condensation and truncation."""
        if condensed:
            self.fit_total.labels("condensed").inc()
        if truncated:
            self.fit_total.labels("truncated").inc()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


_default: ProfileMetrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> ProfileMetrics:
    """The process-wide :class:`ProfileMetrics`, on :func:`dbmemory.metrics.shared_registry`,
    used when none is passed."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ProfileMetrics(shared_registry())
        return _default
