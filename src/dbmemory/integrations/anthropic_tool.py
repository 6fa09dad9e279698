"""The Anthropic SDK's memory tool, backed by dbmemory.

Code written for the SDK's file-system memory tool (``BetaLocalFilesystemMemoryTool``) switches
to the database by changing one class::

    from anthropic import Anthropic
    from dbmemory.db.engine import create_engine
    from dbmemory.integrations.anthropic_tool import DbMemoryTool

    memory = DbMemoryTool(create_engine(), "SUPPORT", user_id="u-42")   # was: BetaLocalFilesystemMemoryTool()
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=1024, tools=[memory],
        messages=[{"role": "user", "content": "Remember that I prefer tea."}],
    )

:class:`DbMemoryTool` subclasses the SDK's ``BetaAbstractMemoryTool`` (``anthropic.lib.tools``):
it offers Anthropic's native ``memory_20250818`` tool and answers each command with
:class:`dbmemory.tool.MemoryTool`. A failure raises the SDK's ``ToolError`` with dbmemory's text
(without the ``"Error: "`` marker), so the SDK's runner returns it with ``is_error: true``, as it
does for its own tool. Texts follow the SDK's wording where it has one.

Transactions: given an Engine, **each command runs in its own transaction and commits it**;
given a Connection, commands join the caller's transaction and nothing commits (the caller's
rollback removes the writes). :class:`AsyncDbMemoryTool` is the ``BetaAsyncAbstractMemoryTool``
form; it runs the same work in a worker thread.

Needs the ``anthropic`` extra (``pip install 'dbmemory[anthropic]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Connection, Engine

from dbmemory.errors import MissingDependencyError

try:
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "the Anthropic memory-tool adapter needs the anthropic package: pip install 'dbmemory[anthropic]'"
    ) from exc

__all__ = ["DbMemoryTool", "AsyncDbMemoryTool"]

_MARKER = "Error: "


class _Backend:
    """What both classes share: where commands run and how their text becomes a result."""

    def __init__(
        self,
        engine_or_conn: Engine | Connection,
        agent_code: str | None,
        *,
        user_id: str | None,
        session_id: str | None,
        run_context: Mapping[str, object] | None,
        store_code: str | None,
    ) -> None:
        if agent_code is None and store_code is None:
            raise ValueError("give an agent_code, or a store_code for a shared store")
        self.bind = engine_or_conn
        self.agent_code = agent_code
        self.user_id = user_id
        self.session_id = session_id
        self.run_context = dict(run_context or {})
        self.store_code = store_code

    def _tool(self, conn: Connection) -> Any:
        from dbmemory.tool import MemoryTool

        actor = "anthropic-memory-tool" + (f" agent={self.agent_code}" if self.agent_code else "")
        if self.agent_code is None:
            return MemoryTool.for_store(conn, self.store_code or "", actor=actor)
        return MemoryTool(
            conn,
            self.agent_code,
            user_id=self.user_id,
            session_id=self.session_id,
            run_context=self.run_context,
            actor=actor,
        )

    def text(self, arguments: Mapping[str, Any]) -> str:
        """Run one command; return its text (a failure starts with ``"Error: "``)."""
        if isinstance(self.bind, Engine):
            with self.bind.begin() as conn:  # one committed transaction per command
                return self._tool(conn).execute(dict(arguments))
        return self._tool(self.bind).execute(dict(arguments))

    def result(self, arguments: Mapping[str, Any]) -> str:
        """Run one command; return its text, or raise ``ToolError`` for a failure."""
        text = self.text(arguments)
        if text.startswith(_MARKER):
            raise ToolError(text[len(_MARKER) :])
        return text

    def clear(self) -> str:
        """Delete every file of the store (one audit event per file); returns a short text."""
        from dbmemory.files import clear_store_files, find_store_id

        def work(conn: Connection) -> int:
            store_id = find_store_id(conn, self._tool(conn).store.store_key)
            return 0 if store_id is None else clear_store_files(conn, store_id, actor="anthropic-memory-tool")

        if isinstance(self.bind, Engine):
            with self.bind.begin() as conn:
                count = work(conn)
        else:
            count = work(self.bind)
        return f"All memory cleared ({count} files deleted)"


def _arguments(command: Any) -> dict[str, Any]:
    """The SDK command model as MEMORY tool arguments (unset optional fields dropped)."""
    if hasattr(command, "model_dump"):
        return command.model_dump(exclude_none=True)
    if isinstance(command, Mapping):
        return {k: v for k, v in command.items() if v is not None}
    return dict(vars(command))


class DbMemoryTool(BetaAbstractMemoryTool):
    """``BetaAbstractMemoryTool`` over a dbmemory store.

    Args:
        engine_or_conn: an Engine (each command commits its own transaction) or a Connection
            (commands join the caller's transaction; nothing commits).
        agent_code: the agent whose memory configuration names the store (scope, caps).
        user_id / session_id / run_context: what the agent's scope needs.
        store_code: instead of an agent, the shared store ``shared:<store_code>``.
        cache_control: passed to the SDK base class (prompt caching of the tool definition).

    Raises:
        ValueError: neither ``agent_code`` nor ``store_code``.
        NotFoundError, InvalidScopeError: on the first command, when the agent's store cannot be
            named (memory never enabled, missing context key, ...); these are configuration
            errors, raised rather than shown to the model.
    """

    def __init__(
        self,
        engine_or_conn: Engine | Connection,
        agent_code: str | None = None,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        run_context: Mapping[str, object] | None = None,
        store_code: str | None = None,
        cache_control: Any = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._backend = _Backend(
            engine_or_conn, agent_code, user_id=user_id, session_id=session_id, run_context=run_context, store_code=store_code
        )

    def view(self, command: Any) -> str:
        """``view``: a directory listing or a numbered file (optional ``view_range``)."""
        return self._backend.result(_arguments(command))

    def create(self, command: Any) -> str:
        """``create``: a new file; an existing one is an error (use ``str_replace``)."""
        return self._backend.result(_arguments(command))

    def str_replace(self, command: Any) -> str:
        """``str_replace``: replace a unique ``old_str``."""
        return self._backend.result(_arguments(command))

    def insert(self, command: Any) -> str:
        """``insert``: insert ``insert_text`` after line ``insert_line`` (0 = top)."""
        return self._backend.result(_arguments(command))

    def delete(self, command: Any) -> str:
        """``delete``: a file or a directory (never the root)."""
        return self._backend.result(_arguments(command))

    def rename(self, command: Any) -> str:
        """``rename``: a file or a directory."""
        return self._backend.result(_arguments(command))

    def clear_all_memory(self) -> str:
        """Delete every file of the store (audited, in one transaction)."""
        return self._backend.clear()


class AsyncDbMemoryTool(BetaAsyncAbstractMemoryTool):
    """``BetaAsyncAbstractMemoryTool`` over a dbmemory store (same arguments as :class:`DbMemoryTool`).

    Each command runs in a worker thread (``asyncio.to_thread``): SQLAlchemy's Connection is
    synchronous.
    """

    def __init__(
        self,
        engine_or_conn: Engine | Connection,
        agent_code: str | None = None,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        run_context: Mapping[str, object] | None = None,
        store_code: str | None = None,
        cache_control: Any = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._backend = _Backend(
            engine_or_conn, agent_code, user_id=user_id, session_id=session_id, run_context=run_context, store_code=store_code
        )

    async def _run(self, command: Any) -> str:
        return await asyncio.to_thread(self._backend.result, _arguments(command))

    async def view(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.view`."""
        return await self._run(command)

    async def create(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.create`."""
        return await self._run(command)

    async def str_replace(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.str_replace`."""
        return await self._run(command)

    async def insert(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.insert`."""
        return await self._run(command)

    async def delete(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.delete`."""
        return await self._run(command)

    async def rename(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.rename`."""
        return await self._run(command)

    async def clear_all_memory(self) -> str:
        """See :meth:`DbMemoryTool.clear_all_memory`."""
        return await asyncio.to_thread(self._backend.clear)
