"""The Anthropic SDK's memory tool, backed by dbmemory: a drop-in for the SDK's own.

Code written for the SDK's file-system memory tool
(``anthropic.tools.memory.BetaLocalFilesystemMemoryTool``) switches to the database by
changing one class::

    from anthropic import Anthropic
    from dbmemory.db.engine import create_engine
    from dbmemory.integrations.anthropic_tool import DbMemoryTool

    memory = DbMemoryTool(create_engine(), "SUPPORT", user_id="u-42")   # was: BetaLocalFilesystemMemoryTool()
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=1024, tools=[memory],
        messages=[{"role": "user", "content": "Remember that I prefer tea."}],
    )

:class:`DbMemoryTool` subclasses the SDK's ``BetaAbstractMemoryTool`` (``anthropic.lib.tools``)
and offers Anthropic's native ``memory_20250818`` tool. **For the same calls and the same
stored contents it gives the model the SDK tool's text, byte for byte**: the directory header,
sizes as the SDK computes them (bytes on disk: the UTF-8 length of the text, ``36B``,
``1.5K``; ``4K`` for a directory), the empty last line a final newline shows, the ``insert``
answer and every error text (raised as the SDK's ``ToolError``, so the runner returns it with
``is_error: true`` as it does for its own tool). ``tests/integrations/test_anthropic_dropin.py`` runs the
same call sequences against the SDK's tool in a temporary directory and against this one.
:class:`dbmemory.tool.MemoryTool` (what ``run_turn``, MCP and the CLI use) keeps its own,
richer texts. Both ignore a ``view_range`` on a directory, as the SDK's tool does.

Where they differ, on purpose:

* **A write that crashes the SDK's tool** (it raises ``NotADirectoryError``, ``OSError`` or
  ``ValueError``, which the runner shows as a bare exception) is an error text here:
  ``create`` under a path whose parent is a file, ``rename`` of a directory into itself or
  under a file, a path with a NUL character.
* **``/memoriesX``**: the SDK checks the prefix without a separator and stores
  ``/memoriesX/a.md`` as ``/memories/X/a.md``; here it is refused (``Path must be /memories or
  start with /memories/, got: ...``).
* **Directories exist while they hold a file.** A store keeps files, and a directory is the
  prefix of their paths: after the last file of ``/memories/a`` is deleted or renamed away,
  ``/memories/a`` no longer exists (the SDK's disk keeps the empty directory, which then lists
  as ``4K\t/memories/a/``; its ``rename`` also leaves the new path's parent directories behind
  when the source does not exist). The differential test removes empty directories from the
  SDK's tree after each call, which is this model.
* **dbmemory's path and text rules apply** (:mod:`dbmemory.core.paths`): a path the SDK would store
  under a name those rules refuse (control or invisible characters, look-alike slashes, a
  segment with leading or trailing spaces, more than 1,000 characters) or spell differently
  (percent-escapes are decoded, names are NFC-normalised) gets dbmemory's text; a text with NUL
  is refused (PostgreSQL cannot store it). ``.`` and ``..`` segments resolve as on the SDK's
  disk (``/memories/a/../b.md`` is ``/memories/b.md``; past the root: the SDK's "would escape").
* **Caps** (:mod:`dbmemory.store.caps`): a write past a store's cap is refused with dbmemory's text;
  the SDK has no caps. A concurrency or storage failure also has dbmemory's text.
* ``view_range`` with a value that is not a whole number, an input without a command or with
  an unknown one, a command without a required field: an error text (the SDK's tool crashes;
  on ``create`` without ``file_text`` it crashes after creating an empty file).
* A directory shows ``4K`` whatever it holds (ext4 shows 4K until a directory's entries fill a
  block, 8K and more for a directory of hundreds of entries).

Transactions: given an Engine, **each command runs in its own transaction and commits it**;
given a Connection, commands join the caller's transaction and nothing commits (the caller's
rollback removes the writes). :class:`AsyncDbMemoryTool` is the ``BetaAsyncAbstractMemoryTool``
form; it runs the same work in a worker thread.

Needs the ``anthropic`` extra (``pip install -e ".[anthropic]"``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Connection, Engine

from dbmemory.core.model import FileRecord
from dbmemory.core.paths import is_root, normalize_path
from dbmemory.errors import (
    AlreadyExistsError,
    DbMemoryError,
    InvalidPathError,
    MissingDependencyError,
    NotFoundError,
    extra_hint,
)
from dbmemory.integrations import anthropic_texts as texts
from dbmemory.items.search_tool import (
    SEARCH_INPUT_SCHEMA,
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    run_search_tool,
)
from dbmemory.store.files import create_file, edit_file
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import clear_store_files, delete_path, rename_path
from dbmemory.store.reads import file_bytes, get_file, list_directory, view_path
from dbmemory.store.units import committing
from dbmemory.tool.memory_tool import MemoryTool, encodable

try:
    from anthropic.lib.tools import (
        BetaAbstractMemoryTool,
        BetaAsyncAbstractMemoryTool,
        BetaFunctionTool,
        ToolError,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "the Anthropic memory-tool adapter needs the anthropic package: " + extra_hint("anthropic")
    ) from exc

__all__ = ["DbMemoryTool", "AsyncDbMemoryTool", "memory_search_tool"]

class _Args:
    """A command's fields by attribute, for an SDK command model or a plain mapping."""

    def __init__(self, command: Any) -> None:
        if hasattr(command, "model_dump"):
            fields = command.model_dump(warnings=False)
        elif isinstance(command, Mapping):
            fields = dict(command)
        else:
            fields = dict(vars(command))
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> Any:  # an absent optional field
        return None


