"""The Unicode facts the MEMORY tool's path and text rules use, as compact tables for the SQL
``run_command`` of the in-database API (every backend renders the same tables).

Python's rules read :mod:`unicodedata` (:func:`dbmemory.core.paths.normalize_path`,
:func:`dbmemory.core.paths.quote_value`, ``repr``); SQL has no such look-up, so the generator
classifies every code point once and writes the answers down. They come from the
:mod:`unicodedata` of the Python that renders the scripts; its Unicode version is named in the
scripts, and ``python -m dbmemory.sqlgen --check`` agrees only under the same version. The
predicates are those of :mod:`dbmemory.core.paths` (its look-alike sets, ``repr``), each
character's rule texts read from :func:`normalize_path`'s own messages.

A table is a text of fixed-width entries ``SSSSSSEEEEEE<tag>``: the first and last code point
of a range in six hex digits and a tag of the table's width, sorted, for a binary search; the
name table is ``|XXXXXX<suffix>`` entries. Computed on first use (about a second), then cached.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from importlib.metadata import version as _version

from confusable_homoglyphs import categories

from dbmemory.core.lookalikes import ascii_lookalike
from dbmemory.core.paths import (
    BLANK_LOOKALIKES,
    DEFAULT_IGNORABLE_RANGES,
    DOT_LOOKALIKES,
    SLASH_LOOKALIKES,
)
from dbmemory.sqlgen.tool_text import rule_of

__all__ = ["UNICODE_VERSION", "SCRIPT_NAMES", "CONFUSABLES_VERSION", "Tables", "tables", "CHARACTER_SAMPLES", "IGNORABLE", "RESERVED_SUFFIX"]

UNICODE_VERSION = unicodedata.unidata_version
"""The Unicode version of the tables (that of the rendering Python's :mod:`unicodedata`)."""

CONFUSABLES_VERSION = "confusable-homoglyphs " + _version("confusable-homoglyphs")
"""The look-alike data of rule 11 (:mod:`dbmemory.core.lookalikes`): its package and version."""

_NEUTRAL = frozenset({"COMMON", "INHERITED", "Unknown"})
_SYSTEMS = (
    frozenset({"HAN", "HIRAGANA", "KATAKANA", "LATIN"}),
    frozenset({"HAN", "BOPOMOFO", "LATIN"}),
    frozenset({"HAN", "HANGUL", "LATIN"}),
)
SCRIPT_NAMES: tuple[str, ...] = tuple(sorted(
    {str(a).title() for a in categories.categories_data["iso_15924_aliases"]} - {s.title() for s in _NEUTRAL}))
"""The scripts of the look-alike rule as its messages name them (``str.title``), sorted; a script
tag of :attr:`Tables.scripts` is an index into this tuple."""

CHARACTER_SAMPLES = {
    "SL": "\u2215",  # a look-alike of '/'
    "IN": "\ufe0f",  # an invisible character
    "WS": "\u3000",  # a space look-alike
    "Cf": "\u200b",  # a refused category (the words differ per category)
}
"""One character of each per-character refusal of :func:`normalize_path` (the rule texts are
read from its messages for these)."""


class Tables:
    """The tables (texts, see the module docstring)."""

    def __init__(self) -> None:
        nonprintable: list[tuple[int, int, str]] = []
        invisible: list[tuple[int, int, str]] = []
        refused: list[tuple[int, int, str]] = []
        skeleton: list[tuple[int, int, str]] = []
        names: list[str] = []
        nfc_check: set[int] = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))  # Hangul V, T
        ccc: list[tuple[int, int, str]] = []
        decompositions: list[str] = []
        compositions: list[str] = []
        self.what: dict[str, str] = {}
        """The words of each refused category (``"an invisible format character"``), from
        :func:`normalize_path`'s own messages."""
        code = 127
        while code < sys.maxunicode:
            code += 1
            if 0xD800 <= code <= 0xDFFF:
                continue
            char = chr(code)
            category = unicodedata.category(char)
            if category in ("Cn", "Co") and char not in IGNORABLE:
                # unassigned or private use: only repr escapes it; the whole run at once
                last = code
                while last < sys.maxunicode and unicodedata.category(chr(last + 1)) in ("Cn", "Co") \
                        and chr(last + 1) not in IGNORABLE and last + 1 != 0xD800:
                    last += 1
                _add(nonprintable, code, "", last)
                code = last
                continue
            if category[0] in "LN" and not unicodedata.decomposition(char) and code not in DOT_LOOKALIKES \
                    and char not in IGNORABLE and char not in SLASH_LOOKALIKES:
                continue  # a plain letter or digit: printable, accepted, visible in a skeleton
            # NFC (Hangul syllables are decomposed and composed by rule)
            nfd = unicodedata.normalize("NFD", char)
            combining = unicodedata.combining(char)
            if combining:
                _add(ccc, code, f"{combining:03d}")
                nfc_check.add(code)
            if nfd != char and not 0xAC00 <= code <= 0xD7A3:
                nfc_check.add(code)
                decompositions.append(f"|{code:06X}=" + "".join(f"{ord(c):06X}" for c in nfd))
                parts = unicodedata.decomposition(char).split()
                if len(parts) == 2 and not parts[0].startswith("<") \
                        and unicodedata.normalize("NFC", chr(int(parts[0], 16)) + chr(int(parts[1], 16))) == char:
                    compositions.append(f"|{int(parts[0], 16):06X}{int(parts[1], 16):06X}={code:06X}")
                    nfc_check.add(int(parts[1], 16))
            # repr and quote_value
            if not char.isprintable():
                _add(nonprintable, code, "")
            elif char in IGNORABLE or char in BLANK_LOOKALIKES or category == "Zs":
                _add(invisible, code, "")
            # dbmemory.core.paths._check_characters, in its order
            tag = None
            if char in SLASH_LOOKALIKES:
                tag = "SL"
            elif category in ("Cc", "Cf", "Zl", "Zp"):
                tag = category
            elif char in IGNORABLE:
                tag = "IN"
            elif category == "Zs" or char in BLANK_LOOKALIKES:
                tag = "WS"
            if tag is not None:
                _add(refused, code, tag)
                if unicodedata.normalize("NFC", char) != char:
                    continue  # never seen by the rule: NFC replaces it first
                if tag in ("IN", "WS") and _named(char):
                    names.append(f"|{code:06X}{_name_suffix(char)}")
                elif tag in ("IN", "WS"):
                    assert _name_suffix(char) == RESERVED_SUFFIX if code < 0xE0000 or code % 97 == 0 else True
                elif tag not in ("SL",) and tag not in self.what:
                    self.what[tag] = _what(char)
                continue
            # dbmemory.core.paths._dot_skeleton of the character alone
            shape = "".join(c for c in unicodedata.normalize("NFKD", char)
                            if unicodedata.category(c) not in ("Mn", "Me", "Cf")).translate(DOT_LOOKALIKES)
            if shape in ("", ".", ".."):
                _add(skeleton, code, {"": "M", ".": "1", "..": "2"}[shape])
        check: list[tuple[int, int, str]] = []
        for point in sorted(nfc_check):
            _add(check, point, "")
        self.nfc_check = _text(check)
        """Characters NFC may change or join to the one before (outside the Hangul syllables)."""
        self.ccc = _text(ccc)
        """Canonical combining classes other than 0 (three-digit tags)."""
        self.decompositions = "".join(decompositions) + "|"
        """``|XXXXXX=<code points>`` entries: each character's full canonical decomposition
        (six hex digits a code point)."""
        self.compositions = "".join(compositions) + "|"
        """``|AAAAAABBBBBB=CCCCCC`` entries: the primary composites of canonical composition."""
        self.nonprintable = _text(nonprintable)
        """What ``repr`` escapes (not ``str.isprintable()``)."""
        self.invisible = _text(invisible)
        """Printable characters :func:`quote_value` escapes as ``\\uNNNN`` all the same."""
        self.refused = _text(refused)
        """Characters :func:`normalize_path` refuses one by one (after NFC): ``SL`` a look-alike
        of a slash, ``IN`` invisible, ``WS`` a space look-alike, else the two-letter category."""
        self.skeleton = _text(skeleton)
        """What a character leaves of a segment's dot skeleton: ``M`` nothing (a combining mark),
        ``1`` one dot, ``2`` two dots (any other character leaves a visible one)."""
        self._fold_tables(nfc_check)
        self._lookalike_tables()
        self.names = "".join(names) + "|"
        """``|XXXXXX<suffix>`` entries: what the refusal of an invisible or space-like character
        shows after ``U+XXXX`` (its Unicode name); one without a name shows :data:`RESERVED_SUFFIX`."""


    def _fold_tables(self, nfc_check: set[int]) -> None:
        """Rule 5's NFKC fold: the full compatibility decompositions (NFKD), the characters NFKC
        may change, and those whose NFKC form holds '/', '\\' or '%'."""
        kdecompositions: list[str] = []
        kcheck = set(nfc_check)
        separators: list[tuple[int, int, str]] = []
        for code in range(128, sys.maxunicode + 1):
            char = chr(code)
            if 0xD800 <= code <= 0xDFFF or 0xAC00 <= code <= 0xD7A3 or not unicodedata.decomposition(char):
                continue
            nfkd = unicodedata.normalize("NFKD", char)
            if nfkd != char:
                kcheck.add(code)
                kdecompositions.append(f"|{code:06X}=" + "".join(f"{ord(c):06X}" for c in nfkd))
            form = unicodedata.normalize("NFKC", char)
            made = next((tag for sep, tag in (("/", "S"), ("\\", "B"), ("%", "P")) if sep in form), None)
            if made is not None:
                _add(separators, code, made)
        check: list[tuple[int, int, str]] = []
        for point in sorted(kcheck):
            _add(check, point, "")
        self.nfkc_check = _text(check)
        """Characters NFKC may change or join to the one before (outside the Hangul syllables)."""
        self.kdecompositions = "".join(kdecompositions) + "|"
        """``|XXXXXX=<code points>`` entries: each character's full compatibility decomposition."""
        self.separators = _text(separators)
        """Characters whose NFKC form holds ``/`` (tag ``S``), else ``\\`` (``B``), else ``%`` (``P``)."""

    def _lookalike_tables(self) -> None:
        """Rule 11 (:func:`dbmemory.core.lookalikes.lookalike_problem`): word characters and marks,
        scripts, the ASCII look-alikes and the names its messages show."""
        classes: list[tuple[int, int, str]] = []
        lookalikes: list[tuple[int, int, str]] = []
        cnames: list[str] = []
        for code in range(0, sys.maxunicode + 1):
            if 0xD800 <= code <= 0xDFFF:
                continue
            char = chr(code)
            category = unicodedata.category(char)
            if category in ("Mn", "Me", "Mc"):
                _add(classes, code, "M")
                cnames.append(f"|{code:06X} {unicodedata.name(char)}")
            elif category[0] in "LN":
                _add(classes, code, "W")
            looks = ascii_lookalike(char)
            if looks is not None:
                assert len(looks) <= 4
                _add(lookalikes, code, f"{len(looks)}{looks.encode().hex().upper():<8}".replace(" ", "0"))
                if str(categories.alias(char)) not in _NEUTRAL | {"LATIN"} and category not in ("Mn", "Me", "Mc"):
                    cnames.append(f"|{code:06X}{' ' + unicodedata.name(char) if _named(char) else ''}")
        scripts: list[tuple[int, int, str]] = []
        data = categories.categories_data
        for first, last, alias, _ in data["code_points_ranges"]:
            name = str(data["iso_15924_aliases"][alias])
            if name in _NEUTRAL:
                continue
            mask = sum(1 << i for i, system in enumerate(_SYSTEMS) if name in system)
            tag = f"{SCRIPT_NAMES.index(name.title()):02X}{mask}"
            if scripts and scripts[-1][2] == tag and scripts[-1][1] == first - 1:
                scripts[-1] = (scripts[-1][0], last, tag)
            else:
                scripts.append((first, last, tag))
        self.classes = _text(classes)
        """``M`` a combining mark (``Mn``, ``Me``, ``Mc``), ``W`` a letter or digit (``L*``, ``N*``)."""
        self.scripts = _text(scripts)
        """Script tags: two hex digits (index into :data:`SCRIPT_NAMES`) and the writing systems of
        UTS #39's Highly Restrictive level the script belongs to (bits 1, 2, 4); neutral scripts
        (Common, Inherited) have none."""
        self.lookalikes = _text(lookalikes)
        """The ASCII text each character looks like: its length and its UTF-8 in hex, padded to 8."""
        self.cnames = "".join(cnames) + "|"
        """``|XXXXXX NAME`` entries: the Unicode names rule 11's messages show (marks, and non-Latin
        letters that look like ASCII ones)."""


