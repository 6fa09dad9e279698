"""The ``dbmemory`` command line (typer + rich).

Each command group lives in its own module of this package that exposes ``register(app)``;
:data:`COMMANDS` lists every top-level command in help order with the modules that define it
and its one-line help (add a line there to add a command).

Start-up stays fast: the commands are lazy (:class:`~dbmemory.cli._common.LazyCommand`), so
``dbmemory --help`` imports typer, :mod:`dbmemory.cli._common` and :mod:`dbmemory.errors` only,
never SQLAlchemy, and a command's module (with SQLAlchemy, alembic and rich) is imported when
that command runs or shows its own help. Nothing imports litellm before a model is called.

Example:
    $ dbmemory db upgrade
    $ dbmemory agent enable SUPPORT
    $ dbmemory tool --agent SUPPORT '{"command": "view", "path": "/memories"}'
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

  # noqa: F401 - flags show no <bool> in help
from dbmemory.cli._common import EXIT_CODES_HELP, DbMemoryGroup, set_debug
from dbmemory.cli._help import flags_show_no_value

__all__ = ["app", "main", "COMMANDS"]

COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "replay": (("replay",), "Replay a recorded multi-session conversation turn by turn through the memory pipeline."),
    "eval": (("eval",), "Measure what dbmemory's memory gives the model (docs/eval.md)."),
    "chat": (("chat",), "Chat with an agent that has database memory, in the terminal."),
    "db": (("db",), "Install, inspect and remove dbmemory's tables."),
    "agent": (("agent",), "Turn memory on or off for an agent; set scope and caps."),
    "files": (("files", "files_transfer"), "List, read, write and delete the files of a store."),
    "tool": (("tool",), "Run one MEMORY command (view, create, str_replace, insert, delete, rename) and commit."),
    "expire": (("expire",), "Delete files untouched for --days days, in every store or one; print the count."),
    "doctor": (("doctor",), "Check the database: version, schema revision, settings, expiry job, contents."),
    "profile": (("profile",), "Show, edit and consolidate user profiles."),
    "items": (("items",), "Manage a user's memory items."),
    "search": (("search",), "Search a user's memory: earlier conversations, items, profile and files, best first."),
    "audit": (("admin",), "Print audit events, newest first (never any memory text: sizes only)."),
    "settings": (("admin",), "Show or change organisation settings."),
    "org-memory": (("admin",), "Show or replace the organisation memory."),
    "users": (("admin",), "Export or forget one user (DSAR); the memory switch and the opt-out."),
    "mcp": (("mcp",), "Serve the MEMORY tool (and the user's profile, read-only) to MCP clients over stdio."),
    "demo": (("demo",), "Run a scripted session of MEMORY tool calls against a new SQLite database."),
}
"""Every top-level command, in help order: name -> ``(modules of dbmemory.cli that define it, each
with ``register(app)``, one-line help)``. The module is imported only when its command runs
(:class:`~dbmemory.cli._common.LazyCommand`); a test checks that each line matches what the
module registers."""

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


DbMemoryGroup.lazy_commands = COMMANDS
flags_show_no_value()  # help shows flags without a <bool> value column


def main() -> None:
    """Entry point of the ``dbmemory`` console script (``python -m dbmemory`` too)."""
    app(prog_name="dbmemory")
