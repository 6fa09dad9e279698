"""An MCP server (official ``mcp`` Python SDK, stdio) serving the MEMORY tool over a database.

MCP clients (Claude Desktop, IDEs, agent frameworks) get the six MEMORY commands as one tool,
``memory``, with the same JSON schema and the same texts as every other dbmemory entry point,
and, when a user is given, that user's profile as a read-only resource
(``dbmemory://profile/<encoded user id>``, Markdown).

**Each tool call is its own committed transaction**: the server opens a transaction per call on
its engine, runs the command, and commits (a failed command changes no row). The agent's
configuration (scope, caps) decides the store, exactly as in :class:`dbmemory.tool.MemoryTool`;
the server checks it at start-up, so a context-scoped agent without its key, or an agent whose
memory was never enabled, fails at once with one line on stderr.

Run it (the schema must exist: ``dbmemory db upgrade``; the agent enabled: ``dbmemory agent
enable``)::

    dbmemory mcp --agent SUPPORT --user u-42
    python -m dbmemory.integrations.mcp_server --agent SUPPORT --url sqlite:///memory.db

Client configuration (Claude Desktop ``mcpServers`` entry)::

    {"dbmemory": {"command": "dbmemory", "args": ["mcp", "--agent", "SUPPORT", "--user", "u-42"]}}

Needs the ``mcp`` extra (``pip install -e ".[mcp]"``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from sqlalchemy.engine import Engine

from dbmemory.agent.setup import ensure_schema
from dbmemory.db.engine import connect, create_engine, redact_url
from dbmemory.errors import DbMemoryError, InvalidArgumentError, MissingDependencyError, extra_hint
from dbmemory.items.search_tool import (
    SEARCH_INPUT_SCHEMA,
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    run_search_tool,
)
from dbmemory.profile.store import encode_user_id, read_profile
from dbmemory.store.resolve import check_run_ready
from dbmemory.store.units import committing
from dbmemory.tool.memory_tool import MemoryTool
from dbmemory.tool.messages import error_text
from dbmemory.tool.schema import tool_schema
from dbmemory.tool.storage_messages import internal_error, storage_unavailable

__all__ = [
    "SERVER_NAME",
    "PROFILE_URI_PREFIX",
    "McpMemoryServer",
    "build_server",
    "serve_stdio",
    "parse_context",
    "main",
    "run",
]

log = logging.getLogger(__name__)

SERVER_NAME = "dbmemory"
"""The server name announced to MCP clients."""

PROFILE_URI_PREFIX = "dbmemory://profile/"
"""URI prefix of the profile resource; the user id follows, encoded as in store keys."""

MCP_EXTRA_HINT = extra_hint("mcp")


def _import_mcp() -> tuple[Any, Any]:
    """The MCP SDK's types module and Server class.

    Raises:
        MissingDependencyError: the ``mcp`` extra is not installed (the message names the pip
            command).
    """
    try:
        import mcp_types as types  # optional dependency (mcp extra), imported on use
        from mcp.server import Server  # optional dependency (mcp extra), imported on use
        from mcp.server.stdio import stdio_server  # noqa: F401 - serve_stdio needs it
    except ImportError as exc:
        raise MissingDependencyError(
            f"the MCP server needs the mcp package, which is not installed: {MCP_EXTRA_HINT}"
        ) from exc
    return types, Server


def package_version() -> str:
    """dbmemory's installed version (``serverInfo.version``), or ``"0+unknown"`` from a bare tree."""
    try:
        return version("dbmemory")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def parse_context(pairs: Sequence[str]) -> dict[str, str]:
    """Parse ``--context k=v`` options into a run context.

    Args:
        pairs: texts such as ``"document_id=7"``.

    Returns:
        ``{"document_id": "7"}``.

    Raises:
        InvalidArgumentError: a text without ``=`` or with an empty key.
    """
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(f"--context {pair!r} must be key=value, e.g. document_id=7")
        context[key.strip()] = value.strip()
    return context


