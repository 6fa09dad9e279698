"""Tier 2 of the evaluation: a model answers each question from the injected memory, a judge
grades the answer.

- :func:`answer_question`: one call, the injected memory in the system prompt (as a turn puts
  it there), the question as the user's message; a short answer is asked for.
- :func:`judge_answer`: an LLM judge labels the answer CORRECT or WRONG against the gold answer.
  Two rubrics: ``generous`` follows the rubric of mem0's LoCoMo evaluation (same topic counts as
  correct; a date in another format or relative to the session counts when it is the same date),
  so the figure compares with the published ones; ``strict`` asks for every fact of the gold
  answer and nothing contradicting it. The prompt texts are dbmemory's own.

Every call goes through a ``CompleteFn`` (:func:`dbmemory.llm.complete` by default), so tests run
it offline with litellm's ``mock_response``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dbmemory.llm import Completion

__all__ = ["ANSWER_PROMPT", "JUDGE_PROMPTS", "Answer", "answer_question", "judge_answer", "parse_label"]

ANSWER_PROMPT = (
    "You are the assistant of a long conversation between two people, {speakers}. Below is "
    "what your memory holds about them. Answer the question from it in a few words (a name, a "
    "date, a short phrase). Dates: give the calendar date, computed from the dates in the "
    "memory when the memory says 'yesterday' or 'last week'. If the memory does not hold the "
    "answer, say that it is not mentioned.\n\n{memory}"
)
"""The answer call's system prompt (``{speakers}``, ``{memory}``)."""

_JUDGE_HEAD = (
    "You grade an answer to a question about an earlier conversation between two people. You "
    "get the question, the gold answer (short, the truth) and the generated answer.\n\n"
)
_JUDGE_TAIL = (
    "\n\nQuestion: {question}\nGold answer: {gold}\nGenerated answer: {answer}\n\n"
    'Give one sentence of reasoning, then reply with JSON {{"label": "CORRECT"}} or '
    '{{"label": "WRONG"}} and nothing after it. Never write both labels.'
)
JUDGE_PROMPTS = {
    "generous": _JUDGE_HEAD
    + "Be generous. The generated answer may be longer than the gold answer: it is CORRECT "
    "when it is about the same thing as the gold answer. For a time question it is CORRECT "
    "when it names the same date, month, year or period, in whatever format, even relative to "
    "the conversation (such as 'the week before'). Otherwise it is WRONG." + _JUDGE_TAIL,
    "strict": _JUDGE_HEAD
    + "Be strict. The generated answer is CORRECT only when it states every fact of the gold "
    "answer (each item of a list, the exact date or period) and says nothing that contradicts "
    "it; an answer that hedges between several options, or says it does not know, is WRONG."
    + _JUDGE_TAIL,
}
"""The judge's prompts by rubric (``{question}``, ``{gold}``, ``{answer}``)."""

_LABEL = re.compile(r'"label"\s*:\s*"(CORRECT|WRONG)"|\b(CORRECT|WRONG)\b', re.IGNORECASE)


@dataclass(frozen=True)
class Answer:
    """A model's answer.

    Attributes:
        text: the answer.
        prompt_tokens / completion_tokens: as the provider reported them.
        seconds: wall time of the call.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float


def answer_question(
    complete: Callable[..., Completion], model: str, *, memory: str, question: str, speakers: str,
    timeout: float | None = 60.0,
) -> Answer:
    """One answer call (see the module doc). Raises what ``complete`` raises."""
    messages = [
        {"role": "system", "content": ANSWER_PROMPT.format(speakers=speakers, memory=memory or "(nothing)")},
        {"role": "user", "content": question},
    ]
    started = time.perf_counter()
    completion = complete(model, messages, timeout=timeout)
    return Answer(
        completion.text.strip(), completion.usage.prompt_tokens, completion.usage.completion_tokens,
        time.perf_counter() - started,
    )


def parse_label(text: str) -> int | None:
    """1 for CORRECT, 0 for WRONG (the JSON label first, else the last bare label); None when
    the judge's text has neither."""
    found = _LABEL.findall(text or "")
    if not found:
        return None
    json_labels = [a for a, _ in found if a]
    label = json_labels[-1] if json_labels else found[-1][1]
    return 1 if label.upper() == "CORRECT" else 0


def judge_answer(
    complete: Callable[..., Completion], model: str, *, rubric: str, question: str, gold: str, answer: str,
    timeout: float | None = 60.0,
) -> tuple[int | None, Any]:
    """The judge's label (1 CORRECT, 0 WRONG, None unreadable) and its usage. Raises what
    ``complete`` raises; ``KeyError`` for an unknown rubric."""
    prompt = JUDGE_PROMPTS[rubric].format(question=question, gold=gold, answer=answer)
    completion = complete(model, [{"role": "user", "content": prompt}], timeout=timeout)
    return parse_label(completion.text), completion.usage
