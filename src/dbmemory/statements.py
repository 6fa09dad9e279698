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
import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import visitors
from sqlalchemy.sql.expression import BindParameter, ColumnElement, Executable

from dbmemory.db.dialect import PATH_KEY_CHARS, PathKey, UtcDateTime
from dbmemory.db.schema import audit_events, file_reads, files, stores

__all__ = [
    "FILE_COLUMNS",
    "under_directory",
    "prefix_params",
    "SELECT_STORE_ID",
    "SELECT_STORE_KEY",
    "returning_file_id",
    "LOCK_STORE_BY_KEY",
    "LOCK_STORE_BY_ID",
    "INSERT_STORE",
    "STORE_CAP_COLUMNS",
    "BUMP_STORE",
    "ADJUST_STORE",
    "CLAIM_FILE_SLOT",
    "CLAIM_FILE_SLOT_BY_KEY",
    "STORE_COUNTER_COLUMNS",
    "INSERT_AUDIT_BUMP",
    "INSERT_AUDIT_ADJUST",
    "AUDIT_BUMP_COLUMNS",
    "SET_STORE_CAPS",
    "select_configured_caps",
    "update_configured_store_caps",
    "SELECT_FILE",
    "SELECT_FILE_FOR_UPDATE",
    "SELECT_FILE_BY_KEY",
    "LOCK_STORE_AND_FILE",
    "LOCK_STORE_WITH_FILE",
    "SELECT_FILE_META",
    "SELECT_LISTING",
    "SELECT_LISTING_DIR",
    "SELECT_LISTING_DIR_ANY",
    "SELECT_LISTING_BY_KEY",
    "SELECT_LISTING_DIR_BY_KEY",
    "SELECT_SIZES",
    "SELECT_SIZES_DIR",
    "SELECT_SIZES_BY_KEY",
    "SELECT_SIZES_DIR_BY_KEY",
    "SELECT_WRITE_FACTS",
    "SELECT_WRITE_FACTS_TOP",
    "write_facts",
    "INSERT_FILE_IF_FREE",
    "INSERT_FILE_IF_FREE_TOP",
    "INSERT_FILE_IF_FREE_SCAN",
    "INSERT_FILE_IF_FREE_SCAN_TOP",
    "insert_file_if_free_params",
    "INSERT_FILE",
    "insert_file_params",
    "UPDATE_FILE",
    "UPDATE_FILE_EXEMPT",
    "update_file_params",
    "DELETE_FILES_BY_ID",
    "DELETE_FILE_BY_ID",
    "MOVE_FILE",
    "INSERT_AUDIT",
    "SELECT_FILE_READ",
    "SELECT_FILE_READ_BY_KEY",
    "SELECT_FILE_ALIVE",
    "INSERT_FILE_READ",
    "UPDATE_FILE_READ",
    "SELECT_JOB_LOCK",
    "expiry_rule",
    "select_expiry_candidates",
    "DELETE_EXPIRED",
    "SELECT_FILES_LEFT",
    "SELECT_STORE_KEYS",
    "DELETE_FILE_READS_BY_ID",
    "select_orphan_reads",
    "count_expirable",
    "select_agent",
    "insert_agent",
    "update_agent",
    "select_agents",
    "MAX_IN_LIST",
    "id_chunks",
    "select_stores_of_agent",
    "lock_stores_by_id",
    "select_store_keys",
    "lock_stores_by_key",
    "select_store_totals",
    "delete_stores_by_id",
    "example_statements",
    "select_byte_sizes",
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


# -- prebuilt statements ----------------------------------------------------------------------
#
# The statements on the tool's hot paths are built once, at import, with ``bindparam()``
# placeholders, and executed with a parameter dict: ``conn.execute(st.SELECT_FILE, {"p_sid": 1,
# "p_ph": h})``. Building a Core statement per call costs more than executing it (construction,
# the cache-key walk of a new object, result-metadata adaptation). Bind names carry a ``p_``
# prefix: never an Oracle reserved word, never a column name (UPDATE ... SET reserves those).
# Timestamp placeholders are typed ``UtcDateTime`` so they bind as UTC on every backend.

_bp = sa.bindparam
_TS = UtcDateTime()


def _under(plen: str = "p_plen", prefix: str = "p_prefix") -> ColumnElement[bool]:
    """:func:`under_directory` with the prefix (``directory + "/"``) and its length bound at
    execute time: pass :func:`prefix_params`."""
    return sa.func.substr(files.c.file_path, 1, _bp(plen, type_=sa.Integer())) == _bp(
        prefix, type_=sa.String()
    )


def prefix_params(directory: str) -> dict[str, Any]:
    """Parameters ``p_plen`` and ``p_prefix`` of the statements that match ``directory/``."""
    prefix = directory.rstrip("/") + "/"
    return {"p_plen": len(prefix), "p_prefix": prefix}


_STORE_ID_BY_KEY = (
    sa.select(stores.c.store_id).where(stores.c.store_key == _bp("p_key")).scalar_subquery()
)
"""The store id of ``:p_key`` as a scalar subquery (not a join: two index look-ups even under
the generic plan PostgreSQL switches to once psycopg has prepared the statement)."""

SELECT_STORE_ID = sa.select(stores.c.store_id).where(stores.c.store_key == _bp("p_key"))
"""``store_id`` of the store ``:p_key`` (no lock)."""

SELECT_STORE_KEY = sa.select(stores.c.store_key).where(stores.c.store_id == _bp("p_sid"))
"""``store_key`` of the store ``:p_sid`` (no lock; read under the lock the writer holds)."""

STORE_CAP_COLUMNS = (stores.c.max_file_chars, stores.c.max_files, stores.c.max_store_chars)
"""The store's caps (revision 0002): every writer reads them from the row it locks."""

STORE_COUNTER_COLUMNS = (stores.c.file_count, stores.c.total_chars)
"""The store's counters (revision 0004): its number of files and of characters, kept exact by
every writer under the store lock (:data:`ADJUST_STORE`), so caps are checked in O(1)."""

LOCK_STORE_BY_KEY = (
    sa.select(stores.c.store_id, stores.c.store_key, *STORE_CAP_COLUMNS, *STORE_COUNTER_COLUMNS)
    .where(stores.c.store_key == _bp("p_key"))
    .with_for_update()
)
"""Lock the store row ``:p_key``; returns its id, key and caps. Every writer of a store takes
this lock (or :data:`LOCK_STORE_BY_ID`) first, so writers serialise and caps cannot be raced."""

LOCK_STORE_BY_ID = (
    sa.select(
        stores.c.store_id,
        stores.c.store_key,
        stores.c.scope_name,
        *STORE_CAP_COLUMNS,
        *STORE_COUNTER_COLUMNS,
    )
    .where(stores.c.store_id == _bp("p_sid"))
    .with_for_update()
)
"""Lock the store row ``:p_sid``; returns its id, key, scope, caps and counters."""

INSERT_STORE = sa.insert(stores)
"""Create a store row; values per execute: ``store_key``, ``scope_name``, ``agent_code``,
``store_code``, ``created_at``, ``updated_at``, ``max_file_chars``, ``max_files``,
``max_store_chars`` (the caps of the store's configuration, :mod:`dbmemory.caps`)."""

BUMP_STORE = (
    sa.update(stores)
    .where(stores.c.store_id == _bp("p_sid"))
    .values(updated_at=_bp("p_now", type_=_TS))
)
"""Mark store ``:p_sid`` as written (``updated_at = :p_now``), under the store lock the writer
already holds. Where :func:`dbmemory.db.dialect.bump_store_on_write` says so (PostgreSQL,
Oracle), every write modifies the store row, so a second writer whose REPEATABLE READ or
SERIALIZABLE snapshot predates the first writer's commit fails to lock the row with a
serialisation failure instead of counting files from its stale snapshot."""

ADJUST_STORE = (
    sa.update(stores)
    .where(stores.c.store_id == _bp("p_sid"))
    .values(
        file_count=stores.c.file_count + _bp("p_df", type_=sa.Integer()),
        total_chars=stores.c.total_chars + _bp("p_dc", type_=sa.BigInteger()),
        updated_at=_bp("p_now", type_=_TS),
    )
)
"""Move store ``:p_sid``'s counters by ``:p_df`` files and ``:p_dc`` characters and set
``updated_at = :p_now``, under the store lock the writer holds. Every write runs it (deltas 0
for a rename), so every write modifies its store row: a writer whose REPEATABLE READ or
SERIALIZABLE snapshot predates another writer's commit fails to lock the row (PostgreSQL,
Oracle), and on Galera cross-node writers of one store conflict at certification."""

_NEW_CHARS = _bp("p_chars", type_=sa.BigInteger())


def _claim_file_slot(by_key: bool) -> sa.Update:
    conditions: list[ColumnElement[bool]] = [
        stores.c.store_id == _bp("p_sid"),
        stores.c.max_file_chars >= _NEW_CHARS,
        stores.c.file_count < stores.c.max_files,
        sa.or_(
            stores.c.max_store_chars.is_(None),
            stores.c.total_chars + _NEW_CHARS <= stores.c.max_store_chars,
        ),
    ]
    if by_key:
        conditions.append(stores.c.store_key == _bp("p_key"))
    return (
        sa.update(stores)
        .where(*conditions)
        .values(
            file_count=stores.c.file_count + 1,
            total_chars=stores.c.total_chars + _NEW_CHARS,
            updated_at=_bp("p_now", type_=_TS),
        )
    )


CLAIM_FILE_SLOT = _claim_file_slot(False)
"""A new file's first statement: lock store ``:p_sid`` and, in the same statement, check its
caps for one more file of ``:p_chars`` characters against the locked row's counters and count
it (``file_count + 1``, ``total_chars + :p_chars``). Rowcount 1: locked, caps hold, counted;
0: the store is missing or a cap refuses (the caller then takes the full path, which says
which)."""

CLAIM_FILE_SLOT_BY_KEY = _claim_file_slot(True)
""":data:`CLAIM_FILE_SLOT` that also requires ``store_key = :p_key`` (a :class:`StoreRef` with
a remembered id)."""

SET_STORE_CAPS = (
    sa.update(stores)
    .where(stores.c.store_id == _bp("p_sid"))
    .values(
        max_file_chars=_bp("p_max_file_chars", type_=sa.Integer()),
        max_files=_bp("p_max_files", type_=sa.Integer()),
        max_store_chars=_bp("p_max_store_chars", type_=sa.BigInteger()),
        updated_at=_bp("p_now", type_=_TS),
    )
)
"""Set the caps of store ``:p_sid`` (:func:`dbmemory.set_store_caps`)."""

SELECT_FILE = sa.select(*FILE_COLUMNS).where(
    files.c.store_id == _bp("p_sid"), files.c.path_hash == _bp("p_ph")
)
"""One file with its body (``:p_sid``, ``:p_ph``)."""

SELECT_FILE_FOR_UPDATE = SELECT_FILE.with_for_update()
""":data:`SELECT_FILE`, locking the row."""

SELECT_FILE_BY_KEY = sa.select(*FILE_COLUMNS).where(
    files.c.store_id == _STORE_ID_BY_KEY, files.c.path_hash == _bp("p_ph")
)
"""One file with its body by store key (``:p_key``, ``:p_ph``): one round trip for a reader
that does not know the store id yet."""

_LOCKED_STORE_COLUMNS = (
    stores.c.store_id.label("locked_store_id"),
    stores.c.store_key,
    *STORE_CAP_COLUMNS,
    *STORE_COUNTER_COLUMNS,
)
_STORE_AND_FILE = (
    sa.select(*_LOCKED_STORE_COLUMNS, *FILE_COLUMNS)
    .select_from(
        stores.outerjoin(
            files,
            sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == _bp("p_ph")),
        )
    )
    .where(stores.c.store_id == _bp("p_sid"))
)

