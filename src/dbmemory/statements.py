"""Pure statement builders: every SQL statement dbmemory runs, built apart from running it.

Each function returns a SQLAlchemy Core statement and touches no connection, so the whole set
can be compiled for every dialect, Oracle 19c included, without a server
(:func:`example_statements` feeds that test). Executors live in :mod:`dbmemory.files` and
:mod:`dbmemory.stores`.

Rules kept: the CLOB ``body`` is only ever selected, inserted or assigned, never compared,
sorted, grouped or DISTINCTed; directory matches use ``SUBSTR(file_path, 1, n) = :prefix``
(exact, so LIKE wildcards and case-insensitive LIKE can never widen a match); equality on a path
uses ``path_hash``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.expression import ColumnElement, Executable

from dbmemory.db.schema import agents, audit_events, files, stores

__all__ = [
    "FILE_COLUMNS",
    "under_directory",
    "select_store_id",
    "lock_store_by_key",
    "lock_store_by_id",
    "insert_store",
    "select_file",
    "select_file_meta",
    "select_listing",
    "select_write_facts",
    "insert_file",
    "update_file",
    "delete_files_by_id",
    "delete_files_under",
    "move_file",
    "touch_files",
    "select_touch_candidates",
    "insert_audit",
    "select_expirable",
    "count_expirable",
    "select_agent",
    "insert_agent",
    "update_agent",
    "select_agents",
    "select_stores_of_agent",
    "select_store_totals",
    "delete_stores_by_id",
    "example_statements",
]

FILE_COLUMNS = (
    files.c.file_id,
    files.c.store_id,
    files.c.file_path,
    files.c.body,
    files.c.char_count,
    files.c.version_no,
    files.c.expiry_exempt,
    files.c.created_at,
    files.c.updated_at,
    files.c.last_accessed_at,
)
"""Columns of a full file read, body included."""

_META_COLUMNS = tuple(c for c in FILE_COLUMNS if c.name != "body")


def under_directory(directory: str) -> ColumnElement[bool]:
    """Condition: ``file_path`` lies strictly under ``directory`` (exact prefix ``directory/``).

    ``SUBSTR`` counts characters on every supported backend, and ``=`` is exact (binary
    collation on MySQL/MariaDB), so ``_``/``%`` or letter case can never widen the match.
    """
    prefix = directory.rstrip("/") + "/"
    return sa.func.substr(files.c.file_path, 1, len(prefix)) == prefix


# -- stores -----------------------------------------------------------------------------------


def select_store_id(store_key: str) -> sa.Select[Any]:
    """``store_id`` of the store named ``store_key`` (no lock)."""
    return sa.select(stores.c.store_id).where(stores.c.store_key == store_key)


def lock_store_by_key(store_key: str) -> sa.Select[Any]:
    """``store_id`` of ``store_key``, locking the store row (``FOR UPDATE``): every writer of a
    store takes this lock first, so writers serialise and caps cannot be raced."""
    return select_store_id(store_key).with_for_update()


def lock_store_by_id(store_id: int) -> sa.Select[Any]:
    """Lock the store row ``store_id`` (``FOR UPDATE``); returns its key and scope."""
    return (
        sa.select(stores.c.store_id, stores.c.store_key, stores.c.scope_name)
        .where(stores.c.store_id == store_id)
        .with_for_update()
    )


def insert_store(
    store_key: str,
    scope: str,
    agent_code: str | None,
    store_code: str | None,
    now: dt.datetime,
) -> sa.Insert:
    """Create a store row."""
    return sa.insert(stores).values(
        store_key=store_key,
        scope_name=scope,
        agent_code=agent_code,
        store_code=store_code,
        created_at=now,
        updated_at=now,
    )


def select_stores_of_agent(agent_code: str) -> sa.Select[Any]:
    """The stores an agent owns: its agent, user and session stores and the context stores under
    its own namespace; never shared, global, or context stores under a store code."""
    return sa.select(stores.c.store_id, stores.c.store_key).where(
        stores.c.agent_code == agent_code,
        sa.or_(
            stores.c.scope_name.in_(("agent", "user", "session")),
            sa.and_(stores.c.scope_name == "context", stores.c.store_code.is_(None)),
        ),
    )


def select_store_totals(store_ids: Sequence[int]) -> sa.Select[Any]:
    """Per store: number of files and characters (for audit events of a drop)."""
    return (
        sa.select(
            files.c.store_id,
            sa.func.count().label("file_count"),
            sa.func.coalesce(sa.func.sum(files.c.char_count), 0).label("total_chars"),
        )
        .where(files.c.store_id.in_(list(store_ids)))
        .group_by(files.c.store_id)
    )


def delete_stores_by_id(store_ids: Sequence[int]) -> tuple[sa.Delete, sa.Delete]:
    """Delete the files, then the rows, of the given stores (two statements; no reliance on
    ``ON DELETE CASCADE`` being enabled, e.g. SQLite without ``PRAGMA foreign_keys``)."""
    ids = list(store_ids)
    return (
        sa.delete(files).where(files.c.store_id.in_(ids)),
        sa.delete(stores).where(stores.c.store_id.in_(ids)),
    )


# -- files ------------------------------------------------------------------------------------


def select_file(store_id: int, path_hash: str, *, for_update: bool = False) -> sa.Select[Any]:
    """One file with its body, by path hash; ``for_update`` locks the row."""
    stmt = sa.select(*FILE_COLUMNS).where(
        files.c.store_id == store_id, files.c.path_hash == path_hash
    )
    return stmt.with_for_update() if for_update else stmt


def select_file_meta(store_id: int, path_hash: str) -> sa.Select[Any]:
    """One file without its body, by path hash."""
    return sa.select(*_META_COLUMNS).where(
        files.c.store_id == store_id, files.c.path_hash == path_hash
    )


def select_listing(
    store_id: int, directory: str | None = None, *, for_update: bool = False
) -> sa.Select[Any]:
    """Files (no body) of a store, optionally only those under ``directory``, by path.

    Ordering is done by the caller in Python (binary code-point order on every backend, which
    ``ORDER BY`` under a linguistic collation would not give).
    """
    stmt = sa.select(*_META_COLUMNS).where(files.c.store_id == store_id)
    if directory is not None:
        stmt = stmt.where(under_directory(directory))
    return stmt.with_for_update() if for_update else stmt


def select_write_facts(store_id: int, path: str, path_hash: str, ancestor_hashes: Sequence[str]) -> sa.Select[Any]:
    """One aggregate row answering everything a new file's write must know, in one round trip.

    Columns: ``file_count`` and ``total_chars`` of the store; ``same`` (1 when ``path`` already
    exists as a file); ``ancestor_files`` (files sitting where ``path`` needs a directory);
    ``descendants`` (files under ``path``, i.e. ``path`` is a directory).
    """
    one, zero = sa.literal(1), sa.literal(0)
    same = sa.case((files.c.path_hash == path_hash, one), else_=zero)
    if ancestor_hashes:
        anc = sa.case((files.c.path_hash.in_(list(ancestor_hashes)), one), else_=zero)
    else:
        anc = zero
    desc = sa.case((under_directory(path), one), else_=zero)
    return sa.select(
        sa.func.count().label("file_count"),
        sa.func.coalesce(sa.func.sum(files.c.char_count), 0).label("total_chars"),
        sa.func.coalesce(sa.func.sum(same), 0).label("same"),
        sa.func.coalesce(sa.func.sum(anc), 0).label("ancestor_files"),
        sa.func.coalesce(sa.func.sum(desc), 0).label("descendants"),
    ).where(files.c.store_id == store_id)


def insert_file(
    store_id: int,
    path: str,
    path_hash: str,
    text: str,
    now: dt.datetime,
    *,
    expiry_exempt: bool = False,
) -> sa.Insert:
    """Insert a new file at version 1. An empty text is stored as NULL (Oracle does anyway)."""
    return sa.insert(files).values(
        store_id=store_id,
        file_path=path,
        path_hash=path_hash,
        body=text if text != "" else None,
        char_count=len(text),
        version_no=1,
        expiry_exempt=expiry_exempt,
        created_at=now,
        updated_at=now,
        last_accessed_at=now,
    )


def update_file(
    file_id: int,
    text: str,
    expected_version: int,
    now: dt.datetime,
    *,
    expiry_exempt: bool | None = None,
) -> sa.Update:
    """Replace a file's text if it is still at ``expected_version``; bumps the version.

    A rowcount of 0 means another writer changed or removed it (compare-and-set lost).
    """
    values: dict[str, Any] = {
        "body": text if text != "" else None,
        "char_count": len(text),
        "version_no": expected_version + 1,
        "updated_at": now,
        "last_accessed_at": now,
    }
    if expiry_exempt is not None:
        values["expiry_exempt"] = expiry_exempt
    return (
        sa.update(files)
        .where(files.c.file_id == file_id, files.c.version_no == expected_version)
        .values(**values)
    )


def delete_files_by_id(file_ids: Sequence[int]) -> sa.Delete:
    """Delete files by id (at most 1,000 ids per statement: Oracle's IN-list limit)."""
    return sa.delete(files).where(files.c.file_id.in_(list(file_ids)))


def delete_files_under(store_id: int, directory: str) -> sa.Delete:
    """Delete every file strictly under ``directory``."""
    return sa.delete(files).where(files.c.store_id == store_id, under_directory(directory))


def move_file(file_id: int, new_path: str, new_hash: str, version: int, now: dt.datetime) -> sa.Update:
    """Give a file a new path (rename), bumping its version."""
    return (
        sa.update(files)
        .where(files.c.file_id == file_id)
        .values(
            file_path=new_path,
            path_hash=new_hash,
            version_no=version + 1,
            updated_at=now,
            last_accessed_at=now,
        )
    )


def select_touch_candidates(file_ids: Sequence[int], older_than: dt.datetime) -> sa.Select[Any]:
    """Ids among ``file_ids`` whose last touch is older than ``older_than`` (the touch worker
    adds ``FOR UPDATE SKIP LOCKED`` where the backend has it)."""
    return sa.select(files.c.file_id).where(
        files.c.file_id.in_(list(file_ids)), files.c.last_accessed_at < older_than
    )


def touch_files(file_ids: Sequence[int], now: dt.datetime, older_than: dt.datetime) -> sa.Update:
    """Record a read: set ``last_accessed_at`` (only where it is older than ``older_than``)."""
    return (
        sa.update(files)
        .where(files.c.file_id.in_(list(file_ids)), files.c.last_accessed_at < older_than)
        .values(last_accessed_at=now)
    )


def select_expirable(
    cutoff: dt.datetime, store_id: int | None, limit: int
) -> sa.Select[Any]:
    """Up to ``limit`` files untouched since ``cutoff`` and not exempt, with what their audit
    events need (id, store, store key, path, size)."""
    stmt = (
        sa.select(
            files.c.file_id,
            files.c.store_id,
            stores.c.store_key,
            files.c.file_path,
            files.c.char_count,
        )
        .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
        .where(files.c.last_accessed_at < cutoff, files.c.expiry_exempt == sa.false())
        .order_by(files.c.file_id)
        .limit(limit)
    )
    if store_id is not None:
        stmt = stmt.where(files.c.store_id == store_id)
    return stmt


def count_expirable(cutoff: dt.datetime, store_id: int | None) -> sa.Select[Any]:
    """How many files :func:`select_expirable` would eventually return."""
    stmt = sa.select(sa.func.count()).select_from(files).where(
        files.c.last_accessed_at < cutoff, files.c.expiry_exempt == sa.false()
    )
    if store_id is not None:
        stmt = stmt.where(files.c.store_id == store_id)
    return stmt


# -- audit ------------------------------------------------------------------------------------


def insert_audit() -> sa.Insert:
    """Insert one audit event; values are bound per row (also used with executemany).

    Keys: ``store_id``, ``store_key``, ``file_path``, ``action_name``, ``actor_name``,
    ``chars_before``, ``chars_after``, ``detail_text``, ``created_at``.
    """
    return sa.insert(audit_events)


# -- agents -----------------------------------------------------------------------------------


def select_agent(agent_code: str, *, for_update: bool = False) -> sa.Select[Any]:
    """One agent configuration row."""
    stmt = sa.select(agents).where(agents.c.agent_code == agent_code)
    return stmt.with_for_update() if for_update else stmt


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


def example_statements() -> dict[str, Executable]:
    """Every statement the package runs, built with sample parameters.

    Returns:
        Name -> statement. The Oracle compile test compiles each for Oracle 19c and checks
        identifiers and CLOB use; add new builders here when you add them above.
    """
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    h = "0" * 64
    drop_files, drop_stores = delete_stores_by_id([1, 2])
    return {
        "select_store_id": select_store_id("agent:A"),
        "lock_store_by_key": lock_store_by_key("agent:A"),
        "lock_store_by_id": lock_store_by_id(1),
        "insert_store": insert_store("agent:A", "agent", "A", None, now),
        "select_stores_of_agent": select_stores_of_agent("A"),
        "select_store_totals": select_store_totals([1, 2]),
        "delete_store_files": drop_files,
        "delete_stores": drop_stores,
        "select_file": select_file(1, h),
        "select_file_for_update": select_file(1, h, for_update=True),
        "select_file_meta": select_file_meta(1, h),
        "select_listing": select_listing(1),
        "select_listing_dir": select_listing(1, "/memories/a_b"),
        "select_listing_dir_for_update": select_listing(1, "/memories/a", for_update=True),
        "select_write_facts": select_write_facts(1, "/memories/a/b.md", h, [h]),
        "select_write_facts_top": select_write_facts(1, "/memories/b.md", h, []),
        "insert_file": insert_file(1, "/memories/a.md", h, "x" * 5000, now),
        "update_file": update_file(1, "y" * 5000, 3, now),
        "update_file_exempt": update_file(1, "", 3, now, expiry_exempt=True),
        "delete_files_by_id": delete_files_by_id([1, 2, 3]),
        "delete_files_under": delete_files_under(1, "/memories/a"),
        "move_file": move_file(1, "/memories/b.md", h, 2, now),
        "select_touch_candidates": select_touch_candidates([1, 2], now),
        "touch_files": touch_files([1, 2], now, now),
        "select_expirable": select_expirable(now, None, 1000),
        "select_expirable_store": select_expirable(now, 1, 1000),
        "count_expirable": count_expirable(now, None),
        "insert_audit": insert_audit().values(
            store_id=1,
            store_key="agent:A",
            file_path="/memories/a.md",
            action_name="create",
            actor_name="tool:A",
            chars_before=None,
            chars_after=3,
            detail_text=None,
            created_at=now,
        ),
        "select_agent": select_agent("A"),
        "select_agent_for_update": select_agent("A", for_update=True),
        "select_agents": select_agents(),
        "insert_agent": insert_agent(
            {
                "agent_code": "A",
                "scope_name": "agent",
                "store_code": None,
                "context_key": None,
                "max_file_chars": 100_000,
                "max_files": 1_000,
                "max_store_chars": None,
                "memory_enabled": True,
                "created_at": now,
                "updated_at": now,
            }
        ),
        "update_agent": update_agent("A", {"memory_enabled": False, "updated_at": now}),
    }
