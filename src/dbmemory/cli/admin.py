"""``dbmemory settings``, ``dbmemory org-memory``, ``dbmemory audit`` and ``dbmemory users``:
organisation settings, organisation memory, the audit trail and per-user administration
(data-subject export, forget). See :mod:`dbmemory.items`.

Each command runs in a transaction of its own and commits it; changes are audited with the
actor ``cli`` (``org-memory edit`` with ``--actor``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Annotated

import typer

from dbmemory.cli._common import (
    EXIT_CODES_HELP,
    JsonOption,
    UrlOption,
    plural,
    print_json,
    to_jsonable,
)
from dbmemory.cli._database import engine_session, transaction
from dbmemory.cli._output import print_table
from dbmemory.db.dialect.base import is_mysql
from dbmemory.errors import DbMemoryError, InvalidArgumentError, StorageError
from dbmemory.items.admin import export_user, forget_user
from dbmemory.items.audit import audit_events
from dbmemory.items.episodes import SEARCH_PURGE_STATEMENT, purge_search_index_committing
from dbmemory.items.model import check_org
from dbmemory.items.org import read_org_memory, set_org_memory
from dbmemory.items.settings import (
    DEFAULTS,
    NotAdminError,
    get_memory_switch,
    get_org_settings,
    set_memory_switch,
    set_org_setting,
)
from dbmemory.profile.optout import is_user_memory_enabled, set_user_memory_enabled

__all__ = ["register", "settings_app", "org_memory_app", "users_app", "audit"]

ACTOR = "cli"

OrgOption = Annotated[
    str,
    typer.Option("--org", help="Organisation id (letters, digits, '_', '.', '-').", metavar="ORG"),
]
AdminOption = Annotated[
    bool,
    typer.Option(
        "--admin",
        help="Required: states that you are an administrator of the organisation (the "
        "host's is_admin decision; the CLI has no users of its own).",
    ),
]
UserArgument = Annotated[
    str,
    typer.Argument(help="The user's id as the host knows it, e.g. u-123.", metavar="USER", show_default=False),
]

settings_app = typer.Typer(
    help="Show or change an organisation's memory settings (thresholds, retention days, "
    "grace period, budgets). Every change is audited. " + EXIT_CODES_HELP,
    epilog="Example: dbmemory settings set retention_temporary_days 14 --org acme --admin",
    no_args_is_help=True,
)
org_memory_app = typer.Typer(
    help="Show or replace the organisation memory, injected into every conversation of every "
    "user of the organisation before their own memory. Agents cannot read or write it. "
    + EXIT_CODES_HELP,
    epilog="Example: dbmemory org-memory edit --admin --from-file org.md --org acme",
    no_args_is_help=True,
)
users_app = typer.Typer(
    help="Per-user administration: the memory switch (pause memory, keep it), the opt-out "
    "(delete the profile, stop memory), and export everything held about a user as JSON (a "
    "data-subject access request), or forget the user. " + EXIT_CODES_HELP,
    epilog="Example:\n\n    dbmemory users export u-123 > u-123.json\n    dbmemory users forget u-123 --yes",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add ``settings``, ``org-memory``, ``audit`` and ``users`` to ``app``."""
    app.add_typer(settings_app, name="settings", short_help="Show or change organisation settings.")
    app.add_typer(org_memory_app, name="org-memory", short_help="Show or replace the organisation memory.")
    app.command("audit", epilog=EXIT_CODES_HELP)(audit)
    app.add_typer(users_app, name="users", short_help="Export or forget one user (DSAR); the memory switch and the opt-out.")


