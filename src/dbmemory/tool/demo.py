"""A scripted session of MEMORY tool calls, for a first look without any model.

``dbmemory demo`` runs it against a new SQLite database (or ``--url``): it creates the schema,
enables memory for an agent, then plays a fixed list of tool calls as a model would send them —
including a few mistakes, to show the error texts a model gets back — and prints each call and
its result. Everything runs in one transaction per call, committed, like the ``tool`` command.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from dbmemory.db.engine import create_engine
from dbmemory.db.migrate import upgrade
from dbmemory.store.agents import enable_for_agent
from dbmemory.tool.memory_tool import MemoryTool

__all__ = [
    "DEMO_AGENT",
    "DEMO_USER",
    "DEMO_CALLS",
    "run_demo",
    "format_call",
]

DEMO_AGENT = "demo-agent"
DEMO_USER = "u-1001"

DEMO_CALLS: tuple[dict[str, Any], ...] = (
    {"command": "view", "path": "/memories"},
    {
        "command": "create",
        "path": "/memories/preferences.md",
        "file_text": "# Preferences\n- answers: short, with examples\n- language: English\n",
    },
    {
        "command": "create",
        "path": "/memories/projects/billing-migration.md",
        "file_text": "# Billing migration\n## Status\n- (none yet)\n",
    },
    {
        "command": "str_replace",
        "path": "/memories/projects/billing-migration.md",
        "old_str": "- (none yet)",
        "new_str": "- schema reviewed with the DBA team\n- next: dry run on staging",
    },
    {
        "command": "insert",
        "path": "/memories/preferences.md",
        "insert_line": 3,
        "insert_text": "- timezone: Europe/Berlin",
    },
    {"command": "view", "path": "/memories/preferences.md"},
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/preferences.md", "file_text": "again"},
    {"command": "view", "path": "/memories/../etc/passwd"},
    {
        "command": "str_replace",
        "path": "/memories/preferences.md",
        "old_str": "- ",
        "new_str": "* ",
    },
    {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/work"},
    {"command": "view", "path": "/memories/work/billing-migration.md", "view_range": [2, -1]},
    {"command": "delete", "path": "/memories/work"},
    {"command": "view", "path": "/memories"},
)
"""The scripted calls, in order (MEMORY tool arguments as a model sends them)."""


def _session(url: str | None) -> Iterator[tuple[dict[str, Any], str]]:
    engine = create_engine(url)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            enable_for_agent(conn, DEMO_AGENT, scope="user")
        for call in DEMO_CALLS:
            with engine.begin() as conn:
                result = MemoryTool(conn, DEMO_AGENT, user_id=DEMO_USER).execute(call)
            yield call, result
    finally:
        engine.dispose()


def run_demo(url: str | None, emit: Callable[[dict[str, Any], str], None]) -> int:
    """Run the scripted session; call ``emit(call, result)`` for each tool call.

    Args:
        url: database URL; ``None`` uses ``DBMEMORY_URL`` or the default SQLite file.
        emit: receives each call (a dict) and the tool's text answer.

    Returns:
        The number of calls made.
    """
    count = 0
    for call, result in _session(url):
        emit(call, result)
        count += 1
    return count


def format_call(call: dict[str, Any]) -> str:
    """One call as the JSON a model would send."""
    return json.dumps(call, ensure_ascii=False)
