"""Import and export of profile folder trees (issue 3, "Storage": ``profile import|export``).

Two layouts are read (``<root_folder>`` is ``UserMemoryConfig.root_folder``, default
``user-memory``):

* canonical: ``home-<user_id>/<root_folder>/memory.md``
* legacy: ``<root_folder>/<user_id>/memory.md``

When both hold a profile for the same user, the canonical one wins. The user id is the
frontmatter's ``user_id`` when the folder name is that id or its store-key encoding
(:func:`~dbmemory.profile.store.encode_user_id`); a file whose frontmatter names another user is
skipped (never imported into the wrong user's store); a file without ``user_id`` takes the folder
name. Imported profiles are written in canonical form (frontmatter by the package, ``user_id``
set, ``last_updated`` and ``turn_count`` kept) through :mod:`dbmemory.files`, audited.

Export writes the canonical layout, one folder per profile, with the stored text unchanged; the
folder is ``home-<user_id>`` when the id is a safe folder name, else ``home-<encoded id>``
(which import maps back through the frontmatter).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import sqlalchemy as sa

from dbmemory.errors import ConflictError, DbMemoryError
from dbmemory.keys import RESERVED_SCOPE
from dbmemory.profile.format import parse_profile, render_profile
from dbmemory.profile.store import (
    PROFILE_PATH,
    decode_user_id,
    encode_user_id,
    profile_store_key,
    read_profile,
    write_profile,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "ProfileSource",
    "TransferReport",
    "scan_profile_tree",
    "import_profiles",
    "export_profiles",
    "list_profile_user_ids",
    "folder_name_for",
    "FILE_NAME",
]

FILE_NAME = PROFILE_PATH.rsplit("/", 1)[-1]
"""The profile's file name in a folder tree (``memory.md``, the basename of ``PROFILE_PATH``)."""

_SAFE_FOLDER = re.compile(r"[A-Za-z0-9@+=,._ -]{1,200}")


@dataclass(frozen=True)
class ProfileSource:
    """One profile file found in a tree.

    Attributes:
        folder_id: the user id as the folder name spells it.
        path: the ``memory.md`` file.
        layout: ``"canonical"`` or ``"legacy"``.
    """

    folder_id: str
    path: Path
    layout: Literal["canonical", "legacy"]


@dataclass
class TransferReport:
    """What an import or export did.

    Attributes:
        done: user ids imported, or files written by an export.
        skipped: ``(what, why)`` pairs that were not imported or exported.
    """

    done: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def folder_name_for(user_id: str) -> str:
    """The folder-name form of ``user_id`` used by export (the id, or its encoding if unsafe)."""
    if _SAFE_FOLDER.fullmatch(user_id) and user_id.strip() == user_id and user_id not in (".", ".."):
        return user_id
    return encode_user_id(user_id)


def scan_profile_tree(root: Path | str, *, root_folder: str = "user-memory") -> list[ProfileSource]:
    """Find profile files in ``root`` in both layouts; canonical wins per folder id.

    Args:
        root: the folder to scan.
        root_folder: the profile namespace folder name.

    Returns:
        One :class:`ProfileSource` per folder id, sorted by folder id.
    """
    root = Path(root)
    found: dict[str, ProfileSource] = {}
    legacy_root = root / root_folder
    if legacy_root.is_dir():
        for child in sorted(legacy_root.iterdir()):
            candidate = child / FILE_NAME
            if child.is_dir() and candidate.is_file():
                found[child.name] = ProfileSource(child.name, candidate, "legacy")
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if not (child.is_dir() and child.name.startswith("home-")):
                continue
            candidate = child / root_folder / FILE_NAME
            folder_id = child.name[len("home-") :]
            if folder_id and candidate.is_file():
                found[folder_id] = ProfileSource(folder_id, candidate, "canonical")
    return [found[key] for key in sorted(found)]


