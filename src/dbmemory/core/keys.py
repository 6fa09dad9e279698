"""Scopes and store keys (docs/stores.md, "Scopes and store keys").

A store key is the unique text that names a store. Every component is validated before a key is
built or accepted: at most 200 characters, full match of ``[A-Za-z0-9_.-]+`` (ASCII only, no
trailing newline, no space). Nothing here touches the database.

| scope    | store key                                                |
|----------|----------------------------------------------------------|
| agent    | ``agent:<AGENT_CODE>``                                   |
| user     | ``user:<AGENT_CODE>:<USER_ID>``                          |
| session  | ``session:<SESSION_ID>``                                 |
| shared   | ``shared:<STORE_CODE>``                                  |
| global   | ``global``                                               |
| context  | ``context:<AGENT_CODE>:<KEY>:<VALUE>`` (keyed by the agent code, 4 parts) |
| context  | ``context:store:<STORE_CODE>:<KEY>:<VALUE>`` (keyed by a store code, 5 parts) |
| reserved | ``reserved:<KIND>:<COMPONENT>...`` (owned by the package; see below) |

Namespaces that never meet: components cannot contain ``:``, so the number of parts and the
fixed words tell every key apart. An agent-keyed context key has 4 parts and a store-code one
5, so agent ``X``'s context stores never share a key with those of store code ``X`` (not even
for an agent whose code is ``store``). The ``reserved`` namespace holds the stores the package
owns itself (:data:`RESERVED_KINDS`: the user profile, memory items, organisation memory);
:func:`build_store_key`, which every agent configuration goes through, never produces it, and
only :func:`reserved_store_key` does. :func:`parse_store_key` checks a whole key exactly, so a
hand-written key (a ``StoreRef``, ``--store KEY``) with a trailing space, a wrong part count or
an invalid component never reaches SQL (MariaDB's PAD SPACE comparison would otherwise match
``'user:A:u1 '`` to ``'user:A:u1'``).
"""

from __future__ import annotations

import functools
import re
from typing import Literal, NamedTuple, get_args

from dbmemory.errors import InvalidScopeError

__all__ = [
    "Scope",
    "SCOPES",
    "MAX_COMPONENT_CHARS",
    "validate_component",
    "build_store_key",
    "scope_of_key",
    "RESERVED_SCOPE",
    "RESERVED_KINDS",
    "STORE_CODE_MARKER",
    "StoreKeyParts",
    "parse_store_key",
    "reserved_store_key",
    "is_reserved_key",
]

Scope = Literal["agent", "user", "session", "shared", "global", "context"]
SCOPES: tuple[str, ...] = get_args(Scope)
"""The scopes an agent configuration (or a MEMORY tool) can use."""

RESERVED_SCOPE = "reserved"
"""Scope name (``dbm_stores.scope_name``) of the stores the package owns itself."""

RESERVED_KINDS: dict[str, tuple[str, ...]] = {
    "profile": ("root folder", "encoded user id"),
    "items": ("organisation id", "encoded user id"),
    "org": ("organisation id",),
}
"""The closed set of reserved store kinds and the components each key carries after the kind:
``reserved:profile:<root_folder>:<encoded user id>`` (the user profile, :mod:`dbmemory.profile`);
``items`` and ``org`` are kept for memory items and organisation memory (their layout is fixed
here so nothing else can take the names)."""

STORE_CODE_MARKER = "store"
"""Second part of a store-code context key: ``context:store:<STORE_CODE>:<KEY>:<VALUE>``."""

MAX_COMPONENT_CHARS = 200
"""Longest allowed store-key component, in characters."""

_COMPONENT = re.compile(r"[A-Za-z0-9_.\-]+")


_VALID_COMPONENTS: set[str] = set()
"""Components that passed :func:`validate_component` (exact ``str`` values, at most 4,096
kept): every tool made checks its agent code and user id again, as a set lookup."""