def _path(shown: object) -> str:
    """The store path for a path the model gave (the SDK's resolution, then dbmemory's rules)."""
    if not isinstance(shown, str):
        raise texts.SdkError(f"path must be text, got {type(shown).__name__}: pass a path under /memories")
    try:
        return normalize_path(texts.resolve(shown))
    except InvalidPathError as exc:
        raise texts.SdkError(exc.message) from None


def _under(conn: Connection, tool: Any, directory: str) -> list[tuple[str, int]]:
    """``(path relative to directory, bytes)`` of every file under it."""
    cut = len(directory) + 1
    return [(path[cut:], size) for path, size in file_bytes(conn, tool.store.store_key, directory)]


def _kind(conn: Connection, tool: Any, path: str) -> str | None:
    """``"file"``, ``"directory"`` or ``None``: what is at a store path (no touch, no lock)."""
    if is_root(path):
        return "directory"
    store_id = find_store_id(conn, tool.store.store_key)
    if store_id is None:
        return None
    try:
        get_file(conn, store_id, path)
        return "file"
    except NotFoundError:
        return "directory" if list_directory(conn, store_id, path) else None


def _view(conn: Connection, tool: Any, c: _Args) -> str:
    path = _path(c.path)
    if is_root(path):
        return texts.listing(c.path, _under(conn, tool, path))
    try:
        found = view_path(conn, tool.store, path)
    except NotFoundError:
        raise texts.SdkError(f"The path {c.path} does not exist. Please provide a valid path.") from None
    if isinstance(found, FileRecord):
        view_range = c.view_range  # ignored for a directory, as by the SDK
        if view_range is not None and (
            not isinstance(view_range, (list, tuple))
            or (len(view_range) == 2 and not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range))
        ):
            raise texts.SdkError(f"view_range must be two whole numbers [first, last], got: {view_range!r}")
        return texts.file_view(c.path, found.text, view_range)
    return texts.listing(c.path, _under(conn, tool, path))


def _create(conn: Connection, tool: Any, c: _Args) -> str:
    path = _path(c.path)
    exists = texts.SdkError(f"File {c.path} already exists")
    if is_root(path):
        raise exists
    try:
        create_file(conn, tool.store, path, c.file_text, actor=tool.actor)
    except AlreadyExistsError:
        raise exists from None
    except InvalidPathError as exc:
        if exc.code == "is_directory":
            raise exists from None
        raise
    return f"File created successfully at: {c.path}"


