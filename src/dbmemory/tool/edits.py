"""Pure text semantics of the MEMORY tool's ``str_replace`` and ``insert`` commands.

Follows Anthropic's memory tool (``anthropic-sdk-python``,
``lib/tools/_beta_builtin_memory_tool.py``): ``old_str`` must occur exactly once and is replaced
verbatim; ``insert_line`` counts lines from 0 (the top) to N (after the last line). Lines are the
pieces between ``"\\n"`` characters (see :func:`dbmemory.tool.render.split_lines`), so line
numbers agree with ``view``. Characters outside the edited span are never touched: ``\\r\\n``
line ends, tabs and a missing final newline all survive.

Nothing here reads or writes the store: the caller passes the current text and writes the
returned text (after its cap checks).
"""

from __future__ import annotations

from dbmemory.errors import CapExceededError
from dbmemory.tool import messages
from dbmemory.tool.messages import ToolInputError
from dbmemory.tool.render import number_lines, split_lines

__all__ = [
    "SNIPPET_CONTEXT_LINES",
    "MAX_SNIPPET_LINES",
    "MAX_REPORTED_MATCHES",
    "line_count",
    "apply_str_replace",
    "apply_insert",
]

SNIPPET_CONTEXT_LINES = 2
"""Unchanged lines shown before and after an edit in the success snippet (as Anthropic's)."""

MAX_SNIPPET_LINES = 40
"""Most lines in a success snippet; a longer change is cut with a note naming a view_range."""

MAX_REPORTED_MATCHES = 100
"""Most occurrences of ``old_str`` searched for when it is not unique."""


def line_count(text: str) -> int:
    """Number of lines of a file as ``view`` and ``insert`` count them.

    ``""`` has 0 lines, ``"a\\nb\\nc\\n"`` and ``"a\\nb\\nc"`` have 3, ``"\\n"`` has 1.
    """
    if text == "":
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _snippet(path: str, new_text: str, first: int, last: int) -> str:
    """Success text: header and lines ``first..last`` (0-based, inclusive) with context."""
    lines = split_lines(new_text)
    if not lines:
        return messages.file_edited_now_empty(path)
    first = min(first, len(lines) - 1)
    last = min(max(last, first), len(lines) - 1)
    start = max(0, first - SNIPPET_CONTEXT_LINES)
    stop = min(len(lines), last + SNIPPET_CONTEXT_LINES + 1)
    clipped = stop - start > MAX_SNIPPET_LINES
    if clipped:
        stop = start + MAX_SNIPPET_LINES
    body = number_lines(lines[start:stop], start + 1)
    text = messages.file_edited(path) + "\n" + "\n".join(body)
    if clipped:
        end = min(len(lines), last + SNIPPET_CONTEXT_LINES + 1)
        text += "\n" + messages.snippet_clipped(path, stop + 1, end)
    return text


def _check_size(new_chars: int, max_chars: int | None) -> None:
    """Refuse an edit whose result would break ``max_file_chars`` before any big string is
    built (the same error :func:`dbmemory.store.files.edit_file` raises for it)."""
    if max_chars is not None and new_chars > max_chars:
        raise CapExceededError(
            f"file text would be {new_chars:,} characters, over the cap max_file_chars = "
            f"{max_chars:,}: keep files small — split it, or merge and delete old content",
            cap="max_file_chars",
            limit=max_chars,
            actual=new_chars,
        )


def _occurrences(text: str, old_str: str, limit: int) -> list[int]:
    """Start offsets of ``old_str`` in ``text``, overlapping ones included, at most ``limit``."""
    found: list[int] = []
    position = text.find(old_str)
    while position != -1 and len(found) < limit:
        found.append(position)
        position = text.find(old_str, position + 1)
    return found


