"""Reading model answers of the profile pipeline.

Pure text functions; nothing is trusted until it passes here:

* :func:`is_word_answer` recognises one-word answers in their usual disguises: ``NOOP.``,
  `` noop\\n``, ```NOOP```, ``**NOOP**``, ``"NOOP"``, ``NOOP - nothing new`` (but never an answer
  that also contains a profile section heading).
* :func:`extract_body` takes a profile body out of an answer: inside a code fence (```` ```markdown
  ```` or ``~~~``, the first fence that holds a section heading), after lines of prose (it starts
  at ``# User Memory`` or the first section heading), after an echoed frontmatter block. It is
  accepted only when all six sections are present and no other ``##`` section is (a seventh
  section is refused, never kept as content), no line of the answer is a stray ``NOOP``
  (before the profile, inside it or after it) and no code-fence line is left inside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dbmemory.profile.format import (
    ParsedBody,
    canonical_section,
    parse_body,
    split_frontmatter,
)

__all__ = ["Extracted", "is_word_answer", "extract_body", "first_word"]

_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_TITLE = re.compile(r"^#[ \t]+user[ \t]+memory\b", re.IGNORECASE)
_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_STRIP_EDGES = re.compile(r"^[\s`*_\"'>#+\-]+|[\s`*_\"'.!:;,]+$")


@dataclass(frozen=True)
class Extracted:
    """A profile body taken out of a model answer, or why not.

    Attributes:
        parsed: the parsed body when accepted, else None.
        reason: None when accepted; otherwise ``"empty"``, ``"not_a_profile"`` or
            ``"missing_sections"``.
    """

    parsed: ParsedBody | None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """Whether a complete body was found."""
        return self.parsed is not None


def _has_section_heading(text: str) -> bool:
    return any(canonical_section(m.group(1)) for m in _HEADING.finditer(text))


def first_word(answer: str) -> str:
    """The first word of ``answer`` in lower case, decorations removed (``"**NOOP.**"`` -> ``"noop"``)."""
    text = answer.strip()
    first_line = text.split("\n", 1)[0] if text else ""
    cleaned = _STRIP_EDGES.sub("", first_line).lower()
    match = re.match(r"[a-z]+", cleaned)
    return match.group(0) if match else ""


def is_word_answer(answer: str | None, word: str) -> bool:
    """Whether ``answer`` is the one-word answer ``word`` (``"NOOP"``, ``"CLEAN"``, ``"UPDATE"``).

    Args:
        answer: the model's text.
        word: the expected word, any case.

    Returns:
        True when the first word of the first line is ``word`` (decorations such as quotes,
        backticks, asterisks and a final period ignored) and the answer holds no profile section
        heading.
    """
    if not answer or not answer.strip():
        return False
    return first_word(answer) == word.lower() and not _has_section_heading(answer)


def _fenced_blocks(text: str) -> list[str]:
    """Contents of code fences in order; an unterminated last fence runs to the end."""
    blocks: list[str] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        opening = _FENCE_LINE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence = opening.group(1)
        content: list[str] = []
        index += 1
        while index < len(lines):
            closing = _FENCE_LINE.match(lines[index])
            if (
                closing is not None
                and closing.group(1)[0] == fence[0]
                and len(closing.group(1)) >= len(fence)
                and not lines[index].strip()[len(closing.group(1)) :].strip()
            ):
                break
            content.append(lines[index])
            index += 1
        blocks.append("\n".join(content))
        index += 1
    return blocks


_DELIMITER_LINE = re.compile(
    r"^\s*</?\s*(?:current_profile|profile|user_memory|memory)\s*>\s*$", re.IGNORECASE
)
_LIST_LINE = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|_\(empty\)_|<!--)")


def _drop_trailing_prose(lines: list[str]) -> list[str]:
    """Drop a closing paragraph of prose after the last section's list ("Let me know ...")."""
    last_heading = max((i for i, line in enumerate(lines) if _HEADING.match(line)), default=None)
    if last_heading is None:
        return lines
    tail = lines[last_heading + 1 :]
    for index, line in enumerate(tail):
        if line.strip():
            continue
        rest = [r for r in tail[index + 1 :] if r.strip()]
        before = [r for r in tail[:index] if r.strip()]
        if rest and before and not any(_LIST_LINE.match(r) for r in rest):
            return lines[: last_heading + 1] + tail[:index]
    return lines


_FRONTMATTER_KEY = re.compile(r"^(?:user_id|schema_version|last_updated|turn_count)\s*:")


def _repeats_a_profile(lines: list[str]) -> bool:
    """Whether the body holds more than one profile: a section heading twice, a second
    ``# User Memory`` title, or a frontmatter block (``---`` then ``user_id:``...) inside it."""
    seen: set[str] = set()
    titles = 0
    for index, line in enumerate(lines):
        if _TITLE.match(line):
            titles += 1
            if titles > 1:
                return True
        heading = _HEADING.match(line)
        name = canonical_section(heading.group(1)) if heading is not None else None
        if name is not None:
            if name in seen:
                return True
            seen.add(name)
        if line.strip() == "---" and index + 1 < len(lines):
            if _FRONTMATTER_KEY.match(lines[index + 1].strip()):
                return True
    return False


def extract_body(answer: str | None) -> Extracted:
    """Take a complete profile body out of a model answer.

    Args:
        answer: the model's text.

    Returns:
        :class:`Extracted`: the parsed body, or the reason it was refused (``"empty"``,
        ``"not_a_profile"`` when no section heading, a stray ``NOOP`` line anywhere in the answer
        (before or after the profile too) or a leftover fence, ``"extra_sections"`` when a
        ``##`` heading other than the six is present,
        ``"duplicate_sections"`` when the answer holds more than one profile (a section or the
        title twice, or a frontmatter block inside the body), ``"missing_sections"`` when fewer
        than six sections).
    """
    if answer is None or not answer.strip():
        return Extracted(None, "empty")
    text = answer.replace("\r\n", "\n").replace("\r", "\n")
    if any(_is_noop_line(line) for line in text.split("\n")):
        return Extracted(None, "not_a_profile")  # a NOOP before, inside or after a profile
    candidate = text
    for block in _fenced_blocks(text):
        if _has_section_heading(block) or _TITLE.match(block.strip()):
            candidate = block
            break
    _, candidate = split_frontmatter(candidate.strip("\n"))
    lines = candidate.split("\n")
    start = None
    for index, line in enumerate(lines):
        heading = _HEADING.match(line)
        if _TITLE.match(line) or (heading is not None and canonical_section(heading.group(1))):
            start = index
            break
    if start is None:
        return Extracted(None, "not_a_profile")
    body_lines = [line for line in lines[start:] if not _DELIMITER_LINE.match(line)]
    for line in body_lines:
        if _FENCE_LINE.match(line):
            return Extracted(None, "not_a_profile")
    if _repeats_a_profile(body_lines):
        return Extracted(None, "duplicate_sections")
    body_lines = _drop_trailing_prose(body_lines)
    parsed = parse_body("\n".join(body_lines))
    if parsed.unknown_headings:
        return Extracted(None, "extra_sections")
    if not parsed.complete:
        return Extracted(None, "missing_sections")
    return Extracted(parsed)


def _is_noop_line(line: str) -> bool:
    """A line that is the word NOOP in a disguise (``NOOP``, ``**noop.**``, ``- NOOP``)."""
    return len(line.strip()) <= 12 and first_word(line) == "noop"  # the cheap test first
