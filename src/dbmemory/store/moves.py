"""Removing and moving files: the MEMORY tool's ``delete`` and ``rename`` of a file or a directory
(:func:`delete_path`, :func:`rename_path`), the admin :func:`delete_file` and
:func:`clear_store_files`.

The same rules as :mod:`dbmemory.store.files`: every function takes a ``Connection`` first, joins
the caller's transaction and never commits it; each write runs in a write unit (a savepoint;
none in a turn's one-unit transaction), locks the store row first, then its file rows, moves
the store's counters exactly and writes one audit event per file changed. A directory is
matched as exactly its prefix plus ``/``."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments, check_store
from dbmemory.core.clock import utcnow
from dbmemory.core.model import StoreRef
from dbmemory.core.paths import ROOT, is_root, normalize_path, path_hash
from dbmemory.db import raw
from dbmemory.db.dialect.base import raw_reads
from dbmemory.db.dialect.outcome import note_audit_row
from dbmemory.db.dialect.writes import counted_file_update, current_read, delete_uncounts_first
from dbmemory.errors import AlreadyExistsError, ConflictError, InvalidPathError, NotFoundError
from dbmemory.store.audit import audit, audit_event, audit_write
from dbmemory.store.locks import (
    StoreArg,
    check_new_file_shape,
    existing_store_id,
    file_facts,
    lock_store,
    lock_store_and_file,
    refuse_reserved_store,
    require_not_root,
    savepoint,
)
from dbmemory.store.statements import reads as st
from dbmemory.store.statements.writes import (
    DELETE_FILE_AT,
    DELETE_FILE_BY_ID,
    INSERT_AUDIT_OF_FILE,
    MOVE_FILE,
    MOVE_FILE_COUNTED,
    UNCOUNT_FILE_JOIN,
    UNCOUNT_FILE_JOIN_BY_KEY,
    UNCOUNT_FILE_SUBQUERY,
    UNCOUNT_FILE_SUBQUERY_BY_KEY,
)

__all__ = ["delete_path", "delete_file", "rename_path", "clear_store_files"]


def _delete_uncounted_first(
    conn: Connection, store: StoreArg, store_id: int, path: str, actor: str
) -> bool:
    """The short path of a one-file delete, three statements
    (:func:`dbmemory.db.dialect.writes.delete_uncounts_first`): lock the store row and take the file
    out of its counters (:data:`~dbmemory.store.statements.writes.UNCOUNT_FILE_JOIN` or
    :data:`~dbmemory.store.statements.writes.UNCOUNT_FILE_SUBQUERY`, whose rowcount says the file exists),
    the audit event read from the file row, the delete by unique key. ``False`` when it does
    not apply (the backend, a missing store or file, a directory, a store key that does not
    match): nothing was changed and the caller's long path says why."""
    kind = delete_uncounts_first(conn)
    if kind is None:
        return False
    ph = path_hash(path)
    now = utcnow()
    params: dict[str, Any] = {"p_sid": store_id, "p_ph": ph, "p_now": now}
    if isinstance(store, StoreRef):
        params["p_key"] = store.store_key
        stmt = UNCOUNT_FILE_JOIN_BY_KEY if kind == "join" else UNCOUNT_FILE_SUBQUERY_BY_KEY
    else:
        stmt = UNCOUNT_FILE_JOIN if kind == "join" else UNCOUNT_FILE_SUBQUERY
    if raw.row_count(conn, stmt, params) < 1:  # 2 where the file row counts as matched
        return False
    audit_params = {
        "p_sid": store_id,
        "p_ph": ph,
        "p_action": "delete",
        "p_actor": (actor or "unknown")[:500],
        "p_now": now,
    }
    audited = None  # the result is read on MySQL/MariaDB only; SQLite: the driver's cursor
    if raw_reads(conn):
        raw.row_count(conn, INSERT_AUDIT_OF_FILE, audit_params)
    else:
        audited = conn.execute(INSERT_AUDIT_OF_FILE, audit_params)
    note_audit_row(conn, audited, {
        "created_at": now, "action_name": "delete", "actor_name": (actor or "unknown")[:500], "store_id": store_id,
    })
    if raw.row_count(conn, DELETE_FILE_AT, {"p_sid": store_id, "p_ph": ph}) != 1:
        raise ConflictError(f"deleting {path} could not be completed: retry")  # lock bypassed
    return True


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
    check_store(store)
    _v.check_text(actor, "actor")
    path = normalize_path(path)
    require_not_root(path, "delete")
    known_id = existing_store_id(conn, store)
    if known_id is None:
        raise NotFoundError(f"the path {path} does not exist")
    with savepoint(conn, f"deleting {path}"):
        refuse_reserved_store(conn, store, "delete")
        if _delete_uncounted_first(conn, store, known_id, path, actor):
            return 1
        store_id, store_key, row = lock_store_and_file(conn, store, known_id, path)
        if row is not None:
            conn.execute(DELETE_FILE_BY_ID, {"p_sid": store_id, "p_fid": row.file_id})
            audit_write(
                conn,
                store_id,
                [audit_event(store_id, store_key, path, "delete", actor, row.char_count, None)],
                -1,
                -row.char_count,
            )
            return 1
        victims = _files_under(conn, store_id, path)
        if not victims:
            raise NotFoundError(f"the path {path} does not exist")
        return _delete_victims(conn, store_id, store_key, victims, "delete", actor)


