"""One agent turn with database memory: :func:`run_turn` and :func:`arun_turn`.

A turn:

1. checks that the agent's store can be named (:func:`dbmemory.stores.check_run_ready`): a
   context-scoped agent without its key fails here, before any model call. An agent whose memory
   was never enabled (or is disabled) runs without the MEMORY tool;
2. loads the user's profile (when user memory is on for the turn and a ``user_id`` is given) and
   builds the system prompt: the caller's system prompt, the MEMORY PROTOCOL block when the agent
   has the tool, then the "What I know about you" section (fenced, labelled as data);
3. calls the model with the MEMORY tool (plus the caller's tools, executed by ``tool_handler``),
   runs memory tool calls on the turn's connection and transaction, feeds the results back, and
   loops until a final answer or ``max_tool_calls`` (the limit is reported in
   :attr:`TurnResult.tool_limit_reached` and logged, and the model gets one last call without tools);
4. returns a :class:`TurnResult`: the answer exactly as the model gave it (memory never changes
   it), the tool calls, token usage per model call, and timings;
5. starts the post-processing (profile consolidation, :class:`dbmemory.profile.UserMemoryPostprocessor`)
   after the answer, off its critical path: a background thread (a task in :func:`arun_turn`)
   that the caller can wait for or ignore; it runs in its own transactions; its failures are
   logged and counted, never raised into the turn.

Transactions: given an :class:`~sqlalchemy.engine.Engine`, ``run_turn`` opens one connection and
**owns its transactions**: the readiness check, the profile load and each MEMORY tool call run
in a short transaction of their own that commits at once, so no transaction is open while a
model (or a caller's tool) runs: on SQLite the single write lock is held only for one tool
call at a time, and other users' turns, reads and writes go on during this turn's model calls.
A memory write that committed stays when a later model call fails (the MEMORY PROTOCOL tells
the model to assume it can be interrupted at any moment); when the commit of a tool call fails,
the model is told that nothing was saved. The post-processing starts after the turn.

Given a :class:`~sqlalchemy.engine.Connection`, every database step joins the caller's
transaction (SQLAlchemy begins one on the first statement when none is open) and nothing is
committed or rolled back: the caller's rollback removes the turn's memory writes. The turn then
holds, across its model calls and until the caller ends the transaction, whatever that
transaction holds: on PostgreSQL, MariaDB and Oracle the row locks of the store rows and files
the tool wrote (reads take none); on SQLite with dbmemory's engine set-up every transaction
starts with ``BEGIN IMMEDIATE``, so the database's write lock is held from the turn's first
statement (its readiness check), and every other dbmemory transaction on that database, reads
included, waits for it up to the busy timeout. Pass the Engine on SQLite to serve several users
at once. The post-processing (its own connection, its own transaction) may wait for the
caller's commit on SQLite (one writer): commit before waiting for it, or pass
``TurnConfig(post_process="deferred")`` and call ``result.post_processing.start()`` after your
commit. On an in-memory SQLite database (one shared connection) the post-processing runs inline
when given an Engine and is deferred when given a Connection.

The MEMORY PROTOCOL block is added to the system prompt of a **new** conversation only (UC AI:
an open conversation keeps the system prompt it started with): not when the given system prompt
already carries it (never twice), and not when ``messages`` already hold earlier assistant or
tool messages of a conversation whose system prompt does not carry it. ``TurnConfig(
memory_protocol="include")`` says the conversation started with it (hosts that rebuild their
system prompt each turn), ``"omit"`` never adds it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.engine import Connection, Engine

from dbmemory.agent._drivers import Db, Model, Tool, TurnConnection, drive_async, drive_sync, sync_complete
from dbmemory.agent.litellm_tools import (
    DEFAULT_MAX_RESULT_CHARS,
    MEMORY_TOOL_NAME,
    ToolCallRecord,
    ToolHandler,
    assistant_message,
    is_anthropic_model,
    memory_tools,
    tool_call_parts,
    tool_message,
)
from dbmemory.agent.postprocess import AsyncPostProcessing, PostProcessing, post_processing_failures
from dbmemory.errors import InvalidArgumentError, InvalidScopeError, NotFoundError
from dbmemory.llm import Completion, CompleteFn, Usage

__all__ = [
    "TurnConfig",
    "TurnEvent",
    "ModelCallRecord",
    "TurnResult",
    "run_turn",
    "arun_turn",
    "DEFAULT_MAX_TOOL_CALLS",
    "post_processing_failures",
    "protocol_mode_after",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOOL_CALLS = 16
"""Most tool calls one turn executes before the model must answer."""

PostProcessMode = Literal["background", "inline", "deferred", "off"]
ProtocolMode = Literal["auto", "include", "omit"]

LOAD_FAILED_NOTE = (
    "## What I know about you\n\n"
    "(The memory of this user could not be loaded for this turn. That is not an empty memory: do "
    "not tell the user that you know nothing about them.)"
)
"""Put in the system prompt instead of the profile when loading it failed."""


def _check_config_fields(config: TurnConfig) -> None:
    """The rules of TurnConfig's other fields (:mod:`dbmemory.validate`)."""
    from dbmemory import validate as _v

    _v.check_int(config.max_tool_result_chars, "max_tool_result_chars", minimum=1, maximum=_v.INT64_MAX)
    _v.check_bool(config.user_memory_enabled, "user_memory_enabled")
    _v.check_bool(config.native_anthropic_memory_tool, "native_anthropic_memory_tool")
    if config.timeout_s is not None:
        _v.check_days(config.timeout_s, "timeout_s")  # a finite number > 0
    _v.check_mapping(config.model_kwargs, "model_kwargs", optional=False, scope=False)
    _v.check_now(config.now)
    _v.check_bool(config.item_memory, "item_memory")
    _v.check_bool(config.item_skip_window, "item_skip_window")


