"""Agent configuration and store resolution: the procedure-style API.

Module-level functions, each taking a SQLAlchemy ``Connection`` first and never committing
(APEX/ORDS-style callers run them inside their own transaction). Store keys follow DESIGN.md
section 4; every key component is validated before any store is opened or created.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory import statements as st
from dbmemory import validate as _v
from dbmemory.caps import caps_values, configured_store_key, strictest_caps
from dbmemory.db import dialect
from dbmemory.errors import DbMemoryError, InvalidArgumentError, InvalidScopeError, NotFoundError
from dbmemory.audit import _audit, _event
from dbmemory.files import _lock_store_caps, _savepoint, find_store_id
from dbmemory.keys import RESERVED_SCOPE, SCOPES, build_store_key, parse_store_key, validate_component
from dbmemory.txn import write_unit
from dbmemory.model import DEFAULT_MAX_FILE_CHARS, DEFAULT_MAX_FILES, AgentConfig, Caps, StoreRef
from dbmemory.statements import SET_STORE_CAPS

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

_current_store: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "dbmemory_current_store", default=None
)


def _config(row: Any) -> AgentConfig:
    m = row._mapping
    return AgentConfig(
        agent_code=m["agent_code"],
        scope=m["scope_name"],
        store_code=m["store_code"],
        context_key=m["context_key"],
        caps=Caps(
            max_file_chars=m["max_file_chars"],
            max_files=m["max_files"],
            max_store_chars=m["max_store_chars"],
        ),
        memory_enabled=bool(m["memory_enabled"]),
    )


def _run(conn: Connection, stmt: Any, action: str) -> Any:
    try:
        return conn.execute(stmt)
    except sa.exc.SQLAlchemyError as exc:
        raise dialect.translate_db_error(exc, action) from exc


def _refuse_reserved_names(agent_code: object, scope: object, store_code: object) -> None:
    """Refuse a configuration that names the reserved namespace (called first by
    :func:`enable_for_agent`, before any other check or SQL).

    The key design already keeps every configuration out of it (:func:`build_store_key` never
    builds a ``reserved:`` key); this refuses the names that would only look like it, so no
    listing ever shows ``agent:reserved`` or ``shared:reserved`` next to the package's stores.

    Raises:
        InvalidScopeError: ``scope`` is ``reserved``, or the agent code or store code is
            ``reserved`` (in any letter case). Code ``reserved_store``.
    """
    if scope == RESERVED_SCOPE:
        raise InvalidScopeError(
            "scope 'reserved' holds the stores dbmemory owns itself (user profiles, memory "
            "items, organisation memory) and no agent can use it: pick one of "
            f"{', '.join(SCOPES)}",
            code="reserved_store",
        )
    for what, value in (("agent code", agent_code), ("store code", store_code)):
        if isinstance(value, str) and value.lower() == RESERVED_SCOPE:
            raise InvalidScopeError(
                f"{what} {value!r} is the name of the namespace dbmemory keeps for its own "
                "stores (user profiles, memory items, organisation memory): choose another name",
                code="reserved_store",
            )


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


def get_agent_config(conn: Connection, agent_code: str) -> AgentConfig:
    """An agent's configuration, enabled or not.

    Raises:
        InvalidScopeError: invalid agent code.
        NotFoundError: memory was never enabled for the agent.
    """
    _v.check_connection(conn)
    return _agent_config(conn, agent_code)


def _agent_config(conn: Connection, agent_code: str) -> AgentConfig:
    """:func:`get_agent_config` once ``conn`` is known to be a Connection."""
    validate_component(agent_code, "agent code")
    row = _run(conn, st.select_agent(agent_code), "reading an agent").first()
    if row is None:
        raise NotFoundError(
            f"agent {agent_code!r} has no memory configuration: call enable_for_agent first",
            code="agent_not_found",
            cli_message=(
                f"agent {agent_code!r} has no memory configuration: enable it with "
                f"'dbmemory agent enable {agent_code}'"
            ),
        )
    return _config(row)


def list_agents(conn: Connection) -> list[AgentConfig]:
    """Every agent configuration, sorted by agent code."""
    _v.arguments(conn=conn)
    return [_config(r) for r in _run(conn, st.select_agents(), "listing agents")]


def _store_ids(store_ids: object) -> list[int]:
    """``store_ids`` as a sorted list without duplicates; refuse what is not whole numbers."""
    if isinstance(store_ids, (str, bytes)) or not hasattr(store_ids, "__iter__"):
        raise InvalidArgumentError(
            f"store_ids must be a list of store ids, got {type(store_ids).__name__}: pass e.g. [7]"
        )
    ids = list(store_ids)  # type: ignore[call-overload]
    for value in ids:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
            raise InvalidArgumentError(
                f"store id {value!r} is not a store id: pass positive whole numbers such as 7"
            )
    return sorted(set(ids))


def drop_stores(conn: Connection, store_ids: list[int], *, actor: str = "admin") -> int:
    """Delete stores with all their files (one audit event per store), in a savepoint.

    Lock order (the writers' order, so it cannot deadlock with a writer on any backend): the
    store rows first, in ascending key order, through the key index (``SELECT ... WHERE
    store_key IN (...) FOR UPDATE`` by chunks: on MySQL/MariaDB the key entry, then the row, as
    a first writer's upsert takes them), then the files and the store rows are deleted. A writer holding a store row makes the drop wait; a writer
    that comes later waits for the drop and then finds the store gone (a tool call then creates
    it afresh; a call by store id gets not-found). Every ``IN`` list holds at most 1,000 ids
    (Oracle's ORA-01795), whatever the number of stores.

    Args:
        store_ids: ids of the stores to drop (unknown ids are ignored; duplicates count once).
        actor: recorded in the audit events.

    Returns:
        The number of stores dropped.

    Raises:
        InvalidArgumentError: ``store_ids`` is not a list of positive whole numbers.
        StorageError: the database failed (the savepoint is rolled back: nothing is dropped).
    """
    _v.arguments(conn=conn, actor=actor)
    ids = _store_ids(store_ids)
    if not ids:
        return 0
    wanted = set(ids)
    with write_unit(conn, "dropping stores"):
        named = {}
        for chunk in st.id_chunks(ids):
            for row in _run(conn, st.select_store_keys(chunk), "dropping stores"):
                named[row.store_key] = row.store_id
        keys: dict[int, str] = {}
        for key_chunk in st.id_chunks(sorted(named)):  # type: ignore[arg-type]
            # ascending keys across and within chunks; a key now naming another (re-created)
            # store is locked but not dropped
            for row in _run(conn, st.lock_stores_by_key(key_chunk), "dropping stores"):
                if row.store_id in wanted:
                    keys[row.store_id] = row.store_key
        if not keys:
            return 0
        chunks = st.id_chunks(sorted(keys))
        totals: dict[int, tuple[int, int]] = {}
        for chunk in chunks:
            for r in _run(conn, st.select_store_totals(chunk), "dropping stores"):
                totals[r.store_id] = (int(r.file_count), int(r.total_chars))
        for chunk in chunks:
            for stmt in st.delete_stores_by_id(chunk):
                _run(conn, stmt, "dropping stores")
        _audit(
            conn,
            [
                _event(
                    sid,
                    keys[sid],
                    None,
                    "store_drop",
                    actor,
                    totals.get(sid, (0, 0))[1],
                    None,
                    f"{totals.get(sid, (0, 0))[0]} files",
                )
                for sid in ids
                if sid in keys
            ],
        )
    return len(keys)


def _own_store_ids(conn: Connection, agent_code: str) -> list[int]:
    """Ids of the stores ``agent_code`` owns, chosen by exact key (never by the ``agent_code``
    column, which any writer sets): ``agent:<A>``, ``user:<A>:*`` and the agent-keyed context
    stores ``context:<A>:<KEY>:<VALUE>`` (a store-code key ``context:store:...`` of an agent
    named ``store`` is told apart by its part count)."""
    rows = _run(conn, st.select_stores_of_agent(agent_code), "dropping stores").all()
    own: list[int] = []
    for row in rows:
        try:
            parts = parse_store_key(row.store_key)
        except InvalidScopeError:  # a key no version of dbmemory builds: not the agent's
            continue
        if parts.scope in ("agent", "user", "context") and parts.agent_code == agent_code:
            own.append(row.store_id)
    return own


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
    _v.arguments(conn=conn, run_context=run_context)
    _v.check_key_text(user_id, "user_id")
    _v.check_key_text(session_id, "session_id")
    return _run_store(
        conn, agent_code, user_id=user_id, session_id=session_id, run_context=run_context
    )


def _run_store(
    conn: Connection,
    agent_code: str,
    *,
    user_id: str | None,
    session_id: str | None,
    run_context: Mapping[str, object] | None,
) -> StoreRef:
    """:func:`check_run_ready` once its arguments' types are checked (by it, or by the
    :class:`~dbmemory.tool.MemoryTool` constructor, which checks the same ones first)."""
    config = _agent_config(conn, agent_code)
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
    _v.arguments(conn=conn)
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


def end_session(conn: Connection, session_id: str) -> int:
    """Drop the session's store with its files. Returns 1 if it existed, else 0."""
    _v.arguments(conn=conn)
    key = build_store_key("session", session_id=session_id)
    store_id = find_store_id(conn, key)
    return drop_stores(conn, [store_id], actor="end_session") if store_id is not None else 0


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
    _refuse_reserved_names(None, "shared", store_code)
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
    _refuse_reserved_names(None, "shared", store_code)
    _v.check_caps(caps, optional=True)
    return StoreRef(
        store_key=build_store_key("shared", store_code=store_code),
        scope="shared",
        store_code=store_code,
        caps=caps,
    )


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
