"""Statements of the write path, built once at import with bind parameters: the shape facts and
the insert-if-free of ``create`` (``SELECT_WRITE_FACTS``, ``INSERT_FILE_IF_FREE``), whole-file
inserts and updates, plain and with the store counters (``INSERT_FILE``, ``UPDATE_FILE``,
``UPDATE_FILE_COUNTED``), the one-file delete and move (``UNCOUNT_FILE_JOIN``,
``DELETE_FILE_BY_ID``, ``MOVE_FILE``, ``DELETE_FILE_AT``), and the audit inserts
(``INSERT_AUDIT``, ``INSERT_AUDIT_OF_FILE``, :func:`audit_of_removed_files`).

Pure: nothing here touches a connection. The executors are :mod:`dbmemory.store.files`,
:mod:`dbmemory.store.moves` and :mod:`dbmemory.store.audit`; which statement a backend runs is
chosen by :mod:`dbmemory.db.dialect.writes`."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.expression import BindParameter, ColumnElement

from dbmemory.db.dialect.types import PATH_KEY_CHARS, PathKey
from dbmemory.db.schema import audit_events, files, stores
from dbmemory.store.statements.reads import (
    ADJUST_STORE,
    BUMP_STORE,
    TS,
    bp,
    prefix_params,
    under_prefix,
)

__all__ = [
    "audit_of_removed_files",
    "SELECT_WRITE_FACTS",
    "SELECT_WRITE_FACTS_TOP",
    "write_facts",
    "INSERT_FILE_IF_FREE",
    "INSERT_FILE_IF_FREE_TOP",
    "INSERT_FILE_IF_FREE_SCAN",
    "INSERT_FILE_IF_FREE_SCAN_TOP",
    "returning_file_id",
    "insert_file_if_free_params",
    "INSERT_FILE",
    "INSERT_FILE_INLINE",
    "insert_file_for",
    "insert_file_params",
    "UPDATE_FILE",
    "UPDATE_FILE_EXEMPT",
    "update_file_params",
    "UPDATE_FILE_COUNTED",
    "UPDATE_FILE_EXEMPT_COUNTED",
    "update_file_counted_params",
    "UNCOUNT_FILE_JOIN",
    "UNCOUNT_FILE_JOIN_BY_KEY",
    "UNCOUNT_FILE_SUBQUERY",
    "UNCOUNT_FILE_SUBQUERY_BY_KEY",
    "DELETE_FILES_BY_ID",
    "DELETE_FILE_BY_ID",
    "MOVE_FILE",
    "MOVE_FILE_COUNTED",
    "INSERT_AUDIT",
    "AUDIT_BUMP_COLUMNS",
    "INSERT_AUDIT_BUMP",
    "INSERT_AUDIT_ADJUST",
    "INSERT_AUDIT_OF_FILE",
    "DELETE_FILE_AT",
]


def _taken(table: Any, with_ancestors: bool) -> list[ColumnElement[bool]]:
    """Conditions on ``table`` (``dbm_files`` or an alias) for the files of ``:p_sid`` that keep
    a new file from ``:p_ph``: the same path, a file where one of its ancestor directories
    would be (``:p_anc``), a file under it (it is a directory, :func:`prefix_params`)."""
    under = sa.func.substr(table.c.file_path, 1, bp("p_plen", type_=sa.Integer())) == bp(
        "p_prefix", type_=sa.String()
    )
    clash = [table.c.path_hash == bp("p_ph"), under]
    if with_ancestors:
        clash.append(table.c.path_hash.in_(bp("p_anc", expanding=True)))
    return [table.c.store_id == bp("p_sid"), sa.or_(*clash)]


def _write_facts(with_ancestors: bool) -> sa.Select[Any]:
    one, zero = sa.literal(1), sa.literal(0)
    same = sa.case((files.c.path_hash == bp("p_ph"), one), else_=zero)
    if with_ancestors:
        anc: Any = sa.case(
            (files.c.path_hash.in_(bp("p_anc", expanding=True)), one), else_=zero
        )
    else:
        anc = zero
    desc = sa.case((under_prefix(), one), else_=zero)
    return sa.select(
        sa.func.coalesce(sa.func.sum(same), 0).label("same"),
        sa.func.coalesce(sa.func.sum(anc), 0).label("ancestor_files"),
        sa.func.coalesce(sa.func.sum(desc), 0).label("descendants"),
    ).where(*_taken(files, with_ancestors))


SELECT_WRITE_FACTS = _write_facts(True)
"""The shape facts of a new file's path in one round trip, over the store's files that clash
with it only (file counts and characters come from the store row's counters). A ``FROM
dbm_files``, so :func:`dbmemory.db.dialect.writes.current_read` can make it a locking read on
MySQL/MariaDB at REPEATABLE READ. Parameters: :func:`write_facts`. Columns (0 when none):
``same`` (the path exists as a file); ``ancestor_files`` (a file sits where
the path needs a directory); ``descendants`` (files under the path: it is a directory)."""

SELECT_WRITE_FACTS_TOP = _write_facts(False)
""":data:`SELECT_WRITE_FACTS` for a path directly under the root (no ancestors)."""


def write_facts(
    store_id: int, path: str, path_hash: str, ancestor_hashes: Sequence[str]
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The write-facts statement for ``path`` and its parameters."""
    params = {"p_sid": store_id, "p_ph": path_hash, **prefix_params(path)}
    if ancestor_hashes:
        params["p_anc"] = list(ancestor_hashes)
        return SELECT_WRITE_FACTS, params
    return SELECT_WRITE_FACTS_TOP, params


_NEW_FILE_VALUES: dict[str, ColumnElement[Any]] = {
    "store_id": bp("p_sid", type_=sa.BigInteger()),
    "file_path": bp("p_path", type_=sa.String()),
    "path_hash": bp("p_ph", type_=sa.String()),
    "body": bp("p_body", type_=files.c.body.type),
    "char_count": bp("p_chars", type_=sa.Integer()),
    "version_no": sa.literal(1, sa.Integer()),
    "expiry_exempt": bp("p_exempt", type_=files.c.expiry_exempt.type),
    "created_at": bp("p_now", type_=TS),
    "updated_at": bp("p_now", type_=TS),
    "last_accessed_at": bp("p_now", type_=TS),
}


def _insert_file_if_free(with_ancestors: bool, ranged: bool) -> sa.Insert:
    by_hash, under = files.alias("f_same"), files.alias("f_under")
    same: ColumnElement[bool] = by_hash.c.path_hash == bp("p_ph")
    if with_ancestors:
        same = sa.or_(same, by_hash.c.path_hash.in_(bp("p_anc", expanding=True)))
    inside = [
        under.c.store_id == bp("p_sid"),
        sa.func.substr(under.c.file_path, 1, bp("p_plen", type_=sa.Integer()))
        == bp("p_prefix", type_=sa.String()),
    ]
    if ranged:  # an index range probe of ix_dbm_files_prefix (revision 0004)
        key = PathKey(under.c.file_path)
        inside += [key >= bp("p_lo", type_=sa.String()), key < bp("p_hi", type_=sa.String())]
    values = sa.select(
        *(v.label(k) if not isinstance(v, BindParameter) else v for k, v in _NEW_FILE_VALUES.items())
    ).where(
        ~sa.exists().where(by_hash.c.store_id == bp("p_sid"), same),
        ~sa.exists().where(*inside),
    )
    return sa.insert(files).from_select(list(_NEW_FILE_VALUES), values)


INSERT_FILE_IF_FREE = _insert_file_if_free(True, True)
"""Insert a new file (version 1) only if its path is free: no file at the path or where one of
its ancestor directories must be (``path_hash``, the unique index), none under it (an index
range probe of ``ix_dbm_files_prefix``, :class:`dbmemory.db.dialect.types.PathKey`, then the exact
``SUBSTR`` test): O(log n) in the store's size, no scan. Runs under the store lock, after
:data:`~dbmemory.store.statements.reads.CLAIM_FILE_SLOT`, so its ``NOT EXISTS`` reads what the previous writer committed.
Rowcount 1: created; 0: the path is taken (the caller reads the facts to say how).
Parameters: :func:`insert_file_if_free_params`."""

INSERT_FILE_IF_FREE_TOP = _insert_file_if_free(False, True)
""":data:`INSERT_FILE_IF_FREE` for a path directly under the root (no ancestors)."""

INSERT_FILE_IF_FREE_SCAN = _insert_file_if_free(True, False)
""":data:`INSERT_FILE_IF_FREE` without the range probe: for a path whose directory prefix is
longer than the index key (:data:`dbmemory.db.dialect.types.PATH_KEY_CHARS`)."""

INSERT_FILE_IF_FREE_SCAN_TOP = _insert_file_if_free(False, False)
""":data:`INSERT_FILE_IF_FREE_SCAN` for a path directly under the root."""


@functools.lru_cache(maxsize=4)
def returning_file_id(stmt: sa.Insert) -> sa.Insert:
    """``stmt`` returning the new ``file_id`` (built once per statement)."""
    return stmt.returning(files.c.file_id)


def insert_file_if_free_params(
    store_id: int,
    path: str,
    path_hash: str,
    ancestor_hashes: Sequence[str],
    text: str,
    now: dt.datetime,
    *,
    expiry_exempt: bool = False,
) -> tuple[sa.Insert, dict[str, Any]]:
    """The guarded insert for ``path`` and its parameters."""
    params: dict[str, Any] = {
        "p_sid": store_id,
        "p_path": path,
        "p_ph": path_hash,
        "p_body": text if text != "" else None,
        "p_chars": len(text),
        "p_exempt": expiry_exempt,
        "p_now": now,
        **prefix_params(path),
    }
    prefix = params["p_prefix"]
    ranged = len(prefix) <= PATH_KEY_CHARS
    if ranged:
        params["p_lo"] = prefix
        params["p_hi"] = prefix[:-1] + "0"  # the first string after every "<dir>/..." ('/' + 1)
    if ancestor_hashes:
        params["p_anc"] = list(ancestor_hashes)
        return (INSERT_FILE_IF_FREE if ranged else INSERT_FILE_IF_FREE_SCAN), params
    return (INSERT_FILE_IF_FREE_TOP if ranged else INSERT_FILE_IF_FREE_SCAN_TOP), params


INSERT_FILE = sa.insert(files)
"""Insert a file; values per execute (:func:`insert_file_params`)."""

INSERT_FILE_INLINE = INSERT_FILE.inline()
""":data:`INSERT_FILE` without the implicit ``RETURNING`` SQLAlchemy adds for the composite key
``(store_id, file_id)``: where the driver's ``lastrowid`` is the new ``file_id`` (SQLite,
MySQL/MariaDB), so the statement stays the one it was before revision 0007."""


def insert_file_for(dialect_name: str) -> sa.Insert:
    """:data:`INSERT_FILE` where the insert's result carries the new key (PostgreSQL and
    Oracle: ``RETURNING``), else :data:`INSERT_FILE_INLINE` (read ``lastrowid``)."""
    return INSERT_FILE if dialect_name in ("postgresql", "oracle") else INSERT_FILE_INLINE


def insert_file_params(
    store_id: int,
    path: str,
    path_hash: str,
    text: str,
    now: dt.datetime,
    *,
    expiry_exempt: bool = False,
) -> dict[str, Any]:
    """Values of a new file at version 1. An empty text is stored as NULL (Oracle does anyway)."""
    return {
        "store_id": store_id,
        "file_path": path,
        "path_hash": path_hash,
        "body": text if text != "" else None,
        "char_count": len(text),
        "version_no": 1,
        "expiry_exempt": expiry_exempt,
        "created_at": now,
        "updated_at": now,
        "last_accessed_at": now,
    }


def _file_update_values(with_exempt: bool) -> dict[str, Any]:
    now = bp("p_now", type_=TS)
    values: dict[str, Any] = {
        "body": bp("p_body", type_=files.c.body.type),
        "char_count": bp("p_chars", type_=sa.Integer()),
        "version_no": bp("p_new_version", type_=sa.Integer()),
        "updated_at": now,
        "last_accessed_at": now,
    }
    if with_exempt:
        values["expiry_exempt"] = bp("p_exempt", type_=files.c.expiry_exempt.type)
    return values


def _update_file(with_exempt: bool) -> sa.Update:
    return (
        sa.update(files)
        .where(
            files.c.store_id == bp("p_sid"),
            files.c.file_id == bp("p_fid"),
            files.c.version_no == bp("p_version"),
        )
        .values(**_file_update_values(with_exempt))
    )


UPDATE_FILE = _update_file(False)
"""Replace the text of file ``:p_fid`` of store ``:p_sid`` if it is still at ``:p_version``;
bumps the version. A rowcount of 0
means another writer changed or removed it (compare-and-set lost)."""

UPDATE_FILE_EXEMPT = _update_file(True)
""":data:`UPDATE_FILE` that also sets ``expiry_exempt``."""


def update_file_params(
    store_id: int,
    file_id: int,
    text: str,
    expected_version: int,
    now: dt.datetime,
    *,
    expiry_exempt: bool | None = None,
) -> tuple[sa.Update, dict[str, Any]]:
    """The update statement and its parameters (``expiry_exempt=None`` keeps the flag)."""
    params: dict[str, Any] = {
        "p_body": text if text != "" else None,
        "p_chars": len(text),
        "p_new_version": expected_version + 1,
        "p_now": now,
        "p_sid": store_id,
        "p_fid": file_id,
        "p_version": expected_version,
    }
    if expiry_exempt is None:
        return UPDATE_FILE, params
    params["p_exempt"] = expiry_exempt
    return UPDATE_FILE_EXEMPT, params


def _update_file_counted(with_exempt: bool) -> sa.Update:
    values: dict[Any, Any] = {
        files.c[name]: value for name, value in _file_update_values(with_exempt).items()
    }
    values[stores.c.total_chars] = stores.c.total_chars + bp("p_dc", type_=sa.BigInteger())
    values[stores.c.updated_at] = bp("p_now", type_=TS)
    return (
        sa.update(files)
        .where(
            files.c.file_id == bp("p_fid"),
            files.c.version_no == bp("p_version"),
            stores.c.store_id == bp("p_sid"),
            stores.c.store_id == files.c.store_id,
        )
        .values(values)
    )


UPDATE_FILE_COUNTED = _update_file_counted(False)
""":data:`UPDATE_FILE` and :data:`ADJUST_STORE`'s character move (``total_chars + :p_dc``,
``updated_at = :p_now`` of store ``:p_sid``) in one multi-table ``UPDATE dbm_files, dbm_stores``
(MySQL/MariaDB only: :func:`dbmemory.db.dialect.writes.counted_file_update`; other backends cannot
compile it). Run under the store and file locks the writer already holds, so no lock order
changes. Rowcount 0: the file is no longer at ``:p_version`` (nothing changed); otherwise the
file and the store row were both changed (2 matched rows where the driver counts found rows)."""

UPDATE_FILE_EXEMPT_COUNTED = _update_file_counted(True)
""":data:`UPDATE_FILE_COUNTED` that also sets ``expiry_exempt`` (``:p_exempt``)."""


def update_file_counted_params(
    store_id: int,
    file_id: int,
    text: str,
    expected_version: int,
    now: dt.datetime,
    chars_delta: int,
    *,
    expiry_exempt: bool | None = None,
) -> tuple[sa.Update, dict[str, Any]]:
    """:func:`update_file_params` for :data:`UPDATE_FILE_COUNTED`: also ``:p_sid`` and the
    store's character delta ``:p_dc`` (new minus old length)."""
    stmt, params = update_file_params(
        store_id, file_id, text, expected_version, now, expiry_exempt=expiry_exempt
    )
    params.update(p_dc=chars_delta)
    return (UPDATE_FILE_COUNTED if stmt is UPDATE_FILE else UPDATE_FILE_EXEMPT_COUNTED), params


def _store_file_at(by_key: bool) -> tuple[Any, list[ColumnElement[bool]]]:
    joined = stores.join(
        files, sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == bp("p_ph"))
    )
    where = [stores.c.store_id == bp("p_sid")]
    if by_key:
        where.append(stores.c.store_key == bp("p_key"))
    return joined, where


