"""Where a user's profile lives: store key, path, and its reads and writes through the store
layer (:func:`dbmemory.store.files.put_file`, :func:`dbmemory.store.moves.delete_file`).

The profile is the ordinary file :data:`PROFILE_PATH` in the user's store in the package's
reserved namespace, key ``reserved:profile:<root_folder>:<encoded user id>`` with scope
``reserved`` (built by :func:`dbmemory.core.keys.reserved_store_key`). No agent configuration, store
code or MEMORY tool call can name that key (:mod:`dbmemory.core.keys`): an agent configured with
``store_code="user-memory", context_key="user_id"`` gets ``context:store:user-memory:user_id:<id>``,
another store. (Before revision 0002 the key was ``context:<root_folder>:user_id:<id>``; the
migration moved every profile.) There is no second
storage path for changes: every write and delete goes through :mod:`dbmemory.store.files`, so caps,
locks, the audit log and the expiry exemption apply. Profiles are written with
``expiry_exempt=True``. The read (:func:`read_profile`, once per turn) is one ``SELECT`` defined
here: the file by its store key (the store id as a scalar subquery, as in
:mod:`dbmemory.store.statements.reads`), optionally with the user's opt-out flag as a second scalar subquery,
so a turn's load costs one round trip. It takes no lock and does not touch the file (profiles are
expiry-exempt).

User-id encoding (:func:`encode_user_id`), deterministic and collision-free: store-key components
allow only ``[A-Za-z0-9_.-]`` (:mod:`dbmemory.core.keys`). ASCII letters, digits, ``.`` and ``-`` are
kept; every other character, **including** ``_``, becomes ``_XX`` for each byte of its UTF-8
encoding (upper-case hex). Because ``_`` appears only as an escape introducer, the mapping is
injective and :func:`decode_user_id` inverts it. Examples: ``u-123`` -> ``u-123``,
``ann@example.com`` -> ``ann_40example.com``, ``first_last`` -> ``first_5Flast``,
``a b:c`` -> ``a_20b_3Ac``, ``Jürgen`` -> ``J_C3_BCrgen``. An id that is empty, or longer than 200
characters after encoding, raises :class:`~dbmemory.errors.InvalidScopeError`.

Isolation: a user's store key is derived from that user's id only, and every function here takes
the user id and derives the key itself, so no call for user A can reach user B's profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.escapes import escape, unescape
from dbmemory.core.keys import MAX_COMPONENT_CHARS, RESERVED_SCOPE, reserved_store_key
from dbmemory.core.model import FileRecord, StoreRef
from dbmemory.core.paths import path_hash
from dbmemory.db import schema
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.errors import InvalidScopeError
from dbmemory.store import files
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import delete_file
from dbmemory.store.owners import owner_writes
from dbmemory.store.statements.reads import FILE_COLUMNS

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "PROFILE_PATH",
    "PROFILE_KIND",
    "CONTEXT_KEY",
    "DEFAULT_ROOT_FOLDER",
    "encode_user_id",
    "decode_user_id",
    "profile_store_key",
    "read_profile",
    "read_profile_for_load",
    "LoadedProfile",
    "write_profile",
    "delete_profile",
]

PROFILE_PATH = "/memories/memory.md"
"""The profile file's path inside the user's store."""

CONTEXT_KEY = "user_id"
"""The context key of profile stores before revision 0002 (``context:<root>:user_id:<id>``);
kept for the migration and old exports. Today's key is :func:`profile_store_key`."""

PROFILE_KIND = "profile"
"""The reserved store kind of profiles (:data:`dbmemory.core.keys.RESERVED_KINDS`)."""

DEFAULT_ROOT_FOLDER = "user-memory"
"""Default namespace (``UserMemoryConfig.root_folder``)."""

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")


def encode_user_id(user_id: object) -> str:
    """Map a user id to the store-key alphabet (see the module doc).

    Args:
        user_id: the host's user id, any non-empty string (e-mail addresses, ids with spaces,
            ``:``, ``@``, non-ASCII characters are fine).

    Returns:
        The encoded id, 1 to 200 characters of ``[A-Za-z0-9_.-]``.

    Raises:
        InvalidScopeError: not a string, empty, or longer than 200 characters once encoded.
    """
    if not isinstance(user_id, str):
        raise InvalidScopeError(
            f"user id must be a string, got {type(user_id).__name__}: pass the host's user id text"
        )
    if user_id == "":
        raise InvalidScopeError("user id is empty: pass the signed-in user's id")
    encoded = escape(user_id, _SAFE)
    if len(encoded) > MAX_COMPONENT_CHARS:
        raise InvalidScopeError(
            f"user id is {len(encoded)} characters long once encoded for a store key "
            f"(each character outside A-Z a-z 0-9 . - takes 3 or more); the limit is "
            f"{MAX_COMPONENT_CHARS}: use a shorter user id"
        )
    return encoded


