"""dbmemory: persistent memory for LLM agents inside your own relational database.

Stores of small Markdown files (CLOB rows) under ``/memories``, the MEMORY tool (Anthropic's
memory-tool command set) for any model, caps, expiry and an audit log, on Oracle, PostgreSQL,
MariaDB/MySQL and SQLite. Every data-access function takes a SQLAlchemy ``Connection`` first and
never commits: memory writes join the caller's transaction.

Importing this package is cheap: it never imports litellm (model calls import it lazily).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "__version__",
    # errors
    "DbMemoryError",
    "NotFoundError",
    "InvalidArgumentError",
    "InvalidPathError",
    "InvalidScopeError",
    "CapExceededError",
    "ConflictError",
    "AlreadyExistsError",
    "MissingDependencyError",
    "StorageError",
    # values
    "Caps",
    "StoreRef",
    "FileInfo",
    "FileRecord",
    "AgentConfig",
    "build_store_key",
    # stores and agents
    "enable_for_agent",
    "set_store_caps",
    "disable_for_agent",
    "get_agent_config",
    "list_agents",
    "resolve_store",
    "check_run_ready",
    "resolve_store_id",
    "end_session",
    "use_store",
    "get_memory_protocol",
    "augment_system_prompt",
    # files (admin)
    "list_files",
    "get_file",
    "put_file",
    "delete_file",
    "clear_store_files",
    "expire_files",
    "expire_files_committing",
    "count_expirable_files",
    # the tool
    "MemoryTool",
    "tool_schema",
    "ERROR_MARKER",
    # agent turns (litellm imported lazily, on the first model call)
    "run_turn",
    "arun_turn",
    "TurnConfig",
    "TurnResult",
    "memory_tools",
    "handle_tool_calls",
    # schema set-up
    "create_engine",
    "upgrade",
    "current",
]


_LAZY = {
    "AlreadyExistsError": "dbmemory.errors",
    "CapExceededError": "dbmemory.errors",
    "ConflictError": "dbmemory.errors",
    "DbMemoryError": "dbmemory.errors",
    "InvalidArgumentError": "dbmemory.errors",
    "InvalidPathError": "dbmemory.errors",
    "InvalidScopeError": "dbmemory.errors",
    "MissingDependencyError": "dbmemory.errors",
    "NotFoundError": "dbmemory.errors",
    "StorageError": "dbmemory.errors",
    "clear_store_files": "dbmemory.files",
    "count_expirable_files": "dbmemory.expiry",
    "delete_file": "dbmemory.files",
    "expire_files": "dbmemory.expiry",
    "expire_files_committing": "dbmemory.expiry",
    "get_file": "dbmemory.files",
    "list_files": "dbmemory.files",
    "put_file": "dbmemory.files",
    "build_store_key": "dbmemory.keys",
    "AgentConfig": "dbmemory.model",
    "Caps": "dbmemory.model",
    "FileInfo": "dbmemory.model",
    "FileRecord": "dbmemory.model",
    "StoreRef": "dbmemory.model",
    "augment_system_prompt": "dbmemory.prompts",
    "get_memory_protocol": "dbmemory.prompts",
    "check_run_ready": "dbmemory.stores",
    "disable_for_agent": "dbmemory.stores",
    "enable_for_agent": "dbmemory.stores",
    "set_store_caps": "dbmemory.stores",
    "end_session": "dbmemory.stores",
    "get_agent_config": "dbmemory.stores",
    "list_agents": "dbmemory.stores",
    "resolve_store": "dbmemory.stores",
    "resolve_store_id": "dbmemory.stores",
    "use_store": "dbmemory.stores",
    "ERROR_MARKER": "dbmemory.tool",
    "MemoryTool": "dbmemory.tool",
    "tool_schema": "dbmemory.tool",
    "run_turn": "dbmemory.agent",
    "arun_turn": "dbmemory.agent",
    "TurnConfig": "dbmemory.agent",
    "TurnResult": "dbmemory.agent",
    "memory_tools": "dbmemory.agent",
    "handle_tool_calls": "dbmemory.agent",
    "upgrade": "dbmemory.db.migrate",
    "current": "dbmemory.db.migrate",
    "create_engine": "dbmemory.db.engine",
}

def __getattr__(name: str) -> Any:
    # PEP 562: the public API is imported on first use, so ``import dbmemory`` (and
    # ``dbmemory --help``) stays fast; nothing here ever imports litellm.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dbmemory' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from dbmemory.errors import (
        AlreadyExistsError,
        CapExceededError,
        ConflictError,
        DbMemoryError,
        InvalidArgumentError,
        InvalidPathError,
        InvalidScopeError,
        MissingDependencyError,
        NotFoundError,
        StorageError,
    )
    from dbmemory.files import (
        clear_store_files,
        count_expirable_files,
        delete_file,
        expire_files,
        expire_files_committing,
        get_file,
        list_files,
        put_file,
    )
    from dbmemory.keys import build_store_key
    from dbmemory.model import AgentConfig, Caps, FileInfo, FileRecord, StoreRef
    from dbmemory.prompts import augment_system_prompt, get_memory_protocol
    from dbmemory.stores import (
        check_run_ready,
        disable_for_agent,
        enable_for_agent,
        end_session,
        get_agent_config,
        list_agents,
        resolve_store,
        resolve_store_id,
        set_store_caps,
        use_store,
    )
    from dbmemory.tool import ERROR_MARKER, MemoryTool, tool_schema
    from dbmemory.agent import (
        TurnConfig,
        TurnResult,
        arun_turn,
        handle_tool_calls,
        memory_tools,
        run_turn,
    )
    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import current, upgrade
