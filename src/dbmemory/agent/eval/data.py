"""LoCoMo samples as the evaluation reads them: dialog turns with their ids, and the questions.

The file (Maharana et al., ACL 2024, ``data/locomo10.json`` of Snap Research's repository) is a
JSON list of samples, each with ``sample_id``, ``conversation`` (``speaker_a``, ``speaker_b``,
``session_N_date_time``, ``session_N`` turns ``{"speaker", "dia_id", "text"[, "blip_caption"]}``)
and ``qa`` (``{"question", "answer" | "adversarial_answer", "evidence": ["D1:3", ...],
"category"}``). Categories are numbered as in the file (see :data:`CATEGORIES`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbmemory.agent.transcripts import parse_session_time
from dbmemory.errors import InvalidArgumentError, NotFoundError

__all__ = ["CATEGORIES", "ADVERSARIAL", "DialogTurn", "Question", "Sample", "read_samples", "evidence_ids"]

CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""LoCoMo's category numbers as the file uses them. mem0's evaluation code keeps the numbers, and
the tables published from it name 1 "single-hop", 3 "multi-hop", 4 "open-domain": compare
results by number."""

ADVERSARIAL = 5
"""The category left out of the headline (its answer is absent from the conversation)."""

_DIA = re.compile(r"D(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class DialogTurn:
    """One line of the conversation.

    Attributes:
        dia_id: LoCoMo's id, ``"D<session>:<n>"``.
        session: the session number.
        time: the session's time (UTC) or None.
        speaker: who said it.
        text: what was said (a shared photo adds ``[shares a photo: <caption>]``, as the replay reads it).
    """

    dia_id: str
    session: int
    time: dt.datetime | None
    speaker: str
    text: str

    def line(self) -> str:
        """The turn as one line of the baselines' context: ``[8 May 2023] Caroline: text``."""
        stamp = f"[{self.time.day} {self.time:%B %Y}] " if self.time is not None else ""
        return f"{stamp}{self.speaker}: {' '.join(self.text.split())}"


@dataclass(frozen=True)
class Question:
    """One LoCoMo question.

    Attributes:
        index: its position in the sample's ``qa`` list, from 0.
        question: the text.
        answer: the gold answer as text, or None (adversarial questions have none).
        adversarial_answer: the trap answer of category 5, or None.
        evidence: the evidence dialog ids (malformed entries such as ``"D8:6; D9:17"`` split).
        category: LoCoMo's number (:data:`CATEGORIES`).
    """

    index: int
    question: str
    answer: str | None
    adversarial_answer: str | None
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Sample:
    """One conversation and its questions.

    Attributes:
        sample_id: ``conv-26``, ...
        speakers: ``(speaker_a, speaker_b)``.
        turns: every dialog turn in session order.
        questions: the questions in file order.
    """

    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[DialogTurn, ...]
    questions: tuple[Question, ...]

    def limited(self, sessions: int | None) -> Sample:
        """The first ``sessions`` sessions and the questions whose evidence lies in them."""
        if not sessions:
            return self
        turns = tuple(t for t in self.turns if t.session <= sessions)
        questions = tuple(
            q for q in self.questions if all(int(_DIA.fullmatch(e).group(1)) <= sessions for e in q.evidence)  # type: ignore[union-attr]
        )
        return Sample(self.sample_id, self.speakers, turns, questions)


def evidence_ids(raw: Any) -> tuple[str, ...]:
    """The ``D<s>:<n>`` ids in a question's ``evidence`` list (malformed entries split)."""
    found: list[str] = []
    for entry in raw or ():
        for m in _DIA.finditer(str(entry)):
            found.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return tuple(dict.fromkeys(found))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def read_samples(path: str | Path, samples: list[str] | None = None) -> list[Sample]:
    """Read a LoCoMo file.

    Args:
        path: the JSON file.
        samples: sample ids to keep, in the file's order; None: all.

    Returns:
        The :class:`Sample` list.

    Raises:
        NotFoundError: no such file, or a named sample is not in it.
        InvalidArgumentError: not LoCoMo's JSON.
    """
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFoundError(f"LoCoMo file {str(path)!r} does not exist: check the path") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{file.name} is not valid JSON (line {exc.lineno}): {exc.msg}") from None
    items = data if isinstance(data, list) else [data]
    if not all(isinstance(i, dict) and isinstance(i.get("conversation"), dict) and "qa" in i for i in items):
        raise InvalidArgumentError(f"{file.name} is not LoCoMo's format: samples need 'conversation' and 'qa'")
    ids = [str(i.get("sample_id")) for i in items]
    if samples:
        missing = [s for s in samples if s not in ids]
        if missing:
            raise NotFoundError(f"sample {missing[0]!r} is not in {file.name}: choose among {', '.join(ids)[:200]}")
    return [_sample(i) for i in items if not samples or str(i.get("sample_id")) in samples]


def _sample(item: dict[str, Any]) -> Sample:
    conv = item["conversation"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)) and isinstance(conv[k], list))
    turns: list[DialogTurn] = []
    for n in numbers:
        stamp = conv.get(f"session_{n}_date_time")
        time = parse_session_time(stamp) if stamp else None
        for turn in conv[f"session_{n}"]:
            text = str(turn.get("text") or "").strip()
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
            ids = evidence_ids([turn.get("dia_id")])
            if text and ids:
                turns.append(DialogTurn(ids[0], n, time, str(turn.get("speaker") or ""), text))
    questions = tuple(
        Question(
            index=i,
            question=str(q.get("question") or ""),
            answer=_text(q.get("answer")),
            adversarial_answer=_text(q.get("adversarial_answer")),
            evidence=evidence_ids(q.get("evidence")),
            category=int(q.get("category") or 0),
        )
        for i, q in enumerate(item.get("qa") or ())
    )
    return Sample(str(item.get("sample_id")), (str(conv["speaker_a"]), str(conv["speaker_b"])), tuple(turns), questions)
