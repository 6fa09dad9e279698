"""Run the LoCoMo evaluation: replay each conversation, then score what a turn would inject.

For each sample: the conversation is replayed as ``dbmemory replay`` does
(:func:`dbmemory.agent.replay.replay_conversation`; with ``speakers="both"`` each speaker is
replayed as a user of their own, the other speaker's lines as the recorded replies) into the
given database; then, at the time of the last replayed session, for each question the memory
a turn would inject (:func:`dbmemory.agent.injection.injected_memory`; with both speakers, the
memory of each speaker's turn, speaker_a's first, joined by a blank line; the turns share the
budget equally, as each turn's total memory budget) is scored with the
criteria of :mod:`dbmemory.agent.eval.criteria`, next to the baselines of
:mod:`dbmemory.agent.eval.baselines` at the same token budget. With an answer model (tier 2) a
model answers each question from the injected memory and two judges grade it
(:mod:`dbmemory.agent.eval.answer`).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.engine import Engine

from dbmemory import llm
from dbmemory.agent.eval import answer as tier2
from dbmemory.agent.eval import baselines
from dbmemory.agent.eval.criteria import (
    answer_found,
    evidence_found,
    line_stems,
    normalize_answer,
    salient_stems,
    token_f1,
)
from dbmemory.agent.eval.data import Question, Sample, read_samples
from dbmemory.agent.eval.report import summarize
from dbmemory.agent.injection import injected_memory
from dbmemory.agent.replay import (
    ReplaySummary,
    replay_conversation,
    replay_user_id,
    reset_replay_memory,
)
from dbmemory.agent.transcripts import read_conversation
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.model import user_key_of
from dbmemory.items.turn_memory import turn_rows_stmt
from dbmemory.profile.config import UserMemoryConfig
from dbmemory.profile.tokens import count_tokens, get_encoding

__all__ = ["DEFAULT_BUDGET", "TOKENIZER", "EvalOptions", "EvalResult", "evaluate_locomo", "METHODS"]

DEFAULT_BUDGET = 1200
"""The budget of every method in o200k tokens when none is given: the baselines fill it, and
dbmemory's whole injected memory for a question stays within it (each replayed speaker's turn
gets an equal share, the turn's ``memory_token_budget``)."""

TOKENIZER = "gpt-4o"
"""The model name whose tokenizer (``o200k_base``) counts every figure's tokens."""

METHODS = ("dbmemory", *baselines.BASELINES)
"""The methods scored, in report order."""


@dataclass
class EvalOptions:
    """What to evaluate and how.

    Attributes:
        samples: sample ids (None: every sample of the file).
        sessions: replay only the first N sessions (questions whose evidence lies later are left out).
        speakers: ``"a"`` (speaker_a is the user) or ``"both"`` (each speaker a user).
        model: the replay's model (``"scripted"``: the stand-in) and, when not scripted, the answer model.
        complete: the replay's model call (None: :func:`dbmemory.llm.complete`).
        answer_model: tier 2's answer model, or None (tier 1 only).
        answer_complete: tier 2's model call (None: :func:`dbmemory.llm.complete`).
        judge_model: tier 2's judge (None: ``answer_model``).
        judge_complete: the judge's model call (None: ``answer_complete``).
        budget: every method's budget in o200k tokens (dbmemory: the whole injected memory of a
            question, shared equally by the speakers' turns).
        seed: the random baseline's seed.
        agent_code: the agent the replay runs as.
        progress: show rich progress bars (on ``console``, default stderr).
        out_dir: write per-question JSON lines and the summary there.
    """

    samples: list[str] | None = None
    sessions: int | None = None
    speakers: str = "both"
    model: str = "scripted"
    complete: Callable[..., Any] | None = None
    answer_model: str | None = None
    answer_complete: Callable[..., Any] | None = None
    judge_model: str | None = None
    judge_complete: Callable[..., Any] | None = None
    budget: int = DEFAULT_BUDGET
    seed: int = 0
    agent_code: str = "replay"
    progress: bool = False
    console: Any = None
    out_dir: Path | None = None


@dataclass
class EvalResult:
    """What the evaluation measured.

    Attributes:
        summary: the JSON-ready summary (see :func:`evaluate_locomo`).
        records: per method, one dict per question (``sample_id``, ``question``, ``category``,
            ``injected``, the figures).
    """

    summary: dict[str, Any]
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@contextmanager
def _bar(options: EvalOptions, total: int, label: str) -> Iterator[Callable[[], None]]:
    if not options.progress:
        yield lambda: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=options.console or Console(stderr=True), transient=False,
    ) as progress:
        task = progress.add_task(label, total=total)
        yield lambda: progress.advance(task)


def _tokens(text: str) -> int:
    return count_tokens(text, TOKENIZER) if text else 0


