"""What every file operation shares: finding and creating the store row (:func:`find_store_id`,
:func:`get_or_create_store`), locking it and its file rows in the writers' order, store row
first (:func:`lock_store`, :func:`lock_store_caps`, :func:`lock_store_and_file`,
:func:`lock_store_file_caps`), the savepoint of one write (:func:`savepoint`), the row mappers
(:func:`record`, :func:`info`), and the cap and shape checks made under that lock
(:func:`check_file_chars`, :func:`check_store_caps`, :func:`check_new_file_shape`,
:func:`require_not_root`). Used by the writers and readers of the store layer
(:mod:`dbmemory.store.files`, :mod:`dbmemory.store.moves`, :mod:`dbmemory.store.reads`,
:mod:`dbmemory.store.agents`)."""

from __future__ import annotations

from collections import namedtuple
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.core.keys import parse_store_key
from dbmemory.core.model import Caps, FileInfo, FileRecord, StoreRef
from dbmemory.core.paths import ROOT, ancestors, is_root, path_hash
from dbmemory.db import raw
from dbmemory.db.dialect.base import raw_reads
from dbmemory.db.dialect.errors import (
    serialization_failure,
    statement_timeout,
    translate_db_error,
)
from dbmemory.db.dialect.expiry import snapshot_isolation
from dbmemory.db.dialect.writes import current_read, insert_store_statement, store_and_file_lock
from dbmemory.errors import (
    CapExceededError,
    ConflictError,
    InvalidPathError,
    NotFoundError,
)
from dbmemory.store.caps import caps_of_row, caps_values, creation_caps
from dbmemory.store.owners import refuse_reserved
from dbmemory.store.statements import reads as st
from dbmemory.store.statements.writes import write_facts
from dbmemory.store.units import write_unit

__all__ = [
    "SERIALIZATION_FAILURE",
    "find_store_id",
    "get_or_create_store",
    "StoreArg",
    "savepoint",
    "record",
    "info",
    "lock_store",
    "lock_store_caps",
    "existing_store_id",
    "lock_store_and_file",
    "lock_store_file_caps",
    "refuse_reserved_store",
    "check_file_chars",
    "check_store_caps",
    "file_facts",
    "check_new_file_shape",
    "require_not_root",
]

SERIALIZATION_FAILURE = "serialization_failure"
""":class:`ConflictError` code of a write refused because the caller's REPEATABLE READ or
SERIALIZABLE snapshot predates another writer's commit: retry the whole transaction."""

StoreArg = int | StoreRef


class savepoint:
    """Run a write as one unit (savepoint, or its own transaction on AUTOCOMMIT: see
    :mod:`dbmemory.store.units`); a serialisation failure of a REPEATABLE READ/SERIALIZABLE caller
    becomes the "retry the whole transaction" conflict. (A class, not a generator: it runs
    for every write.)"""

    __slots__ = ("_unit", "_action")

    def __init__(self, conn: Connection, action: str) -> None:
        self._unit = write_unit(conn, action)
        self._action = action

    def __enter__(self) -> None:
        try:
            self._unit.__enter__()
        except ConflictError as exc:
            self._raise_serialization(exc)
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # never swallows the exception: it propagates, or a translated one
        try:
            self._unit.__exit__(exc_type, exc, tb)
        except ConflictError as error:
            self._raise_serialization(error)
            raise
        if isinstance(exc, ConflictError):
            self._raise_serialization(exc)

    def _raise_serialization(self, exc: ConflictError) -> None:
        cause = exc.__cause__
        if exc.code in ("conflict", SERIALIZATION_FAILURE) and cause is not None and serialization_failure(cause):
            action = self._action
            raise _serialization_error(action[:1].upper() + action[1:]) from cause


def _info_fields(m: Any) -> dict[str, Any]:
    return {
        "path": m["file_path"],
        "chars": m["char_count"],
        "version": m["version_no"],
        "created_at": m["created_at"],
        "updated_at": m["updated_at"],
        "last_accessed_at": m["last_accessed_at"],
    }


def record(row: Row[Any]) -> FileRecord:
    m = row._mapping
    return FileRecord(
        **_info_fields(m),
        text=m["body"] or "",
        store_id=m["store_id"],
        file_id=m["file_id"],
        expiry_exempt=bool(m["expiry_exempt"]),
    )


def info(row: Row[Any]) -> FileInfo:
    return FileInfo(**_info_fields(row._mapping))


