"""Files and stores: the data-access layer under the MEMORY tool, the admin API and profiles.

Every function takes a SQLAlchemy ``Connection`` first and **never commits or rolls back a
transaction it did not open**: writes join the caller's transaction and roll back with it. Each
write runs inside a savepoint, so a statement that fails leaves the caller's transaction usable
(PostgreSQL would otherwise abort it), and input is validated before any SQL runs.

Concurrency: every writer of a store first locks the store row (``SELECT ... FOR UPDATE``),
then the file rows it changes, so writers of one store serialise, the files-per-store and
characters-per-store caps cannot be exceeded by a race, and no edit is lost silently. On SQLite
the engine set-up (:func:`dbmemory.db.dialect.configure_engine`) takes the write lock at
``BEGIN``. Every change writes one audit event in the same transaction.

Where a function takes ``store`` it accepts a store id (``int``, the store must exist) or a
:class:`~dbmemory.model.StoreRef` (the store row is created on its first write).
"""

from __future__ import annotations

import datetime as dt
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from dbmemory import statements as st
from dbmemory import validate as _v
from dbmemory.caps import caps_of_row, caps_values, creation_caps
from dbmemory.db import dialect
from dbmemory.errors import (
    AlreadyExistsError,
    CapExceededError,
    ConflictError,
    DbMemoryError,
    InvalidArgumentError,
    InvalidPathError,
    NotFoundError,
)
from dbmemory.model import Caps, FileInfo, FileRecord, StoreRef
from dbmemory.paths import ROOT, ancestors, is_root, normalize_path, path_hash
from dbmemory.touch import touch_after_read
from dbmemory.txn import write_unit

__all__ = [
    "DEFAULT_CAPS",
    "SERIALIZATION_FAILURE",
    "find_store_id",
    "get_or_create_store",
    "list_files",
    "list_directory",
    "get_file",
    "read_path",
    "view_path",
    "put_file",
    "create_file",
    "edit_file",
    "delete_file",
    "delete_path",
    "rename_path",
    "clear_store_files",
    "validate_text",
]

SERIALIZATION_FAILURE = "serialization_failure"
""":class:`ConflictError` code of a write refused because the caller's REPEATABLE READ or
SERIALIZABLE snapshot predates another writer's commit: retry the whole transaction."""

DEFAULT_CAPS = Caps()
"""100,000 characters per file, 1,000 files per store, no cap on a store's characters."""

StoreArg = int | StoreRef
_SURROGATE = re.compile("[\ud800-\udfff]")
T = TypeVar("T")


# -- validation (pure, before any SQL) --------------------------------------------------------


def validate_text(text: object, *, what: str = "file text", max_chars: int | None = None) -> str:
    """Check a file text before any SQL runs and return it.

    Args:
        text: the candidate text.
        what: its name in messages.
        max_chars: the ``max_file_chars`` cap to check, in characters; ``None`` skips it.

    Raises:
        InvalidArgumentError: not a ``str``, contains NUL (U+0000, which PostgreSQL cannot
            store), or contains a lone surrogate (not encodable as UTF-8).
        CapExceededError: longer than ``max_chars`` characters.
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(
            f"{what} must be text, got {'None' if text is None else type(text).__name__}: pass a "
            "str ('' for an empty file)"
        )
    if max_chars is not None and len(text) > max_chars:
        raise CapExceededError(
            f"{what} would be {len(text):,} characters, over the cap max_file_chars = "
            f"{max_chars:,}: keep files small — split it, or merge and delete old content",
            cap="max_file_chars",
            limit=max_chars,
            actual=len(text),
        )
    if "\x00" in text:
        raise InvalidArgumentError(
            f"{what} contains a NUL character (U+0000), which cannot be stored: remove it"
        )
    surrogate = _SURROGATE.search(text)  # no 4x copy of a large text, unlike encode()
    if surrogate is not None:
        raise InvalidArgumentError(
            f"{what} contains an invalid character at position {surrogate.start()} (a lone "
            "surrogate that is not valid Unicode text): remove or replace it"
        )
    return text


# -- helpers ----------------------------------------------------------------------------------


class _savepoint:
    """Run a write as one unit (savepoint, or its own transaction on AUTOCOMMIT: see
    :mod:`dbmemory.txn`); a serialisation failure of a REPEATABLE READ/SERIALIZABLE caller
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

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            self._unit.__exit__(exc_type, exc, tb)
        except ConflictError as error:
            self._raise_serialization(error)
            raise
        if isinstance(exc, ConflictError):
            self._raise_serialization(exc)
        return False

    def _raise_serialization(self, exc: ConflictError) -> None:
        cause = exc.__cause__
        if exc.code == "conflict" and cause is not None and dialect.serialization_failure(cause):
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


def _record(row: Row[Any]) -> FileRecord:
    m = row._mapping
    return FileRecord(
        **_info_fields(m),
        text=m["body"] or "",
        store_id=m["store_id"],
        file_id=m["file_id"],
        expiry_exempt=bool(m["expiry_exempt"]),
    )


def _info(row: Row[Any]) -> FileInfo:
    return FileInfo(**_info_fields(row._mapping))


def _audit(conn: Connection, events: Sequence[dict[str, Any]]) -> None:
    if not events:
        return
    conn.execute(st.INSERT_AUDIT, _audit_rows(events, dialect.utcnow()))