def _score(text: str, question: Question, stems: dict[str, frozenset[str]]) -> dict[str, Any]:
    """The tier-1 figures of ``text`` for ``question``."""
    lines = [line_stems(line) for line in text.splitlines() if line.strip()]
    scorable = [e for e in question.evidence if stems.get(e)]
    found = [e for e in scorable if evidence_found(stems[e], lines)]
    return {
        "evidence": list(question.evidence),
        "evidence_found": found,
        "evidence_recall": len(found) / len(scorable) if scorable else None,
        "answer": question.answer,
        "answer_found": None if question.answer is None else answer_found(question.answer, normalize_answer(text)),
    }


def _record(sample: Sample, q: Question, text: str, tokens: int, figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "sample_id": sample.sample_id, "question_index": q.index, "question": q.question,
        "category": q.category, "injected": text, "tokens": tokens, **figures,
    }


def _item_counts(engine: Engine, user_ids: list[str], now: dt.datetime | None) -> dict[str, int]:
    """Items live and expired at ``now`` (not deleted), over ``user_ids``."""
    when = now or dt.datetime.now(dt.timezone.utc)
    live = expired = 0
    with engine.connect() as conn:
        for user in user_ids:
            for row in conn.execute(turn_rows_stmt(), {"org_id": "default", "user_key": user_key_of(user)}):
                expires = row[6]
                if expires is not None and expires.tzinfo is None:
                    expires = expires.replace(tzinfo=dt.timezone.utc)
                if expires is not None and expires <= when:
                    expired += 1
                else:
                    live += 1
    return {"live": live, "expired": expired}


def _replay(engine: Engine, path: Path, sample: Sample, options: EvalOptions) -> tuple[list[str], list[ReplaySummary], Any]:
    roles = ["speaker_a", "speaker_b"] if options.speakers == "both" else ["speaker_a"]
    users, summaries, now = [], [], None
    for role in roles:
        conversation = read_conversation(path, sample=sample.sample_id, as_speaker=role).limited(options.sessions)
        user = replay_user_id(conversation)
        reset_replay_memory(engine, agent_code=options.agent_code, user_id=user)
        summary = replay_conversation(
            engine, conversation, model=options.model, complete=options.complete,
            agent_code=options.agent_code, user_id=user, progress=options.progress, console=options.console,
        )
        users.append(user)
        summaries.append(summary)
        times = [s.time for s in conversation.sessions if s.time is not None]
        now = max(times) if times else None
    return users, summaries, now


def _tier2(options: EvalOptions, sample: Sample, q: Question, record: dict[str, Any], costs: dict[str, int]) -> None:
    model = options.answer_model
    assert model is not None
    complete = options.answer_complete or llm.complete
    judge_model = options.judge_model or model
    judge_complete = options.judge_complete or options.answer_complete or llm.complete
    reply = tier2.answer_question(
        complete, model, memory=record["injected"], question=q.question, speakers=" and ".join(sample.speakers)
    )
    costs["answer_prompt"] += reply.prompt_tokens
    costs["answer_completion"] += reply.completion_tokens
    record["model_answer"] = reply.text
    record["answer_prompt_tokens"] = reply.prompt_tokens
    record["total_latency_ms"] = record["latency_ms"] + reply.seconds * 1000
    gold = q.answer
    if gold is None:  # adversarial: nothing to grade against
        return
    record["f1"] = token_f1(reply.text, gold)
    for rubric, key in (("generous", "judge"), ("strict", "judge_strict")):
        label, usage = tier2.judge_answer(
            judge_complete, judge_model, rubric=rubric, question=q.question, gold=gold, answer=reply.text
        )
        record[key] = label
        costs["judge_prompt"] += usage.prompt_tokens
        costs["judge_completion"] += usage.completion_tokens


