"""The profile file format: YAML frontmatter and six fixed Markdown sections.

Canonical form (what :func:`render_profile` writes)::

    ---
    user_id: "u-123"
    schema_version: 1
    last_updated: "2026-06-17T12:00:00+00:00"
    turn_count: 12
    ---

    # User Memory

    ## Identity
    - ...

    ## Communication Preferences
    _(empty)_
    ...

Reading is lenient: the heading ``Open Questions / Follow-ups`` (and a few spellings) means
Follow-ups, the ``# User Memory`` title may be missing. The two reference formats differ in one
place: the current one (:data:`SECTIONS`) puts Follow-ups before Recent Topics, the older one
(:data:`OLDER_SECTIONS`) after; a profile keeps the order it was read in
(:attr:`UserProfile.order`). Writing emits the canonical form of that order.

Frontmatter rules:

* It starts at a first line that is exactly ``---`` and ends at the next line that is exactly
  ``---``; a ``---`` inside the body is body.
* It is read with ``yaml.safe_load`` rules (on libyaml's parser, ``CSafeLoader``, where PyYAML
  was built with it, else the pure one) except that **no plain scalar is converted**: ``00123``,
  ``no`` and ``2026-11-30T10:00:00Z`` stay the exact strings written (only ``schema_version`` and
  ``turn_count`` become integers when they are digits). So ``last_updated`` keeps its text exactly
  on a read/write round trip.
* It is written by this module, never by a YAML dumper: string values are always double-quoted,
  so ``user_id: "00123"`` or ``"no"`` stay strings for any YAML reader.

Nothing here touches the database or a model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

__all__ = [
    "SECTIONS",
    "OLDER_SECTIONS",
    "section_order",
    "TITLE",
    "EMPTY_MARK",
    "SCHEMA_VERSION",
    "ProfileFormatError",
    "UserProfile",
    "ParsedBody",
    "split_frontmatter",
    "parse_frontmatter",
    "render_frontmatter",
    "parse_body",
    "render_body",
    "parse_profile",
    "render_profile",
    "profile_body",
    "new_profile",
    "empty_sections",
    "canonical_section",
    "yaml_quote",
    "read_frontmatter_strict",
    "profile_text_problem",
]

SECTIONS: tuple[str, ...] = (
    "Identity",
    "Communication Preferences",
    "Work Context",
    "Skills & Expertise",
    "Follow-ups",
    "Recent Topics",
)
"""The six section titles, in canonical order (the current reference format)."""

OLDER_SECTIONS: tuple[str, ...] = (*SECTIONS[:4], "Recent Topics", "Follow-ups")
"""The same six titles in the older reference format's order (Recent Topics before Follow-ups)."""


def section_order(found: tuple[str, ...]) -> tuple[str, ...]:
    """The reference order a body's headings follow: :data:`OLDER_SECTIONS` when Recent Topics
    comes before Follow-ups in ``found`` (titles in the order met), else :data:`SECTIONS`."""
    if "Recent Topics" in found and "Follow-ups" in found:
        if found.index("Recent Topics") < found.index("Follow-ups"):
            return OLDER_SECTIONS
    return SECTIONS

TITLE = "# User Memory"
"""The body's first line in canonical form."""

EMPTY_MARK = "_(empty)_"
"""The line an empty section holds."""

SCHEMA_VERSION = 1
"""``schema_version`` written into a new profile."""

_FRONTMATTER_ORDER = ("user_id", "schema_version", "last_updated", "turn_count")


class ProfileFormatError(ValueError):
    """A text is not a profile this module can read (used by strict callers only)."""


def _norm_heading(title: str) -> str:
    title = title.strip().strip("#").strip().lower().replace("&", " and ")
    return re.sub(r"[^a-z0-9]+", "", title)


_ALIASES: dict[str, str] = {
    "identity": "Identity",
    "communicationpreferences": "Communication Preferences",
    "communicationstyle": "Communication Preferences",
    "workcontext": "Work Context",
    "skillsandexpertise": "Skills & Expertise",
    "skillsexpertise": "Skills & Expertise",
    "followups": "Follow-ups",
    "openquestionsfollowups": "Follow-ups",
    "openquestionsandfollowups": "Follow-ups",
    "openquestions": "Follow-ups",
    "recenttopics": "Recent Topics",
}


def canonical_section(heading: str) -> str | None:
    """The canonical section title for a ``##`` heading text, or None when it is not one of the six.

    Args:
        heading: the heading text without ``## ``, e.g. ``"Open Questions / Follow-ups"``.

    Returns:
        One of :data:`SECTIONS`, or None.
    """
    return _ALIASES.get(_norm_heading(heading))


def empty_sections() -> dict[str, str]:
    """A mapping of the six section titles to ``""`` (empty content), in canonical order."""
    return {name: "" for name in SECTIONS}


