"""Scopes and store keys (DESIGN.md section 4).

A store key is the unique text that names a store. Every component is validated before a key is
built: at most 200 characters, full match of ``[A-Za-z0-9_.-]+`` (ASCII only, no trailing
newline). Nothing here touches the database.

| scope   | store key                                        |
|---------|--------------------------------------------------|
| agent   | ``agent:<AGENT_CODE>``                           |
| user    | ``user:<AGENT_CODE>:<USER_ID>``                  |
| session | ``session:<SESSION_ID>``                         |
| shared  | ``shared:<STORE_CODE>``                          |
| global  | ``global``                                       |
| context | ``context:<STORE_CODE or AGENT_CODE>:<KEY>:<VALUE>`` |
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from dbmemory.errors import InvalidScopeError

__all__ = [
    "Scope",
    "SCOPES",
    "MAX_COMPONENT_CHARS",
    "validate_component",
    "build_store_key",
    "scope_of_key",
]

Scope = Literal["agent", "user", "session", "shared", "global", "context"]
SCOPES: tuple[str, ...] = get_args(Scope)

MAX_COMPONENT_CHARS = 200
"""Longest allowed store-key component, in characters."""

_COMPONENT = re.compile(r"[A-Za-z0-9_.\-]+")


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
        The store key, e.g. ``"context:DOCS:document_id:7"``.

    Raises:
        InvalidScopeError: unknown scope, a needed component missing, or a component that breaks
            :func:`validate_component`'s rule.
    """
    if scope not in SCOPES:
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
        validate_component(store_code, "a store code")
        if store_code is not None
        else need(agent_code, "an agent code or a store code")
    )
    key = need(context_key, "a context key")
    value = need(context_value, f"a context value for '{context_key}'")
    return f"context:{namespace}:{key}:{value}"


def scope_of_key(store_key: str) -> str:
    """Return the scope a store key was built for (its first component)."""
    return store_key.split(":", 1)[0]
