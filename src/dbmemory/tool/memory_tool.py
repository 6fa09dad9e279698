"""The MEMORY tool: Anthropic's memory-tool command set over a database store.

``MemoryTool(conn, agent_code, ...)`` resolves the run's store up front (so a missing context
key or user id is raised before the run starts, never shown to the model as an empty memory)
and then answers ``execute(arguments)`` calls with text. ``execute`` never raises: every failure
is text that starts with :data:`~dbmemory.tool.messages.ERROR_MARKER`, says the value, the rule
and the remedy, changes no row, and leaves the caller's transaction usable. Writes join the
caller's transaction (inside a savepoint); nothing commits.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping

from sqlalchemy.engine import Connection

from dbmemory import files
from dbmemory import validate as _v
from dbmemory.errors import (
    AlreadyExistsError,
    CapExceededError,
    ConflictError,
    DbMemoryError,
    InvalidArgumentError,
    InvalidPathError,
    InvalidScopeError,
    NotFoundError,
    StorageError,
)
from dbmemory.keys import RESERVED_SCOPE
from dbmemory.metrics import record_command
from dbmemory.model import Caps, FileRecord, StoreRef
from dbmemory.paths import ancestors
from dbmemory.reads import view_entries
from dbmemory.stores import _run_store, current_store_code, shared_store
from dbmemory.tool import messages
from dbmemory.tool.args import (
    Create,
    Delete,
    Insert,
    Rename,
    StrReplace,
    View,
    coerce_view_range,
    parse_arguments,
)
from dbmemory.tool.edits import apply_insert, apply_str_replace
from dbmemory.tool.messages import ToolInputError, error_text
from dbmemory.tool.render import listing_of_rows, render_file

__all__ = ["MemoryTool"]

log = logging.getLogger(__name__)


def _edit_limit(caps: Caps, current: str) -> int:
    """The longest text an edit may leave: the store's ``max_file_chars``, or the current length
    when a lowered cap already left the file longer (an edit may shrink it)."""
    return max(caps.max_file_chars, len(current))


def _encodable(text: str) -> str:
    """``text`` made safe to send as UTF-8: any lone surrogate echoed from the arguments is
    shown as an escape (``\\udc80``) instead of breaking the caller's JSON encoder."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _refuse_reserved(store: object) -> None:
    """The MEMORY tool never opens a store of the package's reserved namespace (user profiles,
    memory items, organisation memory), whoever built the :class:`StoreRef`."""
    if not isinstance(store, StoreRef):
        raise InvalidScopeError(
            f"store must be a StoreRef, got {type(store).__name__}: build it with "
            "dbmemory.shared_store(code) or use an agent_code",
            code="invalid_scope",
        )
    if store.scope == RESERVED_SCOPE:
        raise InvalidScopeError(
            f"store {store.store_key!r} is in the reserved namespace dbmemory keeps for its own "
            "stores (user profiles, memory items, organisation memory); the MEMORY tool cannot "
            "open it: manage profiles with dbmemory.profile or 'dbmemory profile'",
            code="reserved_store",
        )


