"""dbmemory: persistent memory for LLM agents inside your own relational database.

Stores of small Markdown files (CLOB rows) under ``/memories``, the MEMORY tool (Anthropic's
memory-tool command set) for any model, caps, expiry and an audit log, on Oracle, PostgreSQL,
MariaDB/MySQL and SQLite. Every data-access function takes a SQLAlchemy ``Connection`` first and
never commits: memory writes join the caller's transaction.

Importing this package is cheap: it never imports litellm (model calls import it lazily).
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

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
    "clear_store_files": "dbmemory.store.moves",
    "count_expirable_files": "dbmemory.store.expiry",
    "delete_file": "dbmemory.store.moves",
    "expire_files": "dbmemory.store.expiry",
    "expire_files_committing": "dbmemory.store.expiry",
    "get_file": "dbmemory.store.reads",
    "list_files": "dbmemory.store.reads",
    "put_file": "dbmemory.store.files",
    "build_store_key": "dbmemory.core.keys",
    "AgentConfig": "dbmemory.core.model",
    "Caps": "dbmemory.core.model",
    "FileInfo": "dbmemory.core.model",
    "FileRecord": "dbmemory.core.model",
    "StoreRef": "dbmemory.core.model",
    "augment_system_prompt": "dbmemory.tool.protocol",
    "get_memory_protocol": "dbmemory.tool.protocol",
    "check_run_ready": "dbmemory.store.resolve",
    "disable_for_agent": "dbmemory.store.agents",
    "enable_for_agent": "dbmemory.store.agents",
    "set_store_caps": "dbmemory.store.agents",
    "end_session": "dbmemory.store.drop",
    "get_agent_config": "dbmemory.store.agents",
    "list_agents": "dbmemory.store.agents",
    "resolve_store": "dbmemory.store.resolve",
    "resolve_store_id": "dbmemory.store.resolve",
    "use_store": "dbmemory.store.resolve",
    "ERROR_MARKER": "dbmemory.tool.messages",
    "MemoryTool": "dbmemory.tool.memory_tool",
    "tool_schema": "dbmemory.tool.schema",
    "run_turn": "dbmemory.agent.turn",
    "arun_turn": "dbmemory.agent.turn",
    "TurnConfig": "dbmemory.agent.turn_types",
    "TurnResult": "dbmemory.agent.turn_types",
    "memory_tools": "dbmemory.agent.litellm_tools",
    "handle_tool_calls": "dbmemory.agent.litellm_tools",
    "upgrade": "dbmemory.db.migrate",
    "current": "dbmemory.db.migrate",
    "create_engine": "dbmemory.db.engine",
}

def __getattr__(name: str) -> _Any:
    # PEP 562: the public API is imported on first use, so ``import dbmemory`` (and
    # ``dbmemory --help``) stays fast; nothing here ever imports litellm.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dbmemory' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # the public API only: no helper names (typing, importlib, the lazy table) and no
    # subpackages, which are imported on use
    return sorted(__all__)


del annotations  # the __future__ feature name is no part of the API

if _TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from dbmemory.agent.litellm_tools import handle_tool_calls, memory_tools
    from dbmemory.agent.turn import arun_turn, run_turn
    from dbmemory.agent.turn_types import TurnConfig, TurnResult
    from dbmemory.core.keys import build_store_key
    from dbmemory.core.model import AgentConfig, Caps, FileInfo, FileRecord, StoreRef
    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import current, upgrade
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
    from dbmemory.store.agents import (
        disable_for_agent,
        enable_for_agent,
        get_agent_config,
        list_agents,
        set_store_caps,
    )
    from dbmemory.store.drop import end_session
    from dbmemory.store.expiry import count_expirable_files, expire_files, expire_files_committing
    from dbmemory.store.files import put_file
    from dbmemory.store.moves import clear_store_files, delete_file
    from dbmemory.store.reads import get_file, list_files
    from dbmemory.store.resolve import check_run_ready, resolve_store, resolve_store_id, use_store
    from dbmemory.tool.memory_tool import MemoryTool
    from dbmemory.tool.messages import ERROR_MARKER
    from dbmemory.tool.protocol import augment_system_prompt, get_memory_protocol
    from dbmemory.tool.schema import tool_schema
