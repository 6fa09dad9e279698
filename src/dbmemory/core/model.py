"""Plain value types shared by the data-access layer and everything above it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from dbmemory.core.checks import check_cap, show
from dbmemory.core.keys import parse_store_key, validate_component
from dbmemory.errors import InvalidArgumentError, InvalidScopeError

__all__ = [
    "DEFAULT_MAX_FILE_CHARS",
    "DEFAULT_MAX_FILES",
    "Caps",
    "StoreRef",
    "FileInfo",
    "FileRecord",
    "AgentConfig",
]

DEFAULT_MAX_FILE_CHARS = 100_000
"""Default cap on one file, in characters (Python ``str`` characters, never bytes or tokens)."""

DEFAULT_MAX_FILES = 1_000
"""Default cap on the number of files in one store."""


_INT32_MAX = 2**31 - 1  # dbmemory.core.checks.INT32_MAX (max_file_chars, max_files: INTEGER)
_INT64_MAX = 2**63 - 1  # dbmemory.core.checks.INT64_MAX (max_store_chars: BIGINT)

_EXAMPLES = {"max_file_chars": DEFAULT_MAX_FILE_CHARS, "max_files": DEFAULT_MAX_FILES, "max_store_chars": 1_000_000}


def _positive(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(
            f"{name} must be a positive whole number, got {show(value)}"
            + (" (or None for no cap)" if optional else "")
            + f": pass e.g. {name}={_EXAMPLES[name]:_}"
        )
    check_cap(value, name, optional=optional)  # within its column: 32-bit INTEGER, or BIGINT for max_store_chars


@dataclass(frozen=True)
class Caps:
    """The caps a store's writes must respect (docs/transactions.md, caps).

    Attributes:
        max_file_chars: longest file, in characters (default 100,000).
        max_files: most files in one store (default 1,000).
        max_store_chars: most characters in all files of one store together; ``None`` = no cap.

    Raises:
        InvalidArgumentError: a cap that is not a positive integer, or beyond its column's
            range (``max_file_chars`` and ``max_files`` at most 2,147,483,647, a 32-bit
            ``INTEGER``; ``max_store_chars`` at most 2**63-1, a ``BIGINT``).
    """

    max_file_chars: int = DEFAULT_MAX_FILE_CHARS
    max_files: int = DEFAULT_MAX_FILES
    max_store_chars: int | None = None

    def __post_init__(self) -> None:
        f, n, s = self.max_file_chars, self.max_files, self.max_store_chars
        if (
            type(f) is int
            and type(n) is int
            and 0 < f <= _INT32_MAX
            and 0 < n <= _INT32_MAX
            and (s is None or (type(s) is int and 0 < s <= _INT64_MAX))
        ):
            return  # fast path: plain ints within their columns (what _positive would accept)
        _positive("max_file_chars", self.max_file_chars)
        _positive("max_files", self.max_files)
        _positive("max_store_chars", self.max_store_chars, optional=True)


@dataclass(frozen=True)
class StoreRef:
    """Which store a run or tool call works on.

    Attributes:
        store_key: the unique key (:mod:`dbmemory.core.keys`), e.g. ``"user:SUPPORT:u-7"``.
        scope: ``agent``, ``user``, ``session``, ``shared``, ``global`` or ``context``; or
            ``reserved`` for the stores the package owns itself (the MEMORY tool refuses those).
        agent_code: the agent whose namespace holds the store, or that runs a session store.
        store_code: the store code of a ``shared`` store or of a context store under one (for
            a ``reserved`` store: its namespace, e.g. the profile's root folder).
        caps: the creation-time configuration only: the caps the store row gets if a write
            creates it (set from the agent configuration by :func:`dbmemory.resolve_store`).
            ``None`` (default): the strictest caps among the enabled agent configurations that
            name the store, else the defaults. Once the row exists its own caps apply to every
            writer (:mod:`dbmemory.store.caps`); this field is then ignored.
        store_id: the row id once the store exists (it is created on the first write).

    Raises:
        InvalidScopeError: ``store_key`` is not a valid key (checked exactly by
            :func:`dbmemory.core.keys.parse_store_key`: a hand-built key with a trailing space, a
            wrong part count or an invalid component is refused), ``scope`` is not the key's
            scope, or ``agent_code``/``store_code`` is invalid or differs from the one the key
            carries.
    """

    store_key: str
    scope: str
    agent_code: str | None = None
    store_code: str | None = None
    caps: Caps | None = None
    store_id: int | None = None

    def __post_init__(self) -> None:
        parts = parse_store_key(self.store_key)
        if self.scope != parts.scope:
            raise InvalidScopeError(
                f"StoreRef scope {self.scope!r} does not match its store key {self.store_key!r} "
                f"(scope {parts.scope!r}): pass scope={parts.scope!r}"
            )
        for what, given, carried in (
            ("agent_code", self.agent_code, parts.agent_code),
            ("store_code", self.store_code, parts.store_code),
        ):
            if given is None:
                continue
            if type(given) is str and given == carried:
                continue  # carried passed validate_component in parse_store_key: same value
            validate_component(given, f"StoreRef {what}")
            if carried is not None and given != carried:
                raise InvalidScopeError(
                    f"StoreRef {what} {given!r} differs from the one in its store key "
                    f"{self.store_key!r} ({carried!r}): pass {what}={carried!r} or leave it out"
                )


@dataclass(frozen=True)
class FileInfo:
    """One file without its text.

    Attributes:
        path: canonical path under ``/memories``.
        chars: size in characters.
        version: 1 on create, +1 on each change (compare-and-set token).
        created_at / updated_at / last_accessed_at: aware UTC datetimes; ``last_accessed_at``
            is the last touch (write or read), what expiry looks at.
    """

    path: str
    chars: int
    version: int
    created_at: dt.datetime
    updated_at: dt.datetime
    last_accessed_at: dt.datetime


@dataclass(frozen=True)
class FileRecord(FileInfo):
    """One file with its text.

    Attributes:
        text: the whole text (``""`` for an empty file, on every backend).
        store_id: the store's row id.
        file_id: the file's row id.
        expiry_exempt: whether the expiry rule skips this file (user profiles).
    """

    text: str = ""
    store_id: int = 0
    file_id: int = 0
    expiry_exempt: bool = False


@dataclass(frozen=True)
class AgentConfig:
    """An agent's memory configuration (one row of ``dbm_agents``).

    Attributes:
        agent_code: the agent's code.
        scope: which store its runs use.
        store_code: for ``shared`` (and optionally ``context``) scopes.
        context_key: for ``context`` scope: the run-context key naming the store.
        caps: the caps its writes respect.
        memory_enabled: False after :func:`dbmemory.disable_for_agent`.
    """

    agent_code: str
    scope: str
    store_code: str | None
    context_key: str | None
    caps: Caps
    memory_enabled: bool