LOCK_STORE_AND_FILE = _STORE_AND_FILE.with_for_update()
"""The store row ``:p_sid`` (``locked_store_id``, ``store_key``, caps) and the file ``:p_ph`` in it
(file columns ``NULL`` when there is none), locking both rows, in one round trip. The outer
join reads the store row first, so the lock order stays store row, then file row. For the
backends :func:`dbmemory.db.dialect.store_and_file_lock` names ``"outer"`` (a locking read
there sees the latest committed rows)."""

LOCK_STORE_WITH_FILE = (
    sa.select(*_LOCKED_STORE_COLUMNS, *FILE_COLUMNS)
    .select_from(
        stores.join(
            files,
            sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == _bp("p_ph")),
        )
    )
    .where(stores.c.store_id == _bp("p_sid"))
    .with_for_update()
)
"""Like :data:`LOCK_STORE_AND_FILE` but an inner join: no row when the file does not exist
(the caller then locks the store alone). Locks the store row, then the file row (PostgreSQL
locks the rows of a join in ``FROM`` order), and a file row changed by the writer it waited
for is re-read at its latest version."""

SELECT_FILE_META = sa.select(*_META_COLUMNS).where(
    files.c.store_id == _bp("p_sid"), files.c.path_hash == _bp("p_ph")
)
"""One file without its body (``:p_sid``, ``:p_ph``)."""