class MemoryTool:
    """The six MEMORY commands (``view``, ``create``, ``str_replace``, ``insert``, ``delete``,
    ``rename``) on one store, on the caller's connection and transaction.

    Args:
        conn: the caller's SQLAlchemy connection; writes join its transaction (never committed
            here).
        agent_code: the agent whose configuration names the store (its scope; its caps become
            the store's if this tool's first write creates it). ``None`` uses the shared store
            of the innermost :func:`dbmemory.use_store` block.
        user_id / session_id / run_context: what the agent's scope needs (user scope: a user id
            from the caller; session scope: a session id; context scope: the context key).
        store: an explicit :class:`StoreRef` instead of an agent (see :meth:`for_store`).
        actor: who acts, for audit events (default: ``memory-tool`` plus agent, user, session).

    Caps: every command enforces the caps on the store's row (:mod:`dbmemory.caps`), whoever
    the writer is; the tool brings none of its own.

    Raises:
        NotFoundError: the agent has no memory configuration.
        InvalidScopeError: memory disabled; a missing or invalid context key, user id or session
            id; no agent and no :func:`use_store` block; a ``store`` in the reserved namespace
            (code ``reserved_store``: user profiles are never reachable by the MEMORY tool).
        InvalidArgumentError: ``conn`` is not a Connection; ``store`` is not a StoreRef;
            ``actor`` is not text.
    """

    name = "memory"

    def __init__(
        self,
        conn: Connection,
        agent_code: str | None = None,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        run_context: Mapping[str, object] | None = None,
        store: StoreRef | None = None,
        actor: str | None = None,
    ) -> None:
        _v.check_connection(conn)
        _v.check_mapping(run_context, "run_context")
        _v.check_key_text(agent_code, "agent_code")
        _v.check_key_text(user_id, "user_id")
        _v.check_key_text(session_id, "session_id")
        _v.check_text(actor, "actor", optional=True)
        if store is not None and not isinstance(store, StoreRef):
            raise InvalidArgumentError(
                f"store must be a StoreRef or None, got {_v.show(store)}: pass "
                "dbmemory.resolve_store(...) or use MemoryTool.for_store"
            )
        if store is not None:
            _v.check_store(store)
        if store is None:
            if agent_code is not None:
                # the arguments check_run_ready would check were checked above
                store = _run_store(
                    conn, agent_code, user_id=user_id, session_id=session_id, run_context=run_context
                )
            else:
                code = current_store_code()
                if code is None:
                    raise InvalidScopeError(
                        "MemoryTool needs an agent_code, a store, or an active use_store() block",
                        code="no_store",
                    )
                store = shared_store(code)
        _refuse_reserved(store)
        self._conn = conn
        self._store = store
        parts = ["memory-tool"]
        for label, value in (("agent", agent_code), ("user", user_id), ("session", session_id)):
            if value is not None:
                parts.append(f"{label}={value}")
        self.actor = actor or " ".join(parts)

    @classmethod
    def for_store(
        cls, conn: Connection, store_code: str, *, caps: Caps | None = None, actor: str | None = None
    ) -> MemoryTool:
        """A tool bound to the shared store ``shared:<store_code>`` (what :func:`use_store`
        names). The store's own caps apply (set by the agent configurations that name it,
        :func:`dbmemory.enable_for_agent`, or :func:`dbmemory.set_store_caps`); a store this
        tool creates takes the strictest caps of those configurations, else the defaults.

        Args:
            caps: deprecated and ignored (a ``DeprecationWarning``): a writer brings no caps.

        Raises:
            InvalidScopeError: invalid store code.
            InvalidArgumentError: ``caps`` not a Caps or None; ``conn`` not a Connection.
        """
        _v.arguments(conn=conn)
        _v.check_caps(caps, optional=True)
        if caps is not None:
            warnings.warn(
                "MemoryTool.for_store(caps=...) is deprecated and ignored: a store's caps are "
                "the values on its row (dbmemory.enable_for_agent, dbmemory.set_store_caps)",
                DeprecationWarning,
                stacklevel=2,
            )
        return cls(conn, store=shared_store(store_code), actor=actor)

    @property
    def store(self) -> StoreRef:
        """The store this tool reads and writes."""
        return self._store

    @staticmethod
    def schema() -> dict[str, object]:
        """The tool's JSON schema in OpenAI function format (see :func:`tool_schema`)."""
        from dbmemory.tool.schema import tool_schema

        return tool_schema()

    # -- execution -----------------------------------------------------------------------------

    def execute(self, arguments: object) -> str:
        """Run one MEMORY command and return its text answer. Never raises.

        Args:
            arguments: a dict, a JSON string of an object, or either wrapped one level deep
                (``{"input": {...}}``), as providers send tool-call arguments.

        Returns:
            The command's result text (Anthropic memory-tool wording where it has one), or an
            error text starting with ``"Error: "``. On error no row changed.
        """
        command = None
        started = time.perf_counter()
        code: str | None = None
        try:
            command = parse_arguments(arguments)
            text = self._dispatch(command)
        except ToolInputError as exc:
            code = "tool_input"
            text = error_text(exc.message)
        except DbMemoryError as exc:
            code = exc.code
            text = error_text(self._message(command, exc))
        except Exception:  # the tool must never raise into the model loop
            code = "internal"
            log.exception("memory tool failed unexpectedly")
            text = error_text(messages.internal_error())
        try:
            record_command(
                getattr(command, "command", "invalid"), code, time.perf_counter() - started
            )
        except Exception:  # metrics never break the tool
            log.debug("recording the command's metrics failed", exc_info=True)
        return _encodable(text)

    __call__ = execute

    def _remember_store(self, record: FileRecord) -> None:
        if record.store_id and record.store_id != self._store.store_id:
            self._store = StoreRef(
                store_key=self._store.store_key,
                scope=self._store.scope,
                agent_code=self._store.agent_code,
                store_code=self._store.store_code,
                caps=self._store.caps,
                store_id=record.store_id,
            )

    def _dispatch(self, command: object) -> str:
        conn, store = self._conn, self._store
        if isinstance(command, View):
            found = view_entries(conn, store, command.path)
            if isinstance(found, FileRecord):
                self._remember_store(found)
                return render_file(command.path, found.text, coerce_view_range(command.view_range_raw))
            return listing_of_rows(command.path, found)
        if isinstance(command, Create):
            record = files.create_file(conn, store, command.path, command.file_text, actor=self.actor)
            self._remember_store(record)
            return messages.file_created(command.path)
        if isinstance(command, StrReplace):
            old, new = command.old_str, command.new_str
            record, text = files.edit_file(
                conn,
                store,
                command.path,
                lambda current, caps: apply_str_replace(
                    command.path, current, old, new, max_chars=_edit_limit(caps, current)
                ),
                actor=self.actor,
                action="str_replace",
                pass_caps=True,
            )
            self._remember_store(record)
            return text
        if isinstance(command, Insert):
            line, insert_text = command.insert_line, command.insert_text
            record, text = files.edit_file(
                conn,
                store,
                command.path,
                lambda current, caps: apply_insert(
                    command.path, current, line, insert_text, max_chars=_edit_limit(caps, current)
                ),
                actor=self.actor,
                action="insert",
                pass_caps=True,
            )
            self._remember_store(record)
            return text
        if isinstance(command, Delete):
            count = files.delete_path(conn, store, command.path, actor=self.actor)
            return messages.deleted(command.path, count if count > 1 else None)
        if isinstance(command, Rename):
            count = files.rename_path(conn, store, command.old_path, command.new_path, actor=self.actor)
            return messages.renamed(command.old_path, command.new_path, count if count > 1 else None)
        raise ToolInputError(messages.unknown_command(str(getattr(command, "command", command))))

    def _message(self, command: object, exc: DbMemoryError) -> str:
        """The text for a data-layer error, in the tool's wording where it has one."""
        name = getattr(command, "command", "")
        path = getattr(command, "path", None) or getattr(command, "old_path", "") or ""
        if isinstance(exc, InvalidPathError) and exc.code in ("is_directory", "parent_is_file"):
            shaped = self._shape_message(command, exc)
            if shaped is not None:
                return shaped
        if isinstance(exc, CapExceededError):
            target = path if name != "rename" else getattr(command, "new_path", path)
            return messages.cap_exceeded(exc.cap, target, exc.limit, exc.actual)
        if isinstance(exc, NotFoundError):
            return messages.path_not_found(path)
        if isinstance(exc, AlreadyExistsError):
            if name == "rename" and getattr(command, "new_path", None) == path:
                return messages.rename_same_path(path)
            if name == "rename":
                return messages.rename_destination_exists(getattr(command, "new_path", path))
            return messages.file_exists(path)
        if isinstance(exc, ConflictError):
            if exc.code in ("transaction_rolled_back", "outcome_unknown"):
                return exc.message  # the whole story: what was lost, or that it may be saved
            if exc.code == "busy":
                return messages.database_busy()
            if exc.code == files.SERIALIZATION_FAILURE:
                return messages.retry_transaction(path)
            return messages.conflict(path)
        if isinstance(exc, StorageError):
            if exc.code == "read_only":
                return messages.storage_read_only()
            return messages.storage_unavailable()
        if isinstance(exc, InvalidPathError):
            if exc.code == "root_refused":
                return (
                    messages.cannot_rename_root() if name == "rename" else messages.cannot_delete_root()
                    if name == "delete"
                    else exc.message
                )
            if exc.code == "is_directory" and name in ("str_replace", "insert"):
                return messages.not_a_file(path, name)
            if exc.code == "into_itself":
                return messages.rename_into_itself(path, getattr(command, "new_path", ""))
        return exc.message

    def _shape_message(self, command: object, exc: InvalidPathError) -> str | None:
        """``directory_exists`` / ``parent_is_file`` texts, which need a fact from the store
        (how many files a directory holds; which parent is a file). Read-only look-ups after
        the failed write's savepoint was rolled back; ``None`` when they cannot be made."""
        name = getattr(command, "command", "")
        target = getattr(command, "new_path", None) if name == "rename" else getattr(command, "path", None)
        if not target:
            return None
        try:
            store_id = self._store.store_id or files.find_store_id(self._conn, self._store.store_key)
            if store_id is None:
                return None
            if exc.code == "is_directory" and name == "create":
                count = len(files.list_directory(self._conn, store_id, target))
                return messages.directory_exists(target, count) if count else None
            if exc.code == "parent_is_file":
                for parent in ancestors(target):
                    try:
                        files.get_file(self._conn, store_id, parent)
                    except NotFoundError:
                        continue
                    return messages.parent_is_file(target, parent)
        except Exception:  # a look-up for a nicer text must never break the answer
            log.debug("could not look up the facts for an error text", exc_info=True)
        return None