def _files_under(conn: Connection, store_id: int, directory: str) -> list[Any]:
    """Files under ``directory`` (all for the root), read under the store lock the caller holds.

    Not a locking read: every writer of the store holds its store row lock, so these rows
    cannot change meanwhile, and a ``FOR UPDATE`` over a prefix condition let MariaDB's
    optimizer scan (and lock) other stores' rows on small tables, so that writers of different
    stores deadlocked. :func:`dbmemory.db.dialect.writes.current_read` keeps the read current at MySQL's
    REPEATABLE READ. The rows are then changed by primary key only.
    """
    if is_root(directory):
        stmt, params = st.SELECT_LISTING, {"p_sid": store_id}
    else:
        stmt, params = st.SELECT_LISTING_DIR, {"p_sid": store_id, **st.prefix_params(directory)}
    return list(conn.execute(current_read(stmt, conn), params).all())


def _delete_victims(
    conn: Connection, store_id: int, store_key: str, victims: list[Any], action: str, actor: str
) -> int:
    """Delete ``victims`` (rows of :func:`_files_under`, the store row locked) with one audit
    event each (``action``) and the store's counters moved; returns how many."""
    _delete_ids(conn, store_id, [v.file_id for v in victims])
    audit_write(
        conn,
        store_id,
        [audit_event(store_id, store_key, v.file_path, action, actor, v.char_count, None) for v in victims],
        -len(victims),
        -sum(v.char_count for v in victims),
    )
    return len(victims)


def _delete_ids(conn: Connection, store_id: int, ids: list[int]) -> None:
    """Delete files one primary key at a time (executemany): writers of other stores never
    wait for these deletes, whatever plan the optimizer would pick for an IN list."""
    if ids:
        conn.execute(DELETE_FILE_BY_ID, [{"p_sid": store_id, "p_fid": file_id} for file_id in ids])


def delete_file(conn: Connection, store_id: int, path: str, *, actor: str = "admin") -> bool:
    """Delete one file (admin). Returns ``True`` if it existed, ``False`` otherwise.

    Raises:
        InvalidPathError: invalid path, the root, or ``path`` is a directory (code
            ``is_directory``: use :func:`delete_path`); nothing is deleted.
        InvalidArgumentError: a ``conn``, ``store_id`` or ``actor`` of the wrong type or range.
        NotFoundError: the store does not exist.
    """
    check_arguments(conn=conn, store_id=store_id, actor=actor)
    path = normalize_path(path)
    require_not_root(path, "delete")
    with savepoint(conn, f"deleting {path}"):
        store_id, store_key = lock_store(conn, store_id)
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
        conn.execute(DELETE_FILE_BY_ID, {"p_sid": store_id, "p_fid": row.file_id})
        audit_write(
            conn,
            store_id,
            [audit_event(store_id, store_key, path, "delete", actor, row.char_count, None)],
            -1,
            -row.char_count,
        )
        return True


