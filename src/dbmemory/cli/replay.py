"""``dbmemory replay``: replay a recorded conversation through the whole memory pipeline.

The main job of the package: with no argument it replays the short sample conversation that
ships with dbmemory on the embedded SQLite database, then prints the final profile, the memory items with their counts, the memory
files and a summary. With no model configured it uses the scripted stand-in and says so on the
first line.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dbmemory.agent.replay import replay_conversation, replay_user_id, reset_replay_memory
from dbmemory.agent.setup import choose_model, ensure_agent, ensure_schema
from dbmemory.agent.transcripts import read_conversation
from dbmemory.cli._common import EXIT_CODES_HELP, JsonOption, UrlOption, plural, print_json
from dbmemory.cli._database import engine_session
from dbmemory.cli._output import console, print_table
from dbmemory.db.engine import redact_url
from dbmemory.errors import PROFILE_MODULES, DbMemoryError, InvalidArgumentError, require_extra
from dbmemory.profile.config import UserMemoryConfig
from dbmemory.profile.store import profile_store_key
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import list_files
from dbmemory.store.resolve import check_run_ready

if TYPE_CHECKING:
    from dbmemory.agent.replay import ReplaySummary

__all__ = ["register", "replay", "sample_path", "ModelOption"]

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar="DBMEMORY_MODEL",
        show_envvar=True,
        metavar="MODEL",
        help=(
            "litellm model name, e.g. gpt-4o-mini, anthropic/claude-3-5-haiku-latest, "
            "ollama/llama3.1. Unset: the scripted stand-in (a fixed demonstration policy, not a "
            "memory model)."
        ),
        show_default=False,
    ),
]
"""``--model MODEL`` (env ``DBMEMORY_MODEL``); None selects the scripted stand-in."""


def register(app: typer.Typer) -> None:
    """Add the ``replay`` command to ``app``."""
    app.command("replay", epilog=EXIT_CODES_HELP)(replay)


def sample_path() -> Path:
    """Path of the sample conversation shipped with the package (JSONL)."""
    return Path(str(files("dbmemory") / "data" / "sample_conversation.jsonl"))


def replay(
    input_path: Annotated[
        Path | None,
        typer.Argument(
            metavar="INPUT",
            help=(
                "A LoCoMo JSON file or a JSONL file of {session, time, role, text} lines. "
                "Default: the sample conversation shipped with dbmemory."
            ),
            show_default=False,
        ),
    ] = None,
    model: ModelOption = None,
    sample: Annotated[
        str | None,
        typer.Option("--sample", metavar="ID", help="LoCoMo sample id, e.g. conv-26 (default: the first).", show_default=False),
    ] = None,
    as_speaker: Annotated[
        str | None,
        typer.Option("--as", metavar="SPEAKER", help="LoCoMo speaker replayed as the user (default: speaker_a).", show_default=False),
    ] = None,
    speakers: Annotated[
        str,
        typer.Option(
            "--speakers",
            metavar="a|both",
            help=(
                "LoCoMo: 'a' replays one speaker as the user (--as, default speaker_a); 'both' "
                "replays each speaker as a user of their own (speaker_a, then speaker_b), the other "
                "speaker's lines as the recorded replies."
            ),
        ),
    ] = "a",
    sessions: Annotated[
        int | None,
        typer.Option("--sessions", min=1, metavar="N", help="Replay only the first N sessions.", show_default=False),
    ] = None,
    agent: Annotated[
        str, typer.Option("--agent", metavar="AGENT", help="Agent whose memory store gets the notes (enabled with user scope if new).")
    ] = "replay",
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            metavar="USER",
            help=(
                "User whose profile is written. Default: replay.<conversation>[.<speaker>], whose "
                "memory is cleared before the replay."
            ),
            show_default=False,
        ),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help=(
                "Clear the user's profile (and a user-scoped agent's files for the user) first; "
                "implied without --user."
            ),
        ),
    ] = False,
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", min=500, max=8000, metavar="N", help="Profile budget in tokens (default 2000).", show_default=False),
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replay a recorded multi-session conversation turn by turn through the memory pipeline.

    Each user turn: load the profile and inject it, let the model drive the MEMORY tool, answer
    with the recorded reply, consolidate the profile (gate, rewrite, scrub and checks, condense,
    compare-and-set write, audit). Session times from the input are the turn times. Each turn
    and each consolidation runs in a transaction of its own and commits it. Then prints the
    final profile, the memory files and a summary (NOOP / rewrite / veto / conflict counts, model
    calls and tokens per purpose, time per stage).

    A SQLite database without dbmemory's tables gets them (the embedded default works on a fresh
    machine); a server database needs 'dbmemory db upgrade' first.

    Example:

        dbmemory replay

        dbmemory replay locomo10.json --sample conv-26 --sessions 3

        dbmemory replay locomo10.json --sample conv-26 --speakers both

    locomo10.json is LoCoMo, the public data set of Snap Research
    (https://github.com/snap-research/locomo, file data/locomo10.json).

        dbmemory replay chat.jsonl --model gpt-4o-mini --user u-42
    """
    require_extra("profile", PROFILE_MODULES)  # said at start-up, not at the first turn
    if speakers not in ("a", "both"):
        raise InvalidArgumentError(f"--speakers must be 'a' or 'both', not {speakers!r}")
    if speakers == "both" and (user is not None or as_speaker is not None):
        raise InvalidArgumentError(
            "--speakers both replays each speaker as their own user (replay.<conversation>.<speaker>): "
            "leave out --user and --as"
        )
    choice = choose_model(model)
    if choice.notice:  # the first line of output, always
        typer.echo(choice.notice, err=as_json)
    path = input_path if input_path is not None else sample_path()
    roles = ["speaker_a", "speaker_b"] if speakers == "both" else [as_speaker]
    conversations = [read_conversation(path, sample=sample, as_speaker=r).limited(sessions) for r in roles]
    if speakers == "both" and conversations[0].user_speaker is None:
        raise InvalidArgumentError("--speakers both needs a LoCoMo file (a JSONL file has one user)")
    memory_config = UserMemoryConfig() if max_tokens is None else UserMemoryConfig(max_tokens=max_tokens)
    out = console()
    reports = []
    with engine_session(url, "replaying a conversation") as engine:
        notes: list[str] = []
        if ensure_schema(engine):
            notes.append(f"Installed dbmemory's schema in {redact_url(engine.url)}.")
        if ensure_agent(engine, agent):
            notes.append(f"Enabled memory for agent {agent!r} (scope user).")
        if not as_json:
            for note in notes:
                out.print(note)
        for conversation in conversations:
            user_id = user or replay_user_id(conversation)
            if fresh or user is None:
                reset_replay_memory(engine, agent_code=agent, user_id=user_id, root_folder=memory_config.root_folder)
            if not as_json:
                out.print(
                    f"Replaying {conversation.id} from {path.name}: {plural(len(conversation.sessions), 'session')}, "
                    f"{plural(conversation.turn_count, 'user turn')}, as user {user_id!r}, agent {agent!r}, "
                    f"model {choice.model!r}, database {redact_url(engine.url)}"
                )
            summary = replay_conversation(
                engine,
                conversation,
                model=choice.model,
                complete=choice.complete,
                agent_code=agent,
                user_id=user_id,
                user_memory=memory_config,
                progress=not as_json,
            )
            reports.append((summary, _files(engine, agent, user_id, memory_config.root_folder)))
    if as_json:
        shown = [
            {"summary": summary.as_dict(), "profile": summary.profile_text, "files": stored, "items": summary.items}
            for summary, stored in reports
        ]
        if speakers == "both":
            print_json({"notice": choice.notice, "speakers": shown})
        else:
            print_json({"notice": choice.notice, **shown[0]})
        return
    for summary, stored in reports:
        _print_report(out, summary, stored)


