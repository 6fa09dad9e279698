"""One agent turn with database memory: :func:`run_turn` and :func:`arun_turn`.

A turn:

1. checks that the agent's store can be named (:func:`dbmemory.store.resolve.check_run_ready`): a
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
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import llm
from dbmemory.agent import item_memory
from dbmemory.agent._drivers import TurnConnection, drive_async, drive_sync, sync_complete
from dbmemory.agent._turn_loop import (
    Context,
    earlier_user_texts,
    emit,
    last_user_text,
    memory_model,
    turn_steps,
    turn_user,
)
from dbmemory.agent.checks import check_turn_arguments
from dbmemory.agent.litellm_tools import ToolHandler
from dbmemory.agent.postprocess import AsyncPostProcessing, PostProcessing, consolidate
from dbmemory.agent.turn_types import (
    EventHandler,
    PostProcessMode,
    ProtocolMode,
    TurnConfig,
    TurnResult,
)
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.engine import connect
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.model import check_org
from dbmemory.llm import CompleteFn, acomplete, preflight
from dbmemory.profile.config import UserMemoryConfig

__all__ = [
    "run_turn",
    "arun_turn",
    "protocol_mode_after",
]

logger = logging.getLogger(__name__)


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
) -> Context:
    if not messages or not any(m.get("role") == "user" for m in messages):
        raise InvalidArgumentError("messages must hold at least one user message: the turn answers it")
    if not model:
        raise InvalidArgumentError("model must name a litellm model, e.g. 'gpt-4o-mini'")
    cfg = config or TurnConfig()
    ctx = Context(
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
        ctx.memory_config = cfg.user_memory if cfg.user_memory is not None else UserMemoryConfig()
    return ctx


def _effective_mode(engine: Engine, given_engine: bool, mode: PostProcessMode) -> PostProcessMode:
    if mode in ("background",) and is_memory_sqlite(engine):
        # one shared DB-API connection: never use it from two threads at once
        return "inline" if given_engine else "deferred"
    return mode


def _wants_post_processing(ctx: Context) -> bool:
    if ctx.load_failed:  # no memory update after a turn whose memory could not be loaded
        return False
    items_on = ctx.items is not None and ctx.items.memory_on
    return (ctx.memory_on or items_on) and ctx.config.post_process != "off"


def _consolidation(
    ctx: Context, engine: Engine, answer: str, complete: CompleteFn, turn: TurnResult | None = None
) -> Callable[[], Any]:
    user_text = last_user_text(ctx.messages)

    def job() -> Any:
        result = _consolidate_profile() if ctx.memory_on else None
        if ctx.items is not None and ctx.items.memory_on:
            extraction = item_memory.after_turn(
                engine, ctx.items, user_id=turn_user(ctx), chat_id=ctx.session_id,
                user_message=user_text, assistant_message=answer, complete=complete,
                model=ctx.model, now=ctx.config.now, timeout=ctx.config.timeout_s,
                profile_config=ctx.memory_config, skip_window=ctx.config.item_skip_window,
                earlier_messages=earlier_user_texts(ctx.messages),
                keep_episode=ctx.config.memory_search,
            )
            if turn is not None:
                turn.item_extraction = extraction
            emit(ctx, "items_extracted", extraction)
        return result

    def _consolidate_profile() -> Any:
        emit(ctx, "memory_updating")
        result = consolidate(
            engine,
            config=ctx.memory_config,
            model=memory_model(ctx),
            user_id=turn_user(ctx),
            state=ctx.state,
            user_message=user_text,
            assistant_message=answer,
            complete=complete,
            now=ctx.config.now,
            step_logger=ctx.step_logger,
            timeout=ctx.config.timeout_s,
        )
        emit(ctx, "memory_updated", result)
        return result

    return job


def _check_turn_arguments(**arguments: Any) -> None:
    """Check every argument of :func:`run_turn`/:func:`arun_turn` before any SQL or model call
    (:func:`dbmemory.agent.checks.check_turn_arguments`)."""
    arguments.pop("step_logger", None)
    check_org(arguments.pop("org_id", "default"))
    check_turn_arguments(arguments.pop("engine_or_conn"), **arguments)


def _on_failure(ctx: Context) -> Callable[[BaseException], None]:
    return lambda exc: emit(ctx, "memory_update_failed", exc)


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
        on_event: callback receiving :class:`~dbmemory.agent.turn_types.TurnEvent` as things happen (for display).
        step_logger: the host's :class:`~dbmemory.profile.events.StepLogger` for the profile's
            step events ("Loading context memory", "Updating your memory", "Review your context
            memory"), or None.
        org_id: the user's organisation (its settings, its organisation memory, the user's
            items in it), default ``"default"``.

    Returns:
        A :class:`TurnResult`; its ``post_processing`` is running in the background (default),
        already done (``inline``), waiting for ``start()`` (``deferred``), or None.

    Raises:
        NotFoundError, InvalidScopeError: from :func:`~dbmemory.store.resolve.check_run_ready` (e.g. a
            context-scoped agent without its key), before any model call.
        InvalidArgumentError: no user message, no model, or a caller tool named ``memory``.
        ModelError: the model cannot be used: checked before the turn starts when the default
            model call is used (a missing provider key such as OPENAI_API_KEY, a model name
            litellm does not know, a local server that refuses connections), or the provider's
            error during the turn, as one line with the remedy (litellm's exception chained).
        StorageError, ConflictError: a database failure outside the MEMORY tool (the tool
            answers its own failures to the model as text): the engine cannot connect (code
            ``connect_failed``, naming host:port/database), its pool is exhausted (code
            ``pool_exhausted``), a statement timed out; the driver's error is chained.
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
        complete = llm.complete  # looked up per call: a host may wrap dbmemory.llm.complete
    preflight(ctx.model, complete, model_kwargs=ctx.config.model_kwargs)  # a missing key fails here, at once
    caller_conn = None if isinstance(engine_or_conn, Engine) else engine_or_conn
    engine = engine_or_conn if isinstance(engine_or_conn, Engine) else engine_or_conn.engine
    given_engine = caller_conn is None
    result: TurnResult
    try:
        if caller_conn is None:
            # short transactions of its own, none across a model call
            with connect(engine, "starting the turn") as conn:
                result = drive_sync(turn_steps(ctx), TurnConnection(conn, owned=True), ctx, complete)
        else:
            result = drive_sync(turn_steps(ctx), TurnConnection(caller_conn, owned=False), ctx, complete)
    except sa.exc.SQLAlchemyError as exc:  # a database failure outside the MEMORY tool
        raise translate_db_error(exc, "running the turn", target=engine) from exc
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
        complete = acomplete
    preflight(ctx.model, complete, model_kwargs=ctx.config.model_kwargs)
    caller_conn = None if isinstance(engine_or_conn, Engine) else engine_or_conn
    engine = engine_or_conn if isinstance(engine_or_conn, Engine) else engine_or_conn.engine
    given_engine = caller_conn is None
    result: TurnResult
    try:
        if caller_conn is None:
            conn = await asyncio.to_thread(connect, engine, "starting the turn")
            try:
                result = await drive_async(
                    turn_steps(ctx), TurnConnection(conn, owned=True), ctx, complete
                )
            finally:
                await asyncio.to_thread(conn.close)  # rolls back a transaction a failure left open
        else:
            result = await drive_async(
                turn_steps(ctx), TurnConnection(caller_conn, owned=False), ctx, complete
            )
    except sa.exc.SQLAlchemyError as exc:  # a database failure outside the MEMORY tool
        raise translate_db_error(exc, "running the turn", target=engine) from exc
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


def protocol_mode_after(started_with: bool | None) -> ProtocolMode:
    """``TurnConfig.memory_protocol`` for a conversation's next turn: the first decides
    (``auto``); later turns keep what the first one sent (UC AI: an open conversation keeps the
    system prompt it started with)."""
    if started_with is None:
        return "auto"
    return "include" if started_with else "omit"