SELECT_LISTING = sa.select(*_META_COLUMNS).where(files.c.store_id == _bp("p_sid"))
"""Files (no body) of store ``:p_sid``. Ordering is done by the caller in Python (binary
code-point order on every backend, which ``ORDER BY`` under a linguistic collation would not
give)."""

SELECT_LISTING_DIR = SELECT_LISTING.where(_under())
"""Files (no body) of ``:p_sid`` under a directory (:func:`prefix_params`)."""

SELECT_LISTING_DIR_ANY = SELECT_LISTING_DIR.limit(1)
"""At most one file under a directory: does the directory exist?"""

_SIZE_COLUMNS = (files.c.file_path, files.c.char_count)
SELECT_SIZES = sa.select(*_SIZE_COLUMNS).where(files.c.store_id == _bp("p_sid"))
"""Path and size of every file of ``:p_sid``: what the tool's directory view shows (no
timestamps to convert)."""

SELECT_SIZES_DIR = SELECT_SIZES.where(_under())
SELECT_SIZES_BY_KEY = sa.select(*_SIZE_COLUMNS).where(files.c.store_id == _STORE_ID_BY_KEY)
SELECT_SIZES_DIR_BY_KEY = SELECT_SIZES_BY_KEY.where(_under())
SELECT_LISTING_BY_KEY = sa.select(*_META_COLUMNS).where(files.c.store_id == _STORE_ID_BY_KEY)
SELECT_LISTING_DIR_BY_KEY = SELECT_LISTING_BY_KEY.where(_under())


def _taken(table: Any, with_ancestors: bool) -> list[ColumnElement[bool]]:
    """Conditions on ``table`` (``dbm_files`` or an alias) for the files of ``:p_sid`` that keep
    a new file from ``:p_ph``: the same path, a file where one of its ancestor directories
    would be (``:p_anc``), a file under it (it is a directory, :func:`prefix_params`)."""
    under = sa.func.substr(table.c.file_path, 1, _bp("p_plen", type_=sa.Integer())) == _bp(
        "p_prefix", type_=sa.String()
    )
    clash = [table.c.path_hash == _bp("p_ph"), under]
    if with_ancestors:
        clash.append(table.c.path_hash.in_(_bp("p_anc", expanding=True)))
    return [table.c.store_id == _bp("p_sid"), sa.or_(*clash)]


