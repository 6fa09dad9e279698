"""Creating and changing files: the MEMORY tool's ``create``, ``str_replace`` and ``insert``
(:func:`create_file`, :func:`edit_file`) and the admin upsert :func:`put_file` (with
``expected_version`` for a compare-and-set, ``enforce_caps=False`` for the one admin bypass of
the caps), each checking its text first (:func:`validate_text`: a ``str`` of at most ``max_file_chars``
characters, without NUL or lone surrogates).

Every function takes a SQLAlchemy ``Connection`` first and **never commits or rolls back a
transaction it did not open**: writes join the caller's transaction and roll back with it. Each
write runs inside a write unit (:func:`dbmemory.store.units.write_unit`: a savepoint, so a
statement that fails leaves the caller's transaction usable, as PostgreSQL would otherwise abort
it), and input is validated before any SQL runs.

Concurrency: every writer of a store first locks the store row (``SELECT ... FOR UPDATE``),
then the file rows it changes (:mod:`dbmemory.store.locks`), so writers of one store serialise,
the files-per-store and characters-per-store caps cannot be exceeded by a race, and no edit is
lost silently. On SQLite the engine set-up
(:func:`dbmemory.db.dialect.setup.configure_engine`) takes the write lock at ``BEGIN``. Every
change writes one audit event in the same transaction (:mod:`dbmemory.store.audit`).

Where a function takes ``store`` it accepts a store id (``int``, the store must exist) or a
:class:`~dbmemory.core.model.StoreRef` (the store row is created on its first write).

Deleting, renaming and clearing files are :mod:`dbmemory.store.moves`; reads are
:mod:`dbmemory.store.reads`."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.engine import Connection, CursorResult

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments, check_store
from dbmemory.core.clock import utcnow
from dbmemory.core.model import Caps, FileRecord, StoreRef
from dbmemory.core.paths import ancestors, normalize_path, path_hash
from dbmemory.db import raw
from dbmemory.db.dialect.writes import counted_file_update, guarded_create, insert_returns_id
from dbmemory.errors import (
    AlreadyExistsError,
    CapExceededError,
    ConflictError,
    InvalidArgumentError,
    InvalidPathError,
    NotFoundError,
)
from dbmemory.store.audit import audit, audit_event, audit_write
from dbmemory.store.locks import (
    StoreArg,
    check_file_chars,
    check_new_file_shape,
    check_store_caps,
    existing_store_id,
    file_facts,
    lock_store_caps,
    lock_store_file_caps,
    record,
    refuse_reserved_store,
    require_not_root,
    savepoint,
)
from dbmemory.store.statements import reads as st
from dbmemory.store.statements.writes import (
    insert_file_for,
    insert_file_if_free_params,
    insert_file_params,
    returning_file_id,
    update_file_counted_params,
    update_file_params,
)

__all__ = [
    "DEFAULT_CAPS",
    "put_file",
    "create_file",
    "edit_file",
    "validate_text",
]

DEFAULT_CAPS = Caps()
"""100,000 characters per file, 1,000 files per store, no cap on a store's characters."""

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
    # str.isascii() is O(1) and an ASCII text has no surrogate; else a scan, not encode()'s copy
    surrogate = None if text.isascii() else _SURROGATE.search(text)
    if surrogate is not None:
        raise InvalidArgumentError(
            f"{what} contains an invalid character at position {surrogate.start()} (a lone "
            "surrogate that is not valid Unicode text): remove or replace it"
        )
    return text


# -- writes -----------------------------------------------------------------------------------


