"""The set-based expiry batch (SQLite): the batch's candidate ids go into a temporary table
once, and every later statement of the batch (audit events, store counters, recorded reads,
the delete) reads them from there, so no id list crosses from Python to the database and
back (issue 19: the ``IN`` list of up to 1,000 ids, expanded by SQLAlchemy per statement,
cost more than the deletes themselves).

``EXPIRY_IDS`` is a connection-local ``TEMPORARY`` table (``CREATE TEMPORARY TABLE IF NOT
EXISTS``, :data:`CREATE_EXPIRY_IDS`), not part of :mod:`dbmemory.db.schema` and never
migrated: it lives in SQLite's ``temp`` schema of the connection that runs the batch, and
its rows are part of the batch's transaction (a rolled-back batch leaves none).

Pure: nothing here touches a connection; the executor is
:func:`dbmemory.store.expiry._expire_set` (run by
:func:`dbmemory.store.expiry.expire_files` on SQLite). Every statement but the ``CREATE``
compiles for Oracle too (the runtime compile test records every Core statement run on
SQLite)."""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from dbmemory.db.schema import file_reads, files, stores
from dbmemory.store.statements.bulk import expiry_rule
from dbmemory.store.statements.reads import TS, bp
from dbmemory.store.statements.writes import audit_of_removed_files

__all__ = [
    "EXPIRY_IDS",
    "CREATE_EXPIRY_IDS",
    "create_expiry_ids_sql",
    "CLEAR_EXPIRY_IDS",
    "fill_expiry_ids",
    "SELECT_EXPIRY_IDS",
    "PRUNE_EXPIRY_IDS",
    "INSERT_EXPIRED_AUDIT_SET",
    "UNCOUNT_EXPIRED_SET",
    "DELETE_FILE_READS_SET",
    "DELETE_EXPIRED_SET",
]

EXPIRY_IDS = sa.Table(
    "dbm_expiry_ids",
    sa.MetaData(),
    sa.Column("file_id", sa.Integer(), primary_key=True),
    sa.Column("store_id", sa.Integer(), nullable=False),
    sa.Column("char_count", sa.Integer(), nullable=False),
    sa.Index("ix_dbm_expiry_ids_store", "store_id", "char_count"),
    prefixes=["TEMPORARY"],
)
"""One expiry batch's candidates: file id, store id and size (``char_count``); indexed by
store, so each store's counters are moved from a range of the index."""

CREATE_EXPIRY_IDS: tuple[sa.schema.ExecutableDDLElement, ...] = (
    sa.schema.CreateTable(EXPIRY_IDS, if_not_exists=True),
    *(sa.schema.CreateIndex(ix, if_not_exists=True) for ix in EXPIRY_IDS.indexes),
)
"""Create :data:`EXPIRY_IDS` and its index on this connection unless they exist (no-ops
then). DDL is not in SQLAlchemy's statement cache: run it as :func:`create_expiry_ids_sql`."""


_COMPILED: dict[str, tuple[str, ...]] = {}


def create_expiry_ids_sql(dialect: Dialect) -> tuple[str, ...]:
    """:data:`CREATE_EXPIRY_IDS` compiled for ``dialect`` (once per dialect name)."""
    found = _COMPILED.get(dialect.name)
    if found is None:
        found = _COMPILED[dialect.name] = tuple(str(ddl.compile(dialect=dialect)) for ddl in CREATE_EXPIRY_IDS)
    return found

CLEAR_EXPIRY_IDS = sa.delete(EXPIRY_IDS)
"""Empty :data:`EXPIRY_IDS` (the first statement of a batch after the lock)."""

_IDS = sa.select(EXPIRY_IDS.c.file_id)


@functools.cache
def fill_expiry_ids(by_store: bool, limit: int) -> sa.Insert:
    """``INSERT INTO dbm_expiry_ids SELECT ...``: at most ``limit`` files matching the rule at
    ``:p_cutoff`` (of store ``:p_sid`` when ``by_store``), in the order the database finds
    them (by ``last_accessed_at`` through its index on SQLite)."""
    select = sa.select(files.c.file_id, files.c.store_id, files.c.char_count).where(expiry_rule())
    if by_store:
        select = select.where(files.c.store_id == bp("p_sid"))
    select = select.limit(limit)
    return sa.insert(EXPIRY_IDS).from_select(["file_id", "store_id", "char_count"], select)


SELECT_EXPIRY_IDS = sa.select(EXPIRY_IDS.c.file_id).order_by(EXPIRY_IDS.c.file_id)
"""The batch's candidate ids, in order."""

PRUNE_EXPIRY_IDS = sa.delete(EXPIRY_IDS).where(
    EXPIRY_IDS.c.file_id.not_in(sa.select(files.c.file_id).where(files.c.file_id.in_(_IDS), expiry_rule()))
)
"""Drop the candidates that no longer match the rule at ``:p_cutoff`` (written or read in the
batch's own transaction since they were chosen: another connection cannot, SQLite's write lock
is held from ``BEGIN IMMEDIATE``); rowcount = the candidates dropped. Every later statement of
the batch reads the candidates left."""

INSERT_EXPIRED_AUDIT_SET = audit_of_removed_files(
    files.c.file_id.in_(_IDS), expiry_rule(), by_id=True
).execution_options(preserve_rowcount=True)
"""One ``expire`` audit event per candidate that still matches the rule at ``:p_cutoff``
(action ``:p_action``, actor ``:p_actor``, ``created_at = :p_now``), built in the database
from the file and store rows, by file id, just before :data:`DELETE_EXPIRED_SET`."""


def _per_store(column: Any) -> Any:
    return (
        sa.select(column)
        .where(EXPIRY_IDS.c.store_id == stores.c.store_id)
        .scalar_subquery()
    )


UNCOUNT_EXPIRED_SET = (
    sa.update(stores)
    .where(stores.c.store_id.in_(sa.select(EXPIRY_IDS.c.store_id)))
    .values(
        file_count=stores.c.file_count - _per_store(sa.func.count()),
        total_chars=stores.c.total_chars - _per_store(sa.func.coalesce(sa.func.sum(EXPIRY_IDS.c.char_count), 0)),
        updated_at=bp("p_now", type_=TS),
    )
)
"""Move each candidate store's counters by its candidates (files and characters) and set
``updated_at = :p_now``; rowcount = the stores moved. Exact only when every candidate is then
deleted: the executor checks that :data:`DELETE_EXPIRED_SET` deleted them all."""

DELETE_FILE_READS_SET = sa.delete(file_reads).where(file_reads.c.file_id.in_(_IDS))
"""Forget the recorded reads of the candidates (they are all older than the cutoff: the rule
chose files with no recent read)."""

DELETE_EXPIRED_SET = sa.delete(files).where(files.c.file_id.in_(_IDS), expiry_rule())
"""Delete the candidates that still match the rule at ``:p_cutoff``."""
