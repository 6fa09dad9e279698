"""dbmemory.llm: the one litellm wrapper (lazy import, normalised answers, tool calls)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from dbmemory.errors import MissingDependencyError
from dbmemory.llm import Completion, ToolCall, Usage, acomplete, complete, normalize_response

TOOL_RESPONSE = {
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "memory", "arguments": '{"command": "view"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 7},
}


def test_a_dict_response_is_normalised_with_tool_calls_and_usage() -> None:
    result = normalize_response(TOOL_RESPONSE)
    assert result.text == "" and result.finish_reason == "tool_calls"
    assert result.tool_calls == [ToolCall("call_1", "memory", '{"command": "view"}')]
    assert result.usage == Usage(5, 7) and result.usage.total_tokens == 12


def test_an_empty_response_gives_an_empty_completion() -> None:
    assert normalize_response({}) == Completion(text="", raw={})


def test_importing_dbmemory_and_the_profile_never_imports_litellm() -> None:
    code = "import sys, dbmemory, dbmemory.profile, dbmemory.llm; assert 'litellm' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_missing_litellm_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[llm\]'"):
        complete("gpt-4o-mini", [{"role": "user", "content": "hi"}])


@pytest.mark.slow
def test_litellm_mock_responses_come_back_normalised_offline() -> None:
    messages = [{"role": "user", "content": "hi"}]
    text = complete("gpt-4o-mini", messages, mock_response="hello", timeout=5)
    assert (text.text, text.finish_reason) == ("hello", "stop")
    tools = [{"type": "function", "function": {"name": "memory", "parameters": {"type": "object"}}}]
    call = complete("gpt-4o-mini", messages, tools=tools, mock_response=TOOL_RESPONSE)
    assert call.tool_calls == [ToolCall("call_1", "memory", '{"command": "view"}')]
    assert call.usage == Usage(5, 7)
    later = asyncio.run(acomplete("gpt-4o-mini", messages, mock_response="async hello"))
    assert later.text == "async hello"
