"""Issue 13: Prometheus metrics of the MEMORY tool and of expiry, on the profile's registry,
closed labels, and no-ops without prometheus-client."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import enable_for_agent
from dbmemory.db.schema import files
from dbmemory.metrics import COMMANDS, ERROR_CODES, default_memory_metrics, exposition
from dbmemory.profile.metrics import default_metrics
from dbmemory.store.expiry import expire_files_committing
from dbmemory.tool import MemoryTool


def _sample(name: str, **labels: str) -> float:
    value = default_metrics().registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_tool_commands_and_errors_by_code_are_counted_on_the_profile_registry(conn: Connection) -> None:
    assert default_memory_metrics().registry is default_metrics().registry
    enable_for_agent(conn, "MET", max_files=1)
    tool = MemoryTool(conn, "MET")
    before = {
        "create_ok": _sample("dbmemory_tool_commands_total", command="create", outcome="ok"),
        "create_err": _sample("dbmemory_tool_commands_total", command="create", outcome="error"),
        "view_err": _sample("dbmemory_tool_commands_total", command="view", outcome="error"),
        "invalid": _sample("dbmemory_tool_commands_total", command="invalid", outcome="error"),
        "cap": _sample("dbmemory_tool_errors_total", code="cap_exceeded"),
        "not_found": _sample("dbmemory_tool_errors_total", code="not_found"),
        "tool_input": _sample("dbmemory_tool_errors_total", code="tool_input"),
        "seconds": _sample("dbmemory_tool_command_duration_seconds_count", command="create"),
    }
    assert not tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "a"}).startswith("Error")
    assert tool.execute({"command": "create", "path": "/memories/b.md", "file_text": "b"}).startswith("Error")
    assert tool.execute({"command": "view", "path": "/memories/none.md"}).startswith("Error")
    assert tool.execute({"command": "explode", "path": "/memories/x.md"}).startswith("Error")
    after = {
        "create_ok": _sample("dbmemory_tool_commands_total", command="create", outcome="ok"),
        "create_err": _sample("dbmemory_tool_commands_total", command="create", outcome="error"),
        "view_err": _sample("dbmemory_tool_commands_total", command="view", outcome="error"),
        "invalid": _sample("dbmemory_tool_commands_total", command="invalid", outcome="error"),
        "cap": _sample("dbmemory_tool_errors_total", code="cap_exceeded"),
        "not_found": _sample("dbmemory_tool_errors_total", code="not_found"),
        "tool_input": _sample("dbmemory_tool_errors_total", code="tool_input"),
        "seconds": _sample("dbmemory_tool_command_duration_seconds_count", command="create"),
    }
    assert {k: after[k] - before[k] for k in before} == {
        "create_ok": 1, "create_err": 1, "view_err": 1, "invalid": 1,
        "cap": 1, "not_found": 1, "tool_input": 1, "seconds": 2,
    }


def test_every_label_value_is_from_a_closed_set(conn: Connection) -> None:
    enable_for_agent(conn, "MET")
    tool = MemoryTool(conn, "MET")
    tool.execute({"command": "view", "path": "/memories/secret-user-42.md"})
    text = exposition().decode()
    for line in text.splitlines():
        if line.startswith(("dbmemory_tool_commands_total{", "dbmemory_tool_command_duration_seconds_count{")):
            assert line.split('command="')[1].split('"')[0] in COMMANDS, line
        if line.startswith("dbmemory_tool_errors_total{"):
            assert line.split('code="')[1].split('"')[0] in ERROR_CODES, line
    assert "secret-user-42" not in text and "MET" not in text


def test_expiry_runs_and_files_are_counted(engine: Engine) -> None:
    with engine.begin() as c:
        enable_for_agent(c, "MET")
        tool = MemoryTool(c, "MET")
        for i in range(3):
            tool.execute({"command": "create", "path": f"/memories/{i}.md", "file_text": "x"})
        c.execute(sa.update(files).values(last_accessed_at=dt.datetime(2000, 1, 1)))
    runs = _sample("dbmemory_expiry_runs_total", outcome="ok")
    gone = _sample("dbmemory_expiry_files_total")
    assert expire_files_committing(engine, days=30) == 3
    assert _sample("dbmemory_expiry_runs_total", outcome="ok") == runs + 1
    assert _sample("dbmemory_expiry_files_total") == gone + 3
    assert b"dbmemory_expiry_run_duration_seconds_count" in exposition()


def test_without_prometheus_client_metrics_are_no_ops() -> None:
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from dbmemory import metrics\n"
        "metrics.record_command('view', None, 0.1)\n"
        "metrics.record_expiry(ok=True, files=2, seconds=1.0)\n"
        "assert metrics.exposition() == b'', metrics.exposition()\n"
        "assert metrics.default_memory_metrics().registry is None\n"
        "from dbmemory import create_engine, enable_for_agent\n"
        "from dbmemory.tool import MemoryTool\n"
        "e = create_engine('sqlite://')\n"
        "from dbmemory.db import migrate; migrate.upgrade(e)\n"
        "with e.begin() as c:\n"
        "    enable_for_agent(c, 'A')\n"
        "    assert MemoryTool(c, 'A').execute({'command': 'view', 'path': '/memories'}).startswith('Here')\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr
