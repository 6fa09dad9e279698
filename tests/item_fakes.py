"""A scripted item-extraction model and the helpers the extraction tests share."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from dbmemory.agent.scripted import ScriptedModel
from dbmemory.items import list_items
from dbmemory.items.extract import extract_items
from dbmemory.items.extract_prompts import purpose_of
from dbmemory.llm import Completion

USER = "u-1"

T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)


@dataclass
class ItemModel:
    """Answers per item purpose (a string, an exception, or a callable of the prompt text);
    everything else goes to the scripted stand-in (the profile steps of the summary fold)."""

    extract: Any = "[]"
    scrub: Any = "CLEAN"
    decide: Any = "[]"
    calls: list[str] = field(default_factory=list)
    scripted: ScriptedModel = field(default_factory=lambda: ScriptedModel(now=T0))

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        purpose = purpose_of(messages)
        if purpose is None:
            self.calls.append("profile")
            return self.scripted(model, messages, **kwargs)
        self.calls.append(purpose)
        answer = getattr(self, purpose)
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            answer = answer("\n".join(str(m["content"]) for m in messages))
        return Completion(text=answer, finish_reason="stop")


def facts(*pairs: tuple[str, float]) -> str:
    return json.dumps([{"fact": f, "confidence": c} for f, c in pairs])


def run(engine: Engine, model: ItemModel, *, chat: str | None = "chat-1", at: dt.datetime = T0,
        message: str = "I live in Lisbon.", summarize: bool = False, **kw: Any):
    return extract_items(
        engine, org_id="default", user_id=USER, chat_id=chat, user_message=message,
        assistant_message="Noted.", complete=model, model="fake-model", now=at,
        summarize=summarize, **kw,
    )


def texts(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [i.text for i in list_items(conn, USER, now=T0 + dt.timedelta(days=1))]