def apply_str_replace(
    path: str, text: str, old_str: str, new_str: str | None, *, max_chars: int | None = None
) -> tuple[str, str]:
    """Replace the one occurrence of ``old_str`` in a file's text.

    Anthropic's semantics: ``old_str`` (multi-line allowed) must occur exactly once, verbatim;
    overlapping occurrences count (``"aa"`` in ``"aaa"`` is ambiguous). ``new_str=None`` (the
    parameter omitted) deletes the match and never writes ``"None"``. Only the matched span
    changes.

    Args:
        path: the file's canonical path (for messages).
        text: the file's current text.
        old_str: the exact text to replace; not empty.
        new_str: the replacement, or ``None`` for ``""``.
        max_chars: the ``max_file_chars`` cap; checked on the new length before the new text
            and the snippet are built. ``None`` skips it (the caller checks).

    Returns:
        ``(new_text, message)``: the whole new text, and the success text: a header and a
        numbered snippet from 2 lines before to 2 lines after the replaced lines (at most
        40 lines), or a note that the file is now empty.

    Raises:
        ToolInputError: ``old_str`` is empty; it does not occur (the message adds a hint when
            the file has ``\\r\\n`` line ends and ``old_str`` would match with them); or it
            occurs more than once (the message gives the count and the line numbers). Each is
            a different text.
        CapExceededError: the new text would be longer than ``max_chars``.
    """
    if old_str == "":
        raise ToolInputError(messages.old_str_empty(path))
    found = _occurrences(text, old_str, MAX_REPORTED_MATCHES + 1)
    if not found:
        crlf = "\n" in old_str and "\r\n" not in old_str and old_str.replace("\n", "\r\n") in text
        raise ToolInputError(messages.old_str_not_found(path, old_str, crlf=crlf))
    if len(found) > 1:
        more = len(found) > MAX_REPORTED_MATCHES
        found = found[:MAX_REPORTED_MATCHES]
        lines = sorted({text.count("\n", 0, position) + 1 for position in found})
        raise ToolInputError(
            messages.old_str_not_unique(path, old_str, len(found), lines, more=more)
        )
    replacement = "" if new_str is None else new_str
    _check_size(len(text) - len(old_str) + len(replacement), max_chars)
    position = found[0]
    new_text = text[:position] + replacement + text[position + len(old_str) :]
    first = text.count("\n", 0, position)
    last = first + replacement.count("\n", 0, max(len(replacement) - 1, 0))
    return new_text, _snippet(path, new_text, first, last)


def apply_insert(
    path: str, text: str, insert_line: int, insert_text: str, *, max_chars: int | None = None
) -> tuple[str, str]:
    """Insert text after line ``insert_line`` of a file's text (0 = at the top).

    Anthropic's semantics (``insert_line`` in ``[0, N]``, N the number of lines; one trailing
    newline of ``insert_text`` is not doubled), with these rules for the line ends, chosen so
    that no other character of the file changes:

    * inserting before an existing line (``insert_line < N``): ``insert_text`` plus ``"\\n"``
      unless it already ends with one (``"a\\nb\\nc\\n"``, 0, ``"TOP"`` -> ``"TOP\\na\\nb\\nc\\n"``);
    * appending to a file that ends with ``"\\n"``: the same (``"a\\nb\\nc\\n"``, 3, ``"END"`` or
      ``"END\\n"`` -> ``"a\\nb\\nc\\nEND\\n"``);
    * appending to a file whose last line has no ``"\\n"``: a ``"\\n"`` to end that line, then
      ``insert_text`` as given (``"l1\\nl2"``, 2, ``"x"`` -> ``"l1\\nl2\\nx"``);
    * an empty file becomes ``insert_text`` as given (``""``, 0, ``"x"`` -> ``"x"``).

    A file whose every line ends with ``"\\r\\n"`` keeps that convention: the added line ends
    and the line breaks inside ``insert_text`` are ``"\\r\\n"`` (Anthropic's tool always adds
    ``"\\n"``, which would mix line ends). Otherwise ``"\\n"``. The file's own line ends are
    never changed.

    Args:
        path: the file's canonical path (for messages).
        text: the file's current text.
        insert_line: the line after which to insert, ``0..N``.
        insert_text: the text to insert (may hold several lines).
        max_chars: the ``max_file_chars`` cap; checked on the new length before the new text
            and the snippet are built. ``None`` skips it (the caller checks).

    Returns:
        ``(new_text, message)``: the whole new text and the success text with a numbered
        snippet around the inserted lines.

    Raises:
        ToolInputError: ``insert_line`` is outside ``[0, N]``; the message states the range.
        CapExceededError: the new text would be longer than ``max_chars``.
    """
    count = line_count(text)
    if insert_line < 0 or insert_line > count:
        raise ToolInputError(messages.insert_line_out_of_range(path, insert_line, count))
    newline = "\n"
    if "\r\n" in text and text.count("\r\n") == text.count("\n"):
        # A file whose every line ends with CRLF keeps that convention for inserted lines.
        newline = "\r\n"
        insert_text = insert_text.replace("\r\n", "\n").replace("\n", "\r\n")
    if text == "":
        new_chars = len(insert_text)
    elif insert_line == count and not text.endswith("\n"):
        new_chars = len(text) + len(newline) + len(insert_text)
    else:
        new_chars = len(text) + len(insert_text) + (0 if insert_text.endswith("\n") else len(newline))
    _check_size(new_chars, max_chars)
    if text == "":
        new_text = insert_text
    elif insert_line == count and not text.endswith("\n"):
        new_text = text + newline + insert_text
    else:
        block = insert_text if insert_text.endswith("\n") else insert_text + newline
        offset = _line_offset(text, insert_line)
        new_text = text[:offset] + block + text[offset:]
    added = max(line_count(insert_text), 1)
    return new_text, _snippet(path, new_text, insert_line, insert_line + added - 1)


def _line_offset(text: str, line: int) -> int:
    """Offset just after the ``line``-th ``"\\n"`` (0 for line 0)."""
    offset = 0
    for _ in range(line):
        offset = text.index("\n", offset) + 1
    return offset