def find_store_id(conn: Connection, store_key: str) -> int | None:
    """The row id of the store named ``store_key``, or ``None`` if it was never written.

    Raises:
        InvalidScopeError: ``store_key`` is not a valid key, checked exactly before any SQL
            (:func:`dbmemory.core.keys.parse_store_key`; MariaDB's PAD SPACE would otherwise find
            ``'user:A:u1'`` for ``'user:A:u1 '``).
    """
    check_arguments(conn=conn)
    parse_store_key(store_key)
    try:
        return conn.execute(st.SELECT_STORE_ID, {"p_key": store_key}).scalar_one_or_none()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "looking up a store") from exc


def get_or_create_store(
    conn: Connection,
    store_key: str,
    *,
    scope: str,
    agent_code: str | None = None,
    store_code: str | None = None,
) -> int:
    """The id of store ``store_key``, creating its row if needed (in the caller's transaction).

    The key must already be valid (build it with :func:`dbmemory.core.keys.build_store_key`).
    Safe under races: a concurrent creator's row is found and reused.
    """
    check_arguments(conn=conn)
    _v.check_text(store_key, "store_key", empty=False)
    _v.check_text(scope, "scope", empty=False)
    ref = StoreRef(store_key=store_key, scope=scope, agent_code=agent_code, store_code=store_code)
    with savepoint(conn, "opening a store"):
        return lock_store(conn, ref)[0]


Counts = tuple[int, int]
"""A locked store row's counters: ``(file_count, total_chars)`` (revision 0004)."""


def _row_type(stmt: Any) -> Any:
    """A tuple type for the rows of ``stmt`` read on the driver's cursor, with the attribute
    and ``_mapping`` access of SQLAlchemy's ``Row`` that the writers use."""

    class _LockedRow(namedtuple("_LockedRow", list(raw.columns(stmt)))):  # type: ignore[misc]
        __slots__ = ()

        @property
        def _mapping(self) -> dict[str, Any]:
            return dict(zip(self._fields, self, strict=True))

    return _LockedRow


_RAW_LOCKS = {stmt: _row_type(stmt) for stmt in (st.LOCK_STORE_AND_FILE, st.LOCK_STORE_WITH_FILE)}
"""The store-and-file locks SQLite runs on the driver's cursor (:mod:`dbmemory.db.raw`; SQLite
has no row locks: the write transaction's ``BEGIN IMMEDIATE`` holds the database's)."""


def _locking(conn: Connection, stmt: Any, params: dict[str, Any], what: str) -> Any:
    """Run the locking read ``stmt`` and return its first row; a statement the database
    cancelled at its time limit while it waited (another writer held the lock) becomes a
    :class:`~dbmemory.errors.StorageError` with code ``statement_timeout`` naming ``what``
    was locked and the limit. Other errors go up unchanged (the write unit reads them)."""
    try:
        row_type = _RAW_LOCKS.get(stmt)
        if row_type is not None and raw_reads(conn):
            found = raw.first_row(conn, stmt, params)
            return None if found is None else row_type._make(found)
        return conn.execute(stmt, params).first()
    except sa.exc.DBAPIError as exc:
        if statement_timeout(exc) is None:
            raise
        raise translate_db_error(
            exc, f"waiting for the write lock of {what} (another writer held it)"
        ) from exc


def _counts(row: Any) -> Counts:
    return int(row.file_count), int(row.total_chars)


def lock_store(conn: Connection, store: StoreArg) -> tuple[int, str]:
    """:func:`lock_store_caps` without the caps: ``(store_id, store_key)``."""
    store_id, store_key, _caps, _n = lock_store_caps(conn, store)
    return store_id, store_key


def lock_store_caps(conn: Connection, store: StoreArg) -> tuple[int, str, Caps, Counts]:
    """Lock the store row and return ``(store_id, store_key, caps, counters)``; create a
    StoreRef's row.

    The caps are the store's own, read from the locked row (:mod:`dbmemory.store.caps`); a row
    created here gets :func:`dbmemory.store.caps.creation_caps`. The counters are the row's
    ``(file_count, total_chars)``, exact under the lock. Every write then modifies the row
    (its counters, :func:`dbmemory.store.audit.audit_write`), so writers whose snapshots predate
    this write's commit fail to lock it (serialisation failure) instead of counting from a
    stale snapshot.

    A store that may not exist yet is looked up without a lock first and locked by id: a
    locking read of a missing key takes a gap lock on MySQL/MariaDB (REPEATABLE READ), two
    first writers then both hold it, both INSERT, and InnoDB breaks the deadlock by rolling
    back one caller's *whole* transaction (its savepoint is gone with it).
    """
    if isinstance(store, StoreRef):
        row = _lock_store_ref(conn, store)
        return row.store_id, row.store_key, caps_of_row(row), _counts(row)
    row = _locking(conn, st.LOCK_STORE_BY_ID, {"p_sid": store}, f"store {store}")
    if row is None:
        raise NotFoundError(f"store {store} does not exist: check the store id")
    refuse_reserved(row.store_key, "write")
    return row.store_id, row.store_key, caps_of_row(row), _counts(row)


