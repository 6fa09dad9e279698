"""``dbmemory expire``: delete files untouched (neither written nor read) for N days.

The rule is :func:`dbmemory.store.expiry.expire_files`' (the scheduled jobs in ``sql/`` use the same
one): a file expires when it is not exempt (user profiles are) and it was neither written nor
read for ``--days`` days (plus the one-hour touch interval). ``--days`` is checked by
:func:`dbmemory.store.expiry.validate_days` before anything connects: at least 1/24 (one hour),
else exit code 2 with the smallest value allowed. Deletion commits in batches of 1,000 files,
so a large clean-up never holds one giant transaction. Suitable for cron: exit code 0 and the
count. Without ``--store`` the same run expires memory items by retention class and purges
deleted items past their grace period (:func:`dbmemory.items.run_item_retention_committing`),
then deletes the conversation episodes past their retention
(:func:`dbmemory.items.episodes.expire_episodes`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from dbmemory.cli._common import (
    EXIT_CODES_HELP,
    JsonOption,
    StoreIdOption,
    StoreKeyOption,
    UrlOption,
    plural,
    print_json,
)
from dbmemory.cli._database import engine_session
from dbmemory.cli.files import require_store
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.episodes import expire_episodes
from dbmemory.items.retention import run_item_retention_committing
from dbmemory.store.expiry import count_expirable_files, expire_files_committing, validate_days

__all__ = ["register", "expire"]


def register(app: typer.Typer) -> None:
    """Add the ``expire`` command to ``app``."""
    app.command("expire", no_args_is_help=True, epilog=EXIT_CODES_HELP)(expire)


def expire(
    days: Annotated[
        float,
        typer.Option(
            "--days",
            help=(
                "Expire files neither written nor read for this many days "
                "(fractions allowed; at least 0.0416667, one hour)."
            ),
            metavar="N",
            show_default=False,
        ),
    ],
    store: StoreKeyOption = None,
    store_id: StoreIdOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only count the files that would expire.")
    ] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete files untouched for --days days, in every store or one; print the count.

    Commits every batch of 1,000 files. With --dry-run nothing is deleted: the same rule only
    counts. Without --store it also expires memory items by their retention class and purges
    deleted items past their organisation's grace period. Exit code 0 whatever the count, so
    it suits cron; a --store that names no store is an error (exit code 1), so a typo in a crontab does not go unnoticed.

    Example:

        dbmemory expire --days 90
        dbmemory expire --days 30 --store agent:SUPPORT --dry-run
        0 3 * * *  dbmemory expire --days 90 --json >> /var/log/dbmemory.log
    """
    validate_days(days)
    if store is not None and store_id is not None:
        raise InvalidArgumentError("give --store KEY or --store-id N, not both")
    with engine_session(url, "expiring files", read_only=dry_run) as engine:
        target = None
        with engine.begin() as conn:
            if store is not None or store_id is not None:
                target = require_store(conn, store, store_id)
            scope_id = None if target is None else target.store_id
            if dry_run:
                count = count_expirable_files(conn, days=days, store_id=scope_id)
        items = None
        episodes = None
        if not dry_run:
            count = expire_files_committing(engine, days=days, store_id=scope_id)
            if target is None:  # memory items: expiry by class, then the grace-period purge
                items = run_item_retention_committing(engine)
                with engine.begin() as conn:  # conversation episodes past their retention
                    episodes = expire_episodes(conn)
    where = "every store" if target is None else target.store_key
    if as_json:
        print_json(
            {
                "days": int(days) if float(days).is_integer() else days,
                "store_key": None if target is None else target.store_key,
                "dry_run": dry_run,
                "expired": count,
                "items_expired": None if items is None else items["expired"],
                "items_purged": None if items is None else items["purged"],
                "episodes_expired": episodes,
            }
        )
    elif dry_run:
        typer.echo(
            f"{plural(count, 'file')} would expire in {where} (untouched for {days:g} days); nothing deleted"
        )
    else:
        typer.echo(f"Expired {plural(count, 'file')} in {where} (untouched for {days:g} days)")
        if items is not None:
            typer.echo(
                f"Expired {plural(items['expired'], 'memory item')} (by retention class) and purged "
                f"{plural(items['purged'], 'deleted item')} past their grace period"
            )
        if episodes:
            typer.echo(f"Deleted {plural(episodes, 'conversation episode')} past episode_retention_days")
