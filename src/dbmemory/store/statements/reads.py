"""Statements of the read path and of store rows, built once at import with bind parameters:
store look-ups and locks (``SELECT_STORE_ID``, ``LOCK_STORE_BY_KEY``, ``INSERT_STORE``), the
store counters and caps (``BUMP_STORE``, ``ADJUST_STORE``, ``CLAIM_FILE_SLOT``,
``SET_STORE_CAPS``), one file and its lock (``SELECT_FILE``, ``LOCK_STORE_AND_FILE``), listings
and sizes of a store or a directory (``SELECT_LISTING*``, ``SELECT_SIZES*``,
:func:`select_byte_sizes`), and the read touches of ``dbm_file_reads`` (``SELECT_FILE_READ``,
``INSERT_FILE_READ``, ``UPDATE_FILE_READ``). Also the helpers the other statement modules build
on: :data:`FILE_COLUMNS`, :func:`under_directory` (the exact prefix match) and
:func:`prefix_params`.

Pure: nothing here touches a connection. The executors are :mod:`dbmemory.store.reads`,
:mod:`dbmemory.store.locks` and :mod:`dbmemory.store.touches` (their hot reads through
:mod:`dbmemory.db.raw` on SQLite)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import visitors
from sqlalchemy.sql.expression import BindParameter, ColumnElement, Executable

from dbmemory.db.dialect.types import UtcDateTime
from dbmemory.db.schema import file_reads, files, stores

__all__ = [
    "FILE_COLUMNS",
    "under_directory",
    "prefix_params",
    "SELECT_STORE_ID",
    "SELECT_STORE_KEY",
    "LOCK_STORE_BY_KEY",
    "LOCK_STORE_BY_ID",
    "INSERT_STORE",
    "STORE_CAP_COLUMNS",
    "BUMP_STORE",
    "ADJUST_STORE",
    "CLAIM_FILE_SLOT",
    "CLAIM_FILE_SLOT_BY_KEY",
    "STORE_COUNTER_COLUMNS",
    "SET_STORE_CAPS",
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
    "SELECT_FILE_READ",
    "SELECT_FILE_READ_BY_KEY",
    "SELECT_FILE_ALIVE",
    "INSERT_FILE_READ",
    "UPDATE_FILE_READ",
    "select_byte_sizes",
    "bp",
    "TS",
    "under_prefix",
    "with_values",
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

bp = sa.bindparam
TS = UtcDateTime()


def under_prefix(plen: str = "p_plen", prefix: str = "p_prefix") -> ColumnElement[bool]:
    """:func:`under_directory` with the prefix (``directory + "/"``) and its length bound at
    execute time: pass :func:`prefix_params`."""
    return sa.func.substr(files.c.file_path, 1, bp(plen, type_=sa.Integer())) == bp(
        prefix, type_=sa.String()
    )


def prefix_params(directory: str) -> dict[str, Any]:
    """Parameters ``p_plen`` and ``p_prefix`` of the statements that match ``directory/``."""
    prefix = directory.rstrip("/") + "/"
    return {"p_plen": len(prefix), "p_prefix": prefix}


_STORE_ID_BY_KEY = (
    sa.select(stores.c.store_id).where(stores.c.store_key == bp("p_key")).scalar_subquery()
)
"""The store id of ``:p_key`` as a scalar subquery (not a join: two index look-ups even under
the generic plan PostgreSQL switches to once psycopg has prepared the statement)."""

SELECT_STORE_ID = sa.select(stores.c.store_id).where(stores.c.store_key == bp("p_key"))
"""``store_id`` of the store ``:p_key`` (no lock)."""

SELECT_STORE_KEY = sa.select(stores.c.store_key).where(stores.c.store_id == bp("p_sid"))
"""``store_key`` of the store ``:p_sid`` (no lock; read under the lock the writer holds)."""

STORE_CAP_COLUMNS = (stores.c.max_file_chars, stores.c.max_files, stores.c.max_store_chars)
"""The store's caps (revision 0002): every writer reads them from the row it locks."""