def create_file(
    conn: Connection,
    store: StoreArg,
    path: str,
    text: str,
    *,
    actor: str = "admin",
    expiry_exempt: bool = False,
) -> FileRecord:
    """Create a new file; refuse an existing one (the memory tool's ``create``).

    The store's caps (the values on its row, :mod:`dbmemory.store.caps`) apply; a store row created
    by this write gets the caps of its configuration.

    Args:

    Returns:
        The new :class:`FileRecord` (version 1).

    Raises:
        InvalidPathError: invalid path, the root, a directory, or a parent that is a file.
        InvalidArgumentError: invalid text (NUL, lone surrogate).
        AlreadyExistsError: a file already exists at ``path``.
        CapExceededError: ``max_file_chars``, ``max_files`` or ``max_store_chars`` would be
            exceeded; nothing was written.
        ConflictError / StorageError: the database gave up (lock timeout, lost connection).
        InvalidArgumentError: also for a ``conn``, ``store``, ``actor`` or
            ``expiry_exempt`` of the wrong type or range.
    """
    _v.check_connection(conn)
    check_store(store)
    _v.check_text(actor, "actor")
    _v.check_bool(expiry_exempt, "expiry_exempt")
    path = normalize_path(path)
    require_not_root(path, "create")
    validate_text(text)
    with savepoint(conn, f"creating {path}"):
        refuse_reserved_store(conn, store, "write")
        made = _create_claimed(conn, store, path, text, expiry_exempt, actor)
        if made is None:
            made = _create_locked(conn, store, path, text, expiry_exempt, actor)
    return made


def _create_locked(
    conn: Connection, store: StoreArg, path: str, text: str, expiry_exempt: bool, actor: str
) -> FileRecord:
    """The long path of a new file, where :func:`_create_claimed` does not apply: lock the
    store row (creating a StoreRef's), check the file cap, that the path is free and its
    parents are no files, and the store caps, in that order; insert the file and its event."""
    store_id, store_key, caps, (count, total) = lock_store_caps(conn, store)
    check_file_chars(caps, path, len(text), None)
    facts = file_facts(conn, store_id, path)
    if facts.same:
        raise AlreadyExistsError(f"file {path} already exists", code="already_exists")
    check_new_file_shape(facts, path)
    check_store_caps(
        caps, file_count=count, total_chars=total, add_files=1, add_chars=len(text), path=path
    )
    now = utcnow()
    result = conn.execute(
        insert_file_for(conn.dialect.name),
        insert_file_params(store_id, path, path_hash(path), text, now, expiry_exempt=expiry_exempt),
    )
    event = audit_event(store_id, store_key, path, "create", actor, None, len(text))
    audit_write(conn, store_id, [event], 1, len(text))
    return _new_record(store_id, _inserted_id(result), path, text, now, expiry_exempt)


def _create_claimed(
    conn: Connection, store: StoreArg, path: str, text: str, expiry_exempt: bool, actor: str
) -> FileRecord | None:
    """The short path of a new file, three statements when the store id is known
    (:func:`dbmemory.db.dialect.writes.guarded_create`): lock the store row, check its caps against
    its counters and count the file (:data:`~dbmemory.store.statements.reads.CLAIM_FILE_SLOT`); insert the
    file if its path is free (:data:`~dbmemory.store.statements.writes.INSERT_FILE_IF_FREE`); the audit
    event. ``None`` when the claim does not apply (unknown store id, missing store, a cap
    refuses): the caller's long path then says why, with nothing changed. A taken path raises
    here; the caller's write unit rolls the claim back."""
    if isinstance(store, StoreRef):
        store_id, key = store.store_id, store.store_key
    else:
        store_id, key = store, None
    if store_id is None or not guarded_create(conn):
        return None
    now = utcnow()
    params: dict[str, Any] = {"p_sid": store_id, "p_chars": len(text), "p_now": now}
    if key is not None:
        params["p_key"] = key
        claimed = raw.row_count(conn, st.CLAIM_FILE_SLOT_BY_KEY, params)
    else:
        claimed = raw.row_count(conn, st.CLAIM_FILE_SLOT, params)
    if claimed != 1:
        return None
    ph = path_hash(path)
    stmt, values = insert_file_if_free_params(
        store_id, path, ph, [path_hash(a) for a in ancestors(path)], text, now,
        expiry_exempt=expiry_exempt,
    )
    returning = insert_returns_id(conn)
    result = conn.execute(returning_file_id(stmt) if returning else stmt, values)
    file_id = result.scalar() if returning else (result.lastrowid if result.rowcount == 1 else None)
    if file_id is None:
        facts = file_facts(conn, store_id, path)
        if facts.same:
            raise AlreadyExistsError(f"file {path} already exists", code="already_exists")
        check_new_file_shape(facts, path)
        raise ConflictError(f"creating {path} could not be completed: retry")
    if key is None:
        key = conn.execute(st.SELECT_STORE_KEY, {"p_sid": store_id}).scalar_one()
    audit(conn, [audit_event(store_id, key, path, "create", actor, None, len(text))])
    return _new_record(store_id, int(file_id), path, text, now, expiry_exempt)


