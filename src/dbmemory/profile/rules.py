"""The profile's own rules, checked on every body a model writes (not only asked for in the prompt).

:func:`enforce_rules` judges the six sections of a rewrite (and of a scrub's or a condensation's
full answer) against the rules of the format (:mod:`dbmemory.profile.prompts`) and repairs what
can be repaired deterministically; what cannot is refused like any other invalid answer:

1. **Every Recent Topics bullet starts with its date** (``YYYY-MM-DD``, usually
   ``YYYY-MM-DD HH:MM UTC: ``). An undated bullet takes the date it had in the current profile
   (same text once dates are removed), else the turn's time (``topic_undated``). A line that is
   not a bullet becomes one (``topic_not_a_bullet``). A bullet that starts with a date that
   does not exist (``2026-02-30``) is refused (reason ``invalid_topic_date``): which date was
   meant cannot be known.
2. **Recent Topics only for what no fact records**: a Recent Topics bullet whose words (date
   removed, lower case, stop words and words under three letters dropped, a plural or ``-ing``
   / ``-ed`` ending and a final ``e`` folded) all occur in one bullet of Identity, Communication Preferences, Work
   Context or Skills & Expertise repeats that fact and is dropped (``topic_repeats_fact``).
3. **Follow-ups removed once done or stale**: a Follow-ups bullet marked done (a checked box
   ``[x]``, struck through ``~~...~~``, ``✓``/``✅``/``✔``, or one of the words done,
   completed, finished, resolved as a label in front (``Done: ...``, ``(done) ...``) or at the
   end (``... (done)``, ``... - completed``)) is dropped (``follow_up_done``),
   and so is one whose newest ``YYYY-MM-DD`` date lies more than
   :attr:`~dbmemory.profile.config.UserMemoryConfig.follow_up_stale_days` days before the turn
   (``follow_up_stale``). An undated follow-up cannot be judged stale and stays.

Indented lines continue the bullet above them (they go or stay with it); HTML comments (the
truncation marker) and other sections are never touched. A body that keeps every rule comes
back unchanged (``repairs`` empty). Pure text; nothing here touches the database or a model.
The section order is not judged from the answer: the consolidation writes the order
:func:`write_order` chooses (the configured reference format, or the stored profile's) whatever
order the model answered in.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from dbmemory.profile.format import OLDER_SECTIONS, SECTIONS

__all__ = ["RULES", "FACT_SECTIONS", "RuleCheck", "enforce_rules", "topic_words", "write_order"]

RULES: tuple[str, ...] = (
    "topic_undated",
    "topic_not_a_bullet",
    "topic_repeats_fact",
    "follow_up_done",
    "follow_up_stale",
)
"""The names of the repairs :func:`enforce_rules` counts."""

FACT_SECTIONS: tuple[str, ...] = (
    "Identity",
    "Communication Preferences",
    "Work Context",
    "Skills & Expertise",
)
"""The sections whose bullets are facts (a Recent Topics bullet must not repeat one)."""

_BULLET = re.compile(r"^([-*+])[ \t]+(.*)$")
_DATE_START = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\b")
_DATE_ANY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DATE_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?(?:[ ]?(?:UTC|Z))?[ \t]*[:\-\u2013\u2014]?[ \t]*")
_DONE_WORDS = r"(?:done|completed|finished|resolved)"
_DONE = re.compile(
    r"^\[[xX]\]|^~~.*~~\s*$|[\u2713\u2714\u2705]"
    rf"|^[(\[]?{_DONE_WORDS}\s*[:)\]\-\u2013\u2014]"
    rf"|[(\[]{_DONE_WORDS}\b[^)\]]*[)\]]\s*\.?$"
    rf"|\s[:\-\u2013\u2014]\s*{_DONE_WORDS}\s*\.?$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "the and for with that this from into about are was were has have had been being you your "
    "his her its our their they them she him who whom what which when where why how not but "
    "all any can could will would should may might must also very just than then there here "
    "some such only own same too out over under again once more most other user users".split()
)


@dataclass(frozen=True)
class RuleCheck:
    """What :func:`enforce_rules` made of a body.

    Attributes:
        sections: the six sections after the repairs (canonical titles to content), or None
            when the body was refused.
        reason: why it was refused (``"invalid_topic_date"``), or None.
        repairs: repairs made, by rule name (:data:`RULES`); empty when the body kept every rule.
    """

    sections: dict[str, str] | None
    reason: str | None = None
    repairs: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the body was accepted (repaired or as it was)."""
        return self.sections is not None


