"""The evaluation of what dbmemory injects: LoCoMo, replayed and scored (``dbmemory eval locomo``).

- :mod:`dbmemory.agent.eval.data`: LoCoMo's samples, dialog turns and questions;
- :mod:`dbmemory.agent.eval.criteria`: evidence recall, answer recall, token F1;
- :mod:`dbmemory.agent.eval.baselines`: random turns, BM25 over raw turns, full context;
- :mod:`dbmemory.agent.eval.answer`: tier 2, the answer call and the judges;
- :mod:`dbmemory.agent.eval.report`: figures by category;
- :mod:`dbmemory.agent.eval.run`: :func:`evaluate_locomo`.

The criteria, the category numbering and how to reproduce the figures: ``docs/eval.md``.
"""

from __future__ import annotations

from dbmemory.agent.eval.run import (
    DEFAULT_BUDGET,
    METHODS,
    EvalOptions,
    EvalResult,
    evaluate_locomo,
)

__all__ = ["DEFAULT_BUDGET", "METHODS", "EvalOptions", "EvalResult", "evaluate_locomo"]


def __dir__() -> list[str]:
    # the public API only, never the helper names this module imports
    return sorted(__all__)