def _audit_rows(events: Sequence[dict[str, Any]], now: dt.datetime) -> list[dict[str, Any]]:
    return [
        {
            "store_id": e.get("store_id"),
            "store_key": e.get("store_key"),
            "file_path": e.get("file_path"),
            "action_name": e["action_name"],
            "actor_name": (e.get("actor_name") or "unknown")[:500],
            "chars_before": e.get("chars_before"),
            "chars_after": e.get("chars_after"),
            "detail_text": (e.get("detail_text") or None) and e["detail_text"][:1000],
            "created_at": now,
        }
        for e in events
    ]


def find_store_id(conn: Connection, store_key: str) -> int | None:
    """The row id of the store named ``store_key``, or ``None`` if it was never written.

    Raises:
        InvalidScopeError: ``store_key`` is not a valid key, checked exactly before any SQL
            (:func:`dbmemory.keys.parse_store_key`; MariaDB's PAD SPACE would otherwise find
            ``'user:A:u1'`` for ``'user:A:u1 '``).
    """
    from dbmemory.keys import parse_store_key

    _v.arguments(conn=conn)
    parse_store_key(store_key)
    try:
        return conn.execute(st.SELECT_STORE_ID, {"p_key": store_key}).scalar_one_or_none()
    except sa.exc.SQLAlchemyError as exc:
        raise dialect.translate_db_error(exc, "looking up a store") from exc


def get_or_create_store(
    conn: Connection,
    store_key: str,
    *,
    scope: str,
    agent_code: str | None = None,
    store_code: str | None = None,
) -> int:
    """The id of store ``store_key``, creating its row if needed (in the caller's transaction).

    The key must already be valid (build it with :func:`dbmemory.keys.build_store_key`).
    Safe under races: a concurrent creator's row is found and reused.
    """
    _v.arguments(conn=conn)
    _v.check_text(store_key, "store_key", empty=False)
    _v.check_text(scope, "scope", empty=False)
    ref = StoreRef(store_key=store_key, scope=scope, agent_code=agent_code, store_code=store_code)
    with _savepoint(conn, "opening a store"):
        return _lock_store(conn, ref)[0]


def _lock_store(conn: Connection, store: StoreArg) -> tuple[int, str]:
    """:func:`_lock_store_caps` without the caps: ``(store_id, store_key)``."""
    store_id, store_key, _caps = _lock_store_caps(conn, store)
    return store_id, store_key