def decode_user_id(encoded: str) -> str:
    """Invert :func:`encode_user_id`.

    Raises:
        InvalidScopeError: ``encoded`` is not the output of :func:`encode_user_id`.
    """
    decoded, why = unescape(encoded, _SAFE)
    if decoded is None:
        raise InvalidScopeError(f"{encoded!r} is not an encoded user id: {why}")
    encode_user_id(decoded)  # the rules of an id (not empty, at most 200 characters encoded)
    return decoded


def profile_store_key(user_id: str, root_folder: str = DEFAULT_ROOT_FOLDER) -> str:
    """The store key of ``user_id``'s profile: ``reserved:profile:<root_folder>:<encoded>``.

    Raises:
        InvalidScopeError: invalid user id (see :func:`encode_user_id`) or root folder.
    """
    return reserved_store_key(PROFILE_KIND, root_folder, encode_user_id(user_id))


def _profile_statements() -> tuple[sa.Select[Any], sa.Select[Any], sa.Select[Any]]:
    """The profile read, built once with placeholders: without and with the opt-out flag.

    ``SELECT <file columns> [, (SELECT memory_enabled FROM dbm_user_settings WHERE user_key =
    :p_user_key) AS memory_enabled] FROM dbm_files WHERE store_id = (SELECT store_id FROM
    dbm_stores WHERE store_key = :p_store_key) AND path_hash = :p_path_hash``. The store id is a
    scalar subquery, not a join, so PostgreSQL's generic plan (psycopg prepares repeated
    statements) stays two index look-ups; the CLOB ``body`` is only selected.
    """
    files, stores, settings = schema.files, schema.stores, schema.user_settings
    store_id = (
        sa.select(stores.c.store_id)
        .where(stores.c.store_key == sa.bindparam("p_store_key"))
        .scalar_subquery()
    )
    columns = FILE_COLUMNS
    where = (files.c.store_id == store_id, files.c.path_hash == sa.bindparam("p_path_hash"))
    enabled = (
        sa.select(settings.c.memory_enabled)
        .where(settings.c.user_key == sa.bindparam("p_user_key"))
        .scalar_subquery()
        .label("memory_enabled")
    )
    lean = (files.c.file_id, files.c.store_id, files.c.version_no, files.c.body)
    return (
        sa.select(*columns).where(*where),
        sa.select(*columns, enabled).where(*where),
        sa.select(*lean, enabled).where(*where),
    )


SELECT_PROFILE, SELECT_PROFILE_AND_SETTING, SELECT_PROFILE_FOR_LOAD = _profile_statements()
"""The two forms of :func:`read_profile`'s statement, and the turn's load
(:func:`read_profile_for_load`: only the columns a load uses, no timestamps to convert);
tests/profile/test_profile_cache.py compiles all three for Oracle 19c."""


@dataclass(frozen=True)
class LoadedProfile:
    """What :func:`read_profile_for_load` returns: the stored text and its identity.

    Attributes:
        text: the whole file text (``""`` for an empty body).
        store_id: the profile store's id.
        file_id: the file's id.
        version: the file version (the compare-and-set token of a later write).
    """

    text: str
    store_id: int
    file_id: int
    version: int

_PROFILE_PATH_HASH = path_hash(PROFILE_PATH)


def _file_record(row: Any) -> FileRecord:
    return FileRecord(
        path=row.file_path,
        chars=row.char_count,
        version=row.version_no,
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_accessed_at=row.last_accessed_at,
        text=row.body or "",
        store_id=row.store_id,
        file_id=row.file_id,
        expiry_exempt=bool(row.expiry_exempt),
    )


def read_profile(
    conn: Connection,
    user_id: str,
    *,
    root_folder: str = DEFAULT_ROOT_FOLDER,
    unless_opted_out: bool = False,
) -> FileRecord | None:
    """The stored profile file of ``user_id``, or None when there is none yet.

    One ``SELECT`` (the store found by its key in the same statement). Runs in the caller's
    transaction; commits nothing, takes no lock, opens no savepoint.

    Args:
        conn: a SQLAlchemy connection.
        user_id: whose profile.
        root_folder: the profile namespace.
        unless_opted_out: also return None when the user opted out of memory
            (:mod:`dbmemory.profile.optout`); the flag is read in the same statement, so the
            ``dbm_user_settings`` table must exist (the migrations create it).

    Raises:
        InvalidScopeError: invalid user id or root folder.
        StorageError: the database failed.
        InvalidArgumentError: ``conn`` not a Connection; ``unless_opted_out`` not a bool.
    """
    check_arguments(conn=conn)
    _v.check_bool(unless_opted_out, "unless_opted_out")
    user_key = encode_user_id(user_id)
    params = {
        "p_store_key": reserved_store_key(PROFILE_KIND, root_folder, user_key),
        "p_path_hash": _PROFILE_PATH_HASH,
    }
    if unless_opted_out:
        params["p_user_key"] = user_key
    try:
        row = conn.execute(
            SELECT_PROFILE_AND_SETTING if unless_opted_out else SELECT_PROFILE, params
        ).first()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, f"reading {PROFILE_PATH}") from exc
    if row is None:
        return None
    if unless_opted_out and row.memory_enabled is not None and not row.memory_enabled:
        return None
    return _file_record(row)


