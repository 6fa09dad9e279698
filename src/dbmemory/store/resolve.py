"""Which store a run uses: :func:`check_run_ready` (the run can name its store, checked before any
model call), :func:`resolve_store` (a :class:`~dbmemory.core.model.StoreRef` from the agent's
configuration and the run's ids and context), :func:`resolve_store_id` (the id of a store that
was written, else :class:`~dbmemory.errors.NotFoundError`), and the shared store of plain tool
calls (:func:`use_store`, a context manager on a context variable; :func:`shared_store`;
:func:`current_store_code`).

Store keys follow :mod:`dbmemory.core.keys`; every key component is validated before any store is
opened or created. Nothing here writes."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping

from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments, check_caps
from dbmemory.core.keys import build_store_key, validate_component
from dbmemory.core.model import AgentConfig, Caps, StoreRef
from dbmemory.errors import InvalidScopeError, NotFoundError
from dbmemory.store.agents import agent_config, refuse_reserved_names
from dbmemory.store.locks import find_store_id

__all__ = [
    "check_run_ready",
    "resolve_store",
    "resolve_store_id",
    "use_store",
    "current_store_code",
    "shared_store",
    "run_store",
]

_current_store: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "dbmemory_current_store", default=None
)


def _store_ref(
    config: AgentConfig,
    *,
    user_id: str | None,
    session_id: str | None,
    run_context: Mapping[str, object] | None,
) -> StoreRef:
    scope = config.scope
    agent = config.agent_code
    if scope == "context":
        key = config.context_key or ""
        if not run_context or key not in run_context:
            raise InvalidScopeError(
                f"agent {agent!r} keeps memory per {key!r}, but the run context has no {key!r}: "
                f"pass run_context={{{key!r}: ...}} (refused before the run starts)",
                code="missing_context_key",
                cli_message=(
                    f"agent {agent!r} keeps memory per {key!r}, but the run context has no {key!r}: "
                    f"pass --context {key}=VALUE"
                ),
            )
        value = run_context[key]
        store_key = build_store_key(
            "context",
            agent_code=agent,
            store_code=config.store_code,
            context_key=key,
            context_value=value,  # type: ignore[arg-type]
        )
    else:
        if scope == "user" and user_id is None:
            raise InvalidScopeError(
                f"agent {agent!r} keeps memory per user: pass user_id (refused before the run)",
                code="missing_user_id",
                cli_message=f"agent {agent!r} keeps memory per user: pass --user USER",
            )
        if scope == "session" and session_id is None:
            raise InvalidScopeError(
                f"agent {agent!r} keeps memory per session: pass session_id",
                code="missing_session_id",
                cli_message=f"agent {agent!r} keeps memory per session: pass --session SESSION",
            )
        store_key = build_store_key(
            scope,
            agent_code=agent,
            user_id=user_id,
            session_id=session_id,
            store_code=config.store_code,
        )
    owner = None if scope in ("shared", "global") or (scope == "context" and config.store_code) else agent
    return StoreRef(
        store_key=store_key,
        scope=scope,
        agent_code=owner,
        store_code=config.store_code,
        caps=config.caps,
    )


def check_run_ready(
    conn: Connection,
    agent_code: str,
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    run_context: Mapping[str, object] | None = None,
) -> StoreRef:
    """Check, before a run starts, that the agent's store can be named; raise if not.

    Returns:
        The run's :class:`StoreRef` (``store_id`` unset: no store lookup is made).

    Raises:
        NotFoundError: memory was never enabled for the agent.
        InvalidScopeError: memory is disabled; or a context-scoped agent's key is missing from
            ``run_context`` or its value breaks the component rule; or a user/session-scoped
            agent got no user/session id; ``run_context`` is not a mapping (or has a key that
            is not a string); ``user_id``/``session_id`` not a string. Raised before anything
            is created.
    """
    check_arguments(conn=conn, run_context=run_context)
    _v.check_key_text(user_id, "user_id")
    _v.check_key_text(session_id, "session_id")
    return run_store(
        conn, agent_code, user_id=user_id, session_id=session_id, run_context=run_context
    )


def run_store(
    conn: Connection,
    agent_code: str,
    *,
    user_id: str | None,
    session_id: str | None,
    run_context: Mapping[str, object] | None,
) -> StoreRef:
    """:func:`check_run_ready` once its arguments' types are checked (by it, or by the
    :class:`~dbmemory.tool.MemoryTool` constructor, which checks the same ones first)."""
    config = agent_config(conn, agent_code)
    if not config.memory_enabled:
        raise InvalidScopeError(
            f"memory is disabled for agent {agent_code!r}: call enable_for_agent to turn it on",
            code="memory_disabled",
            cli_message=(
                f"memory is disabled for agent {agent_code!r}: enable it again with "
                f"'dbmemory agent enable {agent_code}'"
            ),
        )
    return _store_ref(config, user_id=user_id, session_id=session_id, run_context=run_context)


def resolve_store(
    conn: Connection,
    agent_code: str,
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    run_context: Mapping[str, object] | None = None,
) -> StoreRef:
    """The store a run of ``agent_code`` uses (created on its first write).

    Returns:
        :class:`StoreRef` with ``store_id`` set if the store exists, else ``None``.

    Raises:
        the same as :func:`check_run_ready`.
    """
    ref = check_run_ready(
        conn, agent_code, user_id=user_id, session_id=session_id, run_context=run_context
    )
    store_id = find_store_id(conn, ref.store_key)
    return StoreRef(
        store_key=ref.store_key,
        scope=ref.scope,
        agent_code=ref.agent_code,
        store_code=ref.store_code,
        caps=ref.caps,
        store_id=store_id,
    )


def resolve_store_id(
    conn: Connection,
    *,
    scope: str,
    agent_code: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    store_code: str | None = None,
    context_key: str | None = None,
    context_value: str | None = None,
) -> int:
    """The id of an existing store named by its scope components.

    Raises:
        InvalidScopeError: a needed component is missing or invalid.
        NotFoundError: the store was never written.
    """
    check_arguments(conn=conn)
    key = build_store_key(
        scope,
        agent_code=agent_code,
        user_id=user_id,
        session_id=session_id,
        store_code=store_code,
        context_key=context_key,
        context_value=context_value,
    )
    store_id = find_store_id(conn, key)
    if store_id is None:
        raise NotFoundError(f"store {key} does not exist (it is created on its first write)")
    return store_id


@contextlib.contextmanager
def use_store(store_code: str) -> Iterator[StoreRef]:
    """Point plain tool calls (a ``MemoryTool`` made without an agent) at the shared store
    ``shared:<store_code>`` for the duration of the ``with`` block (contextvars: per thread
    and per asyncio task).

    Yields:
        The :class:`StoreRef` of the shared store (default caps).

    Raises:
        InvalidScopeError: invalid store code, or ``reserved`` (code ``reserved_store``).
    """
    validate_component(store_code, "store code")
    refuse_reserved_names(None, "shared", store_code)
    token = _current_store.set(store_code)
    try:
        yield shared_store(store_code)
    finally:
        _current_store.reset(token)


def current_store_code() -> str | None:
    """The store code set by the innermost :func:`use_store`, or ``None``."""
    return _current_store.get()


def shared_store(store_code: str, caps: Caps | None = None) -> StoreRef:
    """The :class:`StoreRef` of shared store ``store_code`` (no database access).

    ``caps`` is only the creation-time configuration (:attr:`StoreRef.caps`): ``None`` lets a
    new row take the strictest caps among the agent configurations that name the store (or the
    defaults); an existing store's own caps always apply.

    Raises:
        InvalidScopeError: invalid store code, or ``reserved`` (code ``reserved_store``).
    """
    refuse_reserved_names(None, "shared", store_code)
    check_caps(caps, optional=True)
    return StoreRef(
        store_key=build_store_key("shared", store_code=store_code),
        scope="shared",
        store_code=store_code,
        caps=caps,
    )