def _edit(conn: Connection, tool: Any, c: _Args, action: str, transform: Any) -> None:
    path = _path(c.path)
    if is_root(path):
        raise texts.SdkError(f"The path {c.path} is not a file.")
    try:
        edit_file(conn, tool.store, path, transform, actor=tool.actor, action=action)
    except NotFoundError:
        raise texts.SdkError(f"The path {c.path} does not exist. Please provide a valid path.") from None
    except InvalidPathError as exc:
        if exc.code == "is_directory":
            raise texts.SdkError(f"The path {c.path} is not a file.") from None
        raise


def _str_replace(conn: Connection, tool: Any, c: _Args) -> str:
    if not isinstance(c.old_str, str) or not isinstance(c.new_str, str):
        raise texts.SdkError("str_replace needs old_str and new_str as text")
    answer: list[str] = []

    def transform(current: str) -> tuple[str, None]:
        new_text, text = texts.str_replace(c.path, current, c.old_str, c.new_str)
        answer.append(text)
        return new_text, None

    _edit(conn, tool, c, "str_replace", transform)
    return answer[-1]


def _insert(conn: Connection, tool: Any, c: _Args) -> str:
    if not isinstance(c.insert_line, int) or isinstance(c.insert_line, bool) or not isinstance(c.insert_text, str):
        raise texts.SdkError("insert needs insert_line as a whole number and insert_text as text")
    _edit(conn, tool, c, "insert", lambda current: (texts.insert(c.path, current, c.insert_line, c.insert_text), None))
    return f"The file {c.path} has been edited."


def _delete(conn: Connection, tool: Any, c: _Args) -> str:
    path = _path(c.path)
    if is_root(path):
        raise texts.SdkError("Cannot delete the /memories directory itself")
    try:
        delete_path(conn, tool.store, path, actor=tool.actor)
    except NotFoundError:
        raise texts.SdkError(f"The path {c.path} does not exist") from None
    return f"Successfully deleted {c.path}"


def _rename(conn: Connection, tool: Any, c: _Args) -> str:
    old, new = _path(c.old_path), _path(c.new_path)
    if is_root(old):
        raise texts.SdkError("Cannot rename the /memories directory itself")
    destination_exists = texts.SdkError(f"The destination {c.new_path} already exists")
    if _kind(conn, tool, new) is not None:
        raise destination_exists
    missing = texts.SdkError(f"The path {c.old_path} does not exist")
    if old == new:
        raise missing
    try:
        rename_path(conn, tool.store, old, new, actor=tool.actor)
    except NotFoundError:
        raise missing from None
    except AlreadyExistsError:
        raise destination_exists from None
    return f"Successfully renamed {c.old_path} to {c.new_path}"


def _command_name(command: Any) -> str:
    """The command of a tool-use input, or a ``ToolError`` saying what is wrong with it."""
    name = command.get("command") if isinstance(command, Mapping) else getattr(command, "command", None)
    if name is None:
        raise ToolError(
            "Missing command: the memory tool's input needs a command: one of view, create, "
            "str_replace, insert, delete, rename"
        )
    if name not in _COMMANDS:
        raise ToolError(f"Unknown command: {name}: use one of view, create, str_replace, insert, delete, rename")
    return str(name)


_COMMANDS = {
    "view": _view,
    "create": _create,
    "str_replace": _str_replace,
    "insert": _insert,
    "delete": _delete,
    "rename": _rename,
}


