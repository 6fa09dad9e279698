"""Model calls of a consolidation: their record and the wall-clock deadline they run under.

:func:`_call_within` runs one model call in a daemon worker thread (kept for the next call) and waits for it at most the
time left before the consolidation's deadline; a call still running then is abandoned (its
answer is never read) and :class:`_DeadlineExceeded` is raised. :class:`ModelCall` is what
:class:`~dbmemory.profile.consolidate.ConsolidationResult` records of each call. Split out of
:mod:`dbmemory.profile.consolidate` (which re-exports :class:`ModelCall`).
"""

from __future__ import annotations

import contextvars
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelCall"]


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


class _DeadlineExceeded(Exception):
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
                if len(_idle) >= MAX_IDLE_WORKERS:
                    return
                _idle.append(self)


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _forget_workers_after_fork() -> None:
    """A forked child has none of the parent's threads: start afresh."""
    global _idle_lock
    _idle_lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_after_fork)


def _call_within(fn: Callable[[], Any], seconds: float) -> Any:
    """``fn()`` in a daemon worker thread, waited for at most ``seconds``.

    The worker is an idle one from an earlier call when there is one (starting a thread per call
    costs about as much as the rest of a consolidation's Python work), else a new one.

    Raises:
        _DeadlineExceeded: ``fn`` had not returned in time; it is abandoned (its result is
            dropped, and it holds no database connection: only model calls run here).
        Exception: what ``fn`` raised.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    with _idle_lock:
        worker = _idle.pop() if _idle else None
    if worker is None:
        worker = _Worker()
    worker.inbox.put((fn, box, done))
    if not done.wait(max(0.0, seconds)):
        raise _DeadlineExceeded()
    if "error" in box:
        raise box["error"]
    return box["value"]
