"""``dbmemory items``: add, list, edit, delete, restore, clear and purge a user's memory items.

Items are short facts about a user (``manual``: written by the user or an admin; ``auto``:
extracted by the model), kept per organisation (``--org``, default ``default``) in the table
``dbm_items``, out of every agent's reach (:mod:`dbmemory.items`). Each command runs in a
transaction of its own and commits it; every change writes an audit event with the actor
``cli``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Annotated

import typer

from dbmemory.cli._common import EXIT_CODES_HELP, JsonOption, UrlOption, print_json
from dbmemory.cli._database import transaction
from dbmemory.cli._output import print_table
from dbmemory.core.clock import utcnow
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.model import Item
from dbmemory.items.settings import get_org_settings
from dbmemory.items.store import (
    add_item,
    clear_items,
    delete_item,
    edit_item,
    list_items,
    purge_items,
    restore_item,
)

__all__ = ["items_app", "register", "ACTOR"]

ACTOR = "cli"
"""The actor recorded in audit events for writes made with the CLI."""

items_app = typer.Typer(
    help=(
        "Add, list, edit, delete, restore, clear and purge a user's memory items (short facts "
        "such as 'User prefers tea'; kinds manual and auto; retention classes standard, "
        "temporary, permanent, auto). A delete is soft: the item stops being used at once and "
        "is purged after the organisation's grace period; until then 'items restore' brings it "
        "back. Each command runs in a transaction of its own and commits it. " + EXIT_CODES_HELP
    ),
    epilog='Example:\n\n    dbmemory items add u-123 "User prefers tea"\n    dbmemory items list u-123',
    no_args_is_help=True,
)

UserArgument = Annotated[
    str,
    typer.Argument(
        help="The user's id as the host knows it, e.g. u-123 or ann@example.com.",
        metavar="USER",
        show_default=False,
    ),
]
ItemIdArgument = Annotated[
    int, typer.Argument(help="The item's id (see 'items list').", metavar="ID", min=1, show_default=False)
]
OrgOption = Annotated[
    str,
    typer.Option("--org", help="Organisation id (letters, digits, '_', '.', '-').", metavar="ORG"),
]


def register(app: typer.Typer) -> None:
    """Add the ``items`` command group to ``app``."""
    app.add_typer(items_app, name="items", short_help="Manage a user's memory items.")


def _age(created: dt.datetime) -> str:
    seconds = max(0, int((dt.datetime.now(dt.timezone.utc) - created).total_seconds()))
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _show(item: object, verb: str) -> None:
    typer.echo(f"{verb} item {item.item_id} of {item.user_id} ({item.kind}, {item.retention_class})")  # type: ignore[attr-defined]


@items_app.command("add")
def add(
    user: UserArgument,
    text: Annotated[str, typer.Argument(help="The fact, at most 1,000 characters.", metavar="TEXT", show_default=False)],
    retention_class: Annotated[
        str,
        typer.Option("--class", help="Retention class: standard, temporary or permanent.", metavar="C"),
    ] = "standard",
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a manual memory item for a user and print its id.

    Example:

        dbmemory items add u-123 "User prefers camelCase in code reviews"
        dbmemory items add u-123 "On leave until May" --class temporary --org acme
    """
    with transaction(url, "adding a memory item") as conn:
        item = add_item(conn, user, text, org_id=org, retention_class=retention_class, actor=ACTOR)
    if as_json:
        print_json(item.to_dict())
    else:
        _show(item, "Added")


def _state(item: Item, now: dt.datetime) -> str:
    if item.deleted_at is not None:
        return "deleted"
    if item.expires_at is not None and item.expires_at <= now:
        return "expired"
    return "live"


def _why_none(url: str | None, user: str, org: str, deleted: bool) -> str:
    """Why ``items list`` found nothing: the expired and deleted items it did not show."""
    if deleted:
        return ""
    now = utcnow()
    with transaction(url, "listing memory items") as conn:
        hidden = list_items(conn, user, org_id=org, include_deleted=True, now=now)
        settings = get_org_settings(conn, org)
    if not hidden:
        return ""
    classes = Counter(i.retention_class for i in hidden if _state(i, now) == "expired")
    expired = sum(classes.values())
    removed = len(hidden) - expired
    parts = []
    if expired:
        rules = ", ".join(
            f"{name} items expire {settings.retention_days(name)} days after their last change or use "
            f"(retention_{name}_days)"
            for name in sorted(classes)
        )
        replayed = (
            "; a replayed conversation's items carry its own, older dates"
            if user.startswith("replay.") else ""
        )
        parts.append(
            f"{expired} expired by their retention class: {rules}{replayed}; an expired item "
            "stays expired"
        )
    if removed:
        parts.append(
            f"{removed} deleted: 'items restore {user} ID' brings one back until the "
            f"grace period ({settings.grace_days} days) ends"
        )
    return " (" + "; ".join(parts) + "; --deleted lists them)"


