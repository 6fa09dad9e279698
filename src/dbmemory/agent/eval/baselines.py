"""The baselines the evaluation puts next to dbmemory, over the raw dialog turns.

- ``random``: dialog turns in a seeded random order, whole lines while they fit the budget
  (chance level);
- ``bm25``: the turns ranked by BM25 for the question (:func:`dbmemory.items.select.bm25_scores`,
  the item selection's own ranking: bm25s, English stop words, Snowball stems), turns with a
  positive score, best first, whole lines while they fit the budget;
- ``full_context``: every turn of the replayed sessions (no budget).

Each turn is one line (:meth:`dbmemory.agent.eval.data.DialogTurn.line`); the chosen lines are
put back in conversation order. Budgets are tokens of ``o200k_base``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from dbmemory.items.select import bm25_scores

__all__ = ["BASELINES", "fill", "random_turns", "bm25_turns", "full_context"]

BASELINES = ("random", "bm25", "full_context")
"""The baselines' names, in report order."""


def fill(order: Sequence[int], lines: Sequence[str], costs: Sequence[int], budget: int) -> str:
    """The lines of ``order`` that fit ``budget`` (each line's cost includes its newline), taken
    in ``order`` (a line too long is skipped, a shorter one further on may fit), joined in
    conversation order."""
    used = 0
    chosen = []
    for i in order:
        if used + costs[i] > budget:
            continue
        chosen.append(i)
        used += costs[i]
    return "\n".join(lines[i] for i in sorted(chosen))


def random_turns(lines: Sequence[str], costs: Sequence[int], budget: int, *, seed: str) -> str:
    """Random whole lines up to ``budget`` tokens (``random.Random(seed)``, stable across runs)."""
    order = list(range(len(lines)))
    random.Random(seed).shuffle(order)
    return fill(order, lines, costs, budget)


def bm25_turns(lines: Sequence[str], costs: Sequence[int], budget: int, *, question: str) -> str:
    """The lines BM25 ranks best for ``question``, up to ``budget`` tokens."""
    if not lines:
        return ""
    scores = bm25_scores(list(lines), question)
    order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
    return fill(order, lines, costs, budget)


def full_context(lines: Sequence[str]) -> str:
    """Every line."""
    return "\n".join(lines)


Baseline = Callable[..., str]
