"""The turn itself, written once as a generator of operations (internal).

:func:`turn_steps` yields :class:`~dbmemory.agent._drivers.Db`, :class:`~dbmemory.agent._drivers.Model`
and :class:`~dbmemory.agent._drivers.Tool` operations; the sync and async drivers of
:mod:`dbmemory.agent._drivers` run them, so :func:`dbmemory.agent.turn.run_turn` and
:func:`~dbmemory.agent.turn.arun_turn` are one implementation (one loop, two drivers, never two
copies of the loop). The steps, the MEMORY PROTOCOL rule and the transactions are described in
:mod:`dbmemory.agent.turn`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from dbmemory.agent import item_memory
from dbmemory.agent._drivers import Db, Model, Tool
from dbmemory.agent.injection import load_items, load_profile, memory_blocks, search_memory_block
from dbmemory.agent.litellm_tools import (
    ToolCallRecord,
    ToolHandler,
    assistant_message,
    is_anthropic_model,
    memory_tools,
    search_tool_record,
    tool_call_parts,
    tool_message,
)
from dbmemory.agent.turn_types import (
    EventHandler,
    ModelCallRecord,
    ProtocolMode,
    TurnConfig,
    TurnEvent,
    TurnResult,
)
from dbmemory.errors import InvalidArgumentError, InvalidScopeError, NotFoundError
from dbmemory.items.search_tool import SEARCH_TOOL_NAME, search_tool_spec
from dbmemory.llm import Completion
from dbmemory.tool.memory_tool import MemoryTool
from dbmemory.tool.protocol import get_memory_protocol, has_memory_protocol

__all__ = [
    "Context",
    "emit",
    "memory_model",
    "last_user_text",
    "earlier_user_texts",
    "turn_steps",
]


logger = logging.getLogger("dbmemory.agent.turn")

# ----------------------------------------------------------------------------- operations
# The turn is written once, as a generator that yields operations; a sync and an async driver
# run them. This keeps run_turn and arun_turn one implementation.


@dataclass
class Context:
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


def emit(ctx: Context, kind: str, data: object = None) -> None:
    if ctx.on_event is None:
        return
    try:
        ctx.on_event(TurnEvent(kind, data))
    except Exception:  # a display callback must never break the turn
        logger.warning("turn event handler failed for %s", kind, exc_info=True)


def memory_model(ctx: Context) -> str:
    """The profile's effective model (tokenizer and consolidation calls)."""
    cfg = ctx.memory_config
    if cfg is not None:
        return cfg.effective_model(ctx.model) or ctx.model
    return ctx.model


def _memory_tool(conn: Connection, ctx: Context) -> Any:
    """The turn's MemoryTool (its constructor runs check_run_ready), or None when the agent has no memory."""
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


def turn_user(ctx: Context) -> str:
    """The turn's user id, for the steps that run only with a user (profile, items, search:
    :func:`~dbmemory.agent.checks.check_turn_arguments` turns them off without one).

    Raises:
        InvalidArgumentError: the turn has no user (a step ran that needs one: a bug).
    """
    if ctx.user_id is None:
        raise InvalidArgumentError("this memory step needs user_id, and the turn has none")
    return ctx.user_id


def _search_call(conn: Connection, *, ctx: Context, call: Any) -> ToolCallRecord:
    """One ``memory_search`` call of the model, on the turn's connection."""
    return search_tool_record(
        conn, call, user_id=turn_user(ctx), org_id=ctx.org_id, now=ctx.config.now,
        max_result_chars=ctx.config.max_tool_result_chars,
    )


def _load(conn: Connection, ctx: Context) -> Any:
    return load_profile(conn, turn_user(ctx), config=ctx.memory_config, model=memory_model(ctx), step_logger=ctx.step_logger)


