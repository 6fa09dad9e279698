"""Fold before expiry: an auto item near its ``expires_at`` and not folded yet is folded into the
profile by its owner's next turn, even below ``summary_every_items``, and the expiry job waits
for that fold; on every backend."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.engine import Engine

from dbmemory.agent.scripted import ScriptedModel
from dbmemory.items import add_item, edit_item, list_items, set_org_setting
from dbmemory.items.retention import run_item_retention
from dbmemory.items.summary import fold_items
from dbmemory.profile.store import read_profile

NOW = dt.datetime(2026, 6, 17, 12, 0, tzinfo=dt.timezone.utc)
DAY = dt.timedelta(days=1)


def _fold(engine: Engine, now: dt.datetime = NOW) -> str | None:
    return fold_items(engine, org_id="default", user_id="u1", complete=ScriptedModel(), model="scripted", now=now)


def _profile(engine: Engine) -> str:
    with engine.connect() as conn:
        record = read_profile(conn, "u1")
    return "" if record is None else record.text


def test_an_auto_item_within_the_fold_window_is_folded_before_it_expires(engine: Engine) -> None:
    with engine.begin() as conn:  # auto items live 30 days: this one expires in 5, within 7
        add_item(conn, "u1", "User enjoys sailing", kind="auto", confidence=0.9, now=NOW - 25 * DAY)
    assert _fold(engine) == "updated"
    assert "Enjoys sailing" in _profile(engine)
    assert _fold(engine) is None  # folded: not given again


def test_an_auto_item_far_from_expiry_waits_for_the_count(engine: Engine) -> None:
    with engine.begin() as conn:  # expires in 20 days
        add_item(conn, "u1", "User enjoys sailing", kind="auto", confidence=0.9, now=NOW - 10 * DAY)
    assert _fold(engine) is None
    assert _fold(engine, NOW + 14 * DAY) == "updated"  # 6 days before its expiry
    assert "Enjoys sailing" in _profile(engine)


def test_a_manual_item_is_not_folded_early_and_a_window_of_zero_turns_it_off(engine: Engine) -> None:
    with engine.begin() as conn:
        add_item(conn, "u1", "User enjoys rowing", retention_class="temporary", now=NOW - 58 * DAY)
        set_org_setting(conn, "default", "fold_window_days", 0, is_admin=True, now=NOW - 30 * DAY)
        add_item(conn, "u1", "User enjoys sailing", kind="auto", confidence=0.9, now=NOW - 25 * DAY)
    assert _fold(engine) is None
    with engine.begin() as conn:
        set_org_setting(conn, "default", "fold_window_days", 7, is_admin=True, now=NOW)
    assert _fold(engine) == "updated"  # the due auto item takes the manual one along
    assert "Enjoys sailing" in _profile(engine) and "Enjoys rowing" in _profile(engine)


def test_an_item_changed_after_its_fold_is_due_again(engine: Engine) -> None:
    with engine.begin() as conn:
        item = add_item(conn, "u1", "User enjoys sailing", kind="auto", confidence=0.9, now=NOW - 25 * DAY)
    assert _fold(engine) == "updated"
    with engine.begin() as conn:  # edited 29 days later: expires in 1 day, changed since the fold
        edit_item(conn, "u1", item.item_id, "User enjoys sailing and kayaking", now=NOW + 4 * DAY)
    assert _fold(engine, NOW + 27 * DAY) == "updated"
    assert "Enjoys sailing and kayaking" in _profile(engine)


def _expire(engine: Engine, now: dt.datetime) -> dict[str, int]:
    with engine.begin() as conn:
        return run_item_retention(conn, now=now)


def _state(engine: Engine) -> dict[str, bool]:
    """Item text -> soft-deleted."""
    with engine.connect() as conn:
        return {i.text: i.deleted_at is not None for i in list_items(conn, "u1", include_deleted=True)}


def test_the_expiry_waits_for_the_fold_of_an_auto_item_and_expires_it_after(engine: Engine) -> None:
    """Rule 1's wait (dbmemory.items.retention.held_rule): the expiry job never soft-deletes an
    auto item whose text the consolidation has not folded into the profile yet, while its
    organisation's grace period runs; the owner's next turn folds it, the next run expires it."""
    with engine.begin() as conn:  # auto items live 30 days: both expired 2 days ago, never folded
        add_item(conn, "u1", "User enjoys sailing", kind="auto", confidence=0.9, now=NOW - 32 * DAY)
        add_item(conn, "u1", "User reads the weather", retention_class="temporary", now=NOW - 62 * DAY)
    assert _expire(engine, NOW) == {"expired": 1, "purged": 0}  # the manual item only
    assert _state(engine) == {"User enjoys sailing": False, "User reads the weather": True}
    with engine.connect() as conn:
        assert list_items(conn, "u1", now=NOW) == []  # waiting, not injected
    assert _fold(engine) == "updated"  # the next turn's fold takes the waiting item
    assert "Enjoys sailing" in _profile(engine)
    assert _expire(engine, NOW + DAY) == {"expired": 1, "purged": 0}
    assert _state(engine)["User enjoys sailing"] is True


def test_an_unfolded_auto_item_expires_once_the_grace_period_has_passed(engine: Engine) -> None:
    with engine.begin() as conn:
        add_item(conn, "u1", "User enjoys sailing", kind="auto", confidence=0.9, now=NOW - 32 * DAY)
        set_org_setting(conn, "default", "grace_days", 5, is_admin=True, now=NOW - 40 * DAY)
    assert _expire(engine, NOW + 2 * DAY) == {"expired": 0, "purged": 0}  # expired 4 days ago
    assert _expire(engine, NOW + 4 * DAY) == {"expired": 1, "purged": 0}  # 6 days > grace 5
    assert _state(engine) == {"User enjoys sailing": True}
    assert _profile(engine) == ""  # nothing folded it: the user had no turn in time