@dataclass
class UserProfile:
    """One parsed profile.

    Attributes:
        user_id: the frontmatter ``user_id`` text, exactly as stored.
        schema_version: the frontmatter ``schema_version`` (an int when it was digits).
        last_updated: the frontmatter ``last_updated`` text, exactly as stored, or None.
        turn_count: rewrites so far (0 for a new profile).
        sections: the six section titles (canonical order) mapped to their content lines joined
            by ``"\\n"``; ``""`` for an empty section (never the ``_(empty)_`` mark).
        extra: other frontmatter keys, preserved and written after the four known ones.
        has_frontmatter: whether the text had a frontmatter block.
        order: the section order written (:data:`SECTIONS` or :data:`OLDER_SECTIONS`).
    """

    user_id: str
    schema_version: int | str = SCHEMA_VERSION
    last_updated: str | None = None
    turn_count: int = 0
    sections: dict[str, str] = field(default_factory=empty_sections)
    extra: dict[str, Any] = field(default_factory=dict)
    has_frontmatter: bool = True
    order: tuple[str, ...] = SECTIONS

    @property
    def body(self) -> str:
        """The canonical Markdown body (no frontmatter) in :attr:`order`, as a model sees it."""
        return render_body(self.sections, self.order)

    def with_sections(self, sections: Mapping[str, str]) -> UserProfile:
        """A copy with the sections replaced (missing titles become empty)."""
        merged = empty_sections()
        merged.update({k: v for k, v in sections.items() if k in merged})
        return replace(self, sections=merged)


@dataclass(frozen=True)
class ParsedBody:
    """A Markdown body split into sections.

    Attributes:
        sections: the six canonical titles mapped to content (``""`` when empty or absent).
        found: canonical titles that had a heading, in the order met (duplicates merged).
        preamble: text before the first section heading other than the ``# User Memory`` title
            (dropped by the canonical renderer).
        unknown_headings: ``##`` headings that are not one of the six (kept as content lines of
            the section they appear in).
    """

    sections: dict[str, str]
    found: tuple[str, ...]
    preamble: str
    unknown_headings: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether all six sections had a heading."""
        return set(self.found) == set(SECTIONS)

    @property
    def exact(self) -> bool:
        """Whether the body has the six sections and no other ``##`` section (a seventh section
        would be kept as content of the one before it: writers refuse it instead)."""
        return self.complete and not self.unknown_headings

    @property
    def missing(self) -> tuple[str, ...]:
        """Canonical titles that had no heading."""
        return tuple(name for name in SECTIONS if name not in self.found)


# --------------------------------------------------------------------------- frontmatter


class TextLoader(yaml.SafeLoader):
    """``SafeLoader`` without implicit resolvers: every plain scalar stays the exact string."""


TextLoader.yaml_implicit_resolvers = {}

if getattr(yaml, "__with_libyaml__", False):

    class _FastTextLoader(yaml.CSafeLoader):
        """The same rules on libyaml's parser (``CSafeLoader``): ~10x faster."""

    _FastTextLoader.yaml_implicit_resolvers = {}
    _LOADERS: tuple[type, ...] = (_FastTextLoader, TextLoader)
else:  # PyYAML without libyaml: the pure loader only
    _LOADERS = (TextLoader,)


