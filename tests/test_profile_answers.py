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
