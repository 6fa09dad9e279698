"""The turn's system prompt over a conversation, and the locks a turn holds (issue 8, sections 4 and 7).

* The MEMORY PROTOCOL block takes effect from the next new conversation: it is never added to a
  conversation whose earlier turns ran without it, and never twice.
* Given an Engine, no transaction of the turn is open while a model runs: on a SQLite file
  another user's reads and writes go on during the turn's model calls.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from dbmemory.agent import TurnConfig, arun_turn, run_turn
from dbmemory.db.dialect.setup import configure_engine
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.extract_prompts import purpose_of as item_purpose_of
from dbmemory.llm import Completion, ToolCall
from dbmemory.profile.prompts import purpose_of
from dbmemory.store.agents import enable_for_agent
from dbmemory.tool import MemoryTool
from dbmemory.tool.protocol import MEMORY_PROTOCOL, augment_system_prompt, has_memory_protocol

AGENT = "SUPPORT"
MODEL = "gpt-4o-mini"


class Recorder:
    """Answers every agent call with ``answer`` and records the messages sent."""

    def __init__(self, answer: str = "ok") -> None:
        self.answer = answer
        self.systems: list[str] = []

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages):
            return Completion("NOOP", "stop")
        if item_purpose_of(messages):  # the item extraction after the turn
            return Completion("[]", "stop")
        first = messages[0]
        self.systems.append(first["content"] if first.get("role") == "system" else "")
        return Completion(self.answer, "stop")


@pytest.fixture
def agent(engine: Engine) -> Engine:
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT)
    return engine


def _turn(engine: Engine, messages: list[dict[str, Any]], model: Recorder, **config: Any) -> Any:
    return run_turn(
        engine,
        agent_code=AGENT,
        user_id=None,
        messages=messages,
        model=MODEL,
        complete=model,
        config=TurnConfig(**config) if config else None,
    )


# ----------------------------------------------------------------------------- the protocol


def test_a_new_conversation_gets_the_protocol_once(agent: Engine) -> None:
    model = Recorder()
    result = _turn(agent, [{"role": "system", "content": "You are X."}, {"role": "user", "content": "hi"}], model)
    assert model.systems[0] == f"You are X.\n\n{MEMORY_PROTOCOL}"
    assert result.memory_protocol


def test_an_ongoing_conversation_that_started_without_the_protocol_keeps_its_prompt(agent: Engine) -> None:
    model = Recorder()
    messages = [
        {"role": "system", "content": "You are X."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "and now?"},
    ]
    result = _turn(agent, messages, model)
    assert model.systems[0] == "You are X."
    assert "MEMORY PROTOCOL" not in model.systems[0]
    assert not result.memory_protocol
    # tool messages also mark an ongoing conversation
    model = Recorder()
    tool_history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                              "function": {"name": "x", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "user", "content": "and now?"},
    ]
    _turn(agent, tool_history, model)
    assert model.systems == [""]


def test_a_system_prompt_that_carries_the_protocol_never_gets_it_twice(agent: Engine) -> None:
    model = Recorder()
    first = _turn(agent, [{"role": "system", "content": "You are X."}, {"role": "user", "content": "hi"}], model)
    # the next turn re-sends the system prompt the conversation started with
    history = [first.messages[0], {"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "again"}]
    _turn(agent, history, model)
    # and a new conversation whose prompt already has it (augment_system_prompt) gets it once too
    with agent.begin() as conn:
        augmented = augment_system_prompt("You are X.", conn, AGENT)
    _turn(agent, [{"role": "system", "content": augmented}, {"role": "user", "content": "hi"}], model)
    for system in model.systems:
        assert system.count("MEMORY PROTOCOL") == 1, system
    assert model.systems[1] == model.systems[0] == model.systems[2]


def test_augment_system_prompt_is_idempotent(agent: Engine) -> None:
    with agent.begin() as conn:
        once = augment_system_prompt("You are X.", conn, AGENT)
        twice = augment_system_prompt(once, conn, AGENT)
        from_none = augment_system_prompt(augment_system_prompt(None, conn, AGENT), conn, AGENT)
    assert once == twice == f"You are X.\n\n{MEMORY_PROTOCOL}"
    assert from_none == MEMORY_PROTOCOL
    assert has_memory_protocol(once) and not has_memory_protocol("You are X.")


def test_include_and_omit_override_the_detection(agent: Engine) -> None:
    ongoing = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
               {"role": "user", "content": "again"}]
    model = Recorder()
    _turn(agent, ongoing, model, memory_protocol="include")
    _turn(agent, [{"role": "user", "content": "hi"}], model, memory_protocol="omit")
    assert model.systems[0] == MEMORY_PROTOCOL
    assert model.systems[1] == ""
    with pytest.raises(InvalidArgumentError, match="memory_protocol"):
        TurnConfig(memory_protocol="sometimes")  # type: ignore[arg-type]


def test_arun_turn_follows_the_same_rule(agent: Engine) -> None:
    import asyncio

    model = Recorder()
    ongoing = [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"},
               {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]
    asyncio.run(arun_turn(agent, agent_code=AGENT, user_id=None, messages=ongoing, model=MODEL, complete=model))
    asyncio.run(arun_turn(agent, agent_code=AGENT, user_id=None, messages=ongoing[:2], model=MODEL, complete=model))
    assert model.systems == ["S", f"S\n\n{MEMORY_PROTOCOL}"]


# ----------------------------------------------------------------------------- locks


def _second_engine(engine: Engine) -> Engine:
    """Another engine on the same database; on SQLite with dbmemory's set-up and a 300 ms busy timeout."""
    if engine.dialect.name != "sqlite":
        return engine
    if engine.url.database in (None, "", ":memory:"):
        pytest.skip("in-memory SQLite has one shared connection: no second user can be served at once")
    return configure_engine(sa.create_engine(engine.url, poolclass=NullPool), busy_timeout_ms=300)


