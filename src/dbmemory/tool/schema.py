"""The MEMORY tool's definition in OpenAI function-calling format (what litellm passes on).

The command set and parameter names are those of Anthropic's memory tool (``memory_20250818``),
so a model trained on it, or on the text editor tool, calls this one the same way.
"""

from __future__ import annotations

import copy
from typing import Any

from dbmemory.core.paths import ROOT
from dbmemory.tool.messages import COMMANDS

__all__ = ["TOOL_NAME", "tool_schema"]

TOOL_NAME = "memory"
"""The function name models call."""

_DESCRIPTION = (
    "Persistent memory that survives across conversations: a small tree of text files under "
    f"{ROOT}. View {ROOT} before starting a task to recall what you learned earlier, and record "
    "progress, decisions and facts worth keeping as you work.\n"
    "Commands:\n"
    "- view: list a directory (sizes, two levels deep) or show a file with line numbers "
    "(optional view_range [start, end], end -1 for the last line; ignored for a directory).\n"
    "- create: write a new file with file_text.\n"
    "- str_replace: replace old_str, which must appear exactly once in the file, with new_str "
    "(omit new_str to delete the text).\n"
    "- insert: insert insert_text after line insert_line (0 inserts at the top).\n"
    "- delete: delete a file, or a directory with everything in it.\n"
    "- rename: move a file or directory from old_path to new_path.\n"
    f"Every path starts with {ROOT}/ (e.g. {ROOT}/notes.md); directories exist only as parts "
    "of file paths. Failures return text starting with 'Error: ' that says what to change."
)

_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": _DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "enum": list(COMMANDS),
                    "description": "The operation to perform: " + ", ".join(COMMANDS) + ".",
                },
                "path": {
                    "type": "string",
                    "description": (
                        f"File or directory path under {ROOT}, e.g. {ROOT}/notes.md. "
                        "Used by view, create, str_replace, insert and delete."
                    ),
                },
                "view_range": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "minItems": 2,
                    "maxItems": 2,
                    "description": (
                        "view of a file only: [start, end], 1-based and inclusive; end -1 reads "
                        "to the last line. Omit to see the whole file. Ignored for a directory."
                    ),
                },
                "file_text": {
                    "type": "string",
                    "description": "create only: the full text of the new file ('' for an empty file).",
                },
                "old_str": {
                    "type": "string",
                    "description": (
                        "str_replace only: the exact text to replace, including whitespace and "
                        "line breaks; it must appear exactly once in the file."
                    ),
                },
                "new_str": {
                    "type": "string",
                    "description": "str_replace only: the replacement text; omit it to delete old_str.",
                },
                "insert_line": {
                    "type": "integer",
                    "minimum": 0,
                    "description": (
                        "insert only: the line after which to insert; 0 inserts at the top, "
                        "the file's line count appends at the end."
                    ),
                },
                "insert_text": {
                    "type": "string",
                    "description": "insert only: the text to insert (one or more lines).",
                },
                "old_path": {
                    "type": "string",
                    "description": f"rename only: the current path under {ROOT}.",
                },
                "new_path": {
                    "type": "string",
                    "description": f"rename only: the new path under {ROOT}.",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
}


def tool_schema() -> dict[str, Any]:
    """Return the MEMORY tool definition for ``tools=[...]`` (OpenAI function-calling format).

    Returns:
        ``{"type": "function", "function": {"name": "memory", "description": ...,
        "parameters": <JSON schema>}}``; ``command`` is an enum of the six commands and every
        parameter has a description. A fresh deep copy on each call, so a caller may change it.
    """
    return copy.deepcopy(_SCHEMA)
