"""Auto extraction of memory items after a turn, on every backend (issue 9).

A fake model answers each step of the item pipeline (extract, scrub, decide) and records the
prompts; the profile summary fold runs the scripted stand-in for the profile steps.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from dbmemory.items import add_item, list_items, set_memory_switch, set_org_setting
from dbmemory.items.summary import FOLD_HEADER
from dbmemory.profile.store import read_profile
from item_fakes import T0, USER, ItemModel, facts, run, texts


def test_facts_at_or_over_the_threshold_become_auto_items(engine):
    model = ItemModel(extract=facts(("User lives in Lisbon", 0.95), ("User might like jazz", 0.79)))
    result = run(engine, model)
    assert result.outcome == "written" and result.dropped == {"low_confidence": 1}
    with engine.connect() as conn:
        (item,) = list_items(conn, USER, now=T0)
    assert (item.text, item.kind, item.confidence, item.source_chat_id) == ("User lives in Lisbon", "auto", 0.95, "chat-1")
    assert model.calls == ["extract", "scrub"]  # no items yet: no decision call


def test_a_raised_threshold_drops_more(engine):
    with engine.begin() as conn:
        set_org_setting(conn, "default", "confidence_threshold", 0.99, actor="admin", is_admin=True)
    result = run(engine, ItemModel(extract=facts(("User lives in Lisbon", 0.95))))
    assert result.outcome == "nothing" and texts(engine) == []


def test_a_message_within_the_skip_window_of_the_same_chat_is_not_extracted(engine):
    model = ItemModel(extract=facts(("User lives in Lisbon", 0.95)))
    assert run(engine, model, at=T0).outcome == "written"
    assert run(engine, model, at=T0 + dt.timedelta(minutes=4, seconds=59)).outcome == "skipped"
    assert run(engine, model, chat="chat-2", at=T0 + dt.timedelta(minutes=1)).outcome == "nothing"  # same fact
    assert run(engine, model, at=T0 + dt.timedelta(minutes=5)).outcome == "nothing"
    assert model.calls.count("extract") == 3


def test_the_skip_window_follows_the_setting(engine):
    with engine.begin() as conn:
        set_org_setting(conn, "default", "skip_window_seconds", 0, actor="admin", is_admin=True)
    model = ItemModel(extract="[]")
    assert run(engine, model).outcome == "nothing"
    assert run(engine, model).outcome == "nothing"
    assert model.calls.count("extract") == 2


def test_a_normalised_duplicate_updates_nothing_and_calls_no_decision(engine):
    with engine.begin() as conn:
        add_item(conn, USER, "User prefers tabs", kind="auto", confidence=0.9, now=T0)
    model = ItemModel(extract=facts(("the user prefers TABS.", 0.9)))
    result = run(engine, model, at=T0 + dt.timedelta(hours=1))
    assert result.outcome == "nothing" and len(result.same) == 1
    assert model.calls == ["extract", "scrub"]
    with engine.connect() as conn:
        (item,) = list_items(conn, USER, now=T0)
    assert item.text == "User prefers tabs" and item.last_used_at == T0 + dt.timedelta(hours=1)


def test_a_duplicate_the_model_recognises_is_merged_into_the_item(engine):
    with engine.begin() as conn:
        kept = add_item(conn, USER, "User prefers tabs", kind="auto", confidence=0.9, now=T0)
    model = ItemModel(
        extract=facts(("User indents code with tabs", 0.9)),
        decide=json.dumps([{"fact": 1, "action": "same", "item": str(kept.item_id)}]),
    )
    result = run(engine, model)
    assert result.outcome == "nothing" and result.same == [kept.item_id]
    assert texts(engine) == ["User prefers tabs"]
    assert model.calls == ["extract", "scrub", "decide"]


def test_a_contradiction_updates_the_item_so_both_never_coexist(engine):
    with engine.begin() as conn:
        old = add_item(conn, USER, "User lives in Lisbon", kind="auto", confidence=0.9, now=T0)
        add_item(conn, USER, "User likes tea", now=T0)
    model = ItemModel(
        extract=facts(("User lives in Porto", 0.95), ("User plays chess", 0.9)),
        decide=lambda prompt: json.dumps(
            [{"fact": 1, "action": "update", "item": str(old.item_id)}, {"fact": 2, "action": "new"}]
        ),
    )
    result = run(engine, model, message="I moved to Porto. I play chess.")
    assert result.outcome == "written" and result.updated == [old.item_id] and len(result.added) == 1
    assert sorted(texts(engine)) == ["User likes tea", "User lives in Porto", "User plays chess"]


def test_a_failed_decision_writes_no_possibly_contradicting_fact(engine):
    with engine.begin() as conn:
        add_item(conn, USER, "User lives in Lisbon", kind="auto", confidence=0.9, now=T0)
    result = run(engine, ItemModel(extract=facts(("User lives in Porto", 0.95)), decide=RuntimeError("down")))
    assert result.outcome == "nothing" and result.dropped == {"decide_error": 1}
    assert texts(engine) == ["User lives in Lisbon"]


@pytest.mark.parametrize("scrub", [RuntimeError("scrub down"), "I think it is fine", '["a", "b"]'])
def test_the_scrub_fails_closed(engine, scrub):
    result = run(engine, ItemModel(extract=facts(("User lives in Lisbon", 0.95)), scrub=scrub))
    assert result.outcome == "scrub_veto" and texts(engine) == []


def test_scrub_rewrites_are_written_and_detector_hits_are_not(engine):
    model = ItemModel(
        extract=facts(("User works for ACME Bank", 0.9), ("User's card is 4111 1111 1111 1111", 0.9)),
        scrub='["User works for a banking client", "User\'s card is 4111 1111 1111 1111"]',
    )
    result = run(engine, model)
    assert texts(engine) == ["User works for a banking client"]
    assert result.dropped == {"detector": 1}


def test_extraction_failures_never_raise(engine, empty_engine):
    assert run(engine, ItemModel(extract=RuntimeError("provider down"))).outcome == "rejected"
    assert run(engine, ItemModel(extract="I found nothing"), chat="c2").outcome == "rejected"
    result = run(empty_engine, ItemModel(extract=facts(("User lives in Lisbon", 0.95))))
    assert result.outcome == "error"


def test_the_memory_switch_off_stops_extraction_and_keeps_items(engine):
    with engine.begin() as conn:
        add_item(conn, USER, "User likes tea", now=T0)
        set_memory_switch(conn, USER, False, actor="user")
    model = ItemModel(extract=facts(("User lives in Lisbon", 0.95)))
    assert run(engine, model).outcome == "disabled"
    assert model.calls == [] and texts(engine) == ["User likes tea"]


def test_at_the_auto_limit_the_least_recently_used_auto_item_gives_way_never_a_manual_one(engine):
    with engine.begin() as conn:
        manual = add_item(conn, USER, "User's manual fact", now=T0 - dt.timedelta(days=9))
        for n in range(100):
            add_item(conn, USER, f"User auto fact number {n}", kind="auto", confidence=0.9,
                     now=T0 - dt.timedelta(days=5) + dt.timedelta(minutes=n))
    model = ItemModel(
        extract=facts(("User lives in Lisbon", 0.95)),
        decide=json.dumps([{"fact": 1, "action": "new"}]),
    )
    result = run(engine, model)
    assert result.evicted == 1 and len(result.added) == 1
    with engine.connect() as conn:
        live = list_items(conn, USER, now=T0)
    kinds = [i.kind for i in live]
    assert kinds.count("auto") == 100 and kinds.count("manual") == 1
    assert manual.item_id in [i.item_id for i in live]
    assert "User auto fact number 0" not in [i.text for i in live]


def test_ten_new_items_are_folded_into_the_one_profile(engine):
    def many(prompt: str) -> str:
        n = prompt.count("x")  # any deterministic variety
        return facts(*[(f"User enjoys hobby {n}-{k}", 0.9) for k in range(5)])

    model = ItemModel(extract=many, decide=lambda prompt: json.dumps(
        [{"fact": k, "action": "new"} for k in range(1, 6)]
    ))
    first = run(engine, model, message="x", summarize=True)
    assert first.outcome == "written" and first.summary is None  # 5 < 10
    second = run(engine, model, message="xx", chat="chat-2", summarize=True)
    assert second.summary in ("updated", "noop", "unchanged")
    assert model.calls.count("profile") >= 1
    with engine.connect() as conn:
        profile = read_profile(conn, USER)
    assert profile is not None and "hobby" in profile.text
    third = run(engine, model, message="xxx", chat="chat-3", summarize=True)
    assert third.summary is None  # only 5 changed since the fold


def test_fold_prompt_starts_with_the_fold_header(engine):
    from dbmemory.items.summary import fold_message

    assert fold_message(["User likes tea", "User  plays\nchess"]) == FOLD_HEADER + "\n- User likes tea\n- User plays chess"


def test_an_extraction_never_rewrites_a_manual_item_it_adds_an_auto_item_beside_it(engine):
    """Issue 21: an ``update`` decision aimed at a manual (user-written) item is refused and
    counted; the fact becomes an auto item beside it, and an auto item's update still runs."""
    from dbmemory.items import get_item
    from dbmemory.items.runtime_metrics import item_metrics

    with engine.begin() as conn:
        manual = add_item(conn, USER, "User lives in Lisbon", now=T0)
        auto = add_item(conn, USER, "User likes tea", kind="auto", confidence=0.9, now=T0)
    counter = item_metrics().update_refused_total.labels("manual_item")
    before = counter._value.get()
    model = ItemModel(
        extract=facts(("User lives in Porto", 0.95), ("User likes coffee", 0.9)),
        decide=json.dumps([
            {"fact": 1, "action": "update", "item": str(manual.item_id)},
            {"fact": 2, "action": "update", "item": str(auto.item_id)},
        ]),
    )
    result = run(engine, model, message="I moved to Porto. I like coffee now.")
    assert result.outcome == "written"
    assert result.refused_updates == {"manual_item": 1} and result.updated == [auto.item_id]
    assert counter._value.get() == before + 1
    with engine.connect() as conn:
        kept = get_item(conn, USER, manual.item_id)
        assert (kept.text, kept.kind, kept.version) == ("User lives in Lisbon", "manual", 1)
        (beside,) = [i for i in list_items(conn, USER, now=T0) if i.item_id in result.added]
        assert (beside.text, beside.kind, beside.confidence) == ("User lives in Porto", "auto", 0.95)
        assert get_item(conn, USER, auto.item_id).text == "User likes coffee"
    assert sorted(texts(engine)) == ["User likes coffee", "User lives in Lisbon", "User lives in Porto"]