STORE_COUNTER_COLUMNS = (stores.c.file_count, stores.c.total_chars)
"""The store's counters (revision 0004): its number of files and of characters, kept exact by
every writer under the store lock (:data:`ADJUST_STORE`), so caps are checked in O(1)."""

LOCK_STORE_BY_KEY = (
    sa.select(stores.c.store_id, stores.c.store_key, *STORE_CAP_COLUMNS, *STORE_COUNTER_COLUMNS)
    .where(stores.c.store_key == bp("p_key"))
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
    .where(stores.c.store_id == bp("p_sid"))
    .with_for_update()
)
"""Lock the store row ``:p_sid``; returns its id, key, scope, caps and counters."""

INSERT_STORE = sa.insert(stores)
"""Create a store row; values per execute: ``store_key``, ``scope_name``, ``agent_code``,
``store_code``, ``created_at``, ``updated_at``, ``max_file_chars``, ``max_files``,
``max_store_chars`` (the caps of the store's configuration, :mod:`dbmemory.store.caps`)."""

BUMP_STORE = (
    sa.update(stores)
    .where(stores.c.store_id == bp("p_sid"))
    .values(updated_at=bp("p_now", type_=TS))
)
"""Mark store ``:p_sid`` as written (``updated_at = :p_now``), under the store lock the writer
already holds. Where :func:`dbmemory.db.dialect.writes.bump_store_on_write` says so (PostgreSQL,
Oracle), every write modifies the store row, so a second writer whose REPEATABLE READ or
SERIALIZABLE snapshot predates the first writer's commit fails to lock the row with a
serialisation failure instead of counting files from its stale snapshot."""

ADJUST_STORE = (
    sa.update(stores)
    .where(stores.c.store_id == bp("p_sid"))
    .values(
        file_count=stores.c.file_count + bp("p_df", type_=sa.Integer()),
        total_chars=stores.c.total_chars + bp("p_dc", type_=sa.BigInteger()),
        updated_at=bp("p_now", type_=TS),
    )
)
"""Move store ``:p_sid``'s counters by ``:p_df`` files and ``:p_dc`` characters and set
``updated_at = :p_now``, under the store lock the writer holds. Every write runs it (deltas 0
for a rename), so every write modifies its store row: a writer whose REPEATABLE READ or
SERIALIZABLE snapshot predates another writer's commit fails to lock the row (PostgreSQL,
Oracle), and on Galera cross-node writers of one store conflict at certification."""

_NEW_CHARS = bp("p_chars", type_=sa.BigInteger())


def _claim_file_slot(by_key: bool) -> sa.Update:
    conditions: list[ColumnElement[bool]] = [
        stores.c.store_id == bp("p_sid"),
        stores.c.max_file_chars >= _NEW_CHARS,
        stores.c.file_count < stores.c.max_files,
        sa.or_(
            stores.c.max_store_chars.is_(None),
            stores.c.total_chars + _NEW_CHARS <= stores.c.max_store_chars,
        ),
    ]
    if by_key:
        conditions.append(stores.c.store_key == bp("p_key"))
    return (
        sa.update(stores)
        .where(*conditions)
        .values(
            file_count=stores.c.file_count + 1,
            total_chars=stores.c.total_chars + _NEW_CHARS,
            updated_at=bp("p_now", type_=TS),
        )
    )


CLAIM_FILE_SLOT = _claim_file_slot(False)
"""A new file's first statement: lock store ``:p_sid`` and, in the same statement, check its
caps for one more file of ``:p_chars`` characters against the locked row's counters and count
it (``file_count + 1``, ``total_chars + :p_chars``). Rowcount 1: locked, caps hold, counted;
0: the store is missing or a cap refuses (the caller then takes the full path, which says
which)."""

CLAIM_FILE_SLOT_BY_KEY = _claim_file_slot(True)
""":data:`CLAIM_FILE_SLOT` that also requires ``store_key = :p_key`` (a :class:`~dbmemory.core.model.StoreRef` with
a remembered id)."""

