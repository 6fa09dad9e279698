"""Statements of the expiry, the admin paths and agent configuration: the bulk and cross-store
statements, apart from the hot-path ones of :mod:`dbmemory.store.statements.reads` and
:mod:`dbmemory.store.statements.writes`. Stores by agent, key or id, locked and dropped in
chunks (:func:`id_chunks`, :func:`lock_stores_by_id`, :func:`delete_stores_by_id`), the caps of
configured stores (:func:`select_configured_caps`), the expiry rule and its batch
(:func:`expiry_rule`, :func:`select_expiry_candidates`, ``DELETE_EXPIRED``,
``INSERT_EXPIRED_AUDIT``, ``UNCOUNT_EXPIRED_JOIN``), and the agent rows (:func:`select_agent`,
:func:`insert_agent`, :func:`update_agent`).

Pure builders, no connection; ``IN`` lists of at most :data:`MAX_IN_LIST` values (Oracle's
limit). The executors are :mod:`dbmemory.store.expiry`, :mod:`dbmemory.store.drop`,
:mod:`dbmemory.store.agents` and :mod:`dbmemory.store.caps`; :mod:`dbmemory.sqlgen` renders
:func:`expiry_rule` into the in-database jobs."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.sql.expression import ColumnElement, Executable

from dbmemory.db.dialect.expiry import (
    expiry_candidates,
    file_read_upsert,
    lock_expiry_candidates,
)
from dbmemory.db.dialect.oracle import oracle19_dialect
from dbmemory.db.schema import EXPIRY_LOCK, agents, file_reads, files, job_locks, stores
from dbmemory.store.statements.reads import (
    INSERT_FILE_READ,
    SELECT_FILE_ALIVE,
    SELECT_FILE_READ,
    SELECT_FILE_READ_BY_KEY,
    TS,
    UPDATE_FILE_READ,
    bp,
    with_values,
)
from dbmemory.store.statements.writes import audit_of_removed_files

_V = TypeVar("_V", int, str)  # store ids or store keys

__all__ = [
    "MAX_IN_LIST",
    "id_chunks",
    "select_stores_of_agent",
    "lock_stores_by_id",
    "select_store_keys",
    "lock_stores_by_key",
    "select_store_totals",
    "delete_stores_by_id",
    "select_configured_caps",
    "update_configured_store_caps",
    "SELECT_JOB_LOCK",
    "expiry_rule",
    "select_expiry_candidates",
    "DELETE_EXPIRED",
    "INSERT_EXPIRED_AUDIT",
    "UNCOUNT_EXPIRED_JOIN",
    "SELECT_FILES_LEFT",
    "SELECT_STORE_KEYS",
    "DELETE_FILE_READS_BY_ID",
    "select_orphan_reads",
    "count_expirable",
    "select_agent",
    "select_agents",
    "insert_agent",
    "update_agent",
    "touch_and_expiry_examples",
]


# -- stores (admin paths) ---------------------------------------------------------------------


MAX_IN_LIST = 1_000
"""Most values in one ``IN (...)`` list: Oracle refuses more (ORA-01795)."""


def id_chunks(ids: Sequence[_V], size: int = MAX_IN_LIST) -> list[list[_V]]:
    """``ids`` cut into consecutive lists of at most ``size`` (<= :data:`MAX_IN_LIST`) values,
    order kept."""
    if not 0 < size <= MAX_IN_LIST:
        raise ValueError(f"chunk size {size} must be between 1 and {MAX_IN_LIST}")
    values = list(ids)
    return [values[i : i + size] for i in range(0, len(values), size)]


def _id_list(store_ids: Sequence[int]) -> list[int]:
    ids = list(store_ids)
    if not 0 < len(ids) <= MAX_IN_LIST:
        raise ValueError(
            f"{len(ids)} ids in one IN list: pass 1 to {MAX_IN_LIST} (cut them with id_chunks)"
        )
    return ids


def _starts_with(column: ColumnElement[str], prefix: str) -> ColumnElement[bool]:
    """Exact prefix test ``SUBSTR(column, 1, n) = :prefix`` (never LIKE: ``_`` and ``%`` are
    wildcards, and agent codes contain ``_``)."""
    return sa.func.substr(column, 1, len(prefix)) == prefix


def select_stores_of_agent(agent_code: str) -> sa.Select[Any]:
    """Candidate stores an agent owns, by exact key: ``agent:<A>``, and the keys starting with
    ``user:<A>:`` or ``context:<A>:``, by ascending id. Never chosen by the ``agent_code``
    column (any writer sets it). The caller keeps only the keys whose parsed agent code is
    ``<A>`` (:func:`dbmemory.store.agents.disable_for_agent`), which tells an agent named ``store``
    from the store-code context keys ``context:store:<CODE>:...``."""
    return (
        sa.select(stores.c.store_id, stores.c.store_key)
        .where(
            sa.or_(
                stores.c.store_key == f"agent:{agent_code}",
                _starts_with(stores.c.store_key, f"user:{agent_code}:"),
                _starts_with(stores.c.store_key, f"context:{agent_code}:"),
            )
        )
        .order_by(stores.c.store_id)
    )


def lock_stores_by_id(store_ids: Sequence[int]) -> sa.Select[Any]:
    """Lock the store rows of at most 1,000 ids, in ascending id order (``SELECT store_id,
    store_key ... WHERE store_id IN (...) ORDER BY store_id FOR UPDATE``): the first step of a
    drop, in the writers' lock order (store row, then file rows)."""
    return (
        sa.select(stores.c.store_id, stores.c.store_key)
        .where(stores.c.store_id.in_(_id_list(store_ids)))
        .order_by(stores.c.store_id)
        .with_for_update()
    )