def _lock_store_ref(conn: Connection, store: StoreRef) -> Any:
    """The locked row of ``store`` (:func:`lock_store_caps`): by its id when it is known or
    found without a lock, else after inserting it (:func:`_insert_store_row`) by its key.

    Raises:
        ReservedStoreError: the key is reserved (:func:`dbmemory.store.owners.refuse_reserved`).
        ConflictError: the row cannot be seen from this transaction's snapshot (a serialisation
            failure), or it was dropped while this transaction waited.
    """
    known = store.store_id
    if known is None:
        known = conn.execute(st.SELECT_STORE_ID, {"p_key": store.store_key}).scalar_one_or_none()
    if known is not None:
        row = _locking(conn, st.LOCK_STORE_BY_ID, {"p_sid": known}, f"store {store.store_key}")
        if row is not None and row.store_key == store.store_key:
            refuse_reserved(row.store_key, "write")
            return row
    refuse_reserved(store.store_key, "write")
    _insert_store_row(conn, store)
    row = _locking(
        conn, st.LOCK_STORE_BY_KEY, {"p_key": store.store_key}, f"store {store.store_key}"
    )
    if row is None:
        if snapshot_isolation(conn):
            # created by a writer that committed after this transaction's snapshot
            # (REPEATABLE READ / SERIALIZABLE): it cannot be seen, so it cannot be written
            raise _serialization_error(f"opening {store.store_key}")
        # dropped (drop_stores) by another transaction while this one waited
        raise ConflictError(f"store {store.store_key} was dropped meanwhile: retry")
    return row


def _insert_store_row(conn: Connection, store: StoreRef) -> None:
    """Insert ``store``'s row with the caps of its configuration
    (:func:`dbmemory.store.caps.creation_caps`), in a savepoint: a row another transaction
    created first (an ``IntegrityError``) is left for the caller to lock."""
    new_caps = creation_caps(conn, store)
    try:
        with conn.begin_nested():
            now = utcnow()
            conn.execute(
                insert_store_statement(conn, st.INSERT_STORE),
                {
                    "store_key": store.store_key,
                    "scope_name": store.scope,
                    "agent_code": store.agent_code,
                    "store_code": store.store_code,
                    "created_at": now,
                    "updated_at": now,
                    **caps_values(new_caps),
                },
            )
    except sa.exc.IntegrityError:
        pass  # created concurrently: lock theirs


def refuse_reserved_store(conn: Connection, store: StoreArg, action: str) -> None:
    """:func:`dbmemory.store.owners.refuse_reserved` before a write's short path (which takes
    no lock through this module): the key of a :class:`StoreRef`, or the key of a store id (one
    ``SELECT``; an unknown id passes, the write then says it is missing)."""
    if isinstance(store, StoreRef):
        refuse_reserved(store.store_key, action)
        return
    key = conn.execute(st.SELECT_STORE_KEY, {"p_sid": store}).scalar_one_or_none()
    if key is not None:
        refuse_reserved(key, action)


def _serialization_error(action: str) -> ConflictError:
    """The error for a write whose transaction's snapshot predates another writer's commit."""
    return ConflictError(
        f"{action} was refused: another writer changed this store after the caller's "
        "transaction took its snapshot (REPEATABLE READ or SERIALIZABLE isolation), so caps "
        "and paths could not be checked against what is committed. Nothing was written. Roll "
        "back and retry the whole transaction: retrying inside the same transaction fails again",
        code=SERIALIZATION_FAILURE,
    )


def existing_store_id(conn: Connection, store: StoreArg) -> int | None:
    if isinstance(store, StoreRef):
        return store.store_id if store.store_id is not None else find_store_id(conn, store.store_key)
    return store


