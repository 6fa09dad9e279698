"""Import and export of profile folder trees (``dbmemory profile import|export``).

Two layouts are read (``<root_folder>`` is ``UserMemoryConfig.root_folder``, default
``user-memory``):

* canonical: ``home-<user_id>/<root_folder>/memory.md``
* legacy: ``<root_folder>/<user_id>/memory.md``

When both hold a profile for the same user, the canonical one wins. The user id is the
frontmatter's ``user_id`` when the folder name is that id or its store-key encoding
(:func:`~dbmemory.profile.store.encode_user_id`); a file whose frontmatter names another user is
skipped (never imported into the wrong user's store); a file without frontmatter, or whose
frontmatter has no ``user_id``, takes the folder name. Refused (listed in the report's
``skipped`` with the reason, nothing written for them):

* a broken frontmatter (not closed, not YAML, not a mapping, an empty or non-text ``user_id``):
  the user id is then **never** taken from the folder name;
* a text without any of the six section headings, or with content before the first one
  (:func:`~dbmemory.profile.format.profile_text_problem`, the rule of ``profile edit``): it would
  replace a profile with an empty one or drop text;
* a file reached through a symbolic link that leads out of the folder, a file that is not a
  regular file (FIFO, device), or one larger than :data:`MAX_FILE_BYTES`.

Imported profiles are written in canonical form (frontmatter by the package, ``user_id`` set,
``last_updated`` and ``turn_count`` kept) through :mod:`dbmemory.store.files`, audited.

Export writes the canonical layout, one folder per profile, with the stored text unchanged; the
folder is ``home-<user_id>`` when the id is a safe folder name without ``_``, else
``home-<encoded id>`` (which import maps back through the frontmatter). Since an encoded id is
the only folder name with ``_``, two ids never get the same name; users whose folder names
differ only in letter case (one folder on case-insensitive file systems), a target folder that
already holds another user's profile, and a target reached through a symbolic link out of the
destination are refused with a message, so two users are never written to one folder.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import sqlalchemy as sa

from dbmemory.core.keys import RESERVED_SCOPE
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.schema import stores
from dbmemory.errors import ConflictError, DbMemoryError
from dbmemory.profile.format import (
    ProfileFormatError,
    parse_profile,
    profile_text_problem,
    read_frontmatter_strict,
    render_profile,
)
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
    "MAX_FILE_BYTES",
]

FILE_NAME = PROFILE_PATH.rsplit("/", 1)[-1]
"""The profile's file name in a folder tree (``memory.md``, the basename of ``PROFILE_PATH``)."""

_SAFE_FOLDER = re.compile(r"[A-Za-z0-9@+=,. -]{1,200}")
"""Ids used as folder names as they are: no ``_`` (only encoded ids have it), no separators."""

MAX_FILE_BYTES = 1_000_000
"""Largest profile file import reads (a profile is at most 100,000 characters)."""


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
    """The folder-name form of ``user_id`` used by export: the id when it is a safe folder name
    without ``_``, else its store-key encoding (injective: distinct ids, distinct names)."""
    if _SAFE_FOLDER.fullmatch(user_id) and user_id.strip() == user_id and user_id not in (".", ".."):
        return user_id
    return encode_user_id(user_id)


def scan_profile_tree(
    root: Path | str,
    *,
    root_folder: str = "user-memory",
    skipped: list[tuple[str, str]] | None = None,
) -> list[ProfileSource]:
    """Find profile files in ``root`` in both layouts; canonical wins per folder id.

    Args:
        root: the folder to scan.
        root_folder: the profile namespace folder name.
        skipped: when given, receives ``(path, why)`` for files that were found but are refused
            (reached through a symbolic link out of ``root``).

    Returns:
        One :class:`ProfileSource` per folder id, sorted by folder id; every path lies inside
        ``root`` once symbolic links are resolved.
    """
    root = Path(root)
    real_root = root.resolve()
    found: dict[str, ProfileSource] = {}

    def inside(candidate: Path) -> bool:
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError):
            return False
        if real == real_root or real_root in real.parents:
            return True
        if skipped is not None:
            skipped.append((str(candidate), "a symbolic link leads out of the folder: not followed"))
        return False

    legacy_root = root / root_folder
    if legacy_root.is_dir():
        for child in sorted(legacy_root.iterdir()):
            candidate = child / FILE_NAME
            if child.is_dir() and candidate.is_file() and inside(candidate):
                found[child.name] = ProfileSource(child.name, candidate, "legacy")
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if not (child.is_dir() and child.name.startswith("home-")):
                continue
            candidate = child / root_folder / FILE_NAME
            folder_id = child.name[len("home-") :]
            if folder_id and candidate.is_file() and inside(candidate):
                found[folder_id] = ProfileSource(folder_id, candidate, "canonical")
    return [found[key] for key in sorted(found)]