@dataclass
class McpMemoryServer:
    """The server's state: which store its MEMORY tool addresses, and whose profile it shows.

    Attributes:
        engine: the database (each tool call opens and commits its own transaction on it).
        agent_code: the agent whose configuration names the store.
        user_id: the user (user-scoped stores and the profile resource), or None.
        session_id: the session (session-scoped stores), or None.
        run_context: the run context (context-scoped stores).
        root_folder: the profile namespace (default ``user-memory``).
    """

    engine: Engine
    agent_code: str
    user_id: str | None = None
    session_id: str | None = None
    run_context: Mapping[str, str] = field(default_factory=dict)
    root_folder: str = "user-memory"

    def check(self) -> None:
        """Check at start-up that the agent's store can be named.

        Raises:
            NotFoundError: memory was never enabled for the agent.
            InvalidScopeError: disabled, or a missing context key, user id or session id.
            StorageError: the database cannot be reached or has no schema.
        """
        with connect(self.engine, "checking the agent's store") as conn:
            check_run_ready(
                conn, self.agent_code, user_id=self.user_id, session_id=self.session_id, run_context=self.run_context
            )

    def call_memory(self, arguments: object) -> str:
        """Run one MEMORY command in its own committed transaction; never raises.

        Returns:
            The tool's text (a failure starts with ``"Error: "``).
        """
        try:
            with committing(self.engine, "committing the memory change", single_unit=True) as conn:
                tool = MemoryTool(
                    conn,
                    self.agent_code,
                    user_id=self.user_id,
                    session_id=self.session_id,
                    run_context=self.run_context,
                    actor=f"mcp agent={self.agent_code}" + (f" user={self.user_id}" if self.user_id else ""),
                )
                return tool.execute(arguments if arguments is not None else {})
        except DbMemoryError as exc:
            log.warning("MCP memory call failed: %s", exc)
            return error_text(exc.message)
        except Exception:
            log.exception("MCP memory call failed unexpectedly")
            try:
                return error_text(storage_unavailable())
            except Exception:  # pragma: no cover
                return error_text(internal_error())

    def call_search(self, arguments: object) -> str:
        """Run one ``memory_search`` call for the server's user in a read-only transaction of
        its own (:func:`dbmemory.items.search_tool.run_search_tool`); never raises."""
        try:
            with self.engine.connect() as conn:
                try:
                    return run_search_tool(conn, arguments, user_id=self.user_id)
                finally:
                    conn.rollback()
        except Exception:
            log.exception("MCP memory_search call failed unexpectedly")
            return error_text(storage_unavailable())

    def profile_uri(self) -> str | None:
        """The profile resource's URI, or None without a user."""
        if self.user_id is None:
            return None
        return PROFILE_URI_PREFIX + encode_user_id(self.user_id)

    def read_profile_text(self) -> str:
        """The user's profile file text, or a one-line note when there is none yet."""
        if self.user_id is None:
            return "(no user given: start the server with --user to read a profile)"
        with connect(self.engine, "reading the profile") as conn:
            record = read_profile(conn, self.user_id, root_folder=self.root_folder)
        return record.text if record is not None else "(no profile yet for this user)"


