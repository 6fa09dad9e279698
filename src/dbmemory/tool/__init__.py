"""The MEMORY tool: Anthropic's memory-tool command set (view, create, str_replace, insert,
delete, rename) over a database store, for any model."""

from __future__ import annotations

from dbmemory.tool.memory_tool import MemoryTool
from dbmemory.tool.messages import COMMANDS, ERROR_MARKER, is_error_text
from dbmemory.tool.schema import tool_schema

__all__ = ["MemoryTool", "tool_schema", "ERROR_MARKER", "COMMANDS", "is_error_text"]


def __dir__() -> list[str]:
    # the public API only, never the helper names this module imports
    return sorted(__all__)
