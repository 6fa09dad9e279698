"""The drivers of a turn: they run the operations the turn generator yields (internal).

:func:`dbmemory.agent.turn.run_turn` and :func:`~dbmemory.agent.turn.arun_turn` are written once,
as a generator that yields operations (a database step, a model call, a tool call); the sync
driver runs them in the caller's thread, the async one awaits model calls and moves database
work to a worker thread. An operation's exception is thrown back into the generator, so the
turn's own ``try`` blocks see it.

Transactions are the driver's business (:class:`TurnConnection`): when the turn owns them (it was
given an Engine), every database step and every MEMORY tool call runs in a short transaction of
its own that commits before the driver goes on, so no transaction (and, on SQLite, no write
lock) is open while a model or a caller's tool runs. When the turn was given the caller's
Connection, every step runs in the caller's transaction and nothing is committed.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.engine import Connection

from dbmemory import llm
from dbmemory.agent.litellm_tools import (
    ERROR_PREFIX,
    MEMORY_TOOL_NAME,
    ToolCallRecord,
    caller_result_text,
    clip_result,
    decode_arguments,
    execute_tool_call,
    tool_call_parts,
)
from dbmemory.db.dialect.outcome import forget_audit_row
from dbmemory.llm import CompleteFn, Completion
from dbmemory.store.units import (
    OUTCOME_UNKNOWN,
    clear_single_unit,
    commit_failed,
    mark_single_unit,
    resolved_commit,
)

__all__ = ["Db", "Model", "Tool", "TurnConnection", "drive_sync", "drive_async", "sync_complete"]
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


NOT_SAVED = (
    "the change could not be committed ({reason}); nothing was saved: run the command again"
)
"""Replaces a MEMORY tool answer when the turn's own commit of that call failed."""


class TurnConnection:
    """The turn's connection and who owns its transactions.

    Args:
        conn: the connection every database step of the turn uses.
        owned: True when the turn opened ``conn`` itself (it was given an Engine): then each
            step runs in its own transaction, committed at once (rolled back when it raises).
            False (the caller's Connection): each step runs in the caller's transaction and
            nothing is committed or rolled back here.
    """

    def __init__(self, conn: Connection, *, owned: bool) -> None:
        self.conn = conn
        self.owned = owned

    def idle(self) -> None:
        """Called before a model call or a caller's tool: no owned transaction may stay open."""
        if self.owned and self.conn.in_transaction():
            # cannot happen (every step commits); never hold a lock across a model call
            logger.warning("a transaction of the turn was still open before a model call; committing it")
            self.conn.commit()

    def run(self, fn: Callable[[Connection], Any]) -> Any:
        """``fn(conn)`` in a transaction of its own (owned) or in the caller's."""
        if not self.owned:
            return fn(self.conn)
        self.idle()
        with self.conn.begin():
            return fn(self.conn)

    def run_tool(self, fn: Callable[[], ToolCallRecord]) -> ToolCallRecord:
        """A MEMORY tool call in a transaction of its own (owned) or in the caller's.

        The tool never raises; when the turn's own commit fails, the tool's answer (which said
        the change was made) is replaced by an error text saying nothing was saved.
        """
        if not self.owned:
            return fn()
        self.idle()
        trans = self.conn.begin()
        forget_audit_row(self.conn)
        mark_single_unit(self.conn, trans)  # the call is the transaction's one unit: no savepoint
        try:
            record = fn()
        except BaseException:
            trans.rollback()
            raise
        finally:
            clear_single_unit(self.conn)
        try:
            if trans.is_active:
                resolved_commit(self.conn, trans.commit)  # a lost reply: saved, or not, or unknown
                return record
            if self.conn.get_transaction() is trans:
                trans.rollback()  # the tool's failure ended the transaction; its answer says so
            return record
        except Exception as exc:  # the commit failed: the change is not there, or may be
            logger.warning("committing the turn's memory tool call failed: %s", type(exc).__name__, exc_info=True)
            try:
                trans.rollback()
            except Exception:
                logger.debug("rollback after a failed commit failed", exc_info=True)
            try:
                error = commit_failed(exc, "committing a memory change")
            except Exception:
                error = None
            if error is not None and error.code in (OUTCOME_UNKNOWN, "commit_not_saved"):
                text = error.message  # the connection was lost mid-COMMIT: it may be saved
            else:
                reason = error.message if error is not None else "the database refused the commit"
                text = NOT_SAVED.format(reason=reason)
            return replace(record, result=ERROR_PREFIX + text, is_error=True)


