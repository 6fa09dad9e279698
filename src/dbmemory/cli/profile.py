"""``dbmemory profile``: show, edit, delete, import, export and consolidate user profiles.

A profile is the file ``/memories/memory.md`` in the store
``reserved:profile:<root folder>:<id>``, in the reserved namespace no agent can name. Each command runs in a transaction of its own and commits it; writes are audited with
the actor ``cli``. Only ``consolidate`` calls a model (through litellm, imported when it runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import click
import typer

from dbmemory.agent.setup import choose_model
from dbmemory.cli._common import EXIT_CODES_HELP, JsonOption, UrlOption, plural, print_json
from dbmemory.cli._database import engine_session, transaction
from dbmemory.cli.replay import ModelOption
from dbmemory.errors import InvalidArgumentError, NotFoundError
from dbmemory.profile.config import UserMemoryConfig
from dbmemory.profile.consolidate import UserMemoryPostprocessor
from dbmemory.profile.format import new_profile, parse_profile, profile_text_problem, render_profile
from dbmemory.profile.load import load_user_memory
from dbmemory.profile.store import delete_profile, profile_store_key, read_profile, write_profile
from dbmemory.profile.tokens import count_tokens
from dbmemory.profile.transfer import export_profiles, import_profiles

__all__ = ["profile_app", "register", "show", "edit", "delete", "import_", "export", "consolidate"]

ACTOR = "cli"
"""The actor recorded in audit events for writes made with the CLI."""

profile_app = typer.Typer(
    help=(
        "Show, edit, delete, import, export and consolidate user profiles (one memory.md per "
        "user, store reserved:profile:<root folder>:<id>, which no agent can reach). Each command runs in a transaction "
        "of its own and commits it. " + EXIT_CODES_HELP
    ),
    epilog="Example:\n\n    dbmemory profile show u-123\n\n    dbmemory profile export ./profiles",
    no_args_is_help=True,
)

UserIdArgument = Annotated[
    str,
    typer.Argument(
        help="The user's id as the host knows it, e.g. u-123 or ann@example.com.",
        metavar="USER_ID",
        show_default=False,
    ),
]
RootFolderOption = Annotated[
    str,
    typer.Option(
        "--root-folder",
        help="Profile namespace (UserMemoryConfig.root_folder).",
        metavar="NAME",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the ``profile`` command group to ``app``."""
    app.add_typer(profile_app, name="profile", short_help="Show, edit and consolidate user profiles.")


def _read_text(text: str | None, from_file: Path | None) -> str | None:
    """The new text from ``--text``, ``--from-file`` or piped stdin; None when none given."""
    if text is not None and from_file is not None:
        raise InvalidArgumentError("give --text or --from-file, not both")
    if text is not None:
        return text
    if from_file is not None:
        raw = from_file.read_bytes()
    else:
        stdin = typer.get_binary_stream("stdin")
        if stdin.isatty():
            return None
        raw = stdin.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            f"the new profile is not UTF-8 text (bad byte at offset {exc.start}): convert it"
        ) from None


def _edit_in_editor(current: str) -> str | None:
    """``current`` edited in the user's editor (``$VISUAL``, ``$EDITOR``, else click's guess);
    None when the editor was closed without saving.

    Raises:
        InvalidArgumentError: no editor could be run (none set, or it failed).
    """
    try:
        edited = click.edit(current, extension=".md")
    except click.ClickException as exc:
        raise InvalidArgumentError(
            f"could not run an editor ({exc.format_message()}): set $EDITOR, or give the new "
            "profile with --text, --from-file or on stdin"
        ) from None
    return edited if edited is None or isinstance(edited, str) else bytes(edited).decode("utf-8")


