"""Model calls of a consolidation: their record and the wall-clock deadline they run under.

:func:`call_within` runs one model call in a daemon worker thread (kept for the next call) and
waits for it at most the time left before the consolidation's deadline, in seconds; a call still
running then is abandoned (its answer is never read) and :class:`DeadlineExceeded` is raised.
:class:`ModelCall` is what :class:`ConsolidationResult` (what one
:meth:`~dbmemory.profile.consolidate.UserMemoryPostprocessor.run` did) records of each call
(purpose, model, tokens, seconds); :mod:`dbmemory.profile` exposes both."""

from __future__ import annotations

import contextvars
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ConsolidationResult",
    "ModelCall",
    "DeadlineExceeded",
    "call_within",
]


@dataclass(frozen=True)
class ModelCall:
    """One model call of a consolidation.

    Attributes:
        purpose: ``"gate"``, ``"rewrite"``, ``"scrub"`` or ``"condense"``.
        model: the model name.
        prompt_tokens: provider-reported prompt tokens (0 when unknown or failed).
        completion_tokens: provider-reported completion tokens.
        seconds: wall time of the call.
        finish_reason: the provider's finish reason, or None.
        error: the exception class name when the call raised, else None.
    """

    purpose: str
    model: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    finish_reason: str | None = None
    error: str | None = None


@dataclass
class ConsolidationResult:
    """What one :meth:`UserMemoryPostprocessor.run` did.

    Attributes:
        outcome: ``"noop"`` (gate or model said NOOP), ``"unchanged"`` (same body, not
            written), ``"updated"`` (written), ``"rejected"`` (unusable model answer, old profile
            kept), ``"scrub_veto"``, ``"conflict"`` (the profile changed twice meanwhile),
            ``"disabled"`` (the user opted out, or was forgotten since the run started) or ``"error"`` (database or unexpected failure,
            or the deadline passed).
        reason: detail: ``"gate"``, ``"model"``, ``"empty"``, ``"truncated"``, ``"model_error"``,
            ``"missing_sections"``, ``"duplicate_sections"``, ``"extra_sections"``,
            ``"not_a_profile"``, ``"invalid_topic_date"``, ``"scrub_error"``,
            ``"scrub_invalid"``, ``"deadline"``, an error message, or None.
        text: the profile text now stored (the new text when updated), or None when none exists.
        version: its file version, or None.
        calls: every model call, in order.
        redactions: detector hits per kind (see :data:`~dbmemory.profile.detectors.KINDS`).
        condensed: the condensation result was used.
        truncated: hard truncation was applied.
        token_count: tokens of the written text (when updated).
        attempts: 2 when the pipeline re-ran after a compare-and-set conflict.
        repairs: rule repairs per rule (:data:`~dbmemory.profile.rules.RULES`).
    """

    outcome: str = "error"
    reason: str | None = None
    text: str | None = None
    version: int | None = None
    calls: list[ModelCall] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)
    condensed: bool = False
    truncated: bool = False
    token_count: int | None = None
    attempts: int = 1
    repairs: dict[str, int] = field(default_factory=dict)

    @property
    def written(self) -> bool:
        """Whether a new profile text was stored."""
        return self.outcome == "updated"

    def usage(self, purpose: str | None = None) -> tuple[int, int]:
        """``(prompt_tokens, completion_tokens)`` summed over the calls (of one purpose)."""
        chosen = [c for c in self.calls if purpose is None or c.purpose == purpose]
        return sum(c.prompt_tokens for c in chosen), sum(c.completion_tokens for c in chosen)


class DeadlineExceeded(Exception):
    """A model call was still running when the consolidation's deadline passed (internal)."""


MAX_IDLE_WORKERS = 4
"""Worker threads kept waiting for the next model call (more are started when calls overlap)."""


class _Worker:
    """A daemon thread that runs one call at a time and waits for the next one among the idle.

    A worker whose call was abandoned at a deadline is busy until that call returns; only then
    does it rejoin the idle workers (or end, when :data:`MAX_IDLE_WORKERS` already wait).
    """

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]]
        self.inbox = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="dbmemory-profile-call", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, box, done = self.inbox.get()
            try:
                # an empty context per call, as a new thread had: nothing set by one call's
                # context variables reaches the next call on this worker
                box["value"] = contextvars.Context().run(fn)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = exc
            finally:
                done.set()
            del fn, box, done  # hold nothing of the finished call while idle
            with _idle_lock:
                if len(idle) >= MAX_IDLE_WORKERS:
                    return
                idle.append(self)


idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _forget_workers_after_fork() -> None:
    """A forked child has none of the parent's threads: start afresh."""
    global _idle_lock
    _idle_lock = threading.Lock()
    idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_after_fork)


def call_within(fn: Callable[[], Any], seconds: float) -> Any:
    """``fn()`` in a daemon worker thread, waited for at most ``seconds``.

    The worker is an idle one from an earlier call when there is one (starting a thread per call
    costs about as much as the rest of a consolidation's Python work), else a new one.

    Raises:
        DeadlineExceeded: ``fn`` had not returned in time; it is abandoned (its result is
            dropped, and it holds no database connection: only model calls run here).
        Exception: what ``fn`` raised.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    with _idle_lock:
        worker = idle.pop() if idle else None
    if worker is None:
        worker = _Worker()
    worker.inbox.put((fn, box, done))
    if not done.wait(max(0.0, seconds)):
        raise DeadlineExceeded()
    if "error" in box:
        raise box["error"]
    return box["value"]
