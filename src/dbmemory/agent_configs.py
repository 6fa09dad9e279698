"""Agent configurations as stored: :func:`get_agent_config`, :func:`list_agents`, and the names
no configuration may use (:func:`_refuse_reserved_names`).

Each function takes a SQLAlchemy ``Connection`` first and never commits. The writers
(:func:`dbmemory.stores.enable_for_agent`, :func:`~dbmemory.stores.disable_for_agent`) live in
:mod:`dbmemory.stores`, which re-exports every name of this module.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory import statements as st
from dbmemory import validate as _v
from dbmemory.db import dialect
from dbmemory.errors import InvalidScopeError, NotFoundError
from dbmemory.keys import RESERVED_SCOPE, SCOPES, validate_component
from dbmemory.model import AgentConfig, Caps

__all__ = ["get_agent_config", "list_agents"]


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
