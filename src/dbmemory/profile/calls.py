"""Model calls of a consolidation: their record and the wall-clock deadline they run under.

:func:`_call_within` runs one model call in a daemon worker thread and waits for it at most the
time left before the consolidation's deadline; a call still running then is abandoned (its
answer is never read) and :class:`_DeadlineExceeded` is raised. :class:`ModelCall` is what
:class:`~dbmemory.profile.consolidate.ConsolidationResult` records of each call. Split out of
:mod:`dbmemory.profile.consolidate` (which re-exports :class:`ModelCall`).
"""

from __future__ import annotations

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


def _call_within(fn: Callable[[], Any], seconds: float) -> Any:
    """``fn()`` in a daemon worker thread, waited for at most ``seconds``.

    Raises:
        _DeadlineExceeded: ``fn`` had not returned in time; it is abandoned (its result is
            dropped, and it holds no database connection: only model calls run here).
        Exception: what ``fn`` raised.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="dbmemory-profile-call", daemon=True).start()
    if not done.wait(max(0.0, seconds)):
        raise _DeadlineExceeded()
    if "error" in box:
        raise box["error"]
    return box["value"]
