"""Look-alike names: the part of the path rule (:func:`dbmemory.core.paths.normalize_path`, rule
11) that keeps a memory path from listing like another one.

After NFKC folding (rule 5: fullwidth, mathematical-bold, ligature and other compatibility
letters and the one-dot leader become their plain forms, so ``/memories/ｐｒｅｆｓ.md``,
``/memories/𝐩refs.md`` and ``/memories/prefs․md`` are ``/memories/prefs.md``), each segment is
read as **words**: maximal runs of letters, marks and digits (Unicode categories ``L*``,
``M*``, ``N*``). A segment is refused when

1. **a combining mark stands on an ASCII character** (or opens the segment): normalisation
   composes ``e`` + U+0301 into ``é``; a mark left over (a dot over ``.``, ``s`` + U+0308) draws
   on a character it is not part of, so ``prefs.̇md`` lists like ``prefs.md``;
2. **a word mixes scripts** (Unicode ``Script`` property; ``Common`` and ``Inherited`` are
   neutral): ``рrefs`` (Cyrillic ``р``, Latin ``refs``) is refused, ``заметки.md`` (a Cyrillic
   word, a Latin word) is not. Han with Hiragana, Katakana, Bopomofo or Hangul, and Latin
   with those, are one writing system (the combinations UTS #39 §5.2 "Highly Restrictive"
   allows);
3. **a word looks like an ASCII word** (a whole-script confusable, UTS #39 §4): every
   non-ASCII character of it is a letter of a script other than Latin (or a neutral one) that
   Unicode's confusables data maps to ASCII (Cyrillic ``асе`` looks like ``ace``). Latin
   letters with their own sound (``ı``, ``æ``, ``ß``) are never refused by this rule, so
   ``kırmızı`` stays a legal name.

ASCII segments pass untouched (confusable ASCII pairs such as ``l``/``1`` are left to the
font). The rule needs no database: a name is legal or not whatever the store holds. The SQL
API's file calls accept printable ASCII only (:data:`dbmemory.sqlgen.api_common.PATH_RULE`), so
they never accept a path this rule refuses; its ``run_command`` takes every path the MEMORY tool
takes and applies this rule and rule 5's NFKC fold in SQL, with Python's keys and messages, from
tables generated from the same data (:mod:`dbmemory.sqlgen.unicode_tables`).

Data: the ``confusable-homoglyphs`` package (MIT; its ``confusables.json`` is built from
Unicode's ``confusables.txt`` of UTS #39, its ``categories.json`` from the UCD's
``Scripts.txt``).
"""

from __future__ import annotations

import functools
import unicodedata

from confusable_homoglyphs import categories, confusables

__all__ = ["lookalike_problem", "ascii_lookalike"]

_NEUTRAL = frozenset({"COMMON", "INHERITED", "Unknown"})
_ONE_SYSTEM = (
    frozenset({"HAN", "HIRAGANA", "KATAKANA", "LATIN"}),
    frozenset({"HAN", "BOPOMOFO", "LATIN"}),
    frozenset({"HAN", "HANGUL", "LATIN"}),
)
_MARKS = frozenset({"Mn", "Me", "Mc"})
_LRM = "\u200e"  # the data wraps right-to-left characters in LEFT-TO-RIGHT MARKs


@functools.cache
def _ascii_table() -> dict[str, str]:
    """Every single non-ASCII character the confusables data pairs with a printable ASCII
    text: ``{"р": "p", "æ": "ae", ...}``."""
    table: dict[str, str] = {}
    for key, glyphs in confusables.confusables_data.items():
        char = key.replace(_LRM, "")
        if len(char) != 1 or char.isascii():
            continue
        for glyph in glyphs:
            text = str(glyph["c"]).replace(_LRM, "")
            if text and text.isascii() and text.isprintable():
                table.setdefault(char, text)
                break
    return table


def ascii_lookalike(char: str) -> str | None:
    """The ASCII text one character looks like after Unicode's confusables data (``"р"`` ->
    ``"p"``), or None."""
    return _ascii_table().get(char)


def _script(char: str) -> str:
    return str(categories.alias(char))


def _words(segment: str) -> list[str]:
    words: list[str] = []
    current: list[str] = []
    for char in segment:
        if unicodedata.category(char)[0] in "LMN":
            current.append(char)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


def _code(char: str) -> str:
    return f"U+{ord(char):04X}"


def _named(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"{char!r} ({_code(char)}{' ' + name if name else ''})"


def lookalike_problem(segment: str) -> str | None:
    """Why a segment (NFKC-normalised, checked by the other path rules) would list like another
    name, or None when it is legal (see the module docstring). ASCII segments are legal."""
    if segment.isascii():
        return None
    for index, char in enumerate(segment):
        if unicodedata.category(char) in _MARKS and (index == 0 or segment[index - 1].isascii()):
            base = "the start of the segment" if index == 0 else repr(segment[index - 1])
            return (
                f"holds a combining mark {_named(char)} on {base} that normalisation cannot join "
                "with it into one letter, so the name would list like one without the mark: "
                "use a precomposed letter (such as 'é') or remove the mark"
            )
    for word in _words(segment):
        if word.isascii():
            continue
        scripts = {_script(c) for c in word} - _NEUTRAL
        if len(scripts) > 1 and not any(scripts <= system for system in _ONE_SYSTEM):
            names = " and ".join(sorted(s.title() for s in scripts))
            example = next(
                (f" ({_named(c)} looks like {ascii_lookalike(c)!r})" for c in word
                 if _script(c) not in _NEUTRAL | {"LATIN"} and ascii_lookalike(c)),
                "",
            )
            return (
                f"holds a word {word!r} that mixes the scripts {names}, so it can look like a "
                f"word of one of them{example}: write each word in one script"
            )
        foreign = [c for c in word if not c.isascii()]
        looks = [ascii_lookalike(c) if _script(c) != "LATIN" else None for c in foreign]
        if all(looks):
            shown = "".join(c if c.isascii() else (ascii_lookalike(c) or c) for c in word)
            return (
                f"holds a word {word!r} whose letters all look like ASCII ones (it reads as "
                f"{shown!r}, after Unicode's confusables data), so it would list like that "
                "name: write it in ASCII letters, or use a word with letters of its own script"
            )
    return None
