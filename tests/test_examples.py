"""Every file in examples/ runs (or, for configuration, is used as written), so none can rot.

Each Python example runs in a subprocess in a temporary directory, on a SQLite file given as
``DBMEMORY_URL``, with the scripted model (``DBMEMORY_MODEL`` unset) and no provider key, and
must exit 0 (some print checked lines too). The MCP client configuration starts the server it
describes and lists its tools; the crontab lines run their commands. A file of examples/ that
no test here covers fails :func:`test_every_example_is_covered`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dbmemory.db.engine import create_engine
from dbmemory.db.migrate import upgrade
from dbmemory.store.agents import enable_for_agent

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SRC = Path(__file__).resolve().parent.parent / "src"

EXPECTED_LINES: dict[str, list[str]] = {
    "quickstart.py": ["File created successfully at: /memories/prefs.md", "     2\t- answers in English", "memory"],
    "order_with_memory.py": ["order 2 refused by the database: its memory note was rolled back with it", "orders: [1]"],
    "anthropic_tool_runner.py": ["4K\t/memories", "25B\t/memories/preferences.md", "     1\tPrefers tea over coffee."],
    "wsgi_chat.py": ["'tool_calls': 3"],
    "expire_cron.py": ["expired 0 of 0 file(s) untouched for 90 days"],
}
"""Lines some examples must print (the others only have to exit 0)."""

CONFIGURATION = {"mcp_client_config.json", "mcp_client.md", "crontab.txt"}
"""Examples that are not scripts, each with its own test below."""


def _environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "DBMEMORY_MODEL"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["DBMEMORY_URL"] = f"sqlite:///{(tmp_path / 'examples.db').as_posix()}"
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("LITELLM_OFFLINE_MODE", "true")
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return env


def _scripts() -> list[str]:
    return sorted(p.name for p in EXAMPLES.glob("*.py"))


def test_every_example_is_covered() -> None:
    present = {p.name for p in EXAMPLES.iterdir() if p.is_file() and not p.name.startswith(".")}
    uncovered = present - set(_scripts()) - CONFIGURATION
    assert not uncovered, f"examples without a test in tests/test_examples.py: {sorted(uncovered)}"
    assert set(EXPECTED_LINES) <= present and CONFIGURATION <= present


@pytest.mark.parametrize("name", _scripts())
def test_the_example_script_runs(name: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    missing = re.search(r"No module named '([\w.]+)'", proc.stderr)
    if proc.returncode != 0 and missing and not missing.group(1).startswith("dbmemory"):
        pytest.skip(f"{name} needs {missing.group(1)}, which is not installed")
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    for line in EXPECTED_LINES.get(name, []):
        assert line in proc.stdout, f"{name} did not print {line!r}:\n{proc.stdout}"


def test_the_mcp_client_configuration_starts_a_working_server(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    entry = json.loads((EXAMPLES / "mcp_client_config.json").read_text())["mcpServers"]["dbmemory"]
    assert entry["command"] == "dbmemory" and set(entry["env"]) == {"DBMEMORY_URL"}
    args = entry["args"]
    agent = args[args.index("--agent") + 1]
    env = _environment(tmp_path)
    engine = create_engine(env["DBMEMORY_URL"])
    upgrade(engine)
    with engine.begin() as conn:  # what mcp_client.md says to do once
        enable_for_agent(conn, agent, scope="user")
    engine.dispose()
    # "dbmemory" as "python -m dbmemory", so the server runs this checkout's code
    server = StdioServerParameters(command=sys.executable, args=["-m", "dbmemory", *args], env=env)

    async def main() -> tuple[list[str], str]:
        async with Client(server) as client:
            tools = await client.list_tools()
            viewed = await client.call_tool("memory", {"command": "view", "path": "/memories"})
            return [t.name for t in tools.tools], viewed.content[0].text

    names, text = asyncio.run(asyncio.wait_for(main(), 120))
    assert names == ["memory", "memory_search"] and text.startswith("Here're the files and directories")
    note = (EXAMPLES / "mcp_client.md").read_text()
    assert "mcp_client_config.json" in note and "dbmemory agent enable" in note


def test_the_crontab_lines_run(tmp_path: Path) -> None:
    env = _environment(tmp_path)
    lines = [line.lstrip("# ").strip() for line in (EXAMPLES / "crontab.txt").read_text().splitlines()]
    jobs = [line for line in lines if re.match(r"^(\S+\s+){5}\S+=", line)]
    assert len(jobs) == 2, lines
    for job in jobs:
        words = shlex.split(job)[5:]
        command = [w for w in words if "=" not in w.split("/")[0]]
        command = command[: command.index(">>")] if ">>" in command else command
        if command[0] == "python":
            script = Path(command[1])
            assert script.parts[-2:] == ("examples", "expire_cron.py")
            command = [sys.executable, str(EXAMPLES / script.name), *command[2:]]
        else:
            assert command[:2] == ["dbmemory", "expire"]
            command = [sys.executable, "-m", "dbmemory", *command[1:]]
        if not (tmp_path / "examples.db").exists():
            engine = create_engine(env["DBMEMORY_URL"])
            upgrade(engine)
            engine.dispose()
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{job}\n{proc.stdout}\n{proc.stderr}"
        assert "expire" in proc.stdout or "0 files" in proc.stdout, proc.stdout