def _uncount_file_join(by_key: bool) -> sa.Update:
    joined, where = _store_file_at(by_key)
    return (
        sa.update(joined)
        .where(*where)
        .values(
            {
                stores.c.file_count: stores.c.file_count - 1,
                stores.c.total_chars: stores.c.total_chars - files.c.char_count,
                stores.c.updated_at: bp("p_now", type_=TS),
                # a no-op SET on the file row makes it an updated table: exclusively locked
                # now, not shared and upgraded by the delete (an upgrade deadlocks with any
                # writer already queued for that row)
                files.c.version_no: files.c.version_no,
            }
        )
    )


UNCOUNT_FILE_JOIN = _uncount_file_join(False)
"""A delete's first statement on MySQL/MariaDB (:func:`dbmemory.db.dialect.writes.delete_uncounts_first`
``"join"``): lock store ``:p_sid`` and, in the same statement, take the file ``:p_ph`` out of
its counters (``file_count - 1``, ``total_chars - char_count``, ``updated_at = :p_now``).
``dbm_stores INNER JOIN dbm_files``: InnoDB locks the store row first, then the file row
(exclusively: a no-op ``SET version_no = version_no``; read-only it would be a shared lock
that the delete then upgrades, a deadlock with a writer queued for the row: seen in
``tests/store/test_counters.py``'s race), so the lock order stays store row, then file row,
and the file's ``char_count`` is its latest committed value at any isolation level (measured;
see ``tests/store/test_write_races.py``). Rowcount 1 or 2 (2 where the driver counts found rows):
the file exists and was uncounted; 0: the store or the file is missing (nothing changed: the caller takes the full path, which says which).
MySQL/MariaDB only (a multi-table ``UPDATE``)."""

