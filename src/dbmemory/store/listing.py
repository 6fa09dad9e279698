"""A directory listing read only as far as its answer can show (issue 19): the MEMORY tool's
``view`` of a directory shows two levels and at most a budget of characters, so it reads the
store's rows in path order from the prefix index (:mod:`dbmemory.store.statements.listing`),
a batch at a time, and stops once the lines it knows for sure fill the budget.

What is read: each shown file's ``(path, size)`` row; for a directory two levels down (whose
files the listing never shows) and for a hidden name (``.*``, ``node_modules``: never shown,
but counted in the sizes), its rows when the batch in hand holds them all, else one ``(files,
characters)`` aggregate computed in the database from the index instead of its rows; for what lies past the last row read, the store's counters
(``file_count``, ``total_chars``, for the root) or one aggregate (a subdirectory), and one more
for the part of the directory the walk stopped in. The sizes shown are exact, as a full read
would give them.

Order. The listing shows a level sorted by name (``notes/`` and its files before
``notes-old.md``), whereas the index orders paths (``notes-old.md`` before ``notes/a.md``,
``-`` sorting before ``/``). So a line is only taken as known when no row not read yet can
sort before it in the listing: :attr:`Walk.stop` is the smallest listing position a row past
the walk could take (the first such row's position, or that of a directory whose name is a
prefix of it followed by a character before ``/``, when one exists), and the renderer shows
nothing from there on.

A store whose rows under the directory include a path of :data:`PATH_KEY_CHARS` characters or
more (the index holds that many) is read whole, as before (:attr:`Walk.complete` is then
true). Reads take no lock and record no touch. The walk's statements run one after the other:
under READ COMMITTED a write committed meanwhile can show in one figure of the listing and not
in another (as between two listings); at REPEATABLE READ or SERIALIZABLE (and on SQLite, whose
reads share one snapshot per transaction) the figures agree."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core.paths import ROOT
from dbmemory.db import raw
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.types import PATH_KEY_CHARS
from dbmemory.store.statements import listing as st
from dbmemory.store.statements.reads import SELECT_SIZES, SELECT_SIZES_DIR, prefix_params

__all__ = ["Walk", "REST_NAME", "walk_directory", "store_totals"]

REST_NAME = "\U0010ffff"
"""The name of the rows that stand for what the walk did not read (sorted after every name):
``<directory>/<REST_NAME>`` for the rest of the directory, ``<dir>/<REST_NAME>`` for the rest
of the first-level directory it stopped in. They count in the sizes and are never shown."""

_MAX_BATCH = 2000
_path = itemgetter(0)
_CAPPED = 1000
"""A range of at most this many rows is summed instead of the directory the walk stopped in."""


@dataclass
class Walk:
    """What :func:`walk_directory` read.

    Attributes:
        rows: ``(path, size in characters)`` sorted by path: the files read, one row per
            second-level directory or hidden subtree (its first path, its total size), and the
            rest rows (:data:`REST_NAME`); their sizes add up to the directory's total.
        weights: files each row stands for, where it is not 1.
        stop: the listing position (a tuple of names below the directory) from which lines
            are not known; ``None`` when every row was read (:attr:`complete`).
        total_files: files under the directory at any depth.
    """

    rows: list[tuple[str, int]] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)
    stop: tuple[str, ...] | None = None
    total_files: int = 0

    @property
    def complete(self) -> bool:
        """Whether every file under the directory is in :attr:`rows` (or an aggregate)."""
        return self.stop is None


class _Fallback(Exception):
    """A path too long for the index key: read the directory whole."""


def store_totals(conn: Connection, store_id: int) -> tuple[int, int, int] | None:
    """``(store id, files, characters)`` of a store from its counters, or ``None``."""
    return _first(conn, st.SELECT_STORE_TOTALS, {"p_sid": store_id})


def _first(conn: Connection, stmt: Any, params: dict[str, Any]) -> tuple[int, int, int] | None:
    try:
        row = raw.first_row(conn, stmt, params)
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading a store's counters") from exc
    return None if row is None else (int(row[0]), int(row[1]), int(row[2]))


def walk_directory(
    conn: Connection,
    store: int | str,
    directory: str,
    budget: int,
    hidden: Callable[[str], bool],
) -> Walk:
    """Read the files under ``directory`` as far as a listing of ``budget`` characters shows.

    Args:
        conn: the caller's connection (reads only).
        store: the store's id, or its key (the first read then finds the id: one statement
            for a directory whose files fit in one batch).
        directory: a canonical directory path.
        budget: the characters the listing's lines may take after its header line (its
            limit less the header and a line break); the walk stops once the lines it knows
            are longer (each line counted as at least its path, two characters and a break).
        hidden: whether a name is left out of listings (counted in sizes, never shown).

    Returns:
        :class:`Walk`; no rows (``total_files == 0``) when nothing is under ``directory``.

    Raises:
        StorageError / ConflictError: the database failed (translated).
    """
    try:
        try:
            walker = _Walker(conn, store, directory, budget, hidden)
            return walker.run()
        except _Fallback:
            stmt = SELECT_SIZES if directory == ROOT else SELECT_SIZES_DIR
            params: dict[str, Any] = {"p_sid": walker.sid}
            if directory != ROOT:
                params.update(prefix_params(directory))
            rows = sorted(raw.all_rows(conn, stmt, params))
            return Walk(rows=rows, total_files=len(rows))
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, f"listing {directory}") from exc


class _Walker:
    """One walk: a cursor over the rows in path order and the lines known so far."""

    def __init__(
        self,
        conn: Connection,
        store: int | str,
        directory: str,
        budget: int,
        hidden: Callable[[str], bool],
    ) -> None:
        self.conn, self.hidden, self.budget = conn, hidden, budget
        self.sid: int = store if isinstance(store, int) else 0
        self.key: str | None = None if isinstance(store, int) else store
        self.root = directory == ROOT
        self.prefix = directory + "/"
        self.end = directory + "0"  # every path under the directory sorts below this
        self.walk = Walk()
        self.start = self.prefix  # the next row is at or after start ...
        self.after = ""  # ... and after this path
        self.buffer: list[tuple[str, int]] = []
        self.at = 0  # the next row of the buffer
        self.exhausted = False
        # the first batch: the lines the budget holds when names are short (12 characters)
        self.batch = min(_MAX_BATCH, budget // (len(self.prefix) + 16) + 2)
        # lower bounds of the known lines' lengths, by listing position
        self.lines: list[tuple[tuple[str, ...], int]] = []
        self.length = len(directory) + 3  # the total line and its line break, at least
        self.seen_dir = ""  # the first-level directory whose line is counted
        self.read_files = 0
        self.read_chars = 0

    # -- reading -------------------------------------------------------------------------

    def _fetch(self) -> None:
        """The next batch, ascending, from the first row not accounted for."""
        params = {"p_lo": max(self.start, self.after), "p_hi": self.end, "p_n": self.batch}
        if self.key is not None:
            rows = raw.all_rows(self.conn, st.SELECT_WALK_BY_KEY, {"p_key": self.key, **params})
            if rows:
                self.sid, self.key = rows[0][2], None
                rows = [(r[0], r[1]) for r in rows]
        else:
            rows = raw.all_rows(self.conn, st.SELECT_WALK, {"p_sid": self.sid, **params})
        if rows and (len(self.end) >= PATH_KEY_CHARS or max(map(len, map(_path, rows))) >= PATH_KEY_CHARS):
            raise _Fallback
        self.exhausted = len(rows) < self.batch
        self.batch = min(self.batch * 2, _MAX_BATCH)
        self.buffer = rows
        self.at = 0

    def _subtree(self, prefix: str) -> tuple[int, int]:
        params = prefix_params(prefix[:-1])
        params.update({"p_sid": self.sid, "p_lo": prefix, "p_hi": prefix[:-1] + "0"})
        row = raw.first_row(self.conn, st.SELECT_SUBTREE, params)
        assert row is not None
        return int(row[0]), int(row[1])

    def _under(self, rows: list[tuple[str, int]], k: int, prefix: str) -> tuple[int, int]:
        """``(files, characters)`` under ``prefix``, whose first row is ``rows[k]``: summed from
        the batch when it holds them all (it reaches past them, or nothing follows), else one
        aggregate of the index range."""
        e = bisect_left(rows, (prefix[:-1] + "0",), k)
        if e < len(rows) or self.exhausted:
            return e - k, sum(map(itemgetter(1), rows[k:e]))
        return self._subtree(prefix)

    def _capped(self, lo: str, hi: str, n: int) -> int:
        row = raw.first_row(self.conn, st.SELECT_RANGE_CAPPED, {"p_sid": self.sid, "p_lo": lo, "p_hi": hi, "p_n": n})
        return int(row[0]) if row else 0

    def _exists(self, prefix: str) -> bool:
        """Whether a row not read yet lies under ``prefix`` (``".../x/"``): from the rows
        already fetched when they reach past it, else one index probe."""
        end = prefix[:-1] + "0"
        rows = self.buffer
        k = bisect_left(rows, (prefix,), self.at)
        if k < len(rows):
            return rows[k][0] < end
        if self.exhausted:
            return False
        return self._capped(prefix, end, 1) > 0

    # -- the walk ------------------------------------------------------------------------

    def _stop_at(self, path: str) -> tuple[str, ...]:
        """The smallest listing position a row at or after ``path`` (the first not read) can
        take: its own, or that of a directory named by a prefix of one of its first two names
        followed by a character before ``/`` (which sorts after it by path, before it by name)."""
        parts = path[len(self.prefix) :].split("/", 2)
        base = self.prefix
        for depth, name in enumerate(parts[:2]):
            for i in range(1, len(name)):
                if name[i] < "/" and not self.hidden(name[:i]) and self._exists(base + name[:i] + "/"):
                    return (*parts[:depth], name[:i])
            base += name + "/"
        return tuple(parts[:2])

    def _known(self, stop: tuple[str, ...]) -> int:
        return self.length - sum(chars for key, chars in self.lines if key >= stop)

    def run(self) -> Walk:
        """Walk until the known lines pass the budget or every row is read. One pass over
        each batch with local names (a store shows hundreds of lines: per-row cost counts)."""
        plen, hidden, budget = len(self.prefix), self.hidden, self.budget
        out, weights, lines = self.walk.rows, self.walk.weights, self.lines
        check_at = budget  # the next length at which the known lines are measured
        while True:
            if self.at >= len(self.buffer):
                if self.exhausted:
                    break
                self._fetch()
                continue
            rows, k = self.buffer, self.at
            start, after, length, seen = self.start, self.after, self.length, self.seen_dir
            files, chars = self.read_files, self.read_chars
            stopped = False
            while k < len(rows):
                path, size = rows[k]
                if path <= after or path < start:
                    k += 1
                    continue
                if length > check_at:
                    self.at, self.start, self.after, self.length = k, start, after, length
                    if self._known(self._stop_at(path)) > budget:
                        stopped = True
                        break
                    check_at = length + 256
                cut = path.find("/", plen)
                if cut < 0:  # a file of the first level
                    out.append((path, size))
                    files += 1
                    chars += size
                    after = path
                    if not hidden(path[plen:]):
                        lines.append(((path[plen:],), len(path) + 3))
                        length += len(path) + 3
                    k += 1
                    continue
                first = path[plen:cut]
                if hidden(first):  # a hidden first-level directory: one aggregate
                    n, c = self._under(rows, k, path[: cut + 1])
                    out.append((path, c))
                    weights[path] = n
                    files += n
                    chars += c
                    start, after = path[:cut] + "0", ""
                    k = bisect_left(rows, (start,), k)
                    continue
                if first != seen:
                    seen = first
                    lines.append(((first,), cut + 3))
                    length += cut + 3
                cut2 = path.find("/", cut + 1)
                second = path[cut + 1 : cut2] if cut2 >= 0 else path[cut + 1 :]
                if cut2 < 0:  # a file of the second level
                    out.append((path, size))
                    files += 1
                    chars += size
                    after = path
                    if not hidden(second):
                        lines.append(((first, second), len(path) + 3))
                        length += len(path) + 3
                    k += 1
                    continue
                n, c = self._under(rows, k, path[: cut2 + 1])  # a second-level directory
                out.append((path, c))
                if n != 1:
                    weights[path] = n
                files += n
                chars += c
                start, after = path[:cut2] + "0", ""
                if not hidden(second):
                    lines.append(((first, second), cut2 + 3))
                    length += cut2 + 3
                k = bisect_left(rows, (start,), k)
            self.at, self.start, self.after, self.length, self.seen_dir = k, start, after, length, seen
            self.read_files, self.read_chars = files, chars
            if stopped:
                self._finish(rows[k][0])
                return self.walk
        self.walk.total_files = self.read_files
        return self.walk

    def _finish(self, path: str) -> None:
        """Stop before ``path``: the rest rows (their totals from the counters or aggregates)."""
        walk = self.walk
        walk.stop = self._stop_at(path)
        totals = store_totals(self.conn, self.sid) if self.root else None
        files, chars = totals[1:] if totals is not None else self._subtree(self.prefix)
        walk.total_files = files
        # max(): under READ COMMITTED a delete committed since the rows were read
        files = max(files, self.read_files)
        rest_files, rest_chars = files - self.read_files, max(chars - self.read_chars, 0)
        parts = path[len(self.prefix) :].split("/", 1)
        if len(parts) == 2:  # stopped inside a first-level directory: its rest apart
            inside = self.prefix + parts[0] + "/"
            after = inside[:-1] + "0"
            if self._capped(after, self.end, _CAPPED) < _CAPPED:
                after_files, after_chars = self._range(after)
                in_files, in_chars = max(rest_files - after_files, 0), max(rest_chars - after_chars, 0)
            else:
                all_files, all_chars = self._subtree(inside)
                done_files = sum(walk.weights.get(p, 1) for p, _s in walk.rows if p.startswith(inside))
                done_chars = sum(s for p, s in walk.rows if p.startswith(inside))
                in_files, in_chars = max(all_files - done_files, 0), max(all_chars - done_chars, 0)
            if in_files:
                self._rest(inside + REST_NAME, in_chars, in_files)
            rest_files, rest_chars = max(rest_files - in_files, 0), max(rest_chars - in_chars, 0)
        if rest_files:
            self._rest(self.prefix + REST_NAME, rest_chars, rest_files)

    def _range(self, lo: str) -> tuple[int, int]:
        """``(files, characters)`` from ``lo`` to the end of the directory."""
        params = prefix_params(self.prefix[:-1])
        params.update({"p_sid": self.sid, "p_lo": lo, "p_hi": self.end})
        row = raw.first_row(self.conn, st.SELECT_SUBTREE, params)
        assert row is not None
        return int(row[0]), int(row[1])

    def _rest(self, path: str, chars: int, files: int) -> None:
        self.walk.rows.append((path, chars))
        self.walk.weights[path] = files