def _write_facts(with_ancestors: bool) -> sa.Select[Any]:
    one, zero = sa.literal(1), sa.literal(0)
    same = sa.case((files.c.path_hash == _bp("p_ph"), one), else_=zero)
    if with_ancestors:
        anc: Any = sa.case(
            (files.c.path_hash.in_(_bp("p_anc", expanding=True)), one), else_=zero
        )
    else:
        anc = zero
    desc = sa.case((_under(), one), else_=zero)
    return sa.select(
        sa.func.coalesce(sa.func.sum(same), 0).label("same"),
        sa.func.coalesce(sa.func.sum(anc), 0).label("ancestor_files"),
        sa.func.coalesce(sa.func.sum(desc), 0).label("descendants"),
    ).where(*_taken(files, with_ancestors))


SELECT_WRITE_FACTS = _write_facts(True)
"""The shape facts of a new file's path in one round trip, over the store's files that clash
with it only (file counts and characters come from the store row's counters). A ``FROM
dbm_files``, so :func:`dbmemory.db.dialect.current_read` can make it a locking read on
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


_NEW_FILE_VALUES = {
    "store_id": _bp("p_sid", type_=sa.BigInteger()),
    "file_path": _bp("p_path", type_=sa.String()),
    "path_hash": _bp("p_ph", type_=sa.String()),
    "body": _bp("p_body", type_=files.c.body.type),
    "char_count": _bp("p_chars", type_=sa.Integer()),
    "version_no": sa.literal(1, sa.Integer()),
    "expiry_exempt": _bp("p_exempt", type_=files.c.expiry_exempt.type),
    "created_at": _bp("p_now", type_=_TS),
    "updated_at": _bp("p_now", type_=_TS),
    "last_accessed_at": _bp("p_now", type_=_TS),
}


def _insert_file_if_free(with_ancestors: bool, ranged: bool) -> sa.Insert:
    by_hash, under = files.alias("f_same"), files.alias("f_under")
    same: ColumnElement[bool] = by_hash.c.path_hash == _bp("p_ph")
    if with_ancestors:
        same = sa.or_(same, by_hash.c.path_hash.in_(_bp("p_anc", expanding=True)))
    inside = [
        under.c.store_id == _bp("p_sid"),
        sa.func.substr(under.c.file_path, 1, _bp("p_plen", type_=sa.Integer()))
        == _bp("p_prefix", type_=sa.String()),
    ]
    if ranged:  # an index range probe of ix_dbm_files_prefix (revision 0004)
        key = PathKey(under.c.file_path)
        inside += [key >= _bp("p_lo", type_=sa.String()), key < _bp("p_hi", type_=sa.String())]
    values = sa.select(
        *(v.label(k) if not isinstance(v, BindParameter) else v for k, v in _NEW_FILE_VALUES.items())
    ).where(
        ~sa.exists().where(by_hash.c.store_id == _bp("p_sid"), same),
        ~sa.exists().where(*inside),
    )
    return sa.insert(files).from_select(list(_NEW_FILE_VALUES), values)


INSERT_FILE_IF_FREE = _insert_file_if_free(True, True)
"""Insert a new file (version 1) only if its path is free: no file at the path or where one of
its ancestor directories must be (``path_hash``, the unique index), none under it (an index
range probe of ``ix_dbm_files_prefix``, :class:`dbmemory.db.dialect.PathKey`, then the exact
``SUBSTR`` test): O(log n) in the store's size, no scan. Runs under the store lock, after
:data:`CLAIM_FILE_SLOT`, so its ``NOT EXISTS`` reads what the previous writer committed.
Rowcount 1: created; 0: the path is taken (the caller reads the facts to say how).
Parameters: :func:`insert_file_if_free_params`."""

INSERT_FILE_IF_FREE_TOP = _insert_file_if_free(False, True)
""":data:`INSERT_FILE_IF_FREE` for a path directly under the root (no ancestors)."""

INSERT_FILE_IF_FREE_SCAN = _insert_file_if_free(True, False)
""":data:`INSERT_FILE_IF_FREE` without the range probe: for a path whose directory prefix is
longer than the index key (:data:`dbmemory.db.dialect.PATH_KEY_CHARS`)."""

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
    now = _bp("p_now", type_=_TS)
    values: dict[str, Any] = {
        "body": _bp("p_body", type_=files.c.body.type),
        "char_count": _bp("p_chars", type_=sa.Integer()),
        "version_no": _bp("p_new_version", type_=sa.Integer()),
        "updated_at": now,
        "last_accessed_at": now,
    }
    if with_exempt:
        values["expiry_exempt"] = _bp("p_exempt", type_=files.c.expiry_exempt.type)
    return values


def _update_file(with_exempt: bool) -> sa.Update:
    return (
        sa.update(files)
        .where(files.c.file_id == _bp("p_fid"), files.c.version_no == _bp("p_version"))
        .values(**_file_update_values(with_exempt))
    )


UPDATE_FILE = _update_file(False)
"""Replace a file's text if it is still at ``:p_version``; bumps the version. A rowcount of 0
means another writer changed or removed it (compare-and-set lost)."""

UPDATE_FILE_EXEMPT = _update_file(True)
""":data:`UPDATE_FILE` that also sets ``expiry_exempt``."""


def update_file_params(
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
    values[stores.c.total_chars] = stores.c.total_chars + _bp("p_dc", type_=sa.BigInteger())
    values[stores.c.updated_at] = _bp("p_now", type_=_TS)
    return (
        sa.update(files)
        .where(
            files.c.file_id == _bp("p_fid"),
            files.c.version_no == _bp("p_version"),
            stores.c.store_id == _bp("p_sid"),
            stores.c.store_id == files.c.store_id,
        )
        .values(values)
    )


UPDATE_FILE_COUNTED = _update_file_counted(False)
""":data:`UPDATE_FILE` and :data:`ADJUST_STORE`'s character move (``total_chars + :p_dc``,
``updated_at = :p_now`` of store ``:p_sid``) in one multi-table ``UPDATE dbm_files, dbm_stores``
(MySQL/MariaDB only: :func:`dbmemory.db.dialect.counted_file_update`; other backends cannot
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
    stmt, params = update_file_params(file_id, text, expected_version, now, expiry_exempt=expiry_exempt)
    params.update(p_sid=store_id, p_dc=chars_delta)
    return (UPDATE_FILE_COUNTED if stmt is UPDATE_FILE else UPDATE_FILE_EXEMPT_COUNTED), params


def _store_file_at(by_key: bool) -> tuple[Any, list[ColumnElement[bool]]]:
    joined = stores.join(
        files, sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == _bp("p_ph"))
    )
    where = [stores.c.store_id == _bp("p_sid")]
    if by_key:
        where.append(stores.c.store_key == _bp("p_key"))
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
                stores.c.updated_at: _bp("p_now", type_=_TS),
                # a no-op SET on the file row makes it an updated table: exclusively locked
                # now, not shared and upgraded by the delete (an upgrade deadlocks with any
                # writer already queued for that row)
                files.c.version_no: files.c.version_no,
            }
        )
    )


