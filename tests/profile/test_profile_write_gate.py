"""The consolidation's write gate and deadline (issue 8, section 7), on every backend.

* Every text written as a profile passed the scrub and the detectors as it is written: a client
  name or a credential introduced by the condensation step is never stored.
* The consolidation has its own wall-clock deadline: a model that ignores ``timeout`` cannot
  hold it longer, and an abandoned call never writes later.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from _profile_fakes import FakeModel, body_with, fixed_now, user_settings_table
from dbmemory.agent import TurnConfig, arun_turn, run_turn
from dbmemory.llm import Completion
from dbmemory.profile import (
    ProfileMetrics,
    UserMemoryConfig,
    UserMemoryPostprocessor,
    load_user_memory,
    read_profile,
    write_profile,
)
from dbmemory.profile.budget import TRUNCATION_MARKER
from dbmemory.profile.prompts import purpose_of
from dbmemory.store.agents import enable_for_agent

MODEL = "gpt-4o-mini"
USER = "u-7"
SEED = body_with({"Identity": ["Name: Dana"]})
BIG = body_with(
    {"Identity": ["Name: Dana"], "Recent Topics": [f"topic {i} " + "q" * 100 for i in range(120)]}
)
SMALL = UserMemoryConfig(max_tokens=500)
CLIENT = "Globex Corporation"
CONDENSED_WITH_CLIENT = body_with(
    {"Identity": ["Name: Dana"], "Work Context": [f"consultant for the client {CLIENT}"]}
)
CONDENSED_WITH_KEY = body_with(
    {"Identity": ["Name: Dana"], "Work Context": ["deploy key sk-proj-Abc123Def456Ghi789Jkl012Mno345"]}
)


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    with user_settings_table(engine):
        yield engine


def _seed(engine: Engine) -> str:
    with engine.begin() as conn:
        return write_profile(conn, USER, SEED, expected_version=0).text


def _stored(engine: Engine) -> str | None:
    with engine.begin() as conn:
        record = read_profile(conn, USER)
    return None if record is None else record.text


def _run(engine: Engine, complete: Any, config: UserMemoryConfig = SMALL, **kwargs: Any) -> Any:
    with engine.begin() as conn:
        state = load_user_memory(conn, USER, config=config, model=MODEL)
    post = UserMemoryPostprocessor(
        engine, config, MODEL, USER, state, complete=complete, now=fixed_now(), **kwargs
    )
    return post.run("I work on a new project.", "Good luck!")


def _scrub_refusing(word: str) -> Any:
    """A scrub that passes a body unless it contains ``word`` (then it answers with prose)."""

    def scrub(messages: list[dict[str, Any]]) -> str:
        text = "\n".join(str(m["content"]) for m in messages if m["role"] == "user")
        return f"The profile names {word}; it must not be stored." if word in text else "CLEAN"

    return scrub


def _count(metrics: ProfileMetrics, name: str, labels: dict[str, str]) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


# ----------------------------------------------------------------------------- the write gate


def test_a_client_name_introduced_by_the_condensation_is_never_written(db: Engine) -> None:
    before = _seed(db)
    metrics = ProfileMetrics()
    fake = FakeModel(rewrite=BIG, condense=CONDENSED_WITH_CLIENT, scrub=_scrub_refusing(CLIENT))
    result = _run(db, fake, metrics=metrics)
    # the condensed text was scrubbed as it would have been written, and the scrub refused it
    assert fake.purposes() == ["gate", "rewrite", "scrub", "condense", "scrub"]
    assert CLIENT in fake.user_prompt("scrub")
    assert (result.outcome, result.reason) == ("scrub_veto", "scrub_invalid")
    assert _stored(db) == before
    assert CLIENT not in (_stored(db) or "")
    assert _count(metrics, "dbmemory_profile_postprocess_total", {"outcome": "scrub_veto"}) == 1.0
    assert _count(metrics, "dbmemory_profile_rejected_total", {"reason": "scrub_invalid"}) == 1.0


def test_a_scrub_that_cleans_the_condensed_text_is_what_gets_written(db: Engine) -> None:
    _seed(db)
    cleaned = CONDENSED_WITH_CLIENT.replace(f"the client {CLIENT}", "a client")

    def scrub(messages: list[dict[str, Any]]) -> str:
        text = "\n".join(str(m["content"]) for m in messages if m["role"] == "user")
        return cleaned if CLIENT in text else "CLEAN"

    result = _run(db, FakeModel(rewrite=BIG, condense=CONDENSED_WITH_CLIENT, scrub=scrub))
    assert result.outcome == "updated" and result.condensed
    stored = _stored(db) or ""
    assert CLIENT not in stored
    assert "consultant for a client" in stored


def test_a_credential_introduced_by_the_condensation_is_never_written(db: Engine) -> None:
    _seed(db)
    metrics = ProfileMetrics()
    result = _run(db, FakeModel(rewrite=BIG, condense=CONDENSED_WITH_KEY), metrics=metrics)
    assert result.outcome == "updated"
    stored = _stored(db) or ""
    assert "sk-proj-" not in stored and "[redacted:secret]" in stored
    assert result.redactions.get("secret", 0) >= 1


def test_a_failing_scrub_of_the_condensed_text_keeps_the_old_profile(db: Engine) -> None:
    before = _seed(db)
    metrics = ProfileMetrics()
    fake = FakeModel(rewrite=BIG, condense=CONDENSED_WITH_KEY, scrub=["CLEAN", RuntimeError("scrub down")])
    result = _run(db, fake, metrics=metrics)
    assert (result.outcome, result.reason) == ("scrub_veto", "scrub_error")
    assert _stored(db) == before
    assert _count(metrics, "dbmemory_profile_rejected_total", {"reason": "scrub_error"}) == 1.0


def test_a_hard_truncated_text_is_scrubbed_as_written(db: Engine) -> None:
    before = _seed(db)
    fake = FakeModel(rewrite=BIG, condense="not a profile", scrub=["CLEAN", "UNSAFE"])
    result = _run(db, fake)
    assert fake.purposes() == ["gate", "rewrite", "scrub", "condense", "scrub"]
    assert TRUNCATION_MARKER in fake.user_prompt("scrub")  # exactly the truncated text
    assert result.outcome == "scrub_veto"
    assert _stored(db) == before
    # and when the scrub passes it, the truncated text is written
    result = _run(db, FakeModel(rewrite=BIG, condense="not a profile"))
    assert result.outcome == "updated" and result.truncated
    assert (_stored(db) or "").rstrip().endswith(TRUNCATION_MARKER)


def test_a_text_within_budget_is_scrubbed_once(db: Engine) -> None:
    _seed(db)
    fake = FakeModel(rewrite=body_with({"Identity": ["Name: Dana"], "Work Context": ["BI team"]}))
    result = _run(db, fake, config=UserMemoryConfig())
    assert result.outcome == "updated"
    assert fake.purposes() == ["gate", "rewrite", "scrub"]


# ----------------------------------------------------------------------------- the deadline


class Sleeper:
    """A fake model whose ``purpose`` call ignores ``timeout`` and sleeps ``seconds``."""

    def __init__(self, purpose: str, seconds: float, answers: FakeModel) -> None:
        self.purpose, self.seconds, self.answers = purpose, seconds, answers
        self.finished = threading.Event()
        self.timeouts: list[Any] = []

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        self.timeouts.append(kwargs.get("timeout"))
        reply = self.answers(model, messages, **kwargs)
        if purpose_of(messages) == self.purpose:
            time.sleep(self.seconds)
            self.finished.set()
        return reply


@pytest.mark.parametrize("purpose", ["gate", "rewrite", "scrub", "condense"])
def test_a_model_that_ignores_its_timeout_cannot_hold_the_consolidation(db: Engine, purpose: str) -> None:
    before = _seed(db)
    metrics = ProfileMetrics()
    slow = Sleeper(purpose, 1.5, FakeModel(rewrite=BIG, condense=body_with({"Identity": ["Name: Dana"]})))
    config = UserMemoryConfig(max_tokens=500, deadline_s=0.4)
    started = time.perf_counter()
    result = _run(db, slow, config=config, metrics=metrics, timeout=60.0)
    assert time.perf_counter() - started < 1.2  # gave up at the deadline, not after the sleep
    assert (result.outcome, result.reason) == ("error", "deadline")
    assert result.calls[-1].error == "DeadlineExceeded"
    assert all(t is not None and t <= 0.4 for t in slow.timeouts)  # timeout capped to the time left
    assert _count(metrics, "dbmemory_profile_postprocess_total", {"outcome": "error"}) == 1.0
    # the abandoned call finishes later and never writes
    assert slow.finished.wait(5)
    time.sleep(0.1)
    assert _stored(db) == before


def test_the_deadline_is_configurable_and_validated() -> None:
    assert UserMemoryConfig().deadline_s == 120.0
    assert UserMemoryConfig(deadline_s=5).deadline_s == 5
    for bad in (0, -1, 7200):
        with pytest.raises(ValueError):
            UserMemoryConfig(deadline_s=bad)


def _agent(engine: Engine) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, "A")


def test_the_turns_post_processing_gives_up_at_the_deadline(db: Engine) -> None:
    before = _seed(db)
    _agent(db)
    answers = FakeModel(rewrite=BIG)

    def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages):
            if purpose_of(messages) == "rewrite":
                time.sleep(1.5)
            return answers(model, messages, **kwargs)
        return Completion("answer", "stop")

    config = TurnConfig(user_memory=UserMemoryConfig(deadline_s=0.3), post_process="deferred")
    result = run_turn(
        db, agent_code="A", user_id=USER, messages=[{"role": "user", "content": "hi"}], model=MODEL,
        complete=complete, config=config,
    )
    started = time.perf_counter()
    consolidated = result.post_processing.run()
    assert time.perf_counter() - started < 1.2
    assert (consolidated.outcome, consolidated.reason) == ("error", "deadline")
    time.sleep(1.5)
    assert _stored(db) == before


def test_arun_turns_post_processing_gives_up_at_the_deadline(db: Engine) -> None:
    before = _seed(db)
    _agent(db)
    answers = FakeModel(rewrite=BIG)

    async def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages):
            if purpose_of(messages) == "gate":
                await asyncio.sleep(1.5)  # an async model that ignores its timeout
            return answers(model, messages, **kwargs)
        return Completion("answer", "stop")

    async def main() -> Any:
        config = TurnConfig(user_memory=UserMemoryConfig(deadline_s=0.3), post_process="deferred")
        result = await arun_turn(
            db, agent_code="A", user_id=USER, messages=[{"role": "user", "content": "hi"}], model=MODEL,
            complete=complete, config=config,
        )
        started = time.perf_counter()
        consolidated = await result.post_processing
        return consolidated, time.perf_counter() - started

    consolidated, seconds = asyncio.run(main())
    assert seconds < 1.2
    assert (consolidated.outcome, consolidated.reason) == ("error", "deadline")
    time.sleep(1.5)
    assert _stored(db) == before


def test_the_write_gate_does_not_scan_the_drafts_unchanged_body_again(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12: the body the draft checked, written unchanged, is judged by that same scan."""
    from dbmemory.profile import consolidate as consolidate_module
    from dbmemory.profile.detectors import scan as real_scan

    scanned: list[str] = []

    def counting(text: str, **kwargs: Any) -> Any:
        scanned.append(text)
        return real_scan(text, **kwargs)

    monkeypatch.setattr(consolidate_module, "scan", counting)
    body = body_with({"Identity": ["Name: Dana"], "Recent Topics": ["window functions"]})
    post = UserMemoryPostprocessor(
        db, UserMemoryConfig(), "gpt-4o-mini", "u-gate-once", None,
        complete=FakeModel(rewrite=body), metrics=ProfileMetrics(),
    )
    assert post.run("hi", "hello").outcome == "updated"
    assert len(scanned) == 1