UNCOUNT_FILE_JOIN_BY_KEY = _uncount_file_join(True)
""":data:`UNCOUNT_FILE_JOIN` that also requires ``store_key = :p_key``."""


def _uncount_file_subquery(by_key: bool) -> sa.Update:
    at = sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == bp("p_ph"))
    chars = sa.select(files.c.char_count).where(at).scalar_subquery()
    where = [stores.c.store_id == bp("p_sid"), sa.exists().where(at)]
    if by_key:
        where.append(stores.c.store_key == bp("p_key"))
    return (
        sa.update(stores)
        .where(*where)
        .values(
            file_count=stores.c.file_count - 1,
            total_chars=stores.c.total_chars - chars,
            updated_at=bp("p_now", type_=TS),
        )
    )


UNCOUNT_FILE_SUBQUERY = _uncount_file_subquery(False)
""":data:`UNCOUNT_FILE_JOIN` as a one-table ``UPDATE`` with subqueries (SQLite,
:func:`dbmemory.db.dialect.writes.delete_uncounts_first` ``"subquery"``): sound only where writers
are serialised before the statement starts (SQLite's ``BEGIN IMMEDIATE``); at READ COMMITTED
elsewhere the subquery would read the snapshot taken before the statement waited for the
store lock. Rowcount 1: uncounted; 0: the store or the file is missing."""