def rename_path(
    conn: Connection,
    store: StoreArg,
    old_path: str,
    new_path: str,
    *,
    actor: str = "admin",
) -> int:
    """Rename a file, or move a whole directory prefix (the memory tool's ``rename``).

    A rename adds no file and no character, so no cap can refuse it.

    Returns:
        The number of files moved.

    Raises:
        InvalidPathError: invalid paths, the root as source or destination, a directory moved
            inside itself, a destination path over 1,000 characters, or a destination whose
            parent is a file.
        NotFoundError: nothing at ``old_path``.
        AlreadyExistsError: something already exists at ``new_path``.
        InvalidArgumentError: a ``conn``, ``store`` or ``actor`` of the wrong type or range.
    """
    _v.check_connection(conn)
    check_store(store)
    _v.check_text(actor, "actor")
    old_path = normalize_path(old_path)
    new_path = normalize_path(new_path)
    require_not_root(old_path, "rename")
    require_not_root(new_path, "rename onto")
    if new_path == old_path:
        raise AlreadyExistsError(f"{new_path} is the same path as the source: choose a new name")
    if new_path.startswith(old_path + "/"):
        raise InvalidPathError(
            f"cannot move {old_path} inside itself ({new_path}): choose a destination outside it",
            code="into_itself",
        )
    known_id = existing_store_id(conn, store)
    if known_id is None:
        raise NotFoundError(f"the path {old_path} does not exist")
    with savepoint(conn, f"renaming {old_path}"):
        store_id, store_key, row = lock_store_and_file(conn, store, known_id, old_path)
        if row is not None:
            moves = [(row.file_id, row.file_path, new_path, row.version_no, row.char_count)]
        else:
            moves = _directory_moves(conn, store_id, old_path, new_path)
        _refuse_taken(conn, store_id, new_path)
        _apply_moves(conn, store_id, store_key, moves, actor)
        return len(moves)


_Move = tuple[int, str, str, int, int]
"""One file of a rename: ``(file_id, old path, new path, version, chars)``."""


def _directory_moves(conn: Connection, store_id: int, old_path: str, new_path: str) -> list[_Move]:
    """The files under the directory ``old_path`` and where each goes under ``new_path``.

    Raises:
        NotFoundError: no file is under ``old_path``.
        InvalidPathError: a new path would be over 1,000 characters (``path_too_long``).
    """
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
    return moves


def _refuse_taken(conn: Connection, store_id: int, new_path: str) -> None:
    """A rename's destination must be free and have no file as a parent.

    Raises:
        AlreadyExistsError: a file or a directory is at ``new_path``.
        InvalidPathError: a parent of ``new_path`` is a file.
    """
    facts = file_facts(conn, store_id, new_path)
    if facts.same or facts.descendants:
        raise AlreadyExistsError(
            f"{new_path} already exists: delete it first or choose another name",
            code="already_exists",
        )
    if facts.ancestor_files:
        check_new_file_shape(facts, new_path)


def _apply_moves(
    conn: Connection, store_id: int, store_key: str, moves: list[_Move], actor: str
) -> None:
    """Move each file of ``moves`` (one version up) and write one ``rename`` event each, under
    the store lock the caller holds: one file on MySQL/MariaDB moves and marks the store row in
    one multi-table ``UPDATE`` (:func:`dbmemory.db.dialect.writes.counted_file_update`)."""
    now = utcnow()
    counted = len(moves) == 1 and counted_file_update(conn)
    for file_id, _old, target, version, _chars in moves:
        raw.row_count(
            conn,
            MOVE_FILE_COUNTED if counted else MOVE_FILE,
            {
                "p_fid": file_id,
                "p_path": target,
                "p_hash": path_hash(target),
                "p_new_version": version + 1,
                "p_now": now,
                "p_sid": store_id,
            },
        )
    events = [
        audit_event(store_id, store_key, old, "rename", actor, chars, chars, detail=target)
        for _id, old, target, _v, chars in moves
    ]
    if counted:  # the move also marked the store row as written
        audit(conn, events)
    else:
        audit_write(conn, store_id, events)


def clear_store_files(conn: Connection, store_id: int, *, actor: str = "admin") -> int:
    """Delete every file of a store (the store row stays). Returns the number deleted.

    Raises:
        InvalidArgumentError: a ``conn``, ``store_id`` or ``actor`` of the wrong type or range.
        NotFoundError: the store does not exist.
    """
    check_arguments(conn=conn, store_id=store_id, actor=actor)
    with savepoint(conn, "clearing a store"):
        store_id, store_key = lock_store(conn, store_id)
        victims = _files_under(conn, store_id, ROOT)
        if not victims:
            return 0
        return _delete_victims(conn, store_id, store_key, victims, "clear", actor)
