"""Keep a profile within its token budget.

The budget counts the tokens of the **whole file text** (frontmatter included) with the tokenizer
of the effective model (:func:`dbmemory.profile.tokens.count_tokens`). The body a model or the
system prompt sees is a part of it, so it is within budget too.

:func:`fit_profile` first asks a condenser (a model call, supplied by the caller) for a version of
about :data:`CONDENSE_TARGET_RATIO` of the budget; a condensed body that empties Identity or
Communication Preferences (which were not empty) is refused. If there is no condenser, it fails,
or its result is still over budget, :func:`hard_truncate` keeps content lines from the top in
canonical order (so Recent Topics go first, then Follow-ups, Skills, Work Context; Identity and
Communication Preferences last), cuts the first line that does not fit at a character boundary
(never inside a code point, a combining sequence, an emoji ZWJ sequence or a flag), keeps the
frontmatter and all six headings, and ends the text with :data:`TRUNCATION_MARKER`. The result,
marker included, is within budget.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from dbmemory.profile.format import SECTIONS, UserProfile, render_profile
from dbmemory.profile.format import parse_body as _parse
from dbmemory.profile.tokens import count_tokens

__all__ = [
    "TRUNCATION_MARKER",
    "CONDENSE_TARGET_RATIO",
    "Condenser",
    "FitResult",
    "profile_tokens",
    "condense_target",
    "hard_truncate",
    "fit_profile",
    "safe_cut",
]

TRUNCATION_MARKER = "<!-- truncated to fit memory budget -->"
"""The last line of a hard-truncated profile."""

CONDENSE_TARGET_RATIO = 0.9
"""Condensation aims at this share of the budget."""

Condenser = Callable[[str, int, int], "str | None"]
"""``(body, target_tokens, max_tokens) -> condensed body or None`` (None: failed)."""


@dataclass(frozen=True)
class FitResult:
    """The outcome of :func:`fit_profile`.

    Attributes:
        profile: the profile as fitted (sections may be condensed or truncated).
        text: the rendered file text.
        tokens: tokens of ``text``.
        condensed: a condensation result was used.
        truncated: hard truncation was applied (``text`` ends with :data:`TRUNCATION_MARKER`).
        within_budget: ``tokens <= max_tokens`` (False only when even the skeleton of
            frontmatter, headings and marker does not fit, which cannot happen for budgets of at
            least 500 tokens).
        condense_rejected: why a condensation result was refused, or None.
    """

    profile: UserProfile
    text: str
    tokens: int
    condensed: bool = False
    truncated: bool = False
    within_budget: bool = True
    condense_rejected: str | None = None


def profile_tokens(text: str, model: str | None) -> int:
    """Tokens of a whole profile text for ``model`` (offline, never raises)."""
    return count_tokens(text, model)


def condense_target(max_tokens: int) -> int:
    """The condensation target in tokens: ``int(max_tokens * 0.9)``."""
    return int(max_tokens * CONDENSE_TARGET_RATIO)


def _is_continuation(char: str) -> bool:
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
        or code == 0x200D  # zero-width joiner
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0x1F3FB <= code <= 0x1F3FF  # skin-tone modifiers
        or 0xE0020 <= code <= 0xE007F  # tag characters (subdivision flags)
    )


def _is_regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def safe_cut(text: str, index: int) -> int:
    """The largest cut position ``<= index`` that splits no user-perceived character.

    A Python ``str`` never splits a code point; this also keeps combining marks, variation
    selectors, skin-tone modifiers and zero-width-joiner sequences with their base, and regional
    indicator pairs (flags) together.

    Args:
        text: the text to cut.
        index: the wanted cut position, in characters.

    Returns:
        A position ``0 <= p <= index`` such that ``text[:p]`` ends on a whole character.
    """
    index = max(0, min(index, len(text)))
    while 0 < index < len(text) and (
        _is_continuation(text[index]) or text[index - 1] == "\u200d"
    ):
        index -= 1
    if 0 < index < len(text) and _is_regional(text[index]) and _is_regional(text[index - 1]):
        run = 0
        position = index - 1
        while position >= 0 and _is_regional(text[position]):
            run += 1
            position -= 1
        if run % 2 == 1:
            index -= 1
    return index


def _with_lines(profile: UserProfile, kept: list[tuple[str, str]], marker: bool) -> UserProfile:
    sections: dict[str, list[str]] = {name: [] for name in SECTIONS}
    for name, line in kept:
        sections[name].append(line)
    if marker:
        sections[profile.order[-1]].append(TRUNCATION_MARKER)  # the last section written
    return profile.with_sections({k: "\n".join(v) for k, v in sections.items()})


def hard_truncate(profile: UserProfile, *, max_tokens: int, model: str | None) -> FitResult:
    """Truncate ``profile`` line by line until the whole text, marker included, fits.

    Args:
        profile: the profile to shorten (its frontmatter is kept as is).
        max_tokens: the budget, in tokens of the whole file text.
        model: the model whose tokenizer counts.

    Returns:
        A :class:`FitResult` with ``truncated=True`` (or the profile unchanged when it already
        fits). The text keeps the frontmatter and the six headings and ends with
        :data:`TRUNCATION_MARKER` followed by a newline.
    """
    text = render_profile(profile)
    tokens = profile_tokens(text, model)
    if tokens <= max_tokens:
        return FitResult(profile=profile, text=text, tokens=tokens)

    lines: list[tuple[str, str]] = [
        (name, line)
        for name in SECTIONS
        for line in (profile.sections.get(name) or "").split("\n")
        if line.strip() and line.strip() != TRUNCATION_MARKER
    ]

    def measure(candidate: UserProfile) -> tuple[str, int]:
        rendered = render_profile(candidate)
        return rendered, profile_tokens(rendered, model)

    # Largest prefix of whole lines that fits (token counts grow with the prefix).
    low, high = 0, len(lines)
    best_text, best_tokens = measure(_with_lines(profile, [], True))
    if best_tokens > max_tokens:
        return FitResult(
            profile=_with_lines(profile, [], True),
            text=best_text,
            tokens=best_tokens,
            truncated=True,
            within_budget=False,
        )
    while low < high:
        middle = (low + high + 1) // 2
        candidate_text, candidate_tokens = measure(_with_lines(profile, lines[:middle], True))
        if candidate_tokens <= max_tokens:
            low = middle
            best_text, best_tokens = candidate_text, candidate_tokens
        else:
            high = middle - 1
    kept = lines[:low]
    fitted = _with_lines(profile, kept, True)
    best_text, best_tokens = measure(fitted)

    # Cut the next line at a character boundary, keeping as much as fits.
    if low < len(lines):
        name, line = lines[low]
        lo, hi = 0, len(line)
        best_cut = 0
        while lo < hi:
            middle = (lo + hi + 1) // 2
            cut = safe_cut(line, middle)
            candidate = _with_lines(profile, [*kept, (name, line[:cut].rstrip())], True)
            candidate_text, candidate_tokens = measure(candidate)
            if candidate_tokens <= max_tokens:
                lo = middle
                best_cut = cut
            else:
                hi = middle - 1
        partial = line[:best_cut].rstrip()
        if partial.strip() and partial.strip() not in ("-", "*"):
            fitted = _with_lines(profile, [*kept, (name, partial)], True)
            best_text, best_tokens = measure(fitted)
    return FitResult(profile=fitted, text=best_text, tokens=best_tokens, truncated=True)


def fit_profile(
    profile: UserProfile,
    *,
    max_tokens: int,
    model: str | None,
    condense: Condenser | None = None,
    parse_body: Callable[[str], UserProfile | None] | None = None,
) -> FitResult:
    """Bring ``profile`` within ``max_tokens``: condensation first, hard truncation last.

    Args:
        profile: the candidate profile (frontmatter already final).
        max_tokens: the budget, in tokens of the whole file text.
        model: the model whose tokenizer counts.
        condense: ``(body, target_tokens, max_tokens) -> body or None``; usually a model call
            (:mod:`dbmemory.profile.consolidate` supplies one). None skips condensation.
        parse_body: turns a condensed body into a profile with ``profile``'s frontmatter, or None
            when it is not a valid profile body; default: accept it when it has the six sections
            and no other ``##`` section.

    Returns:
        A :class:`FitResult`; its ``text`` is within budget (see :func:`hard_truncate`).
    """
    text = render_profile(profile)
    tokens = profile_tokens(text, model)
    if tokens <= max_tokens:
        return FitResult(profile=profile, text=text, tokens=tokens)

    rejected: str | None = None
    base = profile
    if condense is not None:
        body: str | None
        try:
            body = condense(profile.body, condense_target(max_tokens), max_tokens)
        except Exception as exc:  # noqa: BLE001 - a failed condensation falls back to truncation
            body = None
            rejected = f"error: {type(exc).__name__}"
        candidate = None
        if body is not None:
            candidate = (parse_body or _default_parse(profile))(body)
            if candidate is None:
                rejected = "not a valid profile body"
        elif rejected is None:
            rejected = "no answer"
        if candidate is not None:
            for keep in SECTIONS[:2]:
                if profile.sections.get(keep, "").strip() and not candidate.sections.get(
                    keep, ""
                ).strip():
                    rejected = f"dropped {keep}"
                    candidate = None
                    break
        if candidate is not None:
            condensed_text = render_profile(candidate)
            condensed_tokens = profile_tokens(condensed_text, model)
            if condensed_tokens <= max_tokens:
                return FitResult(
                    profile=candidate, text=condensed_text, tokens=condensed_tokens, condensed=True
                )
            rejected = "still over budget"
            base = candidate
    result = hard_truncate(base, max_tokens=max_tokens, model=model)
    return FitResult(
        profile=result.profile,
        text=result.text,
        tokens=result.tokens,
        condensed=base is not profile,
        truncated=True,
        within_budget=result.within_budget,
        condense_rejected=rejected,
    )


def _default_parse(profile: UserProfile) -> Callable[[str], UserProfile | None]:
    def parse(body: str) -> UserProfile | None:
        parsed = _parse(body)
        return profile.with_sections(parsed.sections) if parsed.exact else None

    return parse
