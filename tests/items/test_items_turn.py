"""Organisation memory, profile and items in a whole turn (issue 9, "Runtime"), every backend.

The scripted stand-in answers the agent, the profile consolidation and the item extraction
(its fixed rule, :mod:`dbmemory.agent.scripted_items`), so the whole path runs without a key.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from dbmemory.agent import TurnConfig, arun_turn, run_turn
from dbmemory.agent.scripted import ScriptedModel
from dbmemory.items import add_item, list_items, set_memory_switch, set_org_memory
from dbmemory.items.extract_prompts import purpose_of as item_purpose_of
from dbmemory.items.inject import ITEMS_SECTION_TITLE, ORG_SECTION_TITLE
from dbmemory.profile.load import SECTION_TITLE as PROFILE_TITLE
from dbmemory.profile.prompts import purpose_of
from dbmemory.store.agents import enable_for_agent

AGENT = "helper"
USER = "u-7"
T0 = dt.datetime(2026, 4, 1, 8, 0, tzinfo=dt.timezone.utc)


class Watching(ScriptedModel):
    """The scripted model, keeping the system prompt of every agent call."""

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


def turn(engine: Any, model: Watching, text: str, *, session: str, at: dt.datetime, history: tuple = (), **kw: Any):
    earlier = [m for h in history for m in ({"role": "user", "content": h}, {"role": "assistant", "content": "ok"})]
    return run_turn(
        engine, agent_code=AGENT, user_id=USER, session_id=session,
        messages=[*earlier, {"role": "user", "content": text}], model="scripted", complete=model,
        config=TurnConfig(post_process=kw.pop("post_process", "inline"), now=at), **kw,
    )


def live(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list_items(conn, USER, now=T0 + dt.timedelta(days=1))


def test_a_turn_extracts_items_and_the_next_turn_injects_org_memory_profile_and_items_in_order(agent):
    with agent.begin() as conn:
        set_org_memory(conn, "default", "Our fiscal year starts in April.", is_admin=True, actor="admin")
    model = Watching()
    first = turn(agent, model, "My name is Ana Lopes. I live in Lisbon.", session="s-1", at=T0)
    first.post_processing.wait()
    assert first.item_extraction is not None and first.item_extraction.outcome == "written"
    assert sorted(i.text for i in live(agent)) == ["User lives in Lisbon", "User's name is Ana Lopes"]

    second = turn(agent, model, "Where do I live?", session="s-2", at=T0 + dt.timedelta(hours=1))
    system = model.systems[-1]
    org, profile, items = (system.index(f"## {t}") for t in (ORG_SECTION_TITLE, PROFILE_TITLE, ITEMS_SECTION_TITLE))
    assert org < profile < items
    assert "Our fiscal year starts in April." in system and "- User lives in Lisbon (auto)" in system
    assert second.org_memory_loaded and len(second.items_injected) == 2
    second.post_processing.wait()
    assert all(i.last_used_at == T0 + dt.timedelta(hours=1) for i in live(agent))


def test_a_contradiction_in_a_later_turn_updates_the_item(agent):
    model = Watching()
    turn(agent, model, "I live in Lisbon.", session="s-1", at=T0).post_processing.wait()
    turn(agent, model, "I moved to Porto last month.", session="s-1", at=T0 + dt.timedelta(minutes=10)).post_processing.wait()
    assert [i.text for i in live(agent)] == ["User lives in Porto"]


def test_a_burst_in_one_chat_is_extracted_once(agent):
    model = Watching()
    turn(agent, model, "I live in Lisbon.", session="s-1", at=T0).post_processing.wait()
    burst = turn(agent, model, "I enjoy sailing.", session="s-1", at=T0 + dt.timedelta(minutes=2))
    burst.post_processing.wait()
    assert burst.item_extraction.outcome == "skipped"
    assert [i.text for i in live(agent)] == ["User lives in Lisbon"]
    # the next exchange after the window reads the chat's earlier messages: the burst is not lost
    later = turn(agent, model, "Thanks.", session="s-1", at=T0 + dt.timedelta(minutes=6),
                 history=("I live in Lisbon.", "I enjoy sailing."))
    later.post_processing.wait()
    assert later.item_extraction.outcome == "written"
    assert [i.text for i in live(agent)] == ["User lives in Lisbon", "User enjoys sailing"]


def test_the_memory_switch_off_injects_nothing_extracts_nothing_and_keeps_everything(agent):
    with agent.begin() as conn:
        add_item(conn, USER, "User likes tea", now=T0)
        set_org_memory(conn, "default", "Fiscal year starts in April.", is_admin=True, actor="admin")
        set_memory_switch(conn, USER, False, actor="user")
    model = Watching()
    result = turn(agent, model, "I live in Lisbon.", session="s-1", at=T0)
    assert result.post_processing is None and not result.profile_loaded
    assert ORG_SECTION_TITLE not in model.systems[-1] and ITEMS_SECTION_TITLE not in model.systems[-1]
    assert [i.text for i in live(agent)] == ["User likes tea"]
    with agent.begin() as conn:
        set_memory_switch(conn, USER, True, actor="user")
    turn(agent, model, "Hello there", session="s-2", at=T0 + dt.timedelta(hours=1))
    assert "- User likes tea (manual)" in model.systems[-1]


@pytest.mark.parametrize("count", [0, 19, 20, 25])
def test_selection_in_a_turn(agent, count):
    with agent.begin() as conn:
        for n in range(count):
            text = "User lives in Lisbon" if n == 0 else f"User collects stamps of series {n}"
            add_item(conn, USER, text, kind="auto", confidence=0.9, now=T0 + dt.timedelta(minutes=n))
    model = Watching()
    result = turn(agent, model, "Which city is Lisbon in?", session="s-1", at=T0 + dt.timedelta(hours=1),
                  post_process="off")
    injected = [i.text for i in result.items_injected]
    if count == 0:
        assert injected == [] and ITEMS_SECTION_TITLE not in model.systems[-1]
    elif count < 20:
        assert len(injected) == count
    else:
        assert len(injected) == 10 and injected[0] == "User lives in Lisbon"


def test_items_are_not_marked_used_in_the_callers_transaction(agent):
    with agent.begin() as conn:
        add_item(conn, USER, "User likes tea", now=T0)
    model = Watching()
    with agent.connect() as conn:
        with conn.begin():
            result = turn(conn, model, "Hello there", session="s-1", at=T0, post_process="deferred")
            assert len(result.items_injected) == 1
            from dbmemory.items import list_items as _list

            assert [i.last_used_at for i in _list(conn, USER, now=T0)] == [None]
        result.post_processing.start().wait()
    assert [i.last_used_at for i in live(agent)] == [T0]


def test_a_failing_extraction_never_reaches_the_turn(agent):
    def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any):
        if item_purpose_of(messages):
            raise RuntimeError("extraction provider down")
        return ScriptedModel(now=T0)(model, messages, **kwargs)

    result = run_turn(
        agent, agent_code=AGENT, user_id=USER, session_id="s-1",
        messages=[{"role": "user", "content": "I live in Lisbon."}], model="scripted", complete=complete,
        config=TurnConfig(post_process="inline", now=T0),
    )
    assert result.answer.startswith("(scripted stand-in)")
    assert result.item_extraction.outcome == "rejected" and live(agent) == []


def test_arun_turn_extracts_and_injects_the_same_way(agent):
    model = Watching()

    async def main() -> Any:
        first = await arun_turn(
            agent, agent_code=AGENT, user_id=USER, session_id="s-1",
            messages=[{"role": "user", "content": "I live in Lisbon."}], model="scripted",
            complete=model, config=TurnConfig(post_process="inline", now=T0),
        )
        await first.post_processing
        return await arun_turn(
            agent, agent_code=AGENT, user_id=USER, session_id="s-2",
            messages=[{"role": "user", "content": "Where do I live?"}], model="scripted",
            complete=model, config=TurnConfig(post_process="off", now=T0 + dt.timedelta(hours=1)),
        )

    second = asyncio.run(main())
    assert [i.text for i in second.items_injected] == ["User lives in Lisbon"]


def test_item_memory_off_in_the_config_loads_no_items(agent):
    with agent.begin() as conn:
        add_item(conn, USER, "User likes tea", now=T0)
    model = Watching()
    result = run_turn(
        agent, agent_code=AGENT, user_id=USER, messages=[{"role": "user", "content": "hi"}],
        model="scripted", complete=model, config=TurnConfig(item_memory=False, post_process="off"),
    )
    assert result.items_injected == () and ITEMS_SECTION_TITLE not in model.systems[-1]


def test_replay_extracts_items_and_prints_them_with_their_counts(tmp_path, monkeypatch):
    import json

    import typer
    from typer.testing import CliRunner

    from dbmemory.cli._common import DbMemoryGroup
    from dbmemory.cli.replay import register

    app = typer.Typer(cls=DbMemoryGroup, add_completion=False)

    @app.callback()
    def _root() -> None:
        """Test app."""

    register(app)
    monkeypatch.delenv("DBMEMORY_MODEL", raising=False)
    url = f"sqlite:///{(tmp_path / 'r.db').as_posix()}"
    result = CliRunner().invoke(app, ["replay", "--url", url])
    assert result.exit_code == 0, result.output
    out = result.stdout
    # auto items live 30 days after their last use: those of the first session (2026-03-02), injected
    # into every later turn, are still live at the last (2026-04-02)
    assert "Memory items of replay.sample_conversation (8: 0 manual, 8 auto)" in out
    assert "User lives in Oslo" in out and "User lives in Bergen" not in out  # updated, not duplicated
    assert "Item extraction: 19 runs (8 wrote, 11 found nothing new, 0 skipped" in out
    assert "8 added, 1 updated" in out
    again = CliRunner().invoke(app, ["replay", "--url", url, "--json"])
    data = json.loads(again.stdout)
    assert data["summary"]["item_counts"] == {"manual": 0, "auto": 8}
    assert data["summary"]["extractions"] == {"written": 8, "nothing": 11}
    assert sorted(i["text"] for i in data["items"])[0] == "User asked to be reminded to ask the DBA about a shared credential on Friday"