def select_store_keys(store_ids: Sequence[int]) -> sa.Select[Any]:
    """``store_id`` and ``store_key`` of at most 1,000 ids (no lock)."""
    return sa.select(stores.c.store_id, stores.c.store_key).where(
        stores.c.store_id.in_(_id_list(store_ids))
    )


def lock_stores_by_key(store_keys: Sequence[str]) -> sa.Select[Any]:
    """Lock the store rows of at most 1,000 keys, in ascending key order, through the unique
    key index (``SELECT store_id, store_key ... WHERE store_key IN (...) ORDER BY store_key
    FOR UPDATE``). On MySQL/MariaDB this locks the key-index entry, then the row: the order of
    a first writer's ``INSERT ... ON DUPLICATE KEY UPDATE``, so a drop never holds the row while
    waiting for the key entry that writer holds (a deadlock)."""
    keys = list(store_keys)
    if not 0 < len(keys) <= MAX_IN_LIST:
        raise ValueError(f"{len(keys)} keys in one IN list: pass 1 to {MAX_IN_LIST}")
    return (
        sa.select(stores.c.store_id, stores.c.store_key)
        .where(stores.c.store_key.in_(keys))
        .order_by(stores.c.store_key)
        .with_for_update()
    )


def select_store_totals(store_ids: Sequence[int]) -> sa.Select[Any]:
    """Per store of at most 1,000 ids: number of files and characters (for audit events of a
    drop)."""
    return (
        sa.select(
            files.c.store_id,
            sa.func.count().label("file_count"),
            sa.func.coalesce(sa.func.sum(files.c.char_count), 0).label("total_chars"),
        )
        .where(files.c.store_id.in_(_id_list(store_ids)))
        .group_by(files.c.store_id)
    )


def delete_stores_by_id(store_ids: Sequence[int]) -> tuple[sa.Delete, sa.Delete]:
    """Delete the files, then the rows, of at most 1,000 stores (two statements; no reliance on
    ``ON DELETE CASCADE`` being enabled, e.g. SQLite without ``PRAGMA foreign_keys``). Lock the
    store rows first (:func:`lock_stores_by_id`)."""
    ids = _id_list(store_ids)
    return (
        sa.delete(files).where(files.c.store_id.in_(ids)),
        sa.delete(stores).where(stores.c.store_id.in_(ids)),
    )


