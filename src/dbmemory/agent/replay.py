"""Replay a recorded multi-session conversation through the whole memory pipeline.

For each user turn of the conversation (read by :mod:`dbmemory.agent.transcripts`),
:func:`replay_conversation` runs :func:`~dbmemory.agent.turn.run_turn`: check, load the profile
and inject it, let the model drive the MEMORY tool (the scripted stand-in keeps one notes file
per session and an index), then answer with the **recorded** assistant reply (the model's own
final text is discarded, so the exchange the profile learns from is the recorded one), then the
post-turn consolidation (gate, rewrite, scrub and deterministic checks, condensation, compare-
and-set write, audit, metrics). Each turn's time is its session's recorded timestamp, so
Recent Topics dates come from the input, not from the wall clock. The summary counts outcomes
(NOOP, rewrite, scrub veto, conflict, ...), model calls and tokens per purpose, and time per stage.

Example:
    >>> from dbmemory.agent.transcripts import read_conversation            # doctest: +SKIP
    >>> summary = replay_conversation(engine, read_conversation("chat.jsonl"),
    ...                               model="scripted", complete=ScriptedModel())  # doctest: +SKIP
    >>> summary.outcomes["updated"]                                          # doctest: +SKIP
    7
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.engine import Engine

from dbmemory import llm
from dbmemory.agent.postprocess import PostProcessing
from dbmemory.agent.transcripts import Conversation, Exchange, exchanges, safe_component
from dbmemory.agent.turn import protocol_mode_after, run_turn
from dbmemory.agent.turn_types import TurnConfig, TurnResult
from dbmemory.errors import DbMemoryError
from dbmemory.items.extract_prompts import purpose_of as item_purpose_of
from dbmemory.items.runtime_data import clear_marks
from dbmemory.items.store import clear_items, list_items, purge_items
from dbmemory.llm import Completion
from dbmemory.profile.config import UserMemoryConfig
from dbmemory.profile.prompts import purpose_of
from dbmemory.profile.store import delete_profile, read_profile
from dbmemory.profile.tokens import count_tokens
from dbmemory.store.moves import clear_store_files
from dbmemory.store.resolve import resolve_store

__all__ = [
    "REPLAY_SYSTEM_PROMPT",
    "PurposeStats",
    "ReplaySummary",
    "CountingModel",
    "replay_user_id",
    "reset_replay_memory",
    "replay_conversation",
]

log = logging.getLogger(__name__)

REPLAY_SYSTEM_PROMPT = (
    "You are a helpful assistant in a long-running conversation with one user. Keep notes of "
    "what the user tells you that will matter in later sessions."
)
"""The caller's system prompt of a replay (the session and time lines follow it)."""

AGENT_PURPOSE = "agent"


@dataclass
class PurposeStats:
    """Model calls of one purpose (``agent``, ``gate``, ``rewrite``, ``scrub``, ``condense``).

    Attributes:
        calls: number of calls.
        errors: calls that raised.
        prompt_tokens / completion_tokens: reported token usage, summed.
        seconds: wall time, summed.
    """

    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class CountingModel:
    """Wrap a ``CompleteFn``: count calls, tokens and time per purpose, and swap in recorded replies.

    The purpose is read from the prompt (:func:`dbmemory.profile.prompts.purpose_of`, then
    :func:`dbmemory.items.extract_prompts.purpose_of` as ``item_extract``/``item_scrub``/
    ``item_decide``); any other call is the agent's (``agent``). When :attr:`recorded_reply` is set and
    an agent call ends the turn (no tool calls), its text is replaced by the recorded reply.
    """

    def __init__(self, complete: Callable[..., Completion]) -> None:
        self._complete = complete
        self.stats: dict[str, PurposeStats] = {}
        self.recorded_reply: str | None = None

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        item_purpose = item_purpose_of(messages)
        purpose = purpose_of(messages) or (f"item_{item_purpose}" if item_purpose else AGENT_PURPOSE)
        stats = self.stats.setdefault(purpose, PurposeStats())
        started = time.perf_counter()
        try:
            completion = self._complete(model, messages, **kwargs)
        except Exception:
            stats.errors += 1
            raise
        finally:
            stats.calls += 1
            stats.seconds += time.perf_counter() - started
        stats.prompt_tokens += completion.usage.prompt_tokens
        stats.completion_tokens += completion.usage.completion_tokens
        if purpose == AGENT_PURPOSE and self.recorded_reply is not None and not completion.tool_calls:
            return Completion(
                text=self.recorded_reply,
                finish_reason="stop",
                usage=completion.usage,
                raw=completion.raw,
            )
        return completion


