"""Moving a tree of text files into a store and out of it (``dbmemory files import/export``).

**Where files land.** A local file ``DIR/<rel>`` becomes the store file ``/memories/<rel>``
(``DIR/notes.md`` -> ``/memories/notes.md``). When ``DIR`` holds a directory named
``memories``, ``DIR`` is taken as the base directory of the Anthropic SDK's file-system memory
tool (``BetaLocalFilesystemMemoryTool(base_path=DIR)`` keeps its files in ``DIR/memories/``):
``DIR/memories/<rel>`` becomes ``/memories/<rel>``, and anything beside ``DIR/memories`` is
reported and skipped. Pointing at the SDK's ``.../memories`` directory itself works by the
first rule. :func:`export_tree` writes ``/memories/<rel>`` to ``DIR/memories/<rel>``, the SDK's
layout, so an export can be imported again, or used by the SDK's tool with ``base_path=DIR``.

**Import rules** (:func:`import_tree`): every file is checked before anything is written, and a
file that breaks a rule is reported with its reason and skipped, the others imported:

* symbolic links (to files or directories) are not followed, and other non-regular files
  (FIFOs, sockets, devices) are refused;
* a file must be UTF-8 text (bytes kept exactly: line endings, BOM) without NUL, and at most
  :data:`MAX_IMPORT_BYTES` bytes (larger files are refused unread);
* its path must pass dbmemory's path rules (:func:`dbmemory.core.paths.normalize_path`); two local
  files that map onto one store path (``café.md`` spelled NFC and NFD) are both refused;
* the store's caps apply, as to any writer: files are written in path order, and a file that
  would exceed ``max_file_chars``, ``max_files`` or ``max_store_chars`` is skipped;
* a file that exists in the store with another text is skipped unless ``replace=True`` (the
  same text: reported as unchanged, not written); a path whose parent is a file in the store
  (or that is a directory there) is skipped.

**Transactions**: everything runs in the caller's transaction (each file in a savepoint, so a
skipped file leaves the others and the transaction usable); nothing commits here. The CLI runs
one transaction for the whole import and commits it at the end (``--dry-run`` rolls it back):
an interrupted import writes nothing. Every write is audited (actor given by the caller).

**Export rules** (:func:`export_tree`): files are written only inside ``DIR/memories`` (a path
component that is a symbolic link is refused), each file through a temporary file and a rename
(never half-written), mode ``0o600`` and directories ``0o700`` as the SDK's tool does; an
existing local file is only replaced with ``force=True``: without it, an export that would
replace any file writes nothing. Exports are admin reads: they do not count as touches for
expiry.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.model import StoreRef
from dbmemory.core.paths import ROOT, normalize_path
from dbmemory.errors import (
    AlreadyExistsError,
    CapExceededError,
    DbMemoryError,
    InvalidArgumentError,
    InvalidPathError,
    NotFoundError,
)
from dbmemory.store import files as _files
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file, list_files

__all__ = [
    "MAX_IMPORT_BYTES",
    "LocalFile",
    "Skipped",
    "ImportReport",
    "ExportReport",
    "scan_tree",
    "import_tree",
    "export_tree",
]

MAX_IMPORT_BYTES = 64 * 1024 * 1024
"""Largest local file read by an import, in bytes (64 MiB); larger ones are refused unread."""

_FILE_MODE = 0o600
_DIR_MODE = 0o700


@dataclass(frozen=True)
class LocalFile:
    """A local file that passed the local checks: its source, store path and text."""

    source: str
    path: str
    text: str


@dataclass(frozen=True)
class Skipped:
    """A local or store file left out, with the reason (one line)."""

    source: str
    reason: str
    path: str | None = None


@dataclass
class ImportReport:
    """What :func:`import_tree` did (store paths) and what it skipped (source paths)."""

    root: str
    created: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


@dataclass
class ExportReport:
    """What :func:`export_tree` wrote (local paths) and what it skipped."""

    root: str
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _root_of(directory: Path) -> Path:
    sdk = directory / "memories"
    if sdk.is_dir() and not sdk.is_symlink():
        return sdk
    return directory


def _read_text(full: Path, info: os.stat_result) -> str:
    if info.st_size > MAX_IMPORT_BYTES:
        raise InvalidArgumentError(f"{info.st_size:,} bytes, over the import limit of {MAX_IMPORT_BYTES:,} bytes")
    raw = full.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"not UTF-8 text (bad byte at offset {exc.start}): convert it to UTF-8") from None
    return _files.validate_text(text)


def scan_tree(directory: Path | str) -> tuple[list[LocalFile], list[Skipped], str]:
    """Read a local tree (no database): the files an import would write and those refused.

    Returns:
        ``(files sorted by store path, refused entries, the directory taken as /memories)``.

    Raises:
        InvalidArgumentError: ``directory`` is not a directory (or is a symbolic link).
    """
    directory = Path(directory)
    if directory.is_symlink() or not directory.is_dir():
        raise InvalidArgumentError(f"{directory} is not a directory: give the directory to import")
    root = _root_of(directory)
    found: list[LocalFile] = []
    refused: list[Skipped] = []
    if root != directory:
        for entry in sorted(os.listdir(directory)):
            if entry != "memories":
                refused.append(Skipped(str(directory / entry), "outside the memories directory: not imported"))
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                refused.append(Skipped(str(here / name), "a symbolic link to a directory: not followed"))
        dirnames[:] = sorted(d for d in dirnames if not (here / d).is_symlink())
        for name in sorted(filenames):
            full = here / name
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                refused.append(Skipped(str(full), "a symbolic link: not followed"))
                continue
            if not stat.S_ISREG(info.st_mode):
                refused.append(Skipped(str(full), "not a regular file"))
                continue
            relative = full.relative_to(root).as_posix()
            try:
                path = normalize_path(f"{ROOT}/{relative}")
                text = _read_text(full, info)
            except InvalidArgumentError as exc:  # InvalidPathError included
                refused.append(Skipped(str(full), exc.message))
                continue
            found.append(LocalFile(str(full), path, text))
    by_path: dict[str, list[LocalFile]] = {}
    for item in found:
        by_path.setdefault(item.path, []).append(item)
    unique = []
    for path, items in sorted(by_path.items()):
        if len(items) == 1:
            unique.append(items[0])
            continue
        names = ", ".join(i.source for i in items)
        refused.extend(Skipped(i.source, f"{len(items)} local files map onto {path} ({names})", path) for i in items)
    return unique, refused, str(root)


def import_tree(
    conn: Connection,
    store: int | StoreRef,
    directory: Path | str,
    *,
    replace: bool = False,
    actor: str = "admin",
    on_file: Callable[[str], None] | None = None,
) -> ImportReport:
    """Import a local tree of text files into a store, in the caller's transaction.

    Args:
        conn: the caller's connection; nothing commits here.
        store: a store id, or a :class:`StoreRef` (created by the first write).
        directory: the local directory (see the module's rules for where files land).
        replace: replace a store file that has another text (else it is skipped).
        actor: who writes, for the audit events.
        on_file: called with each local file's path once it is handled (a progress bar).

    Returns:
        :class:`ImportReport`.

    Raises:
        InvalidArgumentError: ``directory`` is not a directory; bad arguments.
        ConflictError / StorageError: the database gave up; the caller should roll back.
    """
    check_arguments(conn=conn, store=store, actor=actor)
    _v.check_bool(replace, "replace")
    local, refused, root = scan_tree(directory)
    report = ImportReport(root=root, skipped=list(refused))
    store_id = _existing_id(conn, store)
    target: int | StoreRef = store
    for item in local:
        try:
            current = None
            if store_id is not None:
                try:
                    current = get_file(conn, store_id, item.path).text
                except NotFoundError:
                    current = None
            if current == item.text:
                report.unchanged.append(item.path)
            elif current is not None and not replace:
                report.skipped.append(
                    Skipped(item.source, f"{item.path} exists in the store with another text: not replaced (--force, replace=True)", item.path)
                )
            elif current is not None:
                _files.put_file(conn, target, item.path, item.text, actor=actor)
                report.replaced.append(item.path)
            else:
                record = _files.create_file(conn, target, item.path, item.text, actor=actor)
                report.created.append(item.path)
                if store_id is None:
                    store_id = target = record.store_id
        except (CapExceededError, InvalidPathError, AlreadyExistsError) as exc:
            report.skipped.append(Skipped(item.source, exc.message, item.path))
        if on_file is not None:
            on_file(item.source)
    return report


def _existing_id(conn: Connection, store: int | StoreRef) -> int | None:
    if isinstance(store, StoreRef):
        return store.store_id or find_store_id(conn, store.store_key)
    return store


def _inside(root: Path, target: Path) -> None:
    """Refuse a target outside ``root`` or reached through a symbolic link."""
    relative = target.relative_to(root)  # raises ValueError outside
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise InvalidArgumentError(f"{current} is a symbolic link: an export never writes through one")
    if ".." in relative.parts:
        raise InvalidArgumentError(f"{target} is outside {root}")


def _write_atomically(target: Path, text: str) -> None:
    missing = []
    parent = target.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        directory.mkdir(mode=_DIR_MODE)
        os.chmod(directory, _DIR_MODE)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".dbmemory-export-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, _FILE_MODE)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def export_tree(
    conn: Connection,
    store_id: int,
    directory: Path | str,
    *,
    force: bool = False,
    on_file: Callable[[str], None] | None = None,
) -> ExportReport:
    """Write every file of a store under ``directory/memories`` (the SDK's layout).

    Args:
        conn: a connection (reads only; no touch).
        store_id: the store.
        directory: created if missing; files go to ``directory/memories/<rel>``.
        force: replace local files that differ (without it, such an export writes nothing).
        on_file: called with each store path once it is read (a progress bar).

    Returns:
        :class:`ExportReport` (a local file already holding the text is ``unchanged``).

    Raises:
        InvalidArgumentError: ``directory`` (or its ``memories``) is a symbolic link or not a
            directory.
        DbMemoryError: (code ``would_overwrite``) a local file would be replaced and ``force``
            is false; nothing was written.

    A store id that names no store exports nothing.
    """
    check_arguments(conn=conn, store_id=store_id)
    _v.check_bool(force, "force")
    base = Path(directory)
    root = base / "memories"
    for place in (base, root):
        if place.is_symlink() or (place.exists() and not place.is_dir()):
            raise InvalidArgumentError(f"{place} is not a directory (or is a symbolic link): choose another directory")
    infos = list_files(conn, store_id)
    report = ExportReport(root=str(root))
    plan: list[tuple[Path, str, str]] = []
    clashes: list[str] = []
    for info in infos:
        text = get_file(conn, store_id, info.path).text
        if on_file is not None:
            on_file(info.path)
        target = root / info.path[len(ROOT) + 1 :]
        try:
            _inside(root, target)
        except (InvalidArgumentError, ValueError) as exc:
            report.skipped.append(Skipped(info.path, str(exc), info.path))
            continue
        if target.is_dir():
            report.skipped.append(Skipped(info.path, f"{target} is a local directory: not replaced", info.path))
        elif target.exists() and target.read_bytes() == text.encode("utf-8"):
            report.unchanged.append(str(target))
        else:
            if target.exists():
                clashes.append(str(target))
            plan.append((target, text, info.path))
    if clashes and not force:
        shown = ", ".join(clashes[:3]) + (f" and {len(clashes) - 3} more" if len(clashes) > 3 else "")
        raise DbMemoryError(
            f"{len(clashes)} local file(s) would be replaced ({shown}): nothing written; pass --force "
            "(force=True) to replace them, or export to an empty directory",
            code="would_overwrite",
        )
    for target, text, path in plan:
        try:
            _write_atomically(target, text)
            report.written.append(str(target))
        except OSError as exc:
            report.skipped.append(Skipped(path, f"cannot write {target}: {exc.strerror or exc}", path))
    return report
