"""The scripted stand-in model: its documented, deterministic policy."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from dbmemory.agent.litellm_tools import memory_tools
from dbmemory.agent.scripted import ScriptedModel, detect_purpose
from dbmemory.agent.scripted_text import first_person_statements, is_small_talk, profile_facts
from dbmemory.profile.format import SECTIONS, empty_sections, parse_body, render_body
from dbmemory.profile.prompts import (
    condense_messages,
    gate_messages,
    rewrite_messages,
    scrub_messages,
)

EMPTY = render_body(empty_sections())


def test_the_purpose_is_recognised_from_the_profile_prompts() -> None:
    assert detect_purpose(gate_messages(EMPTY, "hi", "hello")) == "gate"
    assert detect_purpose(rewrite_messages(EMPTY, "hi", "hello", now_utc="2026-01-01 10:00 UTC")) == "rewrite"
    assert detect_purpose(scrub_messages(EMPTY)) == "scrub"
    assert detect_purpose(condense_messages(EMPTY, target_tokens=90, max_tokens=100)) == "condense"
    assert detect_purpose([{"role": "user", "content": "hi"}], memory_tools()) == "agent"
    assert detect_purpose([{"role": "user", "content": "hi"}]) == "chat"
    assert detect_purpose([{"role": "user", "content": "hi"}], purpose="scrub") == "scrub"


@pytest.mark.parametrize("text", ["Hi there!", "Thanks, that helps.", "What time is it?", "Yes please."])
def test_small_talk_and_questions_hold_no_statement(text: str) -> None:
    assert is_small_talk(text)


def test_first_person_sentences_are_the_statements() -> None:
    text = "Morning! I moved to Oslo last week. Can you help? My team is small but great."
    assert first_person_statements(text) == ["I moved to Oslo last week.", "My team is small but great."]


def test_obvious_facts_go_to_their_sections() -> None:
    facts = profile_facts(
        "My name is Noor Halvorsen and I work as a data engineer at a shipping firm. "
        "I prefer short answers with code examples. I'm learning Rust. I love that you asked. "
        "Remind me to call the bank on Friday. I enjoy sailing."
    )
    assert ("Identity", "Name", "Name: Noor Halvorsen") in facts
    assert ("Work Context", "Works", "Works as a data engineer at a shipping firm") in facts
    assert ("Communication Preferences", None, "Prefers short answers with code examples") in facts
    assert ("Skills & Expertise", None, "Learning Rust") in facts
    assert ("Follow-ups", None, "Asked to be reminded to call the bank on Friday") in facts
    assert ("Identity", None, "Enjoys sailing") in facts
    assert not any("asked" in bullet for _, _, bullet in facts if bullet.startswith("Enjoys"))


def _text(model: ScriptedModel, messages: list[dict[str, Any]]) -> str:
    return model("scripted", messages).text


def test_the_gate_and_rewrite_answer_noop_to_small_talk() -> None:
    model = ScriptedModel()
    assert _text(model, gate_messages(EMPTY, "Thanks!", "You're welcome")) == "NOOP"
    assert _text(model, gate_messages(EMPTY, "I live in Oslo now.", "ok")) == "UPDATE"
    assert _text(model, rewrite_messages(EMPTY, "Great, thanks!", "ok", now_utc="2026-01-01 10:00 UTC")) == "NOOP"


def test_a_rewrite_adds_a_dated_recent_topic_and_the_newest_value_wins() -> None:
    model = ScriptedModel()
    first = _text(model, rewrite_messages(EMPTY, "I live in Bergen and my name is Ada Lind.", "ok", now_utc="2026-03-02 09:15 UTC"))
    second = _text(model, rewrite_messages(first, "I moved to Oslo last week.", "ok", now_utc="2026-03-20 08:05 UTC"))
    sections = parse_body(second).sections
    assert parse_body(second).found == SECTIONS
    assert sections["Identity"].splitlines() == ["- Name: Ada Lind", "- Lives in: Oslo"]
    topics = sections["Recent Topics"].splitlines()
    assert topics[0] == "- 2026-03-20 08:05 UTC: I moved to Oslo last week."  # newest first
    assert topics[1].startswith("- 2026-03-02 09:15 UTC: I live in Bergen")


def test_recent_topics_keep_the_newest_bullets_only() -> None:
    model = ScriptedModel(recent_topics_limit=2)
    body = EMPTY
    for day in (1, 2, 3):
        body = _text(model, rewrite_messages(body, f"I visited museum number {day} today.", "ok", now_utc=f"2026-01-0{day} 10:00 UTC"))
    topics = parse_body(body).sections["Recent Topics"].splitlines()
    assert [t[:18] for t in topics] == ["- 2026-01-03 10:00", "- 2026-01-02 10:00"]


def test_the_scrub_answers_clean_or_drops_sensitive_lines() -> None:
    model = ScriptedModel()
    assert _text(model, scrub_messages("# User Memory\n\n## Identity\n- Name: Ada\n")) == "CLEAN"
    cleaned = _text(model, scrub_messages("# User Memory\n\n## Identity\n- Name: Ada\n- Mail: ada@example.com\n"))
    assert "ada@example.com" not in cleaned and "- Name: Ada" in cleaned


def test_condensation_drops_the_oldest_recent_topics_first() -> None:
    topics = "\n".join(f"- 2026-01-{d:02d} 10:00 UTC: " + "a long topic line " * 5 for d in range(20, 0, -1))
    body = render_body(dict(empty_sections(), **{"Identity": "- Name: Ada", "Recent Topics": topics}))
    out = _text(ScriptedModel(), condense_messages(body, target_tokens=150, max_tokens=170))
    sections = parse_body(out).sections
    assert sections["Identity"] == "- Name: Ada"
    kept = sections["Recent Topics"].splitlines()
    assert kept and kept[0].startswith("- 2026-01-20") and len(kept) < 20
    assert len(out) <= 150 * 3


def _agent_call(model: ScriptedModel, text: str, results: list[str], session: str = "s1") -> Any:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"Be nice.\nSession: {session}\nCurrent time (UTC): 2026-03-02T09:15:00+00:00"},
        {"role": "user", "content": text},
    ]
    for i, result in enumerate(results, start=1):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}"}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return model("scripted", messages, tools=memory_tools())


def test_the_agent_policy_views_memory_first_and_writes_a_notes_file_and_an_index() -> None:
    model = ScriptedModel()
    statement = "I work as a data engineer at a shipping firm."
    first = _agent_call(model, statement, [])
    assert first.tool_calls[0].arguments == {"command": "view", "path": "/memories"}
    empty_listing = "Here're the files ...:\n0\t/memories"
    create = _agent_call(model, statement, [empty_listing]).tool_calls[0].arguments
    assert create["command"] == "create" and create["path"] == "/memories/sessions/s1.md"
    assert "- 2026-03-02 09:15 UTC: I work as a data engineer" in create["file_text"]
    index = _agent_call(model, statement, [empty_listing, "File created"]).tool_calls[0].arguments
    assert index["command"] == "create" and index["path"] == "/memories/index.md"
    final = _agent_call(model, statement, [empty_listing, "File created", "File created"])
    assert final.tool_calls == [] and final.text == "(scripted stand-in) Noted in /memories/sessions/s1.md."


def test_the_agent_policy_edits_an_existing_notes_file_with_str_replace_and_insert() -> None:
    model = ScriptedModel()
    listing = "x\n0\t/memories\n1K\t/memories/index.md\n1K\t/memories/sessions/s1.md"
    notes = "Here's the content:\n     1\t# Notes of session s1\n     2\t\n     3\tUpdated: 2026-03-01 08:00 UTC\n     4\t\n     5\t- old"
    text = "I moved to Oslo last week."
    step = _agent_call(model, text, [listing]).tool_calls[0].arguments
    assert step == {"command": "view", "path": "/memories/sessions/s1.md"}
    step = _agent_call(model, text, [listing, notes]).tool_calls[0].arguments
    assert step == {
        "command": "str_replace",
        "path": "/memories/sessions/s1.md",
        "old_str": "Updated: 2026-03-01 08:00 UTC",
        "new_str": "Updated: 2026-03-02 09:15 UTC",
    }
    step = _agent_call(model, text, [listing, notes, "edited"]).tool_calls[0].arguments
    assert step["command"] == "insert" and step["insert_line"] == 5
    done = _agent_call(model, text, [listing, notes, "edited", "edited"])
    assert done.tool_calls == []


def test_the_agent_policy_writes_nothing_for_small_talk() -> None:
    model = ScriptedModel()
    done = _agent_call(model, "Thanks a lot!", ["listing"])
    assert done.tool_calls == [] and "Noted nothing new" in done.text


def test_usage_is_an_estimate_so_counters_have_numbers() -> None:
    completion = ScriptedModel()("scripted", gate_messages(EMPTY, "I live in Oslo.", "ok"))
    assert completion.usage.prompt_tokens > 10 and completion.usage.completion_tokens >= 1


def test_the_time_comes_from_the_prompt_else_from_now() -> None:
    fixed = dt.datetime(2030, 1, 2, 3, 4, tzinfo=dt.timezone.utc)
    model = ScriptedModel(now=fixed)
    call = model("scripted", [{"role": "user", "content": "I live in Oslo now."}, {"role": "tool", "content": "listing"}], tools=memory_tools())
    # no system prompt: session "default", time from `now`
    assert call.tool_calls[0].arguments["path"] == "/memories/sessions/default.md"
    assert "2030-01-02 03:04 UTC" in call.tool_calls[0].arguments["file_text"]