def validate_component(value: object, what: str) -> str:
    """Check one store-key component and return it unchanged.

    Args:
        value: the candidate (agent code, user id, session id, store code, context key or value).
        what: its name for the message, e.g. ``"context value for 'document_id'"``.

    Returns:
        ``value`` itself (a ``str``).

    Raises:
        InvalidScopeError: not a string, empty, longer than 200 characters, or not a full match
            of ``[A-Za-z0-9_.-]+`` (ASCII letters and digits, ``_``, ``.``, ``-``; a trailing
            newline, a space, ``/``, ``:`` or any non-ASCII character is refused).
    """
    if type(value) is str and value in _VALID_COMPONENTS:  # fast path: checked before
        return value
    if not isinstance(value, str):
        raise InvalidScopeError(
            f"{what} must be a string, got {type(value).__name__}: pass text such as 'doc-7'"
        )
    if value == "":
        raise InvalidScopeError(f"{what} is empty: pass 1 to {MAX_COMPONENT_CHARS} characters")
    if len(value) > MAX_COMPONENT_CHARS:
        raise InvalidScopeError(
            f"{what} is {len(value)} characters long; the limit is {MAX_COMPONENT_CHARS}: "
            "use a shorter identifier"
        )
    if not value.isascii() or _COMPONENT.fullmatch(value) is None:
        raise InvalidScopeError(
            f"{what} {value!r} may contain only ASCII letters, digits, '_', '.' and '-': "
            "map other characters (spaces, ':', '/', '@', newlines, accents) before passing it"
        )
    if type(value) is str:
        if len(_VALID_COMPONENTS) >= 4096:
            _VALID_COMPONENTS.clear()
        _VALID_COMPONENTS.add(value)
    return value


def build_store_key(
    scope: str,
    *,
    agent_code: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    store_code: str | None = None,
    context_key: str | None = None,
    context_value: str | None = None,
) -> str:
    """Build the store key for a scope, validating every component it needs.

    Args:
        scope: one of ``agent``, ``user``, ``session``, ``shared``, ``global``, ``context``.
        agent_code: needed by ``agent`` and ``user``; by ``context`` when no ``store_code``.
        user_id: needed by ``user`` (an explicit id from the caller, never a database login).
        session_id: needed by ``session``.
        store_code: needed by ``shared``; for ``context`` it replaces the agent code as namespace.
        context_key: needed by ``context``.
        context_value: needed by ``context``: the run context's value for ``context_key``.

    Returns:
        The store key, e.g. ``"context:A:document_id:7"`` (agent-keyed) or
        ``"context:store:DOCS:document_id:7"`` (with ``store_code="DOCS"``). Never a
        ``reserved:`` key.

    Raises:
        InvalidScopeError: unknown scope (``reserved`` included: no configuration can name the
            package's own stores), a needed component missing, or a component that breaks
            :func:`validate_component`'s rule.
    """
    if scope not in SCOPES:
        if scope == RESERVED_SCOPE:
            raise InvalidScopeError(
                "scope 'reserved' holds the stores dbmemory owns itself (user profiles, memory "
                "items, organisation memory) and no agent configuration can name it: pick one "
                f"of {', '.join(SCOPES)}",
                code="reserved_store",
            )
        raise InvalidScopeError(
            f"scope {scope!r} is not one of {', '.join(SCOPES)}: pick one of them"
        )

    def need(value: str | None, what: str) -> str:
        if value is None:
            raise InvalidScopeError(f"scope '{scope}' needs {what}: pass it")
        return validate_component(value, what)

    if scope == "agent":
        return f"agent:{need(agent_code, 'an agent code')}"
    if scope == "user":
        return f"user:{need(agent_code, 'an agent code')}:{need(user_id, 'a user id')}"
    if scope == "session":
        return f"session:{need(session_id, 'a session id')}"
    if scope == "shared":
        return f"shared:{need(store_code, 'a store code')}"
    if scope == "global":
        return "global"
    namespace = (
        f"{STORE_CODE_MARKER}:{validate_component(store_code, 'a store code')}"
        if store_code is not None
        else need(agent_code, "an agent code or a store code")
    )
    key = need(context_key, "a context key")
    value = need(context_value, f"a context value for '{context_key}'")
    return f"context:{namespace}:{key}:{value}"


def scope_of_key(store_key: str) -> str:
    """Return the scope a store key was built for (its first component)."""
    return store_key.split(":", 1)[0]


def reserved_store_key(kind: str, *components: str) -> str:
    """The key of a store the package owns itself: ``reserved:<kind>:<component>...``.

    Only the package's own modules call this (the profile now; items and organisation memory
    next); no agent configuration reaches it.

    Args:
        kind: one of :data:`RESERVED_KINDS` (``profile``, ``items``, ``org``).
        components: the kind's components, in order (for ``profile``: the root folder and the
            encoded user id), each checked by :func:`validate_component`.

    Returns:
        The key, e.g. ``"reserved:profile:user-memory:u-7"``.

    Raises:
        InvalidScopeError: unknown kind, the wrong number of components, or an invalid one.
    """
    if kind not in RESERVED_KINDS:
        raise InvalidScopeError(
            f"reserved store kind {kind!r} is not one of {', '.join(RESERVED_KINDS)}"
        )
    names = RESERVED_KINDS[kind]
    if len(components) != len(names):
        raise InvalidScopeError(
            f"a reserved {kind} store key needs {len(names)} component(s) ({', '.join(names)}), "
            f"got {len(components)}"
        )
    for name, value in zip(names, components, strict=True):
        validate_component(value, name)
    return ":".join((RESERVED_SCOPE, kind, *components))


