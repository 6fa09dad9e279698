"""What a turn derives from an unchanged profile, kept per process.

Loading a profile parses its frontmatter, re-renders it, fits it to the budget and counts its
tokens (~1 ms for 2,000 tokens). None of that changes while the stored file does not, so
:func:`~dbmemory.profile.load.load_user_memory` keeps the result here, keyed by
``(store id, file id, version, user id, encoding, tokenizer available, max_tokens)``:

* a write bumps the version, so the next load misses and derives again;
* another budget or a model with another tokenizer misses;
* every hit is checked against the text just read (an exact comparison, ~1 µs), so an entry is
  never served for other content under the same key: a version number reused after a rolled-back
  write, a file id reused after a delete (SQLite reuses the largest row id), the same ids in
  another database.

The cache is process-wide, thread-safe and bounded: least recently used entries are dropped past
:data:`MAX_ENTRIES`. An entry holds the stored text and the injected body (two strings of about
the profile's size: ~16 KB for a 2,000-token profile, so ~16 MB when full).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["MAX_ENTRIES", "Derived", "LoadCache", "load_cache", "clear_load_cache"]

MAX_ENTRIES = 1024
"""Default bound of the process-wide cache (profiles; least recently used dropped first)."""


@dataclass(frozen=True)
class Derived:
    """What a load derives from one stored text for one tokenizer and budget.

    Attributes:
        text: the stored file text it was derived from (checked on every hit).
        body: the Markdown body to inject (canonical, within budget).
        token_count: :attr:`~dbmemory.profile.load.UserMemoryState.token_count`.
        truncated: the text was over budget and ``body`` was cut.
        fitted_tokens: tokens of the fitted (re-rendered) text, for the size metric.
        fitted_chars: characters of the fitted text, for the size metric.
    """

    text: str
    body: str
    token_count: int
    truncated: bool
    fitted_tokens: int
    fitted_chars: int


class LoadCache:
    """A small thread-safe LRU map from a load key to :class:`Derived`."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Derived] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, text: str) -> Derived | None:
        """The entry for ``key`` if it was derived from exactly ``text``, else None (a miss)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.text != text:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, key: Hashable, entry: Derived) -> None:
        """Store ``entry`` (replacing an older one under ``key``); drop the least recently used
        entries beyond :attr:`max_entries`."""
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


_cache = LoadCache()


def load_cache() -> LoadCache:
    """The process-wide cache used by :func:`~dbmemory.profile.load.load_user_memory`."""
    return _cache


def clear_load_cache() -> None:
    """Forget every cached profile derivation (the next load of each profile derives again)."""
    _cache.clear()