@dataclass(frozen=True)
class TurnConfig:
    """Settings of one turn.

    Attributes:
        max_tool_calls: most tool calls executed in the turn (default 16); more are answered with
            an error text and the model gets one last call without tools.
        max_tool_result_chars: longest tool result fed back, in characters (cut with a hint).
        user_memory: the profile settings (:class:`dbmemory.profile.config.UserMemoryConfig`);
            None = its defaults.
        user_memory_enabled: whether user memory is on for this turn; compute it with
            :func:`dbmemory.profile.memory_enabled` (feature flag, space setting, opt-out).
        native_anthropic_memory_tool: for Anthropic models, offer Anthropic's native memory tool
            type instead of the function schema (litellm forwards it); the same executor answers.
        post_process: ``"background"`` (a thread or task, default), ``"inline"`` (before
            ``run_turn`` returns), ``"deferred"`` (the caller calls ``start()``/``wait()``) or
            ``"off"``.
        timeout_s: seconds per model call, or None for litellm's default.
        model_kwargs: extra keyword arguments for every model call of the turn (``temperature``,
            ``api_base``, litellm's ``mock_response`` ...).
        now: the turn's time (UTC) used for the profile's Recent Topics, or None for the clock
            (replays pass the recorded session time).
        memory_protocol: when the MEMORY PROTOCOL block is added (agents with the MEMORY tool
            only; never twice): ``"auto"`` (default) adds it to a new conversation only, i.e.
            when ``messages`` hold no earlier assistant or tool message; ``"include"`` adds it
            to any turn whose system prompt lacks it (the conversation started with it and the
            host rebuilds its system prompt each turn: pass ``"include"`` when the first turn's
            :attr:`TurnResult.memory_protocol` was True); ``"omit"`` never adds it.
        item_memory: load and inject the organisation memory and the user's memory items, and
            extract items after the turn (needs a ``user_id``). The user's memory switch
            (:func:`dbmemory.items.set_memory_switch`) still applies: off, nothing of the user's
            memory is injected or updated, the profile included, and everything is kept.
        item_skip_window: apply the organisation's extraction skip window to this turn's chat
            (``session_id``): a message less than ``skip_window_seconds`` after the chat's last
            extraction is not extracted. False extracts every turn (``replay`` passes False:
            recorded transcripts carry one time per session, not per message).
    """

    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    max_tool_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    user_memory: Any = None
    user_memory_enabled: bool = True
    native_anthropic_memory_tool: bool = False
    post_process: PostProcessMode = "background"
    timeout_s: float | None = None
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)
    now: dt.datetime | None = None
    memory_protocol: ProtocolMode = "auto"
    item_memory: bool = True
    item_skip_window: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_tool_calls, bool) or not isinstance(self.max_tool_calls, int) or self.max_tool_calls < 0:
            raise InvalidArgumentError(
                f"max_tool_calls must be a whole number >= 0, got {self.max_tool_calls!r}: "
                f"pass e.g. max_tool_calls={DEFAULT_MAX_TOOL_CALLS}"
            )
        if self.post_process not in ("background", "inline", "deferred", "off"):
            raise InvalidArgumentError(
                f"post_process must be 'background', 'inline', 'deferred' or 'off', got "
                f"{self.post_process!r}: pick one of them"
            )
        if self.memory_protocol not in ("auto", "include", "omit"):
            raise InvalidArgumentError(
                f"memory_protocol must be 'auto', 'include' or 'omit', got {self.memory_protocol!r}"
            )
        _check_config_fields(self)