def load_yaml(text: str) -> Any:
    """``text`` loaded with :class:`TextLoader`'s rules: on libyaml's parser where PyYAML has
    it; a text libyaml refuses is read again by the pure loader, whose result or error counts.

    Raises:
        yaml.YAMLError: the pure loader refused it too.
    """
    for loader in _LOADERS[:-1]:
        try:
            return yaml.load(text, Loader=loader)  # noqa: S506 - SafeLoader rules
        except yaml.YAMLError:
            pass
    return yaml.load(text, Loader=_LOADERS[-1])  # noqa: S506 - SafeLoader subclass


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """Split a profile text into frontmatter and body.

    Line endings ``\\r\\n`` and ``\\r`` are normalised to ``\\n`` first. The frontmatter starts at a
    first line exactly ``---`` (a leading byte-order mark is ignored) and ends at the next line
    exactly ``---``; everything after that line is body, including later ``---`` lines.

    Args:
        text: the whole file text.

    Returns:
        ``(frontmatter_text, body)``; ``frontmatter_text`` is None when the text has no complete
        frontmatter block (then ``body`` is the whole text).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return None, text
    for index in range(1, len(lines)):
        if lines[index] == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    return None, text


def parse_frontmatter(frontmatter: str) -> dict[str, Any]:
    """Parse a frontmatter block with no scalar conversion (see the module doc).

    Args:
        frontmatter: the lines between the two ``---`` lines.

    Returns:
        A dict of keys to values (plain and quoted scalars are ``str``; lists and mappings keep
        their shape); ``{}`` when the block is empty or not a YAML mapping.
    """
    try:
        data = load_yaml(frontmatter)
    except yaml.YAMLError:
        return {}
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}


def read_frontmatter_strict(text: str) -> dict[str, Any] | None:
    """The frontmatter of a whole profile text, read strictly (for imports).

    Args:
        text: the whole file text.

    Returns:
        The frontmatter mapping (scalars kept as exact strings, see :func:`parse_frontmatter`),
        or None when the text has no frontmatter (its first line is not ``---``).

    Raises:
        ProfileFormatError: the frontmatter is broken: not closed by a ``---`` line, not valid
            YAML, not a mapping, or a ``user_id`` that is empty or not text. The message says which.
    """
    normalised = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    if normalised.split("\n", 1)[0].rstrip() != "---":
        return None
    raw, _ = split_frontmatter(normalised)
    if raw is None:
        raise ProfileFormatError("the frontmatter is not closed by a line '---'")
    try:
        data = load_yaml(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise ProfileFormatError(f"the frontmatter is not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProfileFormatError("the frontmatter is not a mapping of keys to values")
    result = {str(k): v for k, v in data.items()}
    if "user_id" in result:
        user_id = result["user_id"]
        if not isinstance(user_id, str):
            raise ProfileFormatError("the frontmatter's user_id is not a text value")
        if not user_id.strip():
            raise ProfileFormatError("the frontmatter's user_id is empty")
    return result


def profile_text_problem(text: str) -> str | None:
    """Why ``text`` cannot replace a stored profile, or None when it can.

    The rule ``profile edit`` and ``profile import`` share: the body must hold at least one of
    the six section headings (a text without them would become an empty profile), and no
    content may stand before the first section (it would be dropped).

    Args:
        text: a whole profile file or a body.

    Returns:
        A sentence naming the problem (no remedy), or None.
    """
    parsed = parse_body(split_frontmatter(text)[1])
    if not parsed.found:
        return "the text has none of the profile sections (" + ", ".join(
            f"## {name}" for name in SECTIONS
        ) + ")"
    if parsed.preamble.strip():
        return "the text has content before the first section, which the profile cannot keep"
    return None


_YAML_ESCAPES = {
    "\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0",
    "\x85": "\\N", "\u2028": "\\L", "\u2029": "\\P",
}
_YAML_NEEDS_ESCAPE = re.compile(
    "[\\\\\"\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
)


def yaml_quote(value: str) -> str:
    """Render a string as a YAML double-quoted scalar that any YAML reader loads back exactly.

    Backslash, double quote, control characters, NEL, the Unicode line/paragraph separators,
    lone surrogates and non-characters are escaped; everything else is written as is.

    Args:
        value: any Python string.

    Returns:
        The quoted scalar, e.g. ``'"00123"'``.
    """

    def escape(match: re.Match[str]) -> str:
        char = match.group(0)
        if char in _YAML_ESCAPES:
            return _YAML_ESCAPES[char]
        code = ord(char)
        return f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}"

    return '"' + _YAML_NEEDS_ESCAPE.sub(escape, value) + '"'


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_yaml_key(k)}: {_yaml_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return yaml_quote(str(value))


def _yaml_key(key: object) -> str:
    text = str(key)
    return text if _PLAIN_KEY.fullmatch(text) else yaml_quote(text)


def render_frontmatter(profile: UserProfile) -> str:
    """The frontmatter block of ``profile``, both ``---`` lines included, ending with ``"\\n"``.

    Keys in order ``user_id``, ``schema_version``, ``last_updated`` (omitted when None),
    ``turn_count``, then :attr:`UserProfile.extra` in its order. Strings are double-quoted.
    """
    lines = ["---", f"user_id: {yaml_quote(profile.user_id)}"]
    schema = profile.schema_version
    if isinstance(schema, str) and re.fullmatch(r"\d+(?:\.\d+)*", schema):
        lines.append(f"schema_version: {schema}")  # a number-like text is kept as written
    else:
        lines.append(f"schema_version: {_yaml_value(schema)}")
    if profile.last_updated is not None:
        lines.append(f"last_updated: {yaml_quote(profile.last_updated)}")
    lines.append(f"turn_count: {int(profile.turn_count)}")
    for key, value in profile.extra.items():
        if key in _FRONTMATTER_ORDER:
            continue
        lines.append(f"{_yaml_key(key)}: {_yaml_value(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- body

_HEADING2 = re.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$")
_TITLE_LINE = re.compile(r"^#[ \t]+user[ \t]+memory[ \t]*#*[ \t]*$", re.IGNORECASE)


def _clean_content(lines: list[str]) -> str:
    kept = [line.rstrip() if not line.strip() else line for line in lines]
    if any(line.strip() != EMPTY_MARK and line.strip() for line in kept):
        kept = [line for line in kept if line.strip() != EMPTY_MARK]
    else:
        kept = []
    while kept and not kept[0].strip():
        kept.pop(0)
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept)


def parse_body(body: str) -> ParsedBody:
    """Split a Markdown body into the six sections.

    A ``##`` heading whose text is one of the six titles or an accepted alias starts that
    section; a repeated section is appended to the first. Any other ``##`` heading stays a content
    line of the current section. The ``# User Memory`` title is optional; other text before the
    first section is the preamble. Content lines are kept exactly (after ``\\n`` normalisation),
    without leading/trailing blank lines and without the ``_(empty)_`` mark.

    Args:
        body: Markdown without frontmatter.

    Returns:
        A :class:`ParsedBody`.
    """
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    collected: dict[str, list[str]] = {name: [] for name in SECTIONS}
    found: list[str] = []
    preamble: list[str] = []
    unknown: list[str] = []
    current: str | None = None
    for line in body.split("\n"):
        match = _HEADING2.match(line)
        name = canonical_section(match.group(1)) if match else None
        if name is not None:
            if name in found:
                collected[name].append("")
            else:
                found.append(name)
            current = name
            continue
        if match:
            unknown.append(match.group(1))
        if current is None:
            if not _TITLE_LINE.match(line):
                preamble.append(line)
            continue
        collected[current].append(line)
    sections = {name: _clean_content(lines) for name, lines in collected.items()}
    return ParsedBody(
        sections=sections,
        found=tuple(found),
        preamble="\n".join(preamble).strip("\n"),
        unknown_headings=tuple(unknown),
    )


def render_body(sections: Mapping[str, str], order: tuple[str, ...] = SECTIONS) -> str:
    """The canonical body: title, then the six sections in order, empty ones as ``_(empty)_``.

    Args:
        sections: canonical titles mapped to content (missing titles are empty).
        order: :data:`SECTIONS` (default) or :data:`OLDER_SECTIONS`.

    Returns:
        Markdown ending with one ``"\\n"``.
    """
    parts = [TITLE, ""]
    for name in order if sorted(order) == sorted(SECTIONS) else SECTIONS:
        content = (sections.get(name) or "").strip("\n")
        parts.append(f"## {name}")
        parts.append(content if content.strip() else EMPTY_MARK)
        parts.append("")
    return "\n".join(parts)


# --------------------------------------------------------------------------- whole profile


def _as_int(value: Any, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return default


def _scalar_text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def parse_profile(text: str, *, default_user_id: str = "") -> UserProfile:
    """Parse a whole profile file (frontmatter optional, body lenient).

    Args:
        text: the file text.
        default_user_id: ``user_id`` to use when the frontmatter has none.

    Returns:
        A :class:`UserProfile`; never raises for odd input (an unreadable frontmatter is treated
        as empty, a body without sections gives six empty sections).
    """
    raw_frontmatter, body = split_frontmatter(text)
    data = parse_frontmatter(raw_frontmatter) if raw_frontmatter is not None else {}
    user_id = _scalar_text(data.get("user_id"))
    schema = data.get("schema_version", SCHEMA_VERSION)
    schema_version: int | str = (
        _as_int(schema, SCHEMA_VERSION)
        if isinstance(schema, (int, str)) and str(schema).strip().isdigit()
        else (_scalar_text(schema) or SCHEMA_VERSION)
    )
    extra = {k: v for k, v in data.items() if k not in _FRONTMATTER_ORDER}
    parsed = parse_body(body)
    return UserProfile(
        user_id=user_id if user_id else default_user_id,
        schema_version=schema_version,
        last_updated=_scalar_text(data.get("last_updated")),
        turn_count=_as_int(data.get("turn_count"), 0),
        sections=parsed.sections,
        extra=extra,
        has_frontmatter=raw_frontmatter is not None,
        order=section_order(parsed.found),
    )


def render_profile(profile: UserProfile) -> str:
    """The canonical file text: frontmatter, a blank line, the canonical body (in its order)."""
    return render_frontmatter(profile) + "\n" + render_body(profile.sections, profile.order)


def profile_body(text: str) -> str:
    """The Markdown body of a profile text without frontmatter, in canonical form (what a model sees).

    Args:
        text: a whole profile file, or a body alone.

    Returns:
        The canonical body (title and six sections), ending with ``"\\n"``.
    """
    _, body = split_frontmatter(text)
    parsed = parse_body(body)
    return render_body(parsed.sections, section_order(parsed.found))


def new_profile(user_id: str) -> UserProfile:
    """An empty profile for ``user_id`` (turn 0, no ``last_updated``)."""
    return UserProfile(user_id=user_id)
