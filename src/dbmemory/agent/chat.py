"""An interactive chat with database memory: the logic behind ``dbmemory chat``.

:class:`ChatSession` keeps the conversation's history and runs one
:func:`~dbmemory.agent.turn.run_turn` per user message (each turn commits its own transaction),
reporting what happens through a :class:`ChatDisplay`: "Loading context memory", each MEMORY
tool call and its result, the answer, then "Updating your memory" while the profile is
consolidated (the chat waits for it before the next prompt, so lines never interleave with
typing). ``/memory`` shows the user's profile, ``/files`` the agent's store. The terminal part
(rich) lives in :mod:`dbmemory.cli.chat`; this module prints nothing itself.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from dbmemory.agent.litellm_tools import ToolCallRecord, decode_arguments
from dbmemory.agent.postprocess import PostProcessing
from dbmemory.agent.turn import protocol_mode_after, run_turn
from dbmemory.agent.turn_types import TurnConfig, TurnEvent, TurnResult
from dbmemory.core.paths import normalize_path
from dbmemory.errors import DbMemoryError
from dbmemory.items.settings import get_memory_switch, set_memory_switch
from dbmemory.items.store import list_items
from dbmemory.profile.optout import is_user_memory_enabled, set_user_memory_enabled
from dbmemory.profile.store import read_profile
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file, list_files
from dbmemory.store.resolve import check_run_ready

__all__ = [
    "CHAT_SYSTEM_PROMPT",
    "COMMANDS_HELP",
    "ChatDisplay",
    "ChatSession",
    "default_session_id",
    "describe_tool_call",
]

CHAT_SYSTEM_PROMPT = "You are a helpful assistant. Answer concisely."
"""The chat's own system prompt (the session and time lines follow it)."""

COMMANDS_HELP = (
    "/memory shows your profile, /items your memory items, /files the agent's memory files, "
    "/memory off pauses memory (kept; /memory on resumes), /optout deletes your profile and stops "
    "memory (/optin starts anew), /help this help, /quit ends."
)


class ChatDisplay(Protocol):
    """What the chat reports to; the CLI implements it with rich."""

    def step(self, name: str, status: str, detail: str | None) -> None:
        """A profile step: ``name`` such as "Loading context memory", ``status`` ``"started"``,
        ``"completed"`` or ``"failed"``."""

    def tool_call(self, record: ToolCallRecord) -> None:
        """A MEMORY (or caller) tool call finished."""

    def notice(self, text: str) -> None:
        """A one-line note (tool limit reached, load failure, ...)."""


