"""Token budget: condensation, hard truncation, never splitting a character (C13)."""

from __future__ import annotations

import pytest

from _profile_fakes import body_with
from dbmemory.profile.budget import (
    TRUNCATION_MARKER,
    condense_target,
    fit_profile,
    hard_truncate,
    safe_cut,
)
from dbmemory.profile.format import SECTIONS, UserProfile, parse_profile, render_profile
from dbmemory.profile.tokens import count_tokens


def _profile(facts: dict[str, list[str]]) -> UserProfile:
    text = '---\nuser_id: "u-7"\nschema_version: 1\nlast_updated: "2026-06-17T12:00:00+00:00"\nturn_count: 3\n---\n'
    return parse_profile(text + body_with(facts))


PIZZA = _profile(
    {
        "Identity": ["Name: Chiara, analyst in Milan"],
        "Communication Preferences": ["concise, Italian or English"],
        "Work Context": ["builds sales dashboards for a retail client"],
        "Skills & Expertise": ["SQL", "Power BI"],
        "Follow-ups": ["send the Q3 deck on Friday"],
        "Recent Topics": ["2026-06-17 11:00 UTC: food ... likes 🍕🍕🍕 and café"],
    }
)


def _assert_valid_truncation(original: UserProfile, text: str, max_tokens: int, model: str | None) -> None:
    assert count_tokens(text, model) <= max_tokens
    assert "\ufffd" not in text
    assert text.rstrip("\n").endswith(TRUNCATION_MARKER)
    assert text.startswith(render_profile(original).split("\n---\n", 1)[0] + "\n---\n")
    for name in SECTIONS:
        assert f"\n## {name}\n" in text
    original_lines = [line for v in original.sections.values() for line in v.split("\n")]
    kept = parse_profile(text).sections
    for name in SECTIONS:
        for line in kept[name].split("\n"):
            if line and line != TRUNCATION_MARKER:
                assert any(o.startswith(line) for o in original_lines), line
    text.encode("utf-8")  # every character whole


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4", "anthropic/claude-3-5-sonnet"])
def test_hard_cut_never_splits_a_character_for_any_budget(model: str) -> None:
    full = count_tokens(render_profile(PIZZA), model)
    skeleton = hard_truncate(PIZZA.with_sections({}), max_tokens=10**6, model=model)
    low = count_tokens(skeleton.text + TRUNCATION_MARKER + "\n", model)
    emoji_cut_seen = False
    for budget in range(low, full):
        result = hard_truncate(PIZZA, max_tokens=budget, model=model)
        assert result.truncated and result.within_budget
        _assert_valid_truncation(PIZZA, result.text, budget, model)
        recent = parse_profile(result.text).sections["Recent Topics"]
        emoji_cut_seen |= "🍕" in recent and "café" not in recent
    if model != "gpt-4o":  # o200k: no budget falls between two pizzas; cl100k: some do
        assert emoji_cut_seen  # the cut fell among the pizzas, never inside one


def test_a_profile_within_budget_is_returned_unchanged() -> None:
    result = hard_truncate(PIZZA, max_tokens=2000, model="gpt-4o")
    assert not result.truncated and result.text == render_profile(PIZZA)


def test_truncation_drops_recent_topics_before_identity() -> None:
    facts = {
        "Identity": ["Name: Ole, DBA"],
        "Communication Preferences": ["bullet points"],
        "Recent Topics": [f"2026-06-{d:02d} 10:00 UTC: topic {'x' * 200}" for d in range(1, 29)],
    }
    profile = _profile(facts)
    result = hard_truncate(profile, max_tokens=500, model="gpt-4o")
    sections = parse_profile(result.text).sections
    assert sections["Identity"] == "- Name: Ole, DBA"
    assert sections["Communication Preferences"] == "- bullet points"
    assert result.tokens <= 500


def test_one_huge_line_is_cut_inside_the_line() -> None:
    profile = _profile({"Identity": ["é" * 10_000]})
    result = hard_truncate(profile, max_tokens=600, model="gpt-4o")
    identity = parse_profile(result.text).sections["Identity"]
    assert identity.startswith("- éé") and len(identity) > 100
    _assert_valid_truncation(profile, result.text, 600, "gpt-4o")


@pytest.mark.parametrize(
    ("text", "index", "expected"),
    [
        ("cafe\u0301!", 4, 3),  # combining accent stays with its e
        ("a\U0001F468\u200d\U0001F469b", 3, 1),  # ZWJ family stays whole
        ("x\U0001F1EE\U0001F1F9y", 2, 1),  # flag (regional indicator pair) stays whole
        ("👍\U0001F3FDz", 1, 0),  # skin-tone modifier stays with its emoji
        ("abc", 2, 2),
    ],
)
def test_safe_cut_keeps_user_perceived_characters_whole(text: str, index: int, expected: int) -> None:
    assert safe_cut(text, index) == expected


def test_condensation_targets_ninety_percent_and_is_used_when_it_fits() -> None:
    big = _profile({"Identity": ["Name: Ann"], "Recent Topics": [f"topic {i} " + "y" * 80 for i in range(120)]})
    seen: dict[str, int] = {}

    def condense(body: str, target: int, max_tokens: int) -> str:
        seen["target"], seen["max"] = target, max_tokens
        return body_with({"Identity": ["Name: Ann"], "Recent Topics": ["topics 0-119: assorted"]})

    result = fit_profile(big, max_tokens=1000, model="gpt-4o", condense=condense)
    assert seen == {"target": condense_target(1000), "max": 1000} and condense_target(1000) == 900
    assert result.condensed and not result.truncated and result.tokens <= 1000
    assert parse_profile(result.text).turn_count == 3


def test_condensation_that_drops_identity_is_refused_and_truncation_follows() -> None:
    big = _profile({"Identity": ["Name: Ann"], "Recent Topics": [f"topic {i} " + "y" * 80 for i in range(120)]})
    result = fit_profile(
        big, max_tokens=1000, model="gpt-4o", condense=lambda b, t, m: body_with({"Recent Topics": ["x"]})
    )
    assert result.truncated and not result.condensed
    assert result.condense_rejected == "dropped Identity"
    assert parse_profile(result.text).sections["Identity"] == "- Name: Ann"


@pytest.mark.parametrize("answer", [None, "garbage", RuntimeError("boom")])
def test_failed_condensation_falls_back_to_truncation_within_budget(answer: object) -> None:
    big = _profile({"Identity": ["Name: Ann"], "Recent Topics": [f"t {i} " + "z" * 90 for i in range(150)]})

    def condense(body: str, target: int, max_tokens: int) -> object:
        if isinstance(answer, BaseException):
            raise answer
        return answer

    result = fit_profile(big, max_tokens=800, model="gpt-4o", condense=condense)  # type: ignore[arg-type]
    assert result.truncated and result.tokens <= 800
    assert result.text.rstrip().endswith(TRUNCATION_MARKER)
