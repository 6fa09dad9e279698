"""Model answers that hold more than one profile are refused (case C11, same kind)."""

from __future__ import annotations

import pytest

from dbmemory.profile.answers import extract_body
from dbmemory.profile.format import render_body

BODY = render_body({"Identity": "- Name: Ann", "Recent Topics": "- 2026-01-02 10:00 UTC: tea"})
FRONTMATTER = '---\nuser_id: "u-1"\nschema_version: 1\nturn_count: 1\n---\n'


def test_a_single_profile_is_accepted() -> None:
    assert extract_body(BODY).ok


@pytest.mark.parametrize(
    "answer",
    [
        BODY + "\n" + BODY,
        FRONTMATTER + BODY + "\n" + FRONTMATTER + BODY,
        BODY.replace("## Recent Topics", "## Identity\n- Name: Bob\n\n## Recent Topics"),
        BODY + "\n---\nuser_id: \"u-1\"\n---\n",
    ],
    ids=["body-twice", "profile-twice", "section-twice", "frontmatter-inside"],
)
def test_an_answer_holding_two_profiles_is_refused(answer: str) -> None:
    extracted = extract_body(answer)
    assert not extracted.ok
    assert extracted.reason == "duplicate_sections"


@pytest.mark.parametrize(
    "answer",
    [
        "NOOP\n" + BODY,
        "NOOP.\n\n" + BODY,
        "**NOOP**\n```markdown\n" + BODY + "```\n",
        "Here is the profile.\nnoop\n" + BODY,
        BODY + "\nNOOP\n",
        BODY.replace("## Work Context", "NOOP\n## Work Context"),
    ],
    ids=["noop-line-first", "noop-dot-then-blank", "noop-before-a-fence", "noop-after-prose",
         "noop-after", "noop-inside"],
)
def test_a_noop_line_before_inside_or_after_a_profile_is_refused(answer: str) -> None:
    extracted = extract_body(answer)
    assert not extracted.ok
    assert extracted.reason == "not_a_profile"


@pytest.mark.parametrize(
    "answer",
    [
        BODY + "\n## Hobbies\n- chess\n",
        BODY.replace("## Work Context", "## Client Notes\n- Acme\n\n## Work Context"),
        "```markdown\n" + BODY + "\n## Secrets\n- none\n```",
    ],
    ids=["seventh-at-the-end", "seventh-in-the-middle", "seventh-in-a-fence"],
)
def test_a_seventh_section_is_refused_not_kept_as_content(answer: str) -> None:
    extracted = extract_body(answer)
    assert not extracted.ok
    assert extracted.reason == "extra_sections"


def test_a_word_noop_inside_a_longer_line_is_content() -> None:
    body = BODY.replace("- Name: Ann", "- Name: Ann\n- noop handling in the ETL jobs")
    assert extract_body(body).ok
