"""TTL of the LangGraph store (:mod:`dbmemory.integrations.langgraph`): LangGraph's ``TTLConfig``
onto dbmemory's expiry rule, and the sweeper thread.

dbmemory has no per-file deadline: the expiry job deletes the files neither written nor read
for N days (:mod:`dbmemory.store.expiry`; reads are recorded at most once an hour and the job
allows for it). So a store has at most one TTL, ``N * 1440`` minutes, and N is at least 1/24
(60 minutes):

* ``default_ttl`` (minutes) is that TTL: it sets N when ``expiry_days`` is not given, and must
  agree with it when it is;
* ``refresh_on_read``: a get or search records a read (a touch), which restarts the TTL; a put
  always does;
* ``sweep_interval_minutes``: how often :meth:`DbMemoryStore.start_ttl_sweeper`'s thread runs
  the expiry job on the LangGraph stores (default 5, as LangGraph's stores);
* ``omit_expired`` is refused: an item past its TTL stays readable until a sweep (or the
  database's own expiry job) deletes it, as in LangGraph's SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.store.base import TTLConfig

from dbmemory.errors import InvalidArgumentError
from dbmemory.store.expiry import MIN_EXPIRY_DAYS, validate_days

__all__ = ["MINUTES_PER_DAY", "TtlSettings", "ttl_settings", "check_put_ttl", "Sweeper"]

log = logging.getLogger(__name__)

MINUTES_PER_DAY = 1440
DEFAULT_SWEEP_MINUTES = 5.0
_KEYS = ("refresh_on_read", "default_ttl", "sweep_interval_minutes", "omit_expired")


class TtlSettings:
    """The checked TTL settings of one store: ``expiry_days`` (``None``: no TTL), the
    ``TTLConfig`` LangGraph's ``BaseStore`` reads (``None``: none given) and the sweep interval
    in minutes."""

    def __init__(self, expiry_days: float | None, config: TTLConfig | None, sweep_minutes: float) -> None:
        self.expiry_days = expiry_days
        self.config = config
        self.sweep_minutes = sweep_minutes


def _minutes(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"{what} must be a positive number of minutes, got {value!r}")
    return float(value)


def _days_of_ttl(minutes: float) -> float:
    smallest = MIN_EXPIRY_DAYS * MINUTES_PER_DAY
    if minutes < smallest:
        raise InvalidArgumentError(
            f"default_ttl={minutes:g} minutes is shorter than {smallest:g} minutes, the "
            "shortest TTL here (reads are recorded at most once an hour): pass at least "
            f"{smallest:g}",
            code="unsupported_ttl",
        )
    return validate_days(minutes / MINUTES_PER_DAY)


def ttl_settings(
    expiry_days: object,
    default_ttl: object,
    refresh_on_read: object,
    ttl: Mapping[str, Any] | None,
) -> TtlSettings:
    """Check a store's TTL arguments (``DbMemoryStore(expiry_days=, default_ttl=,
    refresh_on_read=, ttl=)``; ``ttl`` is LangGraph's ``TTLConfig``, exclusive with
    ``default_ttl``/``refresh_on_read``).

    Raises:
        InvalidArgumentError: a bad value, an unknown ``TTLConfig`` key, both forms given, a
            ``default_ttl`` under 60 minutes or other than ``expiry_days * 1440``.
        NotImplementedError: ``omit_expired=True``.
    """
    if ttl is not None:
        if not isinstance(ttl, Mapping):
            raise InvalidArgumentError(f"ttl must be a TTLConfig (a dict), got {type(ttl).__name__}")
        if default_ttl is not None or refresh_on_read is not None:
            raise InvalidArgumentError(
                "pass either ttl=TTLConfig(...) or default_ttl=/refresh_on_read=, not both"
            )
        unknown = sorted(set(ttl) - set(_KEYS))
        if unknown:
            raise InvalidArgumentError(f"unknown TTLConfig keys {unknown}: use {', '.join(_KEYS)}")
        if ttl.get("omit_expired"):
            raise NotImplementedError(
                "omit_expired is not supported: an expired item stays readable until a sweep "
                "(sweep_ttl, start_ttl_sweeper or the database's expiry job) deletes it"
            )
        default_ttl, refresh_on_read = ttl.get("default_ttl"), ttl.get("refresh_on_read", True)
    if refresh_on_read is None:
        refresh_on_read = True
    if not isinstance(refresh_on_read, bool):
        raise InvalidArgumentError(f"refresh_on_read must be True or False, got {refresh_on_read!r}")
    days = None if expiry_days is None else validate_days(expiry_days)
    minutes: float | None = None
    if default_ttl is not None:
        minutes = _minutes(default_ttl, "default_ttl")
        if days is None:
            days = _days_of_ttl(minutes)
        elif not math.isclose(minutes, days * MINUTES_PER_DAY, rel_tol=1e-9):
            raise InvalidArgumentError(
                f"default_ttl={minutes:g} minutes is not the expiry job's {days:g} days: pass "
                f"ttl={days * MINUTES_PER_DAY:g}, or leave expiry_days out",
                code="unsupported_ttl",
            )
    sweep = DEFAULT_SWEEP_MINUTES
    if ttl is not None and ttl.get("sweep_interval_minutes") is not None:
        sweep = _minutes(ttl["sweep_interval_minutes"], "sweep_interval_minutes")
    config: TTLConfig | None = None
    if days is not None or ttl is not None:
        config = TTLConfig(refresh_on_read=refresh_on_read, default_ttl=minutes)
        if ttl is not None and "sweep_interval_minutes" in ttl:
            config["sweep_interval_minutes"] = ttl["sweep_interval_minutes"]
    return TtlSettings(days, config, sweep)


class Sweeper:
    """A daemon thread running ``sweep`` every ``minutes`` until stopped (LangGraph's
    ``start_ttl_sweeper``/``stop_ttl_sweeper``); a failed sweep is logged and retried at the
    next interval."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, sweep: Callable[[], int], minutes: float) -> concurrent.futures.Future[None]:
        """Start the thread (once: a running one is kept). The future completes when the
        thread stops; cancelling it stops the thread."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        future.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
        if self._thread is not None and self._thread.is_alive():
            return future
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(minutes * 60):
                try:
                    gone = sweep()
                    if gone:
                        log.info("LangGraph TTL sweep deleted %d items", gone)
                except Exception:  # logged; the next interval tries again
                    log.exception("LangGraph TTL sweep failed")
            if not future.done():
                future.set_result(None)

        self._thread = threading.Thread(target=loop, daemon=True, name="dbmemory-lg-ttl-sweeper")
        self._thread.start()
        return future

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the thread; ``True`` when it stopped (or was not running) within ``timeout``
        seconds."""
        if self._thread is None or not self._thread.is_alive():
            return True
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        self._thread = None
        return True


