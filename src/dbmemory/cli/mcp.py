"""``dbmemory mcp``: serve the MEMORY tool to MCP clients over stdio.

See :mod:`dbmemory.integrations.mcp_server`. Nothing but the MCP protocol is written to stdout;
errors before serving print one line on stderr.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dbmemory.cli._common import EXIT_CODES_HELP, UrlOption
from dbmemory.integrations.mcp_server import run

__all__ = ["register", "mcp"]


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command to ``app``."""
    app.command("mcp", no_args_is_help=True, epilog=EXIT_CODES_HELP)(mcp)


def mcp(
    agent: Annotated[str, typer.Option("--agent", metavar="AGENT", help="Agent code (its memory must be enabled).")],
    user: Annotated[
        str | None,
        typer.Option("--user", metavar="USER", help="User id: user-scoped stores, and the profile resource.", show_default=False),
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", metavar="SESSION", help="Session id (session-scoped stores).", show_default=False)
    ] = None,
    context: Annotated[
        list[str] | None,
        typer.Option("--context", metavar="KEY=VALUE", help="Run context pair (context-scoped stores); repeatable.", show_default=False),
    ] = None,
    url: UrlOption = None,
) -> None:
    """Serve the MEMORY tool (and the user's profile, read-only) to MCP clients over stdio.

    Uses the official MCP Python SDK. Each tool call runs in a transaction of its own and commits
    it. The agent's configuration is checked before serving: memory never enabled, a missing
    --context key, --user or --session fails at once with one line. Needs the mcp extra.

    Example:

        dbmemory mcp --agent SUPPORT --user u-42

        dbmemory mcp --agent DOCS --context document_id=7 \\
            --url postgresql://app@db/app

    Client configuration (e.g. Claude Desktop):

        {"command": "dbmemory",
         "args": ["mcp", "--agent", "SUPPORT", "--user", "u-42"]}
    """
    run(url=url, agent_code=agent, user_id=user, session_id=session, context=context or ())