class BlockingModel:
    """Asks for one MEMORY create, then answers; each agent call waits until released."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Semaphore(0)
        self.count = 0

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages):
            return Completion("NOOP", "stop")
        self.count += 1
        self.entered.release()
        assert self.release.acquire(timeout=20), "the test never released the model"
        if self.count == 1:
            create = {"command": "create", "path": "/memories/u1.md", "file_text": "one"}
            return Completion("", "tool_calls", [ToolCall("c1", "memory", create)])
        return Completion("done", "stop")


def _other_user_works(engine: Engine, user_id: str, path: str) -> float:
    """Write and read ``user_id``'s store in a transaction of its own; the seconds it took."""
    started = time.perf_counter()
    with engine.begin() as conn:
        tool = MemoryTool(conn, AGENT, user_id=user_id)
        created = tool.execute({"command": "create", "path": path, "file_text": "two"})
        viewed = tool.execute({"command": "view", "path": path})
    assert created.startswith("File created"), created
    assert "two" in viewed, viewed
    return time.perf_counter() - started


@pytest.mark.parametrize("use_async", [False, True], ids=["run_turn", "arun_turn"])
def test_other_users_read_and_write_while_a_turn_waits_for_its_model(engine: Engine, use_async: bool) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT, scope="user")
    other = _second_engine(engine)
    model = BlockingModel()
    outcome: dict[str, Any] = {}

    def turn() -> None:
        kwargs: dict[str, Any] = dict(
            agent_code=AGENT, user_id="u1", messages=[{"role": "user", "content": "remember one"}],
            model=MODEL, complete=model, config=TurnConfig(post_process="off"),
        )
        try:
            if use_async:
                import asyncio

                outcome["result"] = asyncio.run(arun_turn(engine, **kwargs))
            else:
                outcome["result"] = run_turn(engine, **kwargs)
        except BaseException as exc:  # reported by the assertion below
            outcome["error"] = exc

    thread = threading.Thread(target=turn, daemon=True)
    thread.start()
    try:
        # first model call: after the readiness check and the profile load
        assert model.entered.acquire(timeout=20)
        assert _other_user_works(other, "u2", "/memories/a.md") < 5
        model.release.release()
        # second model call: after the turn's own MEMORY write
        assert model.entered.acquire(timeout=20)
        assert _other_user_works(other, "u2", "/memories/b.md") < 5
        with other.begin() as conn:
            seen = MemoryTool(conn, AGENT, user_id="u1").execute({"command": "view", "path": "/memories/u1.md"})
        assert "one" in seen  # the turn's write committed before its next model call
    finally:
        model.release.release()
        model.release.release()
        thread.join(timeout=30)
        if other is not engine:
            other.dispose()
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].answer == "done"
    assert [c.is_error for c in outcome["result"].tool_calls] == [False]