@settings_app.command("show")
def settings_show(org: OrgOption = "default", url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Print every setting of an organisation (defaults filled in).

    Example:

        dbmemory settings show --org acme --json
    """
    with transaction(url, "reading organisation settings") as conn:
        settings = get_org_settings(conn, org)
    if as_json:
        print_json(settings.to_dict())
        return
    values = settings.to_dict()
    rows = [[name, values[name], "" if values[name] == DEFAULTS[name] else "changed"] for name in DEFAULTS]
    print_table(["setting", "value", ""], rows, title=f"Settings of organisation {org}")


@settings_app.command("set")
def settings_set(
    name: Annotated[str, typer.Argument(help="Setting name (see 'settings show').", metavar="NAME", show_default=False)],
    value: Annotated[str, typer.Argument(help="New value.", metavar="VALUE", show_default=False)],
    org: OrgOption = "default",
    admin: AdminOption = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change one setting of an organisation (administrators only: --admin; audited).

    Changing retention_standard_days, retention_temporary_days or retention_auto_days moves the
    expiry of the organisation's live items of that class (last change + new days).

    Example:

        dbmemory settings set confidence_threshold 0.9 --admin
        dbmemory settings set grace_days 7 --org acme --admin
    """
    if not admin:  # the library's message names is_admin=True, a Python remedy
        raise NotAdminError(
            f"only an administrator of organisation {check_org(org)!r} can change its settings: "
            "pass --admin to state that you are one (the CLI has no users of its own)"
        )
    with transaction(url, "changing an organisation setting") as conn:
        settings = set_org_setting(conn, org, name, value, is_admin=True, actor=ACTOR)
    if as_json:
        print_json(settings.to_dict())
    else:
        typer.echo(f"{name} = {getattr(settings, name)} for organisation {org}")


@org_memory_app.command("show")
def org_memory_show(org: OrgOption = "default", url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Print the organisation memory (nothing when there is none).

    Example:

        dbmemory org-memory show --org acme
    """
    with transaction(url, "reading the organisation memory") as conn:
        memory = read_org_memory(conn, org)
    if as_json:
        print_json(memory.to_dict())
    elif memory.text:
        typer.echo(memory.text, nl=not memory.text.endswith("\n"))
    else:
        typer.echo(f"Organisation {org} has no organisation memory", err=True)


@org_memory_app.command("edit")
def org_memory_edit(
    admin: AdminOption = False,
    from_file: Annotated[
        Path | None,
        typer.Option("--from-file", help="Read the new text from this UTF-8 file (else stdin).", metavar="PATH"),
    ] = None,
    actor: Annotated[str, typer.Option("--actor", help="Recorded in the audit events.", metavar="NAME")] = ACTOR,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replace the organisation memory with a file's text or stdin (an empty text deletes it).

    Refused without --admin, and when the text is over the organisation's
    org_memory_token_budget (the message gives both counts).

    Example:

        dbmemory org-memory edit --admin --from-file org.md
        echo "ACME sells anvils." | dbmemory org-memory edit --admin --org acme
    """
    if not admin:  # the library's message names is_admin=True, a Python remedy
        raise NotAdminError(
            f"only an administrator of organisation {check_org(org)!r} can change its organisation "
            "memory: pass --admin to state that you are one (the CLI has no users of its own)"
        )
    if from_file is not None:
        raw = from_file.read_bytes()
    else:
        stdin = typer.get_binary_stream("stdin")
        if stdin.isatty():
            raise InvalidArgumentError("give the new text with --from-file PATH or on stdin")
        raw = stdin.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"the text is not UTF-8 (bad byte at offset {exc.start}): convert it") from None
    with transaction(url, "writing the organisation memory") as conn:
        memory = set_org_memory(conn, org, text, is_admin=admin, actor=actor)
    if as_json:
        print_json({k: v for k, v in memory.to_dict().items() if k != "text"})
    else:
        typer.echo(
            f"Organisation memory of {org}: {len(memory.text):,} characters, {memory.tokens:,} tokens, "
            f"version {memory.version}"
        )


def _when(text: str | None, name: str) -> dt.datetime | None:
    if text is None:
        return None
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(f"{name} {text!r} is not a date: use YYYY-MM-DD or an ISO 8601 time") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def audit(
    user: Annotated[str | None, typer.Option("--user", help="Only events about this user.", metavar="U")] = None,
    action: Annotated[
        str | None, typer.Option("--action", help="Only this action, e.g. item_delete.", metavar="A")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="From this date or time (UTC), e.g. 2026-11-01.", metavar="DATE")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Before this date or time (UTC).", metavar="DATE")] = None,
    org: Annotated[str | None, typer.Option("--org", help="Only this organisation.", metavar="ORG")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many events.", min=1, max=100_000)] = 100,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print audit events, newest first (never any memory text: sizes only).

    The same rows are in the view dbm_audit_report_v for reports.

    Example:

        dbmemory audit --user u-123 --since 2026-11-01
        dbmemory audit --action item_delete --json
    """
    with transaction(url, "reading audit events") as conn:
        events = audit_events(
            conn, org_id=org, user_id=user, action=action, since=_when(since, "--since"),
            until=_when(until, "--until"), limit=limit,
        )
    if as_json:
        print_json([e.to_dict() for e in events])
        return
    rows = [
        [e.created_at, e.action, e.actor, e.org_id, e.user_id, e.item_id or e.file_path, e.chars_before, e.chars_after, e.detail]
        for e in events
    ]
    print_table(
        ["time (UTC)", "action", "actor", "org", "user", "item/file", "before", "after", "detail"],
        rows,
        title=plural(len(events), "audit event"),
        right=["before", "after"],
    )


@users_app.command("export")
def users_export(
    user: UserArgument,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the JSON to this file (else stdout).", metavar="PATH")
    ] = None,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export everything held about a user as JSON: profile, items, episodes, user, context,
    session and LangGraph stores, switches, marks, audit events (a data-subject access request;
    keys in docs/items.md). The export itself is audited.
    The export is always JSON; with --json, errors and the --output summary are JSON too. A
    file given with --output is created readable by its owner only (mode 0600).

    Example:

        dbmemory users export u-123 --output u-123.json
    """
    with transaction(url, "exporting a user") as conn:
        data = export_user(conn, user, org_id=org, actor=ACTOR)
    text = json.dumps(to_jsonable(data), indent=2, ensure_ascii=False, default=str)
    if output is None:
        typer.echo(text)
        return
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    items = len(data["items"])
    stores = len(data["profile"]) + len(data["stores"])
    if as_json:
        print_json({"output": str(output), "items": items, "stores": stores})
    else:
        typer.echo(f"Wrote {output} ({plural(items, 'item')}, {plural(stores, 'store')})")


@users_app.command("forget")
def users_forget(
    user: UserArgument,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: delete everything held about the user.")] = False,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Forget a user: delete the profile, items, episodes, user, context, session and LangGraph
    stores, switches and marks (needs --yes). Audit events stay, without any memory text; the
    file names of the user's file events are cleared (counted as redacted). --json prints
    {"user_id", "org_id", "items", "stores", "switches", "episodes", "events_redacted",
    "search_index_purged"}.

    On MySQL/MariaDB, when episodes were deleted, 'OPTIMIZE TABLE dbm_episodes' runs after the
    forget commits, so their words leave the FULLTEXT index too (InnoDB keeps them until the
    table is optimised); if it fails, the forget stays committed, the exit code is 1 and the
    message says what to run ('dbmemory db optimize-search').

    Example:

        dbmemory users forget u-123 --yes
    """
    if not yes:
        raise InvalidArgumentError(f"'users forget' deletes everything held about {user}: add --yes to confirm")
    purged: str | None = None
    with engine_session(url, "forgetting a user") as engine:
        with engine.begin() as conn:
            counts = forget_user(conn, user, org_id=org, actor=ACTOR)
        if counts["episodes"] and is_mysql(engine):
            try:
                purged = purge_search_index_committing(engine)
            except DbMemoryError as exc:
                raise StorageError(
                    f"{user} was forgotten (committed), but the words of the {counts['episodes']} "
                    f"deleted episodes stay in the FULLTEXT index: {exc.message}; run "
                    f"'dbmemory db optimize-search' (or '{SEARCH_PURGE_STATEMENT}')",
                    code="search_index_not_purged",
                ) from exc
    if as_json:
        print_json({"user_id": user, "org_id": org, **counts, "search_index_purged": purged is not None})
    else:
        deleted = ", ".join(
            plural(counts[name], noun, nouns)
            for name, noun, nouns in (
                ("items", "item", None), ("stores", "store", None), ("switches", "switch", "switches"),
                ("episodes", "episode", None),
            )
        )
        typer.echo(
            f"Forgot {user}: {deleted} deleted; {plural(counts['events_redacted'], 'audit event')} "
            "redacted (file names cleared)"
            + (f"; the full-text index purged ({purged})" if purged else "")
        )


@users_app.command("memory")
def users_memory(
    user: UserArgument,
    state: Annotated[
        str | None,
        typer.Argument(help="on or off; without it, print the user's switch and opt-out.", metavar="[on|off]"),
    ] = None,
    org: OrgOption = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show or set a user's memory switch. Off: nothing is extracted or injected for the user,
    and their profile, items and stores are kept (on resumes). Audited (no content).

    Example:

        dbmemory users memory u-123 off
        dbmemory users memory u-123
    """
    if state is not None and state not in ("on", "off"):
        raise InvalidArgumentError(f"the memory switch is 'on' or 'off', got {state!r}")
    if state is None:
        with transaction(url, "reading the memory switch") as conn:
            on = get_memory_switch(conn, user, org_id=org)
            enabled = is_user_memory_enabled(conn, user)
    else:
        with transaction(url, "setting the memory switch") as conn:
            set_memory_switch(conn, user, state == "on", org_id=org, actor=ACTOR)
            on, enabled = state == "on", is_user_memory_enabled(conn, user)
    if as_json:
        print_json({"user_id": user, "org_id": org, "memory_switch": on, "opted_out": not enabled})
        return
    typer.echo(f"Memory switch of {user} ({org}): {'on' if on else 'off'}; " + ("opted out" if not enabled else "not opted out"))


@users_app.command("opt-out")
def users_opt_out(
    user: UserArgument,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: the user's profile is deleted for good.")] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Opt a user out of memory: their profile is deleted for good and memory is neither loaded
    nor updated for them, in every agent (needs --yes). Audited (no content). 'users opt-in'
    undoes the switch, not the delete.

    Example:

        dbmemory users opt-out u-123 --yes
    """
    if not yes:
        raise InvalidArgumentError(f"'users opt-out' deletes the profile of {user} for good: add --yes to confirm")
    with transaction(url, "opting a user out") as conn:
        deleted = set_user_memory_enabled(conn, user, False, actor=ACTOR)
    if as_json:
        print_json({"user_id": user, "opted_out": True, "profile_deleted": deleted})
    else:
        typer.echo(f"Opted {user} out" + ("; the profile was deleted" if deleted else "; there was no profile"))


@users_app.command("opt-in")
def users_opt_in(user: UserArgument, url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Opt a user back in after an opt-out: a new profile starts empty. Audited (no content).

    Example:

        dbmemory users opt-in u-123
    """
    with transaction(url, "opting a user in") as conn:
        set_user_memory_enabled(conn, user, True, actor=ACTOR)
    if as_json:
        print_json({"user_id": user, "opted_out": False})
    else:
        typer.echo(f"Opted {user} in: a new profile starts empty")
