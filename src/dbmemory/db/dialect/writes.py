"""The shape of the write path per backend: which locking read keeps a read current under the
store lock (:func:`current_read`), how a store row is created (:func:`insert_store_statement`),
locked with its file row (:func:`store_and_file_lock`) and moved with its counters
(:func:`bump_store_on_write`, :func:`store_bump`), and which short paths apply: guarded create
(:func:`guarded_create`), counted edit (:func:`counted_file_update`), uncounted-first delete
(:func:`delete_uncounts_first`), one statement for an expiry batch's counters
(:func:`one_statement_store_moves`), an insert that returns its id (:func:`insert_returns_id`).

Every function answers for a bind; the statements themselves are built in
:mod:`dbmemory.store.statements`."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection

__all__ = [
    "mysql_snapshot_reads",
    "current_read",
    "insert_store_statement",
    "store_and_file_lock",
    "store_bump",
    "counted_file_update",
    "delete_uncounts_first",
    "one_statement_store_moves",
    "guarded_create",
    "insert_returns_id",
]


def _mysql_repeatable(conn: Connection) -> bool:
    level = conn.get_execution_options().get("isolation_level")
    if level is None:
        level = conn.engine.get_execution_options().get("isolation_level")
    if level is None:
        level = getattr(conn.dialect, "_on_connect_isolation_level", None) or getattr(
            conn.dialect, "default_isolation_level", None
        )
    return str(level or "REPEATABLE READ").upper().replace("_", " ") != "READ COMMITTED"


def mysql_snapshot_reads(bind: Connection) -> bool:
    """Whether ``bind`` is a MySQL/MariaDB connection whose plain ``SELECT`` answers from the
    transaction's snapshot even after it waited for a row lock (REPEATABLE READ, the server
    default of an engine not made by :func:`dbmemory.create_engine`; not READ COMMITTED)."""
    return bind.dialect.name in ("mysql", "mariadb") and _mysql_repeatable(bind)


def current_read(stmt: sa.Select[Any], bind: Connection) -> sa.Select[Any]:
    """Make a read taken under the store lock see the latest committed rows.

    At MySQL/MariaDB's default REPEATABLE READ a plain ``SELECT`` answers from the transaction's
    snapshot, so after waiting for the store lock a writer would count files as they were
    before the previous writer committed, and caps could be exceeded by a race. There the read
    becomes a locking read (``LOCK IN SHARE MODE``), which sees the current rows; its next-key
    locks can make writers of neighbouring stores deadlock, which InnoDB reports by rolling back
    one caller's whole transaction (dbmemory then says so and invalidates the connection, never
    silently). Engines made by :func:`dbmemory.create_engine` run MySQL at READ COMMITTED, where
    the plain read is already current and no gap locks are taken. PostgreSQL and Oracle (READ
    COMMITTED) and SQLite (one writer) need nothing.
    """
    if mysql_snapshot_reads(bind):
        return stmt.with_for_update(read=True)
    return stmt


def insert_store_statement(bind: Connection, insert: sa.Insert) -> sa.Insert:
    """The statement that creates a store row on its first write.

    On MySQL/MariaDB an ``INSERT ... ON DUPLICATE KEY UPDATE`` (a no-op update): when several
    first writers of one new store race, the losers of a plain ``INSERT`` would each keep a
    shared lock on the winner's row after their duplicate-key error, then all ask for the
    exclusive lock (``FOR UPDATE``) and deadlock, and InnoDB would roll back a caller's whole
    transaction. The upsert takes the exclusive lock at once, so the losers simply queue.
    PostgreSQL, Oracle and SQLite make a second inserter wait for the first and then fail with
    a duplicate key inside the savepoint, which is harmless.
    """
    if bind.dialect.name in ("mysql", "mariadb"):
        upsert = mysql.insert(insert.table)
        return upsert.on_duplicate_key_update(store_key=upsert.inserted.store_key)
    return insert


def store_and_file_lock(bind: Connection) -> str | None:
    """How one statement may replace "lock the store row, then lock the file row" (one round
    trip less per edit and delete): ``"outer"``, ``"inner"`` or ``None`` (two statements).

    ``"outer"`` on MySQL/MariaDB (:data:`dbmemory.store.statements.reads.LOCK_STORE_AND_FILE`): the outer
    join reads and locks the store row first, then the file row, and a locking read returns
    the latest committed rows at any isolation level. Also on SQLite: one writer at a time
    (``BEGIN IMMEDIATE``); ``FOR UPDATE`` is not even rendered.

    ``"inner"`` on PostgreSQL (:data:`dbmemory.store.statements.reads.LOCK_STORE_WITH_FILE`, falling back
    to two statements when no row comes back): PostgreSQL refuses ``FOR UPDATE`` on the
    nullable side of an outer join, and ``FOR UPDATE OF`` the store row alone would return the
    file row from the statement's snapshot, taken *before* it waited for the store lock, so an
    edit would see the text as it was before the previous writer committed and lose its
    compare-and-set. Locking both rows of an inner join re-reads a changed file row at its
    latest version; rows are locked in ``FROM`` order, store row first.

    ``None`` elsewhere (Oracle: compile-only here, not measured).
    """
    name = bind.dialect.name
    if name in ("sqlite", "mysql", "mariadb"):
        return "outer"
    if name == "postgresql":
        return "inner"
    return None


def bump_store_on_write(bind: Connection) -> bool:
    """Whether every write modifies its store row: True on every backend since revision 0004,
    whose counters (``file_count``, ``total_chars``) every write moves
    (:data:`dbmemory.store.statements.reads.ADJUST_STORE`, deltas 0 for a rename).

    That is also what keeps caps and shape at REPEATABLE READ / SERIALIZABLE on PostgreSQL and
    Oracle: a writer whose snapshot predates another writer's commit fails to lock the modified
    row (SQLSTATE 40001, ORA-08177) instead of checking from a stale snapshot. On MySQL/MariaDB
    the reads under the store lock see the latest rows anyway (:func:`current_read`,
    :func:`store_and_file_lock`); on Galera the modified store row makes cross-node writers of
    one store conflict at certification, so the store lock holds across nodes too.
    """
    return store_bump(bind) is not None


def store_bump(bind: Connection) -> str | None:
    """How a write moves its store row's counters (:func:`bump_store_on_write`): ``"cte"`` on
    PostgreSQL (a data-modifying ``WITH`` on the audit ``INSERT``, no extra round trip:
    :data:`dbmemory.store.statements.writes.INSERT_AUDIT_ADJUST`), ``"statement"`` elsewhere
    (:data:`dbmemory.store.statements.reads.ADJUST_STORE` before the audit insert: Oracle, MySQL/MariaDB
    and SQLite have no DML in ``WITH``)."""
    if bind.dialect.name == "postgresql":
        return "cte"
    return "statement"


def counted_file_update(bind: Connection) -> bool:
    """Whether an edit (and a one-file rename) changes the file row and moves its store row's
    counters in one multi-table ``UPDATE dbm_files, dbm_stores`` (MySQL/MariaDB:
    :data:`dbmemory.store.statements.writes.UPDATE_FILE_COUNTED`, :data:`~dbmemory.store.statements.writes.MOVE_FILE_COUNTED`)
    instead of :data:`~dbmemory.store.statements.writes.UPDATE_FILE` then
    :data:`~dbmemory.store.statements.reads.ADJUST_STORE`. Both rows are already locked (store row first)
    when it runs. PostgreSQL moves the counters with the audit insert instead
    (:func:`store_bump`); SQLite and Oracle have no multi-table ``UPDATE``."""
    return bind.dialect.name in ("mysql", "mariadb")


def delete_uncounts_first(bind: Connection) -> str | None:
    """How a one-file delete takes three statements: its first statement locks the store row
    and takes the file out of the counters; the audit event is then inserted from the file row
    (:data:`dbmemory.store.statements.writes.INSERT_AUDIT_OF_FILE`) and the file deleted by its unique key
    (:data:`~dbmemory.store.statements.writes.DELETE_FILE_AT`).

    ``"join"`` on MySQL/MariaDB (:data:`~dbmemory.store.statements.writes.UNCOUNT_FILE_JOIN`, a multi-table
    ``UPDATE dbm_stores INNER JOIN dbm_files``: the store row is locked first, then the file
    row read with a shared lock, its latest committed ``char_count``, at READ COMMITTED and
    REPEATABLE READ). ``"subquery"`` on SQLite
    (:data:`~dbmemory.store.statements.writes.UNCOUNT_FILE_SUBQUERY`: one writer at a time, so the
    subquery reads the current row). ``None`` elsewhere: PostgreSQL already deletes in three
    (the counters ride on the audit insert, :func:`store_bump`), and at READ COMMITTED its
    subquery would read the snapshot taken before the statement waited for the store lock;
    Oracle keeps the lock, delete, counters and audit statements."""
    name = bind.dialect.name
    if name in ("mysql", "mariadb"):
        return "join"
    if name == "sqlite":
        return "subquery"
    return None


def one_statement_store_moves(bind: Connection) -> bool:
    """Whether the expiry moves a batch's store counters with one statement for all its
    stores (:data:`dbmemory.store.statements.bulk.UNCOUNT_EXPIRED_JOIN`, a multi-table ``UPDATE`` joined
    to the per-store totals of what the batch deletes) rather than
    :data:`~dbmemory.store.statements.reads.ADJUST_STORE` with one parameter set per store: True on
    MySQL/MariaDB, whose driver (PyMySQL) sends an ``UPDATE`` executemany as one round trip
    per row (~200 per 1,000-file batch of 5-file stores). False elsewhere: psycopg pipelines
    an executemany, SQLite runs it in process, and neither has a multi-table ``UPDATE``
    (Oracle: compile-only)."""
    return bind.dialect.name in ("mysql", "mariadb")


def guarded_create(bind: Connection) -> bool:
    """Whether a new file is created by the short path: the caps checked and counted while
    the store row is locked (:data:`dbmemory.store.statements.reads.CLAIM_FILE_SLOT`), then an insert that
    checks the path is free in the same statement
    (:data:`dbmemory.store.statements.writes.INSERT_FILE_IF_FREE`). True on PostgreSQL (``RETURNING``),
    MySQL/MariaDB and SQLite (the driver's ``lastrowid``); False on Oracle, where ``INSERT ...
    SELECT`` cannot return the new id and the CLOB would be bound in a select list: the
    long path (lock, facts, insert) runs there. Also False on MySQL/MariaDB at REPEATABLE
    READ (a host engine's default): the ``NOT EXISTS`` of an ``INSERT ... SELECT`` reads the
    transaction's snapshot there, not the latest rows (measured: two racing creates of ``/a``
    and ``/a/b.md`` both succeeded), so the long path's locking read (:func:`current_read`)
    runs instead."""
    name = bind.dialect.name
    if name in ("mysql", "mariadb"):
        return not _mysql_repeatable(bind)
    return name in ("postgresql", "sqlite")


def insert_returns_id(bind: Connection) -> bool:
    """Whether the short create path learns the new file's id from ``RETURNING`` (PostgreSQL)
    rather than from the driver's ``lastrowid`` (SQLite, MySQL/MariaDB)."""
    return bind.dialect.name == "postgresql"