UNCOUNT_FILE_SUBQUERY_BY_KEY = _uncount_file_subquery(True)
""":data:`UNCOUNT_FILE_SUBQUERY` that also requires ``store_key = :p_key``."""

DELETE_FILES_BY_ID = sa.delete(files).where(
    files.c.store_id == bp("p_sid"), files.c.file_id.in_(bp("p_ids", expanding=True))
)
"""Delete files of store ``:p_sid`` by id (``:p_ids``, at most 1,000 per statement: Oracle's
IN-list limit)."""

DELETE_FILE_BY_ID = sa.delete(files).where(
    files.c.store_id == bp("p_sid"), files.c.file_id == bp("p_fid")
)
"""Delete one file of store ``:p_sid`` by id (``:p_fid``); run with many parameter sets for a directory, so every
delete is a primary-key lookup (MariaDB may scan, and lock, other stores' rows for an IN list
on a small table)."""

_MOVED_AT = bp("p_now", type_=TS)
MOVE_FILE = (
    sa.update(files)
    .where(files.c.store_id == bp("p_sid"), files.c.file_id == bp("p_fid"))
    .values(
        file_path=bp("p_path", type_=files.c.file_path.type),
        path_hash=bp("p_hash", type_=sa.String(64)),
        version_no=bp("p_new_version", type_=sa.Integer()),
        updated_at=_MOVED_AT,
        last_accessed_at=_MOVED_AT,
    )
)
"""Give file ``:p_fid`` of store ``:p_sid`` a new path (rename): ``:p_path``, ``:p_hash``, ``:p_new_version``,
``:p_now``."""