UNCOUNT_FILE_JOIN = _uncount_file_join(False)
"""A delete's first statement on MySQL/MariaDB (:func:`dbmemory.db.dialect.delete_uncounts_first`
``"join"``): lock store ``:p_sid`` and, in the same statement, take the file ``:p_ph`` out of
its counters (``file_count - 1``, ``total_chars - char_count``, ``updated_at = :p_now``).
``dbm_stores INNER JOIN dbm_files``: InnoDB locks the store row first, then the file row
(exclusively: a no-op ``SET version_no = version_no``; read-only it would be a shared lock
that the delete then upgrades, a deadlock with a writer queued for the row: seen in
``tests/test_store_counters.py``'s race), so the lock order stays store row, then file row,
and the file's ``char_count`` is its latest committed value at any isolation level (measured;
see ``tests/test_write_races.py``). Rowcount 1 or 2 (2 where the driver counts found rows):
the file exists and was uncounted; 0: the store or the file is missing (nothing changed: the caller takes the full path, which says which).
MySQL/MariaDB only (a multi-table ``UPDATE``)."""

UNCOUNT_FILE_JOIN_BY_KEY = _uncount_file_join(True)
""":data:`UNCOUNT_FILE_JOIN` that also requires ``store_key = :p_key``."""


def _uncount_file_subquery(by_key: bool) -> sa.Update:
    at = sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == _bp("p_ph"))
    chars = sa.select(files.c.char_count).where(at).scalar_subquery()
    where = [stores.c.store_id == _bp("p_sid"), sa.exists().where(at)]
    if by_key:
        where.append(stores.c.store_key == _bp("p_key"))
    return (
        sa.update(stores)
        .where(*where)
        .values(
            file_count=stores.c.file_count - 1,
            total_chars=stores.c.total_chars - chars,
            updated_at=_bp("p_now", type_=_TS),
        )
    )


UNCOUNT_FILE_SUBQUERY = _uncount_file_subquery(False)
""":data:`UNCOUNT_FILE_JOIN` as a one-table ``UPDATE`` with subqueries (SQLite,
:func:`dbmemory.db.dialect.delete_uncounts_first` ``"subquery"``): sound only where writers
are serialised before the statement starts (SQLite's ``BEGIN IMMEDIATE``); at READ COMMITTED
elsewhere the subquery would read the snapshot taken before the statement waited for the
store lock. Rowcount 1: uncounted; 0: the store or the file is missing."""

UNCOUNT_FILE_SUBQUERY_BY_KEY = _uncount_file_subquery(True)
""":data:`UNCOUNT_FILE_SUBQUERY` that also requires ``store_key = :p_key``."""

DELETE_FILES_BY_ID = sa.delete(files).where(files.c.file_id.in_(_bp("p_ids", expanding=True)))
"""Delete files by id (``:p_ids``, at most 1,000 per statement: Oracle's IN-list limit)."""

DELETE_FILE_BY_ID = sa.delete(files).where(files.c.file_id == _bp("p_fid"))
"""Delete one file by id (``:p_fid``); run with many parameter sets for a directory, so every
delete is a primary-key lookup (MariaDB may scan, and lock, other stores' rows for an IN list
on a small table)."""

