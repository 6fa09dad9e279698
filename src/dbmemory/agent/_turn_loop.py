"""The turn itself, written once as a generator of operations (internal).

:func:`_turn` yields :class:`~dbmemory.agent._drivers.Db`, :class:`~dbmemory.agent._drivers.Model`
and :class:`~dbmemory.agent._drivers.Tool` operations; the sync and async drivers of
:mod:`dbmemory.agent._drivers` run them, so :func:`dbmemory.agent.turn.run_turn` and
:func:`~dbmemory.agent.turn.arun_turn` are one implementation (STYLE rule 20). The steps, the
MEMORY PROTOCOL rule and the transactions are described in :mod:`dbmemory.agent.turn`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from dbmemory.agent._drivers import Db, Model, Tool
from dbmemory.agent.litellm_tools import (
    ToolCallRecord,
    ToolHandler,
    assistant_message,
    is_anthropic_model,
    memory_tools,
    tool_call_parts,
    tool_message,
)
from dbmemory.agent.turn_types import EventHandler, ModelCallRecord, ProtocolMode, TurnConfig, TurnEvent, TurnResult
from dbmemory.errors import InvalidScopeError, NotFoundError
from dbmemory.llm import Completion

__all__: list[str] = []  # internal: see dbmemory.agent.turn

logger = logging.getLogger("dbmemory.agent.turn")

LOAD_FAILED_NOTE = (
    "## What I know about you\n\n"
    "(The memory of this user could not be loaded for this turn. That is not an empty memory: do "
    "not tell the user that you know nothing about them.)"
)
"""Put in the system prompt instead of the profile when loading it failed."""


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
