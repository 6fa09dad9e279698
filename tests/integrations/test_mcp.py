"""The MCP server: tools/list and tools/call over stdio in a subprocess, the profile resource,
per-call commits, and start-up checks."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

pytest.importorskip("mcp")

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from dbmemory.db.engine import create_engine  # noqa: E402
from dbmemory.db.migrate import upgrade  # noqa: E402
from dbmemory.integrations.mcp_server import McpMemoryServer, build_server, parse_context  # noqa: E402
from dbmemory.profile.store import write_profile  # noqa: E402
from dbmemory.store.agents import enable_for_agent  # noqa: E402
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file  # noqa: E402


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A migrated SQLite file with agent SUPPORT (user scope) and a profile for u-1."""
    url = f"sqlite:///{(tmp_path / 'mcp.db').as_posix()}"
    engine = create_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        enable_for_agent(conn, "SUPPORT", scope="user")
        write_profile(conn, "u-1", "# User Memory\n\n## Identity\n- Name: Ada\n", expected_version=0)
    engine.dispose()
    return url


def _server(url: str, *args: str) -> StdioServerParameters:
    env = dict(os.environ)
    env.pop("DBMEMORY_URL", None)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dbmemory.integrations.mcp_server", "--url", url, *args],
        env=env,
    )


def test_the_server_answers_tools_list_and_tools_call_over_stdio(sqlite_url: str) -> None:
    async def main() -> dict[str, Any]:
        async with Client(_server(sqlite_url, "--agent", "SUPPORT", "--user", "u-1")) as client:
            tools = await client.list_tools()
            created = await client.call_tool(
                "memory", {"command": "create", "path": "/memories/notes.md", "file_text": "hello"}
            )
            viewed = await client.call_tool("memory", {"command": "view", "path": "/memories/notes.md"})
            missing = await client.call_tool("memory", {"command": "view", "path": "/memories/none.md"})
            found = await client.call_tool("memory_search", {"query": "hello", "scope": "files"})
            bad = await client.call_tool("memory_search", {"query": ""})
            return {"tools": tools, "created": created, "viewed": viewed, "missing": missing,
                    "found": found, "bad": bad}

    got = asyncio.run(asyncio.wait_for(main(), 60))
    tool, search = got["tools"].tools
    assert (tool.name, search.name) == ("memory", "memory_search")
    assert search.input_schema["required"] == ["query"]
    assert got["found"].content[0].text == "1. [file /memories/notes.md] hello"
    assert got["bad"].is_error and "query is required" in got["bad"].content[0].text
    assert tool.input_schema["properties"]["command"]["enum"] == [
        "view", "create", "str_replace", "insert", "delete", "rename"
    ]
    assert not got["created"].is_error
    assert got["created"].content[0].text == "File created successfully at: /memories/notes.md"
    assert got["viewed"].content[0].text.endswith("     1\thello")
    assert got["missing"].is_error
    assert got["missing"].content[0].text.startswith("Error: The path /memories/none.md does not exist")
    # each call committed: another process sees the file
    engine = create_engine(sqlite_url)
    with engine.connect() as conn:
        store_id = find_store_id(conn, "user:SUPPORT:u-1")
        assert get_file(conn, store_id, "/memories/notes.md").text == "hello"
    engine.dispose()


def test_the_users_profile_is_a_read_only_resource(sqlite_url: str) -> None:
    async def main() -> tuple[Any, Any]:
        async with Client(_server(sqlite_url, "--agent", "SUPPORT", "--user", "u-1")) as client:
            listed = await client.list_resources()
            read = await client.read_resource(listed.resources[0].uri)
            return listed, read

    listed, read = asyncio.run(asyncio.wait_for(main(), 60))
    (resource,) = listed.resources
    assert str(resource.uri) == "dbmemory://profile/u-1"
    assert resource.mime_type == "text/markdown"
    assert "- Name: Ada" in read.contents[0].text


def test_a_misconfigured_agent_fails_at_start_with_one_line(sqlite_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dbmemory.integrations.mcp_server", "--url", sqlite_url, "--agent", "NOPE"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "NOPE" in lines[0]


def test_a_user_scoped_agent_without_user_is_refused_before_serving(sqlite_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dbmemory.integrations.mcp_server", "--url", sqlite_url, "--agent", "SUPPORT"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "user" in proc.stderr and proc.stderr.count("\n") == 1


def test_each_tool_call_is_its_own_committed_transaction(engine: Engine) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, "DOCS", scope="context", context_key="document_id")
    state = McpMemoryServer(engine, "DOCS", run_context=parse_context(["document_id=7"]))
    state.check()

    async def main() -> list[Any]:
        async with Client(build_server(state)) as client:  # in-process
            ok = await client.call_tool("memory", {"command": "create", "path": "/memories/a.md", "file_text": "a"})
            bad = await client.call_tool("memory", {"command": "create", "path": "/memories/a.md", "file_text": "b"})
            other = await client.call_tool("nope", {})
            return [ok, bad, other]

    ok, bad, other = asyncio.run(asyncio.wait_for(main(), 60))
    assert not ok.is_error and bad.is_error and other.is_error
    assert bad.content[0].text.startswith("Error: File /memories/a.md already exists")
    with engine.connect() as conn:
        store_id = find_store_id(conn, "context:DOCS:document_id:7")
        assert get_file(conn, store_id, "/memories/a.md").text == "a"


def test_context_options_must_be_key_value_pairs() -> None:
    assert parse_context(["document_id=7", " a = b "]) == {"document_id": "7", "a": "b"}
    with pytest.raises(ValueError, match="key=value"):
        parse_context(["document_id"])


def test_the_mcp_command_refuses_an_agent_without_memory_with_one_line(sqlite_url: str) -> None:
    import typer
    from typer.testing import CliRunner

    from dbmemory.cli import mcp as mcp_cli
    from dbmemory.cli._common import DbMemoryGroup

    app = typer.Typer(cls=DbMemoryGroup, add_completion=False)

    @app.callback()
    def _root() -> None:
        """Test app."""

    mcp_cli.register(app)
    result = CliRunner().invoke(app, ["mcp", "--agent", "NOPE", "--url", sqlite_url])
    assert result.exit_code == 1
    assert result.stdout == ""  # stdout belongs to the MCP protocol
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "NOPE" in line
