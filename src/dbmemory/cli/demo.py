"""``dbmemory demo``: a scripted session of MEMORY tool calls, printed call by call.

No model is involved: the calls are a fixed script (:data:`dbmemory.tool.demo.DEMO_CALLS`) that
shows every command and a few of the error texts a model gets back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from dbmemory.cli._common import EXIT_CODES_HELP, JsonOption, UrlOption, plural, print_json
from dbmemory.cli._output import console
from dbmemory.tool.demo import format_call, run_demo

__all__ = ["register", "demo"]


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command to ``app``."""
    app.command("demo", epilog=EXIT_CODES_HELP)(demo)


def demo(
    ctx: typer.Context,
    url: UrlOption = None,
    as_json: JsonOption = False,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh/--keep",
            help="Use a new temporary SQLite database (default) instead of --url/DBMEMORY_URL.",
        ),
    ] = True,
) -> None:
    """Run a scripted session of MEMORY tool calls against a new SQLite database.

    Creates the schema, enables memory for the agent 'demo-agent' (user scope, user u-1001),
    then sends a fixed list of tool calls (view, create, str_replace, insert, rename, delete,
    and three mistakes) and prints each call with the tool's answer. Each call commits.

    Example:

        dbmemory demo

        dbmemory demo --keep --url sqlite:///memory.db
    """
    source = ctx.get_parameter_source("url")
    if fresh and url is not None and source is not None and source.name == "COMMANDLINE":
        typer.echo(
            "note: --url is ignored without --keep: the demo runs on a new temporary SQLite "
            "database (add --keep to use the URL)",
            err=True,
        )

    calls: list[dict[str, Any]] = []
    out = console()

    def emit(call: dict[str, Any], result: str) -> None:
        if as_json:
            calls.append({"call": call, "result": result})
            return
        out.rule(call['command'], align="left")
        out.print(format_call(call), markup=False, highlight=False, style="cyan", soft_wrap=True)
        style = "red" if result.startswith("Error: ") else None
        out.print(result, markup=False, highlight=False, style=style)

    with tempfile.TemporaryDirectory(prefix="dbmemory-demo-") as tmp:
        target = f"sqlite:///{Path(tmp) / 'demo.db'}" if fresh else url
        if not as_json:
            out.print(f"dbmemory demo: a scripted session of tool calls (no model) on {target or 'the default database'}", markup=False)
        count = run_demo(target, emit)
    if as_json:
        print_json({"calls": calls})
    else:
        out.rule()
        out.print(f"{plural(count, 'tool call')}; each committed in its own transaction.", markup=False)