def lock_store_and_file(
    conn: Connection, store: StoreArg, known_id: int | None, path: str
) -> tuple[int, str, Row[Any] | None]:
    """:func:`lock_store_file_caps` without caps and counters: ``(store_id, store_key, file
    row)``."""
    store_id, store_key, _caps, _n, row = lock_store_file_caps(conn, store, known_id, path)
    return store_id, store_key, row


def lock_store_file_caps(
    conn: Connection, store: StoreArg, known_id: int | None, path: str
) -> tuple[int, str, Caps, Counts, Row[Any] | None]:
    """Lock the store row, then the file row at ``path`` (locks-first order kept); return
    ``(store_id, store_key, the store's caps, its counters, file row or None)``.

    One statement where :func:`dbmemory.db.dialect.writes.store_and_file_lock` allows it and the
    store id is known (``known_id``); otherwise (and when the inner-join form finds no file)
    :func:`lock_store_caps` and a locking read of the file.
    """
    ph = path_hash(path)
    kind = store_and_file_lock(conn) if known_id is not None else None
    if kind is not None:
        stmt = st.LOCK_STORE_AND_FILE if kind == "outer" else st.LOCK_STORE_WITH_FILE
        row = _locking(
            conn,
            stmt,
            {"p_sid": known_id, "p_ph": ph},
            f"store {store.store_key if isinstance(store, StoreRef) else known_id}",
        )
        if row is not None and (
            not isinstance(store, StoreRef) or row.store_key == store.store_key
        ):
            file_row = row if row.file_id is not None else None
            refuse_reserved(row.store_key, "write")
            return row.locked_store_id, row.store_key, caps_of_row(row), _counts(row), file_row
        if kind == "outer" and not isinstance(store, StoreRef):
            raise NotFoundError(f"store {store} does not exist: check the store id")
    store_id, store_key, caps, counts = lock_store_caps(conn, store)
    row = _locking(
        conn, st.SELECT_FILE_FOR_UPDATE, {"p_sid": store_id, "p_ph": ph}, f"{path} in {store_key}"
    )
    return store_id, store_key, caps, counts, row


def check_file_chars(caps: Caps, path: str, new_chars: int, old_chars: int | None) -> None:
    """Refuse a text over ``max_file_chars`` unless it replaces a longer one (a store whose cap
    was lowered keeps its content and can still shrink it)."""
    if new_chars > caps.max_file_chars and (old_chars is None or new_chars > old_chars):
        raise CapExceededError(
            f"file text would be {new_chars:,} characters, over the cap max_file_chars = "
            f"{caps.max_file_chars:,}: keep files small — split it, or merge and delete old "
            "content",
            cap="max_file_chars",
            limit=caps.max_file_chars,
            actual=new_chars,
        )


def check_store_caps(
    caps: Caps, *, file_count: int, total_chars: int, add_files: int, add_chars: int, path: str
) -> None:
    if add_files > 0 and file_count + add_files > caps.max_files:
        raise CapExceededError(
            f"cannot create {path}: the store already holds {file_count:,} files and the cap "
            f"max_files is {caps.max_files:,}: merge related files or delete ones you no "
            "longer need, then retry",
            cap="max_files",
            limit=caps.max_files,
            actual=file_count + add_files,
        )
    if (
        caps.max_store_chars is not None
        and add_chars > 0
        and total_chars + add_chars > caps.max_store_chars
    ):
        raise CapExceededError(
            f"writing {path} would bring the store to {total_chars + add_chars:,} characters, "
            f"over the cap max_store_chars = {caps.max_store_chars:,}: condense or delete old "
            "files, then retry",
            cap="max_store_chars",
            limit=caps.max_store_chars,
            actual=total_chars + add_chars,
        )


def file_facts(conn: Connection, store_id: int, path: str) -> Any:
    stmt, params = write_facts(
        store_id, path, path_hash(path), [path_hash(a) for a in ancestors(path)]
    )
    return conn.execute(current_read(stmt, conn), params).one()


def check_new_file_shape(facts: Any, path: str) -> None:
    if facts.ancestor_files:
        raise InvalidPathError(
            f"cannot use {path}: a file exists where one of its parent directories would be; "
            "a path cannot be a file and a directory at once: choose another path",
            code="parent_is_file",
        )
    if facts.descendants:
        raise InvalidPathError(
            f"{path} is a directory: choose a file path inside it or another name",
            code="is_directory",
        )


def require_not_root(path: str, command: str) -> None:
    if is_root(path):
        raise InvalidPathError(
            f"cannot {command} the memory root {ROOT}: name a file or directory inside it",
            code="root_refused",
        )