MOVE_FILE_COUNTED = (
    sa.update(files)
    .where(
        files.c.file_id == bp("p_fid"),
        stores.c.store_id == bp("p_sid"),
        stores.c.store_id == files.c.store_id,
    )
    .values(
        {
            files.c.file_path: bp("p_path", type_=files.c.file_path.type),
            files.c.path_hash: bp("p_hash", type_=sa.String(64)),
            files.c.version_no: bp("p_new_version", type_=sa.Integer()),
            files.c.updated_at: _MOVED_AT,
            files.c.last_accessed_at: _MOVED_AT,
            stores.c.updated_at: _MOVED_AT,
        }
    )
)
""":data:`MOVE_FILE` and the store row's write mark (``updated_at = :p_now`` of store
``:p_sid``; a rename moves no counter) in one multi-table ``UPDATE dbm_files, dbm_stores``, under the store
and file locks the renamer holds (MySQL/MariaDB only: :func:`dbmemory.db.dialect.writes.counted_file_update`).
Rowcount 0: the file is gone (cannot happen under the store lock)."""

INSERT_AUDIT = sa.insert(audit_events)
"""Insert audit events; one dict of values per row (keys: ``store_id``, ``store_key``,
``file_path``, ``action_name``, ``actor_name``, ``chars_before``, ``chars_after``,
``detail_text``, ``created_at``)."""