@dataclass(frozen=True)
class TurnEvent:
    """Something that happened during a turn, for live display (the ``chat`` command).

    Attributes:
        kind: ``"memory_loading"``, ``"memory_loaded"`` (data: the profile state or None),
            ``"memory_load_failed"`` (data: the exception), ``"model_call"`` (a
            :class:`ModelCallRecord`), ``"tool_call"`` (a :class:`ToolCallRecord`),
            ``"tool_limit"`` (data: the limit), ``"answer"`` (data: the text),
            ``"memory_updating"``, ``"memory_updated"`` (data: the consolidation result) or
            ``"memory_update_failed"`` (data: the exception). The ``memory_updat*`` events come
            from the post-processing thread.
        data: see ``kind``.
    """

    kind: str
    data: object = None


EventHandler = Callable[[TurnEvent], None]


@dataclass(frozen=True)
class ModelCallRecord:
    """One model call of the turn.

    Attributes:
        model: the litellm model name.
        usage: token usage as reported (zeros when not reported).
        duration_s: wall time in seconds.
        finish_reason: the provider's finish reason.
        tool_calls: number of tool calls the answer requested.
    """

    model: str
    usage: Usage
    duration_s: float
    finish_reason: str | None
    tool_calls: int


@dataclass
class TurnResult:
    """What one turn produced.

    Attributes:
        answer: the model's final text, unchanged.
        finish_reason: the final call's finish reason (``"stop"``, ``"length"``, ...).
        tool_calls: every tool call executed (or refused over the limit), in order.
        model_calls: every model call, in order, with its token usage and time.
        timings: seconds per stage: ``ready``, ``load``, ``model``, ``tools``, ``total``.
        tool_limit_reached: True when the model asked for more than ``max_tool_calls`` calls.
        memory_tool: whether the agent had the MEMORY tool.
        profile_loaded: whether a profile was injected into the system prompt.
        memory_protocol: whether the system prompt sent carried the MEMORY PROTOCOL block (added
            by this turn or already in the caller's system prompt).
        messages: the full message list of the turn (system prompt, history, tool messages and
            the final assistant message).
        post_processing: the post-processing handle (:class:`PostProcessing` or
            :class:`AsyncPostProcessing`; its result is the profile's consolidation result, or
            None when only items were processed), or None when user memory was off.
        org_memory_loaded: whether an organisation-memory block was injected.
        items_injected: the memory items injected (selected and within the budget), in order.
        item_extraction: the :class:`~dbmemory.items.extract.ExtractionResult` once the
            post-processing extracted items (None before, or when it did not run).
    """

    answer: str
    finish_reason: str | None
    tool_calls: list[ToolCallRecord]
    model_calls: list[ModelCallRecord]
    timings: dict[str, float]
    tool_limit_reached: bool
    memory_tool: bool
    profile_loaded: bool
    messages: list[dict[str, Any]]
    memory_protocol: bool = False
    post_processing: PostProcessing | AsyncPostProcessing | None = None
    org_memory_loaded: bool = False
    items_injected: tuple[Any, ...] = ()
    item_extraction: Any = None

    @property
    def usage(self) -> Usage:
        """Token usage summed over the turn's model calls."""
        return Usage(
            prompt_tokens=sum(c.usage.prompt_tokens for c in self.model_calls),
            completion_tokens=sum(c.usage.completion_tokens for c in self.model_calls),
        )

    @property
    def memory_tool_calls(self) -> list[ToolCallRecord]:
        """The MEMORY tool calls only."""
        return [c for c in self.tool_calls if c.name == MEMORY_TOOL_NAME]