RESERVED_SUFFIX = " (reserved as invisible)"
"""What a refusal shows after ``U+XXXX`` for an invisible code point without a name (checked
against :func:`normalize_path` while the tables are built)."""

IGNORABLE = frozenset(chr(code) for first, last, _ in DEFAULT_IGNORABLE_RANGES for code in range(first, last + 1))


def _named(char: str) -> bool:
    try:
        unicodedata.name(char)
    except ValueError:
        return False
    return True


def _add(out: list[tuple[int, int, str]], code: int, tag: str, last: int | None = None) -> None:
    """Add ``code`` .. ``last`` (default: ``code``) with ``tag``, joined to the run before it."""
    end = code if last is None else last
    if out and out[-1][2] == tag and (out[-1][1] == code - 1 or (out[-1][1] == 0xD7FF and code == 0xE000)):
        out[-1] = (out[-1][0], end, tag)
    else:
        out.append((code, end, tag))


def _text(ranges: list[tuple[int, int, str]]) -> str:
    return "".join(f"{first:06X}{last:06X}{tag}" for first, last, tag in ranges)


def _name_suffix(char: str) -> str:
    """What the refusal shows between ``U+XXXX`` and ``)``."""
    message = rule_of(f"/memories/a{char}b")
    hex_code = f"U+{ord(char):04X}"
    rest = message[message.index(hex_code, message.index(" contains ")) + len(hex_code):]
    return rest[: rest.index(") at position")]


def _what(char: str) -> str:
    message = rule_of(f"/memories/a{char}b")
    rule = message[message.index(" contains ") + len(" contains "):]
    return rule[: rule.index(" (")]


@functools.cache
def tables() -> Tables:
    """The tables, computed once."""
    return Tables()