class _Backend:
    """What both classes share: where commands run and how a failure becomes a ``ToolError``."""

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

    def _in_transaction(self, work: Any) -> str:
        if isinstance(self.bind, Engine):
            # one committed transaction per command; a commit whose connection was lost
            # says the change may be saved (txn.commit_failed), never that nothing was
            try:
                with committing(self.bind, "committing the memory change", single_unit=True) as conn:
                    answer: str = work(conn)
                    return answer
            except DbMemoryError as exc:
                raise ToolError(encodable(exc.message)) from None
        joined: str = work(self.bind)
        return joined

    def result(self, name: str, command: Any) -> str:
        """Run one command; return the SDK's text, or raise ``ToolError`` with the SDK's text
        (dbmemory's where the SDK has none). Nothing is written on a failure."""
        args = _Args(command)

        def work(conn: Connection) -> str:
            tool = self._tool(conn)  # configuration errors raise (not shown to the model)
            try:
                return _COMMANDS[name](conn, tool, args)
            except texts.SdkError as exc:
                raise ToolError(exc.message) from None
            except DbMemoryError as exc:
                raise ToolError(encodable(tool._message(args, exc))) from None

        return self._in_transaction(work)

    def clear(self) -> str:
        """Delete every file of the store (one audit event per file); the SDK's text."""
        def work(conn: Connection) -> str:
            store_id = find_store_id(conn, self._tool(conn).store.store_key)
            if store_id is not None:
                clear_store_files(conn, store_id, actor="anthropic-memory-tool")
            return "All memory cleared"

        return self._in_transaction(work)


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

    def execute(self, command: Any) -> str:
        """Dispatch one command (what the SDK's ``call`` does with a tool-use input); an input
        without a known command is a ``ToolError`` (the SDK's tool crashes on it)."""
        answer: str = getattr(self, _command_name(command))(command)
        return answer

    def view(self, command: Any) -> str:
        """``view``: a directory listing or a numbered file (optional ``view_range``)."""
        return self._backend.result("view", command)

    def create(self, command: Any) -> str:
        """``create``: a new file; an existing one is an error (use ``str_replace``)."""
        return self._backend.result("create", command)

    def str_replace(self, command: Any) -> str:
        """``str_replace``: replace a unique ``old_str``."""
        return self._backend.result("str_replace", command)

    def insert(self, command: Any) -> str:
        """``insert``: insert ``insert_text`` after line ``insert_line`` (0 = top)."""
        return self._backend.result("insert", command)

    def delete(self, command: Any) -> str:
        """``delete``: a file or a directory (never the root)."""
        return self._backend.result("delete", command)

    def rename(self, command: Any) -> str:
        """``rename``: a file or a directory."""
        return self._backend.result("rename", command)

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

    async def execute(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.execute`."""
        answer: str = await getattr(self, _command_name(command))(command)
        return answer

    async def _run(self, name: str, command: Any) -> str:
        return await asyncio.to_thread(self._backend.result, name, command)

    async def view(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.view`."""
        return await self._run("view", command)

    async def create(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.create`."""
        return await self._run("create", command)

    async def str_replace(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.str_replace`."""
        return await self._run("str_replace", command)

    async def insert(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.insert`."""
        return await self._run("insert", command)

    async def delete(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.delete`."""
        return await self._run("delete", command)

    async def rename(self, command: Any) -> str:
        """See :meth:`DbMemoryTool.rename`."""
        return await self._run("rename", command)

    async def clear_all_memory(self) -> str:
        """See :meth:`DbMemoryTool.clear_all_memory`."""
        return await asyncio.to_thread(self._backend.clear)


def memory_search_tool(
    engine_or_conn: Engine | Connection, user_id: str, *, org_id: str = "default"
) -> Any:
    """The ``memory_search`` tool (:mod:`dbmemory.items.search_tool`) as an SDK function tool,
    to pass next to :class:`DbMemoryTool` (the six MEMORY commands stay the SDK's)::

        tools=[DbMemoryTool(engine, "SUPPORT", user_id="u-42"), memory_search_tool(engine, "u-42")]

    Searches only ``user_id``'s memory, in a read-only transaction of its own (given an
    Engine) or the caller's (a Connection). An error text is raised as the SDK's ``ToolError``
    (the runner returns it with ``is_error: true``).
    """

    def memory_search(query: str, scope: str = "all", limit: int = 5) -> str:
        arguments = {"query": query, "scope": scope, "limit": limit}
        if isinstance(engine_or_conn, Engine):
            with engine_or_conn.connect() as conn:
                try:
                    text = run_search_tool(conn, arguments, user_id=user_id, org_id=org_id)
                finally:
                    conn.rollback()
        else:
            text = run_search_tool(engine_or_conn, arguments, user_id=user_id, org_id=org_id)
        if text.startswith("Error: "):
            raise ToolError(text)
        return text

    return BetaFunctionTool(
        memory_search, name=SEARCH_TOOL_NAME, description=SEARCH_TOOL_DESCRIPTION,
        input_schema=SEARCH_INPUT_SCHEMA,
    )
