"""Pure text rendering for the MEMORY tool: listings, numbered file views, sizes, clipping.

Follows the output shapes of Anthropic's memory tool (``anthropic-sdk-python``,
``lib/tools/_beta_builtin_memory_tool.py``): a directory listing is a header and one
``<size>\\t<path>`` line per entry, two levels deep; a file view is a header and lines numbered
from 1, the number right-aligned in 6 columns, a TAB, then the line.

Lines are the pieces between ``"\\n"`` characters, everywhere in the tool (view, str_replace
line numbers, insert): a ``"\\r"`` before a ``"\\n"`` stays part of its line and is shown as is, so
what a model reads is what ``old_str`` must match (Anthropic's tool does the same). A final
``"\\n"`` ends the last line; it does not start an empty one, so ``"a\\r\\n\\tb\\r\\nc\\r\\n"``
shows 3 lines. Sizes are in characters (Python ``str`` length), never bytes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from itertools import count, groupby
from operator import itemgetter
from typing import Any

from dbmemory.core.paths import ROOT
from dbmemory.store.listing import Walk
from dbmemory.tool import messages
from dbmemory.tool.messages import ToolInputError

__all__ = [
    "LINE_NUMBER_WIDTH",
    "OUTPUT_LIMIT_CHARS",
    "EXCLUDED_NAMES",
    "hidden_name",
    "split_lines",
    "number_lines",
    "format_size",
    "render_listing",
    "listing_of_rows",
    "listing_of_walk",
    "render_file",
    "resolve_view_range",
    "clip_output",
]

LINE_NUMBER_WIDTH = 6
"""Columns of the right-aligned line number (Anthropic's tool: ``len(str(999999))``)."""

OUTPUT_LIMIT_CHARS = 16_000
"""Default longest tool output, in characters; longer output is cut at a line end."""

EXCLUDED_NAMES = frozenset({"node_modules"})
"""Names left out of listings besides hidden names (those starting with ``.``)."""

_UNITS = ("K", "M", "G", "T")


def split_lines(text: str) -> list[str]:
    """Split a file's text into its lines, the way every command of the tool counts them.

    Args:
        text: the file's text.

    Returns:
        The pieces between ``"\\n"`` characters; a final ``"\\n"`` adds no empty last line and
        ``""`` has no lines: ``"a\\nb\\n"`` -> ``["a", "b"]``, ``"a\\nb"`` -> ``["a", "b"]``,
        ``"\\n"`` -> ``[""]``, ``""`` -> ``[]``. ``"\\r"`` stays in its line.
    """
    if text == "":
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


_NUMBERED = f"{{:>{LINE_NUMBER_WIDTH}}}\t{{}}"  # a literal width formats faster than a nested one


def number_lines(lines: Iterable[str], first: int = 1) -> list[str]:
    """Prefix lines with their numbers: ``'     3\\tc'`` (6 columns, right-aligned, TAB)."""
    return list(map(_NUMBERED.format, count(first), lines))


def format_size(chars: int) -> str:
    """Format a size in characters the way ``du -h --apparent-size`` does, base 1024.

    Below 1,024 the plain number (``0``, ``512``, ``1023``); from there one decimal and a unit
    ``K``, ``M``, ``G``, ``T``, rounded to the nearest tenth (``1.0K``, ``5.5K``, ``1.2M``). A value
    that would round to ``1024.0`` of a unit is shown in the next unit (``1.0M``), never as
    ``1024.0K``. Unlike Anthropic's tool there is no ``B`` suffix: sizes are characters.

    Args:
        chars: a size in characters, ``>= 0``.

    Returns:
        The size text, at most 6 characters below a petacharacter.

    Raises:
        ValueError: ``chars`` is negative.
    """
    if chars < 0:
        raise ValueError(f"a size cannot be negative, got {chars}")
    if chars < 1024:
        return str(chars)
    if chars < 1_048_000:  # the common case: below 1023.4K, which never rounds up to 1024.0K
        return f"{chars / 1024:.1f}K"
    value = float(chars)
    for unit in _UNITS:
        value /= 1024
        if round(value, 1) < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f}{unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def hidden_name(name: str) -> bool:
    """Whether a listing leaves the name out (with everything below it): it starts with ``.``
    or is one of :data:`EXCLUDED_NAMES`."""
    return name.startswith(".") or name in EXCLUDED_NAMES


def render_listing(
    directory: str,
    entries: Iterable[tuple[str, int]],
    *,
    max_chars: int | None = OUTPUT_LIMIT_CHARS,
) -> str:
    """Render a directory listing, two levels deep, as Anthropic's memory tool does.

    Output: the header line, then ``<size>\\t<directory>`` with the directory's total size, then
    one line per entry up to two levels below the directory, sorted by path (a directory's
    entries follow it): ``<size>\\t<path>/`` for a subdirectory with the total size of the files
    under it at any depth, ``<size>\\t<path>`` for a file. Entries whose name starts with ``.``
    or is ``node_modules`` are left out, with everything below them (as Anthropic's tool does
    for hidden items); their sizes still count in the totals, which are the real footprint of
    each directory. A directory with no files (an empty ``/memories``) is a listing with the
    total ``0``, not an error.

    Args:
        directory: a canonical directory path (``/memories`` or below).
        entries: ``(file path, size in characters)`` for every file under ``directory`` at any
            depth, in any order; paths canonical.
        max_chars: longest output in characters; a longer listing is cut after a whole entry
            and ends with a note saying how many entries were shown. ``None`` for no limit.

    Returns:
        The listing text (no trailing newline).

    Raises:
        ValueError: an entry is not strictly below ``directory``, a path is given twice or as
            both a file and a directory, or holds a line break (a caller bug: the entries
            are not one store's canonical paths).
    """
    return _render_listing(directory, entries, max_chars, check=True)


def listing_of_rows(
    directory: str, rows: Iterable[tuple[str, int]], *, max_chars: int | None = OUTPUT_LIMIT_CHARS
) -> str:
    """:func:`render_listing` of rows the database selected for ``directory`` (its listing
    statements match exactly ``directory/`` and store canonical paths), so no row is checked
    again: the MEMORY tool's ``view`` of a directory. Same output, same errors otherwise."""
    return _render_listing(directory, rows, max_chars, check=False)


_CHUNK = 256
"""Entries formatted at a time: a clipped listing stops formatting soon after its limit."""
_first = itemgetter(0)
_second = itemgetter(1)


def listing_of_walk(directory: str, walk: Walk, *, max_chars: int | None = OUTPUT_LIMIT_CHARS) -> str:
    """:func:`listing_of_rows` of what :func:`dbmemory.store.listing.walk_directory` read for
    ``directory``: the same text as a listing of every file when the walk read them all or
    the listing fits; else the lines known (up to :attr:`~dbmemory.store.listing.Walk.stop`)
    cut at ``max_chars``, with the note of :func:`messages.listing_clipped`."""
    return _render_listing(
        directory, walk.rows, max_chars, check=False, stop=walk.stop, weights=walk.weights, ordered=True
    )


def _render_listing(
    directory: str,
    entries: Iterable[tuple[str, int]],
    max_chars: int | None,
    *,
    check: bool,
    stop: tuple[str, ...] | None = None,
    weights: dict[str, int] | None = None,
    ordered: bool = False,
) -> str:
    """The listing from the entries sorted by path: each level in one pass over its rows,
    with no lookup per row (:func:`_level`). ``stop``: no line from that listing position on
    (the rows past it are not all known); ``weights``: files a row stands for, where not 1
    (for the note of a clipped listing); ``ordered``: the entries are sorted already."""
    prefix = ROOT + "/" if directory == ROOT else directory + "/"
    if check:
        rows = sorted((path, size) for path, size in entries)
        plen = len(prefix)
        for path, _chars in rows:
            if len(path) <= plen or not path.startswith(prefix):
                raise ValueError(f"entry {path!r} is not below the directory {directory!r}")
    else:
        rows = entries if ordered else sorted(entries)  # type: ignore[assignment]
    total = sum(map(_second, rows))
    top = _level(rows, 0, len(rows), prefix, deeper=True, check=check)
    lines = [messages.view_directory_header(directory), f"{_size(total)}\t{directory}"]
    room = -1 if max_chars is None else max_chars + 1  # past it, the output is clipped for sure
    used = len(lines[0]) + 1 + len(lines[1]) + 1  # characters so far, a "\n" after each line
    for is_directory, group in groupby(top, key=len):  # runs of files, directories one by one
        for entry in group if is_directory == 3 else (list(group),):
            if is_directory == 3:
                lines.append(f"{_size(entry[1][0])}\t{entry[0]}/")
                used += len(lines[-1]) + 1
                entry = entry[2]
            for at in range(0, len(entry), _CHUNK):  # formatted only as far as it can show
                chunk = [
                    f"{size}\t{path}" if size.__class__ is int and 0 <= size < 1024 else _line(path, size)
                    for path, size in entry[at : at + _CHUNK]
                ]
                lines += chunk
                used += sum(map(len, chunk)) + len(chunk)
                if used > room >= 0:
                    break
            if used > room >= 0:
                break
        if used > room >= 0:
            break
    if stop is not None:
        lines = lines[: _first_unknown(lines, len(prefix), stop)]
    text = "\n".join(lines)
    if check and text.count("\n") != len(lines) - 1:
        raise ValueError("a path holds a line break: paths must be canonical")
    if stop is None and (max_chars is None or len(text) <= max_chars):
        return text
    # clipped: keep the whole entries that fit with the longest note; the lines kept end at
    # the last line break within the budget (the header and the total are always kept)
    files = len(rows) + (sum(weights.values()) - len(weights) if weights else 0)
    limit = len(text) + 1 if max_chars is None else max_chars
    # the longest note the numbers allow (a listing shows at most two lines per file), from
    # the file count alone, so a walk that did not read every row clips at the same place
    note = messages.listing_clipped(limit, min(2 * files, limit), files, files)
    budget = limit - len(note) - 1
    cut = len(text) if len(text) <= budget else text.rfind("\n", 0, max(budget + 1, 0))
    cut = max(cut, len(lines[0]) + 1 + len(lines[1]))
    kept = text.count("\n", 0, cut) + 1
    listed = _files_listed(lines[2:kept], rows, len(prefix), weights or {})
    note = messages.listing_clipped(limit, kept - 2, files - listed, files)
    return text[:cut] + "\n" + note


def _first_unknown(lines: list[str], start: int, stop: tuple[str, ...]) -> int:
    """Index of the first line (after the header and the total) at listing position ``stop``
    or after it (``len(lines)`` when none is)."""
    for i in range(2, len(lines)):
        path = lines[i].split("\t", 1)[1]
        if tuple(path[start:].rstrip("/").split("/")) >= stop:
            return i
    return len(lines)


def _files_listed(shown: list[str], rows: list[tuple[str, int]], start: int, weights: dict[str, int]) -> int:
    """Files a clipped listing accounts for: one per file line, every file under a
    second-level directory line (the listing never shows deeper); a first-level directory
    line accounts for none itself (its lines below do). A file line is always one file's own
    row; only directory lines are looked at one by one."""
    dirs = [line for line in shown if line[-1] == "/"]
    listed = len(shown) - len(dirs)
    for line in dirs:
        path = line[line.index("\t") + 1 :]
        if path.count("/", start) == 2:  # "a/b/": a second-level directory
            lo = bisect_left(rows, (path,))
            hi = bisect_left(rows, (path[:-1] + "0",), lo)
            listed += sum(weights.get(p, 1) for p, _s in rows[lo:hi]) if weights else hi - lo
    return listed


def _level(
    rows: list[tuple[str, int]], lo: int, hi: int, prefix: str, *, deeper: bool, check: bool
) -> list[Any]:
    """The entries of one level: ``rows[lo:hi]``, sorted by path, all start with ``prefix``
    (``".../"``).

    Sorted by path, the rows under one name are consecutive: everything under ``d/`` lies in
    ``[d/, d0)`` (``"0"`` is the character after ``"/"``), everything hidden in ``[prefix.,
    prefix/)``; those ranges are found by bisection and a directory's size is summed in C. The
    files between two subdirectories are taken as one slice of rows, so a shown file is its
    own row tuple. An entry is a file's ``(path, size)``, a directory's ``(path, [size])``, or
    with ``deeper`` ``(path, [size], its entries)``; the first item, the path without a final
    ``/``, orders the level by name (``a`` before ``a-b``, which the text ``a/x`` would not),
    so a level is sorted again only when it holds a directory. Whether the rest of a level
    holds a subdirectory at all is one count of ``/`` in its joined paths.
    """
    start = len(prefix)
    slashes = prefix.count("/")
    out: list[Any] = []
    mixed = False
    for a, b in _visible(rows, lo, hi, prefix):
        flags: list[bool] | None = None  # per row from ``first``: under a subdirectory?
        first = k = a
        while k < b:
            path = rows[k][0]
            cut = path.find("/", start)
            if cut < 0:  # a run of files, up to the next subdirectory
                if flags is None:
                    if "\n".join(map(_first, rows[k:b])).count("/") == (b - k) * slashes:
                        out += rows[k:b]  # no subdirectory in the rest: all files
                        break
                    first = k
                    flags = [row[0].find("/", start) >= 0 for row in rows[k:b]]
                try:
                    d = flags.index(True, k - first) + first
                except ValueError:
                    d = b
                out += rows[k:d]
                k = d
                continue
            sub = path[:cut]
            e = bisect_left(rows, (sub + "0",), k, b)
            size = [sum(map(_second, rows[k:e]))]
            if deeper:
                out.append((sub, size, _level(rows, k, e, sub + "/", deeper=False, check=check)))
            else:
                out.append((sub, size))
            mixed = True
            k = e
    if check and len({entry[0] for entry in out}) != len(out):
        raise ValueError("a path is listed twice, or is both a file and a directory")
    if mixed:
        out.sort()
    return out


def _visible(rows: list[tuple[str, int]], lo: int, hi: int, prefix: str) -> Iterable[tuple[int, int]]:
    """``rows[lo:hi]`` without the hidden names under ``prefix`` (``prefix.*`` and
    :data:`EXCLUDED_NAMES` with everything below them): the ranges that are left. A bisection
    per rule tells whether the level has such a name at all."""
    cuts = []
    dot = prefix + "."
    first = bisect_left(rows, (dot,), lo, hi)
    if first < hi and rows[first][0].startswith(dot):
        cuts.append((first, bisect_left(rows, (prefix + "/",), first, hi)))
    for name in EXCLUDED_NAMES:
        base = prefix + name
        first = bisect_left(rows, (base,), lo, hi)
        if first == hi or not rows[first][0].startswith(base):
            continue
        if rows[first][0] == base:
            cuts.append((first, first + 1))
        under = bisect_left(rows, (base + "/",), first, hi)
        if under < hi and rows[under][0].startswith(base + "/"):
            cuts.append((under, bisect_left(rows, (base + "0",), under, hi)))
    if not cuts:
        return ((lo, hi),)
    spans = []
    at = lo
    for a, b in sorted(cuts):
        if a > at:
            spans.append((at, a))
        at = max(at, b)
    if at < hi:
        spans.append((at, hi))
    return spans


def _line(path: str, size: int | list[int]) -> str:
    """One listing line: a file's ``(path, size)`` or a directory's ``(path, [size])``."""
    if size.__class__ is list:
        return f"{format_size(size[0])}\t{path}/"
    return f"{format_size(size)}\t{path}"  # type: ignore[arg-type]


def _size(chars: int) -> str:
    """:func:`format_size` with its common case (below 1,024) first."""
    return str(chars) if 0 <= chars < 1024 else format_size(chars)


def resolve_view_range(
    path: str, view_range: tuple[int, int], line_count: int
) -> tuple[int, int, bool]:
    """Check a ``view_range`` against a file's line count.

    Args:
        path: the file's canonical path (for messages).
        view_range: ``(start, end)``, 1-based and inclusive; ``end == -1`` means the last line.
        line_count: the file's number of lines (:func:`split_lines`).

    Returns:
        ``(start, end, clamped)``: the lines to show, ``end`` clamped to ``line_count`` when it
        was past the end (``clamped`` is then ``True``).

    Raises:
        ToolInputError: the file is empty; ``start < 1``; ``start > line_count``; or
            ``end < start`` and ``end != -1``. The message states the valid range.
    """
    start, end = view_range
    if line_count == 0:
        raise ToolInputError(messages.view_range_on_empty_file(path, start, end))
    if start < 1 or start > line_count or (end != -1 and end < start):
        raise ToolInputError(messages.view_range_out_of_range(path, start, end, line_count))
    if end == -1:
        return start, line_count, False
    if end > line_count:
        return start, line_count, True
    return start, end, False


def render_file(
    path: str,
    text: str,
    view_range: tuple[int, int] | None = None,
    *,
    max_chars: int | None = OUTPUT_LIMIT_CHARS,
) -> str:
    """Render a file view with line numbers, as Anthropic's memory tool does.

    Output: ``Here's the content of <path> with line numbers:`` then one line per file line,
    ``'{number:>6}\\t{line}'``. An empty file shows a note that it exists and is empty. When
    ``view_range`` ends past the last line, the lines up to the last one are shown followed by
    a note. When the output would pass ``max_chars``, it is cut after a whole line and ends with
    a note giving the next ``view_range``; a single line longer than the limit is cut inside.

    Args:
        path: the file's canonical path.
        text: the file's text.
        view_range: ``(start, end)``, 1-based, inclusive, ``end == -1`` for the last line; or
            ``None`` for the whole file. Use :func:`dbmemory.tool.args.coerce_view_range` to
            get it from raw arguments.
        max_chars: longest output in characters, notes included; ``None`` for no limit.

    Returns:
        The view text (no trailing newline).

    Raises:
        ToolInputError: ``view_range`` selects no line (see :func:`resolve_view_range`).
    """
    header = messages.view_file_header(path)
    lines = split_lines(text)
    if view_range is None:
        if not lines:
            return header + "\n" + messages.empty_file_note(path)
        first, last, clamped = 1, len(lines), False
    else:
        first, last, clamped = resolve_view_range(path, view_range, len(lines))
    shown = number_lines(lines[first - 1 : last], first)
    body = [header, *shown]
    if clamped:
        body.append(messages.view_range_clamped_note(view_range[1], first, last))  # type: ignore[index]
    output = "\n".join(body)
    if max_chars is None or len(output) <= max_chars:
        return output
    return _clip_numbered(header, shown, first, len(lines), max_chars)


def _clip_numbered(header: str, shown: list[str], first: int, total: int, max_chars: int) -> str:
    longest_note = messages.file_output_clipped(max_chars, total, total, total)
    budget = max_chars - len(longest_note) - 1
    used = len(header)
    kept = 0
    while kept < len(shown) and used + 1 + len(shown[kept]) <= budget:
        used += 1 + len(shown[kept])
        kept += 1
    if kept == 0:
        line_chars = len(shown[0]) - LINE_NUMBER_WIDTH - 1
        note = messages.line_clipped(max_chars, first, max(line_chars, 0), total)
        room = max(max_chars - len(header) - len(note) - 2, 0)
        return f"{header}\n{shown[0][:room]}\n{note}"
    note = messages.file_output_clipped(max_chars, first, first + kept - 1, total)
    return "\n".join([header, *shown[:kept], note])


def clip_output(text: str, limit: int = OUTPUT_LIMIT_CHARS, *, note: str | None = None) -> str:
    """Cut a text to at most ``limit`` characters at a line end and say so.

    Args:
        text: any tool output.
        limit: longest result in characters, the note included.
        note: the line to append when cutting; default :func:`messages.output_clipped`, which
            tells the model to use ``view_range`` or view a subdirectory.

    Returns:
        ``text`` unchanged if it fits; else the longest prefix ending at a line end (or, if the
        first line alone is too long, cut inside it) followed by ``"\\n"`` and the note.
    """
    if len(text) <= limit:
        return text
    note = messages.output_clipped(limit) if note is None else note
    budget = limit - len(note) - 1
    if budget <= 0:
        return note[:limit]
    cut = text.rfind("\n", 0, budget + 1)
    if cut <= 0:
        cut = budget
    return text[:cut] + "\n" + note