@items_app.command("list")
def list_(
    user: UserArgument,
    deleted: Annotated[
        bool, typer.Option("--deleted", help="Also list deleted (restorable) and expired items.")
    ] = False,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a user's memory items: id, kind (with an AUTO badge), class, age, expiry, text.

    Example:

        dbmemory items list u-123
        dbmemory items list u-123 --deleted --json
    """
    now = utcnow()
    with transaction(url, "listing memory items") as conn:
        found = list_items(conn, user, org_id=org, include_deleted=deleted, now=now)
    if as_json:
        print_json([i.to_dict() for i in found])
        return
    if not found:
        typer.echo(f"No memory items for {user} in organisation {org}{_why_none(url, user, org, deleted)}")
        return
    rows = [
        [
            i.item_id,
            "AUTO" if i.is_auto else "manual",
            i.retention_class,
            _age(i.created_at),
            i.expires_at.date().isoformat() if i.expires_at else "never",
            _state(i, now),
            i.text,
        ]
        for i in found
    ]
    print_table(
        ["id", "kind", "class", "age", "expires", "state", "text"],
        rows,
        title=f"{len(found)} items of {user} ({org})",
        right=["id"],
    )


@items_app.command("edit")
def edit(
    user: UserArgument,
    item_id: ItemIdArgument,
    text: Annotated[str, typer.Argument(help="The new text.", metavar="TEXT", show_default=False)],
    retention_class: Annotated[
        str | None, typer.Option("--class", help="Also change the retention class.", metavar="C")
    ] = None,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replace the text of a live memory item (its kind stays).

    Example:

        dbmemory items edit u-123 7 "User prefers snake_case in code reviews"
    """
    with transaction(url, "editing a memory item") as conn:
        item = edit_item(conn, user, item_id, text, org_id=org, retention_class=retention_class, actor=ACTOR)
    if as_json:
        print_json(item.to_dict())
    else:
        _show(item, "Edited")


@items_app.command("rm")
def rm(
    user: UserArgument,
    item_id: ItemIdArgument,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a memory item (soft: restorable until the grace period ends).

    Example:

        dbmemory items rm u-123 7
    """
    with transaction(url, "deleting a memory item") as conn:
        item = delete_item(conn, user, item_id, org_id=org, actor=ACTOR)
    if as_json:
        print_json(item.to_dict())
    else:
        typer.echo(f"Deleted item {item.item_id} (restorable until purged: dbmemory items restore {user} {item.item_id})")


@items_app.command("restore")
def restore(
    user: UserArgument,
    item_id: ItemIdArgument,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Restore a deleted or expired memory item that is not purged yet.

    Example:

        dbmemory items restore u-123 7
    """
    with transaction(url, "restoring a memory item") as conn:
        item = restore_item(conn, user, item_id, org_id=org, actor=ACTOR)
    if as_json:
        print_json(item.to_dict())
    else:
        _show(item, "Restored")


@items_app.command("clear")
def clear(
    user: UserArgument,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: delete every item of the user.")] = False,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete every memory item of a user (soft; needs --yes).

    Example:

        dbmemory items clear u-123 --yes
    """
    if not yes:
        raise InvalidArgumentError(
            f"'items clear' deletes every memory item of {user}: add --yes to confirm"
        )
    with transaction(url, "clearing memory items") as conn:
        count = clear_items(conn, user, org_id=org, actor=ACTOR)
    if as_json:
        print_json({"user_id": user, "org_id": org, "deleted": count})
    else:
        typer.echo(f"Deleted {count} items of {user} (restorable until purged)")


@items_app.command("purge")
def purge(
    user: Annotated[
        str | None, typer.Option("--user", help="Only this user's deleted items.", metavar="USER")
    ] = None,
    now_too: Annotated[
        bool,
        typer.Option("--now", help="Also purge items still in their grace period (for good)."),
    ] = False,
    org: Annotated[
        str | None, typer.Option("--org", help="Only this organisation (default: every one).", metavar="ORG")
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete for good the deleted items whose grace period is over (or all, with --now).

    'dbmemory expire' does the same every run; this is for an administrator who wants it now.

    Example:

        dbmemory items purge
        dbmemory items purge --user u-123 --now
    """
    with transaction(url, "purging memory items") as conn:
        count = purge_items(conn, org_id=org, user_id=user, include_grace=now_too, actor=ACTOR)
    if as_json:
        print_json({"purged": count, "user_id": user, "org_id": org, "include_grace": now_too})
    else:
        typer.echo(f"Purged {count} deleted items")