def select_configured_caps(
    scope: str, agent_code: str | None, store_code: str | None
) -> sa.Select[Any]:
    """Enabled agent configurations that may name a new store of ``scope``: those with the same
    store code (shared, store-code context), every global one, or those of ``agent_code``
    (agent, user, agent-keyed context, session). Columns: ``agent_code``, ``scope_name``,
    ``store_code``, ``context_key`` and the three caps; the caller keeps the rows whose
    configuration really names the store (:func:`dbmemory.store.caps.names_store`)."""
    stmt = sa.select(
        agents.c.agent_code,
        agents.c.scope_name,
        agents.c.store_code,
        agents.c.context_key,
        agents.c.max_file_chars,
        agents.c.max_files,
        agents.c.max_store_chars,
    ).where(agents.c.memory_enabled == sa.true(), agents.c.scope_name == scope)
    if store_code is not None:
        return stmt.where(agents.c.store_code == store_code)
    if scope == "global":
        return stmt
    return stmt.where(agents.c.agent_code == (agent_code or ""), agents.c.store_code.is_(None))


def update_configured_store_caps(
    *,
    scope: str,
    key: str,
    is_prefix: bool,
    agent_code: str | None,
    store_code: str | None,
    caps: dict[str, Any],
    now: dt.datetime,
) -> sa.Update:
    """Set ``caps`` on the existing stores an agent configuration names: the store ``key``, or
    every store whose key starts with ``key`` when ``is_prefix`` (an exact ``SUBSTR`` match,
    never ``LIKE``), of that scope and owner (``agent_code`` / ``store_code`` columns, ``None``
    = must be NULL; not checked for ``shared`` and ``global``, whose key says it all)."""
    if is_prefix:
        match: ColumnElement[bool] = sa.func.substr(stores.c.store_key, 1, len(key)) == key
    else:
        match = stores.c.store_key == key
    conditions = [match, stores.c.scope_name == scope]
    if scope not in ("shared", "global"):
        conditions.append(
            stores.c.agent_code.is_(None) if agent_code is None else stores.c.agent_code == agent_code
        )
        conditions.append(
            stores.c.store_code.is_(None) if store_code is None else stores.c.store_code == store_code
        )
    return sa.update(stores).where(*conditions).values(**caps, updated_at=now)


# -- expiry -----------------------------------------------------------------------------------
#
# The rule, in one place (mirrored by the generated procedures of dbmemory.sqlgen): a file
# expires when it is not exempt, its last write (``last_accessed_at``) is older than the cutoff,
# and no read of it at or after the cutoff is recorded in ``dbm_file_reads``. The cutoff is
# ``now - days - TOUCH_INTERVAL`` (:func:`dbmemory.store.expiry.expiry_cutoff`).


_CUTOFF = bp("p_cutoff", type_=TS)


SELECT_JOB_LOCK = sa.select(job_locks.c.lock_name).where(job_locks.c.lock_name == EXPIRY_LOCK)
"""The expiry's row of ``dbm_job_locks``; :func:`dbmemory.db.dialect.expiry.job_lock` adds the lock
(exclusive for an expiry batch, shared for a read's touch)."""


def expiry_rule(cutoff: Any = _CUTOFF) -> ColumnElement[bool]:
    """The expiry rule on ``dbm_files`` for ``cutoff`` (default the bind ``:p_cutoff``)."""
    return sa.and_(
        files.c.expiry_exempt == sa.false(),
        files.c.last_accessed_at < cutoff,
        ~sa.exists().where(
            file_reads.c.file_id == files.c.file_id, file_reads.c.read_at >= cutoff
        ),
    )