_MOVED_AT = _bp("p_now", type_=_TS)
MOVE_FILE = (
    sa.update(files)
    .where(files.c.file_id == _bp("p_fid"))
    .values(
        file_path=_bp("p_path", type_=files.c.file_path.type),
        path_hash=_bp("p_hash", type_=sa.String(64)),
        version_no=_bp("p_new_version", type_=sa.Integer()),
        updated_at=_MOVED_AT,
        last_accessed_at=_MOVED_AT,
    )
)
"""Give file ``:p_fid`` a new path (rename): ``:p_path``, ``:p_hash``, ``:p_new_version``,
``:p_now``."""

MOVE_FILE_COUNTED = (
    sa.update(files)
    .where(
        files.c.file_id == _bp("p_fid"),
        stores.c.store_id == _bp("p_sid"),
        stores.c.store_id == files.c.store_id,
    )
    .values(
        {
            files.c.file_path: _bp("p_path", type_=files.c.file_path.type),
            files.c.path_hash: _bp("p_hash", type_=sa.String(64)),
            files.c.version_no: _bp("p_new_version", type_=sa.Integer()),
            files.c.updated_at: _MOVED_AT,
            files.c.last_accessed_at: _MOVED_AT,
            stores.c.updated_at: _MOVED_AT,
        }
    )
)
""":data:`MOVE_FILE` and the store row's write mark (``updated_at = :p_now`` of store
``:p_sid``; a rename moves no counter) in one multi-table ``UPDATE dbm_files, dbm_stores``, under the store
and file locks the renamer holds (MySQL/MariaDB only: :func:`dbmemory.db.dialect.counted_file_update`).
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
INSERT_AUDIT_BUMP = (
    sa.insert(audit_events)
    .values({name: _bp(f"p_a_{name}", type_=audit_events.c[name].type) for name in AUDIT_BUMP_COLUMNS})
    .add_cte(BUMP_STORE.cte("bumped_store"))
)
""":data:`INSERT_AUDIT` with :data:`BUMP_STORE` as a data-modifying ``WITH`` (PostgreSQL): a
write's audit events and the store-row bump in one round trip. Parameters per row: the audit
columns as ``p_a_<column>`` (:data:`AUDIT_BUMP_COLUMNS`; a bare column name would also be
taken as a ``SET`` of the ``UPDATE``), plus ``p_sid`` and ``p_now``."""

INSERT_AUDIT_ADJUST = (
    sa.insert(audit_events)
    .values({name: _bp(f"p_a_{name}", type_=audit_events.c[name].type) for name in AUDIT_BUMP_COLUMNS})
    .add_cte(ADJUST_STORE.cte("adjusted_store"))
)
""":data:`INSERT_AUDIT` with :data:`ADJUST_STORE` as a data-modifying ``WITH`` (PostgreSQL): a
write's one audit event and its store counters in one round trip. Parameters: the audit
columns as ``p_a_<column>`` (:data:`AUDIT_BUMP_COLUMNS`), plus ``p_sid``, ``p_df``, ``p_dc``
and ``p_now``. One row per execute (the ``WITH`` runs once per parameter set)."""


INSERT_AUDIT_OF_FILE = sa.insert(audit_events).from_select(
    list(AUDIT_BUMP_COLUMNS),
    sa.select(
        files.c.store_id,
        stores.c.store_key,
        files.c.file_path,
        _bp("p_action", type_=audit_events.c.action_name.type).label("action_name"),
        _bp("p_actor", type_=audit_events.c.actor_name.type).label("actor_name"),
        files.c.char_count,
        sa.null().label("chars_after"),
        sa.null().label("detail_text"),
        _bp("p_now", type_=_TS).label("created_at"),
    )
    .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
    .where(files.c.store_id == _bp("p_sid"), files.c.path_hash == _bp("p_ph")),
)
"""The audit event of deleting file ``:p_ph`` of store ``:p_sid`` (action ``:p_action``,
actor ``:p_actor``, ``created_at = :p_now``), its path and ``chars_before`` read from the file
row in the same statement, before :data:`DELETE_FILE_AT` removes it (the delete path after
:data:`UNCOUNT_FILE_JOIN`). Inserts nothing when there is no such file."""

DELETE_FILE_AT = sa.delete(files).where(
    files.c.store_id == _bp("p_sid"), files.c.path_hash == _bp("p_ph")
)
"""Delete file ``:p_ph`` of store ``:p_sid`` (the unique key); rowcount 1 when it existed."""


def join_update_statements() -> dict[str, Executable]:
    """The multi-table ``UPDATE`` statements, MySQL/MariaDB only (Oracle, PostgreSQL
    and SQLite cannot compile them, so they are not in :func:`example_statements`; a test
    compiles them for MySQL and checks that :mod:`dbmemory.db.dialect` picks them nowhere
    else). Name -> statement."""
    from dbmemory import statements_bulk

    return {
        "update_file_counted": UPDATE_FILE_COUNTED,
        "update_file_exempt_counted": UPDATE_FILE_EXEMPT_COUNTED,
        "move_file_counted": MOVE_FILE_COUNTED,
        "uncount_file_join": UNCOUNT_FILE_JOIN,
        "uncount_file_join_by_key": UNCOUNT_FILE_JOIN_BY_KEY,
        "uncount_expired_join": statements_bulk.UNCOUNT_EXPIRED_JOIN,
    }



# -- read touches -----------------------------------------------------------------------------
#
# A read records a touch (``dbm_file_reads``) that the expiry rule honours
# (:func:`dbmemory.statements_bulk.expiry_rule`).

_READ_AT = (
    sa.select(file_reads.c.read_at)
    .where(file_reads.c.file_id == files.c.file_id)
    .scalar_subquery()
    .label("read_at")
)
"""The file's last recorded read, as a column of the file read (a primary-key lookup), so a
read knows whether it must record a touch without another round trip."""

SELECT_FILE_READ = SELECT_FILE.add_columns(_READ_AT)
""":data:`SELECT_FILE` plus ``read_at`` (``NULL`` when no read is recorded): a touching read."""

SELECT_FILE_READ_BY_KEY = SELECT_FILE_BY_KEY.add_columns(_READ_AT)
""":data:`SELECT_FILE_BY_KEY` plus ``read_at``."""

SELECT_FILE_ALIVE = sa.select(files.c.file_id).where(files.c.file_id == _bp("p_fid"))
"""Whether file ``:p_fid`` still exists (a plain, non-locking read)."""

INSERT_FILE_READ = sa.insert(file_reads).from_select(
    ["file_id", "read_at"],
    sa.select(_bp("p_fid", type_=sa.BigInteger()), _bp("p_now", type_=_TS)).where(
        ~sa.exists().where(file_reads.c.file_id == _bp("p_fid", type_=sa.BigInteger()))
    ),
)
"""Record the first read of ``:p_fid`` at ``:p_now`` (inserts nothing when a row exists). The
portable half of an upsert, for SQLite's inline touch (one writer at a time); the servers use
:func:`dbmemory.db.dialect.file_read_upsert`."""

UPDATE_FILE_READ = (
    sa.update(file_reads)
    .where(file_reads.c.file_id == _bp("p_fid"), file_reads.c.read_at < _bp("p_now", type_=_TS))
    .values(read_at=_bp("p_now", type_=_TS))
)
"""Move the recorded read of ``:p_fid`` forward to ``:p_now`` (never backwards)."""

# -- for the compile checks -------------------------------------------------------------------


def _with_values(stmt: Executable, **values: Any) -> Executable:
    """``stmt`` with sample values bound to its (expanding) placeholders, for compile checks:
    ``params()`` does the same for a SELECT but is not available on INSERT/UPDATE/DELETE."""

    def replace(element: Any) -> Any:
        if isinstance(element, BindParameter) and element.key in values:
            return element._with_value(values[element.key], maintain_key=True, required=False)
        return None

    return visitors.replacement_traverse(stmt, {}, replace)


def select_byte_sizes(size: ColumnElement[Any], *, under: bool) -> sa.Select[Any]:
    """Path and ``size`` (an expression of ``body``: its UTF-8 length from
    :func:`dbmemory.db.dialect.utf8_length`, or ``body`` itself where the database cannot
    measure it) of the files of the store ``:p_key``; ``under``: only those under a directory
    (:func:`prefix_params`). What the Anthropic SDK's directory view shows (bytes on disk)."""
    stmt = sa.select(files.c.file_path, size).where(files.c.store_id == _STORE_ID_BY_KEY)
    return stmt.where(_under()) if under else stmt


