"""The litellm helpers for callers with their own loop: memory_tools and handle_tool_calls."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from sqlalchemy.engine import Engine

from dbmemory.agent import assistant_message, clip_result, handle_tool_calls, memory_tools
from dbmemory.agent.litellm_tools import decode_arguments, memory_tool_spec, tool_call_parts
from dbmemory.errors import InvalidArgumentError
from dbmemory.llm import Completion, ToolCall
from dbmemory.store.agents import enable_for_agent
from dbmemory.tool import MemoryTool, tool_schema


def test_memory_tools_puts_the_memory_schema_first_then_the_callers_tools() -> None:
    mine = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
    tools = memory_tools([mine])
    assert tools == [tool_schema(), mine]
    assert tools[0]["function"]["name"] == "memory"
    assert memory_tool_spec(native_anthropic=True) == {"type": "memory_20250818", "name": "memory"}
    with pytest.raises(InvalidArgumentError, match="rename your tool"):
        memory_tools([{"type": "function", "function": {"name": "memory"}}])


@pytest.mark.parametrize(
    "call",
    [
        ToolCall("c1", "memory", '{"command": "view"}'),
        {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": '{"command": "view"}'}},
        SimpleNamespace(id="c1", function=SimpleNamespace(name="memory", arguments='{"command": "view"}')),
        {"type": "tool_use", "id": "c1", "name": "memory", "input": '{"command": "view"}'},
    ],
    ids=["dbmemory", "openai-dict", "litellm-object", "anthropic-block"],
)
def test_tool_calls_are_read_in_every_common_shape(call: object) -> None:
    assert tool_call_parts(call) == ("c1", "memory", '{"command": "view"}')


def test_the_assistant_message_always_carries_json_string_arguments() -> None:
    completion = Completion("", "tool_calls", [ToolCall("c1", "memory", {"command": "view", "path": "/memories"})])
    message = assistant_message(completion)
    assert message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": json.dumps({"command": "view", "path": "/memories"})}}
        ],
    }
    assert decode_arguments(message["tool_calls"][0]["function"]["arguments"]) == {"command": "view", "path": "/memories"}


def test_clipping_keeps_short_results_and_cuts_long_ones_with_a_hint() -> None:
    assert clip_result("short", 500) == ("short", False)
    text = "\n".join("x" * 50 for _ in range(100))
    cut, clipped = clip_result(text, 1_000)
    assert clipped and len(cut) <= 1_000
    assert cut.endswith(f"of {len(text):,} characters; view a part of a file with view_range [start, end], or a subdirectory]")


def test_handle_tool_calls_returns_tool_messages_and_joins_the_callers_transaction(engine: Engine) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, "OWN")
    with engine.connect() as conn:
        conn.begin()
        tool = MemoryTool(conn, "OWN")
        calls = [
            ToolCall("a", "memory", '{"command": "create", "path": "/memories/x.md", "file_text": "x"}'),
            ToolCall("b", "memory", {"input": {"command": "view", "path": "/memories/x.md"}}),
            ToolCall("c", "calc", '{"expr": "1+1"}'),
            ToolCall("d", "nothing", "{}"),
        ]
        messages = handle_tool_calls(calls, tool, tool_handler=lambda name, args: 2 if name == "calc" else None)
        assert [m["tool_call_id"] for m in messages] == ["a", "b", "c", "d"]
        assert messages[0] == {"role": "tool", "tool_call_id": "a", "name": "memory", "content": "File created successfully at: /memories/x.md"}
        assert messages[1]["content"].endswith("     1\tx")
        assert messages[2]["content"] == "2"
        assert messages[3]["content"] == "null"  # the handler's answer, whatever it is
        conn.rollback()
    with engine.connect() as conn:
        assert "does not exist" in MemoryTool(conn, "OWN").execute({"command": "view", "path": "/memories/x.md"})


def test_a_failing_caller_tool_becomes_an_error_text() -> None:
    def broken(name: str, arguments: object) -> str:
        raise ValueError("boom")

    (message,) = handle_tool_calls([ToolCall("a", "calc", "{}")], None, tool_handler=broken)
    assert message["content"] == "Error: the tool 'calc' failed (ValueError); try another approach"
    (message,) = handle_tool_calls([ToolCall("a", "memory", "{}")], None)
    assert message["content"].startswith("Error: there is no tool named 'memory'")