SET_STORE_CAPS = (
    sa.update(stores)
    .where(stores.c.store_id == bp("p_sid"))
    .values(
        max_file_chars=bp("p_max_file_chars", type_=sa.Integer()),
        max_files=bp("p_max_files", type_=sa.Integer()),
        max_store_chars=bp("p_max_store_chars", type_=sa.BigInteger()),
        updated_at=bp("p_now", type_=TS),
    )
)
"""Set the caps of store ``:p_sid`` (:func:`dbmemory.set_store_caps`)."""

SELECT_FILE = sa.select(*FILE_COLUMNS).where(
    files.c.store_id == bp("p_sid"), files.c.path_hash == bp("p_ph")
)
"""One file with its body (``:p_sid``, ``:p_ph``)."""

SELECT_FILE_FOR_UPDATE = SELECT_FILE.with_for_update()
""":data:`SELECT_FILE`, locking the row."""

SELECT_FILE_BY_KEY = sa.select(*FILE_COLUMNS).where(
    files.c.store_id == _STORE_ID_BY_KEY, files.c.path_hash == bp("p_ph")
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
            sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == bp("p_ph")),
        )
    )
    .where(stores.c.store_id == bp("p_sid"))
)

LOCK_STORE_AND_FILE = _STORE_AND_FILE.with_for_update()
"""The store row ``:p_sid`` (``locked_store_id``, ``store_key``, caps) and the file ``:p_ph`` in it
(file columns ``NULL`` when there is none), locking both rows, in one round trip. The outer
join reads the store row first, so the lock order stays store row, then file row. For the
backends :func:`dbmemory.db.dialect.writes.store_and_file_lock` names ``"outer"`` (a locking read
there sees the latest committed rows)."""

LOCK_STORE_WITH_FILE = (
    sa.select(*_LOCKED_STORE_COLUMNS, *FILE_COLUMNS)
    .select_from(
        stores.join(
            files,
            sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == bp("p_ph")),
        )
    )
    .where(stores.c.store_id == bp("p_sid"))
    .with_for_update()
)
"""Like :data:`LOCK_STORE_AND_FILE` but an inner join: no row when the file does not exist
(the caller then locks the store alone). Locks the store row, then the file row (PostgreSQL
locks the rows of a join in ``FROM`` order), and a file row changed by the writer it waited
for is re-read at its latest version."""

SELECT_FILE_META = sa.select(*_META_COLUMNS).where(
    files.c.store_id == bp("p_sid"), files.c.path_hash == bp("p_ph")
)
"""One file without its body (``:p_sid``, ``:p_ph``)."""

SELECT_LISTING = sa.select(*_META_COLUMNS).where(files.c.store_id == bp("p_sid"))
"""Files (no body) of store ``:p_sid``. Ordering is done by the caller in Python (binary
code-point order on every backend, which ``ORDER BY`` under a linguistic collation would not
give)."""

SELECT_LISTING_DIR = SELECT_LISTING.where(under_prefix())
"""Files (no body) of ``:p_sid`` under a directory (:func:`prefix_params`)."""

SELECT_LISTING_DIR_ANY = SELECT_LISTING_DIR.limit(1)
"""At most one file under a directory: does the directory exist?"""

_SIZE_COLUMNS = (files.c.file_path, files.c.char_count)
SELECT_SIZES = sa.select(*_SIZE_COLUMNS).where(files.c.store_id == bp("p_sid"))
"""Path and size of every file of ``:p_sid``: what the tool's directory view shows (no
timestamps to convert)."""

SELECT_SIZES_DIR = SELECT_SIZES.where(under_prefix())
SELECT_SIZES_BY_KEY = sa.select(*_SIZE_COLUMNS).where(files.c.store_id == _STORE_ID_BY_KEY)
SELECT_SIZES_DIR_BY_KEY = SELECT_SIZES_BY_KEY.where(under_prefix())
SELECT_LISTING_BY_KEY = sa.select(*_META_COLUMNS).where(files.c.store_id == _STORE_ID_BY_KEY)
SELECT_LISTING_DIR_BY_KEY = SELECT_LISTING_BY_KEY.where(under_prefix())


