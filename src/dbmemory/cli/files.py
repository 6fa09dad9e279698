"""``dbmemory files``: list, read, write and delete the files of one store (admin access).

A store is addressed by its key (``--store agent:SUPPORT``) or its id (``--store-id 7``);
``dbmemory files ls`` without either lists the stores. Thin wrappers over the admin functions
of :mod:`dbmemory.store.files`, each in a transaction of its own that commits. Writes are recorded in
the audit table with the actor ``cli``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import sqlalchemy as sa
import typer

from dbmemory.cli._common import (
    EXIT_CODES_HELP,
    JsonOption,
    StoreIdOption,
    StoreKeyOption,
    UrlOption,
    plural,
    print_json,
    to_jsonable,
)
from dbmemory.cli._database import transaction
from dbmemory.cli._output import print_table
from dbmemory.core.keys import parse_store_key as parse
from dbmemory.core.model import StoreRef
from dbmemory.db import schema
from dbmemory.errors import DbMemoryError, InvalidArgumentError, InvalidPathError, NotFoundError
from dbmemory.items.org import ORG_MEMORY_PATH, set_org_memory
from dbmemory.store.files import put_file
from dbmemory.store.moves import clear_store_files, delete_file, delete_path
from dbmemory.store.reads import get_file, list_files

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from dbmemory.core.model import StoreRef

__all__ = [
    "files_app",
    "register",
    "ls",
    "cat",
    "put",
    "rm",
    "clear",
    "StoreRow",
    "lookup_store",
    "parse_store_key",
    "ACTOR",
    "require_store",
    "store_for_write",
]

ACTOR = "cli"
"""The actor recorded in audit events for writes made with the CLI."""

files_app = typer.Typer(
    help=(
        "List, read, write and delete the files of one store (admin access), addressed by "
        "--store KEY or --store-id N. Each command runs in a transaction of its own and "
        "commits it. Works on any store, including the package's own reserved:... stores "
        "(admins may inspect them); user profiles are managed with 'dbmemory profile'. "
        + EXIT_CODES_HELP
    ),
    epilog=(
        "Example:\n\n    dbmemory files put /memories/notes.md --store agent:SUPPORT --text 'hello'"
        "\n\n    dbmemory files ls --store agent:SUPPORT"
    ),
    no_args_is_help=True,
)

PathArgument = Annotated[
    str,
    typer.Argument(help="File path under /memories, e.g. /memories/notes.md.", show_default=False),
]


def register(app: typer.Typer) -> None:
    """Add the ``files`` command group to ``app``."""
    app.add_typer(
        files_app, name="files", short_help="List, read, write and delete the files of a store."
    )


# -- stores -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreRow:
    """A store as the CLI shows it (one row of ``dbm_stores``)."""

    store_id: int
    store_key: str
    scope: str
    agent_code: str | None
    store_code: str | None


def lookup_store(conn: Connection, store_key: str | None, store_id: int | None) -> StoreRow | None:
    """Find the store named by ``--store`` or ``--store-id``.

    Args:
        conn: a connection in the command's transaction.
        store_key: the ``--store`` value, or None.
        store_id: the ``--store-id`` value, or None.

    Returns:
        The :class:`StoreRow`, or None when no store has that key (it was never written).

    Raises:
        InvalidArgumentError: neither or both options were given.
        InvalidScopeError: ``store_key`` is not a valid key (e.g. a trailing space).
        NotFoundError: no store has that id.
    """
    if (store_key is None) == (store_id is None):
        raise InvalidArgumentError(
            "give exactly one of --store KEY (e.g. --store agent:SUPPORT) or --store-id N"
        )
    if store_key is not None:
        parse_store_key(store_key)  # exact, before any SQL (MariaDB compares with PAD SPACE)
    stores = schema.stores
    columns = (
        stores.c.store_id,
        stores.c.store_key,
        stores.c.scope_name,
        stores.c.agent_code,
        stores.c.store_code,
    )
    where = (
        stores.c.store_key == store_key if store_key is not None else stores.c.store_id == store_id
    )
    row = conn.execute(sa.select(*columns).where(where)).first()
    if row is None:
        if store_id is not None:
            raise NotFoundError(
                f"no store has the id {store_id}: list the stores with 'dbmemory files ls'"
            )
        return None
    return StoreRow(*row)


def require_store(conn: Connection, store_key: str | None, store_id: int | None) -> StoreRow:
    """Like :func:`lookup_store`, but a store key that names no store is a NotFoundError."""
    row = lookup_store(conn, store_key, store_id)
    if row is None:
        raise NotFoundError(
            f"no store has the key {store_key!r} (a store exists after its first write): "
            "list the stores with 'dbmemory files ls'"
        )
    return row


def parse_store_key(store_key: str) -> tuple[str, str | None, str | None]:
    """Split a store key into ``(scope, agent_code, store_code)`` and validate it exactly.

    Args:
        store_key: e.g. ``"agent:SUPPORT"``, ``"user:SUPPORT:u42"``, ``"shared:POLICIES"``,
            ``"global"``, ``"session:s-1"``, ``"context:DOCS:document_id:7"`` (keyed by agent
            DOCS), ``"context:store:DOCS:document_id:7"`` (keyed by store code DOCS),
            ``"reserved:profile:user-memory:u-7"`` (a profile store).

    Returns:
        ``(scope, agent_code, store_code)``.

    Raises:
        InvalidScopeError: not a key :func:`dbmemory.core.keys.parse_store_key` accepts (a trailing
            space, a wrong part count, an invalid component).
    """
    parts = parse(store_key)
    return parts.scope, parts.agent_code, parts.store_code


def store_for_write(
    conn: Connection, store_key: str | None, store_id: int | None
) -> tuple[int | StoreRef, str]:
    """What ``put`` writes to: an existing store id, or a :class:`StoreRef` created on write.

    Returns:
        ``(store, display key)``. The caps are the store row's own (:mod:`dbmemory.store.caps`); a
        store created by the write gets the strictest caps of the enabled agent
        configurations that name it, else the defaults.
    """
    row = lookup_store(conn, store_key, store_id)
    if row is not None:
        return row.store_id, row.store_key
    assert store_key is not None
    scope, agent_code, store_code = parse_store_key(store_key)
    ref = StoreRef(store_key=store_key, scope=scope, agent_code=agent_code, store_code=store_code)
    return ref, store_key


def _list_stores(conn: Connection) -> list[dict[str, Any]]:
    files, stores = schema.files, schema.stores
    stmt = (
        sa.select(
            stores.c.store_id,
            stores.c.store_key,
            stores.c.scope_name,
            sa.func.count(files.c.file_id),
            sa.func.coalesce(sa.func.sum(files.c.char_count), 0),
        )
        .select_from(stores.outerjoin(files, files.c.store_id == stores.c.store_id))
        .group_by(stores.c.store_id, stores.c.store_key, stores.c.scope_name)
        .order_by(stores.c.store_key)
    )
    return [
        {"store_id": r[0], "store_key": r[1], "scope": r[2], "files": int(r[3]), "chars": int(r[4])}
        for r in conn.execute(stmt)
    ]


def _file_dict(info: Any) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(info)
    data.pop("file_id", None)
    return data


# -- commands ---------------------------------------------------------------------------------


@files_app.command("ls")
def ls(
    store: StoreKeyOption = None,
    store_id: StoreIdOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the files of a store (path, characters, version, times), or every store.

    Without --store or --store-id, lists the stores with their file counts and sizes. Reads
    only; listing does not count as a read for expiry.

    Example:

        dbmemory files ls
        dbmemory files ls --store agent:SUPPORT
        dbmemory files ls --store-id 3 --json
    """

    with transaction(url, "listing files", read_only=True) as conn:
        if store is None and store_id is None:
            rows = _list_stores(conn)
            if as_json:
                print_json(rows)
            elif not rows:
                typer.echo("No stores yet: a store is created by its first write")
            else:
                print_table(
                    ["id", "store key", "scope", "files", "chars"],
                    [
                        [r["store_id"], r["store_key"], r["scope"], r["files"], r["chars"]]
                        for r in rows
                    ],
                    right=["id", "files", "chars"],
                )
            return
        found = require_store(conn, store, store_id)
        infos = list_files(conn, found.store_id)
    if as_json:
        print_json([_file_dict(i) for i in infos])
    elif not infos:
        typer.echo(f"Store {found.store_key} (id {found.store_id}) has no files")
    else:
        print_table(
            ["path", "chars", "version", "updated (UTC)", "last accessed (UTC)"],
            [[i.path, i.chars, i.version, i.updated_at, i.last_accessed_at] for i in infos],
            title=f"{found.store_key} (id {found.store_id})",
            right=["chars", "version"],
        )


