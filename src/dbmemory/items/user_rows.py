"""Where one user's rows are: the registry of every table (:data:`USER_ROWS`,
:data:`NO_USER_DATA`) that :func:`dbmemory.items.export_user` and
:func:`dbmemory.items.forget_user` follow, and the store keys that belong to a user.

Every table a migration creates is in exactly one of the two mappings (a test reflects a
migrated database of each backend and fails on a table in neither). A new table that holds a
user's rows or text needs an entry in :data:`USER_ROWS`, and the export and the forget need the
code that reaches it.

The stores of a user (:func:`user_store_kind` says which kind a key is, ``None`` for a store
that is not the user's):

* ``profile``: ``reserved:profile:<root folder>:<encoded user id>``;
* ``user``: ``user:<AGENT>:<user id>`` of every agent;
* ``context``: ``context:<AGENT>:<K>:<user id>`` and ``context:store:<CODE>:<K>:<user id>``
  whose context key ``K`` is one of :data:`CONTEXT_USER_KEYS`;
* ``session``: ``session:<chat id>`` for each chat id the user's items, episodes or extraction
  marks record in the organisation (the turn's session id is the chat id);
* ``langgraph``: the LangGraph namespaces ``(<L>, <user id>, ...)`` whose first label ``L`` is
  one of :data:`LANGGRAPH_USER_LABELS` (store keys ``shared:lg.<L>.<encoded user id>`` and
  those under it, encoded as :mod:`dbmemory.integrations.langgraph` does).

Store keys carry the user id as the host passed it (a store-key component ``[A-Za-z0-9_.-]``;
a LangGraph label any text, escaped), the profile the encoded id
(:func:`dbmemory.profile.store.encode_user_id`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import sqlalchemy as sa

from dbmemory.core.escapes import escape
from dbmemory.core.keys import parse_store_key, validate_component
from dbmemory.errors import InvalidScopeError
from dbmemory.items.model import user_key_of

__all__ = [
    "CONTEXT_USER_KEYS",
    "LANGGRAPH_USER_LABELS",
    "UserRows",
    "USER_ROWS",
    "NO_USER_DATA",
    "UserKeys",
    "user_keys",
    "user_store_kind",
    "store_key_rule",
]

CONTEXT_USER_KEYS: tuple[str, ...] = ("user", "user_id")
"""Context keys whose value is a user id: context stores under them belong to that user."""

LANGGRAPH_USER_LABELS: tuple[str, ...] = ("users", "user", "user_id")
"""First labels of the LangGraph namespaces whose second label is a user id: ``("users",
<id>)`` and every namespace under it belong to that user."""

_LG_PREFIX = "shared:lg."
_LG_LABEL_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
"""The LangGraph store's label alphabet (:mod:`dbmemory.integrations.langgraph.codec`; a test
checks both encode alike)."""


class UserRows(NamedTuple):
    """How one table holds a user's rows.

    Attributes:
        table: the table name.
        found_by: which rows are the user's.
        on_forget: what :func:`~dbmemory.items.forget_user` does with them (``delete``,
            ``redact``: content-free columns kept, file names removed).
        exported_as: where :func:`~dbmemory.items.export_user` puts them.
    """

    table: str
    found_by: str
    on_forget: str
    exported_as: str


USER_ROWS: dict[str, UserRows] = {
    r.table: r
    for r in (
        UserRows("dbm_stores", "the user's stores (profile, user, context, session, langgraph)",
                 "delete", "profile[].store_key, stores[].store_key"),
        UserRows("dbm_files", "store_id of the user's stores", "delete", "profile[].files, stores[].files"),
        UserRows("dbm_file_reads", "file_id of the files of the user's stores", "delete",
                 "files[].read_at"),
        UserRows("dbm_items", "org_id and user_key (encoded id)", "delete", "items"),
        UserRows("dbm_episodes", "org_id and user_key", "delete", "episodes"),
        UserRows("dbm_episodes_fts", "SQLite FTS5 rows of the user's episodes (rowid = episode_id)",
                 "delete (trigger), then the index is optimised", "episodes"),
        UserRows("dbm_episodes_fts_data", "SQLite FTS5 segments holding the episodes' terms",
                 "rewritten without them (FTS5 optimize)", "episodes"),
        UserRows("dbm_episodes_fts_idx", "SQLite FTS5 segment index of those terms",
                 "rewritten without them (FTS5 optimize)", "episodes"),
        UserRows("dbm_episodes_fts_docsize", "SQLite FTS5 sizes per episode (rowid)",
                 "delete (trigger)", "episodes"),
        UserRows("dbm_memory_switches", "org_id and user_key", "delete", "switches.memory_switch_on"),
        UserRows("dbm_user_settings", "user_key", "delete", "switches.profile_memory_enabled"),
        UserRows("dbm_item_marks", "org_id and user_key (mark_key holds chat ids)", "delete", "marks"),
        UserRows("dbm_audit_events", "user_key, or a store_key of the user's stores (past ones too)",
                 "redact: file_path and the file events' detail_text (a rename's target) are "
                 "cleared; action, actor, sizes, times, user_key and store_key stay",
                 "audit_events"),
    )
}
"""Every table that holds a user's rows or text, by name."""

