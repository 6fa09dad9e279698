"""Step events the host shows to the user.

A host implements :class:`StepLogger` (two methods) to show progress entries such as
"Loading context memory". dbmemory calls it through :func:`run_step` and :func:`log_entry`, which
guarantee that a step that was started is always finished (completed or failed), even when the
work raises, and that a logger that itself raises never breaks the turn.

Steps:

* :data:`LOADING` ("Loading context memory"): completed with detail ``"profile loaded"`` or
  ``"no profile yet"``, or failed.
* :data:`UPDATING` ("Updating your memory"): while the rewrite runs; completed or failed.
* :data:`REVIEW` ("Review your context memory"): an entry logged only after a successful write.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "LOADING",
    "UPDATING",
    "REVIEW",
    "StepStatus",
    "StepLogger",
    "StepHandle",
    "NullStepLogger",
    "RecordingStepLogger",
    "run_step",
    "log_entry",
]

log = logging.getLogger(__name__)

LOADING = "Loading context memory"
UPDATING = "Updating your memory"
REVIEW = "Review your context memory"

StepStatus = Literal["completed", "failed"]


@runtime_checkable
class StepLogger(Protocol):
    """What a host implements to show step events."""

    def start(self, name: str) -> Any:
        """A step begins; return any handle, passed back to :meth:`finish`."""

    def finish(self, handle: Any, status: StepStatus, detail: str | None = None) -> None:
        """The step ended with ``status``; ``detail`` is a short text for the user (no ids)."""


class NullStepLogger:
    """A logger that shows nothing (the default)."""

    def start(self, name: str) -> Any:
        return name

    def finish(self, handle: Any, status: StepStatus, detail: str | None = None) -> None:
        return None


@dataclass
class StepHandle:
    """One recorded step of :class:`RecordingStepLogger`.

    Attributes:
        name: the step name.
        status: ``"running"``, ``"completed"`` or ``"failed"``.
        detail: the detail given when it finished.
    """

    name: str
    status: str = "running"
    detail: str | None = None


@dataclass
class RecordingStepLogger:
    """A logger that keeps every step in :attr:`steps` (for tests and the CLI)."""

    steps: list[StepHandle] = field(default_factory=list)

    def start(self, name: str) -> StepHandle:
        handle = StepHandle(name)
        self.steps.append(handle)
        return handle

    def finish(self, handle: StepHandle, status: StepStatus, detail: str | None = None) -> None:
        handle.status = status
        handle.detail = detail

    @property
    def running(self) -> list[StepHandle]:
        """Steps started and never finished (always empty if dbmemory works)."""
        return [s for s in self.steps if s.status == "running"]


class _Step:
    """The object :func:`run_step` yields: set :attr:`detail` or call :meth:`fail`."""

    def __init__(self) -> None:
        self.detail: str | None = None
        self.failed: str | None = None

    def fail(self, detail: str) -> None:
        """Mark the step failed without raising."""
        self.failed = detail


def _safe_start(logger: StepLogger, name: str) -> tuple[bool, Any]:
    try:
        return True, logger.start(name)
    except Exception:  # noqa: BLE001 - a broken host logger never breaks the turn
        log.warning("step logger failed to start %r", name, exc_info=True)
        return False, None


def _safe_finish(logger: StepLogger, handle: Any, status: StepStatus, detail: str | None) -> None:
    try:
        logger.finish(handle, status, detail)
    except Exception:  # noqa: BLE001
        log.warning("step logger failed to finish a step", exc_info=True)


@contextmanager
def run_step(logger: StepLogger | None, name: str) -> Iterator[_Step]:
    """Run a block as a step: started on entry, completed or failed on exit, never left running.

    Args:
        logger: the host's logger, or None (nothing is shown).
        name: the step name, e.g. :data:`LOADING`.

    Yields:
        A small object: set ``.detail`` for the completion text, or call ``.fail(text)``.

    Raises:
        Whatever the block raises, after the step was marked failed.
    """
    step = _Step()
    if logger is None:
        yield step
        return
    started, handle = _safe_start(logger, name)
    try:
        yield step
    except BaseException as exc:
        if started:
            _safe_finish(logger, handle, "failed", step.failed or type(exc).__name__)
        raise
    if started:
        if step.failed is not None:
            _safe_finish(logger, handle, "failed", step.failed)
        else:
            _safe_finish(logger, handle, "completed", step.detail)


def log_entry(logger: StepLogger | None, name: str, detail: str | None = None) -> None:
    """Log a step that is complete at once (e.g. :data:`REVIEW` after a write)."""
    if logger is None:
        return
    started, handle = _safe_start(logger, name)
    if started:
        _safe_finish(logger, handle, "completed", detail)
