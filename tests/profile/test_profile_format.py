"""The profile file format: frontmatter, six sections, lenient reading, canonical writing (C10)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dbmemory.profile.answers import extract_body, is_word_answer
from dbmemory.profile.format import (
    EMPTY_MARK,
    SECTIONS,
    parse_body,
    parse_profile,
    profile_body,
    render_profile,
    split_frontmatter,
    yaml_quote,
)

C10_TEMPLATE = """---
user_id: {user_id}
schema_version: 1
last_updated: 2026-11-30T10:00:00Z
turn_count: 7
---

# User Memory

## Identity
- Name: Dana, data engineer

## Communication Preferences
- likes the a --- b notation
---
- prefers short answers
- bullet after the rule

## Work Context
- migrates reports to PostgreSQL

## Skills & Expertise
- SQL

## Follow-ups
_(empty)_

## Recent Topics
- 2026-11-30 10:00 UTC: window functions
"""


@pytest.mark.parametrize("user_id", ["00123", "no"])
@pytest.mark.parametrize("quoted", [False, True])
def test_frontmatter_round_trip_keeps_string_ids_timestamp_and_body_rules(user_id: str, quoted: bool) -> None:
    text = C10_TEMPLATE.format(user_id=f'"{user_id}"' if quoted else user_id)
    profile = parse_profile(text)
    assert profile.user_id == user_id
    assert profile.last_updated == "2026-11-30T10:00:00Z"
    assert profile.turn_count == 7
    written = render_profile(profile)
    assert f'user_id: "{user_id}"' in written
    assert 'last_updated: "2026-11-30T10:00:00Z"' in written
    # any YAML reader sees strings
    front, _ = split_frontmatter(written)
    data = yaml.safe_load(front)
    assert data["user_id"] == user_id and data["last_updated"] == "2026-11-30T10:00:00Z"
    comms = parse_profile(written).sections["Communication Preferences"]
    assert comms == (
        "- likes the a --- b notation\n---\n- prefers short answers\n- bullet after the rule"
    )
    assert all(f"## {name}" in written for name in SECTIONS)
    # a second round trip is byte-identical
    assert render_profile(parse_profile(written)) == written


def test_canonical_form_has_six_sections_in_order_and_empty_marks() -> None:
    text = render_profile(parse_profile('---\nuser_id: "u-1"\n---\n'))
    assert text == (
        '---\nuser_id: "u-1"\nschema_version: 1\nturn_count: 0\n---\n\n# User Memory\n\n'
        + "\n".join(f"## {name}\n{EMPTY_MARK}\n" for name in SECTIONS)
    )


def test_reading_accepts_legacy_heading_old_order_and_missing_title() -> None:
    legacy = (
        "## Identity\n- Ann\n\n## Communication Preferences\n- terse\n\n## Work Context\n- BI\n\n"
        "## Skills & Expertise\n- DAX\n\n## Recent Topics\n- 2026-01-02 10:00 UTC: DAX\n\n"
        "## Open Questions / Follow-ups\n- send the report Friday\n"
    )
    parsed = parse_body(legacy)
    assert parsed.complete
    assert parsed.sections["Follow-ups"] == "- send the report Friday"
    body = profile_body(legacy)
    assert body.startswith("# User Memory\n\n## Identity\n- Ann\n")
    assert body.index("## Recent Topics") < body.index("## Follow-ups")  # the older format's order kept
    assert "Open Questions" not in body


def test_frontmatter_ends_at_the_first_exact_rule_line_only() -> None:
    text = "---\nuser_id: \"a\"\nnote: x --- y\n---\n# User Memory\n---\n## Identity\n- a\n"
    front, body = split_frontmatter(text)
    assert front == 'user_id: "a"\nnote: x --- y'
    assert body.startswith("# User Memory\n---\n")


def test_unknown_frontmatter_keys_are_kept_and_quoted() -> None:
    text = '---\nuser_id: "u"\nturn_count: 2\nteam: no\ntags: [a, b]\n---\n## Identity\n- x\n'
    written = render_profile(parse_profile(text))
    assert 'team: "no"' in written
    assert 'tags: ["a", "b"]' in written


def test_text_without_frontmatter_takes_the_default_user_id() -> None:
    profile = parse_profile("## Identity\n- x\n", default_user_id="u-9")
    assert profile.user_id == "u-9" and profile.turn_count == 0 and not profile.has_frontmatter


@given(st.text())
def test_yaml_quote_round_trips_any_string(value: str) -> None:
    value = value.encode("utf-8", "ignore").decode("utf-8")  # no lone surrogates
    assert yaml.safe_load("k: " + yaml_quote(value))["k"] == value


VALID_BODY = "".join(f"## {name}\n- fact {i}\n\n" for i, name in enumerate(SECTIONS))


@pytest.mark.parametrize("answer", ["NOOP", "NOOP.", " noop\n", "`NOOP`", "**NOOP**", '"NOOP"'])
def test_noop_variants_are_noop(answer: str) -> None:
    assert is_word_answer(answer, "NOOP")


def test_an_answer_with_sections_is_never_noop() -> None:
    assert not is_word_answer("NOOP\n" + VALID_BODY, "NOOP")


def test_body_is_extracted_from_a_fence_and_after_prose() -> None:
    fenced = extract_body("```markdown\n# User Memory\n\n" + VALID_BODY + "```\nDone!")
    prose = extract_body("Here is the updated profile:\n\n# User Memory\n\n" + VALID_BODY)
    assert fenced.ok and prose.ok
    assert fenced.parsed.sections == prose.parsed.sections
    assert "Here is" not in "".join(prose.parsed.sections.values())


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "empty"),
        ("I could not do that.", "not_a_profile"),
        ("## Identity\n- a\n## Work Context\n- b\n## Recent Topics\n- c\n", "missing_sections"),
        ("# User Memory\n" + VALID_BODY + "NOOP\n", "not_a_profile"),
    ],
)
def test_unusable_answers_are_refused_with_a_reason(answer: str, reason: str) -> None:
    assert extract_body(answer).reason == reason


def test_echoed_delimiters_and_a_closing_remark_are_not_kept() -> None:
    body = "# User Memory\n\n" + VALID_BODY
    extracted = extract_body("<profile>\n" + body + "\nLet me know if anything is wrong.\n</profile>")
    assert extracted.ok
    assert extracted.parsed.sections["Recent Topics"] == "- fact 5"


@pytest.mark.parametrize(
    "frontmatter",
    [
        'user_id: "00123"\nschema_version: 1\nlast_updated: "2026-11-30T10:00:00Z"\nturn_count: 7',
        "user_id: 00123\nflag: no\nwhen: 2026-11-30T10:00:00Z\nratio: 1.50\nnull_text: ~",
        'user_id: "a\\"b\\\\c\\n\\u00e9\\x85"\nteam: [blue, "00", {k: 010}]\nnested: {a: yes}',
        "user_id: 'single ''quoted'''\nmulti: |\n  line one\n  line two",
        "user_id: [unclosed",
        "- a list\n- not a mapping",
        "",
    ],
)
def test_the_libyaml_loader_reads_frontmatter_exactly_as_the_pure_one(frontmatter: str) -> None:
    import yaml

    from dbmemory.profile import format as fmt

    def pure(text: str) -> object:
        try:
            return yaml.load(text, Loader=fmt.TextLoader)  # noqa: S506 - SafeLoader subclass
        except yaml.YAMLError as exc:
            return type(exc)

    def chosen(text: str) -> object:
        try:
            return fmt.load_yaml(text)
        except yaml.YAMLError as exc:
            return type(exc)

    assert chosen(frontmatter) == pure(frontmatter)
    if getattr(yaml, "__with_libyaml__", False):
        assert fmt._LOADERS[0].__mro__[1] is yaml.CSafeLoader
