"""Reads of files and stores: listings (:func:`list_files`, :func:`list_directory`), one file
(:func:`get_file`, a :class:`~dbmemory.core.model.FileRecord`), and what the MEMORY tool's
``view`` reads (:func:`read_path`, :func:`view_path`, :func:`view_entries`), plus the sizes the
Anthropic SDK shows (:func:`file_bytes`: UTF-8 bytes).

Reads take no lock in the caller's transaction; a file read by the MEMORY tool records its touch
(:mod:`dbmemory.store.touches`), an admin read (``touch=False``) does not. The hot reads run on
the DB-API cursor on SQLite (:mod:`dbmemory.db.raw`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments, check_store
from dbmemory.core.model import FileInfo, FileRecord, StoreRef
from dbmemory.core.paths import ROOT, is_root, normalize_path, path_hash
from dbmemory.db import raw
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.expiry import utf8_length
from dbmemory.db.schema import files as _files
from dbmemory.errors import (
    NotFoundError,
)
from dbmemory.store.listing import Walk, walk_directory
from dbmemory.store.locks import StoreArg, existing_store_id, info, record
from dbmemory.store.statements import reads as st
from dbmemory.store.touches import touch_after_read

__all__ = ["list_files", "list_directory", "get_file", "read_path", "view_path", "view_entries", "file_bytes"]

_FILE = raw.columns(st.SELECT_FILE_READ)
"""Column positions of a touching file read (the same for :data:`st.SELECT_FILE_READ_BY_KEY`)."""
assert _FILE == raw.columns(st.SELECT_FILE_READ_BY_KEY)
_SID, _FID = _FILE["store_id"], _FILE["file_id"]
_LAST, _READ_AT = _FILE["last_accessed_at"], _FILE["read_at"]


class _Named:
    """A row tuple with the ``_mapping`` that :func:`dbmemory.store.locks.record` and
    ``info`` read (one place maps columns to :class:`FileRecord` fields)."""

    __slots__ = ("_mapping",)

    def __init__(self, keys: dict[str, int], row: tuple[Any, ...]) -> None:
        self._mapping = dict(zip(keys, row, strict=True))


def list_files(conn: Connection, store_id: int) -> list[FileInfo]:
    """Every file of a store without its text.

    Returns:
        list of :class:`FileInfo` (path, size in characters, version, created, updated, last
        accessed), sorted by path (code-point order). Empty for an empty store.

    Raises:
        InvalidArgumentError: ``conn`` is not a Connection; ``store_id`` is not a whole number
            from 1 to 2**63-1.
        NotFoundError: no store ``store_id`` (``store N does not exist: check the store id``;
            one more ``SELECT``, for an empty listing only).
    """
    check_arguments(conn=conn, store_id=store_id)
    infos = list_directory(conn, store_id, ROOT)
    if not infos and not _store_exists(conn, store_id, "listing the files"):
        raise _no_store(store_id)
    return infos


def list_directory(conn: Connection, store_id: int | None, directory: str) -> list[FileInfo]:
    """Files (no text) at any depth under ``directory``, sorted by path; ``[]`` if none.

    Raises:
        InvalidPathError: ``directory`` is not a valid path.
        InvalidArgumentError: ``conn`` is not a Connection; a bad ``store_id``.
    """
    check_arguments(conn=conn)
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


def _listing(conn: Connection, listing: _Listing, directory: str, *, ordered: bool = True) -> list[Any]:
    """The listing's rows: ``(path, size)`` pairs (``sizes``) or :class:`FileInfo`, sorted by
    path (``ordered=False``: pairs in the database's order, for a renderer that sorts)."""
    try:
        rows = raw.all_rows(conn, listing.stmt, listing.params)
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, f"listing {directory}") from exc
    if listing.sizes:
        return sorted(rows) if ordered else rows
    keys = raw.columns(listing.stmt)
    return sorted((info(_Named(keys, r)) for r in rows), key=lambda f: f.path)  # type: ignore[arg-type]  # a Row look-alike