def _inserted_id(result: CursorResult[Any]) -> int:
    """The id of the file one ``INSERT`` just wrote."""
    key = result.inserted_primary_key
    if key is None:  # only for a statement that is no single-row INSERT
        raise TypeError("the insert returned no primary key")
    file_id = key._mapping["file_id"]  # of (store_id, file_id); None: AUTO_INCREMENT / rowid
    return int(file_id if file_id is not None else result.lastrowid)


def _new_record(
    store_id: int, file_id: int, path: str, text: str, now: dt.datetime, expiry_exempt: bool
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
        file_id=file_id,
        expiry_exempt=bool(expiry_exempt),
    )


def edit_file(
    conn: Connection,
    store: StoreArg,
    path: str,
    transform: Callable[..., tuple[str, T]],
    *,
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
    _v.check_connection(conn)
    check_store(store)
    _v.check_text(actor, "actor")
    _v.check_callable(transform, "transform", optional=False)
    _v.check_text(action, "action", empty=False, max_chars=30)
    path = normalize_path(path)
    require_not_root(path, "edit")
    known_id = existing_store_id(conn, store)
    if isinstance(store, StoreRef) and known_id is None:
        raise NotFoundError(f"the path {path} does not exist")
    with savepoint(conn, f"editing {path}"):
        store_id, store_key, caps, (count, total), row = lock_store_file_caps(
            conn, store, known_id, path
        )
        if row is None:
            raise _no_file_error(conn, store_id, path)
        old = record(row)
        new_text, extra = transform(old.text, caps) if pass_caps else transform(old.text)
        validate_text(new_text)
        check_file_chars(caps, path, len(new_text), old.chars)
        if new_text == old.text:
            return old, extra
        grow = len(new_text) - old.chars
        if caps.max_store_chars is not None and grow > 0:
            check_store_caps(
                caps, file_count=count, total_chars=total, add_files=0, add_chars=grow, path=path
            )
        now = utcnow()
        event = audit_event(store_id, store_key, path, action, actor, old.chars, len(new_text))
        _write_text(conn, store_id, old, new_text, now, event, doing="edited")
    return _replaced_record(store_id, path, old, new_text, now, old.expiry_exempt), extra


def _no_file_error(conn: Connection, store_id: int, path: str) -> InvalidPathError | NotFoundError:
    """Why no file is at ``path`` (the caller holds the store lock): a directory is there
    (``is_directory``), or nothing is."""
    probe = {"p_sid": store_id, **st.prefix_params(path)}
    if conn.execute(st.SELECT_LISTING_DIR_ANY, probe).first() is not None:
        return InvalidPathError(
            f"{path} is a directory, not a file: edit a file inside it", code="is_directory"
        )
    return NotFoundError(f"the path {path} does not exist")


def _replaced_record(
    store_id: int, path: str, old: FileRecord, text: str, now: dt.datetime, expiry_exempt: bool
) -> FileRecord:
    """The record of the locked file ``old`` at ``path`` after its text became ``text`` at
    ``now`` (no read-back: one version up, the same id and creation time)."""
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
        expiry_exempt=expiry_exempt,
    )