def default_session_id(now: dt.datetime | None = None) -> str:
    """``chat-YYYYMMDD-HHMMSS`` (UTC): a store-key-safe session id for a new chat."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.strftime("chat-%Y%m%d-%H%M%S")


def describe_tool_call(record: ToolCallRecord, *, max_chars: int = 400) -> tuple[str, str]:
    """A short label and result preview of a tool call for display.

    Returns:
        ``("memory create /memories/notes.md", "File created successfully at: ...")``; the result
        clipped to ``max_chars`` characters.
    """
    args = decode_arguments(record.arguments)
    if isinstance(args, dict) and len(args) == 1 and isinstance(next(iter(args.values())), dict):
        args = next(iter(args.values()))
    target = ""
    if isinstance(args, dict):
        if args.get("command") == "rename":
            target = f"{args.get('old_path') or args.get('path')} -> {args.get('new_path')}"
        else:
            target = str(args.get("path") or "")
    label = " ".join(p for p in (record.name, record.command or "", target) if p)
    result = record.result if len(record.result) <= max_chars else record.result[:max_chars] + " ..."
    return label, result


class _StepBridge:
    """A :class:`~dbmemory.profile.events.StepLogger` that forwards steps to a display."""

    def __init__(self, display: ChatDisplay) -> None:
        self.display = display

    def start(self, name: str) -> str:
        self.display.step(name, "started", None)
        return name

    def finish(self, handle: str, status: str, detail: str | None = None) -> None:
        self.display.step(handle, status, detail)


@dataclass
class ChatSession:
    """One interactive conversation.

    Attributes:
        engine: the database; each turn commits its own transaction.
        agent_code: the agent (its memory configuration decides the MEMORY tool).
        user_id: the user (profile and user-scoped stores).
        session_id: the session id (session-scoped stores; the scripted model's notes file).
        model: the litellm model name (``"scripted"`` for the stand-in).
        complete: the model call (the stand-in, or None for :func:`dbmemory.llm.complete`).
        display: where progress goes.
        system_prompt: the chat's own system prompt.
        history: the conversation so far (user and assistant messages).
        clock: the turn time (tests fix it).
    """

    engine: Engine
    agent_code: str
    user_id: str
    session_id: str
    model: str
    complete: Callable[..., Any] | None
    display: ChatDisplay
    system_prompt: str = CHAT_SYSTEM_PROMPT
    history: list[dict[str, str]] = field(default_factory=list)
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.timezone.utc))
    max_history_messages: int = 40
    memory_protocol: bool | None = None
    """Whether this conversation's first turn carried the MEMORY PROTOCOL block (None before
    it): later turns keep the system prompt the conversation started with."""

    def _on_event(self, event: TurnEvent) -> None:
        if event.kind == "tool_call":
            self.display.tool_call(event.data)  # type: ignore[arg-type]
        elif event.kind == "tool_limit":
            self.display.notice(f"tool-call limit of {event.data} reached: the model must answer now")
        elif event.kind == "memory_load_failed":
            self.display.notice("could not load your memory: this answer is given without it")
        elif event.kind == "memory_update_failed":
            self.display.notice("updating your memory failed (logged); your answer was not affected")
        elif event.kind == "items_extracted" and event.data is not None:
            added, updated = len(event.data.added), len(event.data.updated)  # type: ignore[attr-defined]
            if added or updated:
                self.display.notice(f"memory items: {added} added, {updated} updated (/items lists them)")

    def send(self, text: str) -> TurnResult:
        """Run one turn for the user's ``text`` and wait for its memory update.

        Returns:
            The :class:`~dbmemory.agent.turn.TurnResult` (the answer is ``result.answer``).

        Raises:
            What :func:`~dbmemory.agent.turn.run_turn` raises (configuration or model errors).
        """
        now = self.clock()
        system = f"{self.system_prompt}\n\nSession: {self.session_id}\nCurrent time (UTC): {now.isoformat()}"
        messages = [{"role": "system", "content": system}, *self.history[-self.max_history_messages :]]
        messages.append({"role": "user", "content": text})
        result = run_turn(
            self.engine,
            agent_code=self.agent_code,
            user_id=self.user_id,
            messages=messages,
            model=self.model,
            session_id=self.session_id,
            complete=self.complete,
            config=TurnConfig(
                now=now, post_process="deferred", memory_protocol=protocol_mode_after(self.memory_protocol)
            ),
            on_event=self._on_event,
            step_logger=_StepBridge(self.display),
        )
        if self.memory_protocol is None:
            self.memory_protocol = result.memory_protocol
        self.history += [{"role": "user", "content": text}, {"role": "assistant", "content": result.answer}]
        return result

    def finish_turn(self, result: TurnResult) -> Any:
        """Run the turn's memory update now (after the answer was shown); returns its result."""
        if not isinstance(result.post_processing, PostProcessing):  # none, or async (not here)
            return None
        return result.post_processing.run()

    def items(self) -> list[Any]:
        """The user's live memory items (organisation ``default``), oldest first."""
        with self.engine.connect() as conn:
            return list_items(conn, self.user_id, now=self.clock())

    def set_memory_switch(self, on: bool) -> bool:
        """Turn the user's memory switch on or off (extraction and injection stop; the profile
        and items are kept), in its own committed transaction. Returns the value before."""
        with self.engine.begin() as conn:
            return set_memory_switch(conn, self.user_id, on, actor=self.user_id)

    def set_opted_out(self, opted_out: bool) -> bool:
        """Opt the user out (their profile is deleted for good, load and update stop) or back in,
        in its own committed transaction. Returns whether a profile was deleted."""
        with self.engine.begin() as conn:
            return set_user_memory_enabled(conn, self.user_id, not opted_out, actor=self.user_id)

    def memory_state(self) -> tuple[bool, bool]:
        """``(memory switch on, not opted out)`` for the user."""
        with self.engine.connect() as conn:
            return get_memory_switch(conn, self.user_id), is_user_memory_enabled(conn, self.user_id)

    def profile_text(self) -> str | None:
        """The user's stored profile, or None when there is none yet."""
        with self.engine.connect() as conn:
            record = read_profile(conn, self.user_id)
        return None if record is None else record.text

    def files(self) -> list[Any]:
        """The agent's store files for this run (``FileInfo`` list; empty when none or no memory)."""
        with self.engine.connect() as conn:
            try:
                ref = check_run_ready(conn, self.agent_code, user_id=self.user_id, session_id=self.session_id)
            except DbMemoryError:
                return []
            store_id = find_store_id(conn, ref.store_key)
            return [] if store_id is None else list_files(conn, store_id)

    def file_text(self, path: str) -> str | None:
        """The text of one file of the agent's store, or None."""
        with self.engine.connect() as conn:
            try:
                ref = check_run_ready(conn, self.agent_code, user_id=self.user_id, session_id=self.session_id)
                store_id = find_store_id(conn, ref.store_key)
                return None if store_id is None else get_file(conn, store_id, normalize_path(path)).text
            except DbMemoryError:
                return None

