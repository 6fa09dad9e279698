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

Creating and changing files lives here; deleting, renaming and clearing them in
:mod:`dbmemory.file_moves`, re-exported here (``dbmemory.files.delete_path`` etc.); the reads in
:mod:`dbmemory.reads`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from dbmemory import statements as st
from dbmemory import validate as _v
from dbmemory.db import dialect
from dbmemory.errors import (
    AlreadyExistsError,
    CapExceededError,
    ConflictError,
    InvalidArgumentError,
    InvalidPathError,
    NotFoundError,
)
from dbmemory.model import Caps, FileRecord, StoreRef
from dbmemory.paths import ancestors, normalize_path, path_hash
from dbmemory.audit import _audit, _audit_write, _event
from dbmemory.reads import (
    get_file,
    list_directory,
    list_files,
    read_path,
    view_path,
)
from dbmemory.file_moves import (
    clear_store_files,
    delete_file,
    delete_path,
    rename_path,
)
from dbmemory.store_lock import (
    SERIALIZATION_FAILURE,
    StoreArg,
    _check_file_chars,
    _check_new_file_shape,
    _check_store_caps,
    _existing_store_id,
    _facts,
    _ignored_caps,
    _lock_store_caps,
    _lock_store_file_caps,
    _record,
    _require_not_root,
    _savepoint,
    find_store_id,
    get_or_create_store,
)

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
    surrogate = _SURROGATE.search(text)  # no 4x copy of a large text, unlike encode()
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
        made = _create_claimed(conn, store, path, text, expiry_exempt, actor)
        if made is not None:
            return made
        store_id, store_key, caps, (count, total) = _lock_store_caps(conn, store)
        _check_file_chars(caps, path, len(text), None)
        facts = _facts(conn, store_id, path)
        if facts.same:
            raise AlreadyExistsError(f"file {path} already exists", code="already_exists")
        _check_new_file_shape(facts, path)
        _check_store_caps(
            caps,
            file_count=count,
            total_chars=total,
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
            conn,
            store_id,
            [_event(store_id, store_key, path, "create", actor, None, len(text))],
            1,
            len(text),
        )
    return _new_record(store_id, int(result.inserted_primary_key[0]), path, text, now, expiry_exempt)


