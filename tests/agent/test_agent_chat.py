"""``dbmemory chat``: the session logic and the terminal command, with the scripted stand-in and
with a litellm-mocked model."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import typer
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from dbmemory import llm
from dbmemory.agent import ScriptedModel
from dbmemory.agent.chat import ChatSession, default_session_id, describe_tool_call
from dbmemory.agent.litellm_tools import ToolCallRecord
from dbmemory.agent.scripted import SCRIPTED_NOTICE
from dbmemory.cli import chat as chat_cli
from dbmemory.cli._common import DbMemoryGroup
from dbmemory.db.engine import create_engine
from dbmemory.db.migrate import upgrade
from dbmemory.profile.prompts import purpose_of
from dbmemory.store.agents import enable_for_agent


class Recorder:
    """A ChatDisplay that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, name: str, status: str, detail: str | None) -> None:
        self.lines.append(f"step {name} {status}")

    def tool_call(self, record: ToolCallRecord) -> None:
        self.lines.append("tool " + describe_tool_call(record)[0])

    def notice(self, text: str) -> None:
        self.lines.append("notice " + text)


def test_a_chat_session_shows_loading_tool_calls_and_updating(engine: Engine) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, "CHAT", scope="user")
    display = Recorder()
    session = ChatSession(
        engine=engine,
        agent_code="CHAT",
        user_id="u-1",
        session_id="s1",
        model="scripted",
        complete=ScriptedModel(),
        display=display,
        clock=lambda: dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.timezone.utc),
    )
    result = session.send("My name is Ada Lind and I live in Tromso.")
    assert result.answer == "(scripted stand-in) Noted in /memories/sessions/s1.md."
    assert display.lines == [
        "step Loading context memory started",
        "step Loading context memory completed",
        "tool memory view /memories",
        "tool memory create /memories/sessions/s1.md",
        "tool memory create /memories/index.md",
    ]
    assert session.finish_turn(result).outcome == "updated"
    assert display.lines[-5:] == [
        "step Updating your memory started",
        "step Updating your memory completed",
        "step Review your context memory started",
        "step Review your context memory completed",
        "notice memory items: 2 added, 0 updated (/items lists them)",  # the item extraction
    ]
    assert "- Name: Ada Lind" in session.profile_text()
    assert [f.path for f in session.files()] == ["/memories/index.md", "/memories/sessions/s1.md"]
    assert "2026-05-01 12:00 UTC" in session.file_text("/memories/sessions/s1.md")
    assert len(session.history) == 2


def test_default_session_ids_are_store_key_safe() -> None:
    assert default_session_id(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)) == "chat-20260102-030405"


def _app() -> typer.Typer:
    app = typer.Typer(cls=DbMemoryGroup, add_completion=False)

    @app.callback()
    def _root() -> None:
        """Test app."""

    chat_cli.register(app)
    return app


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{(tmp_path / 'chat.db').as_posix()}"
    engine = create_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        enable_for_agent(conn, "CHAT", scope="user")
    engine.dispose()
    return url


def test_the_chat_command_runs_with_the_scripted_stand_in(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBMEMORY_MODEL", raising=False)
    typed = "hello\nI prefer short answers with examples. I live in Oslo.\n/memory\n/items\n/files\n/nope\n/quit\n"
    result = CliRunner().invoke(_app(), ["chat", "--agent", "CHAT", "--user", "u-9", "--session", "s1", "--url", url], input=typed)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.splitlines()[0] == SCRIPTED_NOTICE
    for expected in (
        "Loading context memory",
        "-> memory view /memories",
        "-> memory create /memories/sessions/s1.md",
        "File created successfully at: /memories/sessions/s1.md",
        "assistant> (scripted stand-in) Noted in /memories/sessions/s1.md.",
        "Updating your memory",
        "- Lives in: Oslo",  # /memory
        "(no memory items yet",  # /items: the second message came within the skip window
        "/memories/index.md",  # /files
        "unknown command '/nope'",
    ):
        assert expected in out, expected
    assert out.index("assistant> (scripted stand-in) Noted") < out.index("Updating your memory")


def test_the_chat_pauses_memory_and_opts_out_on_command(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBMEMORY_MODEL", raising=False)
    typed = "I live in Oslo.\n/memory off\nI now live in Bergen.\n/memory\n/memory on\n/optout\n/memory\n/optin\n/quit\n"
    result = CliRunner().invoke(_app(), ["chat", "--agent", "CHAT", "--user", "u-8", "--session", "s1", "--url", url], input=typed)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Memory is paused" in out and "Memory is on" in out
    paused = out[out.index("Memory is paused") : out.index("Memory is on")]
    profile = paused[paused.index('user_id: "u-8"') :]  # what /memory printed while paused
    assert "Oslo" in profile and "Bergen" not in profile  # the paused turn updated nothing
    assert "Opted out: your profile was deleted for good" in out
    assert "(no profile yet" in out[out.index("Opted out") :]
    assert "Opted in: a new profile starts empty" in out


def _response(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "m",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def test_the_chat_command_works_with_a_mocked_litellm_model(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    view = {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": '{"command": "view", "path": "/memories"}'}}
    queue = [
        _response({"content": None, "tool_calls": [view]}, "tool_calls"),
        _response({"content": "Nice to meet you, Ada."}, "stop"),
    ]
    real = llm.complete
    scripted = ScriptedModel()

    def fake(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> llm.Completion:
        if purpose_of(messages):  # the profile steps: deterministic answers
            return scripted(model, messages, **kwargs)
        return real(model, messages, mock_response=queue.pop(0), **kwargs)

    monkeypatch.setattr(llm, "complete", fake)
    result = CliRunner().invoke(
        _app(),
        ["chat", "--agent", "CHAT", "--user", "u-8", "--model", "gpt-4o-mini", "--url", url],
        input="My name is Ada Lind.\n/memory\n",
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert SCRIPTED_NOTICE not in out
    assert "model 'gpt-4o-mini'" in out.splitlines()[0]
    assert "-> memory view /memories" in out
    assert "assistant> Nice to meet you, Ada." in out
    assert "- Name: Ada Lind" in out
    assert queue == []