def check_put_ttl(ttl: object, expiry_days: float | None) -> bool:
    """Whether a put's ``ttl`` (minutes) leaves the item to the expiry job (``False``: ``None``,
    the item is exempt, kept until deleted).

    Raises:
        NotImplementedError: a ``ttl`` on a store without TTL (``expiry_days`` ``None``).
        InvalidArgumentError: a ``ttl`` other than ``expiry_days * 1440`` (code
            ``unsupported_ttl``), naming the one accepted.
    """
    if ttl is None:
        return False
    if expiry_days is None:
        raise NotImplementedError(
            "TTL is not supported by this DbMemoryStore: create it with expiry_days=N (the N "
            "of the expiry job, `dbmemory expire --days N`) or default_ttl, or put with ttl=None"
        )
    minutes = expiry_days * MINUTES_PER_DAY
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, (int, float))
        or not math.isclose(float(ttl), minutes, rel_tol=1e-9)
    ):
        raise InvalidArgumentError(
            f"ttl={ttl!r} minutes is not available: items here expire by the database's "
            f"expiry job, {expiry_days:g} days ({minutes:g} minutes) after their last "
            f"write or read; pass ttl={minutes:g}, or ttl=None to keep the item until deleted",
            code="unsupported_ttl",
        )
    return True
