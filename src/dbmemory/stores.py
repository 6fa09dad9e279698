"""Agent configuration and store resolution: the procedure-style API.

Module-level functions, each taking a SQLAlchemy ``Connection`` first and never committing
(APEX/ORDS-style callers run them inside their own transaction). Store keys follow DESIGN.md
section 4; every key component is validated before any store is opened or created.

The agent configuration writers live here (:func:`enable_for_agent`, :func:`disable_for_agent`,
:func:`set_store_caps`); the rest of the procedure-style API is re-exported from the modules
that hold it: :mod:`dbmemory.agent_configs` (reading configurations, reserved names),
:mod:`dbmemory.store_refs` (which store a run uses) and :mod:`dbmemory.store_drop` (dropping
stores).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from dbmemory import statements as st
from dbmemory import validate as _v
from dbmemory.agent_configs import (  # noqa: F401  (re-exported)
    _agent_config,
    _config,
    _refuse_reserved_names,
    _run,
    get_agent_config,
    list_agents,
)
from dbmemory.audit import _audit, _event
from dbmemory.caps import caps_values, configured_store_key, strictest_caps
from dbmemory.db import dialect
from dbmemory.errors import DbMemoryError, InvalidScopeError
from dbmemory.files import _lock_store_caps, _savepoint
from dbmemory.keys import SCOPES, validate_component
from dbmemory.model import DEFAULT_MAX_FILE_CHARS, DEFAULT_MAX_FILES, AgentConfig, Caps, StoreRef
from dbmemory.statements import SET_STORE_CAPS
from dbmemory.store_drop import _own_store_ids, _store_ids, drop_stores, end_session  # noqa: F401
from dbmemory.store_refs import (  # noqa: F401  (re-exported)
    _current_store,
    _run_store,
    _store_ref,
    check_run_ready,
    current_store_code,
    resolve_store,
    resolve_store_id,
    shared_store,
    use_store,
)
from dbmemory.txn import write_unit

__all__ = [
    "enable_for_agent",
    "set_store_caps",
    "disable_for_agent",
    "get_agent_config",
    "list_agents",
    "resolve_store",
    "check_run_ready",
    "resolve_store_id",
    "end_session",
    "drop_stores",
    "use_store",
    "current_store_code",
    "shared_store",
]


def enable_for_agent(
    conn: Connection,
    agent_code: str,
    *,
    scope: str = "agent",
    store_code: str | None = None,
    context_key: str | None = None,
    max_file_chars: int | None = None,
    max_files: int | None = None,
    max_store_chars: int | None = None,
) -> AgentConfig:
    """Turn memory on for an agent, creating or updating its configuration (upsert).

    Args:
        agent_code: the agent's code (store-key component rule: 1-200 of ``[A-Za-z0-9_.-]``).
        scope: ``agent`` (default), ``user``, ``session``, ``shared``, ``global`` or ``context``.
        store_code: required for ``shared``; for ``context`` it names the namespace instead of
            the agent code (keys ``context:store:<CODE>:<KEY>:<VALUE>``, shared by every agent
            with that store code, never equal to an agent's ``context:<AGENT>:...`` keys).
        context_key: required for ``context``: the run-context key whose value names the store.
        max_file_chars / max_files / max_store_chars: caps (characters per file, files per
            store, characters per store). ``None`` is the default (100,000 / 1,000 / no cap),
            also when re-enabling: a cap left out is restored to its default, never kept from
            the previous configuration (UC AI: null = default).

    The caps are set on the configuration **and**, in the same transaction, on the existing
    stores it names (a store's caps are the values on its row; every writer enforces them,
    :mod:`dbmemory.caps`): the agent's own stores (``agent:<A>``, user stores ``user:<A>:*``,
    context stores ``context:<A>:<KEY>:*``) get these caps; stores that several
    configurations can name (``shared:<CODE>``, store-code context stores of that code and
    key, ``global``) get the strictest caps among the enabled configurations naming them, this
    one included, so a second agent's configuration never loosens the owner's caps (use
    :func:`set_store_caps` to override). Session stores keep the caps they were created with.
    Stores already over a lowered cap keep their content; writes that would grow past the cap
    are refused.

    Returns:
        The stored :class:`AgentConfig`.

    Raises:
        InvalidScopeError: unknown scope, a missing ``store_code``/``context_key``, or an
            invalid component; the ``reserved`` scope, or ``reserved`` as agent or store code
            (code ``reserved_store``: the package's own namespace). Nothing is written.
        InvalidArgumentError: a cap that is not a positive integer, or beyond its column
            (``max_file_chars``/``max_files`` at most 2,147,483,647, ``max_store_chars`` at
            most 2**63-1); ``conn`` not a Connection.
    """
    _v.arguments(conn=conn)
    _refuse_reserved_names(agent_code, scope, store_code)
    validate_component(agent_code, "agent code")
    if scope not in SCOPES:
        raise InvalidScopeError(f"scope {scope!r} is not one of {', '.join(SCOPES)}: pick one of them")
    if store_code is not None:
        validate_component(store_code, "store code")
    if context_key is not None:
        validate_component(context_key, "context key")
    if scope == "shared" and store_code is None:
        raise InvalidScopeError("scope 'shared' needs store_code: pass the shared store's code")
    if scope == "context" and context_key is None:
        raise InvalidScopeError(
            "scope 'context' needs context_key: pass the run-context key that names the store"
        )
    # Validate the caps up front (Caps raises on bad values), before any SQL; None = default.
    caps = Caps(
        max_file_chars=DEFAULT_MAX_FILE_CHARS if max_file_chars is None else max_file_chars,
        max_files=DEFAULT_MAX_FILES if max_files is None else max_files,
        max_store_chars=max_store_chars,
    )
    named = configured_store_key(
        scope, agent_code, store_code if scope in ("shared", "context") else None, context_key
    )

    now = dialect.utcnow()
    with write_unit(conn, "saving an agent"):
        row = _run(conn, st.select_agent(agent_code, for_update=True), "reading an agent").first()
        values: dict[str, Any] = {
            "scope_name": scope,
            "store_code": store_code if scope in ("shared", "context") else None,
            "context_key": context_key if scope == "context" else None,
            "memory_enabled": True,
            "updated_at": now,
            **caps_values(caps),
        }
        if row is None:
            values.update(agent_code=agent_code, created_at=now)
            _run(conn, st.insert_agent(values), "saving an agent")
        else:
            _run(conn, st.update_agent(agent_code, values), "saving an agent")
        changed = 0
        if named is not None:
            key, is_prefix = named
            owned = scope in ("agent", "user") or (scope == "context" and store_code is None)
            store_caps = caps if owned else _strictest_configured(conn, scope, store_code, named)
            changed = _run(
                conn,
                st.update_configured_store_caps(
                    scope=scope,
                    key=key,
                    is_prefix=is_prefix,
                    agent_code=agent_code if owned else None,
                    store_code=store_code if scope in ("shared", "context") else None,
                    caps=caps_values(store_caps),
                    now=now,
                ),
                "setting the caps of an agent's stores",
            ).rowcount
        _audit(
            conn,
            [
                _event(
                    None,
                    None,
                    None,
                    "agent_enable",
                    "admin",
                    None,
                    None,
                    f"{agent_code}:{scope}; {_caps_text(caps)}; {changed} stores",
                )
            ],
        )
    return get_agent_config(conn, agent_code)


def disable_for_agent(conn: Connection, agent_code: str, *, drop_store: bool = False) -> int:
    """Turn memory off for an agent; its configuration row stays (``memory_enabled`` false).

    Args:
        drop_store: also delete the agent's own stores with their files: its agent store
            (``agent:<A>``), its user stores (``user:<A>:<USER>``) and the context stores keyed
            by its own code (``context:<A>:<KEY>:<VALUE>``), chosen by exact key. Never a
            shared, global or session store (other agents may write those; a session store
            ends with :func:`end_session`), nor a store-code context store, nor a store of the
            package's reserved namespace (user profiles).

    Returns:
        The number of stores dropped (0 without ``drop_store``).

    Raises:
        InvalidScopeError: invalid agent code (checked before any SQL).
        NotFoundError: the agent has no configuration.
        InvalidArgumentError: ``drop_store`` is not a bool; ``conn`` not a Connection.
    """
    _v.arguments(conn=conn, drop_store=drop_store)
    get_agent_config(conn, agent_code)
    with write_unit(conn, "saving an agent"):
        _run(
            conn,
            st.update_agent(agent_code, {"memory_enabled": False, "updated_at": dialect.utcnow()}),
            "saving an agent",
        )
        _audit(conn, [_event(None, None, None, "agent_disable", "admin", None, None, agent_code)])
        dropped = 0
        if drop_store:
            dropped = drop_stores(conn, _own_store_ids(conn, agent_code))
    return dropped


def _strictest_configured(
    conn: Connection, scope: str, store_code: str | None, named: tuple[str, bool]
) -> Caps:
    """The strictest caps among the enabled configurations that name the same stores as
    ``named`` (a shared, global or store-code context configuration)."""
    rows = _run(
        conn, st.select_configured_caps(scope, None, store_code), "reading agent configurations"
    )
    same = []
    for row in rows:
        m = row._mapping
        try:
            other = configured_store_key(
                m["scope_name"], m["agent_code"], m["store_code"], m["context_key"]
            )
        except DbMemoryError:  # a row that no longer builds a key names nothing
            continue
        if other == named:
            same.append(m)
    return strictest_caps(same)


def _caps_text(caps: Caps) -> str:
    limit = "none" if caps.max_store_chars is None else str(caps.max_store_chars)
    return (
        f"max_file_chars={caps.max_file_chars} max_files={caps.max_files} "
        f"max_store_chars={limit}"
    )


def set_store_caps(
    conn: Connection,
    store: int | StoreRef,
    *,
    max_file_chars: int | None = None,
    max_files: int | None = None,
    max_store_chars: int | None = None,
    actor: str = "admin",
) -> Caps:
    """Set one store's caps (the values on its row, which every writer enforces).

    Args:
        store: a store id (the store must exist) or a :class:`StoreRef` (its row is created,
            empty, when it was never written).
        max_file_chars / max_files / max_store_chars: characters per file, files, characters
            in the store; ``None`` is the default (100,000 / 1,000 / no cap), never "keep".
        actor: who, for the audit event (``store_caps``).

    Content already over a lowered cap stays; writes that would grow past it are refused.
    An agent's :func:`enable_for_agent` later sets the caps of the stores it names again.
    Runs in the caller's transaction; commits nothing.

    Returns:
        The store's new :class:`Caps`.

    Raises:
        InvalidArgumentError: a cap that is not a positive integer. Nothing is written.
        NotFoundError: no store with that id.
    """
    _v.arguments(conn=conn, store=store, actor=actor)
    for name, value in (
        ("max_file_chars", max_file_chars),
        ("max_files", max_files),
        ("max_store_chars", max_store_chars),
    ):
        _v.check_cap(value, name)
    caps = Caps(
        max_file_chars=DEFAULT_MAX_FILE_CHARS if max_file_chars is None else max_file_chars,
        max_files=DEFAULT_MAX_FILES if max_files is None else max_files,
        max_store_chars=max_store_chars,
    )
    with _savepoint(conn, "setting a store's caps"):
        store_id, store_key, old, _counts = _lock_store_caps(conn, store)
        conn.execute(
            SET_STORE_CAPS,
            {
                "p_sid": store_id,
                "p_max_file_chars": caps.max_file_chars,
                "p_max_files": caps.max_files,
                "p_max_store_chars": caps.max_store_chars,
                "p_now": dialect.utcnow(),
            },
        )
        _audit(
            conn,
            [
                _event(
                    store_id,
                    store_key,
                    None,
                    "store_caps",
                    actor,
                    None,
                    None,
                    f"{_caps_text(caps)} (was {_caps_text(old)})",
                )
            ],
        )
    return caps
