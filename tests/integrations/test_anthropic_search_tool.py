"""The memory_search tool as an Anthropic SDK function tool beside DbMemoryTool, every backend."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

pytest.importorskip("anthropic")

from anthropic.lib.tools import ToolError  # noqa: E402

from dbmemory.integrations.anthropic_tool import DbMemoryTool, memory_search_tool  # noqa: E402
from dbmemory.items.episodes import record_episode  # noqa: E402
from dbmemory.store.agents import enable_for_agent  # noqa: E402


def test_memory_search_is_an_extra_tool_that_searches_only_its_users_memory(engine: Engine) -> None:
    with engine.begin() as c:
        enable_for_agent(c, "SUPPORT", scope="user")
        record_episode(c, "u-1", "I moved to Porto in March", "Welcome to Porto")
        record_episode(c, "u-2", "I moved to Porto too", "ok")
    memory = DbMemoryTool(engine, "SUPPORT", user_id="u-1")
    search = memory_search_tool(engine, "u-1")
    assert memory.to_dict() == {"type": "memory_20250818", "name": "memory"}
    assert search.to_dict()["name"] == "memory_search"
    memory.call({"command": "create", "path": "/memories/city.md", "file_text": "Lives in Porto"})
    text = search.call({"query": "Porto"})
    lines = text.splitlines()
    assert len(lines) == 2 and "I moved to Porto in March" in text and "[file /memories/city.md]" in text
    assert "too" not in text
    with pytest.raises(ToolError, match="scope must be one of"):
        search.call({"query": "Porto", "scope": "nowhere"})
