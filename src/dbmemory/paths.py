"""Memory paths: the one canonical spelling of every file key under ``/memories``.

A store is a flat set of rows keyed by path; directories are path prefixes only. Every path a
caller or a model passes goes through :func:`normalize_path` before it reaches SQL, so two
spellings of one file never become two keys and no spelling escapes ``/memories``.

Rules of :func:`normalize_path`, in the order they are checked (each failure raises
:class:`~dbmemory.errors.InvalidPathError` whose message gives the value, the rule and a remedy):

1. The value is a ``str`` and not empty.
2. The raw value is at most ``MAX_RAW_PATH_CHARS`` (10,000) characters, so a huge value is
   refused before any work is done.
3. It is encodable as UTF-8 (no lone surrogates).
4. Percent-escapes are decoded with :func:`urllib.parse.unquote` repeatedly until the text stops
   changing, at most ``MAX_DECODE_ROUNDS`` (10) rounds; an escape that is not valid UTF-8 is
   refused. (``%2e%2e`` is ``..``, ``%252e`` is ``%2e`` is ``.``.) Decoding is total: a literal
   ``%41`` can never be part of a key, as it always means ``A``.
5. Unicode NFC normalisation (``é`` typed as one or two code points is one key).
6. Refused characters: backslash; control characters (category ``Cc``: NUL, TAB, CR, LF, DEL,
   C1 controls); format characters (``Cf``: zero-width space/joiner, bidi overrides, BOM, soft
   hyphen), which are invisible and would make look-alike keys; line and paragraph separators
   (U+2028, U+2029); lone surrogates; and look-alikes of ``/`` and ``\\`` (fullwidth solidus,
   division slash, fraction slash, ...).
7. Repeated slashes collapse (``/memories//a`` is ``/memories/a``); one trailing slash is dropped.
8. The result is exactly ``/memories`` or starts with ``/memories/`` (``/memoriesX``,
   ``/memories_backup/x`` and ``/Memories/x`` are refused).
9. No segment is ``.`` or ``..`` or a look-alike of them (``．．``, ``‥``); ``first..last.md`` is a
   legal name. No segment starts or ends with whitespace (``/memories/notes.md `` would look like
   ``/memories/notes.md``).
10. At most ``MAX_PATH_CHARS`` (1,000) characters after normalisation.

Nothing here touches the database.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from urllib.parse import unquote

from dbmemory.errors import InvalidPathError

__all__ = [
    "ROOT",
    "MAX_PATH_CHARS",
    "MAX_RAW_PATH_CHARS",
    "MAX_DECODE_ROUNDS",
    "normalize_path",
    "is_root",
    "ancestors",
    "path_hash",
    "is_within",
    "quote_value",
]

ROOT = "/memories"
"""The directory every memory path lives under (the memory tool's root, as in Anthropic's)."""

MAX_PATH_CHARS = 1000
"""Longest canonical path, in characters."""

MAX_RAW_PATH_CHARS = 10 * MAX_PATH_CHARS
"""Longest value accepted before decoding, in characters (room for percent-encoding)."""

MAX_DECODE_ROUNDS = 10
"""Most rounds of percent-decoding before a path counts as encoded too deeply."""

_MAX_SHOWN_CHARS = 100

_SLASH_LOOKALIKES = frozenset(
    "\u2044"  # FRACTION SLASH
    "\u2215"  # DIVISION SLASH
    "\u2216"  # SET MINUS
    "\u2571"  # BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
    "\u2572"  # BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT
    "\u27cb"  # MATHEMATICAL RISING DIAGONAL
    "\u27cd"  # MATHEMATICAL FALLING DIAGONAL
    "\u29f5"  # REVERSE SOLIDUS OPERATOR
    "\u29f8"  # BIG SOLIDUS
    "\u29f9"  # BIG REVERSE SOLIDUS
    "\u2cc6"  # COPTIC SMALL LETTER OLD COPTIC ESH (drawn as a slash)
    "\u3033"  # VERTICAL KANA REPEAT MARK UPPER HALF
    "\ufe68"  # SMALL REVERSE SOLIDUS
    "\uff0f"  # FULLWIDTH SOLIDUS
    "\uff3c"  # FULLWIDTH REVERSE SOLIDUS
)

_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Cs": "a lone surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}

_SLASHES = re.compile(r"/{2,}")


def quote_value(value: str, max_chars: int = _MAX_SHOWN_CHARS) -> str:
    """Show a value in a message: ``repr``-escaped and clipped.

    Control and invisible characters appear escaped (``'\\x00'``, ``'\\u200b'``); a value longer
    than ``max_chars`` characters is cut and the full length is appended, so a 10 MB value never
    makes a 10 MB message.

    Args:
        value: the text to show.
        max_chars: how many characters of ``value`` to show at most.

    Returns:
        e.g. ``"'/memories/a/../b'"`` or ``"'aaaa...' (10,000,000 characters)"``.
    """
    if len(value) <= max_chars:
        return repr(value)
    return f"{value[:max_chars]!r}... ({len(value):,} characters)"


def _fail(raw: str, decoded: str | None, rule: str) -> InvalidPathError:
    shown = f"path {quote_value(raw)}"
    if decoded is not None and decoded != raw:
        shown += f" (decoded: {quote_value(decoded)})"
    return InvalidPathError(f"{shown} {rule}")


def _check_encodable(raw: str, text: str, decoded: str | None) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _fail(
            raw,
            decoded,
            f"contains a lone surrogate ({text[exc.start]!r}) at position {exc.start}, which is "
            "not valid Unicode text: pass the path as proper UTF-8 text",
        ) from None


def _decode(raw: str) -> str:
    text = raw
    for _ in range(MAX_DECODE_ROUNDS):
        try:
            decoded = unquote(text, errors="strict")
        except UnicodeDecodeError:
            raise _fail(
                raw,
                text,
                "contains a percent-escape that is not valid UTF-8 text: write the characters "
                "themselves instead of '%' escapes",
            ) from None
        if decoded == text:
            return text
        text = decoded
    raise _fail(
        raw,
        None,
        f"is percent-encoded more than {MAX_DECODE_ROUNDS} levels deep: write the path "
        "plainly, e.g. '/memories/notes.md'",
    )


def _check_characters(raw: str, text: str) -> None:
    for index, char in enumerate(text):
        if char == "\\":
            raise _fail(
                raw,
                text,
                f"contains a backslash at position {index}: separate segments with '/' "
                "(e.g. '/memories/a/b.md')",
            )
        if char in _SLASH_LOOKALIKES:
            raise _fail(
                raw,
                text,
                f"contains {char!r} (U+{ord(char):04X}), a look-alike of '/' or '\\', at position "
                f"{index}: separate segments with an ASCII '/' and do not use slash-like "
                "characters in names",
            )
        category = unicodedata.category(char)
        what = _REFUSED_CATEGORIES.get(category)
        if what is not None:
            raise _fail(
                raw,
                text,
                f"contains {what} ({char!r}, U+{ord(char):04X}) at position {index}: use only "
                "visible characters in memory paths",
            )


_DOT_LOOKALIKES = str.maketrans(
    dict.fromkeys(
        "\u3002"  # IDEOGRAPHIC FULL STOP
        "\uff61"  # HALFWIDTH IDEOGRAPHIC FULL STOP
        "\uff0e"  # FULLWIDTH FULL STOP
        "\ufe52"  # SMALL FULL STOP
        "\u2024"  # ONE DOT LEADER
        "\u0701"  # SYRIAC SUPRALINEAR FULL STOP
        "\u0702"  # SYRIAC SUBLINEAR FULL STOP
        "\ua60e"  # VAI FULL STOP
        "\u1362"  # ETHIOPIC FULL STOP
        "\u06d4",  # ARABIC FULL STOP
        ".",
    )
)


def _dot_skeleton(segment: str) -> str:
    """What a segment looks like once combining marks are dropped and dot look-alikes read as
    '.': ``'\u0307..'`` and ``'\u3002\u3002'`` both look like ``'..'``."""
    if len(segment) > 8:
        return segment
    decomposed = unicodedata.normalize("NFKD", segment)
    kept = "".join(c for c in decomposed if unicodedata.category(c) not in ("Mn", "Me", "Cf"))
    return kept.translate(_DOT_LOOKALIKES)


def _check_segments(raw: str, text: str) -> None:
    for segment in text[len(ROOT) + 1 :].split("/"):
        if segment == "..":
            raise _fail(raw, text, f"must stay under {ROOT}: remove '..' segments")
        if segment == ".":
            raise _fail(raw, text, "contains a '.' segment: remove it ('/memories/./a' is '/memories/a')")
        if unicodedata.normalize("NFKC", segment) in (".", "..") or _dot_skeleton(segment) in (
            ".",
            "..",
        ):
            raise _fail(
                raw,
                text,
                f"has a segment {quote_value(segment)} that looks like '.' or '..': "
                "use an ordinary file or directory name",
            )
        if segment[0].isspace() or segment[-1].isspace():
            raise _fail(
                raw,
                text,
                f"has a segment {quote_value(segment)} that starts or ends with whitespace: "
                "remove the surrounding spaces",
            )


def normalize_path(raw: object) -> str:
    """Return the canonical key of a memory path, or refuse it.

    Follows the path rules of Anthropic's memory tool (everything under ``/memories``, no escape
    by ``..``) and adds decoding, character and length rules so that every spelling of one file
    gives one key. See the module docstring for the full rule list.

    Args:
        raw: the path as received, e.g. ``"/memories//notes/%61.md/"``.

    Returns:
        The canonical path, e.g. ``"/memories/notes/a.md"``: ``"/memories"`` or
        ``"/memories/"`` followed by non-empty segments, NFC-normalised, at most 1,000
        characters. ``normalize_path(normalize_path(x)) == normalize_path(x)``.

    Raises:
        InvalidPathError: ``raw`` is not a string, is empty, too long, not UTF-8 encodable,
            percent-encoded more than 10 levels deep, contains a refused character, lies outside
            ``/memories``, or has a ``.``/``..`` segment or a segment with surrounding
            whitespace. The message shows the value (escaped, clipped to 100 characters), the
            rule and a remedy.
    """
    if not isinstance(raw, str):
        raise InvalidPathError(
            f"path must be a string, got {'null' if raw is None else type(raw).__name__}: "
            "pass text such as "
            f"'{ROOT}/notes.md'"
        )
    if type(raw) is str and len(raw) <= _CACHED_RAW_CHARS:
        return _normalize_cached(raw)
    return _normalize(raw)


_CACHED_RAW_CHARS = 1024
"""Raw paths up to this length are memoised (a tool command normalises its path up to three
times); longer ones are rare and normalised each time, so the cache stays small."""


@functools.lru_cache(maxsize=2048)
def _normalize_cached(raw: str) -> str:
    """:func:`_normalize`, memoised. A refused path raises every time: ``lru_cache`` stores
    only results, never exceptions."""
    return _normalize(raw)


def _normalize(raw: str) -> str:
    """The rules of :func:`normalize_path` for a ``str``; pure, so safe to memoise."""
    if raw == "":
        raise InvalidPathError(f"path is empty: pass a path under {ROOT}, such as '{ROOT}/notes.md'")
    if len(raw) > MAX_RAW_PATH_CHARS:
        raise _fail(
            raw,
            None,
            f"is {len(raw):,} characters long; the limit is {MAX_PATH_CHARS:,} characters: "
            "use a shorter path",
        )
    _check_encodable(raw, raw, None)
    text = unicodedata.normalize("NFC", _decode(raw))
    if text == "":
        raise _fail(raw, text, f"is empty after decoding: pass a path under {ROOT}")
    _check_characters(raw, text)
    text = _SLASHES.sub("/", text)
    if len(text) > 1 and text.endswith("/"):
        text = text[:-1]
    if text != ROOT and not text.startswith(ROOT + "/"):
        raise _fail(
            raw,
            text,
            f"must be {ROOT} or start with {ROOT}/: write it as '{ROOT}/<name>', "
            f"e.g. '{ROOT}/notes.md'",
        )
    if text != ROOT:
        _check_segments(raw, text)
    if len(text) > MAX_PATH_CHARS:
        raise _fail(
            raw,
            None,
            f"is {len(text):,} characters long after normalisation; the limit is "
            f"{MAX_PATH_CHARS:,} characters: use shorter names",
        )
    return text


def is_root(path: str) -> bool:
    """Tell whether a canonical path is the root directory ``/memories``."""
    return path == ROOT


def ancestors(path: str) -> list[str]:
    """List the proper ancestor directories of a canonical path, strictly below ``/memories``.

    Args:
        path: a canonical path (from :func:`normalize_path`).

    Returns:
        Nearest last, e.g. ``'/memories/a/b/c.md'`` -> ``['/memories/a', '/memories/a/b']``;
        ``[]`` for ``/memories`` and for a file directly in it.
    """
    if path == ROOT or not path.startswith(ROOT + "/"):
        return []
    parts = path[len(ROOT) + 1 :].split("/")
    return [ROOT + "/" + "/".join(parts[:depth]) for depth in range(1, len(parts))]


def path_hash(path: str) -> str:
    """Hash a canonical path for the unique key column.

    Returns:
        The SHA-256 hex digest (64 lowercase characters) of the UTF-8 encoding of ``path``.
    """
    return hashlib.sha256(path.encode("utf-8")).hexdigest()


def is_within(path: str, directory: str) -> bool:
    """Tell whether a canonical path is ``directory`` itself or lies below it.

    A plain prefix test would put ``/memories/ab`` inside ``/memories/a``; this one requires
    the ``/`` boundary. ``/memories`` contains every path.

    Args:
        path: a canonical path.
        directory: a canonical directory path.

    Returns:
        ``True`` if ``path == directory`` or ``path`` starts with ``directory + '/'``.
    """
    if directory == ROOT:
        return True
    return path == directory or path.startswith(directory + "/")
