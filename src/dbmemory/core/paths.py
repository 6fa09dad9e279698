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
5. Unicode normalisation: NFC first (``é`` typed as one or two code points is one key), and
   after rule 6 NFKC, which folds compatibility characters into their plain forms: fullwidth
   (``ｐ``), mathematical (``𝐩``), ligatures (``ﬁ``), the one-dot leader (``․`` is ``.``), so
   each of them spells the same key as the plain name. A character whose NFKC form holds
   ``/``, ``\\`` or ``%`` (``℀`` is ``a/c``, ``％``) is refused: it would add a segment or an
   escape. Keys are NFKC-normalised.
6. Refused characters: backslash; control characters (category ``Cc``: NUL, TAB, CR, LF, DEL,
   C1 controls); format characters (``Cf``: zero-width space/joiner, bidi overrides, BOM, soft
   hyphen), which are invisible and would make look-alike keys; every other Unicode
   ``Default_Ignorable_Code_Point`` (:data:`DEFAULT_IGNORABLE_RANGES`: variation selectors,
   the combining grapheme joiner, Hangul and halfwidth Hangul fillers, Mongolian free variation
   selectors, Khmer inherent vowels, tag characters, and the code points reserved as
   ignorable), which render as nothing, so ``a\ufe0f.md`` would list like ``a.md``; spaces
   other than the ASCII space (no-break, en, em, ideographic, ... and U+2800 BRAILLE PATTERN
   BLANK), which look like a space; line and paragraph separators (U+2028, U+2029); lone
   surrogates; and look-alikes of ``/`` and ``\\`` (fullwidth solidus, division slash,
   fraction slash, ...). The message names the character's code point (``U+FE0F``) and says
   to remove it.
