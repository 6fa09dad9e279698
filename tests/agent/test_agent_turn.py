"""The turn runner: tool loop, transactions, profile injection, post-processing (issue 4).

Model answers are litellm offline mocks (``mock_response`` with whole response dicts, through
:func:`dbmemory.llm.complete`) or plain fakes; profile consolidation calls go to the scripted
stand-in. No network.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from dbmemory import llm
from dbmemory.agent import ScriptedModel, TurnConfig, arun_turn, run_turn
from dbmemory.agent.postprocess import post_processing_failures
from dbmemory.errors import InvalidArgumentError, InvalidScopeError
from dbmemory.llm import Completion, ToolCall, Usage
from dbmemory.profile.events import LOADING, UPDATING, RecordingStepLogger
from dbmemory.profile.prompts import purpose_of
from dbmemory.profile.store import read_profile
from dbmemory.store.agents import enable_for_agent
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file, list_files

AGENT = "SUPPORT"
MODEL = "gpt-4o-mini"


# ----------------------------------------------------------------------------- fakes


def tool_response(*arguments: Any, content: str | None = None, usage: tuple[int, int] = (40, 12)) -> dict[str, Any]:
    """A whole OpenAI response dict asking for MEMORY tool calls (litellm ``mock_response``)."""
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "memory", "arguments": a if isinstance(a, str) else json.dumps(a)},
        }
        for i, a in enumerate(arguments, start=1)
    ]
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": content, "tool_calls": calls},
            }
        ],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def text_response(text: str, usage: tuple[int, int] = (60, 8)) -> dict[str, Any]:
    """A whole OpenAI response dict with a final answer."""
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


class MockModel:
    """Answers agent calls from a queue of litellm mock responses; profile calls go to the stand-in.

    Every agent call goes through :func:`dbmemory.llm.complete` with ``mock_response`` (litellm's
    offline mock), so the real response normalisation is exercised.
    """

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.calls: list[dict[str, Any]] = []
        self.scripted = ScriptedModel()

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages):
            return self.scripted(model, messages, **kwargs)
        self.calls.append({"messages": copy.deepcopy(messages), **kwargs})
        response = self.responses.pop(0)
        if isinstance(response, Completion):
            return response
        return llm.complete(model, messages, mock_response=response, **kwargs)


@pytest.fixture
def agent(engine: Engine) -> Engine:
    """The engine with agent SUPPORT enabled (agent scope)."""
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT)
    return engine


def read(engine: Engine, path: str, store_key: str = f"agent:{AGENT}") -> str | None:
    with engine.connect() as conn:
        store_id = find_store_id(conn, store_key)
        if store_id is None:
            return None
        try:
            return get_file(conn, store_id, path).text
        except Exception:
            return None


USER = [{"role": "user", "content": "Please remember that I prefer tea."}]


# ----------------------------------------------------------------------------- the loop


def test_full_turn_with_two_memory_tool_calls_and_a_final_answer(agent: Engine) -> None:
    model = MockModel(
        tool_response({"command": "view", "path": "/memories"}),
        tool_response({"command": "create", "path": "/memories/prefs.md", "file_text": "- prefers tea\n"}),
        text_response("Noted: you prefer tea."),
    )
    result = run_turn(
        agent,
        agent_code=AGENT,
        user_id=None,
        messages=[{"role": "system", "content": "You are helpful."}, *USER],
        model=MODEL,
        complete=model,
    )
    assert result.answer == "Noted: you prefer tea."
    assert result.finish_reason == "stop"
    assert [c.command for c in result.tool_calls] == ["view", "create"]
    assert not any(c.is_error for c in result.tool_calls)
    assert result.tool_calls[1].result == "File created successfully at: /memories/prefs.md"
    assert [(m.usage.prompt_tokens, m.usage.completion_tokens) for m in result.model_calls] == [
        (40, 12),
        (40, 12),
        (60, 8),
    ]
    assert result.usage.total_tokens == 172
    assert set(result.timings) == {"ready", "load", "model", "tools", "total"}
    assert result.timings["total"] >= result.timings["model"] >= 0
    assert result.memory_tool and not result.tool_limit_reached
    assert result.post_processing is None  # no user: no profile consolidation
    # the Engine form committed the turn's transaction
    assert read(agent, "/memories/prefs.md") == "- prefers tea\n"
    # the tool results were fed back in order, as tool messages answering each call id
    second = model.calls[1]["messages"]
    assert second[-2]["tool_calls"][0]["id"] == "call_1"
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "memory",
        "content": result.tool_calls[0].result,
    }
    # system prompt: the caller's prompt first, then the MEMORY PROTOCOL
    system = model.calls[0]["messages"][0]["content"]
    assert system.startswith("You are helpful.\n\nMEMORY PROTOCOL")
    assert model.calls[0]["tools"][0]["function"]["name"] == "memory"


def test_a_connection_turn_joins_the_callers_transaction_and_never_commits(agent: Engine) -> None:
    model = MockModel(
        tool_response({"command": "create", "path": "/memories/a.md", "file_text": "x"}),
        text_response("done"),
    )
    with agent.connect() as conn:
        conn.begin()
        run_turn(conn, agent_code=AGENT, user_id=None, messages=USER, model=MODEL, complete=model)
        assert conn.in_transaction()
        conn.commit()
    assert read(agent, "/memories/a.md") == "x"


def test_rollback_of_the_callers_transaction_removes_the_turns_memory_writes(agent: Engine) -> None:
    model = MockModel(
        tool_response({"command": "create", "path": "/memories/a.md", "file_text": "x"}),
        tool_response({"command": "create", "path": "/memories/b.md", "file_text": "y"}),
        text_response("done"),
    )
    with agent.connect() as conn:
        conn.begin()
        result = run_turn(conn, agent_code=AGENT, user_id=None, messages=USER, model=MODEL, complete=model)
        assert [c.is_error for c in result.tool_calls] == [False, False]
        conn.rollback()
    assert read(agent, "/memories/a.md") is None
    assert read(agent, "/memories/b.md") is None


def test_a_failing_model_call_keeps_the_memory_the_engine_turn_already_committed(agent: Engine) -> None:
    # each tool call commits before the next model call (no transaction across a model call)
    def broken(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if any(m.get("role") == "tool" for m in messages):
            raise RuntimeError("provider down")
        return Completion("", "tool_calls", [ToolCall("c1", "memory", {"command": "create", "path": "/memories/a.md", "file_text": "x"})])

    with pytest.raises(RuntimeError, match="provider down"):
        run_turn(agent, agent_code=AGENT, user_id=None, messages=USER, model=MODEL, complete=broken)
    assert read(agent, "/memories/a.md") == "x"


# ----------------------------------------------------------------------------- readiness


def test_a_context_scoped_agent_without_its_key_fails_before_any_model_call(engine: Engine) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, "DOCS", scope="context", context_key="document_id")
    model = MockModel()
    with pytest.raises(InvalidScopeError) as info:
        run_turn(engine, agent_code="DOCS", user_id="u-1", messages=USER, model=MODEL, complete=model)
    assert info.value.code == "missing_context_key"
    assert model.calls == []


def test_an_agent_without_memory_runs_without_the_memory_tool(engine: Engine) -> None:
    model = MockModel(text_response("Hello!"))
    result = run_turn(
        engine,
        agent_code="PLAIN",
        user_id=None,
        messages=[{"role": "system", "content": "Be brief."}, *USER],
        model=MODEL,
        complete=model,
    )
    assert result.answer == "Hello!"
    assert not result.memory_tool
    assert model.calls[0].get("tools") is None
    assert model.calls[0]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_a_turn_needs_a_user_message(agent: Engine) -> None:
    with pytest.raises(InvalidArgumentError, match="user message"):
        run_turn(agent, agent_code=AGENT, user_id=None, messages=[{"role": "system", "content": "x"}], model=MODEL)


def test_a_caller_tool_named_memory_is_refused(agent: Engine) -> None:
    tools = [{"type": "function", "function": {"name": "memory", "parameters": {"type": "object"}}}]
    with pytest.raises(InvalidArgumentError, match="named 'memory'"):
        run_turn(agent, agent_code=AGENT, user_id=None, messages=USER, model=MODEL, tools=tools, complete=MockModel())


# ----------------------------------------------------------------------------- provider quirks


def _run_quirk(agent: Engine, *responses: Any, config: TurnConfig | None = None) -> Any:
    model = MockModel(*responses, text_response("ok"))
    return run_turn(agent, agent_code=AGENT, user_id=None, messages=USER, model=MODEL, complete=model, config=config)


def test_openai_strict_mode_sending_every_parameter_with_invented_values_works(agent: Engine) -> None:
    strict_create = {
        "command": "create",
        "path": "/memories/notes.md",
        "file_text": "line 1\nline 2\n",
        "view_range": [0, 0],
        "old_str": "",
        "new_str": "",
        "insert_line": 0,
        "insert_text": "",
        "old_path": "",
        "new_path": "",
    }
    strict_view = dict.fromkeys(strict_create, None) | {"command": "view", "path": "/memories", "view_range": [1, 999]}
    result = _run_quirk(agent, tool_response(strict_create), tool_response(strict_view))
    assert [c.is_error for c in result.tool_calls] == [False, False], [c.result for c in result.tool_calls]
    assert "/memories/notes.md" in result.tool_calls[1].result
    assert read(agent, "/memories/notes.md") == "line 1\nline 2\n"


def test_insert_line_sent_as_a_string_works(agent: Engine) -> None:
    result = _run_quirk(
        agent,
        tool_response({"command": "create", "path": "/memories/n.md", "file_text": "a\nc\n"}),
        tool_response({"command": "insert", "path": "/memories/n.md", "insert_line": "1", "insert_text": "b"}),
    )
    assert not result.tool_calls[1].is_error, result.tool_calls[1].result
    assert read(agent, "/memories/n.md") == "a\nb\nc\n"


def test_arguments_wrapped_in_an_input_object_work(agent: Engine) -> None:
    result = _run_quirk(
        agent, tool_response({"input": {"command": "create", "path": "/memories/w.md", "file_text": "wrapped"}})
    )
    assert not result.tool_calls[0].is_error, result.tool_calls[0].result
    assert read(agent, "/memories/w.md") == "wrapped"


def test_arguments_sent_as_a_dict_work(agent: Engine) -> None:
    dict_call = Completion(
        "", "tool_calls", [ToolCall("c1", "memory", {"command": "create", "path": "/memories/d.md", "file_text": "dict"})]
    )
    result = _run_quirk(agent, dict_call)
    assert not result.tool_calls[0].is_error
    assert read(agent, "/memories/d.md") == "dict"


def test_an_unknown_command_is_an_error_text_and_the_turn_goes_on(agent: Engine) -> None:
    result = _run_quirk(agent, tool_response({"command": "explode", "path": "/memories"}))
    record = result.tool_calls[0]
    assert record.is_error and record.result.startswith("Error: ")
    assert "view" in record.result and "rename" in record.result  # names the valid commands
    assert result.answer == "ok"


def test_a_tool_result_that_is_too_long_is_cut_with_a_hint(agent: Engine) -> None:
    big = "\n".join(f"line {i} " + "x" * 60 for i in range(200))
    result = _run_quirk(
        agent,
        tool_response({"command": "create", "path": "/memories/big.md", "file_text": big}),
        tool_response({"command": "view", "path": "/memories/big.md"}),
        config=TurnConfig(max_tool_result_chars=1_000),
    )
    record = result.tool_calls[1]
    assert record.clipped and len(record.result) <= 1_000
    assert "result cut: showed" in record.result and "view_range" in record.result
    fed_back = [m for m in result.messages if m.get("role") == "tool"][1]["content"]
    assert fed_back == record.result


def test_an_unknown_tool_name_is_an_error_text(agent: Engine) -> None:
    call = Completion("", "tool_calls", [ToolCall("c1", "search", '{"q": "x"}')])
    result = _run_quirk(agent, call)
    assert result.tool_calls[0].result == "Error: there is no tool named 'search': use one of the tools offered"


def test_the_tool_call_limit_is_reported_not_silently_hit(agent: Engine, caplog: pytest.LogCaptureFixture) -> None:
    view = {"command": "view", "path": "/memories"}
    model = MockModel(
        tool_response(view),
        tool_response(view, view),  # the second call is over the limit of 2
        text_response("answer without tools"),
    )
    events = []
    result = run_turn(
        agent,
        agent_code=AGENT,
        user_id=None,
        messages=USER,
        model=MODEL,
        complete=model,
        config=TurnConfig(max_tool_calls=2),
        on_event=events.append,
    )
    assert result.tool_limit_reached
    assert result.answer == "answer without tools"
    assert [c.is_error for c in result.tool_calls] == [False, False, True]
    assert "limit of 2 tool calls" in result.tool_calls[2].result
    assert model.calls[-1]["tool_choice"] == "none"
    assert "tool_limit" in [e.kind for e in events]
    assert "max_tool_calls=2" in caplog.text


def test_caller_tools_are_executed_by_the_handler(agent: Engine) -> None:
    weather = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}
    seen = []

    def handler(name: str, arguments: Any) -> str:
        seen.append((name, arguments))
        return "sunny"

    model = MockModel(
        Completion("", "tool_calls", [ToolCall("c1", "weather", '{"city": "Oslo"}')]),
        text_response("It is sunny."),
    )
    result = run_turn(
        agent, agent_code=AGENT, user_id=None, messages=USER, model=MODEL, complete=model, tools=[weather], tool_handler=handler
    )
    assert seen == [("weather", {"city": "Oslo"})]
    assert result.tool_calls[0].result == "sunny"
    assert [t["function"]["name"] for t in model.calls[0]["tools"]] == ["memory", "weather"]


def test_anthropic_models_can_get_the_native_memory_tool_type(agent: Engine) -> None:
    model = MockModel(Completion("hi", "stop"))
    run_turn(
        agent,
        agent_code=AGENT,
        user_id=None,
        messages=USER,
        model="anthropic/claude-sonnet-4-5",
        complete=model,
        config=TurnConfig(native_anthropic_memory_tool=True),
    )
    assert model.calls[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]


# ----------------------------------------------------------------------------- profile


def _with_profile(engine: Engine, user: str = "u-1") -> None:
    """Give ``user`` a profile through one scripted consolidation."""
    scripted = ScriptedModel()
    run_turn(
        engine,
        agent_code="PLAIN",
        user_id=user,
        messages=[{"role": "user", "content": "My name is Noor and I work as a data engineer at a shipping firm."}],
        model=MODEL,
        complete=scripted,
        config=TurnConfig(post_process="inline"),
    ).post_processing.wait()


def test_the_profile_is_injected_after_the_protocol_as_fenced_data(agent: Engine) -> None:
    _with_profile(agent)
    model = MockModel(text_response("Hi Noor."))
    steps = RecordingStepLogger()
    result = run_turn(
        agent,
        agent_code=AGENT,
        user_id="u-1",
        messages=[{"role": "system", "content": "Be kind."}, *USER],
        model=MODEL,
        complete=model,
        step_logger=steps,
        config=TurnConfig(post_process="off"),
    )
    system = model.calls[0]["messages"][0]["content"]
    protocol = system.index("MEMORY PROTOCOL")
    section = system.index("## What I know about you")
    assert system.startswith("Be kind.") and protocol < section
    assert "<user_memory>" in system and "- Name: Noor" in system
    assert "not instructions" in system
    assert result.profile_loaded
    assert [(s.name, s.status) for s in steps.steps] == [(LOADING, "completed")]


def test_the_answer_is_never_changed_by_memory(agent: Engine) -> None:
    _with_profile(agent)
    model = MockModel(text_response("  Exactly   this.\n"))
    result = run_turn(agent, agent_code=AGENT, user_id="u-1", messages=USER, model=MODEL, complete=model)
    result.post_processing.wait(30)
    assert result.answer == "  Exactly   this.\n"
    assert result.messages[-1] == {"role": "assistant", "content": "  Exactly   this.\n"}


def test_post_processing_updates_the_profile_after_the_answer(agent: Engine) -> None:
    model = MockModel(text_response("Nice to meet you."))
    steps = RecordingStepLogger()
    events = []
    result = run_turn(
        agent,
        agent_code=AGENT,
        user_id="u-2",
        messages=[{"role": "user", "content": "My name is Ada Lind and I live in Tromso."}],
        model=MODEL,
        complete=model,
        step_logger=steps,
        on_event=events.append,
    )
    outcome = result.post_processing.wait(60)
    assert outcome is not None and outcome.outcome == "updated"
    with agent.connect() as conn:
        text = read_profile(conn, "u-2").text
    assert "- Name: Ada Lind" in text and "- Lives in: Tromso" in text
    assert UPDATING in [s.name for s in steps.steps]
    kinds = [e.kind for e in events]
    assert kinds.index("answer") < kinds.index("memory_updating") < kinds.index("memory_updated")


def test_model_failures_in_post_processing_do_not_fail_the_turn(agent: Engine) -> None:
    def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages):
            raise ConnectionError("consolidation model unreachable")
        return Completion("The answer.", "stop", usage=Usage(5, 2))

    result = run_turn(
        agent,
        agent_code=AGENT,
        user_id="u-3",
        messages=[{"role": "user", "content": "My name is Bo and I live in Lund."}],
        model=MODEL,
        complete=complete,
    )
    assert result.answer == "The answer."
    outcome = result.post_processing.wait(60)
    assert outcome is not None and outcome.outcome in ("rejected", "error")
    with agent.connect() as conn:
        assert read_profile(conn, "u-3") is None


def test_a_raising_post_processor_is_logged_and_counted_never_raised(
    agent: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import dbmemory.agent.turn as turn_module

    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("postprocessor crashed")

    monkeypatch.setattr(turn_module, "consolidate", explode)
    before = post_processing_failures()
    events = []
    result = run_turn(
        agent,
        agent_code=AGENT,
        user_id="u-4",
        messages=USER,
        model=MODEL,
        complete=MockModel(text_response("fine")),
        on_event=events.append,
    )
    assert result.answer == "fine"
    assert result.post_processing.wait(30) is None
    assert result.post_processing.state == "failed"
    assert isinstance(result.post_processing.error, RuntimeError)
    assert post_processing_failures() == before + 1
    assert "post-turn memory update failed" in caplog.text
    assert "memory_update_failed" in [e.kind for e in events]


def test_deferred_post_processing_waits_for_the_caller(agent: Engine) -> None:
    with agent.connect() as conn:
        conn.begin()
        result = run_turn(
            conn,
            agent_code=AGENT,
            user_id="u-5",
            messages=[{"role": "user", "content": "My name is Kai Berg and I live in Umea."}],
            model=MODEL,
            complete=MockModel(text_response("hello")),
            config=TurnConfig(post_process="deferred"),
        )
        assert result.post_processing.state == "pending"
        conn.commit()
    assert result.post_processing.wait(60).outcome == "updated"


def test_post_processing_can_be_turned_off(agent: Engine) -> None:
    result = run_turn(
        agent,
        agent_code=AGENT,
        user_id="u-6",
        messages=USER,
        model=MODEL,
        complete=MockModel(text_response("x")),
        config=TurnConfig(post_process="off"),
    )
    assert result.post_processing is None


# ----------------------------------------------------------------------------- async


def test_arun_turn_runs_the_same_loop_and_awaits_post_processing(agent: Engine) -> None:
    model = MockModel(
        tool_response({"command": "create", "path": "/memories/async.md", "file_text": "async"}),
        text_response("done async"),
    )

    async def main() -> Any:
        result = await arun_turn(
            agent,
            agent_code=AGENT,
            user_id="u-7",
            messages=[{"role": "user", "content": "My name is Eli Sand and I live in Bodo."}],
            model=MODEL,
            complete=model,
        )
        outcome = await result.post_processing
        return result, outcome

    result, outcome = asyncio.run(main())
    assert result.answer == "done async"
    assert [c.is_error for c in result.tool_calls] == [False]
    assert outcome.outcome == "updated"
    assert read(agent, "/memories/async.md") == "async"


def test_arun_turn_accepts_an_async_model_and_an_async_tool_handler(agent: Engine) -> None:
    async def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if any(m.get("role") == "tool" for m in messages):
            return Completion("async answer", "stop")
        return Completion("", "tool_calls", [ToolCall("c1", "clock", "{}")])

    async def handler(name: str, arguments: Any) -> str:
        return "12:00"

    clock = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}
    result = asyncio.run(
        arun_turn(
            agent,
            agent_code=AGENT,
            user_id=None,
            messages=USER,
            model=MODEL,
            complete=complete,
            tools=[clock],
            tool_handler=handler,
        )
    )
    assert result.answer == "async answer"
    assert result.tool_calls[0].result == "12:00"


def test_files_listing_after_a_turn_shows_the_written_files(agent: Engine) -> None:
    _run_quirk(agent, tool_response({"command": "create", "path": "/memories/x/y.md", "file_text": "z"}))
    with agent.connect() as conn:
        paths = [f.path for f in list_files(conn, find_store_id(conn, f"agent:{AGENT}"))]
    assert paths == ["/memories/x/y.md"]


def test_a_failed_profile_load_is_not_an_empty_memory(agent: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    import dbmemory.agent.injection as injection

    def broken(*args: Any, **kwargs: Any) -> Any:
        from dbmemory.errors import StorageError

        raise StorageError("the database could not be reached")

    monkeypatch.setattr(injection, "load_user_memory", broken)
    model = MockModel(text_response("hello"))
    events = []
    result = run_turn(
        agent, agent_code=AGENT, user_id="u-8", messages=USER, model=MODEL, complete=model, on_event=events.append
    )
    assert result.answer == "hello"
    assert result.post_processing is None  # no consolidation against an unknown profile
    assert "could not be loaded" in model.calls[0]["messages"][0]["content"]
    assert "memory_load_failed" in [e.kind for e in events]


def test_the_final_call_is_retried_without_tool_choice_when_a_provider_refuses_it(agent: Engine) -> None:
    view = ToolCall("c1", "memory", '{"command": "view", "path": "/memories"}')
    calls: list[dict[str, Any]] = []

    def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        calls.append(kwargs)
        if kwargs.get("tool_choice") == "none":
            raise ValueError("tool_choice is not supported by this provider")
        if len(calls) > 2:
            return Completion("final", "stop")
        return Completion("", "tool_calls", [view])

    result = run_turn(
        agent, agent_code=AGENT, user_id=None, messages=USER, model=MODEL, complete=complete, config=TurnConfig(max_tool_calls=1)
    )
    assert result.tool_limit_reached and result.answer == "final"
    assert [c.get("tool_choice") for c in calls] == [None, None, "none", None]


def test_turn_events_are_typed_steps_a_chat_ui_can_show_as_badges(agent: Engine) -> None:
    """Each event of ``run_turn`` carries a :class:`~dbmemory.agent.StepEvent` (name, status,
    kind): a tool call names its tool and command and fails when its answer is an error."""
    from dbmemory.agent import StepEvent

    model = MockModel(
        tool_response(
            {"command": "create", "path": "/memories/prefs.md", "file_text": "- tea\n"},
            {"command": "view", "path": "/memories/missing.md"},
        ),
        text_response("Noted."),
    )
    events: list[Any] = []
    run_turn(
        agent,
        agent_code=AGENT,
        user_id=None,
        messages=USER,
        model=MODEL,
        complete=model,
        on_event=events.append,
    )
    steps = [e.step for e in events]
    assert all(isinstance(s, StepEvent) for s in steps)
    tools = [(s.name, s.status, s.kind) for s in steps if s.kind == "tool"]
    assert tools == [("memory create", "ok", "tool"), ("memory view", "failed", "tool")], steps
    assert ("model_call", "ok", "model") in [(s.name, s.status, s.kind) for s in steps]
    assert (steps[-1].name, steps[-1].status, steps[-1].kind) == ("answer", "ok", "answer")
    assert {s.status for s in steps} <= {"running", "ok", "failed", "limited"}