# ----------------------------------------------------------------------------- operations
# The turn is written once, as a generator that yields operations; a sync and an async driver
# run them. This keeps run_turn and arun_turn one implementation.


@dataclass
class _Context:
    agent_code: str
    user_id: str | None
    session_id: str | None
    run_context: Mapping[str, object] | None
    messages: list[dict[str, Any]]
    model: str
    tools: Sequence[Mapping[str, Any]]
    tool_handler: ToolHandler | None
    config: TurnConfig
    on_event: EventHandler | None
    step_logger: Any = None
    memory_config: Any = None
    state: Any = None
    memory_on: bool = False
    org_id: str = "default"
    items_on: bool = False
    items: Any = None
    load_failed: bool = False


def _emit(ctx: _Context, kind: str, data: object = None) -> None:
    if ctx.on_event is None:
        return
    try:
        ctx.on_event(TurnEvent(kind, data))
    except Exception:  # a display callback must never break the turn
        logger.warning("turn event handler failed for %s", kind, exc_info=True)


def _memory_model(ctx: _Context) -> str:
    """The profile's effective model (tokenizer and consolidation calls)."""
    cfg = ctx.memory_config
    if cfg is not None:
        return cfg.effective_model(ctx.model) or ctx.model
    return ctx.model


def _memory_tool(conn: Connection, ctx: _Context) -> Any:
    """The turn's MemoryTool (its constructor runs check_run_ready), or None when the agent has no memory."""
    from dbmemory.tool import MemoryTool

    try:
        return MemoryTool(
            conn,
            ctx.agent_code,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
            run_context=ctx.run_context,
            actor=f"turn agent={ctx.agent_code}" + (f" user={ctx.user_id}" if ctx.user_id else ""),
        )
    except NotFoundError:
        return None  # memory never enabled for this agent: no MEMORY tool
    except InvalidScopeError as exc:
        if exc.code == "memory_disabled":
            return None
        raise


def _load(conn: Connection, ctx: _Context) -> Any:
    from dbmemory.profile.load import load_user_memory

    with conn.begin_nested():  # a failed read must not poison the caller's transaction
        return load_user_memory(
            conn, ctx.user_id, config=ctx.memory_config, model=_memory_model(ctx), step_logger=ctx.step_logger
        )