# -- read touches -----------------------------------------------------------------------------
#
# A read records a touch (``dbm_file_reads``) that the expiry rule honours
# (:func:`dbmemory.store.statements.bulk.expiry_rule`).

_READ_AT = (
    sa.select(file_reads.c.read_at)
    .where(file_reads.c.store_id == files.c.store_id, file_reads.c.file_id == files.c.file_id)
    .scalar_subquery()
    .label("read_at")
)
"""The file's last recorded read, as a column of the file read (a primary-key lookup), so a
read knows whether it must record a touch without another round trip."""

SELECT_FILE_READ = SELECT_FILE.add_columns(_READ_AT)
""":data:`SELECT_FILE` plus ``read_at`` (``NULL`` when no read is recorded): a touching read."""

SELECT_FILE_READ_BY_KEY = SELECT_FILE_BY_KEY.add_columns(_READ_AT)
""":data:`SELECT_FILE_BY_KEY` plus ``read_at``."""

SELECT_FILE_ALIVE = sa.select(files.c.file_id).where(
    files.c.store_id == bp("p_sid"), files.c.file_id == bp("p_fid")
)
"""Whether file ``:p_fid`` of store ``:p_sid`` still exists (a plain, non-locking read)."""

INSERT_FILE_READ = sa.insert(file_reads).from_select(
    ["store_id", "file_id", "read_at"],
    sa.select(
        bp("p_sid", type_=sa.BigInteger()), bp("p_fid", type_=sa.BigInteger()), bp("p_now", type_=TS)
    ).where(
        ~sa.exists().where(
            file_reads.c.store_id == bp("p_sid", type_=sa.BigInteger()),
            file_reads.c.file_id == bp("p_fid", type_=sa.BigInteger()),
        )
    ),
)
"""Record the first read of ``:p_fid`` (of store ``:p_sid``) at ``:p_now`` (inserts nothing when a row exists). The
portable half of an upsert, for SQLite's inline touch (one writer at a time); the servers use
:func:`dbmemory.db.dialect.expiry.file_read_upsert`."""

UPDATE_FILE_READ = (
    sa.update(file_reads)
    .where(
        file_reads.c.store_id == bp("p_sid"),
        file_reads.c.file_id == bp("p_fid"),
        file_reads.c.read_at < bp("p_now", type_=TS),
    )
    .values(read_at=bp("p_now", type_=TS))
)
"""Move the recorded read of ``:p_fid`` (of store ``:p_sid``) forward to ``:p_now`` (never backwards)."""

# -- for the compile checks -------------------------------------------------------------------


def with_values(stmt: Executable, **values: Any) -> Executable:
    """``stmt`` with sample values bound to its (expanding) placeholders, for compile checks:
    ``params()`` does the same for a SELECT but is not available on INSERT/UPDATE/DELETE."""

    def replace(element: Any) -> Any:
        if isinstance(element, BindParameter) and element.key in values:
            return element._with_value(  # type: ignore[no-untyped-call]  # SQLAlchemy's own
                values[element.key], maintain_key=True, required=False
            )
        return None

    bound: Executable = visitors.replacement_traverse(stmt, {}, replace)  # type: ignore[call-overload]
    return bound


def select_byte_sizes(size: ColumnElement[Any], *, under: bool) -> sa.Select[Any]:
    """Path and ``size`` (an expression of ``body``: its UTF-8 length from
    :func:`dbmemory.db.dialect.expiry.utf8_length`, or ``body`` itself where the database cannot
    measure it) of the files of the store ``:p_key``; ``under``: only those under a directory
    (:func:`prefix_params`). What the Anthropic SDK's directory view shows (bytes on disk)."""
    stmt = sa.select(files.c.file_path, size).where(files.c.store_id == _STORE_ID_BY_KEY)
    return stmt.where(under_prefix()) if under else stmt
