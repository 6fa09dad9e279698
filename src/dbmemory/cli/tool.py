"""``dbmemory tool``: run one MEMORY tool command, as a model would, and commit it.

Useful to seed or inspect an agent's memory, to script sessions, and to see exactly what a
model sees: the output is the tool's text, unchanged.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dbmemory.cli._common import EXIT_FAILURE, JsonOption, UrlOption, print_json
from dbmemory.cli._database import transaction
from dbmemory.errors import InvalidArgumentError
from dbmemory.tool.memory_tool import MemoryTool
from dbmemory.tool.messages import ERROR_MARKER

__all__ = ["register", "tool", "parse_context"]


def register(app: typer.Typer) -> None:
    """Add the ``tool`` command to ``app``."""
    app.command("tool", no_args_is_help=True)(tool)


def parse_context(pairs: list[str] | None) -> dict[str, str] | None:
    """Turn ``--context key=value`` options into a run context.

    Returns:
        A dict, or None when no pair was given.

    Raises:
        InvalidArgumentError: a pair without ``=`` or with an empty key, or a key given twice.
    """
    if not pairs:
        return None
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgumentError(
                f"--context {pair!r} must look like KEY=VALUE, e.g. --context document_id=7"
            )
        if key in context:
            raise InvalidArgumentError(f"--context key {key!r} is given twice: give it once")
        context[key] = value
    return context


def tool(
    arguments: Annotated[
        str,
        typer.Argument(
            help=(
                'The command\'s JSON arguments, e.g. \'{"command": "view", "path": '
                '"/memories"}\'; - reads them from standard input (for large texts).'
            ),
            metavar="JSON",
            show_default=False,
        ),
    ],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="Agent code whose memory to use.",
            metavar="AGENT",
            show_default=False,
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user", help="User id, for user-scoped agents.", metavar="USER", show_default=False
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Session id, for session-scoped agents.",
            metavar="SESSION",
            show_default=False,
        ),
    ] = None,
    context: Annotated[
        list[str] | None,
        typer.Option(
            "--context",
            "-c",
            help="Run-context pair KEY=VALUE, for context-scoped agents (repeatable).",
            metavar="KEY=VALUE",
            show_default=False,
        ),
    ] = None,
    shared: Annotated[
        str | None,
        typer.Option(
            "--shared",
            help="Work on the shared store with this code instead of an agent's store.",
            metavar="CODE",
            show_default=False,
        ),
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run one MEMORY command (view, create, str_replace, insert, delete, rename) and commit.

    Prints the tool's text exactly as a model would get it. The exit code is 1 when that text
    is an error (it starts with 'Error: '); nothing was changed then. Runs in a transaction of
    its own and commits it.

    Large texts (a file_text of many lines, or one longer than the command line allows) are
    passed through standard input: give - as JSON and pipe the arguments in.

    Example:

        dbmemory tool --agent SUPPORT '{"command": "view", "path": "/memories"}'
        dbmemory tool -a SUPPORT \\
            '{"command": "create", "path": "/memories/a", "file_text": "hi"}'
        dbmemory tool -a DOCS -c document_id=7 \\
            '{"command": "view", "path": "/memories"}'
        jq -n --rawfile text notes.md \\
            '{command: "create", path: "/memories/notes.md", file_text: $text}' \\
            | dbmemory tool --shared POLICIES -
    """
    if (agent is None) == (shared is None):
        raise InvalidArgumentError("give exactly one of --agent AGENT or --shared CODE")
    if shared is not None and (user or session or context):
        raise InvalidArgumentError("--user, --session and --context need --agent, not --shared")
    if arguments == "-":
        arguments = typer.get_text_stream("stdin").read()
    run_context = parse_context(context)
    with transaction(url, "running a memory command") as conn:
        if shared is not None:
            memory = MemoryTool.for_store(conn, shared)
        else:
            # an agent that is not ready raises an error whose cli_message names the options
            memory = MemoryTool(conn, agent, user_id=user, session_id=session, run_context=run_context)
        text = memory.execute(arguments)
    failed = text.startswith(ERROR_MARKER)
    if as_json:
        print_json({"ok": not failed, "text": text})
    else:
        typer.echo(text)
    if failed:
        raise typer.Exit(EXIT_FAILURE)
