"""How ``dbmemory --help`` renders: flags without a value column.

Called by :mod:`dbmemory.cli` before any help is shown (typer and click are loaded already,
so this costs nothing at start-up).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperOption

__all__ = ["flags_show_no_value"]


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