def put_file(
    conn: Connection,
    store: StoreArg,
    path: str,
    text: str,
    *,
    enforce_caps: bool = True,
    expected_version: int | None = None,
    expiry_exempt: bool | None = None,
    actor: str = "admin",
    expected_text: str | None = None,
) -> FileRecord:
    """Write a whole file, creating or replacing it (admin upsert; profile compare-and-set).

    The store's caps (the values on its row, :mod:`dbmemory.store.caps`) apply; a store row created
    by this write gets the caps of its configuration.

    Args:
        enforce_caps: check the store's caps before writing (default). ``False`` is the one
            admin bypass of the caps (``dbmemory files put --no-caps``): every cap is skipped.
        expected_version: ``None`` writes whatever is there; ``0`` requires that the file does
            not exist; ``n`` requires that it is at version ``n`` (compare-and-set).
        expected_text: with ``expected_version`` ``n``: the text the new one was made from;
            the stored text must still be it. A version alone cannot tell a file deleted and
            created again (it restarts at version 1) from the one that was read, so a rewrite
            made from the old file would replace the new one; the text can.
        expiry_exempt: set the file's exemption from the expiry rule; ``None`` keeps it
            (new files: not exempt).
        actor: who writes, for the audit event.

    Returns:
        The :class:`FileRecord` after the write. An unchanged text (and flag) is not written:
        the current record comes back with its version unchanged, and no audit event is made.

    Raises:
        InvalidPathError / InvalidArgumentError: invalid path or text.
        ConflictError: ``expected_version`` or ``expected_text`` does not match (someone else
            wrote first, or the file was deleted and created again).
        CapExceededError: a cap would be exceeded (when ``enforce_caps``).
        InvalidArgumentError: also for a ``conn``, ``store``, ``caps``, ``actor``,
            ``enforce_caps``, ``expected_version`` or ``expiry_exempt`` of the wrong type or
            range (``expected_version``: ``None`` or 0 to 2,147,483,647).
    """
    check_arguments(conn=conn, store=store, enforce_caps=enforce_caps, actor=actor)
    _v.check_int(expected_version, "expected_version", minimum=0, maximum=_v.INT32_MAX, optional=True)
    _v.check_bool(expiry_exempt, "expiry_exempt", optional=True)
    path = normalize_path(path)
    require_not_root(path, "write")
    validate_text(text)
    if expected_text is not None:
        validate_text(expected_text, what="expected_text")
    known_id = store.store_id if isinstance(store, StoreRef) else store
    with savepoint(conn, f"writing {path}"):
        store_id, store_key, caps, (count, total), row = lock_store_file_caps(
            conn, store, known_id, path
        )
        put = _Put(
            conn, store_id, store_key, caps if enforce_caps else None, count, total, path, text,
            actor, utcnow(),
        )
        if row is None:
            return _put_new(put, expected_version, expiry_exempt)
        return _put_over(put, record(row), expected_version, expected_text, expiry_exempt)


@dataclass(frozen=True)
class _Put:
    """One :func:`put_file` under its locks: the locked store (its caps, ``None`` when the
    caller bypasses them, and its counters) and the text to write at ``path``."""

    conn: Connection
    store_id: int
    store_key: str
    caps: Caps | None
    file_count: int
    total_chars: int
    path: str
    text: str
    actor: str
    now: dt.datetime

    def check_file_cap(self, old_chars: int | None) -> None:
        """``max_file_chars`` for the new text (``old_chars``: the text it replaces)."""
        if self.caps is not None:
            check_file_chars(self.caps, self.path, len(self.text), old_chars)

    def check_store_cap(self, *, add_files: int, add_chars: int) -> None:
        """``max_files`` and ``max_store_chars`` for the store after the write."""
        if self.caps is not None:
            check_store_caps(
                self.caps,
                file_count=self.file_count,
                total_chars=self.total_chars,
                add_files=add_files,
                add_chars=add_chars,
                path=self.path,
            )

    def event(self, old_chars: int | None) -> dict[str, Any]:
        """The ``put`` audit event of this write."""
        return audit_event(
            self.store_id, self.store_key, self.path, "put", self.actor, old_chars, len(self.text)
        )