def read_profile_for_load(
    conn: Connection, user_id: str, *, root_folder: str = DEFAULT_ROOT_FOLDER
) -> LoadedProfile | None:
    """:func:`read_profile` with ``unless_opted_out=True``, reduced to what a turn's load uses.

    One ``SELECT`` (:data:`SELECT_PROFILE_FOR_LOAD`) in the caller's transaction; no lock, no
    savepoint, no argument checks beyond the user id's encoding (the caller,
    :func:`~dbmemory.profile.load.load_user_memory`, checked them).

    Returns:
        The :class:`LoadedProfile`, or None when there is no profile or the user opted out.

    Raises:
        InvalidScopeError: invalid user id or root folder.
        StorageError: the database failed (for instance no ``dbm_user_settings`` table).
    """
    user_key = encode_user_id(user_id)
    params = {
        "p_store_key": reserved_store_key(PROFILE_KIND, root_folder, user_key),
        "p_path_hash": _PROFILE_PATH_HASH,
        "p_user_key": user_key,
    }
    try:
        row = conn.execute(SELECT_PROFILE_FOR_LOAD, params).first()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, f"reading {PROFILE_PATH}") from exc
    if row is None or (row.memory_enabled is not None and not row.memory_enabled):
        return None
    return LoadedProfile(
        text=row.body or "", store_id=row.store_id, file_id=row.file_id, version=row.version_no
    )


def write_profile(
    conn: Connection,
    user_id: str,
    text: str,
    *,
    expected_version: int | None,
    root_folder: str = DEFAULT_ROOT_FOLDER,
    actor: str = "profile",
    store_id: int | None = None,
    expected_text: str | None = None,
) -> FileRecord:
    """Write ``user_id``'s profile with compare-and-set, expiry-exempt, audited.

    With the store's id known (``store_id``, e.g. :attr:`~dbmemory.profile.load.UserMemoryState.store_id` of the load
    the rewrite started from) the store row and the file row are locked and read by one
    statement; the row found must carry the user's store key, else the write looks the store
    up by its key as without an id (an id of a dropped store, or one reused, is never written).

    Args:
        conn: a connection in the caller's transaction (the write and its audit event join it).
        user_id: whose profile.
        text: the whole file text.
        expected_version: ``0`` = must not exist yet; ``n`` = must still be at version ``n``;
            None = overwrite whatever is there (admin edits and imports only).
        root_folder: the profile namespace.
        actor: recorded in the audit event.
        store_id: the profile store's id when known (a hint, checked against the key).
        expected_text: the text the rewrite was made from (with ``expected_version``): the
            stored profile must still be it, so a profile deleted (an opt-out) and created
            again at version 1 is never replaced by a rewrite of the old one.

    Returns:
        The :class:`~dbmemory.core.model.FileRecord` after the write.

    Raises:
        ConflictError: the profile is not at ``expected_version`` (changed meanwhile).
        InvalidScopeError: invalid user id or root folder.
        CapExceededError: the text exceeds the file cap (100,000 characters).
        InvalidArgumentError: ``conn``, ``text``, ``expected_version``, ``actor`` or
            ``store_id`` of the wrong type or range.
    """
    check_arguments(conn=conn, actor=actor)
    _v.check_int(expected_version, "expected_version", minimum=0, maximum=_v.INT32_MAX, optional=True)
    _v.check_int(store_id, "store_id", minimum=1, maximum=_v.INT64_MAX, optional=True)
    ref = StoreRef(
        store_key=profile_store_key(user_id, root_folder),
        scope=RESERVED_SCOPE,
        agent_code=None,
        store_code=root_folder,
        store_id=store_id,
    )
    with owner_writes(PROFILE_KIND):
        return files.put_file(
            conn, ref, PROFILE_PATH, text, expected_version=expected_version, expiry_exempt=True,
            actor=actor, expected_text=expected_text,
        )


def delete_profile(
    conn: Connection,
    user_id: str,
    *,
    root_folder: str = DEFAULT_ROOT_FOLDER,
    actor: str = "profile",
) -> bool:
    """Delete ``user_id``'s profile file (audited). Returns whether it existed.

    Runs in the caller's transaction; commits nothing.

    Raises:
        InvalidScopeError: invalid user id or root folder.
        InvalidArgumentError: ``conn`` not a Connection; ``actor`` not text.
    """

    check_arguments(conn=conn, actor=actor)
    store_id = find_store_id(conn, profile_store_key(user_id, root_folder))
    if store_id is None:
        return False
    with owner_writes(PROFILE_KIND):
        return delete_file(conn, store_id, PROFILE_PATH, actor=actor)