def is_reserved_key(store_key: str) -> bool:
    """Whether ``store_key`` lies in the reserved namespace (``reserved:`` prefix; no checks)."""
    return store_key.startswith(RESERVED_SCOPE + ":")


class StoreKeyParts(NamedTuple):
    """A store key split by :func:`parse_store_key`.

    Attributes:
        scope: ``agent``, ``user``, ``session``, ``shared``, ``global``, ``context`` or
            ``reserved``.
        components: the parts after the scope, exactly as in the key (a store-code context key
            keeps its ``store`` marker: ``("store", "DOCS", "doc", "7")``).
    """

    scope: str
    components: tuple[str, ...]

    @property
    def agent_code(self) -> str | None:
        """The agent code the key carries (agent, user and agent-keyed context keys)."""
        if self.scope in ("agent", "user") or (self.scope == "context" and len(self.components) == 3):
            return self.components[0]
        return None

    @property
    def store_code(self) -> str | None:
        """The store code the key carries (shared and store-code context keys)."""
        if self.scope == "shared":
            return self.components[0]
        if self.scope == "context" and len(self.components) == 4:
            return self.components[1]
        return None

    @property
    def kind(self) -> str | None:
        """The reserved kind (``profile``, ``items``, ``org``) of a reserved key."""
        return self.components[0] if self.scope == RESERVED_SCOPE else None


_PARTS: dict[str, tuple[str, ...]] = {
    "agent": ("agent code",),
    "user": ("agent code", "user id"),
    "session": ("session id",),
    "shared": ("store code",),
    "global": (),
    "context": ("agent code", "context key", "context value"),
    STORE_CODE_MARKER: ("store code", "context key", "context value"),
}
_SHAPES = (
    "agent:AGENT, user:AGENT:USER, session:SESSION, shared:CODE, global, "
    "context:AGENT:KEY:VALUE or context:store:CODE:KEY:VALUE"
)


def parse_store_key(store_key: object) -> StoreKeyParts:
    """Check a whole store key exactly and split it (the inverse of :func:`build_store_key` and
    :func:`reserved_store_key`).

    Cheap (cached per key): it runs for every ``StoreRef``, so for every tool made.

    Args:
        store_key: e.g. ``"user:SUPPORT:u42"``, ``"context:store:DOCS:document_id:7"``,
            ``"reserved:profile:user-memory:u-7"``.

    Returns:
        :class:`StoreKeyParts` ``(scope, components)``; ``reserved`` keys are recognised (check
        :attr:`StoreKeyParts.scope` to refuse them where only agent stores are allowed).

    Raises:
        InvalidScopeError: not a string; an unknown scope; the wrong number of parts for the
            scope; a 5-part context key whose second part is not ``store``; an unknown reserved
            kind; or any component that breaks :func:`validate_component` (empty, too long, a
            space, a trailing space or newline, a non-ASCII character).
    """
    if not isinstance(store_key, str):
        raise InvalidScopeError(
            f"a store key must be a string, got {type(store_key).__name__}: use {_SHAPES}"
        )
    return _parse_store_key(store_key)


def _check_parts(store_key: str, names: tuple[str, ...], values: list[str]) -> None:
    for name, value in zip(names, values, strict=False):
        if value in _VALID_COMPONENTS:  # checked before: skip building the message
            continue
        validate_component(value, f"store key {store_key!r}: its {name}")


@functools.lru_cache(maxsize=4096)
def _parse_store_key(store_key: str) -> StoreKeyParts:
    scope, *parts = store_key.split(":")
    if scope == RESERVED_SCOPE:
        kind = parts[0] if parts else ""
        names = RESERVED_KINDS.get(kind)
        if names is None or len(parts) != len(names) + 1:
            raise InvalidScopeError(
                f"{store_key!r} is not a store key: a reserved key is reserved:KIND:... with KIND "
                f"one of {', '.join(RESERVED_KINDS)} and that kind's components"
            )
        _check_parts(store_key, names, parts[1:])
        return StoreKeyParts(scope, tuple(parts))
    if scope == "context" and len(parts) == 4 and parts[0] == STORE_CODE_MARKER:
        _check_parts(store_key, _PARTS[STORE_CODE_MARKER], parts[1:])
        return StoreKeyParts(scope, tuple(parts))
    names = _PARTS.get(scope)
    if names is None or len(parts) != len(names) or scope == STORE_CODE_MARKER:
        raise InvalidScopeError(f"{store_key!r} is not a store key: use {_SHAPES}")
    _check_parts(store_key, names, parts)
    return StoreKeyParts(scope, tuple(parts))
