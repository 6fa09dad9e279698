"""Replay: the transcript readers, the replay loop on the shipped sample and on LoCoMo conv-26
with the scripted stand-in, and the ``dbmemory replay`` command."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from dbmemory.agent import ScriptedModel
from dbmemory.agent.replay import CountingModel, replay_conversation, replay_user_id
from dbmemory.agent.scripted import SCRIPTED_CHOSEN_NOTICE, SCRIPTED_NOTICE
from dbmemory.agent.setup import ensure_agent
from dbmemory.agent.transcripts import (
    Conversation,
    exchanges,
    parse_session_time,
    read_conversation,
    read_jsonl,
    read_locomo,
)
from dbmemory.cli._common import DbMemoryGroup
from dbmemory.cli.replay import register, sample_path
from dbmemory.errors import InvalidArgumentError, NotFoundError
from dbmemory.llm import Completion, ToolCall, Usage
from dbmemory.profile.config import UserMemoryConfig
from dbmemory.profile.format import SECTIONS, parse_body, split_frontmatter
from dbmemory.profile.prompts import gate_messages
from dbmemory.profile.tokens import count_tokens
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file, list_files

LOCOMO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo10.json"
needs_locomo = pytest.mark.skipif(not LOCOMO.exists(), reason=f"LoCoMo data not found at {LOCOMO}")


# ----------------------------------------------------------------------------- readers


def test_locomo_session_times_are_read_as_utc() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone.utc)
    assert parse_session_time("12:09 am on 13 September, 2023").hour == 0
    assert parse_session_time("2026-03-02T09:15:00Z") == dt.datetime(2026, 3, 2, 9, 15, tzinfo=dt.timezone.utc)
    assert parse_session_time("2026-03-02T10:15:00+01:00").hour == 9
    with pytest.raises(InvalidArgumentError, match="not understood"):
        parse_session_time("yesterday")


def test_jsonl_lines_become_sessions_and_exchanges() -> None:
    lines = [
        '{"session": "a", "time": "2026-01-01T10:00:00Z", "role": "assistant", "text": "Welcome!"}',
        '{"session": "a", "role": "user", "text": "Hi."}',
        '{"session": "a", "role": "user", "text": "I am Ola."}',
        '{"session": "a", "role": "assistant", "text": "Hello Ola."}',
        "",
        '{"session": "b b", "time": "2026-01-02 08:00", "role": "human", "text": "Again."}',
    ]
    conv = read_jsonl(lines, conversation_id="c")
    assert [s.id for s in conv.sessions] == ["c.a", "c.b-b"]
    assert conv.sessions[1].time == dt.datetime(2026, 1, 2, 8, tzinfo=dt.timezone.utc)
    first = exchanges(conv.sessions[0])
    assert [(e.user_text, e.assistant_text) for e in first] == [("Hi.\nI am Ola.", "Hello Ola.")]
    assert exchanges(conv.sessions[1])[0].assistant_text == ""
    assert conv.turn_count == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 1 is not JSON"),
        ('{"role": "user"}', "'text' string"),
        ('{"role": "robot", "text": "x"}', "role 'robot'"),
        ('{"role": "user", "text": "x", "time": "soon"}', "line 1: session time"),
    ],
)
def test_malformed_jsonl_lines_name_the_line_and_the_rule(line: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        read_jsonl([line])


def test_locomo_samples_and_speakers_are_chosen_by_name() -> None:
    data = [
        {
            "sample_id": "s-1",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bob",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "I paint."},
                    {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a brush"},
                ],
            },
        }
    ]
    conv = read_locomo(data, sample="s-1")
    assert (conv.user_speaker, conv.assistant_speaker) == ("Ann", "Bob")
    (exchange,) = exchanges(conv.sessions[0])
    assert exchange.user_text == "I paint."
    assert exchange.assistant_text == "Nice! [shares a photo: a brush]"
    assert read_locomo(data, as_speaker="bob").user_speaker == "Bob"
    assert read_locomo(data, as_speaker="speaker_b").user_speaker == "Bob"
    with pytest.raises(NotFoundError, match="sample 'x'"):
        read_locomo(data, sample="x")
    with pytest.raises(NotFoundError, match="speaker 'Eve'"):
        read_locomo(data, as_speaker="Eve")


def test_the_shipped_sample_is_a_short_multi_session_conversation() -> None:
    conv = read_conversation(sample_path())
    assert 3 <= len(conv.sessions) <= 4
    assert 15 <= conv.turn_count <= 30
    assert all(s.time is not None for s in conv.sessions)


@needs_locomo
def test_locomo_conv_26_is_read_from_the_shared_data() -> None:
    conv = read_conversation(LOCOMO, sample="conv-26")
    assert conv.id == "conv-26" and conv.user_speaker == "Caroline"
    assert len(conv.sessions) == 19
    assert conv.sessions[0].time == dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone.utc)
    assert conv.limited(3).turn_count < conv.turn_count


# ----------------------------------------------------------------------------- the loop


def assert_valid_profile(text: str, *, max_tokens: int, model: str = "scripted") -> None:
    frontmatter, body = split_frontmatter(text)
    assert frontmatter is not None and "turn_count:" in frontmatter
    parsed = parse_body(body)
    assert parsed.found == SECTIONS, parsed.found
    assert count_tokens(text, model) <= max_tokens


def _replay(engine: Engine, conversation: Conversation, **kwargs: Any) -> Any:
    ensure_agent(engine, "replay")
    return replay_conversation(engine, conversation, model="scripted", complete=ScriptedModel(), **kwargs)


def test_replaying_the_shipped_sample_builds_a_profile_and_notes(engine: Engine) -> None:
    conv = read_conversation(sample_path())
    summary = _replay(engine, conv)
    assert summary.turns == conv.turn_count
    assert summary.noop + summary.rewrites + summary.outcomes["unchanged"] == summary.turns
    assert summary.rewrites >= 5 and summary.noop >= 3
    assert summary.vetoes == summary.conflicts == summary.tool_errors == 0
    assert_valid_profile(summary.profile_text, max_tokens=summary.max_tokens)
    body = split_frontmatter(summary.profile_text)[1]
    assert "- Name: Noor Halvorsen" in body
    assert "- Lives in: Oslo" in body and "Bergen" not in body.split("## Recent Topics")[0]  # newest wins
    # Recent Topics dates come from the recorded session times, not the wall clock
    assert "- 2026-03-02 09:15 UTC:" in body and "- 2026-04-02 14:30 UTC:" in body
    assert f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC" not in body
    assert set(summary.purposes) == {
        "agent", "gate", "rewrite", "scrub", "item_extract", "item_scrub", "item_decide",
    }
    assert summary.purposes["gate"].calls == summary.turns
    assert summary.purposes["rewrite"].prompt_tokens > 0
    assert all(summary.stages[s] >= 0 for s in ("ready", "load", "model", "tools", "consolidation", "total"))
    with engine.connect() as conn:
        store_id = find_store_id(conn, f"user:replay:{replay_user_id(conv)}")
        paths = [f.path for f in list_files(conn, store_id)]
        index = get_file(conn, store_id, "/memories/index.md").text
    assert paths == ["/memories/index.md"] + [f"/memories/sessions/{s.id}.md" for s in conv.sessions]
    assert index.count("- sessions/") == len(conv.sessions)


@needs_locomo
def test_replaying_locomo_conv_26_leaves_a_valid_profile_within_budget(engine: Engine) -> None:
    conv = read_conversation(LOCOMO, sample="conv-26")
    summary = _replay(engine, conv)
    assert summary.turns == conv.turn_count == 211
    assert summary.outcomes["error"] == summary.outcomes["failed"] == 0
    assert summary.tool_errors == 0 and summary.tool_limit_hits == 0
    assert_valid_profile(summary.profile_text, max_tokens=summary.max_tokens)
    assert "- 2023-10-22 09:55 UTC:" in summary.profile_text  # the last session's recorded time


@needs_locomo
def test_a_small_budget_is_held_by_condensation(engine: Engine) -> None:
    conv = read_conversation(LOCOMO, sample="conv-26").limited(6)
    ensure_agent(engine, "replay")
    summary = replay_conversation(
        engine,
        conv,
        model="scripted",
        complete=ScriptedModel(recent_topics_limit=100),
        user_memory=UserMemoryConfig(max_tokens=500),
    )
    assert summary.condensed + summary.truncated > 0
    assert_valid_profile(summary.profile_text, max_tokens=500)


def test_the_recorded_reply_replaces_only_the_agents_final_answer() -> None:
    answers = iter(
        [
            Completion("", "tool_calls", [ToolCall("c1", "memory", "{}")], Usage(3, 1)),
            Completion("model text", "stop", usage=Usage(5, 2)),
        ]
    )
    counting = CountingModel(lambda model, messages, **kw: next(answers))
    counting.recorded_reply = "recorded"
    assert counting("m", [{"role": "user", "content": "x"}]).tool_calls  # tool calls pass through
    assert counting("m", [{"role": "user", "content": "x"}]).text == "recorded"
    gate = CountingModel(lambda model, messages, **kw: Completion("UPDATE", "stop", usage=Usage(7, 1)))
    gate.recorded_reply = "recorded"
    assert gate("m", gate_messages("", "hi", "hello")).text == "UPDATE"  # profile steps untouched
    assert counting.stats["agent"].calls == 2 and counting.stats["agent"].prompt_tokens == 8
    assert gate.stats["gate"].completion_tokens == 1


# ----------------------------------------------------------------------------- the command


def _app() -> typer.Typer:
    app = typer.Typer(cls=DbMemoryGroup, add_completion=False)

    @app.callback()
    def _root() -> None:
        """Test app."""

    register(app)
    return app


def test_the_replay_command_prints_profile_files_and_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBMEMORY_MODEL", raising=False)
    url = f"sqlite:///{(tmp_path / 'r.db').as_posix()}"
    result = CliRunner().invoke(_app(), ["replay", "--url", url])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == SCRIPTED_NOTICE
    assert "Installed dbmemory's schema" in result.stdout
    assert "Final profile of replay.sample_conversation" in result.stdout
    assert "- Name: Noor Halvorsen" in result.stdout
    assert "/memories/index.md" in result.stdout and "/memories/memory.md" in result.stdout
    for heading in ("NOOP", "rewrites", "vetoes", "conflicts", "prompt tokens", "consolidation"):
        assert heading in result.stdout
    # a second run starts from the same empty state (the default replay user is reset)
    again = CliRunner().invoke(_app(), ["replay", "--url", url, "--json"])
    assert again.exit_code == 0, again.output
    assert again.stderr.splitlines()[0] == SCRIPTED_NOTICE
    data = json.loads(again.stdout)
    assert data["summary"]["turns"] == 19 and data["summary"]["rewrites"] >= 5
    assert data["profile"].count("turn_count: ") == 1
    assert re.search(r"turn_count: (\d+)", data["profile"]).group(1) == str(data["summary"]["rewrites"])
    assert {f["path"] for f in data["files"]} >= {"/memories/index.md", "/memories/memory.md"}


def test_an_explicit_scripted_model_is_not_called_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBMEMORY_MODEL", raising=False)
    url = f"sqlite:///{(tmp_path / 'r.db').as_posix()}"
    result = CliRunner().invoke(_app(), ["replay", "--url", url, "--model", "scripted"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == SCRIPTED_CHOSEN_NOTICE
    assert "No model configured" not in result.stdout


@needs_locomo
def test_the_replay_command_reads_locomo_with_sample_speaker_and_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBMEMORY_MODEL", raising=False)
    url = f"sqlite:///{(tmp_path / 'l.db').as_posix()}"
    result = CliRunner().invoke(
        _app(), ["replay", str(LOCOMO), "--sample", "conv-26", "--as", "Melanie", "--sessions", "2", "--url", url, "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"]["sessions"] == 2
    assert data["summary"]["user_id"] == "replay.conv-26.Melanie"


def test_the_replay_command_fails_with_one_line_for_a_missing_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(_app(), ["replay", str(tmp_path / "none.jsonl"), "--url", f"sqlite:///{tmp_path}/x.db"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("Error: conversation file")


def test_the_reset_before_a_replay_never_clears_a_store_shared_beyond_the_replay_user(engine: Engine) -> None:
    from dbmemory.agent.replay import reset_replay_memory
    from dbmemory.store.agents import enable_for_agent
    from dbmemory.tool import MemoryTool

    with engine.begin() as conn:
        enable_for_agent(conn, "TEAM")  # agent scope: one store for every user
        MemoryTool(conn, "TEAM").execute({"command": "create", "path": "/memories/keep.md", "file_text": "team"})
    reset_replay_memory(engine, agent_code="TEAM", user_id="replay.x")
    with engine.connect() as conn:
        assert get_file(conn, find_store_id(conn, "agent:TEAM"), "/memories/keep.md").text == "team"
