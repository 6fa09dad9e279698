"""``dbmemory files import`` and ``dbmemory files export``: a tree of text files in and out of a
store (an Anthropic SDK memory directory included). The rules are those of
:mod:`dbmemory.store.trees`; these commands add the transaction, a progress bar (on stderr,
hidden with ``--json``), a line per skipped file and a summary.

Commands join the ``files`` group (:mod:`dbmemory.cli.files`); this module is listed in
:data:`dbmemory.cli.COMMANDS` after it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from dbmemory.cli._common import (
    JsonOption,
    StoreIdOption,
    StoreKeyOption,
    UrlOption,
    print_json,
    to_jsonable,
)
from dbmemory.cli._database import engine_session, transaction
from dbmemory.cli.files import ACTOR, files_app, require_store, store_for_write
from dbmemory.errors import InvalidArgumentError
from dbmemory.store.reads import list_files
from dbmemory.store.trees import export_tree, import_tree

__all__ = ["register", "import_files", "export_files"]

DirArgument = Annotated[
    Path,
    typer.Argument(help="The local directory.", metavar="DIR", show_default=False, file_okay=False),
]


def register(app: typer.Typer) -> None:
    """Nothing to add to ``app``: the commands join the ``files`` group at import."""


@contextmanager
def _progress(total: int, what: str, hidden: bool) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr; yields the function that advances it by one file."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=hidden,
    ) as bar:
        task = bar.add_task(what, total=total)
        yield lambda _name: bar.advance(task)


def _count_files(directory: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(directory)) if directory.is_dir() else 0


def _skipped_lines(skipped: list[Any]) -> None:
    for item in skipped:
        typer.echo(f"skipped {item.source}: {item.reason}")


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


@files_app.command("import")
def import_files(
    directory: DirArgument,
    store: StoreKeyOption = None,
    store_id: StoreIdOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and report everything, then roll back: nothing is written.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace store files that exist with another text.")
    ] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import a tree of text files into a store: DIR/x.md becomes /memories/x.md.

    When DIR holds a directory named memories (the base directory of the Anthropic SDK's
    BetaLocalFilesystemMemoryTool), DIR/memories/x.md becomes /memories/x.md. Symbolic
    links, non-UTF-8 files, paths that break dbmemory's rules and files over the store's caps
    are reported (one line each) and skipped; the rest is written in ONE transaction, committed
    at the end (an interrupted import writes nothing). Exit code 1 when a file was skipped.

    Example:

        dbmemory files import ./memory --store user:SUPPORT:u42 --dry-run
        dbmemory files import ./notes --store agent:SUPPORT --json
    """
    if directory.is_symlink() or not directory.is_dir():
        raise InvalidArgumentError(f"{directory} is not a directory: give the directory to import")
    total = _count_files(directory)
    with engine_session(url, "importing files") as engine, engine.connect() as conn:
        conn.begin()
        target, store_key = store_for_write(conn, store, store_id)
        with _progress(total, "importing", as_json) as advance:
            report = import_tree(conn, target, directory, replace=force, actor=ACTOR, on_file=advance)
        if dry_run:
            conn.rollback()
        else:
            conn.commit()
    data = to_jsonable(report) | {"store_key": store_key, "dry_run": dry_run}
    if as_json:
        print_json(data)
    else:
        _skipped_lines(report.skipped)
        verb = "Would import" if dry_run else "Imported"
        typer.echo(
            f"{verb} {_plural(len(report.created) + len(report.replaced), 'file')} into {store_key} from "
            f"{report.root} ({len(report.created):,} new, {len(report.replaced):,} replaced, "
            f"{len(report.unchanged):,} unchanged); {len(report.skipped):,} skipped"
            + ("; dry run: nothing written" if dry_run else "")
        )
    if report.skipped:
        raise typer.Exit(1)


@files_app.command("export")
def export_files(
    directory: DirArgument,
    store: StoreKeyOption = None,
    store_id: StoreIdOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace local files that differ (else such an export writes nothing).")
    ] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export every file of a store to DIR/memories/ (the Anthropic SDK tool's layout).

    /memories/x.md is written to DIR/memories/x.md (DIR is created if missing), each file
    atomically (a temporary file, then a rename), never outside DIR/memories and never through
    a symbolic link. A local file with another text is only replaced with --force; without
    it, such an export writes nothing. Reads only: an export does not count as a read for
    expiry.

    Example:

        dbmemory files export ./backup --store agent:SUPPORT
        dbmemory files export ./backup --store-id 3 --force --json
    """
    with transaction(url, "exporting files") as conn:
        found = require_store(conn, store, store_id)
        total = len(list_files(conn, found.store_id))
        with _progress(total, "exporting", as_json) as advance:
            report = export_tree(conn, found.store_id, directory, force=force, on_file=advance)
    if as_json:
        print_json(to_jsonable(report) | {"store_key": found.store_key})
    else:
        _skipped_lines(report.skipped)
        typer.echo(
            f"Exported {_plural(len(report.written), 'file')} of {found.store_key} to {report.root} "
            f"({len(report.unchanged):,} unchanged); {len(report.skipped):,} skipped"
        )
    if report.skipped:
        raise typer.Exit(1)
