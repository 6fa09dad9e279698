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
from collections.abc import Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments, check_store
from dbmemory.core.keys import RESERVED_SCOPE
from dbmemory.core.model import Caps, FileRecord, StoreRef
from dbmemory.core.paths import ancestors
from dbmemory.db.dialect.errors import translate_db_error
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
from dbmemory.metrics import record_command
from dbmemory.store import files
from dbmemory.store.locks import SERIALIZATION_FAILURE, find_store_id
from dbmemory.store.moves import delete_path, rename_path
from dbmemory.store.reads import get_file, list_directory, view_entries
from dbmemory.store.resolve import current_store_code, run_store, shared_store
from dbmemory.tool import messages, storage_messages
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
from dbmemory.tool.render import OUTPUT_LIMIT_CHARS, hidden_name, listing_of_walk, render_file
from dbmemory.tool.schema import tool_schema

__all__ = [
    "MemoryTool",
    "encodable",
]

log = logging.getLogger(__name__)


def _listing_budget(directory: str) -> int:
    """Characters a listing of ``directory`` has for its lines after the header line."""
    return OUTPUT_LIMIT_CHARS - len(messages.view_directory_header(directory)) - 1


def _edit_limit(caps: Caps, current: str) -> int:
    """The longest text an edit may leave: the store's ``max_file_chars``, or the current length
    when a lowered cap already left the file longer (an edit may shrink it)."""
    return max(caps.max_file_chars, len(current))


def encodable(text: str) -> str:
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
            "MemoryTool.for_store(conn, code) or use an agent_code",
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

    Caps: every command enforces the caps on the store's row (:mod:`dbmemory.store.caps`), whoever
    the writer is; the tool brings none of its own.

    Raises:
        NotFoundError: the agent has no memory configuration.
        InvalidScopeError: memory disabled; a missing or invalid context key, user id or session
            id; no agent and no :func:`~dbmemory.store.resolve.use_store` block; a ``store`` in the reserved namespace
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
            check_store(store)
        if store is None:
            if agent_code is not None:
                # the arguments check_run_ready would check were checked above
                store = run_store(
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
        cls, conn: Connection, store_code: str, *, actor: str | None = None
    ) -> MemoryTool:
        """A tool bound to the shared store ``shared:<store_code>`` (what :func:`~dbmemory.store.resolve.use_store`
        names). The store's own caps apply (set by the agent configurations that name it,
        :func:`dbmemory.enable_for_agent`, or :func:`dbmemory.set_store_caps`); a store this
        tool creates takes the strictest caps of those configurations, else the defaults.

        Raises:
            InvalidScopeError: invalid store code.
            InvalidArgumentError: ``conn`` not a Connection.
        """
        check_arguments(conn=conn)
        return cls(conn, store=shared_store(store_code), actor=actor)

    @property
    def store(self) -> StoreRef:
        """The store this tool reads and writes."""
        return self._store

    @staticmethod
    def schema() -> dict[str, object]:
        """The tool's JSON schema in OpenAI function format (see :func:`tool_schema`)."""
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
        except sa.exc.SQLAlchemyError as exc:  # a read outside a write unit
            error = translate_db_error(exc, "running the memory command")
            code = error.code
            log.warning("memory tool: %s", error.message)
            text = error_text(self._message(command, error))
        except Exception:  # the tool must never raise into the model loop
            code = "internal"
            log.exception("memory tool failed unexpectedly")
            text = error_text(storage_messages.internal_error())
        try:
            record_command(
                getattr(command, "command", "invalid"), code, time.perf_counter() - started
            )
        except Exception:  # metrics never break the tool
            log.debug("recording the command's metrics failed", exc_info=True)
        return encodable(text)

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
            found = view_entries(
                conn, store, command.path, budget=_listing_budget(command.path), hidden=hidden_name
            )
            if isinstance(found, FileRecord):
                self._remember_store(found)
                return render_file(command.path, found.text, coerce_view_range(command.view_range_raw))
            return listing_of_walk(command.path, found)
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
            count = delete_path(conn, store, command.path, actor=self.actor)
            return messages.deleted(command.path, count if count > 1 else None)
        if isinstance(command, Rename):
            count = rename_path(conn, store, command.old_path, command.new_path, actor=self.actor)
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
            if exc.code in ("transaction_rolled_back", "outcome_unknown", "commit_not_saved"):
                return exc.message  # the whole story: what was lost, or whether it was saved
            if exc.code == "busy":
                return storage_messages.database_busy()
            if exc.code == SERIALIZATION_FAILURE:
                return storage_messages.retry_transaction(path)
            if exc.cause == "locked":
                return storage_messages.store_contended(path)
            if exc.cause == "failed":
                return exc.message  # names what the database undid and why, never a writer
            return storage_messages.conflict(path)
        if isinstance(exc, StorageError):
            if exc.code == "read_only":
                return storage_messages.storage_read_only()
            if exc.code == "statement_timeout":
                return storage_messages.storage_timed_out(exc.message)
            if exc.code == "pool_exhausted":
                return storage_messages.storage_pool_exhausted()
            if exc.code == "no_majority":
                return storage_messages.storage_no_majority()
            return storage_messages.storage_unavailable()
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
            store_id = self._store.store_id or find_store_id(self._conn, self._store.store_key)
            if store_id is None:
                return None
            if exc.code == "is_directory" and name == "create":
                count = len(list_directory(self._conn, store_id, target))
                return messages.directory_exists(target, count) if count else None
            if exc.code == "parent_is_file":
                for parent in ancestors(target):
                    try:
                        get_file(self._conn, store_id, parent)
                    except NotFoundError:
                        continue
                    return messages.parent_is_file(target, parent)
        except Exception:  # a look-up for a nicer text must never break the answer
            log.debug("could not look up the facts for an error text", exc_info=True)
        return None
