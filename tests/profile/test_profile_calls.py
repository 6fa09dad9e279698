"""Model calls under the consolidation's deadline (issue 12): worker threads are reused."""

from __future__ import annotations

import threading
import time

import pytest

from dbmemory.profile import calls
from dbmemory.profile.calls import DeadlineExceeded, call_within


def test_consecutive_calls_reuse_one_worker_thread() -> None:
    workers = [call_within(threading.current_thread, 5.0) for _ in range(5)]
    assert all(worker is workers[0] for worker in workers)
    assert workers[0] is not threading.current_thread()


def test_an_abandoned_call_does_not_hold_up_the_next_one() -> None:
    release = threading.Event()
    with pytest.raises(DeadlineExceeded):
        call_within(lambda: release.wait(5.0), 0.05)
    started = time.monotonic()
    assert call_within(lambda: 42, 5.0) == 42
    assert time.monotonic() - started < 1.0
    release.set()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and len(calls.idle) < 2:
        time.sleep(0.01)
    assert len(calls.idle) >= 2  # the abandoned worker rejoined once its call returned


def test_what_the_call_raised_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("model down")

    with pytest.raises(ValueError, match="model down"):
        call_within(fail, 5.0)
    assert call_within(lambda: "after", 5.0) == "after"


def test_idle_workers_are_bounded() -> None:
    gates = [threading.Event() for _ in range(calls.MAX_IDLE_WORKERS + 3)]
    threads = [
        threading.Thread(target=call_within, args=(gate.wait, 5.0)) for gate in gates
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    for gate in gates:
        gate.set()
    for thread in threads:
        thread.join(5.0)
    time.sleep(0.1)
    assert len(calls.idle) <= calls.MAX_IDLE_WORKERS


def test_a_call_never_sees_context_variables_of_an_earlier_call() -> None:
    import contextvars

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    assert call_within(lambda: marker.set("first call") and marker.get(), 5.0) == "first call"
    assert call_within(marker.get, 5.0) == "unset"