def _put_new(put: _Put, expected_version: int | None, expiry_exempt: bool | None) -> FileRecord:
    """:func:`put_file` where no file is at the path: check the version asked for, the file
    cap, the path's shape and the store caps, in that order; insert the file and its event."""
    if expected_version not in (None, 0):
        raise ConflictError(
            f"{put.path} no longer exists (expected version {expected_version}): reload it",
            code="conflict",
        )
    put.check_file_cap(None)
    check_new_file_shape(file_facts(put.conn, put.store_id, put.path), put.path)
    put.check_store_cap(add_files=1, add_chars=len(put.text))
    exempt = bool(expiry_exempt)
    result = put.conn.execute(
        insert_file_for(put.conn.dialect.name),
        insert_file_params(
            put.store_id, put.path, path_hash(put.path), put.text, put.now, expiry_exempt=exempt
        ),
    )
    audit_write(put.conn, put.store_id, [put.event(None)], 1, len(put.text))
    file_id = _inserted_id(result)
    return _new_record(put.store_id, file_id, put.path, put.text, put.now, exempt)


def _put_over(
    put: _Put,
    old: FileRecord,
    expected_version: int | None,
    expected_text: str | None,
    expiry_exempt: bool | None,
) -> FileRecord:
    """:func:`put_file` over the locked file ``old``: check the version and text asked for;
    return ``old`` when nothing changes; else check the caps and replace the text."""
    _check_expected(old, expected_version, expected_text)
    if old.text == put.text and (expiry_exempt is None or expiry_exempt == old.expiry_exempt):
        return old
    put.check_file_cap(old.chars)
    put.check_store_cap(add_files=0, add_chars=len(put.text) - old.chars)
    _write_text(
        put.conn, put.store_id, old, put.text, put.now, put.event(old.chars), doing="written",
        expiry_exempt=expiry_exempt,
    )
    exempt = old.expiry_exempt if expiry_exempt is None else bool(expiry_exempt)
    return _replaced_record(put.store_id, put.path, old, put.text, put.now, exempt)


def _check_expected(
    old: FileRecord, expected_version: int | None, expected_text: str | None
) -> None:
    """The compare-and-set of :func:`put_file`: ``old`` must be at ``expected_version`` and hold
    ``expected_text`` (each when given).

    Raises:
        ConflictError: either differs.
    """
    if expected_version is not None and expected_version != old.version:
        raise ConflictError(
            f"{old.path} is at version {old.version}, not {expected_version}: "
            "someone else changed it; reload and retry",
            code="conflict",
        )
    if expected_text is not None and old.text != expected_text:
        raise ConflictError(
            f"{old.path} is not the file that was read (it was deleted and created again "
            "since): reload and retry",
            code="conflict",
        )


def _write_text(
    conn: Connection,
    store_id: int,
    old: FileRecord,
    text: str,
    now: dt.datetime,
    event: dict[str, Any],
    *,
    doing: str,
    expiry_exempt: bool | None = None,
) -> None:
    """Replace a locked file's text (compare-and-set on ``old.version``), move the store's
    ``total_chars`` by the length change and write ``event``, under the store lock the caller
    holds: one multi-table ``UPDATE`` and the audit insert where
    :func:`dbmemory.db.dialect.writes.counted_file_update` says so (MySQL/MariaDB), else
    :data:`~dbmemory.store.statements.writes.UPDATE_FILE` and :func:`audit_write`.

    Raises:
        ConflictError: the file is no longer at ``old.version`` (only possible when the store
            lock was bypassed); nothing was written.
    """
    grow = len(text) - old.chars
    if counted_file_update(conn):
        stmt, params = update_file_counted_params(
            store_id, old.file_id, text, old.version, now, grow, expiry_exempt=expiry_exempt
        )
        if conn.execute(stmt, params).rowcount == 0:
            raise ConflictError(f"{old.path} changed while it was being {doing}: retry")
        audit(conn, [event])
        return
    stmt, params = update_file_params(store_id, old.file_id, text, old.version, now, expiry_exempt=expiry_exempt)
    if raw.row_count(conn, stmt, params) != 1:
        raise ConflictError(f"{old.path} changed while it was being {doing}: retry")
    audit_write(conn, store_id, [event], 0, grow)
