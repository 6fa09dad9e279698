"""Episodes and the searched block in a whole turn, and the injection as a function, every
backend (the scripted stand-in answers; no key)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.agent import TurnConfig, run_turn
from dbmemory.agent.injection import injected_memory
from dbmemory.agent.scripted import ScriptedModel
from dbmemory.db.schema import episodes
from dbmemory.items import set_memory_switch
from dbmemory.items.episodes import list_episodes, record_episode
from dbmemory.items.extract_prompts import purpose_of as item_purpose_of
from dbmemory.items.memory_search import SearchHit
from dbmemory.items.search_inject import SEARCH_SECTION_TITLE, ground_dates, render_search_block
from dbmemory.items.search_tool import SEARCH_TOOL_NAME, run_search_tool
from dbmemory.items.settings import set_org_setting
from dbmemory.llm import Completion, ToolCall
from dbmemory.profile.prompts import purpose_of
from dbmemory.profile.tokens import count_tokens
from dbmemory.store.agents import enable_for_agent

AGENT = "helper"
USER = "u-7"
T0 = dt.datetime(2023, 5, 8, 13, 0, tzinfo=dt.timezone.utc)


class Watching(ScriptedModel):
    def __init__(self) -> None:
        super().__init__(now=T0)
        self.systems: list[str] = []

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any):  # type: ignore[override]
        if not purpose_of(messages) and not item_purpose_of(messages):
            self.systems.append(messages[0]["content"] if messages[0]["role"] == "system" else "")
        return super().__call__(model, messages, **kwargs)


@pytest.fixture
def agent(engine: Engine) -> Engine:
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT)
    return engine


def turn(engine: Engine, model: Watching, text: str, *, at: dt.datetime, session: str = "s-1", **kw: Any) -> Any:
    result = run_turn(
        engine, agent_code=AGENT, user_id=USER, session_id=session,
        messages=[{"role": "user", "content": text}], model="scripted", complete=model,
        config=TurnConfig(post_process="inline", now=at, **kw),
    )
    return result


def test_a_turn_keeps_its_exchange_and_a_later_turn_injects_it_with_its_date(agent: Engine) -> None:
    model = Watching()
    turn(agent, model, "I adopted a greyhound named Pixel yesterday", at=T0)
    with agent.connect() as c:
        (ep,) = list_episodes(c, USER, now=T0)
    assert ep.user_text == "I adopted a greyhound named Pixel yesterday" and ep.chat_id == "s-1"
    assert ep.turn_at == T0 and ep.assistant_text
    turn(agent, model, "What is the name of my greyhound?", at=T0 + dt.timedelta(days=30), session="s-2")
    system = model.systems[-1]
    assert f"## {SEARCH_SECTION_TITLE}" in system
    assert "[8 May 2023, chat s-1]" in system
    assert "- user: I adopted a greyhound named Pixel yesterday (7 May 2023)" in system


def test_memory_search_off_keeps_no_episode_and_injects_none(agent: Engine) -> None:
    model = Watching()
    turn(agent, model, "I adopted a greyhound named Pixel", at=T0, memory_search=False)
    with agent.connect() as c:
        assert list_episodes(c, USER, now=T0) == []


def test_the_memory_switch_off_stops_episode_writes_in_a_turn(agent: Engine) -> None:
    with agent.begin() as c:
        set_memory_switch(c, USER, False)
    turn(agent, Watching(), "I adopted a greyhound named Pixel", at=T0)
    with agent.connect() as c:
        assert c.execute(sa.select(sa.func.count()).select_from(episodes)).scalar_one() == 0


def test_injected_memory_is_what_the_turn_injects_and_stays_in_the_search_budget(agent: Engine) -> None:
    with agent.begin() as c:
        set_org_setting(c, "default", "search_token_budget", 200, is_admin=True)
        for i in range(40):
            record_episode(c, USER, f"greyhound story number {i} about Pixel the greyhound and walks",
                           "Nice greyhound story " * 5, chat_id=f"s{i % 3}",
                           turn_at=T0 + dt.timedelta(days=i))
    model = Watching()
    at = T0 + dt.timedelta(days=60)
    message = "Tell me about my greyhound"
    report = injected_memory(agent, user_id=USER, question=message, model="scripted", now=at)
    text = report.text
    assert report.found > len(report.sources) > 0 and report.search_tokens <= 200
    assert all(s["label"].startswith("[conversation 2023-") for s in report.sources)
    turn(agent, model, message, at=at, session="s-9", memory_search=True)
    assert text and text in model.systems[-1]


def test_render_keeps_whole_hits_within_the_budget_and_groups_by_session() -> None:
    hits = [
        SearchHit("episode", str(i), "x", 1.0 - i / 100, when=T0 + dt.timedelta(days=i % 2),
                  chat_id=f"c{i % 2}", user_text=f"turn {i} " + "word " * 30, assistant_text="reply")
        for i in range(30)
    ] + [SearchHit("file", "user:A:u:/memories/n.md", "a note", 0.5, path="/memories/n.md")]
    for budget in (60, 150, 400, 1200):
        text, chosen, tokens = render_search_block(hits, max_tokens=budget, model="gpt-4o-mini")
        assert tokens == count_tokens(text, "gpt-4o-mini") <= budget
        if chosen:
            headers = [line for line in text.splitlines() if line.startswith("[") and "chat" in line]
            assert len(headers) == len(set(headers)) <= 2  # one header per session and day
    text, _, _ = render_search_block(hits[-1:], max_tokens=400, model="gpt-4o-mini")
    assert "[file /memories/n.md] a note" in text


def test_a_turn_under_a_header_already_chosen_costs_only_its_line() -> None:
    """The block fills its budget: a turn of a chat and day already in the block pays no
    second header, so no left-out hit would still have fitted."""
    hits = [
        SearchHit("episode", str(i), "x", 1.0 - i / 100, when=T0, chat_id="a-long-chat-id-" + "x" * 40,
                  user_text=f"turn {i} " + "word " * 8, assistant_text="")
        for i in range(100)
    ]
    for budget in (120, 300, 700):
        text, chosen, tokens = render_search_block(hits, max_tokens=budget, model="gpt-4o-mini")
        assert tokens <= budget and text.count("a-long-chat-id") == 1
        left = [h for h in hits if h not in chosen]
        assert left, "the budget holds fewer hits than there are"
        ordered = sorted([*chosen, left[0]], key=lambda h: hits.index(h))
        wider, _, _ = render_search_block(ordered, max_tokens=10_000, model="gpt-4o-mini")
        assert count_tokens(wider, "gpt-4o-mini") > budget  # the next hit did not fit


def test_relative_dates_are_grounded_to_the_sessions_date() -> None:
    day = dt.date(2023, 5, 8)
    assert ground_dates("we met yesterday", day) == "we met yesterday (7 May 2023)"
    assert ground_dates("3 days ago", day) == "3 days ago (5 May 2023)"
    assert ground_dates("last week", day) == "last week (the week before 8 May 2023)"
    assert ground_dates("last month and last year", day) == "last month (April 2023) and last year (2022)"
    assert ground_dates("nothing relative", day) == "nothing relative"
    # as precise as the words are: a weekday or a week is said relative to the turn's day
    assert ground_dates("Last Friday I ran", day) == "Last Friday (the Friday before 8 May 2023) I ran"
    assert ground_dates("two weekends ago", day) == "two weekends ago (two weekends before 8 May 2023)"
    assert ground_dates("a week ago", day) == "a week ago (the week before 8 May 2023)"
    assert ground_dates("a few days ago", day) == "a few days ago (a few days before 8 May 2023)"
    assert ground_dates("three months ago", day) == "three months ago (February 2023)"
    assert ground_dates("next week, next month", day) == (
        "next week (the week after 8 May 2023), next month (June 2023)"
    )
    assert ground_dates("this weekend, not this Sunday", day) == (
        "this weekend (the weekend of 8 May 2023), not this Sunday"
    )
    # the quick check for the words a relative date needs skips nothing the pattern finds
    assert ground_dates("TONIGHT and This Morning", day) == "TONIGHT (8 May 2023) and This Morning (8 May 2023)"
    assert ground_dates("Tomorrow, today", day) == "Tomorrow (9 May 2023), today (8 May 2023)"
    assert ground_dates("ﬁne yesterday", day) == "ﬁne yesterday (7 May 2023)"  # not ASCII: the pattern decides
    assert ground_dates("last month", dt.date(2023, 1, 15)) == "last month (December 2022)"


def test_the_model_can_call_memory_search_next_to_the_memory_tool(agent: Engine) -> None:
    with agent.begin() as c:
        record_episode(c, USER, "My sister Lena got married in Porto", "Congratulations!", chat_id="s-0", turn_at=T0)
        record_episode(c, "someone-else", "My sister Lena got married in Porto", "ok", turn_at=T0)
    seen: list[list[str]] = []

    def model(name: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages) or item_purpose_of(messages):
            return ScriptedModel(now=T0)(name, messages, **kwargs)
        seen.append([t["function"]["name"] for t in kwargs.get("tools") or []])
        if not any(m.get("role") == "tool" for m in messages):
            return Completion("", "tool_calls", [
                ToolCall("c1", SEARCH_TOOL_NAME, {"query": "sister wedding Porto", "scope": "episodes"}),
                ToolCall("c2", SEARCH_TOOL_NAME, {"query": "x", "limit": 99}),
            ])
        return Completion("In Porto.", "stop")

    result = run_turn(
        agent, agent_code=AGENT, user_id=USER, session_id="s-1",
        messages=[{"role": "user", "content": "hello"}], model="scripted", complete=model,
        config=TurnConfig(post_process="off", now=T0 + dt.timedelta(days=1)),
    )
    assert seen[0] == ["memory", SEARCH_TOOL_NAME]
    first, second = result.tool_calls
    assert not first.is_error
    assert first.result == (
        "1. [conversation 2023-05-08] user: My sister Lena got married in Porto | assistant: Congratulations!"
    )
    assert second.is_error and "limit must be a whole number from 1 to 20" in second.result
    assert result.answer == "In Porto."


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ("not an object", "takes a JSON object"),
        ({}, "query is required"),
        ({"query": "x", "scope": "elsewhere"}, "scope must be one of"),
        ({"query": "x", "where": 1}, "no parameter 'where'"),
    ],
)
def test_memory_search_arguments_errors_are_text(engine: Engine, arguments: Any, error: str) -> None:
    with engine.connect() as c:
        text = run_search_tool(c, arguments, user_id=USER)
    assert text.startswith("Error: ") and error in text
