"""Test helpers for the profile tests: a deterministic fake model and profile builders."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.llm import Completion, Usage
from dbmemory.profile import optout
from dbmemory.profile.format import SECTIONS
from dbmemory.profile.prompts import purpose_of

Answer = str | Completion | BaseException | Callable[[list[dict[str, Any]]], "str | Completion"]


def body_with(facts: dict[str, list[str]] | None = None, *, title: bool = True) -> str:
    """A complete profile body; ``facts`` maps section titles to bullet texts."""
    facts = facts or {}
    parts = ["# User Memory", ""] if title else []
    for name in SECTIONS:
        parts.append(f"## {name}")
        bullets = facts.get(name) or []
        parts.extend(f"- {b}" for b in bullets) if bullets else parts.append("_(empty)_")
        parts.append("")
    return "\n".join(parts)


@dataclass
class FakeModel:
    """A deterministic ``complete``: answers per purpose, records every prompt.

    Each purpose's answer is a string, a :class:`Completion`, an exception (raised), a callable
    ``messages -> str | Completion``, or a list of those consumed in order (the last repeats).
    """

    gate: Answer | list[Answer] = "UPDATE"
    rewrite: Answer | list[Answer] = "NOOP"
    scrub: Answer | list[Answer] = "CLEAN"
    condense: Answer | list[Answer] = "not a profile"
    calls: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    models: list[str] = field(default_factory=list)

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        purpose = purpose_of(messages) or "unknown"
        self.calls.append((purpose, messages))
        self.models.append(model)
        script = getattr(self, purpose)
        if isinstance(script, list):
            count = sum(1 for p, _ in self.calls if p == purpose)
            answer = script[min(count, len(script)) - 1]
        else:
            answer = script
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer) and not isinstance(answer, str):
            answer = answer(messages)
        if isinstance(answer, Completion):
            return answer
        return Completion(text=answer, finish_reason="stop", usage=Usage(11, len(answer) // 4))

    def purposes(self) -> list[str]:
        """Purposes of the calls so far, in order."""
        return [p for p, _ in self.calls]

    def user_prompt(self, purpose: str, index: int = -1) -> str:
        """The user message of one recorded call of ``purpose`` (the data part of a prompt)."""
        chosen = [m for p, m in self.calls if p == purpose]
        return "\n".join(str(m["content"]) for m in chosen[index] if m["role"] == "user")

    def prompt(self, purpose: str, index: int = -1) -> str:
        """All message text of one recorded call of ``purpose``."""
        chosen = [m for p, m in self.calls if p == purpose]
        return "\n".join(str(m["content"]) for m in chosen[index])


def fixed_now(when: str = "2026-06-17T12:00:00+00:00") -> Callable[[], dt.datetime]:
    """A clock that always returns ``when``."""
    moment = dt.datetime.fromisoformat(when)
    return lambda: moment


@contextmanager
def user_settings_table(engine: Engine) -> Iterator[None]:
    """Make sure ``dbm_user_settings`` exists (created from the fallback definition when the
    schema does not define it yet) and is empty; drop it afterwards if it was created here."""
    created = False
    if not sa.inspect(engine).has_table(optout.USER_SETTINGS_TABLE):
        optout.user_settings.create(engine)
        created = True
    with engine.begin() as conn:
        conn.execute(sa.delete(optout.user_settings))
    try:
        yield
    finally:
        if created:
            optout.user_settings.drop(engine)