def build_server(state: McpMemoryServer) -> Any:
    """Build the low-level MCP :class:`mcp.server.Server` for ``state``.

    Handlers: ``tools/list`` (the ``memory`` tool with dbmemory's JSON schema, and
    ``memory_search`` when a user is given), ``tools/call``
    (:meth:`McpMemoryServer.call_memory` in a worker thread; ``isError`` set for error texts),
    ``resources/list`` and ``resources/read`` (the profile, when a user is given).

    Raises:
        MissingDependencyError: the ``mcp`` package is not installed.
    """
    types, Server = _import_mcp()
    schema = tool_schema()["function"]
    tool = types.Tool(
        name=schema["name"],
        description=schema.get("description"),
        input_schema=schema["parameters"],
        annotations=types.ToolAnnotations(title="Database memory", destructive_hint=True, idempotent_hint=False),
    )

    search = types.Tool(
        name=SEARCH_TOOL_NAME,
        description=SEARCH_TOOL_DESCRIPTION,
        input_schema=SEARCH_INPUT_SCHEMA,
        annotations=types.ToolAnnotations(title="Search the user's memory", read_only_hint=True),
    )
    offered = [tool, search] if state.user_id is not None else [tool]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=offered)

    async def call_tool(ctx: Any, params: Any) -> Any:
        if params.name == tool.name:
            text = await asyncio.to_thread(state.call_memory, params.arguments or {})
        elif params.name == SEARCH_TOOL_NAME and state.user_id is not None:
            text = await asyncio.to_thread(state.call_search, params.arguments or {})
        else:
            text = f"Error: there is no tool named {params.name!r}: use {tool.name!r}"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=text.startswith("Error: ")
        )

    async def list_resources(ctx: Any, params: Any) -> Any:
        uri = state.profile_uri()
        resources = []
        if uri is not None:
            resources.append(
                types.Resource(
                    name="profile",
                    title="What I know about you (user profile)",
                    uri=uri,
                    description="The user's memory profile (read-only Markdown with frontmatter).",
                    mime_type="text/markdown",
                )
            )
        return types.ListResourcesResult(resources=resources)

    async def read_resource(ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        if uri != state.profile_uri():
            # a protocol error for the client, not a server-side traceback
            from mcp.shared.exceptions import (
                MCPError,  # optional dependency (mcp extra), imported on use
            )
            from mcp_types import INVALID_PARAMS  # optional dependency (mcp extra), imported on use

            listed = state.profile_uri()
            hint = f"the only resource is {listed!r}" if listed else "this server has no resources (start it with --user)"
            raise MCPError(code=INVALID_PARAMS, message=f"unknown resource {uri!r}: {hint}")
        text = await asyncio.to_thread(state.read_profile_text)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)]
        )

    return Server(
        SERVER_NAME,
        version=package_version(),
        instructions=(
            "Persistent memory in a database. ALWAYS view /memories first; record decisions, "
            "preferences and progress as you go; keep files small and current."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


async def serve_stdio(state: McpMemoryServer) -> None:
    """Serve ``state`` over stdin/stdout until the client closes the connection."""
    from mcp.server.stdio import stdio_server  # optional dependency (mcp extra), imported on use

    server = build_server(state)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dbmemory.integrations.mcp_server",
        description="Serve the dbmemory MEMORY tool over MCP (stdio). Each tool call commits.",
    )
    parser.add_argument("--agent", required=True, help="agent code (its memory must be enabled)")
    parser.add_argument("--user", default=None, help="user id (user-scoped stores, profile resource)")
    parser.add_argument("--session", default=None, help="session id (session-scoped stores)")
    parser.add_argument("--context", action="append", default=[], metavar="K=V", help="run context pair")
    parser.add_argument("--url", default=None, help="database URL (default: DBMEMORY_URL or the SQLite file)")
    return parser


def run(
    *,
    url: str | None,
    agent_code: str,
    user_id: str | None = None,
    session_id: str | None = None,
    context: Sequence[str] = (),
) -> None:
    """Check the configuration, then serve over stdio (blocks).

    A SQLite database without dbmemory's tables gets them (as ``chat`` and ``replay``); a server
    database without them is refused (``dbmemory db upgrade``).

    Raises:
        MissingDependencyError: the ``mcp`` extra is not installed.
        DbMemoryError: bad configuration (raised before serving starts).
    """
    _import_mcp()  # a missing extra is said at start-up, with the pip command
    run_context = parse_context(context)
    engine = create_engine(url)
    try:
        if ensure_schema(engine):  # as chat and replay: SQLite gets the schema, a server is told
            print(f"Installed dbmemory's schema in {redact_url(engine.url)}.", file=sys.stderr)
        state = McpMemoryServer(engine, agent_code, user_id=user_id, session_id=session_id, run_context=run_context)
        state.check()
        asyncio.run(serve_stdio(state))
    finally:
        engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m dbmemory.integrations.mcp_server``; returns the exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        run(url=args.url, agent_code=args.agent, user_id=args.user, session_id=args.session, context=args.context)
    except DbMemoryError as exc:  # a command line: the remedies name its options
        print(f"Error: {exc.cli_message or exc.message}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidArgumentError) else 1
    except KeyboardInterrupt:  # pragma: no cover
        return 0
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