def example_statements() -> dict[str, Executable]:
    """Every statement the package runs (prebuilt ones as they are; expanding IN lists bound to
    sample values so they render).

    Returns:
        Name -> statement. The Oracle compile test compiles each for Oracle 19c and checks
        identifiers and CLOB use; add new statements here when you add them above.
    """
    from dbmemory.statements_bulk import (
        INSERT_EXPIRED_AUDIT,
        MAX_IN_LIST,
        delete_stores_by_id,
        insert_agent,
        lock_stores_by_id,
        lock_stores_by_key,
        select_agent,
        select_agents,
        select_configured_caps,
        select_store_keys,
        select_store_totals,
        select_stores_of_agent,
        touch_and_expiry_examples,
        update_agent,
        update_configured_store_caps,
    )

    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    h = "0" * 64
    drop_files, drop_stores = delete_stores_by_id([1, 2])
    facts, facts_params = write_facts(1, "/memories/a/b.md", h, [h])
    # statements with post-compile parts (expanding IN lists, Oracle's FETCH FIRST) render
    # only with every value bound
    sample: dict[str, Any] = {
        **facts_params,
        "p_ids": [1, 2, 3],
        "p_now": now,
        "p_older": now,
    }
    return {
        "select_store_id": SELECT_STORE_ID,
        "select_store_key": SELECT_STORE_KEY,
        "lock_store_by_key": LOCK_STORE_BY_KEY,
        "lock_store_by_id": LOCK_STORE_BY_ID,
        "insert_store": INSERT_STORE.values(
            store_key="agent:A",
            scope_name="agent",
            agent_code="A",
            store_code=None,
            created_at=now,
            updated_at=now,
            max_file_chars=100_000,
            max_files=1_000,
            max_store_chars=None,
        ),
        "bump_store": BUMP_STORE,
        "adjust_store": ADJUST_STORE,
        "claim_file_slot": CLAIM_FILE_SLOT,
        "claim_file_slot_by_key": CLAIM_FILE_SLOT_BY_KEY,
        "insert_audit_bump": INSERT_AUDIT_BUMP,
        "insert_audit_adjust": INSERT_AUDIT_ADJUST,
        "set_store_caps": SET_STORE_CAPS,
        "select_configured_caps_shared": select_configured_caps("shared", None, "TEAM"),
        "select_configured_caps_global": select_configured_caps("global", None, None),
        "select_configured_caps_agent": select_configured_caps("user", "A", None),
        "update_configured_store_caps": update_configured_store_caps(
            scope="user",
            key="user:A:",
            is_prefix=True,
            agent_code="A",
            store_code=None,
            caps={"max_file_chars": 10, "max_files": 3, "max_store_chars": None},
            now=now,
        ),
        "update_configured_store_caps_shared": update_configured_store_caps(
            scope="shared",
            key="shared:TEAM",
            is_prefix=False,
            agent_code=None,
            store_code="TEAM",
            caps={"max_file_chars": 10, "max_files": 3, "max_store_chars": 30},
            now=now,
        ),
        "select_stores_of_agent": select_stores_of_agent("A"),
        "lock_stores_by_id": lock_stores_by_id([1, 2]),
        "lock_stores_by_id_1000": lock_stores_by_id(range(1, MAX_IN_LIST + 1)),
        "select_store_keys": select_store_keys([1, 2]),
        "lock_stores_by_key": lock_stores_by_key(["agent:A", "user:A:u1"]),
        "select_store_totals": select_store_totals([1, 2]),
        "insert_expired_audit": _with_values(
            INSERT_EXPIRED_AUDIT, **sample, p_cutoff=now, p_action="expire", p_actor="expiry"
        ),
        "delete_store_files": drop_files,
        "delete_stores": drop_stores,
        "select_file": SELECT_FILE,
        "select_file_for_update": SELECT_FILE_FOR_UPDATE,
        "select_file_by_key": SELECT_FILE_BY_KEY,
        "lock_store_and_file": LOCK_STORE_AND_FILE,
        "lock_store_with_file": LOCK_STORE_WITH_FILE,
        "select_file_meta": SELECT_FILE_META,
        "select_listing": SELECT_LISTING,
        "select_listing_dir": SELECT_LISTING_DIR,
        "select_listing_dir_any": _with_values(SELECT_LISTING_DIR_ANY, **sample),
        "select_listing_by_key": SELECT_LISTING_BY_KEY,
        "select_listing_dir_by_key": SELECT_LISTING_DIR_BY_KEY,
        "select_sizes": SELECT_SIZES,
        "select_sizes_dir": SELECT_SIZES_DIR,
        "select_sizes_by_key": SELECT_SIZES_BY_KEY,
        "select_sizes_dir_by_key": SELECT_SIZES_DIR_BY_KEY,
        "select_write_facts": _with_values(facts, **sample),
        "select_write_facts_top": SELECT_WRITE_FACTS_TOP,
        "insert_file_if_free": _with_values(
            *insert_file_if_free_params(1, "/memories/a/b.md", h, [h], "x" * 50, now)[:1],
            **insert_file_if_free_params(1, "/memories/a/b.md", h, [h], "x" * 50, now)[1],
        ),
        "insert_file_if_free_top": INSERT_FILE_IF_FREE_TOP,
        "insert_file_if_free_scan_top": INSERT_FILE_IF_FREE_SCAN_TOP,
        "insert_file": INSERT_FILE.values(
            **insert_file_params(1, "/memories/a.md", h, "x" * 5000, now)
        ),
        "update_file": UPDATE_FILE,
        "update_file_exempt": UPDATE_FILE_EXEMPT,
        "delete_files_by_id": _with_values(DELETE_FILES_BY_ID, **sample),
        "delete_file_by_id": DELETE_FILE_BY_ID,
        "move_file": MOVE_FILE,
        "uncount_file_subquery": UNCOUNT_FILE_SUBQUERY,
        "uncount_file_subquery_by_key": UNCOUNT_FILE_SUBQUERY_BY_KEY,
        "insert_audit_of_file": INSERT_AUDIT_OF_FILE,
        "delete_file_at": DELETE_FILE_AT,
        **touch_and_expiry_examples(sample),
        "insert_audit": INSERT_AUDIT.values(
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
        "select_byte_sizes": select_byte_sizes(files.c.body, under=True),
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


def __getattr__(name: str) -> Any:
    """The expiry, admin and agent statements live in :mod:`dbmemory.statements_bulk`; they are
    reachable here too, where callers and tests look for them (PEP 562: imported on first use,
    as that module builds on this one), and kept here once looked up."""
    from dbmemory import statements_bulk

    try:
        value = getattr(statements_bulk, name)
    except AttributeError:
        raise AttributeError(f"module 'dbmemory.statements' has no attribute {name!r}") from None
    globals()[name] = value
    return value