def _is_memory_call(op: Tool) -> bool:
    return op.memory_tool is not None and tool_call_parts(op.call)[1] == MEMORY_TOOL_NAME


def drive_sync(gen: Generator[Any, Any, Any], db: TurnConnection, ctx: Any, complete: CompleteFn) -> Any:
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
                value = db.run(op.fn)
            elif isinstance(op, Model):
                db.idle()
                value = complete(ctx.model, op.messages, tools=op.tools, timeout=ctx.config.timeout_s, **op.kwargs)
            else:
                call = op

                def execute(call: Tool = call) -> ToolCallRecord:
                    return execute_tool_call(
                        call.call,
                        call.memory_tool,
                        tool_handler=ctx.tool_handler,
                        max_result_chars=ctx.config.max_tool_result_chars,
                    )

                if _is_memory_call(op):
                    value = db.run_tool(execute)
                else:
                    db.idle()
                    value = execute()
        except Exception as exc:
            error = exc


def sync_complete(complete: Callable[..., Any]) -> CompleteFn:
    """A sync model call for the consolidation thread from a possibly-async ``complete``."""
    if complete is llm.acomplete:
        return llm.complete
    if not (inspect.iscoroutinefunction(complete) or inspect.iscoroutinefunction(type(complete).__call__)):
        return complete

    def run(*args: Any, **kwargs: Any) -> Completion:
        done: Completion = asyncio.run(complete(*args, **kwargs))  # the consolidation runs in a worker thread
        return done

    return run


async def drive_async(gen: Generator[Any, Any, Any], db: TurnConnection, ctx: Any, complete: Callable[..., Any]) -> Any:
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
                value = await asyncio.to_thread(db.run, op.fn)
            elif isinstance(op, Model):
                if db.owned:
                    await asyncio.to_thread(db.idle)
                value = complete(ctx.model, op.messages, tools=op.tools, timeout=ctx.config.timeout_s, **op.kwargs)
                if inspect.isawaitable(value):
                    value = await value
            else:
                value = await _execute_async(op, ctx, db)
        except Exception as exc:
            error = exc


async def _execute_async(op: Tool, ctx: Any, db: TurnConnection) -> ToolCallRecord:
    call_id, name, arguments = tool_call_parts(op.call)
    handler = ctx.tool_handler

    def execute() -> ToolCallRecord:
        return execute_tool_call(
            op.call, op.memory_tool, tool_handler=handler, max_result_chars=ctx.config.max_tool_result_chars
        )

    if _is_memory_call(op):
        return await asyncio.to_thread(db.run_tool, execute)
    if db.owned:
        await asyncio.to_thread(db.idle)
    if name == MEMORY_TOOL_NAME or handler is None or not inspect.iscoroutinefunction(handler):
        return await asyncio.to_thread(execute)
    started = time.perf_counter()
    try:
        result = caller_result_text(await handler(name, decode_arguments(arguments)))
    except Exception as exc:
        logger.warning("caller tool %r failed: %s", name, exc, exc_info=True)
        result = f"Error: the tool {name!r} failed ({type(exc).__name__}); try another approach"
    text, clipped = clip_result(result, ctx.config.max_tool_result_chars)
    return ToolCallRecord(call_id, name, arguments, text, text.startswith("Error: "), time.perf_counter() - started, clipped)