@dataclass
class ReplaySummary:
    """What a replay did.

    Attributes:
        conversation_id: the conversation's id.
        user_id: the user the replay wrote the profile of.
        agent_code: the agent whose store got the notes.
        model: the model name (``"scripted"`` for the stand-in).
        sessions: sessions replayed.
        turns: user turns replayed.
        outcomes: consolidation outcomes (``noop``, ``updated``, ``unchanged``, ``rejected``,
            ``scrub_veto``, ``conflict``, ``disabled``, ``error``) and ``failed`` (the
            post-processing itself raised).
        reasons: consolidation reasons counted (``gate``, ``model``, ``missing_sections``, ...).
        redactions: deterministic detector hits per kind.
        condensed / truncated: consolidations that condensed / hard-truncated the profile.
        tool_calls / tool_errors: MEMORY tool calls made, and those answered with an error.
        tool_limit_hits: turns that reached ``max_tool_calls``.
        purposes: :class:`PurposeStats` per purpose.
        stages: seconds per stage: ``ready``, ``load``, ``model``, ``tools`` (summed over turns),
            ``consolidation`` (the post-processing), ``total`` (the whole replay).
        profile_text: the final profile file text, or None.
        profile_tokens: its size in tokens (the profile's tokenizer for ``model``).
        max_tokens: the profile budget.
        extractions: item extraction outcomes (``written``, ``nothing``, ``skipped``,
            ``rejected``, ``scrub_veto``, ``error``, ``disabled``).
        items_added / items_updated: items the extraction added / updated (contradictions).
        summaries: profile summary folds by outcome.
        items: the user's items live at the last replayed turn's time (``Item.to_dict()`` each),
            oldest first.
        last_turn_at: the recorded time of the last turn (None: the clock).
    """

    conversation_id: str
    user_id: str
    agent_code: str
    model: str
    sessions: int = 0
    turns: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)
    condensed: int = 0
    truncated: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    tool_limit_hits: int = 0
    purposes: dict[str, PurposeStats] = field(default_factory=dict)
    stages: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("ready", "load", "model", "tools", "consolidation", "total"), 0.0)
    )
    profile_text: str | None = None
    profile_tokens: int = 0
    max_tokens: int = 0
    extractions: Counter[str] = field(default_factory=Counter)
    items_added: int = 0
    items_updated: int = 0
    summaries: Counter[str] = field(default_factory=Counter)
    items: list[dict[str, Any]] = field(default_factory=list)
    last_turn_at: dt.datetime | None = None

    @property
    def item_counts(self) -> dict[str, int]:
        """Live items at the end by kind: ``{"manual": n, "auto": m}``."""
        counts = {"manual": 0, "auto": 0}
        for item in self.items:
            counts[item["kind"]] = counts.get(item["kind"], 0) + 1
        return counts

    @property
    def noop(self) -> int:
        """Turns whose consolidation answered NOOP (gate or rewrite)."""
        return self.outcomes["noop"]

    @property
    def rewrites(self) -> int:
        """Consolidations that wrote a new profile."""
        return self.outcomes["updated"]

    @property
    def vetoes(self) -> int:
        """Rewrites vetoed by the scrub (the old profile kept)."""
        return self.outcomes["scrub_veto"]

    @property
    def conflicts(self) -> int:
        """Consolidations that gave up after a compare-and-set conflict."""
        return self.outcomes["conflict"]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``--json`` output)."""
        return {
            "conversation_id": self.conversation_id,
            "user_id": self.user_id,
            "agent_code": self.agent_code,
            "model": self.model,
            "sessions": self.sessions,
            "turns": self.turns,
            "noop": self.noop,
            "rewrites": self.rewrites,
            "vetoes": self.vetoes,
            "conflicts": self.conflicts,
            "outcomes": dict(self.outcomes),
            "reasons": dict(self.reasons),
            "redactions": dict(self.redactions),
            "condensed": self.condensed,
            "truncated": self.truncated,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "tool_limit_hits": self.tool_limit_hits,
            "purposes": {k: vars(v) for k, v in self.purposes.items()},
            "stages_s": {k: round(v, 4) for k, v in self.stages.items()},
            "profile_tokens": self.profile_tokens,
            "max_tokens": self.max_tokens,
            "extractions": dict(self.extractions),
            "items_added": self.items_added,
            "items_updated": self.items_updated,
            "summaries": dict(self.summaries),
            "item_counts": self.item_counts,
        }


def replay_user_id(conversation: Conversation) -> str:
    """The default user id of a replay: ``replay.<conversation id>[.<speaker>]`` (store-key-safe)."""
    parts = ["replay", conversation.id]
    if conversation.user_speaker:
        parts.append(safe_component(conversation.user_speaker))
    return ".".join(parts)[:150]


def reset_replay_memory(engine: Engine, *, agent_code: str, user_id: str, root_folder: str = "user-memory") -> None:
    """Delete the user's profile and, for a user-scoped agent, the agent's files for this user.

    One committed transaction; audit events record the deletions. Used before a replay under its
    default user id, so a second run starts from the same empty state. An agent with another
    scope (agent, shared, global, ...) keeps its store: it is not the replay user's alone.
    """
    with engine.begin() as conn:
        delete_profile(conn, user_id, root_folder=root_folder)
        _reset_items(conn, user_id)
        try:
            ref = resolve_store(conn, agent_code, user_id=user_id)
        except DbMemoryError:  # agent without memory, or its scope needs more: nothing to clear
            return
        if ref.scope == "user" and ref.store_id is not None:
            clear_store_files(conn, ref.store_id, actor="replay-reset")


def _reset_items(conn: Any, user_id: str) -> None:
    """Purge the replay user's items in the default organisation and its extraction marks."""
    clear_items(conn, user_id, actor="replay-reset")
    purge_items(conn, user_id=user_id, org_id="default", include_grace=True, actor="replay-reset")
    clear_marks(conn, "default", user_id)


