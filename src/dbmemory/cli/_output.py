"""Terminal output of the commands: a rich console on stdout and tables. Imported by the command
modules (which load lazily), so ``dbmemory --help`` never loads rich through it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table


def console() -> Console:
    """A rich console on stdout that never interprets markup or highlights user data.

    On a terminal it uses the terminal's width; piped output gets 160 columns, so tables are
    not folded to 80.
    """
    out = Console(markup=False, highlight=False)
    if not out.is_terminal:
        out = Console(markup=False, highlight=False, width=160)
    return out


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    right: Sequence[str] = (),
) -> None:
    """Print a rich table for humans.

    Args:
        columns: column headers.
        rows: cell values (datetimes as ``YYYY-MM-DD HH:MM:SS`` UTC; None shows as ``-``).
        title: an optional caption above the table.
        right: headers of right-aligned (numeric) columns.
    """
    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*("-" if cell is None else _cell(cell) for cell in row))
    console().print(table)


def _cell(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