7. Repeated slashes collapse (``/memories//a`` is ``/memories/a``); one trailing slash is dropped.
8. The result is exactly ``/memories`` or starts with ``/memories/`` (``/memoriesX``,
   ``/memories_backup/x`` and ``/Memories/x`` are refused).
9. No segment is ``.`` or ``..`` or a look-alike of them (``．．``, ``‥``, dots under any number
   of combining marks, whatever the segment's length); ``first..last.md`` is a legal name. No
   segment is made only of combining marks (nothing visible of its own). No segment starts or
   ends with whitespace (``/memories/notes.md `` would look like ``/memories/notes.md``).
10. At most ``MAX_PATH_CHARS`` (1,000) characters after normalisation.
11. No segment lists like another name (:mod:`dbmemory.core.lookalikes`): a combining mark
    left on an ASCII character, a word that mixes scripts (Cyrillic ``р`` in ``рrefs``), and a
    word whose letters all look like ASCII ones (Cyrillic ``асе``) are refused; the rule is
    stateless, after Unicode's UTS #39 data.

Nothing here touches the database.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from urllib.parse import unquote

from dbmemory.core.lookalikes import lookalike_problem
from dbmemory.errors import InvalidPathError

__all__ = [
    "ROOT",
    "MAX_PATH_CHARS",
    "MAX_RAW_PATH_CHARS",
    "MAX_DECODE_ROUNDS",
    "DEFAULT_IGNORABLE_RANGES",
    "SLASH_LOOKALIKES",
    "BLANK_LOOKALIKES",
    "DOT_LOOKALIKES",
    "is_default_ignorable",
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

SLASH_LOOKALIKES = frozenset(
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
"""Characters drawn like ``/`` or ``\\``, refused in paths (rule 6)."""

DEFAULT_IGNORABLE_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x00AD, 0x00AD, "SOFT HYPHEN"),  # Cf
    (0x034F, 0x034F, "COMBINING GRAPHEME JOINER"),  # Mn
    (0x061C, 0x061C, "ARABIC LETTER MARK"),  # Cf
    (0x115F, 0x1160, "HANGUL CHOSEONG FILLER..HANGUL JUNGSEONG FILLER"),  # Lo
    (0x17B4, 0x17B5, "KHMER VOWEL INHERENT AQ..KHMER VOWEL INHERENT AA"),  # Mn
    (0x180B, 0x180D, "MONGOLIAN FREE VARIATION SELECTOR ONE..THREE"),  # Mn
    (0x180E, 0x180E, "MONGOLIAN VOWEL SEPARATOR"),  # Cf
    (0x180F, 0x180F, "MONGOLIAN FREE VARIATION SELECTOR FOUR"),  # Mn
    (0x200B, 0x200F, "ZERO WIDTH SPACE..RIGHT-TO-LEFT MARK"),  # Cf
    (0x202A, 0x202E, "LEFT-TO-RIGHT EMBEDDING..RIGHT-TO-LEFT OVERRIDE"),  # Cf
    (0x2060, 0x2064, "WORD JOINER..INVISIBLE PLUS"),  # Cf
    (0x2065, 0x2065, "<reserved-2065>"),  # Cn
    (0x2066, 0x206F, "LEFT-TO-RIGHT ISOLATE..NOMINAL DIGIT SHAPES"),  # Cf
    (0x3164, 0x3164, "HANGUL FILLER"),  # Lo
    (0xFE00, 0xFE0F, "VARIATION SELECTOR-1..VARIATION SELECTOR-16"),  # Mn
    (0xFEFF, 0xFEFF, "ZERO WIDTH NO-BREAK SPACE"),  # Cf
    (0xFFA0, 0xFFA0, "HALFWIDTH HANGUL FILLER"),  # Lo
    (0xFFF0, 0xFFF8, "<reserved-FFF0>..<reserved-FFF8>"),  # Cn
    (0x1BCA0, 0x1BCA3, "SHORTHAND FORMAT LETTER OVERLAP..SHORTHAND FORMAT UP STEP"),  # Cf
    (0x1D173, 0x1D17A, "MUSICAL SYMBOL BEGIN BEAM..MUSICAL SYMBOL END PHRASE"),  # Cf
    (0xE0000, 0xE0000, "<reserved-E0000>"),  # Cn
    (0xE0001, 0xE0001, "LANGUAGE TAG"),  # Cf
    (0xE0002, 0xE001F, "<reserved-E0002>..<reserved-E001F>"),  # Cn
    (0xE0020, 0xE007F, "TAG SPACE..CANCEL TAG"),  # Cf
    (0xE0080, 0xE00FF, "<reserved-E0080>..<reserved-E00FF>"),  # Cn
    (0xE0100, 0xE01EF, "VARIATION SELECTOR-17..VARIATION SELECTOR-256"),  # Mn
    (0xE01F0, 0xE0FFF, "<reserved-E01F0>..<reserved-E0FFF>"),  # Cn
)
"""Unicode's ``Default_Ignorable_Code_Point`` set as inclusive ``(first, last, names)`` ranges
(4,174 code points): characters a renderer shows as nothing when it does not support them,
and most of them always. Source: the Unicode Character Database, file
``DerivedCoreProperties.txt``, property ``Default_Ignorable_Code_Point``, Unicode 14.0.0 (the
version of Python 3.11's :mod:`unicodedata`; https://www.unicode.org/Public/14.0.0/ucd/
DerivedCoreProperties.txt). Written down because :mod:`unicodedata` has no property look-up;
``tests/core/test_paths.py`` checks it against Perl's copy of the UCD when Perl is installed.
Categories: ``Cf`` (format), ``Mn`` (variation selectors, CGJ, Khmer, Mongolian), ``Lo`` (the
Hangul fillers) and ``Cn`` (code points reserved as ignorable)."""

_DEFAULT_IGNORABLE = frozenset(
    chr(code) for first, last, _ in DEFAULT_IGNORABLE_RANGES for code in range(first, last + 1)
)

BLANK_LOOKALIKES = frozenset({"\u2800"})  # BRAILLE PATTERN BLANK (So) renders as a space
"""Characters that render as a space without being in category ``Zs``, refused in paths."""


def is_default_ignorable(char: str) -> bool:
    """Tell whether one character is a Unicode ``Default_Ignorable_Code_Point``
    (see :data:`DEFAULT_IGNORABLE_RANGES`)."""
    return char in _DEFAULT_IGNORABLE


def _shown(char: str) -> str:
    return _escape_invisible(repr(char))


def _unicode_name(char: str) -> str:
    name = unicodedata.name(char, "")
    if name:
        return f" {name}"
    for first, last, names in DEFAULT_IGNORABLE_RANGES:
        if first <= ord(char) <= last and names.startswith("<"):
            return " (reserved as invisible)"
    return ""


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
        return _escape_invisible(repr(value))
    return f"{_escape_invisible(repr(value[:max_chars]))}... ({len(value):,} characters)"


def _escape_invisible(text: str) -> str:
    """``repr`` leaves printable invisible characters (variation selectors, Hangul fillers,
    no-break spaces) as they are; spell them ``\\uXXXX`` so a message shows where they are."""
    if text.isascii():
        return text
    return "".join(_escape_char(c) if _shown_escaped(c) else c for c in text)


def _shown_escaped(char: str) -> bool:
    return char in _DEFAULT_IGNORABLE or char in BLANK_LOOKALIKES or (
        char != " " and unicodedata.category(char) == "Zs"
    )


def _escape_char(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


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
        if char in SLASH_LOOKALIKES:
            raise _fail(
                raw,
                text,
                f"contains {char!r} (U+{ord(char):04X}), a look-alike of '/' or '\\', at position "
                f"{index}: separate segments with an ASCII '/' and do not use slash-like "
                "characters in names",
            )
        if char.isascii():
            if char.isprintable():
                continue
        category = unicodedata.category(char)
        what = _REFUSED_CATEGORIES.get(category)
        if what is not None:
            raise _fail(
                raw,
                text,
                f"contains {what} ({char!r}, U+{ord(char):04X}) at position {index}: use only "
                "visible characters in memory paths",
            )
        if char in _DEFAULT_IGNORABLE:
            raise _fail(
                raw,
                text,
                f"contains an invisible character ({_shown(char)}, U+{ord(char):04X}"
                f"{_unicode_name(char)}) at position {index}, so it would list like a name "
                "without it: remove it and use only visible characters in memory paths",
            )
        if (category == "Zs" and char != " ") or char in BLANK_LOOKALIKES:
            raise _fail(
                raw,
                text,
                f"contains a space look-alike ({_shown(char)}, U+{ord(char):04X}{_unicode_name(char)}) "
                f"at position {index}, which looks like an ordinary space: use the ASCII space "
                "(U+0020) or remove it",
            )


DOT_LOOKALIKES = str.maketrans(
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
        "\u06d4"  # ARABIC FULL STOP
        # from Unicode's confusables.txt (security data), mapped to FULL STOP:
        "\u0660"  # ARABIC-INDIC DIGIT ZERO
        "\u06f0"  # EXTENDED ARABIC-INDIC DIGIT ZERO
        "\ua4f8"  # LISU LETTER TONE MYA TI
        "\U00010a50"  # KHAROSHTHI PUNCTUATION DOT
        "\U0001d16d",  # MUSICAL SYMBOL COMBINING AUGMENTATION DOT
        ".",
    )
)
"""``str.translate`` table: each look-alike of ``.`` to ``.`` (the segment skeleton of rule 9)."""


def _dot_skeleton(segment: str) -> str:
    """What a segment looks like once combining marks are dropped and dot look-alikes read as
    '.': ``'\u0307..'`` and ``'\u3002\u3002'`` both look like ``'..'``; so does ``'.'``
    followed by a thousand combining marks and ``'.'``. Any length: there is no shortcut (a
    path is at most 1,000 characters, so this costs microseconds, and results are cached)."""
    if segment.isascii():
        return segment
    decomposed = unicodedata.normalize("NFKD", segment)
    kept = "".join(c for c in decomposed if unicodedata.category(c) not in ("Mn", "Me", "Cf"))
    return kept.translate(DOT_LOOKALIKES)


def _fold_compatibility(raw: str, text: str) -> str:
    """Rule 5's NFKC step on an NFC text that passed the character rules."""
    folded = unicodedata.normalize("NFKC", text)
    if folded == text:
        return text
    for index, char in enumerate(text):
        if char.isascii():
            continue
        form = unicodedata.normalize("NFKC", char)
        for made in ("/", "\\", "%"):
            if made in form:
                raise _fail(
                    raw,
                    text,
                    f"contains {char!r} (U+{ord(char):04X}) at position {index}, whose "
                    f"compatibility form (NFKC) {form!r} holds {made!r}: write the plain "
                    "characters you mean instead",
                )
    _check_characters(raw, folded)
    return folded


def _dot_lookalike(segment: str) -> bool:
    return segment not in (".", "..") and (
        unicodedata.normalize("NFKC", segment) in (".", "..")
        or _dot_skeleton(segment) in (".", "..")
    )


def _lookalike_dots(raw: str, text: str, segment: str) -> InvalidPathError:
    return _fail(
        raw,
        text,
        f"has a segment {quote_value(segment)} that looks like '.' or '..': "
        "use an ordinary file or directory name",
    )


def _check_dot_lookalikes(raw: str, text: str) -> None:
    """Rule 9's look-alikes of ``.`` and ``..``, named as such before NFKC folds them."""
    for segment in text.split("/"):
        if not segment.isascii() and _dot_lookalike(segment):
            raise _lookalike_dots(raw, text, segment)


def _check_segments(raw: str, text: str) -> None:
    for segment in text[len(ROOT) + 1 :].split("/"):
        if segment == "..":
            raise _fail(raw, text, f"must stay under {ROOT}: remove '..' segments")
        if segment == ".":
            raise _fail(raw, text, "contains a '.' segment: remove it ('/memories/./a' is '/memories/a')")
        skeleton = _dot_skeleton(segment)
        if _dot_lookalike(segment):
            raise _lookalike_dots(raw, text, segment)
        if skeleton == "":
            raise _fail(
                raw,
                text,
                f"has a segment '{''.join(_escape_char(c) for c in segment[:_MAX_SHOWN_CHARS])}' "
                "made only of combining marks, with no "
                "visible character of its own: use an ordinary file or directory name",
            )
        if segment[0].isspace() or segment[-1].isspace():
            raise _fail(
                raw,
                text,
                f"has a segment {quote_value(segment)} that starts or ends with whitespace: "
                "remove the surrounding spaces",
            )
        problem = lookalike_problem(segment)
        if problem is not None:
            raise _fail(raw, text, f"has a segment {quote_value(segment)} that {problem}")


def normalize_path(raw: object) -> str:
    """Return the canonical key of a memory path, or refuse it.

    Follows the path rules of Anthropic's memory tool (everything under ``/memories``, no escape
    by ``..``) and adds decoding, character and length rules so that every spelling of one file
    gives one key. See the module docstring for the full rule list.

    Args:
        raw: the path as received, e.g. ``"/memories//notes/%61.md/"``.

    Returns:
        The canonical path, e.g. ``"/memories/notes/a.md"``: ``"/memories"`` or
        ``"/memories/"`` followed by non-empty segments, NFKC-normalised, at most 1,000
        characters. ``normalize_path(normalize_path(x)) == normalize_path(x)``.

    Raises:
        InvalidPathError: ``raw`` is not a string, is empty, too long, not UTF-8 encodable,
            percent-encoded more than 10 levels deep, contains a refused character, lies outside
            ``/memories``, or has a ``.``/``..`` segment, a segment with surrounding
            whitespace, or a segment that looks like another name (rule 11). The message shows the value (escaped, clipped to 100 characters), the
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
    if not text.isascii():
        _check_dot_lookalikes(raw, text)
        text = _fold_compatibility(raw, text)
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