def _session_header(exchange: Exchange) -> str:
    lines = [REPLAY_SYSTEM_PROMPT, "", f"Session: {exchange.session_id}"]
    if exchange.time is not None:
        lines.append(f"Current time (UTC): {exchange.time.isoformat()}")
    return "\n".join(lines)


def _record(summary: ReplaySummary, result: TurnResult) -> None:
    for stage in ("ready", "load", "model", "tools"):
        summary.stages[stage] += result.timings.get(stage, 0.0)
    summary.tool_calls += len(result.memory_tool_calls)
    summary.tool_errors += sum(1 for c in result.memory_tool_calls if c.is_error)
    summary.tool_limit_hits += int(result.tool_limit_reached)


def _record_extraction(summary: ReplaySummary, result: TurnResult) -> None:
    extraction = result.item_extraction
    if extraction is None:
        return
    summary.extractions[extraction.outcome] += 1
    summary.items_added += len(extraction.added)
    summary.items_updated += len(extraction.updated)
    if extraction.summary is not None:
        summary.summaries[extraction.summary] += 1


def _record_consolidation(summary: ReplaySummary, result: TurnResult, seconds: float) -> None:
    summary.stages["consolidation"] += seconds
    _record_extraction(summary, result)
    handle = result.post_processing
    if handle is None:
        return
    outcome = handle.result
    if outcome is None:
        summary.outcomes["failed"] += 1
        return
    summary.outcomes[outcome.outcome] += 1
    if outcome.reason:
        summary.reasons[outcome.reason] += 1
    summary.redactions.update({k: v for k, v in outcome.redactions.items() if v})
    summary.condensed += int(outcome.condensed)
    summary.truncated += int(outcome.truncated)


@contextmanager
def _progress(enabled: bool, total: int, label: str, console: Any) -> Iterator[Callable[[], None]]:
    if not enabled:
        yield lambda: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task(label, total=total)
        yield lambda: progress.advance(task)


