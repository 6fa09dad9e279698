"""The ``dbmemory`` command line (typer + rich).

Each command group lives in its own module that exposes ``register(app)``; :data:`COMMAND_MODULES`
lists them in help order (append a name to add a module such as ``profile`` or ``mcp``).

Start-up stays fast: importing this package loads typer and dbmemory's light modules only.
SQLAlchemy, alembic and rich load inside the commands that use them, and nothing imports litellm.

Example:
    $ dbmemory db upgrade
    $ dbmemory agent enable SUPPORT
    $ dbmemory tool --agent SUPPORT '{"command": "view", "path": "/memories"}'
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from dbmemory.cli import _help  # noqa: F401 - flags show no <bool> in help
from dbmemory.cli._common import EXIT_CODES_HELP, DbMemoryGroup, set_debug

__all__ = ["app", "main", "COMMAND_MODULES", "register_commands"]

COMMAND_MODULES: tuple[str, ...] = (
    "replay", "chat", "db", "agent", "files", "files_transfer", "tool", "expire", "doctor", "profile",
    "items", "admin", "mcp", "demo",
)
"""Modules of :mod:`dbmemory.cli` whose ``register(app)`` adds their commands, in help order."""

app = typer.Typer(
    name="dbmemory",
    cls=DbMemoryGroup,
    help=(
        "Persistent memory for LLM agents inside your own relational database "
        "(Oracle, PostgreSQL, MariaDB/MySQL, SQLite).\n\n"
        "Every command that writes runs in a transaction of its own and commits it. "
        "Choose the database with --url or DBMEMORY_URL (default: a SQLite file in the user "
        "data directory).\n\n" + EXIT_CODES_HELP
    ),
    epilog=(
        "Example:\n\n    dbmemory db upgrade\n\n    dbmemory agent enable SUPPORT\n\n    "
        'dbmemory tool --agent SUPPORT \'{"command": "view", "path": "/memories"}\''
    ),
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"dbmemory {version('dbmemory')}")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            typer.echo("dbmemory (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help=(
                "After an error's one-line message, print the full traceback with the "
                "database driver's own error on stderr (passwords hidden)."
            ),
        ),
    ] = False,
) -> None:
    # The help text is the app's; this callback adds --version and the global --debug.
    set_debug(debug)


def register_commands(target: typer.Typer, modules: tuple[str, ...] = COMMAND_MODULES) -> None:
    """Import each ``dbmemory.cli.<name>`` module and call its ``register(target)``.

    Args:
        target: the typer app to add commands to.
        modules: module names under :mod:`dbmemory.cli`.
    """
    for name in modules:
        commands, groups = len(target.registered_commands), len(target.registered_groups)
        module = importlib.import_module(f"{__name__}.{name}")
        module.register(target)
        added = [
            c.name or c.callback.__name__.replace("_", "-")  # type: ignore[union-attr]
            for c in target.registered_commands[commands:]
        ]
        added += [
            g.name or g.typer_instance.info.name  # type: ignore[misc]
            for g in target.registered_groups[groups:]
        ]
        DbMemoryGroup.command_order.extend(n for n in added if isinstance(n, str))


register_commands(app)


def main() -> None:
    """Entry point of the ``dbmemory`` console script (``python -m dbmemory`` too)."""
    app(prog_name="dbmemory")