@files_app.command("cat")
def cat(
    path: PathArgument,
    store: StoreKeyOption = None,
    store_id: StoreIdOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a file's text exactly as stored (no line numbers, no added newline).

    Reads only; an admin read does not count as a touch for expiry.

    Example:

        dbmemory files cat /memories/notes.md --store agent:SUPPORT
    """

    with transaction(url, "reading a file", read_only=True) as conn:
        found = require_store(conn, store, store_id)
        record = get_file(conn, found.store_id, path)
    if as_json:
        data = _file_dict(record)
        data["store_key"] = found.store_key
        print_json(data)
    else:
        typer.echo(record.text, nl=False)


def _read_text(text: str | None, from_file: Path | None) -> str:
    """The text to write: ``--text``, ``--from-file`` (UTF-8, bytes kept) or stdin."""
    if text is not None and from_file is not None:
        raise InvalidArgumentError("give --text or --from-file, not both")
    if text is not None:
        return text
    if from_file is not None:
        raw = from_file.read_bytes()
        where = f"the file {from_file}"
    else:
        stdin = typer.get_binary_stream("stdin")
        if stdin.isatty():
            raise InvalidArgumentError(
                "no text given: pass --text TEXT, --from-file FILE, or pipe the text on stdin"
            )
        raw = stdin.read()
        where = "standard input"
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            f"{where} is not UTF-8 text (bad byte at offset {exc.start}): convert it to UTF-8"
        ) from None


@files_app.command("put")
def put(
    path: PathArgument,
    store: StoreKeyOption = None,
    store_id: StoreIdOption = None,
    text: Annotated[
        str | None,
        typer.Option("--text", help="The file's text.", metavar="TEXT", show_default=False),
    ] = None,
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from-file",
            help="Read the text from this UTF-8 file (line endings kept).",
            metavar="FILE",
            exists=True,
            dir_okay=False,
            readable=True,
            show_default=False,
        ),
    ] = None,
    no_caps: Annotated[
        bool,
        typer.Option(
            "--no-caps",
            help="Admin bypass: skip the store's caps (characters per file, files, store size).",
        ),
    ] = False,
    admin: Annotated[
        bool,
        typer.Option(
            "--admin",
            help="Write the organisation memory (store reserved:org:ORG, "
            f"{ORG_MEMORY_PATH}) as its administrator, by its own rules (budget, audit).",
        ),
    ] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create or replace a file with the text from --text, --from-file or stdin.

    Reserved stores (profiles, memory items, organisation memory) are refused: their owners'
    commands keep their rules. With --admin, the organisation memory file of a reserved:org
    store is written through 'dbmemory org-memory edit' rules (token budget, audit event
    org_memory_set).

    The store is created when a --store key names one never written. The store's own caps
    apply (set by the agent configurations that name it, else the defaults) unless --no-caps
    is given. Runs in a transaction of its own and commits it.

    Example:

        dbmemory files put /memories/notes.md --store agent:SUPPORT --text 'Email'
        dbmemory files put /memories/policy.md --store shared:POLICIES < policy.md
    """
    body = _read_text(text, from_file)
    with transaction(url, "writing a file") as conn:
        target, store_key = store_for_write(conn, store, store_id)
        if admin:
            record = _put_org_memory(conn, store_key, path, body)
        else:
            record = put_file(conn, target, path, body, enforce_caps=not no_caps, actor=ACTOR)
    if as_json:
        data = _file_dict(record)
        data.pop("text", None)
        data["store_key"] = store_key
        print_json(data)
    else:
        typer.echo(
            f"Wrote {record.path} in {store_key} (id {record.store_id}): "
            f"{record.chars:,} {'character' if record.chars == 1 else 'characters'}, version {record.version}"
        )


def _put_org_memory(conn: Connection, store_key: str, path: str, body: str) -> Any:
    """``files put --admin``: :func:`dbmemory.items.org.set_org_memory` on ``reserved:org:ORG``."""
    parts = parse(store_key)
    if parts.kind != "org" or path != ORG_MEMORY_PATH:
        raise InvalidArgumentError(
            f"--admin writes only the organisation memory ({ORG_MEMORY_PATH} in a reserved:org:ORG "
            f"store), not {path} in {store_key}: drop --admin",
            code="not_org_memory",
        )
    if body == "":
        raise InvalidArgumentError(
            "an empty text would clear the organisation memory: use 'dbmemory org-memory edit "
            "--admin' with an empty file to clear it",
            code="empty_text",
        )
    set_org_memory(conn, parts.components[1], body, is_admin=True, actor=ACTOR)
    row = lookup_store(conn, store_key, None)
    assert row is not None  # written just now
    return get_file(conn, row.store_id, ORG_MEMORY_PATH)


@files_app.command("rm")
def rm(
    path: PathArgument,
    store: StoreKeyOption = None,
    store_id: StoreIdOption = None,
    recursive: Annotated[
        bool,
        typer.Option("--recursive", "-r", help="Also delete a directory with everything under it."),
    ] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a file (or, with -r, a directory and everything under it).

    A missing file is an error (exit code 1). Runs in a transaction of its own and commits it.

    Example:

        dbmemory files rm /memories/notes.md --store agent:SUPPORT
        dbmemory files rm /memories/old --store agent:SUPPORT -r
    """

    with transaction(url, "deleting a file") as conn:
        found = require_store(conn, store, store_id)
        if recursive:
            deleted = delete_path(conn, found.store_id, path, actor=ACTOR)
        elif _delete_one_file(conn, found, path):
            deleted = 1
        else:
            raise NotFoundError(
                f"no file {path} in store {found.store_key}: check 'dbmemory files ls' "
                "(use -r for a directory)"
            )
    if as_json:
        print_json({"store_key": found.store_key, "path": path, "deleted": deleted})
    else:
        typer.echo(f"Deleted {plural(deleted, 'file')} at {path} from {found.store_key}")


def _delete_one_file(conn: Any, found: Any, path: str) -> bool:
    """:func:`dbmemory.store.moves.delete_file`; a directory is an error of exit code 1 naming ``-r``."""
    try:
        return delete_file(conn, found.store_id, path, actor=ACTOR)
    except InvalidPathError as exc:
        if exc.code != "is_directory":
            raise
        raise DbMemoryError(
            f"{path} is a directory in store {found.store_key}: use -r to delete it with "
            "everything under it",
            code="is_directory",
        ) from None


@files_app.command("clear")
def clear(
    store: StoreKeyOption = None,
    store_id: StoreIdOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete every file of a store (the store itself stays).

    Asks for confirmation unless --yes is given. Runs in a transaction of its own and
    commits it.

    Example:

        dbmemory files clear --store agent:SUPPORT --yes
    """

    if not yes:  # ask before the transaction: SQLite holds its write lock from BEGIN
        named = store if store is not None else f"id {store_id}"
        typer.confirm(f"Delete every file of store {named}?", abort=True)
    with transaction(url, "clearing a store") as conn:
        found = require_store(conn, store, store_id)
        deleted = clear_store_files(conn, found.store_id, actor=ACTOR)
    if as_json:
        print_json({"store_key": found.store_key, "deleted": deleted})
    else:
        typer.echo(f"Deleted {plural(deleted, 'file')} from {found.store_key}")
