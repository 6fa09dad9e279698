"""What the scripted stand-in model reads in a user's text: first-person statements, small talk,
and the obvious identity and preference facts (a fixed, documented policy, no model)."""

from __future__ import annotations

import re

__all__ = [
    "first_person_statements",
    "is_small_talk",
    "clip",
    "profile_facts",
]

_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself)\b", re.IGNORECASE)


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


_TRAILING = re.compile(r"[\s,.;:!]+$")


# (compiled pattern, section, key or None, template); key = newest value replaces the old one
_FACT_RULES: tuple[tuple[re.Pattern[str], str, str | None, str], ...] = (
    (re.compile(r"\b(?i:my name is) ([A-Z][\w'-]*(?: [A-Z][\w'-]*){0,3})"), "Identity", "Name", "Name: {0}"),
    (re.compile(r"\bi(?:'m| am) (\d{1,3}) years old\b", re.I), "Identity", "Age", "Age: {0}"),
    (re.compile(r"\bmy pronouns are ([\w/]+)", re.I), "Identity", "Pronouns", "Pronouns: {0}"),
    (
        re.compile(
            r"\b(?i:i (?:live|am living|'m living|am based|'m based|(?:have |'ve )?(?:just )?moved|relocated)"
            r" (?:in|to)) ([A-Z][\w'-]*(?:[ ,]+[A-Z][\w'-]*){0,3})"
        ),
        "Identity",
        "Lives in",
        "Lives in: {0}",
    ),
    (
        re.compile(
            r"\bi (?:really )?(?:enjoy|love) (?!(?:that|it|this|these|those|you|your|how|what|when|the way|"
            r"them|him|her|us|to hear|hearing|to see|seeing)\b)([\w' -]{3,60})",
            re.I,
        ),
        "Identity",
        None,
        "Enjoys {0}",
    ),
    (
        re.compile(r"\bi work (as (?:a |an )?[\w' -]{3,80}?|at [\w' -]{3,80}?|for [\w' -]{3,80}?)(?:[.,;!]|$)", re.I),
        "Work Context",
        "Works",
        "Works {0}",
    ),
    (re.compile(r"\bi(?:'m| am) (?:currently )?learning ([\w' .+#-]{2,60})", re.I), "Skills & Expertise", None, "Learning {0}"),
    (re.compile(r"\bremind me to ([^.!?\n]{3,120})", re.I), "Follow-ups", None, "Asked to be reminded to {0}"),
)


_PREFERENCE = re.compile(r"\bi(?:'d| would)? (?:prefer|like|want) ([^.!?\n]{3,120})", re.I)


_PREFERENCE_WORDS = re.compile(
    r"\b(answers?|repl(?:y|ies)|responses?|explanations?|examples?|code|tone|english|language|format|"
    r"short|brief|concise|detailed|slides|bullet)\b",
    re.IGNORECASE,
)


def first_person_statements(text: str) -> list[str]:
    """The sentences of ``text`` that state something about the speaker.

    A sentence counts when it has a first-person word (I, I'm, my, me, ...), at least three words,
    and is not a question.

    Returns:
        list of sentences, stripped, in order.
    """
    text = text.replace("\u2019", "'")
    out = []
    for sentence in _SENTENCE_SPLIT.split(text):
        s = sentence.strip()
        if not s or s.endswith("?") or len(s.split()) < 3:
            continue
        if _FIRST_PERSON.search(s):
            out.append(s)
    return out


def is_small_talk(text: str) -> bool:
    """Whether the scripted policy treats ``text`` as small talk (no first-person statement)."""
    return not first_person_statements(text)


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def profile_facts(text: str) -> list[tuple[str, str | None, str]]:
    """Obvious profile facts in a user's message, by the fixed rules of this module.

    Returns:
        list of ``(section, key, bullet text)``; ``key`` is set for single-valued facts (Name,
        Age, Pronouns, Lives in, Works) whose newest value replaces the old one.
    """
    text = text.replace("\u2019", "'")
    facts: list[tuple[str, str | None, str]] = []
    for sentence in first_person_statements(text):
        for pattern, section, key, template in _FACT_RULES:
            match = pattern.search(sentence)
            if match:
                value = _TRAILING.sub("", match.group(1).strip())
                facts.append((section, key, template.format(clip(value, 100))))
        pref = _PREFERENCE.search(sentence)
        if pref and _PREFERENCE_WORDS.search(pref.group(1)):
            facts.append(("Communication Preferences", None, "Prefers " + clip(_TRAILING.sub("", pref.group(1)), 120)))
    return facts


