"""Dropping stores with their files: :func:`drop_stores` (by id; store rows locked first, in key
order), :func:`end_session` (the session's store), and the stores an agent owns
(:func:`own_store_ids`: ``agent:A``, ``user:A:*``, ``context:A:*:*`` by exact key, never a
shared, global or session store; for :func:`dbmemory.store.agents.disable_for_agent`).

Each function takes a SQLAlchemy ``Connection`` first and never commits; every drop writes one
audit event per store in the same transaction."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from dbmemory.core.arguments import check_arguments
from dbmemory.core.keys import build_store_key, parse_store_key
from dbmemory.errors import InvalidArgumentError, InvalidScopeError
from dbmemory.store.audit import audit, audit_event
from dbmemory.store.locks import find_store_id
from dbmemory.store.statements.bulk import (
    delete_stores_by_id,
    id_chunks,
    lock_stores_by_key,
    select_store_keys,
    select_store_totals,
    select_stores_of_agent,
)
from dbmemory.store.units import run_statement, write_unit

__all__ = [
    "drop_stores",
    "end_session",
    "own_store_ids",
]


def _store_ids(store_ids: object) -> list[int]:
    """``store_ids`` as a sorted list without duplicates; refuse what is not whole numbers."""
    if isinstance(store_ids, (str, bytes)) or not hasattr(store_ids, "__iter__"):
        raise InvalidArgumentError(
            f"store_ids must be a list of store ids, got {type(store_ids).__name__}: pass e.g. [7]"
        )
    ids = list(store_ids)
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
    check_arguments(conn=conn, actor=actor)
    ids = _store_ids(store_ids)
    if not ids:
        return 0
    wanted = set(ids)
    with write_unit(conn, "dropping stores"):
        named: dict[str, int] = {}
        for chunk in id_chunks(ids):
            for row in run_statement(conn, select_store_keys(chunk), "dropping stores"):
                named[row.store_key] = row.store_id
        keys: dict[int, str] = {}
        for key_chunk in id_chunks(sorted(named)):
            # ascending keys across and within chunks; a key now naming another (re-created)
            # store is locked but not dropped
            for row in run_statement(conn, lock_stores_by_key(key_chunk), "dropping stores"):
                if row.store_id in wanted:
                    keys[row.store_id] = row.store_key
        if not keys:
            return 0
        chunks = id_chunks(sorted(keys))
        totals: dict[int, tuple[int, int]] = {}
        for chunk in chunks:
            for r in run_statement(conn, select_store_totals(chunk), "dropping stores"):
                totals[r.store_id] = (int(r.file_count), int(r.total_chars))
        for chunk in chunks:
            for stmt in delete_stores_by_id(chunk):
                run_statement(conn, stmt, "dropping stores")
        audit(
            conn,
            [
                audit_event(
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


def own_store_ids(conn: Connection, agent_code: str) -> list[int]:
    """Ids of the stores ``agent_code`` owns, chosen by exact key (never by the ``agent_code``
    column, which any writer sets): ``agent:<A>``, ``user:<A>:*`` and the agent-keyed context
    stores ``context:<A>:<KEY>:<VALUE>`` (a store-code key ``context:store:...`` of an agent
    named ``store`` is told apart by its part count)."""
    rows = run_statement(conn, select_stores_of_agent(agent_code), "dropping stores").all()
    own: list[int] = []
    for row in rows:
        try:
            parts = parse_store_key(row.store_key)
        except InvalidScopeError:  # a key no version of dbmemory builds: not the agent's
            continue
        if parts.scope in ("agent", "user", "context") and parts.agent_code == agent_code:
            own.append(row.store_id)
    return own


def end_session(conn: Connection, session_id: str) -> int:
    """Drop the session's store with its files. Returns 1 if it existed, else 0."""
    check_arguments(conn=conn)
    key = build_store_key("session", session_id=session_id)
    store_id = find_store_id(conn, key)
    return drop_stores(conn, [store_id], actor="end_session") if store_id is not None else 0