def _lock_store_caps(conn: Connection, store: StoreArg) -> tuple[int, str, Caps]:
    """Lock the store row and return ``(store_id, store_key, caps)``; create a StoreRef's row.

    The caps are the store's own, read from the locked row (:mod:`dbmemory.caps`); a row
    created here gets :func:`dbmemory.caps.creation_caps`. Where
    :func:`dbmemory.db.dialect.bump_store_on_write` says so, the row is also modified
    (:func:`_audit_write`, with the write's audit events), so writers whose snapshots predate
    this write's commit fail to lock it (serialisation failure) instead of counting from a
    stale snapshot.

    A store that may not exist yet is looked up without a lock first and locked by id: a
    locking read of a missing key takes a gap lock on MySQL/MariaDB (REPEATABLE READ), two
    first writers then both hold it, both INSERT, and InnoDB breaks the deadlock by rolling
    back one caller's *whole* transaction (its savepoint is gone with it).
    """
    if isinstance(store, StoreRef):
        known = store.store_id
        if known is None:
            known = conn.execute(
                st.SELECT_STORE_ID, {"p_key": store.store_key}
            ).scalar_one_or_none()
        if known is not None:
            row = conn.execute(st.LOCK_STORE_BY_ID, {"p_sid": known}).first()
            if row is not None and row.store_key == store.store_key:
                return row.store_id, row.store_key, caps_of_row(row)
        new_caps = creation_caps(conn, store)
        try:
            with conn.begin_nested():
                now = dialect.utcnow()
                conn.execute(
                    dialect.insert_store_statement(conn, st.INSERT_STORE),
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
        row = conn.execute(st.LOCK_STORE_BY_KEY, {"p_key": store.store_key}).first()
        if row is None:
            if dialect.snapshot_isolation(conn):
                # created by a writer that committed after this transaction's snapshot
                # (REPEATABLE READ / SERIALIZABLE): it cannot be seen, so it cannot be written
                raise _serialization_error(f"opening {store.store_key}")
            # dropped (drop_stores) by another transaction while this one waited
            raise ConflictError(f"store {store.store_key} was dropped meanwhile: retry")
        return row.store_id, row.store_key, caps_of_row(row)
    row = conn.execute(st.LOCK_STORE_BY_ID, {"p_sid": store}).first()
    if row is None:
        raise NotFoundError(f"store {store} does not exist: check the store id")
    return row.store_id, row.store_key, caps_of_row(row)


def _audit_write(conn: Connection, store_id: int, events: Sequence[dict[str, Any]]) -> None:
    """Write a store change's audit events and, where the backend needs it for caps and shape
    to hold at REPEATABLE READ / SERIALIZABLE (:func:`dbmemory.db.dialect.bump_store_on_write`),
    modify the locked store row (``updated_at``): in the same statement on PostgreSQL
    (:data:`dbmemory.statements.INSERT_AUDIT_BUMP`), one statement more on Oracle, nothing on
    MySQL/MariaDB and SQLite. Every write that changes a store calls this under its store lock,
    so a writer whose snapshot predates this write's commit fails to lock the store row."""
    bump = dialect.store_bump(conn)
    if bump == "cte" and events:
        now = dialect.utcnow()
        rows = [
            {"p_sid": store_id, "p_now": now, **{f"p_a_{k}": v for k, v in row.items()}}
            for row in _audit_rows(events, now)
        ]
        conn.execute(st.INSERT_AUDIT_BUMP, rows)
        return
    if bump is not None:
        conn.execute(st.BUMP_STORE, {"p_sid": store_id, "p_now": dialect.utcnow()})
    _audit(conn, events)


def _serialization_error(action: str) -> ConflictError:
    """The error for a write whose transaction's snapshot predates another writer's commit."""
    return ConflictError(
        f"{action} was refused: another writer changed this store after the caller's "
        "transaction took its snapshot (REPEATABLE READ or SERIALIZABLE isolation), so caps "
        "and paths could not be checked against what is committed. Nothing was written. Roll "
        "back and retry the whole transaction: retrying inside the same transaction fails again",
        code=SERIALIZATION_FAILURE,
    )


def _existing_store_id(conn: Connection, store: StoreArg) -> int | None:
    if isinstance(store, StoreRef):
        return store.store_id if store.store_id is not None else find_store_id(conn, store.store_key)
    return store


def _lock_store_and_file(
    conn: Connection, store: StoreArg, known_id: int | None, path: str
) -> tuple[int, str, Row[Any] | None]:
    """:func:`_lock_store_file_caps` without the caps: ``(store_id, store_key, file row)``."""
    store_id, store_key, _caps, row = _lock_store_file_caps(conn, store, known_id, path)
    return store_id, store_key, row


def _lock_store_file_caps(
    conn: Connection, store: StoreArg, known_id: int | None, path: str
) -> tuple[int, str, Caps, Row[Any] | None]:
    """Lock the store row, then the file row at ``path`` (locks-first order kept); return
    ``(store_id, store_key, the store's caps, file row or None)``.

    One statement where :func:`dbmemory.db.dialect.store_and_file_lock` allows it and the
    store id is known (``known_id``); otherwise (and when the inner-join form finds no file)
    :func:`_lock_store_caps` and a locking read of the file.
    """
    ph = path_hash(path)
    kind = dialect.store_and_file_lock(conn) if known_id is not None else None
    if kind is not None:
        stmt = st.LOCK_STORE_AND_FILE if kind == "outer" else st.LOCK_STORE_WITH_FILE
        row = conn.execute(stmt, {"p_sid": known_id, "p_ph": ph}).first()
        if row is not None and (
            not isinstance(store, StoreRef) or row.store_key == store.store_key
        ):
            file_row = row if row.file_id is not None else None
            return row.locked_store_id, row.store_key, caps_of_row(row), file_row
        if kind == "outer" and not isinstance(store, StoreRef):
            raise NotFoundError(f"store {store} does not exist: check the store id")
    store_id, store_key, caps = _lock_store_caps(conn, store)
    row = conn.execute(st.SELECT_FILE_FOR_UPDATE, {"p_sid": store_id, "p_ph": ph}).first()
    return store_id, store_key, caps, row


def _check_file_chars(caps: Caps, path: str, new_chars: int, old_chars: int | None) -> None:
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


def _ignored_caps(caps: object, function: str) -> None:
    """Warn that a writer's ``caps=`` argument is ignored (the store row's caps apply)."""
    if caps is not None:
        warnings.warn(
            f"{function}(caps=...) is deprecated and ignored: a store's caps are the values on "
            "its row (set them with dbmemory.enable_for_agent or dbmemory.set_store_caps)",
            DeprecationWarning,
            stacklevel=3,
        )


def _check_store_caps(
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


def _facts(conn: Connection, store_id: int, path: str) -> Any:
    stmt, params = st.write_facts(
        store_id, path, path_hash(path), [path_hash(a) for a in ancestors(path)]
    )
    return conn.execute(dialect.current_read(stmt, conn), params).one()


def _check_new_file_shape(facts: Any, path: str) -> None:
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


def _require_not_root(path: str, command: str) -> None:
    if is_root(path):
        raise InvalidPathError(
            f"cannot {command} the memory root {ROOT}: name a file or directory inside it",
            code="root_refused",
        )


# -- reads ------------------------------------------------------------------------------------


def list_files(conn: Connection, store_id: int) -> list[FileInfo]:
    """Every file of a store without its text.

    Returns:
        list of :class:`FileInfo` (path, size in characters, version, created, updated, last
        accessed), sorted by path (code-point order). Empty for an empty store.

    Raises:
        InvalidArgumentError: ``conn`` is not a Connection; ``store_id`` is not a whole number
            from 1 to 2**63-1.
    """
    _v.arguments(conn=conn, store_id=store_id)
    return list_directory(conn, store_id, ROOT)


def list_directory(conn: Connection, store_id: int | None, directory: str) -> list[FileInfo]:
    """Files (no text) at any depth under ``directory``, sorted by path; ``[]`` if none.

    Raises:
        InvalidPathError: ``directory`` is not a valid path.
        InvalidArgumentError: ``conn`` is not a Connection; a bad ``store_id``.
    """
    _v.arguments(conn=conn)
    _v.check_id(store_id, optional=True)
    directory = normalize_path(directory)
    if store_id is None:
        return []
    return _listing(conn, _Listing.by_id(store_id, directory, sizes=False), directory)


class _Listing:
    """Which listing statement to run and with what (by store id or key; full or sizes)."""

    __slots__ = ("params", "sizes", "stmt")

    def __init__(self, stmt: Any, params: dict[str, Any], sizes: bool) -> None:
        self.stmt, self.params, self.sizes = stmt, params, sizes

    @classmethod
    def by_id(cls, store_id: int, directory: str, *, sizes: bool) -> _Listing:
        if is_root(directory):
            stmt = st.SELECT_SIZES if sizes else st.SELECT_LISTING
            return cls(stmt, {"p_sid": store_id}, sizes)
        stmt = st.SELECT_SIZES_DIR if sizes else st.SELECT_LISTING_DIR
        return cls(stmt, {"p_sid": store_id, **st.prefix_params(directory)}, sizes)

    @classmethod
    def by_key(cls, store_key: str, directory: str, *, sizes: bool) -> _Listing:
        if is_root(directory):
            stmt = st.SELECT_SIZES_BY_KEY if sizes else st.SELECT_LISTING_BY_KEY
            return cls(stmt, {"p_key": store_key}, sizes)
        stmt = st.SELECT_SIZES_DIR_BY_KEY if sizes else st.SELECT_LISTING_DIR_BY_KEY
        return cls(stmt, {"p_key": store_key, **st.prefix_params(directory)}, sizes)


def _listing(conn: Connection, listing: _Listing, directory: str) -> list[Any]:
    try:
        rows = conn.execute(listing.stmt, listing.params).all()
    except sa.exc.SQLAlchemyError as exc:
        raise dialect.translate_db_error(exc, f"listing {directory}") from exc
    if listing.sizes:
        return sorted((r[0], r[1]) for r in rows)
    return sorted((_info(r) for r in rows), key=lambda f: f.path)


def get_file(conn: Connection, store_id: int, path: str, *, touch: bool = False) -> FileRecord:
    """One file with its text (one ``SELECT``).

    Args:
        touch: also record the read for expiry, durably before returning (see
            :mod:`dbmemory.touch`; on SQLite it joins the caller's transaction).

    Returns:
        :class:`FileRecord`; ``text`` is ``""`` for an empty file on every backend.

    Raises:
        InvalidPathError: invalid path.
        InvalidArgumentError: ``conn`` is not a Connection; a bad ``store_id``; ``touch`` not
            a bool.
        NotFoundError: no file at ``path`` (it may be a directory), or (``touch``) it was
            removed between the read and its touch.
        ConflictError: (``touch``) the touch waited too long for a running expiry: retry.
    """
    _v.check_connection(conn)
    _v.check_id(store_id, "store_id")
    _v.check_bool(touch, "touch")
    path = normalize_path(path)
    stmt = st.SELECT_FILE_READ if touch else st.SELECT_FILE
    row = _select_file(conn, stmt, {"p_sid": store_id, "p_ph": path_hash(path)}, path)
    if row is None:
        raise NotFoundError(f"the path {path} does not exist", code="not_found")
    if touch:
        touch_after_read(conn, row.file_id, row.last_accessed_at, row.read_at, path=path)
    return _record(row)


def _select_file(conn: Connection, stmt: Any, params: dict[str, Any], path: str) -> Row[Any] | None:
    try:
        return conn.execute(stmt, params).first()
    except sa.exc.SQLAlchemyError as exc:
        raise dialect.translate_db_error(exc, f"reading {path}") from exc


def read_path(
    conn: Connection, store: StoreArg | None, path: str
) -> FileRecord | list[FileInfo]:
    """What ``view`` shows: a file (touched) or the files under a directory.

    A file costs one ``SELECT`` (plus, at most once per file per hour, the touch that records
    the read durably before this returns: :mod:`dbmemory.touch`), also for a :class:`StoreRef`
    whose store id is not known yet (the file is read by store key); the root costs one
    ``SELECT``.

    Returns:
        :class:`FileRecord` for a file; a list of :class:`FileInfo` sorted by path for a
        directory (``[]`` for an empty or never-written store's root).

    Raises:
        InvalidPathError: invalid path.
        NotFoundError: neither a file nor a directory.
    """
    return _read(conn, store, path, sizes=False)


def view_path(
    conn: Connection, store: StoreArg | None, path: str
) -> FileRecord | list[tuple[str, int]]:
    """:func:`read_path` for the MEMORY tool's ``view``: a directory comes back as
    ``(path, size in characters)`` pairs sorted by path (only what the listing shows)."""
    return _read(conn, store, path, sizes=True)


def _read(conn: Connection, store: StoreArg | None, path: str, *, sizes: bool) -> Any:
    _v.check_connection(conn)
    if store is not None:
        _v.check_store(store)
    path = normalize_path(path)
    if isinstance(store, StoreRef):
        # Always by key, never by a cached id: a store dropped since (end_session, drop_store)
        # frees its id, which SQLite may give to another tenant's new store.
        key = store.store_key
        if is_root(path):
            return _listing(conn, _Listing.by_key(key, path, sizes=sizes), path)
        row = _select_file(conn, st.SELECT_FILE_READ_BY_KEY, {"p_key": key, "p_ph": path_hash(path)}, path)
        if row is not None:
            touch_after_read(conn, row.file_id, row.last_accessed_at, row.read_at, path=path)
            return _record(row)
        entries = _listing(conn, _Listing.by_key(key, path, sizes=sizes), path)
        if entries:
            return entries
        raise NotFoundError(f"the path {path} does not exist", code="not_found")
    store_id = None if store is None else _existing_store_id(conn, store)
    if is_root(path):
        return [] if store_id is None else _listing(conn, _Listing.by_id(store_id, path, sizes=sizes), path)
    if store_id is None:
        raise NotFoundError(f"the path {path} does not exist")
    try:
        return get_file(conn, store_id, path, touch=True)
    except NotFoundError:
        entries = _listing(conn, _Listing.by_id(store_id, path, sizes=sizes), path)
        if entries:
            return entries
        raise


# -- writes -----------------------------------------------------------------------------------


def create_file(
    conn: Connection,
    store: StoreArg,
    path: str,
    text: str,
    *,
    caps: Caps | None = None,
    actor: str = "admin",
    expiry_exempt: bool = False,
) -> FileRecord:
    """Create a new file; refuse an existing one (the memory tool's ``create``).

    The store's caps (the values on its row, :mod:`dbmemory.caps`) apply; a store row created
    by this write gets the caps of its configuration.

    Args:
        caps: deprecated and ignored (a ``DeprecationWarning``): the store row's caps apply.

    Returns:
        The new :class:`FileRecord` (version 1).

    Raises:
        InvalidPathError: invalid path, the root, a directory, or a parent that is a file.
        InvalidArgumentError: invalid text (NUL, lone surrogate).
        AlreadyExistsError: a file already exists at ``path``.
        CapExceededError: ``max_file_chars``, ``max_files`` or ``max_store_chars`` would be
            exceeded; nothing was written.
        ConflictError / StorageError: the database gave up (lock timeout, lost connection).
        InvalidArgumentError: also for a ``conn``, ``store``, ``caps``, ``actor`` or
            ``expiry_exempt`` of the wrong type or range.
    """
    _v.check_caps(caps, optional=True)
    _ignored_caps(caps, "create_file")
    _v.check_connection(conn)
    _v.check_store(store)
    _v.check_text(actor, "actor")
    _v.check_bool(expiry_exempt, "expiry_exempt")
    path = normalize_path(path)
    _require_not_root(path, "create")
    validate_text(text)
    with _savepoint(conn, f"creating {path}"):
        store_id, store_key, caps = _lock_store_caps(conn, store)
        _check_file_chars(caps, path, len(text), None)
        facts = _facts(conn, store_id, path)
        if facts.same:
            raise AlreadyExistsError(f"file {path} already exists", code="already_exists")
        _check_new_file_shape(facts, path)
        _check_store_caps(
            caps,
            file_count=facts.file_count,
            total_chars=facts.total_chars,
            add_files=1,
            add_chars=len(text),
            path=path,
        )
        now = dialect.utcnow()
        result = conn.execute(
            st.INSERT_FILE,
            st.insert_file_params(
                store_id, path, path_hash(path), text, now, expiry_exempt=expiry_exempt
            ),
        )
        _audit_write(
            conn, store_id, [_event(store_id, store_key, path, "create", actor, None, len(text))]
        )
    return _new_record(store_id, result, path, text, now, expiry_exempt)


def _new_record(
    store_id: int, result: Any, path: str, text: str, now: dt.datetime, expiry_exempt: bool
) -> FileRecord:
    """The record of a file just inserted (no read-back: its id from the insert)."""
    return FileRecord(
        path=path,
        chars=len(text),
        version=1,
        created_at=now,
        updated_at=now,
        last_accessed_at=now,
        text=text,
        store_id=store_id,
        file_id=int(result.inserted_primary_key[0]),
        expiry_exempt=bool(expiry_exempt),
    )


def _event(
    store_id: int | None,
    store_key: str | None,
    path: str | None,
    action: str,
    actor: str,
    before: int | None,
    after: int | None,
    detail: str | None = None,
) -> dict[str, Any]:
    return {
        "store_id": store_id,
        "store_key": store_key,
        "file_path": path,
        "action_name": action,
        "actor_name": actor,
        "chars_before": before,
        "chars_after": after,
        "detail_text": detail,
    }


def edit_file(
    conn: Connection,
    store: StoreArg,
    path: str,
    transform: Callable[..., tuple[str, T]],
    *,
    caps: Caps | None = None,
    actor: str = "admin",
    action: str = "edit",
    pass_caps: bool = False,
) -> tuple[FileRecord, T]:
    """Read-modify-write one existing file under its lock (``str_replace``, ``insert``).

    ``transform(old_text)`` (``transform(old_text, caps)`` with ``pass_caps``: the store's
    caps read from the locked row, so it can refuse an oversized result before building it)
    returns ``(new_text, extra)``; it may raise to abort (nothing is written). The new text is
    checked against the store's caps before the write: a text over ``max_file_chars`` is
    refused unless it is shorter than the old one, and growth past ``max_store_chars`` is
    refused.

    Args:
        caps: deprecated and ignored (a ``DeprecationWarning``): the store row's caps apply.

    Returns:
        ``(record after the write, extra)``. When the text is unchanged nothing is written and
        the current record is returned.

    Raises:
        InvalidPathError: invalid path, the root, or a directory.
        NotFoundError: no such file.
        CapExceededError: the new text breaks ``max_file_chars`` or ``max_store_chars``.
        InvalidArgumentError: a ``conn``, ``store``, ``caps``, ``actor``, ``action`` or
            ``transform`` of the wrong type or range.
        whatever ``transform`` raises.
    """
    _v.check_caps(caps, optional=True)
    _ignored_caps(caps, "edit_file")
    _v.check_connection(conn)
    _v.check_store(store)
    _v.check_text(actor, "actor")
    _v.check_callable(transform, "transform", optional=False)
    _v.check_text(action, "action", empty=False, max_chars=30)
    path = normalize_path(path)
    _require_not_root(path, "edit")
    known_id = _existing_store_id(conn, store)
    if isinstance(store, StoreRef) and known_id is None:
        raise NotFoundError(f"the path {path} does not exist")
    with _savepoint(conn, f"editing {path}"):
        store_id, store_key, caps, row = _lock_store_file_caps(conn, store, known_id, path)
        if row is None:
            probe = {"p_sid": store_id, **st.prefix_params(path)}
            if conn.execute(st.SELECT_LISTING_DIR_ANY, probe).first() is not None:
                raise InvalidPathError(
                    f"{path} is a directory, not a file: edit a file inside it",
                    code="is_directory",
                )
            raise NotFoundError(f"the path {path} does not exist")
        old = _record(row)
        new_text, extra = transform(old.text, caps) if pass_caps else transform(old.text)
        validate_text(new_text)
        _check_file_chars(caps, path, len(new_text), old.chars)
        if new_text == old.text:
            return old, extra
        grow = len(new_text) - old.chars
        if caps.max_store_chars is not None and grow > 0:
            facts = _facts(conn, store_id, path)
            _check_store_caps(
                caps,
                file_count=facts.file_count,
                total_chars=facts.total_chars,
                add_files=0,
                add_chars=grow,
                path=path,
            )
        now = dialect.utcnow()
        result = conn.execute(*st.update_file_params(old.file_id, new_text, old.version, now))
        if result.rowcount != 1:  # only possible when the store lock was bypassed
            raise ConflictError(f"{path} changed while it was being edited: retry")
        _audit_write(
            conn, store_id, [_event(store_id, store_key, path, action, actor, old.chars, len(new_text))]
        )
    return (
        FileRecord(
            path=path,
            chars=len(new_text),
            version=old.version + 1,
            created_at=old.created_at,
            updated_at=now,
            last_accessed_at=now,
            text=new_text,
            store_id=store_id,
            file_id=old.file_id,
            expiry_exempt=old.expiry_exempt,
        ),
        extra,
    )


def put_file(
    conn: Connection,
    store: StoreArg,
    path: str,
    text: str,
    *,
    enforce_caps: bool = True,
    caps: Caps | None = None,
    expected_version: int | None = None,
    expiry_exempt: bool | None = None,
    actor: str = "admin",
) -> FileRecord:
    """Write a whole file, creating or replacing it (admin upsert; profile compare-and-set).

    The store's caps (the values on its row, :mod:`dbmemory.caps`) apply; a store row created
    by this write gets the caps of its configuration.

    Args:
        enforce_caps: check the store's caps before writing (default). ``False`` is the one
            admin bypass of the caps (``dbmemory files put --no-caps``): every cap is skipped.
        caps: deprecated and ignored (a ``DeprecationWarning``): the store row's caps apply.
        expected_version: ``None`` writes whatever is there; ``0`` requires that the file does
            not exist; ``n`` requires that it is at version ``n`` (compare-and-set).
        expiry_exempt: set the file's exemption from the expiry rule; ``None`` keeps it
            (new files: not exempt).
        actor: who writes, for the audit event.

    Returns:
        The :class:`FileRecord` after the write. An unchanged text (and flag) is not written:
        the current record comes back with its version unchanged, and no audit event is made.

    Raises:
        InvalidPathError / InvalidArgumentError: invalid path or text.
        ConflictError: ``expected_version`` does not match (someone else wrote first).
        CapExceededError: a cap would be exceeded (when ``enforce_caps``).
        InvalidArgumentError: also for a ``conn``, ``store``, ``caps``, ``actor``,
            ``enforce_caps``, ``expected_version`` or ``expiry_exempt`` of the wrong type or
            range (``expected_version``: ``None`` or 0 to 2,147,483,647).
    """
    _v.check_caps(caps, optional=True)
    _ignored_caps(caps, "put_file")
    _v.arguments(conn=conn, store=store, enforce_caps=enforce_caps, actor=actor)
    _v.check_int(expected_version, "expected_version", minimum=0, maximum=_v.INT32_MAX, optional=True)
    _v.check_bool(expiry_exempt, "expiry_exempt", optional=True)
    path = normalize_path(path)
    _require_not_root(path, "write")
    validate_text(text)
    known_id = store.store_id if isinstance(store, StoreRef) else store
    with _savepoint(conn, f"writing {path}"):
        store_id, store_key, caps, row = _lock_store_file_caps(conn, store, known_id, path)
        now = dialect.utcnow()
        if row is None:
            if expected_version not in (None, 0):
                raise ConflictError(
                    f"{path} no longer exists (expected version {expected_version}): reload it",
                    code="conflict",
                )
            if enforce_caps:
                _check_file_chars(caps, path, len(text), None)
            facts = _facts(conn, store_id, path)
            _check_new_file_shape(facts, path)
            if enforce_caps:
                _check_store_caps(
                    caps,
                    file_count=facts.file_count,
                    total_chars=facts.total_chars,
                    add_files=1,
                    add_chars=len(text),
                    path=path,
                )
            result = conn.execute(
                st.INSERT_FILE,
                st.insert_file_params(
                    store_id, path, path_hash(path), text, now, expiry_exempt=bool(expiry_exempt)
                ),
            )
            _audit_write(
                conn, store_id, [_event(store_id, store_key, path, "put", actor, None, len(text))]
            )
            return _new_record(store_id, result, path, text, now, bool(expiry_exempt))
        else:
            old = _record(row)
            if expected_version is not None and expected_version != old.version:
                raise ConflictError(
                    f"{path} is at version {old.version}, not {expected_version}: "
                    "someone else changed it; reload and retry",
                    code="conflict",
                )
            if old.text == text and (expiry_exempt is None or expiry_exempt == old.expiry_exempt):
                return old
            if enforce_caps:
                _check_file_chars(caps, path, len(text), old.chars)
            grow = len(text) - old.chars
            if enforce_caps and caps.max_store_chars is not None and grow > 0:
                facts = _facts(conn, store_id, path)
                _check_store_caps(
                    caps,
                    file_count=facts.file_count,
                    total_chars=facts.total_chars,
                    add_files=0,
                    add_chars=grow,
                    path=path,
                )
            result = conn.execute(
                *st.update_file_params(
                    old.file_id, text, old.version, now, expiry_exempt=expiry_exempt
                )
            )
            if result.rowcount != 1:  # only possible when the store lock was bypassed
                raise ConflictError(f"{path} changed while it was being written: retry")
            _audit_write(
                conn, store_id, [_event(store_id, store_key, path, "put", actor, old.chars, len(text))]
            )
            return FileRecord(
                path=path,
                chars=len(text),
                version=old.version + 1,
                created_at=old.created_at,
                updated_at=now,
                last_accessed_at=now,
                text=text,
                store_id=store_id,
                file_id=old.file_id,
                expiry_exempt=old.expiry_exempt if expiry_exempt is None else bool(expiry_exempt),
            )


def delete_path(conn: Connection, store: StoreArg, path: str, *, actor: str = "admin") -> int:
    """Delete a file, or a directory with everything under it (the memory tool's ``delete``).

    Returns:
        The number of files deleted (>= 1).

    Raises:
        InvalidPathError: invalid path or the root (in any spelling).
        NotFoundError: nothing at ``path``.
        InvalidArgumentError: a ``conn``, ``store`` or ``actor`` of the wrong type or range.
    """
    _v.check_connection(conn)
    _v.check_store(store)
    _v.check_text(actor, "actor")
    path = normalize_path(path)
    _require_not_root(path, "delete")
    known_id = _existing_store_id(conn, store)
    if known_id is None:
        raise NotFoundError(f"the path {path} does not exist")
    with _savepoint(conn, f"deleting {path}"):
        store_id, store_key, row = _lock_store_and_file(conn, store, known_id, path)
        if row is not None:
            conn.execute(st.DELETE_FILE_BY_ID, {"p_fid": row.file_id})
            _audit_write(
                conn, store_id, [_event(store_id, store_key, path, "delete", actor, row.char_count, None)]
            )
            return 1
        victims = _files_under(conn, store_id, path)
        if not victims:
            raise NotFoundError(f"the path {path} does not exist")
        _delete_ids(conn, [v.file_id for v in victims])
        _audit_write(
            conn,
            store_id,
            [
                _event(store_id, store_key, v.file_path, "delete", actor, v.char_count, None)
                for v in victims
            ],
        )
        return len(victims)


def _files_under(conn: Connection, store_id: int, directory: str) -> list[Any]:
    """Files under ``directory`` (all for the root), read under the store lock the caller holds.

    Not a locking read: every writer of the store holds its store row lock, so these rows
    cannot change meanwhile, and a ``FOR UPDATE`` over a prefix condition let MariaDB's
    optimizer scan (and lock) other stores' rows on small tables, so that writers of different
    stores deadlocked. :func:`dbmemory.db.dialect.current_read` keeps the read current at MySQL's
    REPEATABLE READ. The rows are then changed by primary key only.
    """
    if is_root(directory):
        stmt, params = st.SELECT_LISTING, {"p_sid": store_id}
    else:
        stmt, params = st.SELECT_LISTING_DIR, {"p_sid": store_id, **st.prefix_params(directory)}
    return list(conn.execute(dialect.current_read(stmt, conn), params).all())


def _delete_ids(conn: Connection, ids: list[int]) -> None:
    """Delete files one primary key at a time (executemany): writers of other stores never
    wait for these deletes, whatever plan the optimizer would pick for an IN list."""
    if ids:
        conn.execute(st.DELETE_FILE_BY_ID, [{"p_fid": file_id} for file_id in ids])


def delete_file(conn: Connection, store_id: int, path: str, *, actor: str = "admin") -> bool:
    """Delete one file (admin). Returns ``True`` if it existed, ``False`` otherwise.

    Raises:
        InvalidPathError: invalid path, the root, or ``path`` is a directory (code
            ``is_directory``: use :func:`delete_path`); nothing is deleted.
        InvalidArgumentError: a ``conn``, ``store_id`` or ``actor`` of the wrong type or range.
        NotFoundError: the store does not exist.
    """
    _v.arguments(conn=conn, store_id=store_id, actor=actor)
    path = normalize_path(path)
    _require_not_root(path, "delete")
    with _savepoint(conn, f"deleting {path}"):
        store_id, store_key = _lock_store(conn, store_id)
        row = conn.execute(
            st.SELECT_FILE_FOR_UPDATE, {"p_sid": store_id, "p_ph": path_hash(path)}
        ).first()
        if row is None:
            probe = {"p_sid": store_id, **st.prefix_params(path)}
            if conn.execute(st.SELECT_LISTING_DIR_ANY, probe).first() is not None:
                raise InvalidPathError(
                    f"{path} is a directory, not a file: delete_file deletes one file; use "
                    "delete_path to delete a directory with everything under it",
                    code="is_directory",
                )
            return False
        conn.execute(st.DELETE_FILE_BY_ID, {"p_fid": row.file_id})
        _audit_write(
            conn, store_id, [_event(store_id, store_key, path, "delete", actor, row.char_count, None)]
        )
        return True


def rename_path(
    conn: Connection,
    store: StoreArg,
    old_path: str,
    new_path: str,
    *,
    caps: Caps | None = None,
    actor: str = "admin",
) -> int:
    """Rename a file, or move a whole directory prefix (the memory tool's ``rename``).

    A rename adds no file and no character, so no cap can refuse it; ``caps`` is deprecated
    and ignored (a ``DeprecationWarning``).

    Returns:
        The number of files moved.

    Raises:
        InvalidPathError: invalid paths, the root as source or destination, a directory moved
            inside itself, a destination path over 1,000 characters, or a destination whose
            parent is a file.
        NotFoundError: nothing at ``old_path``.
        AlreadyExistsError: something already exists at ``new_path``.
        InvalidArgumentError: a ``conn``, ``store``, ``caps`` or ``actor`` of the wrong type or
            range.
    """
    _v.check_caps(caps, optional=True)
    _ignored_caps(caps, "rename_path")
    _v.check_connection(conn)
    _v.check_store(store)
    _v.check_text(actor, "actor")
    old_path = normalize_path(old_path)
    new_path = normalize_path(new_path)
    _require_not_root(old_path, "rename")
    _require_not_root(new_path, "rename onto")
    if new_path == old_path:
        raise AlreadyExistsError(f"{new_path} is the same path as the source: choose a new name")
    if new_path.startswith(old_path + "/"):
        raise InvalidPathError(
            f"cannot move {old_path} inside itself ({new_path}): choose a destination outside it",
            code="into_itself",
        )
    if _existing_store_id(conn, store) is None:
        raise NotFoundError(f"the path {old_path} does not exist")
    with _savepoint(conn, f"renaming {old_path}"):
        store_id, store_key = _lock_store(conn, store)
        row = conn.execute(
            st.SELECT_FILE_FOR_UPDATE, {"p_sid": store_id, "p_ph": path_hash(old_path)}
        ).first()
        if row is not None:
            moves = [(row.file_id, row.file_path, new_path, row.version_no, row.char_count)]
        else:
            victims = _files_under(conn, store_id, old_path)
            if not victims:
                raise NotFoundError(f"the path {old_path} does not exist")
            moves = []
            for v in victims:
                target = new_path + v.file_path[len(old_path) :]
                if len(target) > 1000:
                    raise InvalidPathError(
                        f"moving {v.file_path} would make a path of {len(target)} characters; "
                        "the limit is 1,000: choose a shorter destination",
                        code="path_too_long",
                    )
                moves.append((v.file_id, v.file_path, target, v.version_no, v.char_count))
        facts = _facts(conn, store_id, new_path)
        if facts.same or facts.descendants:
            raise AlreadyExistsError(
                f"{new_path} already exists: delete it first or choose another name",
                code="already_exists",
            )
        if facts.ancestor_files:
            _check_new_file_shape(facts, new_path)
        now = dialect.utcnow()
        for file_id, _old, target, version, _chars in moves:
            conn.execute(
                st.MOVE_FILE,
                {
                    "p_fid": file_id,
                    "p_path": target,
                    "p_hash": path_hash(target),
                    "p_new_version": version + 1,
                    "p_now": now,
                },
            )
        _audit_write(
            conn,
            store_id,
            [
                _event(store_id, store_key, old, "rename", actor, chars, chars, detail=target)
                for _id, old, target, _v, chars in moves
            ],
        )
        return len(moves)


def clear_store_files(conn: Connection, store_id: int, *, actor: str = "admin") -> int:
    """Delete every file of a store (the store row stays). Returns the number deleted.

    Raises:
        InvalidArgumentError: a ``conn``, ``store_id`` or ``actor`` of the wrong type or range.
        NotFoundError: the store does not exist.
    """
    _v.arguments(conn=conn, store_id=store_id, actor=actor)
    with _savepoint(conn, "clearing a store"):
        store_id, store_key = _lock_store(conn, store_id)
        victims = _files_under(conn, store_id, ROOT)
        if not victims:
            return 0
        _delete_ids(conn, [v.file_id for v in victims])
        _audit_write(
            conn,
            store_id,
            [
                _event(store_id, store_key, v.file_path, "clear", actor, v.char_count, None)
                for v in victims
            ],
        )
        return len(victims)


# The expiry rule lives in dbmemory.expiry; its functions are also reachable here, where callers
# first looked for them (PEP 562: imported on first use, as expiry builds on this module).
_EXPIRY_NAMES = ("count_expirable_files", "expire_files", "expire_files_committing")


def __getattr__(name: str) -> Any:
    if name in _EXPIRY_NAMES:
        from dbmemory import expiry

        return getattr(expiry, name)
    raise AttributeError(f"module 'dbmemory.files' has no attribute {name!r}")
