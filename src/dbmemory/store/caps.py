"""Caps belong to the store: the rule, and the helpers that apply it.

The rule (docs/transactions.md, caps):

* A store's caps are the values on its row (``dbm_stores.max_file_chars``, ``max_files``,
  ``max_store_chars``; ``NULL`` = no cap on the store's characters). Every write path (any
  agent's MEMORY tool, ``use_store``, ``MemoryTool.for_store``, ``dbmemory tool --shared``,
  ``dbmemory files put``, the admin API in :mod:`dbmemory.store.files`, the profile writes) reads them
  from the row it locks and enforces them; no writer brings its own. The only bypass is the
  admin upsert ``files.put_file(..., enforce_caps=False)`` (``dbmemory files put --no-caps``).
* When a write creates a store row, the row's caps come from the store's configuration: the
  :class:`~dbmemory.core.model.StoreRef`'s ``caps`` when it was built from an agent configuration
  (or given explicitly); for a StoreRef made without caps (``use_store``, ``for_store``,
  ``dbmemory tool --shared``, ``files put`` on a new key, a hand-made one) the strictest caps
  among the enabled agent configurations that name that store, else the defaults
  (100,000 / 1,000 / no cap).
* :func:`dbmemory.enable_for_agent` sets the caps on its configuration and on the existing
  stores that configuration names, in the same transaction: its own stores (agent, user,
  agent-keyed context) get its caps; stores several configurations can name (shared,
  store-code context, global) get the strictest caps among the enabled configurations naming
  them. A cap left out (``None``) is the default, not the previous value.
  :func:`dbmemory.set_store_caps` sets one store's caps (an admin override).
* Lowering caps below what a store already holds keeps the content: a write that would grow a
  file or the store past a cap (or add a file past ``max_files``) is refused; writes that do not
  grow it (edits that shrink, deletes, renames) still work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Connection

from dbmemory.core.keys import build_store_key
from dbmemory.core.model import DEFAULT_MAX_FILE_CHARS, DEFAULT_MAX_FILES, Caps, StoreRef
from dbmemory.errors import DbMemoryError
from dbmemory.store.statements.bulk import select_configured_caps

__all__ = [
    "caps_of_row",
    "caps_values",
    "configured_store_key",
    "names_store",
    "strictest_caps",
    "creation_caps",
]

_PLACEHOLDER = "x"


def caps_of_row(row: Any) -> Caps:
    """The :class:`Caps` held on a store row (columns ``max_file_chars``, ``max_files``,
    ``max_store_chars``)."""
    m = row._mapping
    values = (m["max_file_chars"], m["max_files"], m["max_store_chars"])
    if not (type(values[0]) is int and type(values[1]) is int
            and (values[2] is None or type(values[2]) is int)):
        return Caps(max_file_chars=values[0], max_files=values[1], max_store_chars=values[2])
    caps = _ROW_CAPS.get(values)
    if caps is None:
        caps = Caps(max_file_chars=values[0], max_files=values[1], max_store_chars=values[2])
        if len(_ROW_CAPS) >= 256:
            _ROW_CAPS.clear()
        _ROW_CAPS[values] = caps
    return caps


_ROW_CAPS: dict[tuple[Any, Any, Any], Caps] = {}
"""The (immutable, validated) :class:`Caps` per distinct triple of row values: stores share a
handful of cap settings, so a write builds no new Caps."""


def caps_values(caps: Caps) -> dict[str, Any]:
    """Column values of ``caps`` for a store or agent row."""
    return {
        "max_file_chars": caps.max_file_chars,
        "max_files": caps.max_files,
        "max_store_chars": caps.max_store_chars,
    }


def configured_store_key(
    scope: str, agent_code: str, store_code: str | None, context_key: str | None
) -> tuple[str, bool] | None:
    """Which stores an agent configuration names: ``(key, False)`` for one store, ``(prefix,
    True)`` for every store whose key starts with ``prefix`` (user stores ``user:<A>:``,
    context stores ``context:<A>:<KEY>:`` or ``context:store:<CODE>:<KEY>:``), or ``None`` for
    session scope (session stores are short-lived and shared by whoever runs the session: they
    keep the caps they were created with).

    Built with :func:`dbmemory.core.keys.build_store_key` and a placeholder for the part that varies,
    so it follows the key format."""
    if scope == "session":
        return None
    if scope == "user":
        key = build_store_key("user", agent_code=agent_code, user_id=_PLACEHOLDER)
        return key[: -len(_PLACEHOLDER)], True
    if scope == "context":
        key = build_store_key(
            "context",
            agent_code=agent_code,
            store_code=store_code,
            context_key=context_key,
            context_value=_PLACEHOLDER,
        )
        return key[: -len(_PLACEHOLDER)], True
    return build_store_key(scope, agent_code=agent_code, store_code=store_code), False


def names_store(config: Mapping[Any, Any], store_key: str) -> bool:
    """Whether the agent configuration ``config`` (a row mapping of ``dbm_agents``) names the
    store ``store_key``."""
    try:
        named = configured_store_key(
            config["scope_name"], config["agent_code"], config["store_code"], config["context_key"]
        )
    except DbMemoryError:  # a row that no longer builds a key names nothing
        return False
    if named is None:
        return False
    key, is_prefix = named
    return store_key.startswith(key) if is_prefix else store_key == key


def strictest_caps(rows: list[Mapping[str, Any]]) -> Caps:
    """The strictest caps among configuration rows (the smallest of each cap; ``None`` on
    ``max_store_chars`` is no cap); the defaults when ``rows`` is empty."""
    if not rows:
        return Caps()
    limits = [r["max_store_chars"] for r in rows if r["max_store_chars"] is not None]
    return Caps(
        max_file_chars=min((r["max_file_chars"] for r in rows), default=DEFAULT_MAX_FILE_CHARS),
        max_files=min((r["max_files"] for r in rows), default=DEFAULT_MAX_FILES),
        max_store_chars=min(limits) if limits else None,
    )


def creation_caps(conn: Connection, store: StoreRef) -> Caps:
    """The caps a new row for ``store`` gets.

    * A store only its own agent names (agent, user, agent-keyed context, session): ``store.caps``
      (that agent's configuration) when set.
    * A store several configurations can name (shared, global, store-code context), and any
      store whose ``store.caps`` is ``None``: the strictest caps among the enabled agent
      configurations that name it, together with ``store.caps`` when set, so the writer that
      happens to create the row never loosens another configuration's caps; the defaults when
      nothing names it.

    One ``SELECT`` of the configurations (only when a store row is created)."""
    if store.caps is not None and not _several_may_name(store):
        return store.caps
    stmt = select_configured_caps(store.scope, store.agent_code, store.store_code)
    rows: list[Mapping[Any, Any]] = [
        r._mapping for r in conn.execute(stmt) if names_store(r._mapping, store.store_key)
    ]
    if store.caps is not None:
        rows.append(caps_values(store.caps))
    return strictest_caps(rows)


def _several_may_name(store: StoreRef) -> bool:
    return store.scope in ("shared", "global") or (
        store.scope == "context" and store.store_code is not None
    )
