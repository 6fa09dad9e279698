"""The profile keeps its own rules: each rule checked on the model's answer (repaired or refused),
a valid answer passing unchanged, and the section order of the configured or stored format;
pure checks, then the consolidation on every backend."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from _profile_fakes import FakeModel, fixed_now, user_settings_table
from dbmemory.profile import (
    ProfileMetrics,
    UserMemoryConfig,
    UserMemoryPostprocessor,
    load_user_memory,
    parse_profile,
    read_profile,
    write_profile,
)
from dbmemory.profile.format import OLDER_SECTIONS, SECTIONS, parse_body, render_body, section_order
from dbmemory.profile.rules import enforce_rules, topic_words, write_order

NOW = dt.datetime(2026, 6, 17, 12, 0, tzinfo=dt.timezone.utc)
STAMP = "2026-06-17 12:00 UTC"
MODEL = "gpt-4o-mini"


def sections(**content: list[str]) -> dict[str, str]:
    """The six sections; keyword names are the section titles with ``_`` for spaces/ampersand."""
    names = {name.replace(" & ", "_").replace(" ", "_").replace("-", "_"): name for name in SECTIONS}
    out = {name: "" for name in SECTIONS}
    for key, bullets in content.items():
        out[names[key]] = "\n".join(f"- {b}" for b in bullets)
    return out


VALID = sections(
    Identity=["Name: Dana"],
    Work_Context=["Works as a data engineer at a retail client"],
    Follow_ups=["send the migration plan on Friday"],
    Recent_Topics=[f"{STAMP}: window functions in PostgreSQL", "2026-06-10 09:00 UTC: a trip to Lisbon"],
)


# -- pure checks ------------------------------------------------------------------------------


def test_a_body_that_keeps_every_rule_passes_unchanged() -> None:
    checked = enforce_rules(VALID, now=NOW, base_sections=VALID)
    assert checked.ok and checked.repairs == {} and checked.sections == VALID


def test_an_undated_topic_is_dated_with_the_turns_time() -> None:
    body = {**VALID, "Recent Topics": "- window functions in PostgreSQL"}
    checked = enforce_rules(body, now=NOW)
    assert checked.sections is not None
    assert checked.sections["Recent Topics"] == f"- {STAMP}: window functions in PostgreSQL"
    assert checked.repairs == {"topic_undated": 1}


def test_an_undated_topic_that_was_in_the_profile_takes_its_old_date_back() -> None:
    base = {**VALID, "Recent Topics": "- 2026-06-01 08:30 UTC: a trip to Lisbon"}
    checked = enforce_rules({**VALID, "Recent Topics": "- A trip to Lisbon"}, now=NOW, base_sections=base)
    assert checked.sections is not None
    assert checked.sections["Recent Topics"] == "- 2026-06-01 08:30 UTC: A trip to Lisbon"


def test_a_topic_line_that_is_not_a_bullet_becomes_a_dated_bullet() -> None:
    checked = enforce_rules({**VALID, "Recent Topics": "window functions"}, now=NOW)
    assert checked.sections is not None
    assert checked.sections["Recent Topics"] == f"- {STAMP}: window functions"
    assert checked.repairs == {"topic_not_a_bullet": 1, "topic_undated": 1}


def test_a_topic_with_a_date_that_does_not_exist_is_refused() -> None:
    checked = enforce_rules({**VALID, "Recent Topics": "- 2026-02-30 10:00 UTC: taxes"}, now=NOW)
    assert not checked.ok and checked.reason == "invalid_topic_date"


def test_a_topic_that_repeats_a_fact_is_dropped() -> None:
    topics = f"- {STAMP}: I work as a data engineer.\n- {STAMP}: window functions"
    checked = enforce_rules({**VALID, "Recent Topics": topics}, now=NOW)
    assert checked.sections is not None
    assert checked.sections["Recent Topics"] == f"- {STAMP}: window functions"
    assert checked.repairs == {"topic_repeats_fact": 1}


def test_a_topic_that_says_more_than_any_one_fact_stays() -> None:
    topics = f"- {STAMP}: My name is Dana and I am planning a trip to Lisbon"
    checked = enforce_rules({**VALID, "Recent Topics": topics}, now=NOW)
    assert checked.sections is not None and checked.repairs == {}


def test_topic_words_drop_the_date_stop_words_and_endings() -> None:
    assert topic_words("2026-01-02 10:00 UTC: I work as a nurse") == {"work", "nurs"}
    assert topic_words("Works as nurses") == {"work", "nurs"}
    assert topic_words("Lives in Lisbon") == topic_words("I live in Lisbon") == {"liv", "lisbon"}


@pytest.mark.parametrize(
    "bullet",
    [
        "[x] send the migration plan",
        "~~send the migration plan~~",
        "Done: send the migration plan",
        "send the migration plan (done)",
        "send the migration plan - completed",
        "\u2705 send the migration plan",
    ],
)
def test_a_follow_up_marked_done_is_removed(bullet: str) -> None:
    body = {**VALID, "Follow-ups": f"- {bullet}\n- call the DBA"}
    checked = enforce_rules(body, now=NOW)
    assert checked.sections is not None
    assert checked.sections["Follow-ups"] == "- call the DBA"
    assert checked.repairs == {"follow_up_done": 1}


def test_a_follow_up_dated_past_the_stale_window_is_removed_and_a_recent_one_stays() -> None:
    body = {**VALID, "Follow-ups": "- 2026-05-01: renew the certificate\n- 2026-06-01: call the DBA\n- finish the report"}
    checked = enforce_rules(body, now=NOW, follow_up_stale_days=30)
    assert checked.sections is not None
    assert checked.sections["Follow-ups"] == "- 2026-06-01: call the DBA\n- finish the report"
    assert checked.repairs == {"follow_up_stale": 1}
    assert enforce_rules(body, now=NOW, follow_up_stale_days=60).repairs == {}


def test_words_like_finish_or_done_inside_a_task_are_not_a_done_mark() -> None:
    body = {**VALID, "Follow-ups": "- finish the report\n- call Bob when the move is done soon"}
    assert enforce_rules(body, now=NOW).repairs == {}


def test_the_truncation_marker_and_continuation_lines_are_left_alone() -> None:
    topics = f"- {STAMP}: window functions\n  with frames\n<!-- truncated to fit memory budget -->"
    checked = enforce_rules({**VALID, "Recent Topics": topics}, now=NOW)
    assert checked.sections is not None and checked.sections["Recent Topics"] == topics


def test_the_order_is_the_configured_format_or_the_stored_one() -> None:
    assert write_order("keep", None) == SECTIONS
    assert write_order("keep", OLDER_SECTIONS) == OLDER_SECTIONS
    assert write_order("keep", SECTIONS) == SECTIONS
    assert write_order("current", OLDER_SECTIONS) == SECTIONS
    assert write_order("older", None) == OLDER_SECTIONS
    older = render_body(VALID, OLDER_SECTIONS)
    assert older.index("## Recent Topics") < older.index("## Follow-ups")
    assert section_order(parse_body(older).found) == OLDER_SECTIONS
    assert parse_profile(older).body == older


# -- the consolidation, every backend ---------------------------------------------------------


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    with user_settings_table(engine):
        yield engine


def _consolidate(engine: Engine, fake: FakeModel, *, config: UserMemoryConfig | None = None, **kw: Any) -> Any:
    cfg = config or UserMemoryConfig()
    with engine.begin() as conn:
        state = load_user_memory(conn, "u1", config=cfg, model=MODEL)
    metrics = kw.pop("metrics", ProfileMetrics())
    post = UserMemoryPostprocessor(
        engine, cfg, MODEL, "u1", state, complete=fake, now=fixed_now(NOW.isoformat()), metrics=metrics
    )
    return post.run("I looked at window functions today.", "Nice.")


def _stored_body(engine: Engine) -> str:
    with engine.begin() as conn:
        record = read_profile(conn, "u1")
    assert record is not None
    return parse_profile(record.text).body


def test_a_rewrite_that_breaks_rules_is_repaired_before_it_is_written(db: Engine) -> None:
    broken = {
        **VALID,
        "Follow-ups": "- [x] send the migration plan on Friday\n- call the DBA",
        "Recent Topics": "- window functions in PostgreSQL\n- 2026-06-16 10:00 UTC: I work as a data engineer",
    }
    metrics = ProfileMetrics()
    result = _consolidate(db, FakeModel(rewrite=render_body(broken)), metrics=metrics)
    assert result.outcome == "updated"
    assert result.repairs == {"topic_undated": 1, "topic_repeats_fact": 1, "follow_up_done": 1}
    stored = parse_profile(_stored_body(db)).sections
    assert stored["Recent Topics"] == f"- {STAMP}: window functions in PostgreSQL"
    assert stored["Follow-ups"] == "- call the DBA"
    assert b'dbmemory_profile_repaired_total{rule="topic_repeats_fact"} 1.0' in metrics.exposition()


def test_a_rewrite_with_an_impossible_topic_date_is_refused_and_the_old_profile_kept(db: Engine) -> None:
    with db.begin() as conn:
        write_profile(conn, "u1", render_body(VALID), expected_version=0)
    before = _stored_body(db)
    bad = {**VALID, "Recent Topics": "- 2026-13-01 10:00 UTC: taxes"}
    result = _consolidate(db, FakeModel(rewrite=render_body(bad)))
    assert (result.outcome, result.reason) == ("rejected", "invalid_topic_date")
    assert _stored_body(db) == before


def test_a_valid_rewrite_is_written_exactly_as_answered(db: Engine) -> None:
    result = _consolidate(db, FakeModel(rewrite=render_body(VALID)))
    assert (result.outcome, result.repairs) == ("updated", {})
    assert _stored_body(db) == render_body(VALID)


def test_a_scrubbed_body_that_breaks_a_rule_is_repaired_too(db: Engine) -> None:
    cleaned = {**VALID, "Recent Topics": "- window functions in PostgreSQL"}
    result = _consolidate(db, FakeModel(rewrite=render_body(VALID), scrub=render_body(cleaned)))
    assert result.outcome == "updated" and result.repairs == {"topic_undated": 1}
    assert parse_profile(_stored_body(db)).sections["Recent Topics"] == f"- {STAMP}: window functions in PostgreSQL"


def test_a_profile_in_the_older_order_keeps_it_after_a_rewrite(db: Engine) -> None:
    with db.begin() as conn:
        write_profile(conn, "u1", render_body(VALID, OLDER_SECTIONS), expected_version=0)
    changed = {**VALID, "Skills & Expertise": "- SQL"}
    fake = FakeModel(rewrite=render_body(changed))  # the model answers in the current order
    assert _consolidate(db, fake).outcome == "updated"
    assert _stored_body(db) == render_body(changed, OLDER_SECTIONS)
    prompt = fake.prompt("rewrite")
    assert prompt.index("## Recent Topics") < prompt.index("## Follow-ups")


def test_the_configured_format_wins_over_the_stored_order(db: Engine) -> None:
    with db.begin() as conn:
        write_profile(conn, "u1", render_body(VALID, OLDER_SECTIONS), expected_version=0)
    changed = {**VALID, "Skills & Expertise": "- SQL"}
    config = UserMemoryConfig(section_order="current")
    assert _consolidate(db, FakeModel(rewrite=render_body(changed, OLDER_SECTIONS)), config=config).outcome == "updated"
    assert _stored_body(db) == render_body(changed)


def test_a_new_profile_is_written_in_the_older_order_when_configured(db: Engine) -> None:
    config = UserMemoryConfig(section_order="older")
    assert _consolidate(db, FakeModel(rewrite=render_body(VALID)), config=config).outcome == "updated"
    assert _stored_body(db) == render_body(VALID, OLDER_SECTIONS)