def _user_id_for(source: ProfileSource, frontmatter_id: str) -> str | None:
    if not frontmatter_id:
        return source.folder_id
    if source.folder_id == frontmatter_id:
        return frontmatter_id
    try:
        if source.folder_id == encode_user_id(frontmatter_id):
            return frontmatter_id
    except DbMemoryError:
        return None
    return None


def import_profiles(
    conn: Connection,
    root: Path | str,
    *,
    root_folder: str = "user-memory",
    overwrite: bool = True,
    actor: str = "import",
) -> TransferReport:
    """Load the profiles of a folder tree into the database (in the caller's transaction).

    Args:
        conn: a SQLAlchemy connection; nothing is committed here.
        root: the tree (see the module doc for the layouts).
        root_folder: the profile namespace (folder name and store namespace).
        overwrite: replace existing profiles (default); False skips users who have one.
        actor: recorded in the audit events.

    Returns:
        A :class:`TransferReport`: imported user ids, and skipped files with the reason.

    Raises:
        StorageError: the database failed.
    """
    report = TransferReport()
    for source in scan_profile_tree(root, root_folder=root_folder):
        try:
            text = source.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            report.skipped.append((str(source.path), f"unreadable: {type(exc).__name__}"))
            continue
        profile = parse_profile(text)
        user_id = _user_id_for(source, profile.user_id)
        if user_id is None:
            report.skipped.append(
                (str(source.path), f"frontmatter user_id {profile.user_id!r} does not match the folder")
            )
            continue
        profile.user_id = user_id
        canonical = render_profile(profile)
        try:
            encode_user_id(user_id)
            write_profile(
                conn,
                user_id,
                canonical,
                expected_version=None if overwrite else 0,
                root_folder=root_folder,
                actor=actor,
            )
        except ConflictError:
            report.skipped.append((str(source.path), "a profile exists (overwrite is off)"))
            continue
        except DbMemoryError as exc:
            if exc.code == "storage_error":
                raise
            report.skipped.append((str(source.path), exc.message))
            continue
        report.done.append(user_id)
    return report


def list_profile_user_ids(conn: Connection, *, root_folder: str = "user-memory") -> list[str]:
    """User ids that have a profile store under ``root_folder``, sorted.

    Raises:
        StorageError: the database failed.
    """
    from dbmemory.db.dialect import translate_db_error
    from dbmemory.db.schema import stores

    prefix = profile_store_key("x", root_folder)[: -len("x")]
    query = sa.select(stores.c.store_key).where(
        stores.c.scope_name == RESERVED_SCOPE,
        # exact prefix (never LIKE: '_' and '%' are wildcards, and root folders contain '_')
        sa.func.substr(stores.c.store_key, 1, len(prefix)) == prefix,
    )
    try:
        keys = conn.execute(query).scalars().all()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "listing profiles") from exc
    user_ids: list[str] = []
    for key in keys:
        if key.startswith(prefix):
            try:
                user_ids.append(decode_user_id(key[len(prefix) :]))
            except DbMemoryError:
                continue
    return sorted(user_ids)


def export_profiles(
    conn: Connection,
    dest: Path | str,
    *,
    root_folder: str = "user-memory",
    user_ids: list[str] | None = None,
) -> TransferReport:
    """Write profiles to ``dest/home-<user_id>/<root_folder>/memory.md`` (stored text unchanged).

    Args:
        conn: a SQLAlchemy connection (read only).
        dest: the target folder (created when missing).
        root_folder: the profile namespace.
        user_ids: only these users (default: every profile under ``root_folder``).

    Returns:
        A :class:`TransferReport`: written file paths, and user ids without a profile.
    """
    dest = Path(dest)
    report = TransferReport()
    for user_id in user_ids if user_ids is not None else list_profile_user_ids(conn, root_folder=root_folder):
        record = read_profile(conn, user_id, root_folder=root_folder)
        if record is None:
            report.skipped.append((user_id, "no profile"))
            continue
        target = dest / f"home-{folder_name_for(user_id)}" / root_folder / FILE_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(record.text, encoding="utf-8", newline="\n")
        report.done.append(str(target))
    return report