AUDIT_BUMP_COLUMNS = (
    "store_id",
    "store_key",
    "file_path",
    "action_name",
    "actor_name",
    "chars_before",
    "chars_after",
    "detail_text",
    "created_at",
)
INSERT_AUDIT_ONE = sa.insert(audit_events).values(
    {name: bp(f"p_a_{name}", type_=audit_events.c[name].type) for name in AUDIT_BUMP_COLUMNS}
)
""":data:`INSERT_AUDIT` for one event, every column a parameter ``p_a_<column>`` (one SQL text
whatever the values: SQLite runs it on the driver's cursor, :func:`dbmemory.db.raw.row_count`)."""
INSERT_AUDIT_BUMP = (
    sa.insert(audit_events)
    .values({name: bp(f"p_a_{name}", type_=audit_events.c[name].type) for name in AUDIT_BUMP_COLUMNS})
    .add_cte(BUMP_STORE.cte("bumped_store"))
)
""":data:`INSERT_AUDIT` with :data:`BUMP_STORE` as a data-modifying ``WITH`` (PostgreSQL): a
write's audit events and the store-row bump in one round trip. Parameters per row: the audit
columns as ``p_a_<column>`` (:data:`AUDIT_BUMP_COLUMNS`; a bare column name would also be
taken as a ``SET`` of the ``UPDATE``), plus ``p_sid`` and ``p_now``."""

INSERT_AUDIT_ADJUST = (
    sa.insert(audit_events)
    .values({name: bp(f"p_a_{name}", type_=audit_events.c[name].type) for name in AUDIT_BUMP_COLUMNS})
    .add_cte(ADJUST_STORE.cte("adjusted_store"))
)
""":data:`INSERT_AUDIT` with :data:`ADJUST_STORE` as a data-modifying ``WITH`` (PostgreSQL): a
write's one audit event and its store counters in one round trip. Parameters: the audit
columns as ``p_a_<column>`` (:data:`AUDIT_BUMP_COLUMNS`), plus ``p_sid``, ``p_df``, ``p_dc``
and ``p_now``. One row per execute (the ``WITH`` runs once per parameter set)."""


def audit_of_removed_files(*where: ColumnElement[bool], by_id: bool = False) -> sa.Insert:
    """``INSERT ... SELECT`` of one audit event per file row matching ``where`` that is about
    to be removed: its store id and key, path and size before, no size after, action
    ``:p_action``, actor ``:p_actor``, ``created_at = :p_now``, built in the database from the
    file and store rows (``by_id``: in file-id order). Run just before the delete, under the
    locks that keep the rows as they are."""
    select = (
        sa.select(
            files.c.store_id,
            stores.c.store_key,
            files.c.file_path,
            bp("p_action", type_=audit_events.c.action_name.type).label("action_name"),
            bp("p_actor", type_=audit_events.c.actor_name.type).label("actor_name"),
            files.c.char_count,
            sa.null().label("chars_after"),
            sa.null().label("detail_text"),
            bp("p_now", type_=TS).label("created_at"),
        )
        .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
        .where(*where)
    )
    if by_id:
        select = select.order_by(files.c.file_id)
    return sa.insert(audit_events).from_select(list(AUDIT_BUMP_COLUMNS), select)


INSERT_AUDIT_OF_FILE = audit_of_removed_files(
    files.c.store_id == bp("p_sid"), files.c.path_hash == bp("p_ph")
)
"""The audit event of deleting file ``:p_ph`` of store ``:p_sid`` (action ``:p_action``,
actor ``:p_actor``, ``created_at = :p_now``), its path and ``chars_before`` read from the file
row in the same statement, before :data:`DELETE_FILE_AT` removes it (the delete path after
:data:`UNCOUNT_FILE_JOIN`). Inserts nothing when there is no such file."""

DELETE_FILE_AT = sa.delete(files).where(
    files.c.store_id == bp("p_sid"), files.c.path_hash == bp("p_ph")
)
"""Delete file ``:p_ph`` of store ``:p_sid`` (the unique key); rowcount 1 when it existed."""