def test_a_failed_commit_of_a_tool_call_is_reported_as_nothing_saved(agent: Engine) -> None:
    calls = iter(
        [
            Completion("", "tool_calls", [ToolCall("c1", "memory", {"command": "create", "path": "/memories/a.md", "file_text": "x"})]),
            Completion("done", "stop"),
        ]
    )
    armed = {"on": False}

    def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        armed["on"] = not any(m.get("role") == "tool" for m in messages)  # fail the one tool commit
        return next(calls)

    def refuse_commit(conn: Any) -> None:
        if armed["on"]:
            armed["on"] = False
            raise sa.exc.OperationalError("COMMIT", {}, Exception("disk I/O error"))

    sa.event.listen(agent, "commit", refuse_commit)
    try:
        result = run_turn(agent, agent_code=AGENT, user_id=None, messages=[{"role": "user", "content": "x"}],
                          model=MODEL, complete=complete)
    finally:
        sa.event.remove(agent, "commit", refuse_commit)
    record = result.tool_calls[0]
    assert record.is_error and "nothing was saved" in record.result
    with agent.begin() as conn:
        seen = MemoryTool(conn, AGENT).execute({"command": "view", "path": "/memories"})
    assert "a.md" not in seen


# ------------------------------------------------- chat and replay keep the prompt they began with


class _QuietDisplay:
    def step(self, name: str, status: str, detail: str | None) -> None: ...

    def tool_call(self, record: Any) -> None: ...

    def notice(self, text: str) -> None: ...


def test_a_chat_keeps_the_protocol_it_started_with_on_every_later_turn(agent: Engine) -> None:
    """The chat sends its own system prompt and the history each turn: the block the first turn
    carried stays on every later turn, and is never added twice."""
    from dbmemory.agent.chat import ChatSession

    model = Recorder()
    chat = ChatSession(agent, AGENT, "u-1", "s-1", MODEL, model, _QuietDisplay())
    for text in ("hi", "and now?", "one more"):
        chat.send(text)
    assert len(model.systems) == 3
    assert all(s.count("MEMORY PROTOCOL") == 1 for s in model.systems), model.systems


def test_a_replayed_session_keeps_the_protocol_on_every_turn_and_each_session_starts_anew(
    agent: Engine,
) -> None:
    from dbmemory.agent.replay import replay_conversation
    from dbmemory.agent.transcripts import Conversation, Session, Utterance

    def session(sid: str) -> Session:
        lines = []
        for i in range(3):
            lines += [Utterance("user", f"line {i}"), Utterance("assistant", f"reply {i}")]
        return Session(sid, None, tuple(lines))

    model = Recorder()
    replay_conversation(
        agent, Conversation("c1", (session("s1"), session("s2"))), model=MODEL, complete=model,
        agent_code=AGENT,
    )
    assert len(model.systems) == 6
    assert all(s.count("MEMORY PROTOCOL") == 1 for s in model.systems), model.systems