def replay_conversation(
    engine: Engine,
    conversation: Conversation,
    *,
    model: str,
    complete: Callable[..., Completion] | None = None,
    agent_code: str = "replay",
    user_id: str | None = None,
    user_memory: Any = None,
    history_turns: int = 4,
    max_tool_calls: int = 16,
    progress: bool = False,
    console: Any = None,
    on_turn: Callable[[Exchange, TurnResult], None] | None = None,
) -> ReplaySummary:
    """Replay ``conversation`` turn by turn (see the module docs).

    Each turn runs in its own committed transaction (``run_turn`` with the Engine); each
    consolidation in its own. The agent must have memory enabled for its tool calls to run
    (the CLI enables ``replay`` with user scope when it is not configured).

    Args:
        engine: the database (schema installed).
        conversation: what to replay (cut it with :meth:`Conversation.limited`).
        model: the litellm model name, or ``"scripted"`` with the stand-in as ``complete``.
        complete: the model call (default :func:`dbmemory.llm.complete`).
        agent_code: the agent whose store receives the MEMORY tool's notes.
        user_id: whose profile is written (default :func:`replay_user_id`).
        user_memory: a :class:`dbmemory.profile.config.UserMemoryConfig`, or None for defaults.
        history_turns: earlier exchanges of the same session sent with each turn.
        max_tool_calls: per turn.
        progress: show a rich progress bar.
        console: the rich console for the progress bar (default: stderr).
        on_turn: called after each turn (and its consolidation) with the exchange and result.

    Returns:
        The :class:`ReplaySummary` (with the final profile text and its size in tokens).
    """
    if complete is None:
        complete = llm.complete  # looked up per call: a host may wrap dbmemory.llm.complete
    memory_config = user_memory if user_memory is not None else UserMemoryConfig()
    user = user_id or replay_user_id(conversation)
    counting = CountingModel(complete)
    summary = ReplaySummary(
        conversation_id=conversation.id,
        user_id=user,
        agent_code=agent_code,
        model=model,
        sessions=len(conversation.sessions),
        max_tokens=memory_config.max_tokens,
    )
    started = time.perf_counter()
    total = sum(len(exchanges(s)) for s in conversation.sessions)
    if console is None and progress:
        console = Console(stderr=True)
    with _progress(progress, total, f"Replaying {conversation.id}", console) as advance:
        for session in conversation.sessions:
            history: list[dict[str, str]] = []
            started_with: bool | None = None  # each session is a new conversation
            for exchange in exchanges(session):
                counting.recorded_reply = exchange.assistant_text
                messages = [{"role": "system", "content": _session_header(exchange)}]
                messages += history[-2 * history_turns :] if history_turns > 0 else []
                messages.append({"role": "user", "content": exchange.user_text})
                result = run_turn(
                    engine,
                    agent_code=agent_code,
                    user_id=user,
                    messages=messages,
                    model=model,
                    session_id=session.id,
                    config=TurnConfig(
                        user_memory=memory_config,
                        max_tool_calls=max_tool_calls,
                        now=exchange.time,
                        post_process="deferred",
                        memory_protocol=protocol_mode_after(started_with),
                        item_skip_window=False,  # one recorded time per session, not per message
                    ),
                    complete=counting,
                )
                if started_with is None:
                    started_with = result.memory_protocol
                _record(summary, result)
                t0 = time.perf_counter()
                if isinstance(result.post_processing, PostProcessing):  # a sync turn's handle
                    result.post_processing.run()
                _record_consolidation(summary, result, time.perf_counter() - t0)
                summary.turns += 1
                if exchange.time is not None:
                    summary.last_turn_at = exchange.time
                history += [
                    {"role": "user", "content": exchange.user_text},
                    {"role": "assistant", "content": exchange.assistant_text},
                ]
                if on_turn is not None:
                    on_turn(exchange, result)
                advance()
    counting.recorded_reply = None
    summary.purposes = counting.stats
    summary.stages["total"] = time.perf_counter() - started
    _final_profile(engine, summary, memory_config, model)
    return summary


def _final_profile(engine: Engine, summary: ReplaySummary, memory_config: Any, model: str) -> None:
    with engine.connect() as conn:
        record = read_profile(conn, summary.user_id, root_folder=memory_config.root_folder)
    if record is not None:
        summary.profile_text = record.text
        summary.profile_tokens = count_tokens(record.text, memory_config.effective_model(model) or model)
    with engine.connect() as conn:  # live as of the last replayed turn (auto items expire after 30 days)
        summary.items = [i.to_dict() for i in list_items(conn, summary.user_id, now=summary.last_turn_at)]