def get_file(conn: Connection, store_id: int, path: str, *, touch: bool = False) -> FileRecord:
    """One file with its text (one ``SELECT``).

    Args:
        touch: also record the read for expiry, durably before returning (see
            :mod:`dbmemory.store.touches`; on SQLite it joins the caller's transaction).

    Returns:
        :class:`FileRecord`; ``text`` is ``""`` for an empty file on every backend.

    Raises:
        InvalidPathError: invalid path.
        InvalidArgumentError: ``conn`` is not a Connection; a bad ``store_id``; ``touch`` not
            a bool.
        NotFoundError: no store ``store_id`` (``store N does not exist: check the store
            id``); no file at ``path`` (it may be a directory), or (``touch``) it was removed
            between the read and its touch.
        ConflictError: (``touch``) the touch waited too long for a running expiry: retry.
    """
    _v.check_connection(conn)
    _v.check_id(store_id, "store_id")
    _v.check_bool(touch, "touch")
    path = normalize_path(path)
    stmt = st.SELECT_FILE_READ if touch else st.SELECT_FILE
    if not touch:
        try:
            found = conn.execute(stmt, {"p_sid": store_id, "p_ph": path_hash(path)}).first()
        except sa.exc.SQLAlchemyError as exc:
            raise translate_db_error(exc, f"reading {path}") from exc
        if found is None:
            raise _missing(conn, store_id, path)
        return record(found)
    row = _touching_read(conn, store_id, path)
    if row is None:
        raise _missing(conn, store_id, path)
    return _touched(conn, row, path)


def _touching_read(conn: Connection, store_id: int, path: str) -> tuple[Any, ...] | None:
    """The file row of a touching read of an existing store (``path`` normalised), or None."""
    return _select_file(conn, st.SELECT_FILE_READ, {"p_sid": store_id, "p_ph": path_hash(path)}, path)


def _missing(conn: Connection, store_id: int, path: str) -> NotFoundError:
    """The error for a read that found no file: a missing store is not a missing path (one
    ``SELECT``, on a miss only; the writers' text for a store id that does not exist)."""
    if not _store_exists(conn, store_id, f"reading {path}"):
        return _no_store(store_id)
    return NotFoundError(f"the path {path} does not exist", code="not_found")


def _store_exists(conn: Connection, store_id: int, action: str) -> bool:
    try:
        return conn.execute(st.SELECT_STORE_KEY, {"p_sid": store_id}).first() is not None
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, action) from exc


def _no_store(store_id: int) -> NotFoundError:
    return NotFoundError(f"store {store_id} does not exist: check the store id", code="not_found")


def _select_file(
    conn: Connection, stmt: Any, params: dict[str, Any], path: str
) -> tuple[Any, ...] | None:
    """A touching read (:data:`st.SELECT_FILE_READ` or ``_BY_KEY``): the row tuple or None."""
    try:
        return raw.first_row(conn, stmt, params)
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, f"reading {path}") from exc


def _touched(conn: Connection, row: tuple[Any, ...], path: str) -> FileRecord:
    """Record the read of ``row`` (:func:`touch_after_read`), then the file."""
    touch_after_read(conn, row[_SID], row[_FID], row[_LAST], row[_READ_AT], path=path)
    return record(_Named(_FILE, row))  # type: ignore[arg-type]


def read_path(
    conn: Connection, store: StoreArg | None, path: str
) -> FileRecord | list[FileInfo]:
    """What ``view`` shows: a file (touched) or the files under a directory.

    A file costs one ``SELECT`` (plus, at most once per file per hour, the touch that records
    the read durably before this returns: :mod:`dbmemory.store.touches`), also for a :class:`StoreRef`
    whose store id is not known yet (the file is read by store key); the root costs one
    ``SELECT``.

    Returns:
        :class:`FileRecord` for a file; a list of :class:`FileInfo` sorted by path for a
        directory (``[]`` for an empty or never-written store's root).

    Raises:
        InvalidPathError: invalid path.
        NotFoundError: neither a file nor a directory; for a store id (an ``int``) that does
            not exist: ``store N does not exist: check the store id``.
    """
    found: FileRecord | list[FileInfo] = _read(conn, store, path, sizes=False)
    return found


def view_path(
    conn: Connection, store: StoreArg | None, path: str
) -> FileRecord | list[tuple[str, int]]:
    """:func:`read_path` for the MEMORY tool's ``view``: a directory comes back as
    ``(path, size in characters)`` pairs sorted by path (only what the listing shows)."""
    found: FileRecord | list[tuple[str, int]] = _read(conn, store, path, sizes=True)
    return found