def select_expiry_candidates(by_store: bool) -> sa.Select[Any]:
    """Files matching the rule at ``:p_cutoff`` (of store ``:p_sid`` when ``by_store``), with
    what their audit events need: id, store id, path, size. The executor adds the batch limit
    and ``FOR UPDATE SKIP LOCKED`` of the file rows only
    (:func:`dbmemory.db.dialect.expiry.lock_expiry_candidates`)."""
    stmt = sa.select(
        files.c.file_id, files.c.store_id, files.c.file_path, files.c.char_count
    ).where(expiry_rule())
    if by_store:
        stmt = stmt.where(files.c.store_id == bp("p_sid"))
    return stmt


_IDS: sa.BindParameter[Any] = bp("p_ids", expanding=True)

DELETE_EXPIRED = sa.delete(files).where(files.c.file_id.in_(_IDS), expiry_rule())
"""Delete the candidates ``:p_ids`` (at most 1,000: Oracle's IN-list limit) that still match
the rule at ``:p_cutoff``: the delete carries the rule, so a file written or read since the
candidates were chosen stays."""

INSERT_EXPIRED_AUDIT = audit_of_removed_files(
    files.c.file_id.in_(_IDS), expiry_rule(), by_id=True
).execution_options(preserve_rowcount=True)  # an INSERT's rowcount is not kept otherwise
"""The ``expire`` audit events of the candidates ``:p_ids`` that still match the rule at
``:p_cutoff`` (action ``:p_action``, actor ``:p_actor``, ``created_at = :p_now``), built in
the database from the file and store rows, by file id, just before :data:`DELETE_EXPIRED`
deletes the same rows (the batch holds their store rows and the expiry lock, so nothing can
change them in between; the executor checks that both counts agree)."""

_EXPIRED_PER_STORE = (
    sa.select(
        files.c.store_id,
        sa.func.count().label("n_files"),
        sa.func.sum(files.c.char_count).label("n_chars"),
    )
    .where(files.c.file_id.in_(_IDS), expiry_rule())
    .group_by(files.c.store_id)
    .subquery("expired")
)
UNCOUNT_EXPIRED_JOIN = (
    sa.update(stores.join(_EXPIRED_PER_STORE, _EXPIRED_PER_STORE.c.store_id == stores.c.store_id))
    .where(stores.c.store_id.in_(bp("p_sids", expanding=True)))
    .values(
        {
            stores.c.file_count: stores.c.file_count - _EXPIRED_PER_STORE.c.n_files,
            stores.c.total_chars: stores.c.total_chars - _EXPIRED_PER_STORE.c.n_chars,
            stores.c.updated_at: bp("p_now", type_=TS),
        }
    )
)
"""Take the candidates ``:p_ids`` that still match the rule at ``:p_cutoff`` out of their
stores' counters, all stores of the batch in one statement: ``UPDATE dbm_stores INNER JOIN
(SELECT store_id, COUNT(*), SUM(char_count) ... GROUP BY store_id) ... WHERE store_id IN
(:p_sids)`` (the store rows the batch holds: without it InnoDB would scan, and wait for, every
store row), run just before
:data:`DELETE_EXPIRED` deletes the same rows, under the store locks the batch holds. Rowcount:
the number of stores moved. MySQL/MariaDB only
(:func:`dbmemory.db.dialect.writes.one_statement_store_moves`: PyMySQL sends an ``UPDATE``
executemany as one round trip per store)."""

SELECT_FILES_LEFT = sa.select(files.c.file_id).where(files.c.file_id.in_(_IDS))
"""Which of ``:p_ids`` still exist (after :data:`DELETE_EXPIRED`, where the backend has no
``DELETE ... RETURNING``)."""

SELECT_STORE_KEYS = sa.select(stores.c.store_id, stores.c.store_key).where(
    stores.c.store_id.in_(bp("p_sids", expanding=True))
)
"""Store keys of ``:p_sids`` for audit events (no lock: writers lock store rows)."""

DELETE_FILE_READS_BY_ID = sa.delete(file_reads).where(file_reads.c.file_id.in_(_IDS))
"""Forget the recorded reads of deleted files ``:p_ids``."""


