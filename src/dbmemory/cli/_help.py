"""How ``dbmemory --help`` renders: flags without a value column, prose that wraps cleanly.

:func:`flags_show_no_value` is called by :mod:`dbmemory.cli` before any help is shown (typer
and click are loaded already, so this costs nothing at start-up); :func:`reflow_help` runs on
each command when its module is loaded.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from typer.core import TyperOption

__all__ = ["flags_show_no_value", "reflow_help", "reflow"]

_OWN_LINE = re.compile(r"(?:\s|[-*\u2022] |\d+[.)] )")
"""A line that starts a line of its own: indented (an example), or a list item."""


def reflow(text: str) -> str:
    """``text`` with each prose paragraph on one line, for the terminal to wrap.

    In typer's ``rich`` markup mode a help text keeps the line breaks of the docstring it came
    from, so a docstring wrapped at 100 columns shows in an 80-column terminal as a long line
    folded by the terminal and a short remainder. Here a line break inside a paragraph (text
    between blank lines) becomes a space, except before an indented line (an example, kept as
    written) or a list item (``- ``, ``* ``, ``1. ``), and after an indented line. Text after
    a ``\\f`` line (hidden from help) and ``\\b`` paragraphs (click's "keep as is") are unchanged.
    """
    head, cut, tail = inspect.cleandoc(text).partition("\f")
    paragraphs = []
    for paragraph in head.split("\n\n"):
        if paragraph.startswith("\b"):
            paragraphs.append(paragraph)
            continue
        lines: list[str] = []
        for line in paragraph.split("\n"):
            if lines and line.strip() and not _OWN_LINE.match(line) and not lines[-1].startswith(" "):
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs) + cut + tail


def reflow_help(command: Any) -> None:
    """Reflow (:func:`reflow`) the help, epilog and parameter help of ``command`` and of each
    of its subcommands, in place."""
    for attribute in ("help", "epilog"):
        text = getattr(command, attribute, None)
        if text:
            setattr(command, attribute, reflow(text))
    for param in getattr(command, "params", ()):
        if getattr(param, "help", None):
            param.help = reflow(param.help)
    for sub in getattr(command, "commands", {}).values():
        reflow_help(sub)


def flags_show_no_value() -> None:
    """Help shows a flag (``--json``, ``--fresh/--no-fresh``, ``--help``) without a value column.

    typer 0.2x prints the Python type of every option in the help table, ``<bool>`` for flags,
    which reads as if the flag took a value. This wraps :meth:`typer.core.TyperOption.
    display_type_rich` once so flags and counters show nothing; every other option is unchanged.
    """
    original = TyperOption.display_type_rich
    if getattr(original, "_dbmemory_flags", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) or getattr(self, "count", False):
            return None
        return original(self, ctx)

    display_type_rich._dbmemory_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]



