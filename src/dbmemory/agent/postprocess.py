"""Post-turn work off the answer's critical path: handles for the profile consolidation.

:class:`PostProcessing` runs a job in a background thread (or inline, or when the caller says);
:class:`AsyncPostProcessing` runs it as an asyncio task (the job itself runs in a worker thread:
the profile pipeline is synchronous). Either way the job's failure is logged, counted
(:func:`post_processing_failures`) and kept on the handle, never raised: ``wait()`` returns None
for a failed job.

:func:`consolidate` is the job the turn runner schedules: one
:class:`dbmemory.profile.UserMemoryPostprocessor` run, which opens its own transactions on the
engine.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
from collections.abc import Callable
from typing import Any, Literal

from sqlalchemy.engine import Engine

from dbmemory.profile.consolidate import UserMemoryPostprocessor
from dbmemory.profile.metrics import default_metrics

__all__ = [
    "PostProcessing",
    "AsyncPostProcessing",
    "consolidate",
    "post_processing_failures",
]

logger = logging.getLogger(__name__)

_failures = 0
_failures_lock = threading.Lock()

State = Literal["pending", "running", "done", "failed"]


def post_processing_failures() -> int:
    """Post-processing jobs that raised since the process started (also logged)."""
    return _failures


def _count_failure(exc: BaseException) -> None:
    global _failures
    with _failures_lock:
        _failures += 1
    logger.error("post-turn memory update failed (the turn's answer is unaffected): %s", exc, exc_info=exc)
    try:
        default_metrics().postprocess("error", 0.0)
    except Exception:  # metrics are best effort
        logger.debug("could not count the post-processing failure in the metrics", exc_info=True)


class PostProcessing:
    """A post-turn job in a thread, inline, or deferred until the caller starts it.

    Args:
        job: the work; its return value becomes :attr:`result`.
        on_failure: called with the exception when the job raises (after logging and counting).

    Attributes:
        state: ``"pending"``, ``"running"``, ``"done"`` or ``"failed"``.
        result: the job's return value once done (for consolidation: a ``ConsolidationResult``).
        error: the exception when failed, else None.
    """

    def __init__(self, job: Callable[[], Any], *, on_failure: Callable[[BaseException], None] | None = None) -> None:
        self._job = job
        self._on_failure = on_failure
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.state: State = "pending"
        self.result: Any = None
        self.error: BaseException | None = None

    def _claim(self) -> bool:
        with self._lock:
            if self.state != "pending":
                return False
            self.state = "running"
            return True

    def _execute(self) -> None:
        try:
            self.result = self._job()
            self.state = "done"
        except BaseException as exc:  # never raised into the turn
            self.error = exc
            self.state = "failed"
            _count_failure(exc)
            if self._on_failure is not None:
                try:
                    self._on_failure(exc)
                except Exception:
                    logger.warning("post-processing failure callback failed", exc_info=True)
        finally:
            self._done.set()

    def start(self) -> PostProcessing:
        """Start the job in a daemon thread (no-op when already started). Returns self."""
        if self._claim():
            self._thread = threading.Thread(target=self._execute, name="dbmemory-postprocess", daemon=True)
            self._thread.start()
        return self

    def run(self) -> Any:
        """Run the job now in this thread if it has not started; then return :meth:`wait`."""
        if self._claim():
            self._execute()
        return self.wait()

    def wait(self, timeout: float | None = None) -> Any:
        """Wait for the job (running a pending one inline first) and return its result.

        Args:
            timeout: seconds to wait for a running job; None = no limit.

        Returns:
            The job's result, or None when it failed or the timeout passed (see :attr:`state`).
        """
        if self.state == "pending":
            return self.run()
        self._done.wait(timeout)
        return self.result if self.state == "done" else None

    def done(self) -> bool:
        """Whether the job finished (done or failed)."""
        return self._done.is_set()


class AsyncPostProcessing:
    """The asyncio form of :class:`PostProcessing`: ``await handle`` (or ``await handle.wait()``)."""

    def __init__(self, job: Callable[[], Any], *, on_failure: Callable[[BaseException], None] | None = None) -> None:
        self._inner = PostProcessing(job, on_failure=on_failure)
        self._task: asyncio.Task[Any] | None = None

    @property
    def state(self) -> State:
        """See :attr:`PostProcessing.state`."""
        return self._inner.state

    @property
    def result(self) -> Any:
        """See :attr:`PostProcessing.result`."""
        return self._inner.result

    @property
    def error(self) -> BaseException | None:
        """See :attr:`PostProcessing.error`."""
        return self._inner.error

    def start(self) -> AsyncPostProcessing:
        """Schedule the job as a task on the running loop (its work runs in a worker thread)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(asyncio.to_thread(self._inner.run))
        return self

    async def wait(self) -> Any:
        """Await the job (starting it if pending) and return its result, or None if it failed."""
        self.start()
        assert self._task is not None
        return await self._task

    def __await__(self) -> Any:
        return self.wait().__await__()

    def done(self) -> bool:
        """Whether the job finished."""
        return self._inner.done()


def consolidate(
    engine: Engine,
    *,
    config: Any,
    model: str,
    user_id: str,
    state: Any,
    user_message: str,
    assistant_message: str,
    complete: Callable[..., Any],
    now: dt.datetime | None = None,
    step_logger: Any = None,
    timeout: float | None = None,
) -> Any:
    """Run one profile consolidation after a turn (its own transactions on ``engine``).

    Args:
        engine: the database; the postprocessor opens its own connections and transactions.
        config: the :class:`dbmemory.profile.UserMemoryConfig`.
        model: the consolidation model (litellm name).
        user_id: the user.
        state: the profile state loaded before the turn (None on the first turn).
        user_message: the user's message of the turn.
        assistant_message: the answer given.
        complete: the model call.
        now: the time to stamp (replays: the recorded session time), or None for the clock.
        step_logger: the host's :class:`~dbmemory.profile.events.StepLogger` ("Updating your
            memory", "Review your context memory"), or None.
        timeout: seconds per model call, or None for the postprocessor's default.

    Returns:
        The ``ConsolidationResult``.

    Raises:
        Exception: whatever the pipeline raises (the handle catches, logs and counts it).
    """
    kwargs: dict[str, Any] = {"complete": complete, "step_logger": step_logger, "actor": "turn"}
    if now is not None:
        fixed = now if now.tzinfo else now.replace(tzinfo=dt.timezone.utc)
        kwargs["now"] = lambda: fixed
    if timeout is not None:
        kwargs["timeout"] = timeout
    processor = UserMemoryPostprocessor(engine, config, model, user_id, state, **kwargs)
    return processor.run(user_message, assistant_message)
