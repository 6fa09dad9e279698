"""The drivers of a turn: they run the operations the turn generator yields (internal).

:func:`dbmemory.agent.turn.run_turn` and :func:`~dbmemory.agent.turn.arun_turn` are written once,
as a generator that yields operations (a database step, a model call, a tool call); the sync
driver runs them in the caller's thread, the async one awaits model calls and moves database
work to a worker thread. An operation's exception is thrown back into the generator, so the
turn's own ``try`` blocks see it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from dbmemory.agent.litellm_tools import (
    MEMORY_TOOL_NAME,
    ToolCallRecord,
    caller_result_text,
    clip_result,
    decode_arguments,
    execute_tool_call,
    tool_call_parts,
)
from dbmemory.llm import Completion, CompleteFn

__all__ = ["Db", "Model", "Tool", "drive_sync", "drive_async", "sync_complete"]
# the drivers return what the generator returns: a dbmemory.agent.turn.TurnResult

logger = logging.getLogger("dbmemory.agent.turn")


@dataclass
class Db:
    """Run ``fn(conn)`` on the turn's connection."""

    fn: Callable[[Connection], Any]


@dataclass
class Model:
    """Call the model with these messages, tools and keyword arguments."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    kwargs: dict[str, Any]


@dataclass
class Tool:
    """Execute one tool call."""

    call: object
    memory_tool: Any


def drive_sync(gen: Generator[Any, Any, Any], conn: Connection, ctx: Any, complete: CompleteFn) -> Any:
    """Run the turn's operations in this thread; an operation's exception is thrown into the turn."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            op = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        try:
            if isinstance(op, Db):
                value = op.fn(conn)
            elif isinstance(op, Model):
                value = complete(ctx.model, op.messages, tools=op.tools, timeout=ctx.config.timeout_s, **op.kwargs)
            else:
                value = execute_tool_call(
                    op.call,
                    op.memory_tool,
                    tool_handler=ctx.tool_handler,
                    max_result_chars=ctx.config.max_tool_result_chars,
                )
        except Exception as exc:
            error = exc


def sync_complete(complete: Callable[..., Any]) -> CompleteFn:
    """A sync model call for the consolidation thread from a possibly-async ``complete``."""
    from dbmemory import llm

    if complete is llm.acomplete:
        return llm.complete
    if not (inspect.iscoroutinefunction(complete) or inspect.iscoroutinefunction(getattr(complete, "__call__", None))):
        return complete

    def run(*args: Any, **kwargs: Any) -> Completion:
        return asyncio.run(complete(*args, **kwargs))  # the consolidation runs in a worker thread

    return run


async def drive_async(gen: Generator[Any, Any, Any], conn: Connection, ctx: Any, complete: Callable[..., Any]) -> Any:
    """Run the turn's operations: models awaited, database work in a worker thread."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            op = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        try:
            if isinstance(op, Db):
                value = await asyncio.to_thread(op.fn, conn)
            elif isinstance(op, Model):
                value = complete(ctx.model, op.messages, tools=op.tools, timeout=ctx.config.timeout_s, **op.kwargs)
                if inspect.isawaitable(value):
                    value = await value
            else:
                value = await _execute_async(op, ctx)
        except Exception as exc:
            error = exc


async def _execute_async(op: Tool, ctx: Any) -> ToolCallRecord:
    call_id, name, arguments = tool_call_parts(op.call)
    handler = ctx.tool_handler
    if name == MEMORY_TOOL_NAME or handler is None or not inspect.iscoroutinefunction(handler):
        return await asyncio.to_thread(
            execute_tool_call, op.call, op.memory_tool, tool_handler=handler, max_result_chars=ctx.config.max_tool_result_chars
        )
    started = time.perf_counter()
    try:
        result = caller_result_text(await handler(name, decode_arguments(arguments)))
    except Exception as exc:
        logger.warning("caller tool %r failed: %s", name, exc, exc_info=True)
        result = f"Error: the tool {name!r} failed ({type(exc).__name__}); try another approach"
    text, clipped = clip_result(result, ctx.config.max_tool_result_chars)
    return ToolCallRecord(call_id, name, arguments, text, text.startswith("Error: "), time.perf_counter() - started, clipped)