def _read_source(source: ProfileSource, real_root: Path) -> str:
    """The file's text, read without following a link out of ``real_root``.

    Raises:
        ValueError: why the file is refused.
    """
    real = source.path.resolve(strict=True)
    if real != real_root and real_root not in real.parents:
        raise ValueError("a symbolic link leads out of the folder: not followed")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise ValueError(f"unreadable: {type(exc).__name__}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes: not a profile")
        raw = handle.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise ValueError(f"larger than {MAX_FILE_BYTES} bytes: not a profile")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("unreadable: not UTF-8 text") from None


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
    real_root = Path(root).resolve()
    for source in scan_profile_tree(root, root_folder=root_folder, skipped=report.skipped):
        try:
            text = _read_source(source, real_root)
        except (OSError, ValueError) as exc:
            why = str(exc) if isinstance(exc, ValueError) else f"unreadable: {type(exc).__name__}"
            report.skipped.append((str(source.path), why))
            continue
        try:
            read_frontmatter_strict(text)
        except ProfileFormatError as exc:
            report.skipped.append(
                (
                    str(source.path),
                    f"{exc}: the user id is never taken from the folder name then; "
                    "fix or remove the frontmatter",
                )
            )
            continue
        problem = profile_text_problem(text)
        if problem is not None:
            report.skipped.append((str(source.path), f"{problem}: importing it would empty or cut the profile"))
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
    wanted = user_ids if user_ids is not None else list_profile_user_ids(conn, root_folder=root_folder)
    folders: dict[str, list[tuple[str, str]]] = {}
    for user_id in dict.fromkeys(wanted):
        try:
            name = f"home-{folder_name_for(user_id)}"
        except DbMemoryError as exc:
            report.skipped.append((user_id, exc.message))
            continue
        folders.setdefault(name.casefold(), []).append((user_id, name))
    dest.mkdir(parents=True, exist_ok=True)
    real_dest = dest.resolve()
    for group in folders.values():
        if len(group) > 1:
            names = ", ".join(sorted({name for _, name in group}))
            ids = ", ".join(repr(u) for u, _ in group)
            for user_id, _ in group:
                report.skipped.append(
                    (
                        user_id,
                        f"users {ids} would share one folder ({names}: names that differ only in "
                        "letter case are one folder on case-insensitive file systems); nothing was "
                        "written for them: export each with --user into a folder of its own",
                    )
                )
            continue
        user_id, name = group[0]
        record = read_profile(conn, user_id, root_folder=root_folder)
        if record is None:
            report.skipped.append((user_id, "no profile"))
            continue
        target = dest / name / root_folder / FILE_NAME
        refusal = _target_refusal(target, real_dest, user_id)
        if refusal is not None:
            report.skipped.append((user_id, refusal))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if _target_refusal(target, real_dest, user_id) is not None:  # a link made meanwhile
            report.skipped.append((user_id, "a symbolic link leads out of the destination: not followed"))
            continue
        target.write_text(record.text, encoding="utf-8", newline="\n")
        report.done.append(str(target))
    return report


def _target_refusal(target: Path, real_dest: Path, user_id: str) -> str | None:
    """Why ``target`` must not be written for ``user_id``, or None."""
    probe = target
    while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
        probe = probe.parent
    try:
        real = probe.resolve(strict=False)
    except (OSError, RuntimeError):
        return "the target folder cannot be resolved"
    if real != real_dest and real_dest not in real.parents:
        return "a symbolic link leads out of the destination: not followed"
    if target.is_symlink() or (target.exists() and not target.is_file()):
        return f"{target} exists and is not a plain file: nothing was written"
    if target.is_file():
        try:
            existing = read_frontmatter_strict(target.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ProfileFormatError):
            existing = None
        owner = existing.get("user_id") if existing else None
        if owner != user_id:
            shown = repr(owner) if owner else "an unknown user"
            return (
                f"{target} already holds the profile of {shown}: two users are never written "
                "to one folder; export into an empty folder"
            )
    return None