NO_USER_DATA: dict[str, str] = {
    "dbm_agents": "agent configurations (codes, scopes, caps)",
    "dbm_org_settings": "organisation settings (names and values)",
    "dbm_job_locks": "one row per scheduled job",
    "dbm_alembic_version": "the schema revision",
    "dbm_episodes_fts_config": "SQLite FTS5 configuration of the index",
}
"""Every table that holds no user's rows, by name, with what it holds instead."""


class UserKeys(NamedTuple):
    """The forms of one user's id in store keys: ``user_key`` (encoded), ``raw`` (the id as a
    store-key component, or None when it is none), ``label`` (escaped as a LangGraph label),
    ``chats`` (the chat ids recorded for the user)."""

    user_key: str
    raw: str | None
    label: str
    chats: frozenset[str]


def user_keys(user_id: str, chats: Iterable[str] = ()) -> UserKeys:
    """The :class:`UserKeys` of ``user_id`` (``chats``: its chat ids; invalid ones dropped).

    Raises:
        InvalidScopeError: invalid user id.
    """
    key = user_key_of(user_id)
    try:
        raw: str | None = validate_component(user_id, "user id")
    except InvalidScopeError:
        raw = None  # no agent store can carry it
    valid = set()
    for chat in chats:
        try:
            valid.add(validate_component(chat, "chat id"))
        except InvalidScopeError:
            continue
    return UserKeys(key, raw, escape(user_id, _LG_LABEL_SAFE), frozenset(valid))


def _suffix_match(column: Any, suffix: str) -> Any:
    """SQL: ``column`` ends with ``suffix`` exactly (no LIKE: ``_`` would be a wildcard)."""
    n = len(suffix)
    return sa.and_(
        sa.func.length(column) > n,
        sa.func.substr(column, sa.func.length(column) - n + 1) == suffix,
    )


def _prefix_match(column: Any, prefix: str) -> Any:
    return sa.func.substr(column, 1, len(prefix)) == prefix


def _lg_keys(keys: UserKeys) -> list[str]:
    return [f"{_LG_PREFIX}{label}.{keys.label}" for label in LANGGRAPH_USER_LABELS]


def store_key_rule(column: Any, keys: UserKeys) -> Any:
    """SQL: ``column`` (a store key) may be one of the user's stores; a superset, told apart
    by :func:`user_store_kind`."""
    rules = [_suffix_match(column, ":" + keys.user_key)]
    if keys.raw is not None:
        rules.append(_suffix_match(column, ":" + keys.raw))
    rules.extend(column == f"session:{chat}" for chat in sorted(keys.chats))
    for lg in _lg_keys(keys):
        rules.append(column == lg)
        rules.append(_prefix_match(column, lg + "."))
    return sa.or_(*rules)


def user_store_kind(store_key: str, keys: UserKeys) -> str | None:
    """``profile``, ``items``, ``user``, ``context``, ``session`` or ``langgraph`` when the store
    key is one of the user's (see the module doc), else None."""
    if store_key.startswith(_LG_PREFIX):
        if any(store_key == lg or store_key.startswith(lg + ".") for lg in _lg_keys(keys)):
            return "langgraph"
        return None
    try:
        parts = parse_store_key(store_key)
    except InvalidScopeError:
        return None
    last = parts.components[-1] if parts.components else None
    if parts.scope == "reserved":
        return parts.kind if parts.kind in ("profile", "items") and last == keys.user_key else None
    if parts.scope == "session":
        return "session" if last in keys.chats else None
    if keys.raw is None or last != keys.raw:
        return None
    if parts.scope == "user":
        return "user"
    if parts.scope == "context" and parts.components[-2] in CONTEXT_USER_KEYS:
        return "context"
    return None
