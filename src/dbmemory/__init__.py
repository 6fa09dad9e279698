"""dbmemory: persistent memory for LLM agents inside your own relational database.

Stores of small Markdown files (CLOB rows) under ``/memories``, the MEMORY tool (Anthropic's
memory-tool command set) for any model, caps, expiry and an audit log, on Oracle, PostgreSQL,
MariaDB/MySQL and SQLite. Every data-access function takes a SQLAlchemy ``Connection`` first and
never commits: memory writes join the caller's transaction.

Importing this package is cheap: it never imports litellm (model calls import it lazily).
"""

from __future__ import annotations

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
    use_store,
)
from dbmemory.tool import ERROR_MARKER, MemoryTool, tool_schema

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
    # schema set-up
    "create_engine",
    "upgrade",
    "current",
]


def __getattr__(name: str) -> object:
    # Schema set-up pulls in alembic: import it only when asked for.
    if name in ("upgrade", "current"):
        from dbmemory.db import migrate

        return getattr(migrate, name)
    if name == "create_engine":
        from dbmemory.db.engine import create_engine

        return create_engine
    raise AttributeError(f"module 'dbmemory' has no attribute {name!r}")
