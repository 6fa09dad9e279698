"""Where a user's profile lives: store key, path, and reads/writes through :mod:`dbmemory.files`.

The profile is the ordinary file :data:`PROFILE_PATH` in the user's context-scoped store with the
key ``context:<root_folder>:user_id:<encoded user id>`` (issue 3, "Storage"). There is no second
storage path: every read and write goes through :mod:`dbmemory.files`, so caps, locks, the audit
log and the expiry exemption apply. Profiles are written with ``expiry_exempt=True``.

User-id encoding (:func:`encode_user_id`), deterministic and collision-free: store-key components
allow only ``[A-Za-z0-9_.-]`` (DESIGN.md section 4). ASCII letters, digits, ``.`` and ``-`` are
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

import re
from typing import TYPE_CHECKING

from dbmemory.errors import InvalidScopeError, NotFoundError
from dbmemory.keys import MAX_COMPONENT_CHARS, build_store_key

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from dbmemory.model import FileRecord

__all__ = [
    "PROFILE_PATH",
    "CONTEXT_KEY",
    "DEFAULT_ROOT_FOLDER",
    "encode_user_id",
    "decode_user_id",
    "profile_store_key",
    "read_profile",
    "write_profile",
    "delete_profile",
]

PROFILE_PATH = "/memories/memory.md"
"""The profile file's path inside the user's store."""

CONTEXT_KEY = "user_id"
"""The context key of profile stores."""

DEFAULT_ROOT_FOLDER = "user-memory"
"""Default namespace (``UserMemoryConfig.root_folder``)."""

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
_ESCAPE = re.compile(r"_([0-9A-F]{2})")


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
    encoded = "".join(
        char if char in _SAFE else "".join(f"_{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for char in user_id
    )
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
    out = bytearray()
    position = 0
    while position < len(encoded):
        char = encoded[position]
        if char == "_":
            match = _ESCAPE.match(encoded, position)
            if match is None:
                raise InvalidScopeError(f"{encoded!r} is not an encoded user id: bad escape")
            out.append(int(match.group(1), 16))
            position = match.end()
        elif char in _SAFE:
            out.extend(char.encode("ascii"))
            position += 1
        else:
            raise InvalidScopeError(f"{encoded!r} is not an encoded user id: {char!r}")
    try:
        decoded = out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise InvalidScopeError(f"{encoded!r} is not an encoded user id: not UTF-8") from exc
    if encode_user_id(decoded) != encoded:
        raise InvalidScopeError(f"{encoded!r} is not an encoded user id: not canonical")
    return decoded


def profile_store_key(user_id: str, root_folder: str = DEFAULT_ROOT_FOLDER) -> str:
    """The store key of ``user_id``'s profile: ``context:<root_folder>:user_id:<encoded>``.

    Raises:
        InvalidScopeError: invalid user id (see :func:`encode_user_id`) or root folder.
    """
    return build_store_key(
        "context",
        store_code=root_folder,
        context_key=CONTEXT_KEY,
        context_value=encode_user_id(user_id),
    )


def read_profile(
    conn: Connection, user_id: str, *, root_folder: str = DEFAULT_ROOT_FOLDER
) -> FileRecord | None:
    """The stored profile file of ``user_id``, or None when there is none yet.

    Runs in the caller's transaction; commits nothing.

    Raises:
        InvalidScopeError: invalid user id or root folder.
        StorageError: the database failed.
    """
    from dbmemory import files

    store_id = files.find_store_id(conn, profile_store_key(user_id, root_folder))
    if store_id is None:
        return None
    try:
        return files.get_file(conn, store_id, PROFILE_PATH)
    except NotFoundError:
        return None


def write_profile(
    conn: Connection,
    user_id: str,
    text: str,
    *,
    expected_version: int | None,
    root_folder: str = DEFAULT_ROOT_FOLDER,
    actor: str = "profile",
) -> FileRecord:
    """Write ``user_id``'s profile with compare-and-set, expiry-exempt, audited.

    Args:
        conn: a connection in the caller's transaction (the write and its audit event join it).
        user_id: whose profile.
        text: the whole file text.
        expected_version: ``0`` = must not exist yet; ``n`` = must still be at version ``n``;
            None = overwrite whatever is there (admin edits and imports only).
        root_folder: the profile namespace.
        actor: recorded in the audit event.

    Returns:
        The :class:`~dbmemory.model.FileRecord` after the write.

    Raises:
        ConflictError: the profile is not at ``expected_version`` (changed meanwhile).
        InvalidScopeError: invalid user id or root folder.
        CapExceededError: the text exceeds the file cap (100,000 characters).
    """
    from dbmemory import files
    from dbmemory.model import StoreRef

    ref = StoreRef(
        store_key=profile_store_key(user_id, root_folder), scope="context", store_code=root_folder
    )
    return files.put_file(
        conn, ref, PROFILE_PATH, text, expected_version=expected_version, expiry_exempt=True,
        actor=actor,
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
    """
    from dbmemory import files

    store_id = files.find_store_id(conn, profile_store_key(user_id, root_folder))
    if store_id is None:
        return False
    return files.delete_file(conn, store_id, PROFILE_PATH, actor=actor)