def _fold(word: str) -> str:
    for ending in ("ing", "ies", "es", "ed", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            word = word[: -len(ending)] + ("y" if ending == "ies" else "")
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word  # live/lives/living


def topic_words(text: str) -> frozenset[str]:
    """The words rule 2 compares: a leading date removed, lower case, stop words and words under
    three characters dropped, a plural or ``-ing``/``-ed`` ending folded
    and a final ``e`` dropped (``"2026-01-02 10:00 UTC: I work as a nurse"`` -> ``{"work",
    "nurs"}``, as ``"Works as nurses"``)."""
    text = _DATE_PREFIX.sub("", text.strip())
    words = (w for w in _WORD.findall(text.lower().replace("'", "")) if len(w) >= 3)
    return frozenset(_fold(w) for w in words if w not in _STOP)


def _items(content: str) -> list[list[str]]:
    """The content's items: a top-level line and the indented lines after it."""
    items: list[list[str]] = []
    for line in content.split("\n") if content else []:
        if items and line[:1] in (" ", "\t") and line.strip():
            items[-1].append(line)
        else:
            items.append([line])
    return items


def _is_inert(line: str) -> bool:
    """A blank line or an HTML comment (the truncation marker): never judged."""
    stripped = line.strip()
    return not stripped or stripped.startswith("<!--")


def _real_date(match: re.Match[str]) -> dt.date | None:
    try:
        return dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None


def _base_dates(base_topics: str) -> dict[str, str]:
    """Undated text of the current profile's topics -> their date prefix."""
    dates: dict[str, str] = {}
    for item in _items(base_topics):
        bullet = _BULLET.match(item[0].strip())
        text = bullet.group(2) if bullet else item[0].strip()
        prefix = _DATE_PREFIX.match(text)
        if prefix and prefix.group(0).strip() and _DATE_START.match(text):
            rest = text[prefix.end() :].strip()
            dates.setdefault(" ".join(rest.split()).lower(), text[: prefix.end()])
    return dates


def _count(repairs: dict[str, int], rule: str) -> None:
    repairs[rule] = repairs.get(rule, 0) + 1


def _topics(
    content: str, facts: list[frozenset[str]], base_dates: dict[str, str], stamp: str, repairs: dict[str, int]
) -> str | None:
    kept: list[str] = []
    for item in _items(content):
        head = item[0]
        if _is_inert(head):
            kept.extend(item)
            continue
        bullet = _BULLET.match(head.strip())
        marker, text = (bullet.group(1), bullet.group(2)) if bullet else ("-", head.strip())
        if bullet is None:
            _count(repairs, "topic_not_a_bullet")
        start = _DATE_START.match(text)
        if start is not None and _real_date(start) is None:
            return None
        if start is None:
            text = base_dates.get(" ".join(text.split()).lower(), f"{stamp}: ") + text
            _count(repairs, "topic_undated")
        words = topic_words(text)
        if words and any(words <= fact for fact in facts):
            _count(repairs, "topic_repeats_fact")
            continue
        kept.append(head if bullet is not None and text == bullet.group(2) else f"{marker} {text}")
        kept.extend(item[1:])
    return "\n".join(kept).strip("\n")


def _follow_ups(content: str, today: dt.date, stale_days: int, repairs: dict[str, int]) -> str:
    kept: list[str] = []
    for item in _items(content):
        head = item[0]
        if _is_inert(head):
            kept.extend(item)
            continue
        bullet = _BULLET.match(head.strip())
        text = bullet.group(2) if bullet else head.strip()
        if _DONE.search(text.strip()):
            _count(repairs, "follow_up_done")
            continue
        dates = [d for d in (_real_date(m) for m in _DATE_ANY.finditer(" ".join(item))) if d is not None]
        if dates and (today - max(dates)).days > stale_days:
            _count(repairs, "follow_up_stale")
            continue
        kept.extend(item)
    return "\n".join(kept).strip("\n")


def enforce_rules(
    sections: Mapping[str, str],
    *,
    now: dt.datetime,
    base_sections: Mapping[str, str] | None = None,
    follow_up_stale_days: int = 30,
) -> RuleCheck:
    """Check (and repair) a profile body against the rules in the module doc.

    Args:
        sections: the six canonical section titles mapped to content, as
            :func:`~dbmemory.profile.format.parse_body` returns them.
        now: the turn's time (UTC): an undated topic gets ``now`` as ``"YYYY-MM-DD HH:MM UTC"``;
            follow-ups are judged stale against its date.
        base_sections: the current profile's sections (an undated topic that was there takes
            its old date back); None for a new profile.
        follow_up_stale_days: days after its newest date a follow-up is stale (at least 1).

    Returns:
        A :class:`RuleCheck`: the repaired sections (the same content when every rule held),
        or None with the reason it was refused.
    """
    repairs: dict[str, int] = {}
    facts = [
        words
        for name in FACT_SECTIONS
        for item in _items(sections.get(name, ""))
        if (words := topic_words(_BULLET.sub(r"\2", item[0].strip())))
    ]
    base_dates = _base_dates((base_sections or {}).get("Recent Topics", ""))
    stamp = now.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    topics = _topics(sections.get("Recent Topics", ""), facts, base_dates, stamp, repairs)
    if topics is None:
        return RuleCheck(None, "invalid_topic_date")
    follow_ups = _follow_ups(
        sections.get("Follow-ups", ""), now.astimezone(dt.timezone.utc).date(), follow_up_stale_days, repairs
    )
    out = dict(sections)
    if repairs:
        out["Recent Topics"], out["Follow-ups"] = topics, follow_ups
    return RuleCheck(out, None, repairs)


def write_order(setting: str, stored: tuple[str, ...] | None) -> tuple[str, ...]:
    """The section order a rewrite is written in.

    Args:
        setting: :attr:`~dbmemory.profile.config.UserMemoryConfig.section_order`: ``"keep"``,
            ``"current"`` or ``"older"``.
        stored: the stored profile's order (:attr:`~dbmemory.profile.format.UserProfile.order`),
            or None when there is no profile yet.

    Returns:
        :data:`~dbmemory.profile.format.SECTIONS` or
        :data:`~dbmemory.profile.format.OLDER_SECTIONS`: ``"older"`` and ``"current"`` always
        their format, ``"keep"`` the stored order (the current format for a new profile).
    """
    if setting == "older":
        return OLDER_SECTIONS
    if setting == "current" or stored is None:
        return SECTIONS
    return OLDER_SECTIONS if stored == OLDER_SECTIONS else SECTIONS
