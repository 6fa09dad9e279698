"""The scripted stand-in's fixed rule for memory items (see :mod:`dbmemory.agent.scripted`).

Policy, for the item extraction (recognised from the system prompt's first line,
:data:`dbmemory.items.extract_prompts.PURPOSE_HEADERS`):

- ``item_extract``: one fact per obvious profile fact of the user's message and of the earlier
  user messages the prompt carries
  (:func:`dbmemory.agent.scripted.profile_facts`), in the third person: ``Name: Ana`` becomes
  "User's name is Ana", ``Lives in: Lisbon`` "User lives in Lisbon", ``Age: 30`` "User is 30
  years old", ``Pronouns: she/her`` "User's pronouns are she/her", ``Works as ...`` "User works
  as ...", ``Enjoys ...``/``Learning ...``/``Prefers ...`` "User enjoys/is learning/prefers ...",
  a reminder "User asked to be reminded to ...". Confidence 0.95 for single-valued facts (name,
  age, pronouns, home, work), 0.9 for the others, and 0.5 when the sentence hedges ("maybe",
  "perhaps", "probably", "might", "I think"), so the default threshold of 0.8 drops it;
- ``item_scrub``: ``CLEAN``, or the array with ``null`` for facts that hold an e-mail address,
  a long digit run, or a ``password``/``token``/``api key`` value;
- the profile summary fold (a rewrite whose user message starts with
  :data:`dbmemory.items.summary.FOLD_HEADER`): each item becomes one profile bullet, in the
  section its wording names ("User's name/lives/is N years old/pronouns" -> Identity, "User
  prefers" -> Communication Preferences, "User works" -> Work Context, "User is learning" ->
  Skills & Expertise, "User asked to be reminded" -> Follow-ups, anything else -> Identity),
  with "User " dropped; no Recent Topics bullet;
- ``item_decide``: ``same`` for an item with the same normalised text; ``update`` of the item
  with the same single-valued key ("User lives in ...", "User's name is ...", "User is N years
  old", "User's pronouns are ...", "User works ..."): the newest value replaces the old one;
  else ``new``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from dbmemory.agent.scripted_text import first_person_statements, profile_facts
from dbmemory.items.extract_prompts import normalise
from dbmemory.items.summary import FOLD_HEADER

__all__ = ["fold_bullets", "third_person_facts", "extract_answer", "scrub_answer", "decide_answer", "fact_key"]

_HEDGE = re.compile(r"\b(maybe|perhaps|probably|might|i think|not sure)\b", re.IGNORECASE)
_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("Name: ", "User's name is {}"),
    ("Lives in: ", "User lives in {}"),
    ("Age: ", "User is {} years old"),
    ("Pronouns: ", "User's pronouns are {}"),
    ("Works ", "User works {}"),
    ("Enjoys ", "User enjoys {}"),
    ("Learning ", "User is learning {}"),
    ("Prefers ", "User prefers {}"),
    ("Asked to be reminded to ", "User asked to be reminded to {}"),
)
_KEYS = (
    ("name", re.compile(r"^user's name is\b", re.I)),
    ("home", re.compile(r"^user lives in\b", re.I)),
    ("age", re.compile(r"^user is \d{1,3} years old\b", re.I)),
    ("pronouns", re.compile(r"^user's pronouns are\b", re.I)),
    ("work", re.compile(r"^user works\b", re.I)),
)
_SENSITIVE = re.compile(
    r"[\w.+-]+@[\w-]+\.[\w.]+|\b\d{9,}\b|\+\d[\d ]{8,}\d|\b(password|passwd|token|api[ _-]?key|secret)\b\s*[:=]?",
    re.IGNORECASE,
)


def fact_key(text: str) -> str | None:
    """The single-valued key of a third-person fact (``name``, ``home``, ``age``, ``pronouns``,
    ``work``), or None."""
    for key, pattern in _KEYS:
        if pattern.search(text.strip()):
            return key
    return None


def third_person_facts(user_text: str) -> list[tuple[str, float]]:
    """``(fact, confidence)`` by the rule in the module doc."""
    out: list[tuple[str, float]] = []
    for sentence in first_person_statements(user_text):
        hedged = bool(_HEDGE.search(sentence))
        for _section, key, bullet in profile_facts(sentence):
            for prefix, template in _TEMPLATES:
                if bullet.startswith(prefix):
                    fact = template.format(bullet[len(prefix):])
                    break
            else:
                fact = "User: " + bullet
            confidence = 0.5 if hedged else (0.95 if key else 0.9)
            if all(fact != seen for seen, _ in out):
                out.append((fact, confidence))
    return out


def extract_answer(user_text: str) -> str:
    """The JSON array the stand-in answers to an extraction prompt."""
    return json.dumps([{"fact": f, "confidence": c} for f, c in third_person_facts(user_text)])


def _numbered(block: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\d+\. (.*)$", block, re.MULTILINE)]


def scrub_answer(facts_block: str) -> str:
    """``CLEAN`` or the array with ``null`` for sensitive facts."""
    facts = _numbered(facts_block)
    if not any(_SENSITIVE.search(f) for f in facts):
        return "CLEAN"
    return json.dumps([None if _SENSITIVE.search(f) else f for f in facts])


def decide_answer(facts_block: str, items_block: str) -> str:
    """The decisions by the rule in the module doc."""
    items = [(m.group(1), m.group(2)) for m in re.finditer(r"^\[([^\]]+)\] (.*)$", items_block, re.MULTILINE)]
    decisions: list[dict[str, object]] = []
    for number, fact in enumerate(_numbered(facts_block), 1):
        decisions.append(_decide(number, fact, items, normalise))
    return json.dumps(decisions)


def _decide(number: int, fact: str, items: Sequence[tuple[str, str]], normalise: object) -> dict[str, object]:
    key = fact_key(fact)
    for item_id, text in items:
        if normalise(text) == normalise(fact):  # type: ignore[operator]
            return {"fact": number, "action": "same", "item": item_id}
    if key is not None:
        for item_id, text in items:
            if fact_key(text) == key:
                return {"fact": number, "action": "update", "item": item_id}
    return {"fact": number, "action": "new"}


_FOLD_SECTIONS = (
    (re.compile(r"^User prefers\b", re.I), "Communication Preferences"),
    (re.compile(r"^User works\b", re.I), "Work Context"),
    (re.compile(r"^User is learning\b", re.I), "Skills & Expertise"),
    (re.compile(r"^User asked to be reminded\b", re.I), "Follow-ups"),
)


def fold_bullets(user_text: str) -> list[tuple[str, str]] | None:
    """``(section, bullet)`` per item of a summary-fold message, or None for another message."""
    if not user_text.startswith(FOLD_HEADER):
        return None
    out: list[tuple[str, str]] = []
    for line in user_text[len(FOLD_HEADER):].splitlines():
        fact = line.strip()[2:].strip() if line.strip().startswith("- ") else ""
        if not fact:
            continue
        section = next((name for pattern, name in _FOLD_SECTIONS if pattern.search(fact)), "Identity")
        bullet = re.sub(r"^User(?:'s)?\s+", "", fact)
        out.append((section, bullet[:1].upper() + bullet[1:]))
    return out
