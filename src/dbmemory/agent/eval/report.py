"""Figures over per-question records: means, percentiles, by LoCoMo category (pure functions)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dbmemory.agent.eval.data import ADVERSARIAL, CATEGORIES

__all__ = ["percentile", "mean", "summarize", "FIGURES"]

FIGURES = ("evidence_recall", "answer_recall", "tokens_mean", "tokens_p95")
"""The tier-1 figures of every method."""


def percentile(values: Sequence[float], p: float) -> float | None:
    """The nearest-rank ``p`` percentile (0 < p <= 100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values that are not None; None when there are none."""
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _group(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    tokens = [r["tokens"] for r in records]
    out: dict[str, Any] = {
        "n": len(records),
        "evidence_recall": mean(r["evidence_recall"] for r in records),
        "answer_recall": mean(None if r["answer_found"] is None else float(r["answer_found"]) for r in records),
        "tokens_mean": mean(tokens),
        "tokens_p95": percentile(tokens, 95),
    }
    latencies = [r["latency_ms"] for r in records if r.get("latency_ms") is not None]
    if latencies:
        out["latency_ms_p50"] = percentile(latencies, 50)
        out["latency_ms_p95"] = percentile(latencies, 95)
    for name in ("judge", "judge_strict", "f1"):
        values = [r[name] for r in records if r.get(name) is not None]
        if values:
            out[name] = mean(values)
    for name in ("answer_prompt_tokens", "total_latency_ms"):
        values = [r[name] for r in records if r.get(name) is not None]
        if values:
            out[f"{name}_mean"] = mean(values)
            out[f"{name}_p95"] = percentile(values, 95)
    return out


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures of one method: ``non_adversarial`` (the headline: categories 1-4), ``all``,
    and ``by_category`` (``"1"``..``"5"``, each with its name).

    Each group: ``n``, ``evidence_recall`` and ``answer_recall`` (fractions 0..1, means over the
    questions that have one), ``tokens_mean``/``tokens_p95`` (o200k tokens of the scored text),
    and when the records have them ``latency_ms_p50``/``latency_ms_p95``, ``judge``,
    ``judge_strict``, ``f1``, ``answer_prompt_tokens_*``, ``total_latency_ms_*``.
    """
    by_category = {}
    for number, name in CATEGORIES.items():
        group = [r for r in records if r["category"] == number]
        if group:
            by_category[str(number)] = {"name": name, **_group(group)}
    return {
        "non_adversarial": _group([r for r in records if r["category"] != ADVERSARIAL]),
        "all": _group(records),
        "by_category": by_category,
    }