def view_entries(
    conn: Connection, store: StoreArg | None, path: str, *, budget: int, hidden: Callable[[str], bool]
) -> FileRecord | Walk:
    """What the MEMORY tool's ``view`` reads: a file (touched, as :func:`read_path`), or for a
    directory only what a listing of ``budget`` characters can show
    (:func:`dbmemory.store.listing.walk_directory`; for the root, the store's counters give
    the totals), rendered by :func:`dbmemory.tool.render.listing_of_walk`. An empty or
    never-written store's root is an empty :class:`Walk`. Errors as :func:`view_path`."""
    _v.check_connection(conn)
    if store is not None:
        check_store(store)
    path = normalize_path(path)
    root = is_root(path)
    target: int | str
    if isinstance(store, StoreRef):  # by key, never by a cached id (see _read)
        if not root:
            row = _select_file(
                conn, st.SELECT_FILE_READ_BY_KEY, {"p_key": store.store_key, "p_ph": path_hash(path)}, path
            )
            if row is not None:
                return _touched(conn, row, path)
        target = store.store_key
    else:
        store_id = None if store is None else existing_store_id(conn, store)
        if store_id is None:
            if root:
                return Walk()
            raise NotFoundError(f"the path {path} does not exist", code="not_found")
        if not root:  # a miss looks the store up only when nothing is under the path either
            row = _touching_read(conn, store_id, path)
            if row is not None:
                return _touched(conn, row, path)
        target = store_id
    walk = walk_directory(conn, target, path, budget, hidden)
    if not root and not walk.rows:
        if isinstance(target, int):
            raise _missing(conn, target, path)
        raise NotFoundError(f"the path {path} does not exist", code="not_found")
    return walk


def _read(
    conn: Connection, store: StoreArg | None, path: str, *, sizes: bool, ordered: bool = True
) -> Any:
    _v.check_connection(conn)
    if store is not None:
        check_store(store)
    path = normalize_path(path)
    if isinstance(store, StoreRef):
        # Always by key, never by a cached id: a store dropped since (end_session, drop_store)
        # frees its id, which SQLite may give to another tenant's new store.
        key = store.store_key
        if is_root(path):
            return _listing(conn, _Listing.by_key(key, path, sizes=sizes), path, ordered=ordered)
        row = _select_file(conn, st.SELECT_FILE_READ_BY_KEY, {"p_key": key, "p_ph": path_hash(path)}, path)
        if row is not None:
            return _touched(conn, row, path)
        entries = _listing(conn, _Listing.by_key(key, path, sizes=sizes), path, ordered=ordered)
        if entries:
            return entries
        raise NotFoundError(f"the path {path} does not exist", code="not_found")
    store_id = None if store is None else existing_store_id(conn, store)
    if is_root(path):
        return [] if store_id is None else _listing(
            conn, _Listing.by_id(store_id, path, sizes=sizes), path, ordered=ordered
        )
    if store_id is None:
        raise NotFoundError(f"the path {path} does not exist")
    row = _touching_read(conn, store_id, path)
    if row is not None:
        return _touched(conn, row, path)
    entries = _listing(conn, _Listing.by_id(store_id, path, sizes=sizes), path, ordered=ordered)
    if entries:
        return entries
    raise _missing(conn, store_id, path)


def file_bytes(conn: Connection, store_key: str, directory: str) -> list[tuple[str, int]]:
    """``(path, size in bytes)`` of every file under ``directory`` (all for the root) of the
    store ``store_key``, sorted by path: the UTF-8 length of each text, what a file of it takes
    on disk (the Anthropic SDK's listing shows it). Measured by the database where it can
    (:func:`dbmemory.db.dialect.expiry.utf8_length`); on Oracle the texts are read and measured here.
    ``[]`` for a store that does not exist. No touch (a listing is not a read of a file).

    Raises:
        InvalidPathError: ``directory`` is not a valid path.
        InvalidArgumentError: ``conn`` is not a Connection.
    """
    _v.check_connection(conn)
    directory = normalize_path(directory)
    measured = utf8_length(conn, _files.c.body)
    stmt = st.select_byte_sizes(_files.c.body if measured is None else measured, under=not is_root(directory))
    params: dict[str, Any] = {"p_key": store_key}
    if not is_root(directory):
        params.update(st.prefix_params(directory))
    try:
        rows = conn.execute(stmt, params).all()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, f"listing {directory}") from exc
    if measured is None:
        return sorted((r[0], len((r[1] or "").encode("utf-8"))) for r in rows)
    return sorted((r[0], int(r[1] or 0)) for r in rows)