def _evaluate_sample(
    engine: Engine, path: Path, sample: Sample, options: EvalOptions, records: dict[str, list[dict[str, Any]]],
    costs: dict[str, int], out: Path | None,
) -> dict[str, Any]:
    users, summaries, now = _replay(engine, path, sample, options)
    lines = [t.line() for t in sample.turns]
    line_costs = [_tokens(line + "\n") for line in lines]
    stems = {t.dia_id: salient_stems(t.text, sample.speakers) for t in sample.turns}
    full = baselines.full_context(lines)
    full_tokens = _tokens(full)
    if out is not None:
        (out / "full_context").mkdir(exist_ok=True)
        (out / "full_context" / f"{sample.sample_id}.txt").write_text(full, encoding="utf-8")
    memory_config = UserMemoryConfig()
    with _bar(options, len(sample.questions), f"Questions of {sample.sample_id}") as advance:
        for q in sample.questions:
            with engine.connect() as conn:
                share = options.budget // len(users)
                mems = [
                    injected_memory(
                        conn, user_id=u, question=q.question, model=options.model, now=now, config=memory_config,
                        max_tokens=share,
                    )
                    for u in users
                ]
                conn.rollback()
            text = "\n\n".join(m.text for m in mems if m.text)
            record = _record(sample, q, text, _tokens(text), _score(text, q, stems))
            record["latency_ms"] = sum(m.seconds for m in mems) * 1000
            record["items_injected"] = sum(len(m.items) for m in mems)
            record["live_items"] = sum(m.live_items for m in mems)
            if options.answer_model:
                _tier2(options, sample, q, record, costs)
            records["dbmemory"].append(record)
            chosen = {
                "random": baselines.random_turns(lines, line_costs, options.budget, seed=f"{options.seed}:{sample.sample_id}:{q.index}"),
                "bm25": baselines.bm25_turns(lines, line_costs, options.budget, question=q.question),
            }
            for name, chosen_text in chosen.items():
                records[name].append(_record(sample, q, chosen_text, _tokens(chosen_text), _score(chosen_text, q, stems)))
            full_record = _record(sample, q, "", full_tokens, _score(full, q, stems))
            full_record.pop("injected")
            full_record["injected_file"] = f"full_context/{sample.sample_id}.txt"
            records["full_context"].append(full_record)
            advance()
    return {
        "sample_id": sample.sample_id,
        "users": users,
        "questions": len(sample.questions),
        "turns": len(sample.turns),
        "question_time": now.isoformat() if now else None,
        "items": _item_counts(engine, users, now),
        "replay": [s.as_dict() for s in summaries],
    }


def _ingest_cost(model: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    prompt = completion = 0
    for sample in samples:
        for replay in sample["replay"]:
            for stats in replay["purposes"].values():
                prompt += stats["prompt_tokens"]
                completion += stats["completion_tokens"]
    return {"prompt_tokens": prompt, "completion_tokens": completion, "usd": llm.cost(model, prompt, completion)}


def evaluate_locomo(engine: Engine, path: str | Path, options: EvalOptions | None = None) -> EvalResult:
    """Evaluate dbmemory on a LoCoMo file (see the module doc).

    The replay writes into ``engine`` (schema installed, the agent's memory enabled); each
    replayed user's memory is cleared first. Nothing is written for the questions.

    Returns:
        An :class:`EvalResult`. ``summary`` holds ``methods`` (per method
        :func:`dbmemory.agent.eval.report.summarize`), ``samples`` (per sample: users, question
        time, items live/expired at it, the replay summaries), ``items`` (live/expired, summed),
        ``budget``, ``tokenizer`` (``"o200k_base"``, or ``"estimate"`` when the encoding could not
        be loaded), ``tier2`` (None, or the models and token costs).

    Raises:
        NotFoundError: no such file or sample.
        InvalidArgumentError: not LoCoMo's format; ``speakers`` not ``a``/``both``.
        ModelError: a model call of tier 2 failed.
    """
    options = options or EvalOptions()
    if options.speakers not in ("a", "both"):
        raise InvalidArgumentError(f"speakers must be 'a' or 'both', not {options.speakers!r}")
    file = Path(path)
    samples = [s.limited(options.sessions) for s in read_samples(file, options.samples)]
    out = options.out_dir
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    records: dict[str, list[dict[str, Any]]] = {m: [] for m in METHODS}
    costs = dict.fromkeys(("answer_prompt", "answer_completion", "judge_prompt", "judge_completion"), 0)
    started = time.perf_counter()
    per_sample = [_evaluate_sample(engine, file, s, options, records, costs, out) for s in samples]
    summary: dict[str, Any] = {
        "file": file.name,
        "samples": per_sample,
        "speakers": options.speakers,
        "sessions": options.sessions,
        "model": options.model,
        "budget": options.budget,
        "seed": options.seed,
        "tokenizer": "o200k_base" if get_encoding("o200k_base") is not None else "estimate",
        "items": {
            "live": sum(s["items"]["live"] for s in per_sample),
            "expired": sum(s["items"]["expired"] for s in per_sample),
        },
        "methods": {name: summarize(rows) for name, rows in records.items()},
        "tier2": None,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if options.answer_model:
        judge = options.judge_model or options.answer_model
        summary["tier2"] = {
            "answer_model": options.answer_model,
            "judge_model": judge,
            "ingest": _ingest_cost(options.model, per_sample),
            "answer_tokens": {"prompt": costs["answer_prompt"], "completion": costs["answer_completion"]},
            "answer_usd": llm.cost(options.answer_model, costs["answer_prompt"], costs["answer_completion"]),
            "judge_tokens": {"prompt": costs["judge_prompt"], "completion": costs["judge_completion"]},
            "judge_usd": llm.cost(judge, costs["judge_prompt"], costs["judge_completion"]),
        }
    if out is not None:
        _write(out, summary, records)
    return EvalResult(summary, records)


def _write(out: Path, summary: dict[str, Any], records: dict[str, list[dict[str, Any]]]) -> None:
    for name, rows in records.items():
        with (out / f"{name}_questions.jsonl").open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