def _create_claimed(
    conn: Connection, store: StoreArg, path: str, text: str, expiry_exempt: bool, actor: str
) -> FileRecord | None:
    """The short path of a new file, three statements when the store id is known
    (:func:`dbmemory.db.dialect.guarded_create`): lock the store row, check its caps against
    its counters and count the file (:data:`~dbmemory.statements.CLAIM_FILE_SLOT`); insert the
    file if its path is free (:data:`~dbmemory.statements.INSERT_FILE_IF_FREE`); the audit
    event. ``None`` when the claim does not apply (unknown store id, missing store, a cap
    refuses): the caller's long path then says why, with nothing changed. A taken path raises
    here; the caller's write unit rolls the claim back."""
    if isinstance(store, StoreRef):
        store_id, key = store.store_id, store.store_key
    else:
        store_id, key = store, None
    if store_id is None or not dialect.guarded_create(conn):
        return None
    now = dialect.utcnow()
    params: dict[str, Any] = {"p_sid": store_id, "p_chars": len(text), "p_now": now}
    if key is not None:
        params["p_key"] = key
        claimed = conn.execute(st.CLAIM_FILE_SLOT_BY_KEY, params)
    else:
        claimed = conn.execute(st.CLAIM_FILE_SLOT, params)
    if claimed.rowcount != 1:
        return None
    ph = path_hash(path)
    stmt, values = st.insert_file_if_free_params(
        store_id, path, ph, [path_hash(a) for a in ancestors(path)], text, now,
        expiry_exempt=expiry_exempt,
    )
    returning = dialect.insert_returns_id(conn)
    result = conn.execute(st.returning_file_id(stmt) if returning else stmt, values)
    file_id = result.scalar() if returning else (result.lastrowid if result.rowcount == 1 else None)
    if file_id is None:
        facts = _facts(conn, store_id, path)
        if facts.same:
            raise AlreadyExistsError(f"file {path} already exists", code="already_exists")
        _check_new_file_shape(facts, path)
        raise ConflictError(f"creating {path} could not be completed: retry")
    if key is None:
        key = conn.execute(st.SELECT_STORE_KEY, {"p_sid": store_id}).scalar_one()
    _audit(conn, [_event(store_id, key, path, "create", actor, None, len(text))])
    return _new_record(store_id, int(file_id), path, text, now, expiry_exempt)


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
        store_id, store_key, caps, (count, total), row = _lock_store_file_caps(
            conn, store, known_id, path
        )
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
            _check_store_caps(
                caps,
                file_count=count,
                total_chars=total,
                add_files=0,
                add_chars=grow,
                path=path,
            )
        now = dialect.utcnow()
        _write_text(
            conn,
            store_id,
            old,
            new_text,
            now,
            _event(store_id, store_key, path, action, actor, old.chars, len(new_text)),
            doing="edited",
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
    expected_text: str | None = None,
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
    _v.check_caps(caps, optional=True)
    _ignored_caps(caps, "put_file")
    _v.arguments(conn=conn, store=store, enforce_caps=enforce_caps, actor=actor)
    _v.check_int(expected_version, "expected_version", minimum=0, maximum=_v.INT32_MAX, optional=True)
    _v.check_bool(expiry_exempt, "expiry_exempt", optional=True)
    path = normalize_path(path)
    _require_not_root(path, "write")
    validate_text(text)
    if expected_text is not None:
        validate_text(expected_text, what="expected_text")
    known_id = store.store_id if isinstance(store, StoreRef) else store
    with _savepoint(conn, f"writing {path}"):
        store_id, store_key, caps, (count, total), row = _lock_store_file_caps(
            conn, store, known_id, path
        )
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
                    file_count=count,
                    total_chars=total,
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
                conn,
                store_id,
                [_event(store_id, store_key, path, "put", actor, None, len(text))],
                1,
                len(text),
            )
            file_id = int(result.inserted_primary_key[0])
            return _new_record(store_id, file_id, path, text, now, bool(expiry_exempt))
        else:
            old = _record(row)
            if expected_version is not None and expected_version != old.version:
                raise ConflictError(
                    f"{path} is at version {old.version}, not {expected_version}: "
                    "someone else changed it; reload and retry",
                    code="conflict",
                )
            if expected_text is not None and old.text != expected_text:
                raise ConflictError(
                    f"{path} is not the file that was read (it was deleted and created again "
                    "since): reload and retry",
                    code="conflict",
                )
            if old.text == text and (expiry_exempt is None or expiry_exempt == old.expiry_exempt):
                return old
            if enforce_caps:
                _check_file_chars(caps, path, len(text), old.chars)
            grow = len(text) - old.chars
            if enforce_caps and caps.max_store_chars is not None and grow > 0:
                _check_store_caps(
                    caps,
                    file_count=count,
                    total_chars=total,
                    add_files=0,
                    add_chars=grow,
                    path=path,
                )
            _write_text(
                conn,
                store_id,
                old,
                text,
                now,
                _event(store_id, store_key, path, "put", actor, old.chars, len(text)),
                doing="written",
                expiry_exempt=expiry_exempt,
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
    :func:`dbmemory.db.dialect.counted_file_update` says so (MySQL/MariaDB), else
    :data:`~dbmemory.statements.UPDATE_FILE` and :func:`_audit_write`.

    Raises:
        ConflictError: the file is no longer at ``old.version`` (only possible when the store
            lock was bypassed); nothing was written.
    """
    grow = len(text) - old.chars
    if dialect.counted_file_update(conn):
        stmt, params = st.update_file_counted_params(
            store_id, old.file_id, text, old.version, now, grow, expiry_exempt=expiry_exempt
        )
        if conn.execute(stmt, params).rowcount == 0:
            raise ConflictError(f"{old.path} changed while it was being {doing}: retry")
        _audit(conn, [event])
        return
    stmt, params = st.update_file_params(
        old.file_id, text, old.version, now, expiry_exempt=expiry_exempt
    )
    if conn.execute(stmt, params).rowcount != 1:
        raise ConflictError(f"{old.path} changed while it was being {doing}: retry")
    _audit_write(conn, store_id, [event], 0, grow)


# The expiry rule lives in dbmemory.expiry; its functions are also reachable here, where callers
# first looked for them (PEP 562: imported on first use, as expiry builds on this module).
_EXPIRY_NAMES = ("count_expirable_files", "expire_files", "expire_files_committing")


def __getattr__(name: str) -> Any:
    if name in _EXPIRY_NAMES:
        from dbmemory import expiry

        return getattr(expiry, name)
    raise AttributeError(f"module 'dbmemory.files' has no attribute {name!r}")
