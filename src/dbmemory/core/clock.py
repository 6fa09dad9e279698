"""The one clock of dbmemory: every "now" the package takes comes from :func:`utcnow`.

Times are aware UTC ``datetime`` values with microsecond precision (timestamps
are UTC, always). Tests, simulations and replays of recorded conversations set the clock with
:func:`set_clock` or, scoped, :func:`use_clock`, instead of patching a module attribute; the
setting is process-wide (threads of the touch pool and the post-turn worker see it too).

Example:
    >>> import datetime as dt
    >>> from dbmemory.core import clock
    >>> t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    >>> with clock.use_clock(lambda: t0):
    ...     clock.utcnow() == t0
    True
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Clock", "utcnow", "set_clock", "use_clock"]

Clock = Callable[[], dt.datetime]
"""A function of no arguments returning the current time (aware, or naive meaning UTC)."""

_source: Clock | None = None


def utcnow() -> dt.datetime:
    """The current time as an aware UTC ``datetime``: the clock set by :func:`set_clock`, else
    the system's."""
    source = _source
    if source is None:
        return dt.datetime.now(dt.timezone.utc)
    now = source()
    return now.replace(tzinfo=dt.timezone.utc) if now.tzinfo is None else now.astimezone(dt.timezone.utc)


def set_clock(source: Clock | None) -> Clock | None:
    """Make ``source`` the clock of :func:`utcnow` (``None``: the system's clock again).

    Returns:
        The clock that was set before, so a caller can put it back.
    """
    global _source
    previous, _source = _source, source
    return previous


@contextmanager
def use_clock(source: Clock) -> Iterator[None]:
    """Run a block with ``source`` as the clock, then restore the clock set before it."""
    previous = set_clock(source)
    try:
        yield
    finally:
        set_clock(previous)