def select_orphan_reads() -> sa.Select[Any]:
    """Recorded reads older than ``:p_cutoff`` whose file no longer exists (a store drop, a
    delete); the executor adds the chunk limit and ``SKIP LOCKED``."""
    return sa.select(file_reads.c.file_id).where(
        file_reads.c.read_at < _CUTOFF,
        ~sa.exists().where(files.c.file_id == file_reads.c.file_id),
    )


def count_expirable(by_store: bool) -> sa.Select[Any]:
    """How many files match the rule at ``:p_cutoff`` (of store ``:p_sid`` when ``by_store``)."""
    stmt = sa.select(sa.func.count()).select_from(files).where(expiry_rule())
    if by_store:
        stmt = stmt.where(files.c.store_id == bp("p_sid"))
    return stmt


# -- agents -----------------------------------------------------------------------------------


def select_agent(agent_code: str, *, for_update: bool = False) -> sa.Select[Any]:
    """One agent configuration row.

    Read at the start of every turn: the statement of an agent code is built once and reused
    (a reused statement also skips SQLAlchemy's per-object cache-key walk); statements are
    immutable, so sharing them is safe.
    """
    if type(agent_code) is str and len(agent_code) <= 200:
        return _select_agent_cached(agent_code, for_update)
    return _build_select_agent(agent_code, for_update)


def _build_select_agent(agent_code: str, for_update: bool) -> sa.Select[Any]:
    stmt = sa.select(agents).where(agents.c.agent_code == agent_code)
    return stmt.with_for_update() if for_update else stmt


_select_agent_cached = functools.lru_cache(maxsize=1024)(_build_select_agent)


def select_agents() -> sa.Select[Any]:
    """Every agent configuration, by code."""
    return sa.select(agents).order_by(agents.c.agent_code)


def insert_agent(values: dict[str, Any]) -> sa.Insert:
    """Create an agent configuration row."""
    return sa.insert(agents).values(**values)


def update_agent(agent_code: str, values: dict[str, Any]) -> sa.Update:
    """Change an agent configuration row."""
    return sa.update(agents).where(agents.c.agent_code == agent_code).values(**values)


# -- for the compile checks -------------------------------------------------------------------


def touch_and_expiry_examples(sample: dict[str, Any]) -> dict[str, Executable]:
    """The read-touch and expiry statements, in the forms Oracle 19c runs."""

    ora = oracle19_dialect()
    values = {**sample, "p_sids": [1, 2], "p_cutoff": sample["p_now"]}
    return {
        "select_file_read": SELECT_FILE_READ,
        "select_file_read_by_key": SELECT_FILE_READ_BY_KEY,
        "select_file_alive": SELECT_FILE_ALIVE,
        "insert_file_read": INSERT_FILE_READ,
        "update_file_read": UPDATE_FILE_READ,
        "upsert_file_read_oracle": file_read_upsert(ora, file_reads),
        # (Oracle's job lock is a LOCK TABLE statement, which sqlglot cannot parse: checked
        # in tests/store/test_expiry_and_touches.py)
        "select_job_lock": SELECT_JOB_LOCK.with_for_update(),
        "select_expiry_candidates": with_values(
            expiry_candidates(ora, select_expiry_candidates(False), 1000), **values
        ),
        "select_expiry_candidates_store": with_values(
            expiry_candidates(ora, select_expiry_candidates(True), 1000), **values
        ),
        "lock_expiry_stores": lock_stores_by_id([1, 2]).with_for_update(skip_locked=True),
        "delete_expired": with_values(DELETE_EXPIRED, **values),
        "select_files_left": with_values(SELECT_FILES_LEFT, **values),
        "select_store_keys": with_values(SELECT_STORE_KEYS, **values),
        "delete_file_reads_by_id": with_values(DELETE_FILE_READS_BY_ID, **values),
        "select_orphan_reads": with_values(
            lock_expiry_candidates(ora, select_orphan_reads(), 1000), **values
        ),
        "count_expirable": count_expirable(False),
        "count_expirable_store": count_expirable(True),
    }
