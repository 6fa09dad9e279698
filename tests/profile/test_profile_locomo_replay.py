"""Done-when of issue 3: replay a real multi-session conversation (LoCoMo conv-26) turn by turn.

Each exchange (a line of speaker A as the user, speaker B's recorded reply as the assistant's
answer) goes through load -> memory_prompt_section -> consolidate. The fake model is scripted:
it answers NOOP to short small talk and otherwise rewrites the profile by adding a Recent Topics
bullet (newest first) for the exchange, with the session's date; its condensation keeps the ten
newest topics. The profile must stay valid and within budget after every turn.

With a real model: set ``DBMEMORY_TEST_MODEL`` (a litellm name such as ``gpt-4o-mini`` or
``ollama/llama3.1``) and its credentials (``OPENAI_API_KEY``, ``OLLAMA_API_BASE`` ...) and run
``pytest -m llm tests/profile/test_profile_locomo_replay.py``: the first session is replayed through
:func:`dbmemory.llm.complete`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from _profile_fakes import FakeModel, user_settings_table
from dbmemory.profile import (
    UserMemoryConfig,
    UserMemoryPostprocessor,
    load_user_memory,
    memory_prompt_section,
    parse_profile,
)
from dbmemory.profile.format import SECTIONS, parse_body
from dbmemory.profile.tokens import count_tokens

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo10.json"
MODEL = "gpt-4o-mini"


def _exchanges(limit_sessions: int | None = None) -> list[tuple[dt.datetime, str, str, str]]:
    """``(when, user_name, user_text, assistant_text)`` of the first conversation, in order."""
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo data not found at {LOCOMO}")
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    conversation = sample["conversation"]
    user = conversation["speaker_a"]
    numbers = sorted(
        int(m.group(1)) for k in conversation if (m := re.fullmatch(r"session_(\d+)", k))
    )
    out: list[tuple[dt.datetime, str, str, str]] = []
    for number in numbers[:limit_sessions]:
        when = dt.datetime.strptime(
            conversation[f"session_{number}_date_time"], "%I:%M %p on %d %B, %Y"
        ).replace(tzinfo=dt.timezone.utc)
        turns = conversation[f"session_{number}"]
        for index, turn in enumerate(turns):
            if turn["speaker"] != user:
                continue
            reply = next((t["text"] for t in turns[index + 1 :] if t["speaker"] != user), "")
            out.append((when + dt.timedelta(minutes=index), user, turn["text"], reply))
    return out


def _between(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    assert match, tag
    return match.group(1)


def _scripted_rewrite(user_name: str) -> Any:
    def rewrite(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        now = re.search(r"Current time: (.+ UTC)", prompt).group(1)
        user_text = _between(prompt, "user_message")
        if len(user_text) < 40:
            return "NOOP"
        sections = parse_body(_between(prompt, "current_profile")).sections
        sections["Identity"] = f"- Name: {user_name}"
        topic = " ".join(user_text.split())[:120]
        recent = [line for line in sections["Recent Topics"].split("\n") if line.strip()]
        sections["Recent Topics"] = "\n".join([f"- {now}: {topic}", *recent])
        reply = "Sure, here is the updated profile:\n\n# User Memory\n\n"
        return reply + "".join(f"## {n}\n{sections[n] or '_(empty)_'}\n\n" for n in SECTIONS)

    return rewrite


def _scripted_condense(messages: list[dict[str, Any]]) -> str:
    sections = parse_body(_between(messages[-1]["content"], "profile")).sections
    recent = [line for line in sections["Recent Topics"].split("\n") if line.strip()]
    sections["Recent Topics"] = "\n".join(recent[:10])
    return "```markdown\n# User Memory\n\n" + "".join(
        f"## {n}\n{sections[n] or '_(empty)_'}\n\n" for n in SECTIONS
    ) + "```"


def _replay(engine: Engine, complete: Any, exchanges: list[tuple[dt.datetime, str, str, str]], config: UserMemoryConfig, model: str) -> dict[str, int]:
    user_id = "locomo:conv-26:Caroline"
    outcomes: dict[str, int] = {}
    for when, _, user_text, assistant_text in exchanges:
        with engine.begin() as conn:
            state = load_user_memory(conn, user_id, config=config, model=model)
        section = memory_prompt_section(state)
        assert (state is None) == (section == "")
        result = UserMemoryPostprocessor(
            engine, config, model, user_id, state, complete=complete, now=lambda when=when: when
        ).run(user_text, assistant_text)
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
        assert result.outcome in ("updated", "noop", "unchanged"), (result.outcome, result.reason)
        if result.text is not None:
            assert count_tokens(result.text, model) <= config.max_tokens
            profile = parse_profile(result.text)
            assert profile.user_id == user_id
            assert all(f"\n## {name}\n" in result.text for name in SECTIONS)
            assert "NOOP" not in result.text and "```" not in result.text
    return outcomes


def test_replaying_the_first_locomo_conversation_keeps_a_valid_profile_within_budget(
    engine: Engine,
) -> None:
    exchanges = _exchanges()
    assert len(exchanges) > 150
    name = exchanges[0][1]
    fake = FakeModel(gate="UPDATE", rewrite=_scripted_rewrite(name), condense=_scripted_condense)
    config = UserMemoryConfig(max_tokens=500)
    with user_settings_table(engine):
        outcomes = _replay(engine, fake, exchanges, config, MODEL)
        with engine.begin() as conn:
            final = load_user_memory(conn, "locomo:conv-26:Caroline", config=config, model=MODEL)
    assert outcomes["updated"] > 150 and outcomes["noop"] > 0
    assert final is not None and not final.truncated
    profile = parse_profile(final.text)
    assert profile.turn_count == outcomes["updated"]
    assert profile.sections["Identity"] == f"- Name: {name}"
    topics = profile.sections["Recent Topics"].split("\n")
    assert 1 <= len(topics) <= 60
    assert re.match(r"- 2023-\d\d-\d\d \d\d:\d\d UTC: ", topics[0])
    assert fake.purposes().count("condense") > 0


@pytest.mark.llm
def test_replaying_the_first_session_with_a_real_model(engine: Engine) -> None:
    model = os.environ.get("DBMEMORY_TEST_MODEL")
    if not model:
        pytest.skip("set DBMEMORY_TEST_MODEL (and the provider's key) to run against a real model")
    from dbmemory.llm import complete

    config = UserMemoryConfig(max_tokens=1000)
    with user_settings_table(engine):
        outcomes = _replay(engine, complete, _exchanges(limit_sessions=1), config, model)
    assert outcomes.get("updated", 0) >= 1