def _files(engine: Any, agent: str, user_id: str, root_folder: str) -> list[dict[str, Any]]:
    """Files of the agent's store for the user and of the user's profile store."""
    rows: list[dict[str, Any]] = []
    with engine.connect() as conn:
        keys = []
        try:
            keys.append(check_run_ready(conn, agent, user_id=user_id).store_key)
        except DbMemoryError:
            pass
        keys.append(profile_store_key(user_id, root_folder))
        for key in keys:
            store_id = find_store_id(conn, key)
            if store_id is None:
                continue
            for info in list_files(conn, store_id):
                rows.append({"store": key, "path": info.path, "chars": info.chars, "updated_at": info.updated_at})
    return rows


def _print_report(out: Any, summary: ReplaySummary, files: list[dict[str, Any]]) -> None:
    out.rule(f"Final profile of {summary.user_id} ({summary.profile_tokens} of {summary.max_tokens} tokens)", align="left")
    out.print(summary.profile_text or "(no profile was written)", markup=False, highlight=False, soft_wrap=True)
    out.rule("Memory files", align="left")
    print_table(
        ["store", "path", "chars", "updated (UTC)"],
        [[f["store"], f["path"], f["chars"], f["updated_at"]] for f in files],
        right=["chars"],
    )
    counts = summary.item_counts
    out.rule(
        f"Memory items of {summary.user_id} ({counts['manual'] + counts['auto']}: "
        f"{counts['manual']} manual, {counts['auto']} auto)",
        align="left",
    )
    print_table(
        ["id", "kind", "confidence", "text"],
        [
            [i["item_id"], i["kind"], "" if i["confidence"] is None else f"{i['confidence']:.2f}", i["text"]]
            for i in summary.items
        ],
        right=["id", "confidence"],
    )
    e = summary.extractions
    out.print(
        f"Item extraction: {sum(e.values())} runs ({e['written']} wrote, {e['nothing']} found nothing new, "
        f"{e['skipped']} skipped, {e['rejected'] + e['scrub_veto'] + e['error']} failed or vetoed); "
        f"{summary.items_added} added, {summary.items_updated} updated; profile summary folds: "
        f"{sum(summary.summaries.values())}",
        markup=False, highlight=False,
    )
    out.rule("Summary", align="left")
    o = summary.outcomes
    print_table(
        ["turns", "sessions", "NOOP", "rewrites", "unchanged", "rejected", "vetoes", "conflicts", "errors", "condensed", "truncated", "redactions", "tool calls", "tool errors"],
        [
            [
                summary.turns,
                summary.sessions,
                summary.noop,
                summary.rewrites,
                o["unchanged"],
                o["rejected"],
                summary.vetoes,
                summary.conflicts,
                o["error"] + o["failed"],
                summary.condensed,
                summary.truncated,
                sum(summary.redactions.values()),
                summary.tool_calls,
                summary.tool_errors,
            ]
        ],
        right=["turns", "sessions", "NOOP", "rewrites", "unchanged", "rejected", "vetoes", "conflicts", "errors", "condensed", "truncated", "redactions", "tool calls", "tool errors"],
    )
    print_table(
        ["purpose", "calls", "errors", "prompt tokens", "completion tokens", "seconds"],
        [
            [name, s.calls, s.errors, s.prompt_tokens, s.completion_tokens, f"{s.seconds:.3f}"]
            for name, s in sorted(summary.purposes.items())
        ],
        title=f"Model calls per purpose (model {summary.model})",
        right=["calls", "errors", "prompt tokens", "completion tokens", "seconds"],
    )
    print_table(
        ["stage", "seconds"],
        [[name, f"{seconds:.3f}"] for name, seconds in summary.stages.items()],
        title="Time per stage (summed over turns)",
        right=["seconds"],
    )
