"""The MEMORY tool's texts (:mod:`dbmemory.tool.messages`) as templates for the SQL
``run_command`` of the in-database API: one source for every text.

:func:`template` calls a message function with placeholders (a text placeholder is a
private-use marker, a number placeholder a large sentinel integer) and splits the result into
pieces: ``("lit", text)``, ``("text", name)`` and ``("int", name, offset, grouped)`` (a number
``name + offset``, with ``,`` thousands separators when ``grouped``, as ``f"{n:,}"`` writes
it). Each backend joins the pieces with its own concatenation and its own helpers for the
numbers, so a change to a message changes the rendered SQL (and ``--check`` fails until
``python -m dbmemory.sqlgen`` runs again).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dbmemory.core.paths import ROOT, normalize_path
from dbmemory.errors import InvalidPathError
from dbmemory.store.locks import require_not_root

__all__ = [
    "Text",
    "Int",
    "Value",
    "Joined",
    "Piece",
    "template",
    "root_refused_text",
    "join_pieces",
    "rule_of",
    "path_rule",
]

_TEXT_MARK = "\ue000"
_TEXT_END = "\ue001"
_INT_BASE = 7_000_000_000
_INT_STEP = 1_000_000


@dataclass(frozen=True)
class Text:
    """A text argument of a message, named as the SQL expression that gives it."""

    expr: str


@dataclass(frozen=True)
class Int:
    """A whole-number argument of a message, named as the SQL expression that gives it."""

    expr: str


@dataclass(frozen=True)
class Value:
    """A JSON value a message shows (its type name and ``_show``/``repr``): ``type_expr`` and
    ``show_expr`` are the SQL expressions of both; ``quoted_expr`` the SQL of ``quote_value``
    when the message quotes a text value."""

    type_expr: str = ""
    show_expr: str = ""


@dataclass(frozen=True)
class Joined:
    """An item of a sequence argument (``lines``) that stands for SQL text ``expr``."""

    expr: str


Piece = tuple[Any, ...]

_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+|\d+")


def template(function: Callable[..., str], *args: object, **kwargs: object) -> list[Piece]:
    """The pieces of ``function(*args, **kwargs)`` with each :class:`Text` / :class:`Int`
    argument as a placeholder; any other argument is passed as is (it picks a branch).

    Raises:
        ValueError: a number placeholder came out in a form this cannot read back.
    """
    texts: dict[str, str] = {}
    ints: list[str] = []

    def stand_in(value: object) -> object:
        if isinstance(value, Text):
            marker = f"{_TEXT_MARK}{len(texts)}{_TEXT_END}"
            texts[marker] = value.expr
            return marker
        if isinstance(value, Value):
            shown = f"{_TEXT_MARK}{len(texts)}{_TEXT_END}"
            texts[shown] = value.show_expr
            named = f"{_TEXT_MARK}{len(texts)}{_TEXT_END}"
            texts[named] = value.type_expr
            # whose repr and type name are the placeholders; a str for quote_value when the
            # message has no type name
            base: tuple[type, ...] = () if value.type_expr else (str,)
            kind = type(named, base, {"__repr__": lambda self: shown})
            return kind("x") if base else kind()
        if isinstance(value, Int):
            ints.append(value.expr)
            return _INT_BASE + (len(ints) - 1) * _INT_STEP
        return value

    def deep(value: object) -> object:
        if isinstance(value, list):
            return [_Str(stand_in(Text(v.expr))) if isinstance(v, Joined) else v for v in value]
        return stand_in(value)

    out = function(*(deep(a) for a in args), **{k: stand_in(v) for k, v in kwargs.items()})
    pieces: list[Piece] = []
    for part in re.split(f"({_TEXT_MARK}\\d+{_TEXT_END})", out):
        if part in texts:
            pieces.append(("text", texts[part]))
            continue
        at = 0
        for match in _NUMBER.finditer(part):
            value = int(match.group().replace(",", ""))
            index, offset = divmod(value - _INT_BASE, _INT_STEP)
            if value < _INT_BASE or index >= len(ints) or offset > 1000:
                continue
            if match.start() > at:
                pieces.append(("lit", part[at : match.start()]))
            pieces.append(("int", ints[index], offset, "," in match.group()))
            at = match.end()
        if at < len(part):
            pieces.append(("lit", part[at:]))
    return [p for p in pieces if p != ("lit", "")]


class _Str:
    """Shows a text placeholder through ``str()``."""

    def __init__(self, marker: object) -> None:
        self.marker = str(marker)

    def __str__(self) -> str:
        return self.marker


def root_refused_text(command: str) -> str:
    """The text of :func:`dbmemory.store.locks.require_not_root` for ``command``."""
    try:
        require_not_root(ROOT, command)
    except InvalidPathError as exc:
        return exc.message
    raise AssertionError("require_not_root accepted the root")  # pragma: no cover


def join_pieces(
    pieces: list[Piece],
    literal: Callable[[str], str],
    number: Callable[[str, bool], str],
    concat: Callable[[list[str]], str],
) -> str:
    """One SQL expression from :func:`template` pieces: ``literal(text)``, ``number(expr,
    grouped)`` for a number (``expr`` already with its offset), ``concat(parts)``."""
    parts = []
    for piece in pieces:
        if piece[0] == "lit":
            parts.append(literal(piece[1]))
        elif piece[0] == "text":
            parts.append(piece[1])
        else:
            expr = piece[1] if piece[2] == 0 else f"({piece[1]} + {piece[2]})"
            parts.append(number(expr, piece[3]))
    return concat(parts)


def rule_of(raw: str) -> str:
    """The message of :func:`dbmemory.core.paths.normalize_path`'s refusal of ``raw``."""
    try:
        normalize_path(raw)
    except InvalidPathError as exc:
        return exc.message
    raise AssertionError(f"{raw!r} was accepted")  # pragma: no cover


def path_rule(
    raw: str,
    shown_end: str,
    literal: Callable[[str], str],
    concat: Callable[[list[str]], str],
    values: dict[str, str] | None = None,
) -> str:
    """The rule text of :func:`normalize_path`'s refusal of the sample ``raw`` as one SQL
    expression (``literal(text)``, ``concat(parts)``): the text after ``shown_end``, with each
    sample value of ``values`` (its text in the sample) replaced by the SQL expression it maps
    to. Every backend renders the path rules from this one source."""
    message = rule_of(raw)
    rule = message[message.index(shown_end) + len(shown_end):]
    parts: list[str] = [rule]
    for sample, expr in (values or {}).items():
        split: list[str] = []
        for part in parts:
            if part.startswith("\x00"):
                split.append(part)
                continue
            pieces = part.split(sample)
            for i, piece in enumerate(pieces):
                if i:
                    split.append("\x00" + expr)
                split.append(piece)
        parts = split
    return concat([p[1:] if p.startswith("\x00") else literal(p) for p in parts if p != ""])
