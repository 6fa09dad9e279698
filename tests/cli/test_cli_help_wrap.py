"""Every ``--help`` wraps cleanly in an 80-column terminal: prose lines are full (the next word
would not have fitted), examples fit on one line each, and the groups' help does too."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.cli._help import reflow
from helpers import cli_commands

WIDTH = 80
TEXT_WIDTH = WIDTH - 2
"""rich pads the help text with one column on each side."""


def _groups_and_commands() -> list[list[str]]:
    paths: set[tuple[str, ...]] = {()}
    for path, _ in cli_commands():
        for end in range(1, len(path) + 1):
            paths.add(path[:end])
    return [list(path) for path in sorted(paths)]


PATHS = _groups_and_commands()


def _text_lines(output: str) -> list[str]:
    """The help's own text: the lines outside the boxes of options, arguments and commands,
    without the usage line."""
    lines, in_box = [], False
    for line in output.splitlines():
        if line.startswith("╭"):
            in_box = True
        if not in_box and not line.lstrip().startswith("Usage:"):
            lines.append(line.rstrip())
        if line.startswith("╰"):
            in_box = False
    return lines


def _ragged(lines: list[str]) -> list[str]:
    """Lines broken where the terminal folded them: an example that went on onto the next line
    (every example line runs ``dbmemory``), or prose broken before the line was full."""
    found, in_example = [], False
    for number, line in enumerate(lines[:-1]):
        following = lines[number + 1]
        if line.strip().startswith("Example"):
            in_example = True
        if not line.strip():
            rest = [text for text in lines[number + 1 :] if text.strip()]
            in_example = in_example and bool(rest) and "dbmemory" in rest[0]
            continue
        if not following.strip():
            continue
        indent, next_indent = len(line) - len(line.lstrip()), len(following) - len(following.lstrip())
        if line.rstrip().endswith("\\") or next_indent > 1:
            continue  # a shell line continued on purpose, or an indented example line
        if in_example or indent > 1:
            if indent > 1 or "dbmemory" not in following:
                found.append(f"an example folded by the terminal: {line.strip()!r} / {following.strip()!r}")
        elif next_indent <= 1 and not following.lstrip().startswith(("- ", "* ")):
            next_word = following.split()[0]
            if len(line) + 1 + len(next_word) <= TEXT_WIDTH + 1:
                found.append(f"a line broken early: {line.strip()!r} / {following.strip()!r}")
    return found


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "dbmemory" for p in PATHS])
def test_help_wraps_cleanly_at_80_columns(path: list[str]) -> None:
    result = CliRunner().invoke(
        app, [*path, "--help"], env={"COLUMNS": str(WIDTH), "TERMINAL_WIDTH": str(WIDTH)}, prog_name="dbmemory"
    )
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= WIDTH
    ragged = _ragged(_text_lines(result.stdout))
    assert ragged == [], f"dbmemory {' '.join(path)} --help:\n" + "\n".join(ragged)


def test_reflow_joins_prose_and_keeps_examples_and_lists() -> None:
    text = "First line\nof it.\n\nOne paragraph\nwrapped at 100.\n\nExample:\n\n    dbmemory a\n    dbmemory b\n\n- one\n- two\n  more\n\f hidden\nlines"
    assert reflow(text) == (
        "First line of it.\n\nOne paragraph wrapped at 100.\n\nExample:\n\n    dbmemory a\n"
        "    dbmemory b\n\n- one\n- two\n  more\n\f hidden\nlines"
    )


def test_the_loaded_commands_carry_reflowed_help() -> None:
    for _, command in cli_commands():
        command_: Any = command
        assert command_.help is None or command_.help == reflow(command_.help)