def _split_system(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    system_parts = []
    rest = []
    for message in messages:
        if message.get("role") == "system" and not rest:
            content = message.get("content")
            system_parts.append(content if isinstance(content, str) else str(content or ""))
        else:
            rest.append(dict(message))
    return "\n\n".join(p for p in system_parts if p.strip()), rest


def _ongoing(history: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``history`` holds earlier turns of a conversation (assistant or tool messages)."""
    return any(m.get("role") in ("assistant", "tool", "function") for m in history)


def _wants_protocol(mode: ProtocolMode, system: str, history: Sequence[Mapping[str, Any]]) -> bool:
    """Whether this turn adds the MEMORY PROTOCOL block (see the module doc)."""
    from dbmemory.prompts import has_memory_protocol

    if mode == "omit" or has_memory_protocol(system):
        return False
    return mode == "include" or not _ongoing(history)


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
            return str(content or "")
    return ""


def _earlier_user_texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text of every user message but the last, oldest first."""
    texts = [_last_user_text([m]) for m in messages if m.get("role") == "user"]
    return texts[:-1]


def _limit_record(call: object, limit: int) -> ToolCallRecord:
    call_id, name, arguments = tool_call_parts(call)
    text = (
        f"Error: the limit of {limit} tool calls for this turn is reached; this call was not run. "
        "Answer the user now with what you have."
    )
    return ToolCallRecord(call_id, name, arguments, text, True, 0.0)


def _turn(ctx: _Context) -> Generator[Any, Any, TurnResult]:
    cfg = ctx.config
    timings = {"ready": 0.0, "load": 0.0, "model": 0.0, "tools": 0.0, "total": 0.0}
    started = time.perf_counter()

    memory_tool = yield Db(lambda conn: _memory_tool(conn, ctx))
    has_tool = memory_tool is not None
    timings["ready"] = time.perf_counter() - started

    if ctx.items_on:
        from dbmemory.agent import item_memory

        t0 = time.perf_counter()
        try:
            ctx.items = yield Db(
                lambda conn: item_memory.load(conn, org_id=ctx.org_id, user_id=ctx.user_id, now=cfg.now)
            )
        except Exception:
            logger.warning("loading the organisation memory and items failed; the turn runs without them", exc_info=True)
            item_memory.count_failure("load")
        else:
            if not ctx.items.memory_on:
                ctx.memory_on = False  # the memory switch is off: no profile either, all kept
            _emit(ctx, "items_loaded", ctx.items)
        timings["load"] += time.perf_counter() - t0

    load_failed = False
    if ctx.memory_on:
        _emit(ctx, "memory_loading")
        t0 = time.perf_counter()
        try:
            ctx.state = yield Db(lambda conn: _load(conn, ctx))
        except Exception as exc:
            # not an empty memory: say so to the model and skip consolidation for this turn
            logger.warning("loading the user profile failed; the turn runs without it", exc_info=True)
            ctx.memory_on = False
            ctx.load_failed = load_failed = True
            _emit(ctx, "memory_load_failed", exc)
        else:
            _emit(ctx, "memory_loaded", ctx.state)
        timings["load"] += time.perf_counter() - t0

    system, history = _split_system(ctx.messages)
    parts = [system] if system.strip() else []
    from dbmemory.prompts import get_memory_protocol, has_memory_protocol

    if has_tool and _wants_protocol(cfg.memory_protocol, system, history):
        parts.append(get_memory_protocol())
    protocol_sent = has_memory_protocol("\n\n".join(parts))
    profile_loaded = False
    profile_section = ""
    if ctx.memory_on and ctx.state is not None:
        from dbmemory.profile.load import memory_prompt_section

        profile_section = memory_prompt_section(ctx.state)
        profile_loaded = bool(profile_section)
    elif load_failed:
        profile_section = LOAD_FAILED_NOTE
    if ctx.items is not None:
        from dbmemory.agent import item_memory

        parts.extend(
            item_memory.blocks(
                ctx.items, profile_section, _last_user_text(ctx.messages),
                model=_memory_model(ctx), timeout=cfg.timeout_s,
            )
        )
    elif profile_section:
        parts.append(profile_section)
    messages: list[dict[str, Any]] = ([{"role": "system", "content": "\n\n".join(parts)}] if parts else []) + history

    native = cfg.native_anthropic_memory_tool and is_anthropic_model(ctx.model)
    tool_list = memory_tools(ctx.tools, native_anthropic=native) if has_tool else [dict(t) for t in ctx.tools]
    kwargs = dict(cfg.model_kwargs)
    records: list[ToolCallRecord] = []
    model_calls: list[ModelCallRecord] = []
    limit_reached = False
    executed = 0
    final_call = False
    while True:
        call_kwargs = dict(kwargs)
        if final_call:
            call_kwargs["tool_choice"] = "none"
        t0 = time.perf_counter()
        try:
            completion: Completion = yield Model(messages, tool_list or None, call_kwargs)
        except Exception:
            if not final_call:
                raise
            # some providers refuse tool_choice: ask once more without it
            logger.info("the final call with tool_choice='none' failed; retrying without it", exc_info=True)
            call_kwargs.pop("tool_choice", None)
            completion = yield Model(messages, tool_list or None, call_kwargs)
        elapsed = time.perf_counter() - t0
        timings["model"] += elapsed
        mc = ModelCallRecord(ctx.model, completion.usage, elapsed, completion.finish_reason, len(completion.tool_calls))
        model_calls.append(mc)
        _emit(ctx, "model_call", mc)
        if not completion.tool_calls or final_call:
            answer = completion.text
            finish = completion.finish_reason
            messages.append({"role": "assistant", "content": answer})
            break
        messages.append(assistant_message(completion))
        t0 = time.perf_counter()
        for call in completion.tool_calls:
            if executed < cfg.max_tool_calls:
                record = yield Tool(call, memory_tool)
                executed += 1
            else:
                record = _limit_record(call, cfg.max_tool_calls)
                if not limit_reached:
                    limit_reached = True
                    logger.warning(
                        "turn of agent %r reached max_tool_calls=%d; asking the model to answer",
                        ctx.agent_code,
                        cfg.max_tool_calls,
                    )
                    _emit(ctx, "tool_limit", cfg.max_tool_calls)
            records.append(record)
            messages.append(tool_message(record.id, record.result, name=record.name))
            _emit(ctx, "tool_call", record)
        timings["tools"] += time.perf_counter() - t0
        if limit_reached:
            final_call = True
    _emit(ctx, "answer", answer)
    timings["total"] = time.perf_counter() - started
    return TurnResult(
        answer=answer,
        finish_reason=finish,
        tool_calls=records,
        model_calls=model_calls,
        timings=timings,
        tool_limit_reached=limit_reached,
        memory_tool=has_tool,
        profile_loaded=profile_loaded,
        messages=messages,
        memory_protocol=protocol_sent,
        org_memory_loaded=ctx.items is not None and bool(ctx.items.memory_on and ctx.items.org_memory.strip()),
        items_injected=tuple(ctx.items.injected) if ctx.items is not None else (),
    )


# ----------------------------------------------------------------------------- drivers


def _prepare(
    *,
    agent_code: str,
    user_id: str | None,
    messages: Sequence[Mapping[str, Any]],
    model: str,
    session_id: str | None,
    run_context: Mapping[str, object] | None,
    tools: Sequence[Mapping[str, Any]],
    tool_handler: ToolHandler | None,
    config: TurnConfig | None,
    on_event: EventHandler | None,
    step_logger: Any,
    org_id: str = "default",
) -> _Context:
    if not messages or not any(m.get("role") == "user" for m in messages):
        raise InvalidArgumentError("messages must hold at least one user message: the turn answers it")
    if not model:
        raise InvalidArgumentError("model must name a litellm model, e.g. 'gpt-4o-mini'")
    cfg = config or TurnConfig()
    ctx = _Context(
        agent_code=agent_code,
        user_id=user_id,
        session_id=session_id,
        run_context=run_context,
        messages=[dict(m) for m in messages],
        model=model,
        tools=list(tools),
        tool_handler=tool_handler,
        config=cfg,
        on_event=on_event,
        step_logger=step_logger,
        org_id=org_id,
    )
    ctx.memory_on = bool(cfg.user_memory_enabled and user_id is not None)
    ctx.items_on = bool(cfg.item_memory and user_id is not None)
    if ctx.memory_on:
        from dbmemory.profile.config import UserMemoryConfig

        ctx.memory_config = cfg.user_memory if cfg.user_memory is not None else UserMemoryConfig()
    return ctx


def _effective_mode(engine: Engine, given_engine: bool, mode: PostProcessMode) -> PostProcessMode:
    from dbmemory.db.dialect import is_memory_sqlite

    if mode in ("background",) and is_memory_sqlite(engine):
        # one shared DB-API connection: never use it from two threads at once
        return "inline" if given_engine else "deferred"
    return mode


def _wants_post_processing(ctx: _Context) -> bool:
    if ctx.load_failed:  # no memory update after a turn whose memory could not be loaded
        return False
    items_on = ctx.items is not None and ctx.items.memory_on
    return (ctx.memory_on or items_on) and ctx.config.post_process != "off"


def _consolidation(
    ctx: _Context, engine: Engine, answer: str, complete: CompleteFn, turn: TurnResult | None = None
) -> Callable[[], Any]:
    from dbmemory.agent.postprocess import consolidate

    user_text = _last_user_text(ctx.messages)

    def job() -> Any:
        result = _consolidate_profile() if ctx.memory_on else None
        if ctx.items is not None and ctx.items.memory_on:
            from dbmemory.agent import item_memory

            extraction = item_memory.after_turn(
                engine, ctx.items, user_id=ctx.user_id, chat_id=ctx.session_id,
                user_message=user_text, assistant_message=answer, complete=complete,
                model=ctx.model, now=ctx.config.now, timeout=ctx.config.timeout_s,
                profile_config=ctx.memory_config, skip_window=ctx.config.item_skip_window,
                earlier_messages=_earlier_user_texts(ctx.messages),
            )
            if turn is not None:
                turn.item_extraction = extraction
            _emit(ctx, "items_extracted", extraction)
        return result

    def _consolidate_profile() -> Any:
        _emit(ctx, "memory_updating")
        result = consolidate(
            engine,
            config=ctx.memory_config,
            model=_memory_model(ctx),
            user_id=ctx.user_id,
            state=ctx.state,
            user_message=user_text,
            assistant_message=answer,
            complete=complete,
            now=ctx.config.now,
            step_logger=ctx.step_logger,
            timeout=ctx.config.timeout_s,
        )
        _emit(ctx, "memory_updated", result)
        return result

    return job


def _check_turn_arguments(**arguments: Any) -> None:
    """Check every argument of :func:`run_turn`/:func:`arun_turn` before any SQL or model call
    (:func:`dbmemory.validate.check_turn_arguments`)."""
    from dbmemory.validate import check_turn_arguments

    arguments.pop("step_logger", None)
    from dbmemory.items.model import check_org

    check_org(arguments.pop("org_id", "default"))
    check_turn_arguments(arguments.pop("engine_or_conn"), **arguments)


def _on_failure(ctx: _Context) -> Callable[[BaseException], None]:
    return lambda exc: _emit(ctx, "memory_update_failed", exc)


def run_turn(
    engine_or_conn: Engine | Connection,
    *,
    agent_code: str,
    user_id: str | None,
    messages: Sequence[Mapping[str, Any]],
    model: str,
    session_id: str | None = None,
    run_context: Mapping[str, object] | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    tool_handler: ToolHandler | None = None,
    config: TurnConfig | None = None,
    complete: CompleteFn | None = None,
    on_event: EventHandler | None = None,
    step_logger: Any = None,
    org_id: str = "default",
) -> TurnResult:
    """Run one agent turn with database memory (see the module docs for the steps).

    Args:
        engine_or_conn: an Engine (the turn commits each database step and each MEMORY tool
            call at once, in short transactions of its own; none is open during a model call)
            or a Connection (every step joins the caller's transaction, nothing is committed,
            and what that transaction locks stays locked across the model calls: on SQLite the
            write lock, from the turn's first statement until the caller ends it; see the
            module docs).
        agent_code: the agent; its memory configuration decides whether it has the MEMORY tool.
        user_id: the signed-in user (profile and user-scoped stores), or None.
        messages: OpenAI-style chat messages ending with the user's message; a leading
            ``system`` message is the caller's system prompt.
        model: the litellm model name (also the profile's tokenizer and, by default, its
            consolidation model).
        session_id: the session id (session-scoped stores).
        run_context: the run's key/value pairs (context-scoped stores), e.g. ``{"document_id": "7"}``.
        tools: the caller's own tools (OpenAI function format), executed by ``tool_handler``.
        tool_handler: ``(name, arguments) -> str`` for the caller's tools.
        config: a :class:`TurnConfig`; None = defaults.
        complete: the model call (default :func:`dbmemory.llm.complete`); tests inject a fake,
            the CLI the scripted stand-in. Also used by the consolidation.
        on_event: callback receiving :class:`TurnEvent` as things happen (for display).
        step_logger: the host's :class:`~dbmemory.profile.events.StepLogger` for the profile's
            step events ("Loading context memory", "Updating your memory", "Review your context
            memory"), or None.
        org_id: the user's organisation (its settings, its organisation memory, the user's
            items in it), default ``"default"``.

    Returns:
        A :class:`TurnResult`; its ``post_processing`` is running in the background (default),
        already done (``inline``), waiting for ``start()`` (``deferred``), or None.

    Raises:
        NotFoundError, InvalidScopeError: from :func:`~dbmemory.stores.check_run_ready` (e.g. a
            context-scoped agent without its key), before any model call.
        InvalidArgumentError: no user message, no model, or a caller tool named ``memory``.
        ModelError: the model cannot be used: checked before the turn starts when the default
            model call is used (a missing provider key such as OPENAI_API_KEY, a model name
            litellm does not know, a local server that refuses connections), or the provider's
            error during the turn, as one line with the remedy (litellm's exception chained).
        Exception: what a caller's ``complete`` raises (memory writes already committed by the
            turn's earlier tool calls stay; with a Connection the caller decides).
    """
    _check_turn_arguments(**locals())
    ctx = _prepare(
        agent_code=agent_code,
        user_id=user_id,
        messages=messages,
        model=model,
        session_id=session_id,
        run_context=run_context,
        tools=tools,
        tool_handler=tool_handler,
        config=config,
        on_event=on_event,
        step_logger=step_logger,
        org_id=org_id,
    )
    if complete is None:
        from dbmemory.llm import complete as default_complete

        complete = default_complete
    from dbmemory.llm import preflight

    preflight(ctx.model, complete, model_kwargs=ctx.config.model_kwargs)  # a missing key fails here, at once
    given_engine = isinstance(engine_or_conn, Engine)
    if given_engine:
        engine = engine_or_conn
        with engine.connect() as conn:  # short transactions of its own, none across a model call
            result = drive_sync(_turn(ctx), TurnConnection(conn, owned=True), ctx, complete)
    else:
        conn = engine_or_conn
        engine = conn.engine
        result = drive_sync(_turn(ctx), TurnConnection(conn, owned=False), ctx, complete)
    if _wants_post_processing(ctx):
        mode = _effective_mode(engine, given_engine, ctx.config.post_process)
        handle = PostProcessing(
            _consolidation(ctx, engine, result.answer, complete, result), on_failure=_on_failure(ctx)
        )
        if mode == "background":
            handle.start()
        elif mode == "inline":
            handle.run()
        result.post_processing = handle
    return result


async def arun_turn(
    engine_or_conn: Engine | Connection,
    *,
    agent_code: str,
    user_id: str | None,
    messages: Sequence[Mapping[str, Any]],
    model: str,
    session_id: str | None = None,
    run_context: Mapping[str, object] | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    tool_handler: ToolHandler | None = None,
    config: TurnConfig | None = None,
    complete: Callable[..., Any] | None = None,
    on_event: EventHandler | None = None,
    step_logger: Any = None,
    org_id: str = "default",
) -> TurnResult:
    """Async twin of :func:`run_turn`: same arguments, steps, transactions and result.

    Model calls are awaited (default :func:`dbmemory.llm.acomplete`; ``complete`` may be sync or
    async); database work runs in a worker thread (``asyncio.to_thread``) so the event loop is
    not blocked; ``tool_handler`` may be a coroutine function. The post-processing is an asyncio
    task: ``await result.post_processing`` (or ignore it).
    """
    _check_turn_arguments(**locals())
    ctx = _prepare(
        agent_code=agent_code,
        user_id=user_id,
        messages=messages,
        model=model,
        session_id=session_id,
        run_context=run_context,
        tools=tools,
        tool_handler=tool_handler,
        config=config,
        on_event=on_event,
        step_logger=step_logger,
        org_id=org_id,
    )
    if complete is None:
        from dbmemory.llm import acomplete

        complete = acomplete
    from dbmemory.llm import preflight

    preflight(ctx.model, complete, model_kwargs=ctx.config.model_kwargs)
    given_engine = isinstance(engine_or_conn, Engine)
    if given_engine:
        engine = engine_or_conn
        conn = await asyncio.to_thread(engine.connect)
        try:
            result = await drive_async(_turn(ctx), TurnConnection(conn, owned=True), ctx, complete)
        finally:
            await asyncio.to_thread(conn.close)  # rolls back a transaction a failure left open
    else:
        conn = engine_or_conn
        engine = conn.engine
        result = await drive_async(_turn(ctx), TurnConnection(conn, owned=False), ctx, complete)
    if _wants_post_processing(ctx):
        mode = _effective_mode(engine, given_engine, ctx.config.post_process)
        handle = AsyncPostProcessing(
            _consolidation(ctx, engine, result.answer, sync_complete(complete), result), on_failure=_on_failure(ctx)
        )
        if mode == "background":
            handle.start()
        elif mode == "inline":
            await handle.wait()
        result.post_processing = handle
    return result


def protocol_mode_after(started_with: bool | None) -> str:
    """``TurnConfig.memory_protocol`` for a conversation's next turn: the first decides
    (``auto``); later turns keep what the first one sent (UC AI: an open conversation keeps the
    system prompt it started with)."""
    if started_with is None:
        return "auto"
    return "include" if started_with else "omit"