def _split_system(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    system_parts: list[str] = []
    rest: list[dict[str, Any]] = []
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
    if mode == "omit" or has_memory_protocol(system):
        return False
    return mode == "include" or not _ongoing(history)


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
            return str(content or "")
    return ""


def earlier_user_texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text of every user message but the last, oldest first."""
    texts = [last_user_text([m]) for m in messages if m.get("role") == "user"]
    return texts[:-1]


def _limit_record(call: object, limit: int) -> ToolCallRecord:
    call_id, name, arguments = tool_call_parts(call)
    text = (
        f"Error: the limit of {limit} tool calls for this turn is reached; this call was not run. "
        "Answer the user now with what you have."
    )
    return ToolCallRecord(call_id, name, arguments, text, True, 0.0)


@dataclass
class _Progress:
    """What the turn's loop has done so far: timings in seconds, the model calls, the tool calls
    (run or refused over ``max_tool_calls``) and how many of them ran."""

    timings: dict[str, float]
    model_calls: list[ModelCallRecord] = field(default_factory=list)
    records: list[ToolCallRecord] = field(default_factory=list)
    executed: int = 0
    limit_reached: bool = False


@dataclass(frozen=True)
class _Prompt:
    """The messages the model is sent first, and what their system prompt holds."""

    messages: list[dict[str, Any]]
    protocol_sent: bool
    profile_loaded: bool


Steps = Generator[Any, Any, Any]
"""A part of the turn: yields Db, Model and Tool operations, returns its result."""


def _offers_search(ctx: Context, has_tool: bool, tools: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the turn offers ``memory_search`` next to the MEMORY tool: a user, the item
    memory loaded with the switch on, ``memory_search`` on, and no caller tool of that name
    (the caller's own tool then answers it)."""
    if not (has_tool and ctx.config.memory_search and ctx.user_id is not None):
        return False
    if ctx.items is None or not ctx.items.memory_on:
        return False
    names = {(t.get("function") or {}).get("name") or t.get("name") for t in tools}
    return SEARCH_TOOL_NAME not in names


def turn_steps(ctx: Context) -> Generator[Any, Any, TurnResult]:
    """One turn of the agent, as operations for a driver (:mod:`dbmemory.agent._drivers`).

    Steps: build the MEMORY tool (``None`` when the agent has no memory); load the
    organisation memory and items (``ctx.items_on``) and the user's profile (``ctx.memory_on``),
    each failure logged and the turn run without it; inject the memory into the system prompt
    (:func:`_inject_memory`); then call the model and run its tool calls until it answers (past
    ``max_tool_calls`` the calls are refused and the model is asked once more, with
    ``tool_choice="none"``). Returns the :class:`TurnResult`; timings are in seconds.
    """
    cfg = ctx.config
    started = time.perf_counter()
    progress = _Progress({"ready": 0.0, "load": 0.0, "model": 0.0, "tools": 0.0, "total": 0.0})

    memory_tool = yield Db(lambda conn: _memory_tool(conn, ctx))
    has_tool = memory_tool is not None
    progress.timings["ready"] = time.perf_counter() - started
    if ctx.items_on:
        yield from _load_items(ctx, progress)
    if ctx.memory_on:
        yield from _load_profile(ctx, progress)

    prompt = _inject_memory(ctx, has_tool)
    messages = prompt.messages
    native = cfg.native_anthropic_memory_tool and is_anthropic_model(ctx.model)
    tool_list = memory_tools(ctx.tools, native_anthropic=native) if has_tool else [dict(t) for t in ctx.tools]
    search_on = _offers_search(ctx, has_tool, tool_list)
    if search_on:
        tool_list.append(search_tool_spec())
    final_call = False
    while True:
        completion = yield from _call_model(ctx, messages, tool_list, final_call, progress)
        if not completion.tool_calls or final_call:
            answer = completion.text
            messages.append({"role": "assistant", "content": answer})
            break
        messages.append(assistant_message(completion))
        yield from _run_tool_calls(ctx, completion, memory_tool, messages, progress, search_on=search_on)
        if progress.limit_reached:
            final_call = True
    emit(ctx, "answer", answer)
    progress.timings["total"] = time.perf_counter() - started
    return TurnResult(
        answer=answer,
        finish_reason=completion.finish_reason,
        tool_calls=progress.records,
        model_calls=progress.model_calls,
        timings=progress.timings,
        tool_limit_reached=progress.limit_reached,
        memory_tool=has_tool,
        profile_loaded=prompt.profile_loaded,
        messages=messages,
        memory_protocol=prompt.protocol_sent,
        org_memory_loaded=ctx.items is not None and bool(ctx.items.memory_on and ctx.items.org_memory.strip()),
        items_injected=tuple(ctx.items.injected) if ctx.items is not None else (),
    )


def _load_items(ctx: Context, progress: _Progress) -> Steps:
    """Load the organisation memory and the user's items into ``ctx.items``; a failure is
    logged and counted, and the turn runs without them. The memory switch off turns the profile
    off too (``ctx.memory_on``)."""
    t0 = time.perf_counter()
    try:
        ctx.items = yield Db(
            lambda conn: load_items(conn, org_id=ctx.org_id, user_id=turn_user(ctx), now=ctx.config.now)
        )
    except Exception:
        logger.warning("loading the organisation memory and items failed; the turn runs without them", exc_info=True)
        item_memory.count_failure("load")
    else:
        if not ctx.items.memory_on:
            ctx.memory_on = False  # the memory switch is off: no profile either, all kept
        elif ctx.config.memory_search:
            yield Db(
                lambda conn: search_memory_block(
                    conn, ctx.items, user_id=turn_user(ctx), message=last_user_text(ctx.messages),
                    model=memory_model(ctx), now=ctx.config.now,
                )
            )
        emit(ctx, "items_loaded", ctx.items)
    progress.timings["load"] += time.perf_counter() - t0


def _load_profile(ctx: Context, progress: _Progress) -> Steps:
    """Load the user's profile into ``ctx.state``; on a failure set ``ctx.load_failed`` (the
    prompt then says the memory could not be loaded) and turn consolidation off for this turn."""
    emit(ctx, "memory_loading")
    t0 = time.perf_counter()
    try:
        ctx.state = yield Db(lambda conn: _load(conn, ctx))
    except Exception as exc:
        # not an empty memory: say so to the model and skip consolidation for this turn
        logger.warning("loading the user profile failed; the turn runs without it", exc_info=True)
        ctx.memory_on = False
        ctx.load_failed = True
        emit(ctx, "memory_load_failed", exc)
    else:
        emit(ctx, "memory_loaded", ctx.state)
    progress.timings["load"] += time.perf_counter() - t0


def _inject_memory(ctx: Context, has_tool: bool) -> _Prompt:
    """The memory injection: the caller's system prompt, then the MEMORY PROTOCOL block (when
    the turn has the tool and wants it, :func:`_wants_protocol`), then the memory: the items'
    blocks around the profile section when items are loaded, else the profile section alone
    (:data:`dbmemory.agent.injection.LOAD_FAILED_NOTE` in its place when loading the profile
    failed), assembled by :func:`dbmemory.agent.injection.memory_blocks`; the rest of the
    caller's messages follow."""
    system, history = _split_system(ctx.messages)
    parts = [system] if system.strip() else []
    if has_tool and _wants_protocol(ctx.config.memory_protocol, system, history):
        parts.append(get_memory_protocol())
    protocol_sent = has_memory_protocol("\n\n".join(parts))
    state = ctx.state if ctx.memory_on else None
    profile_loaded = state is not None and bool(state.body.strip())
    parts.extend(
        memory_blocks(
            ctx.items, state, last_user_text(ctx.messages),
            model=memory_model(ctx), timeout=ctx.config.timeout_s, load_failed=ctx.load_failed,
        )
    )
    messages: list[dict[str, Any]] = ([{"role": "system", "content": "\n\n".join(parts)}] if parts else []) + history
    return _Prompt(messages, protocol_sent, profile_loaded)


def _call_model(
    ctx: Context,
    messages: list[dict[str, Any]],
    tool_list: list[dict[str, Any]],
    final_call: bool,
    progress: _Progress,
) -> Generator[Any, Any, Completion]:
    """One model call, recorded in ``progress``. The final call (after the tool-call limit)
    asks for no tool (``tool_choice="none"``) and, if the provider refuses that, once more
    without it."""
    call_kwargs = dict(ctx.config.model_kwargs)
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
    progress.timings["model"] += elapsed
    mc = ModelCallRecord(ctx.model, completion.usage, elapsed, completion.finish_reason, len(completion.tool_calls))
    progress.model_calls.append(mc)
    emit(ctx, "model_call", mc)
    return completion


def _run_tool_calls(
    ctx: Context,
    completion: Completion,
    memory_tool: Any,
    messages: list[dict[str, Any]],
    progress: _Progress,
    *,
    search_on: bool = False,
) -> Steps:
    """Run the tool calls of ``completion`` in order, each answer appended to ``messages``;
    the calls past ``max_tool_calls`` are not run but answered with a limit error (logged and
    emitted once per turn). With ``search_on``, ``memory_search`` calls run on the turn's
    connection (:func:`~dbmemory.agent.litellm_tools.search_tool_record`)."""
    limit = ctx.config.max_tool_calls
    t0 = time.perf_counter()
    for call in completion.tool_calls:
        if progress.executed < limit:
            if search_on and tool_call_parts(call)[1] == SEARCH_TOOL_NAME:
                record = yield Db(functools.partial(_search_call, ctx=ctx, call=call))
            else:
                record = yield Tool(call, memory_tool)
            progress.executed += 1
        else:
            record = _limit_record(call, limit)
            if not progress.limit_reached:
                progress.limit_reached = True
                logger.warning(
                    "turn of agent %r reached max_tool_calls=%d; asking the model to answer",
                    ctx.agent_code,
                    limit,
                )
                emit(ctx, "tool_limit", limit)
        progress.records.append(record)
        messages.append(tool_message(record.id, record.result, name=record.name))
        emit(ctx, "tool_call", record)
    progress.timings["tools"] += time.perf_counter() - t0