@profile_app.command("show")
def show(
    user_id: UserIdArgument,
    root_folder: RootFolderOption = "user-memory",
    model: Annotated[
        str | None,
        typer.Option("--model", help="Count tokens with this model's tokenizer (JSON output).", metavar="M"),
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a user's profile exactly as stored.

    Exits 1 when the user has no profile yet. With --json: store key, version, sizes and text.

    Example:

        dbmemory profile show u-123
        dbmemory profile show ann@example.com --json --model gpt-4o-mini
    """
    with transaction(url, "reading a profile", read_only=True) as conn:
        record = read_profile(conn, user_id, root_folder=root_folder)
    if record is None:
        raise NotFoundError(f"user {user_id!r} has no profile yet: it is created by the first update")
    if as_json:
        print_json(
            {
                "user_id": user_id,
                "store_key": profile_store_key(user_id, root_folder),
                "version": record.version,
                "chars": record.chars,
                "tokens": count_tokens(record.text, model),
                "updated_at": record.updated_at,
                "text": record.text,
            }
        )
    else:
        typer.echo(record.text, nl=False)


@profile_app.command("edit")
def edit(
    user_id: UserIdArgument,
    text: Annotated[
        str | None,
        typer.Option("--text", help="The new profile (body, or a whole file).", metavar="TEXT", show_default=False),
    ] = None,
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from-file", help="Read the new profile from this UTF-8 file.", metavar="FILE",
            exists=True, dir_okay=False, readable=True, show_default=False,
        ),
    ] = None,
    root_folder: RootFolderOption = "user-memory",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replace a user's profile (from --text, --from-file, stdin, or $EDITOR on a terminal).

    The text is read leniently and written in canonical form: the six sections in order, the
    frontmatter written by dbmemory (user id and turn count kept). The write is a
    compare-and-set on the version read first, so a concurrent update is never overwritten.

    Example:

        dbmemory profile edit u-123
        dbmemory profile edit u-123 --from-file memory.md
    """
    with transaction(url, "reading a profile") as conn:
        record = read_profile(conn, user_id, root_folder=root_folder)
    current = record.text if record is not None else render_profile(new_profile(user_id))
    new_text = _read_text(text, from_file)
    if new_text is None:
        new_text = _edit_in_editor(current)
        if new_text is None:
            typer.echo("No change: the editor was closed without saving")
            return
    _check_edited_text(new_text)
    old = parse_profile(current, default_user_id=user_id)
    edited = parse_profile(new_text, default_user_id=user_id)
    edited.user_id, edited.schema_version = old.user_id, old.schema_version
    edited.last_updated, edited.turn_count, edited.extra = old.last_updated, old.turn_count, old.extra
    canonical = render_profile(edited)
    if record is not None and canonical == record.text:
        if as_json:
            print_json({"user_id": user_id, "version": record.version, "chars": record.chars, "changed": False})
        else:
            typer.echo(f"No change: the profile of {user_id} already has this text (version {record.version})")
        return
    with transaction(url, "writing a profile") as conn:
        written = write_profile(
            conn, user_id, canonical,
            expected_version=record.version if record is not None else 0,
            root_folder=root_folder, actor=ACTOR,
            expected_text=record.text if record is not None else None,
        )
    if as_json:
        print_json({"user_id": user_id, "version": written.version, "chars": written.chars})
    else:
        typer.echo(f"Profile of {user_id} saved (version {written.version}, {written.chars} characters)")


def _check_edited_text(text: str) -> None:
    """Refuse an edited text that would silently lose content: no profile section at all, or
    text before the first section (only frontmatter and the ``# User Memory`` title may be);
    the rule is :func:`dbmemory.profile.format.profile_text_problem`, shared with import."""
    problem = profile_text_problem(text)
    if problem is None:
        return
    if "none of the profile sections" in problem:
        raise InvalidArgumentError(
            f"{problem}: nothing was saved; start from 'dbmemory profile show' and edit that"
        )
    raise InvalidArgumentError(f"{problem}: move it into a section (nothing was saved)")


@profile_app.command("delete")
def delete(
    user_id: UserIdArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    root_folder: RootFolderOption = "user-memory",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a user's profile permanently (the audit event remains).

    Exits 1 when the user has no profile. To also stop future updates, the host calls
    ``set_user_memory_enabled(conn, user_id, False)``.

    Example:

        dbmemory profile delete u-123 --yes
    """
    if not yes and not typer.confirm(f"Delete the profile of {user_id} permanently?", default=False):
        typer.echo("Kept the profile")
        return
    with transaction(url, "deleting a profile") as conn:
        deleted = delete_profile(conn, user_id, root_folder=root_folder, actor=ACTOR)
    if not deleted:
        raise NotFoundError(f"user {user_id!r} has no profile: nothing to delete")
    if as_json:
        print_json({"user_id": user_id, "deleted": True})
    else:
        typer.echo(f"Deleted the profile of {user_id}")


@profile_app.command("import")
def import_(
    directory: Annotated[
        Path,
        typer.Argument(help="Folder with home-<user>/<root folder>/memory.md or <root folder>/<user>/memory.md.",
                       exists=True, file_okay=False, metavar="DIR", show_default=False),
    ],
    overwrite: Annotated[
        bool, typer.Option("--overwrite/--keep-existing", help="Replace profiles that exist.")
    ] = True,
    root_folder: RootFolderOption = "user-memory",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import profiles from a folder tree (canonical layout wins over legacy for one user).

    Layouts: home-<user_id>/<root folder>/memory.md (canonical) and <root folder>/<user_id>/memory.md
    (legacy). Refused files are listed with the reason and nothing of them is written: a
    frontmatter that names another user, a broken frontmatter (the user id is then never taken
    from the folder name), a text without the profile sections (it would replace a profile
    with an empty one; 'profile edit' refuses it the same way), and anything reached through
    a symbolic link that leads out of DIR.

    Example:

        dbmemory profile import ./exported-profiles
    """
    with transaction(url, "importing profiles") as conn:
        report = import_profiles(conn, directory, root_folder=root_folder, overwrite=overwrite, actor=ACTOR)
    _report(report, "Imported", as_json)


@profile_app.command("export")
def export(
    directory: Annotated[Path, typer.Argument(help="Target folder (created if missing).", file_okay=False, metavar="DIR", show_default=False)],
    user: Annotated[
        list[str] | None,
        typer.Option("--user", help="Only this user (repeat for more).", metavar="USER_ID", show_default=False),
    ] = None,
    root_folder: RootFolderOption = "user-memory",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export profiles to home-<user_id>/<root folder>/memory.md files (text as stored).

    Users whose folders would be one folder (names that differ only in letter case, the same
    on case-insensitive file systems) are refused with a message, as is a folder that already
    holds another user's profile: two users are never written to one folder.

    Example:

        dbmemory profile export ./profiles
        dbmemory profile export ./profiles --user u-123 --user u-456
    """
    with transaction(url, "exporting profiles", read_only=True) as conn:
        report = export_profiles(conn, directory, root_folder=root_folder, user_ids=user or None)
    _report(report, "Exported", as_json)


def _report(report: Any, verb: str, as_json: bool) -> None:
    if as_json:
        print_json({"done": report.done, "skipped": [{"item": i, "reason": r} for i, r in report.skipped]})
        return
    typer.echo(f"{verb} {plural(len(report.done), 'profile')}")
    for item, reason in report.skipped:
        typer.echo(f"skipped {item}: {reason}")


@profile_app.command("consolidate")
def consolidate(
    user_id: UserIdArgument,
    user_text: Annotated[str, typer.Option("--user-text", help="The user's message of the turn.", show_default=False)],
    assistant_text: Annotated[
        str, typer.Option("--assistant-text", help="The assistant's answer of the turn.", show_default=False)
    ],
    model: ModelOption = None,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=500, max=8000, help="Profile budget in tokens.")
    ] = 2000,
    gate: Annotated[bool, typer.Option("--gate/--no-gate", help="Ask UPDATE or NOOP first.")] = True,
    root_folder: RootFolderOption = "user-memory",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run one post-turn consolidation by hand (gate, rewrite, scrub, checks, fit, write).

    Calls the model through litellm (configure its key as usual, e.g. OPENAI_API_KEY; it is
    checked before any work) or, with --model scripted or no model, the scripted stand-in. Prints
    the outcome (updated, noop, unchanged, rejected, scrub_veto, conflict, disabled, error)
    and each model call; exits 1 on error or conflict, and when a model call failed (no key,
    no network, timeout): the old profile is kept then.

    Example:

        dbmemory profile consolidate u-123 --model gpt-4o-mini \\
            --user-text 'I moved to the BI team' --assistant-text 'Congrats!'

        dbmemory profile consolidate u-123 --model scripted \\
            --user-text 'My name is Ann' --assistant-text 'Hi Ann'
    """
    choice = choose_model(model)  # a missing key or an unknown name fails here, at once
    if choice.notice:
        typer.echo(choice.notice, err=True)
    config = UserMemoryConfig(max_tokens=max_tokens, root_folder=root_folder, gate_enabled=gate)
    with engine_session(url, "consolidating a profile") as engine:
        with engine.begin() as conn:
            state = load_user_memory(conn, user_id, config=config, model=choice.model)
        result = UserMemoryPostprocessor(
            engine, config, choice.model, user_id, state, actor=ACTOR, complete=choice.complete
        ).run(user_text, assistant_text)
    if as_json:
        print_json(
            {
                "outcome": result.outcome,
                "reason": result.reason,
                "version": result.version,
                "condensed": result.condensed,
                "truncated": result.truncated,
                "redactions": result.redactions,
                "calls": result.calls,
            }
        )
    else:
        detail = f" ({result.reason})" if result.reason else ""
        typer.echo(f"{result.outcome}{detail}; version {result.version}")
        for call in result.calls:
            status = f"error {call.error}" if call.error else (call.finish_reason or "ok")
            typer.echo(
                f"  {call.purpose}: {call.prompt_tokens}+{call.completion_tokens} tokens, "
                f"{call.seconds:.2f}s, {status}"
            )
    if result.outcome in ("error", "conflict") or result.reason == "model_error":
        raise typer.Exit(1)
