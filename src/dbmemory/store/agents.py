"""Agent configurations: writing them (:func:`enable_for_agent`, :func:`disable_for_agent`,
:func:`set_store_caps`), reading them (:func:`get_agent_config`, :func:`list_agents`), and the
names no configuration may use (:func:`refuse_reserved_names`).

Module-level functions, each taking a SQLAlchemy ``Connection`` first and never committing
(APEX/ORDS-style callers run them inside their own transaction). Store keys follow
:mod:`dbmemory.core.keys`; every key component is validated before any store is opened or created. Which store
a run uses is :mod:`dbmemory.store.resolve`; dropping stores is :mod:`dbmemory.store.drop`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.core.keys import RESERVED_SCOPE, SCOPES, validate_component
from dbmemory.core.model import (
    DEFAULT_MAX_FILE_CHARS,
    DEFAULT_MAX_FILES,
    AgentConfig,
    Caps,
    StoreRef,
)
from dbmemory.errors import DbMemoryError, InvalidScopeError, NotFoundError
from dbmemory.store.audit import audit, audit_event
from dbmemory.store.caps import caps_values, configured_store_key, strictest_caps
from dbmemory.store.drop import drop_stores, own_store_ids
from dbmemory.store.locks import lock_store_caps, savepoint
from dbmemory.store.statements.bulk import (
    insert_agent,
    select_agent,
    select_agents,
    select_configured_caps,
    update_agent,
    update_configured_store_caps,
)
from dbmemory.store.statements.reads import SET_STORE_CAPS
from dbmemory.store.units import run_statement, write_unit

__all__ = [
    "get_agent_config",
    "list_agents",
    "refuse_reserved_names",
    "agent_config",
    "enable_for_agent",
    "disable_for_agent",
    "set_store_caps",
]


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


def refuse_reserved_names(agent_code: object, scope: object, store_code: object) -> None:
    """Refuse a configuration that names the reserved namespace (called first by
    :func:`enable_for_agent`, before any other check or SQL).

    The key design already keeps every configuration out of it (:func:`~dbmemory.core.keys.build_store_key` never
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


def get_agent_config(conn: Connection, agent_code: str) -> AgentConfig:
    """An agent's configuration, enabled or not.

    Raises:
        InvalidScopeError: invalid agent code.
        NotFoundError: memory was never enabled for the agent.
    """
    _v.check_connection(conn)
    return agent_config(conn, agent_code)


def agent_config(conn: Connection, agent_code: str) -> AgentConfig:
    """:func:`get_agent_config` once ``conn`` is known to be a Connection."""
    validate_component(agent_code, "agent code")
    row = run_statement(conn, select_agent(agent_code), "reading an agent").first()
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
    check_arguments(conn=conn)
    return [_config(r) for r in run_statement(conn, select_agents(), "listing agents")]


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
    :mod:`dbmemory.store.caps`): the agent's own stores (``agent:<A>``, user stores ``user:<A>:*``,
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
    check_arguments(conn=conn)
    refuse_reserved_names(agent_code, scope, store_code)
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

    now = utcnow()
    with write_unit(conn, "saving an agent"):
        row = run_statement(conn, select_agent(agent_code, for_update=True), "reading an agent").first()
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
            run_statement(conn, insert_agent(values), "saving an agent")
        else:
            run_statement(conn, update_agent(agent_code, values), "saving an agent")
        changed = 0
        if named is not None:
            key, is_prefix = named
            owned = scope in ("agent", "user") or (scope == "context" and store_code is None)
            store_caps = caps if owned else _strictest_configured(conn, scope, store_code, named)
            changed = run_statement(
                conn,
                update_configured_store_caps(
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
        audit(
            conn,
            [
                audit_event(
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
            ends with :func:`~dbmemory.store.drop.end_session`), nor a store-code context store, nor a store of the
            package's reserved namespace (user profiles).

    Returns:
        The number of stores dropped (0 without ``drop_store``).

    Raises:
        InvalidScopeError: invalid agent code (checked before any SQL).
        NotFoundError: the agent has no configuration.
        InvalidArgumentError: ``drop_store`` is not a bool; ``conn`` not a Connection.
    """
    check_arguments(conn=conn, drop_store=drop_store)
    get_agent_config(conn, agent_code)
    with write_unit(conn, "saving an agent"):
        run_statement(
            conn,
            update_agent(agent_code, {"memory_enabled": False, "updated_at": utcnow()}),
            "saving an agent",
        )
        audit(conn, [audit_event(None, None, None, "agent_disable", "admin", None, None, agent_code)])
        dropped = 0
        if drop_store:
            dropped = drop_stores(conn, own_store_ids(conn, agent_code))
    return dropped


def _strictest_configured(
    conn: Connection, scope: str, store_code: str | None, named: tuple[str, bool]
) -> Caps:
    """The strictest caps among the enabled configurations that name the same stores as
    ``named`` (a shared, global or store-code context configuration)."""
    rows = run_statement(
        conn, select_configured_caps(scope, None, store_code), "reading agent configurations"
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
    check_arguments(conn=conn, store=store, actor=actor)
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
    with savepoint(conn, "setting a store's caps"):
        store_id, store_key, old, _counts = lock_store_caps(conn, store)
        conn.execute(
            SET_STORE_CAPS,
            {
                "p_sid": store_id,
                "p_max_file_chars": caps.max_file_chars,
                "p_max_files": caps.max_files,
                "p_max_store_chars": caps.max_store_chars,
                "p_now": utcnow(),
            },
        )
        audit(
            conn,
            [
                audit_event(
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


