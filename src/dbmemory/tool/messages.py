"""Every text the MEMORY tool returns, success and failure, in one place.

The texts are written for a model to act on: each failure names the value, the rule it broke and
a remedy. Where Anthropic's memory tool (``anthropic-sdk-python``,
``lib/tools/_beta_builtin_memory_tool.py``) has a wording, it is kept and a remedy is added.
No text contains SQL, a table name, a DSN or a driver code.

Failures are built here without the marker; :class:`~dbmemory.tool.memory_tool.MemoryTool`
returns ``error_text(message)``, i.e. ``"Error: " + message``. Pure helpers (argument parsing,
rendering, edits) raise :class:`ToolInputError` with one of these messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from dbmemory.core.paths import ROOT, quote_value

__all__ = [
    "ERROR_MARKER",
    "COMMANDS",
    "ToolInputError",
    "error_text",
    "is_error_text",
    "show_text",
    # success texts
    "view_file_header",
    "view_directory_header",
    "empty_file_note",
    "view_range_clamped_note",
    "file_output_clipped",
    "line_clipped",
    "listing_clipped",
    "output_clipped",
    "file_created",
    "file_edited",
    "file_edited_now_empty",
    "snippet_clipped",
    "deleted",
    "renamed",
    # failures that need facts from the store
    "path_not_found",
    "not_a_file",
    "file_exists",
    "directory_exists",
    "parent_is_file",
    "cannot_delete_root",
    "cannot_rename_root",
    "rename_destination_exists",
    "rename_into_itself",
    "rename_same_path",
    "file_too_large",
    "too_many_files",
    "store_too_large",
    "cap_exceeded",
    # failures of the pure helpers
    "old_str_empty",
    "old_str_not_found",
    "old_str_not_unique",
    "insert_line_out_of_range",
    "view_range_out_of_range",
    "view_range_on_empty_file",
    "view_range_malformed",
    "missing_parameter",
    "wrong_type",
    "text_too_long",
    "nul_in_text",
    "surrogate_in_text",
    "missing_command",
    "unknown_command",
    "invalid_json",
    "arguments_not_an_object",
    "arguments_too_deep",
    "arguments_too_long",
]

ERROR_MARKER = "Error: "
"""Prefix of every failure text the tool returns; a success never starts with it."""

COMMANDS: tuple[str, ...] = ("view", "create", "str_replace", "insert", "delete", "rename")
"""The six commands of Anthropic's memory tool, in its order."""

_COMMAND_LIST = ", ".join(COMMANDS)
_EXAMPLE = '{"command": "view", "path": "/memories"}'
_SHOWN_TEXT_CHARS = 200


class ToolInputError(Exception):
    """A command cannot run as given; nothing was changed.

    Internal to the tool: :class:`~dbmemory.tool.memory_tool.MemoryTool` turns it into ``error_text(str(exc))``.

    Attributes:
        message: the text for the model (value, rule, remedy), without :data:`ERROR_MARKER`.
        code: a stable code for logs and audit (``"invalid_argument"``, ``"invalid_path"``).
    """

    def __init__(self, message: str, *, code: str = "invalid_argument") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def error_text(message: str) -> str:
    """Prefix a failure message with :data:`ERROR_MARKER` (once, even if it already has it)."""
    return message if message.startswith(ERROR_MARKER) else ERROR_MARKER + message


def is_error_text(text: str) -> bool:
    """Tell whether a tool result is a failure (starts with :data:`ERROR_MARKER`)."""
    return text.startswith(ERROR_MARKER)


def show_text(text: str, max_chars: int = _SHOWN_TEXT_CHARS) -> str:
    """Show a model-supplied text verbatim between backticks, clipped to ``max_chars`` characters.

    Verbatim (not escaped) so that whitespace and line breaks read as the model wrote them, as
    Anthropic's tool does; clipped so a 10 MB ``old_str`` never makes a 10 MB message.
    """
    if len(text) <= max_chars:
        return f"`{text}`"
    return f"`{text[:max_chars]}`... ({len(text):,} characters)"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


# ----------------------------------------------------------------------------- success texts


def view_file_header(path: str) -> str:
    """First line of a file view (Anthropic's wording)."""
    return f"Here's the content of {path} with line numbers:"


def view_directory_header(path: str) -> str:
    """First line of a directory listing (the wording of Anthropic's memory tool docs)."""
    return (
        f"Here're the files and directories up to 2 levels deep in {path}, "
        "excluding hidden items and node_modules:"
    )


def empty_file_note(path: str) -> str:
    """Shown under the header when a file exists and holds no characters."""
    return f"(the file {path} exists and is empty: 0 lines, 0 characters)"


def view_range_clamped_note(end: int, start: int, last: int) -> str:
    """Shown after the lines when ``view_range`` ends past the last line."""
    return (
        f"(note: view_range end {end} is past the last line, {last}; "
        f"showed lines {start}-{last})"
    )


def file_output_clipped(limit_chars: int, first: int, last: int, total: int) -> str:
    """Shown after a file view cut at ``limit_chars`` characters, naming the next range."""
    return (
        f"(output clipped at {limit_chars:,} characters: showed lines {first}-{last} of "
        f"{total:,}; view the rest with view_range [{last + 1}, -1])"
    )


def line_clipped(limit_chars: int, line: int, line_chars: int, total: int) -> str:
    """Shown when a single line is longer than the output limit and was cut inside."""
    text = (
        f"(output clipped at {limit_chars:,} characters inside line {line}, which holds "
        f"{line_chars:,} characters; the rest of that line cannot be shown"
    )
    if line < total:
        return text + f"; view the following lines with view_range [{line + 1}, -1])"
    return text + ")"


def listing_clipped(limit_chars: int, shown: int, left_files: int, total_files: int) -> str:
    """Shown after a directory listing cut at ``limit_chars`` characters: the entries shown,
    and how many of the files under the directory (at any depth) no shown line accounts for
    (a file line accounts for its file, a second-level directory line for every file under
    it; hidden files are never listed)."""
    return (
        f"(listing clipped at {limit_chars:,} characters: showed {shown:,} entries; "
        f"{left_files:,} of {total_files:,} files not listed; view a subdirectory to see the rest)"
    )


def output_clipped(limit_chars: int) -> str:
    """Shown after any other output cut at ``limit_chars`` characters."""
    return (
        f"(output clipped at {limit_chars:,} characters; view a file in parts with "
        "view_range [start, end], or view a subdirectory)"
    )


def file_created(path: str) -> str:
    """Result of ``create`` (Anthropic's wording)."""
    return f"File created successfully at: {path}"


def file_edited(path: str) -> str:
    """Header of the numbered snippet returned by ``str_replace`` and ``insert``."""
    return (
        f"The memory file {path} has been edited. "
        "Here is the snippet showing the change (with line numbers):"
    )


def file_edited_now_empty(path: str) -> str:
    """Result of an edit that left the file without characters (the file still exists)."""
    return f"The memory file {path} has been edited. It is now empty (0 characters) and still exists."


def snippet_clipped(path: str, next_line: int, end_line: int) -> str:
    """Shown under an edit snippet cut at its line limit."""
    return f"(snippet clipped; view {path} with view_range [{next_line}, {end_line}] to see the rest)"


def deleted(path: str, files: int | None = None) -> str:
    """Result of ``delete``; ``files`` is the number of files removed for a directory."""
    if files is None:
        return f"Successfully deleted {path}"
    return f"Successfully deleted {path} ({_plural(files, 'file')})"


def renamed(old_path: str, new_path: str, files: int | None = None) -> str:
    """Result of ``rename``; ``files`` is the number of files moved for a directory."""
    if files is None:
        return f"Successfully renamed {old_path} to {new_path}"
    return f"Successfully renamed {old_path} to {new_path} ({_plural(files, 'file')})"


# -------------------------------------------------------- failures that need store facts


def path_not_found(path: str) -> str:
    """No file and no directory (prefix of a file) at ``path`` (Anthropic's wording)."""
    return (
        f"The path {path} does not exist. Please provide a valid path: "
        f"view {ROOT} to list the existing files."
    )


def not_a_file(path: str, command: str) -> str:
    """``str_replace``/``insert`` (or a ranged read) addressed a directory."""
    return (
        f"The path {path} is a directory, not a file: {command} works on one file. "
        f"View {path} to list its files."
    )


def file_exists(path: str) -> str:
    """``create`` on an existing file (Anthropic's wording plus a remedy)."""
    return (
        f"File {path} already exists: use str_replace or insert to change it, "
        "or delete it first to write it anew."
    )


def directory_exists(path: str, files: int) -> str:
    """``create`` on a path that is a directory (a prefix of existing files)."""
    return (
        f"Cannot create {path}: it is a directory holding {_plural(files, 'file')}. "
        f"Choose a file name, e.g. {path}/notes.md."
    )


def parent_is_file(path: str, parent: str) -> str:
    """``create``/``rename`` to a path below an existing file."""
    return (
        f"Cannot write {path}: {parent} is a file, not a directory. "
        "Choose a path that is not below an existing file."
    )


def cannot_delete_root() -> str:
    """``delete /memories`` (Anthropic's wording plus a remedy)."""
    return (
        f"Cannot delete the {ROOT} directory itself: delete the files or directories "
        "inside it instead."
    )


def cannot_rename_root() -> str:
    """``rename`` from or to ``/memories`` itself."""
    return (
        f"Cannot rename the {ROOT} directory itself: rename the files or directories "
        "inside it instead."
    )


def rename_destination_exists(new_path: str) -> str:
    """``rename`` onto an existing file or directory (Anthropic's wording plus a remedy)."""
    return (
        f"The destination {new_path} already exists: choose another new_path, "
        "or delete the destination first."
    )


def rename_into_itself(old_path: str, new_path: str) -> str:
    """``rename`` of a directory to a path inside it."""
    return f"Cannot move {old_path} into itself ({new_path}): choose a new_path outside {old_path}."


def rename_same_path(path: str) -> str:
    """``rename`` with ``old_path`` equal to ``new_path`` after normalisation."""
    return f"old_path and new_path are both {path}: pass a different new_path."


def file_too_large(path: str, chars: int, limit: int) -> str:
    """The ``max_file_chars`` cap would be exceeded; nothing was written."""
    return (
        f"Cannot write {path}: it would hold {chars:,} characters; the limit is "
        f"{limit:,} characters per file. Write less text or split it into several files."
    )


def too_many_files(path: str, limit: int) -> str:
    """The ``max_files`` cap would be exceeded; nothing was written."""
    return (
        f"Cannot create {path}: the memory store already holds {_plural(limit, 'file')}, the "
        "most it may hold. Delete or merge files you no longer need, then retry."
    )


def store_too_large(path: str, chars: int, limit: int) -> str:
    """The ``max_store_chars`` cap would be exceeded; nothing was written."""
    return (
        f"Cannot write {path}: the memory store would hold {chars:,} characters; the limit is "
        f"{limit:,} characters in all. Delete or shorten files you no longer need, then retry."
    )


def cap_exceeded(cap: str, path: str, limit: int, actual: int) -> str:
    """Message for a :class:`~dbmemory.errors.CapExceededError` (its ``cap``, ``limit``,
    ``actual``) on a write to ``path``."""
    if cap == "max_file_chars":
        return file_too_large(path, actual, limit)
    if cap == "max_files":
        return too_many_files(path, limit)
    return store_too_large(path, actual, limit)


# ------------------------------------------------------------ failures of the pure helpers


def old_str_empty(path: str) -> str:
    """``str_replace`` with ``old_str == ""``."""
    return (
        f"No replacement was performed: old_str is empty. Pass the exact text to replace; it "
        f"must appear exactly once in {path}. To add text without replacing any, use insert."
    )


def old_str_not_found(path: str, old_str: str, *, crlf: bool = False) -> str:
    """``str_replace`` whose ``old_str`` does not occur (Anthropic's wording plus a remedy).

    Args:
        crlf: the file uses ``\\r\\n`` line ends and ``old_str`` would match with them.
    """
    text = (
        f"No replacement was performed, old_str {show_text(old_str)} did not appear verbatim "
        f"in {path}. "
    )
    if crlf:
        return text + (
            "The file ends its lines with \\r\\n (Windows style): write every line break in "
            "old_str as \\r\\n."
        )
    return text + (
        "View the file and copy the text exactly, including spaces, tabs and line breaks."
    )


def old_str_not_unique(
    path: str, old_str: str, count: int, lines: Sequence[int], *, more: bool = False
) -> str:
    """``str_replace`` whose ``old_str`` occurs more than once (Anthropic's wording).

    Args:
        count: occurrences found (overlapping ones included).
        lines: the distinct 1-based line numbers where occurrences start, ascending.
        more: the search stopped early; there are more than ``count`` occurrences.
    """
    found = f"more than {count:,}" if more else f"{count:,}"
    shown_lines = ", ".join(str(line) for line in lines) + (", ..." if more else "")
    return (
        f"No replacement was performed. Multiple occurrences of old_str {show_text(old_str)} "
        f"in lines: {shown_lines} ({found} occurrences in {path}). Please ensure it is unique: "
        "include more of the surrounding text in old_str so that it matches exactly once."
    )


def insert_line_out_of_range(path: str, insert_line: int, line_count: int) -> str:
    """``insert`` with ``insert_line`` outside ``[0, line_count]`` (Anthropic's wording)."""
    text = (
        f"Invalid `insert_line` parameter: {insert_line}. It should be within the range "
        f"[0, {line_count}]: "
    )
    if line_count == 0:
        return text + f"{path} is empty, so insert at line 0."
    return text + (
        f"0 inserts before the first line, {line_count} after the last line of {path} "
        f"({_plural(line_count, 'line')})."
    )


def view_range_out_of_range(path: str, start: int, end: int, line_count: int) -> str:
    """``view_range`` that selects no line of a file with ``line_count`` lines."""
    return (
        f"Invalid `view_range` parameter: [{start}, {end}]. {path} has "
        f"{_plural(line_count, 'line')}: use [start, end] with 1 <= start <= {line_count} "
        "and start <= end, or end = -1 to read to the last line."
    )


def view_range_on_empty_file(path: str, start: int, end: int) -> str:
    """``view_range`` on a file with no lines."""
    return (
        f"Invalid `view_range` parameter: [{start}, {end}]. {path} is empty (0 lines): "
        "view it without view_range."
    )


def view_range_malformed(raw: object) -> str:
    """``view_range`` that is not two integers."""
    return (
        f"Invalid `view_range` parameter: {_show(raw)}. It must be a list of "
        "two integers [start, end], e.g. [1, 20], or [5, -1] to read from line 5 to the end."
    )


def missing_parameter(name: str, command: str, expected: str) -> str:
    """A required parameter is absent or null."""
    return f"Missing required parameter `{name}` for command `{command}`: pass {expected}."


def wrong_type(name: str, expected: str, value: object) -> str:
    """A parameter has the wrong JSON type."""
    return (
        f"Parameter `{name}` must be {expected}, got {_json_type(value)} {_show(value)}."
    )


def text_too_long(name: str, chars: int, limit: int) -> str:
    """A string parameter is over the tool's hard input bound (before any cap check)."""
    return (
        f"Parameter `{name}` is {chars:,} characters long; this tool refuses more than "
        f"{limit:,} characters (the per-file cap is lower). Write less text, or split it "
        "into several files."
    )


def nul_in_text(name: str, index: int) -> str:
    """A text parameter contains NUL, which no memory file may hold."""
    return (
        f"Parameter `{name}` contains a NUL character ('\\x00') at position {index:,}: memory "
        "files hold text only. Remove the NUL characters."
    )


def surrogate_in_text(name: str, index: int) -> str:
    """A text parameter holds a lone surrogate (e.g. a JSON ``"\ud800"`` escape), not text."""
    return (
        f"Parameter `{name}` contains a lone surrogate (an unpaired '\\ud800'-'\\udfff' escape) at "
        f"position {index:,}, which is not valid Unicode text. Send the characters themselves, "
        "or a complete surrogate pair."
    )


def missing_command() -> str:
    """No ``command`` in the arguments."""
    return f"Missing required parameter `command`: pass one of {_COMMAND_LIST}, e.g. {_EXAMPLE}."


def unknown_command(value: str) -> str:
    """A ``command`` that is not one of :data:`COMMANDS`."""
    return f"Unknown command {quote_value(value)}: use one of {_COMMAND_LIST}."


def invalid_json(detail: str) -> str:
    """The arguments are a string that is not JSON."""
    return f"The arguments are not valid JSON ({detail}): send one JSON object such as {_EXAMPLE}."


def arguments_not_an_object(value: object) -> str:
    """The arguments are JSON, but not an object."""
    return f"The arguments must be a JSON object such as {_EXAMPLE}, got {_json_type(value)}."


def arguments_too_deep() -> str:
    """The arguments nest too deeply to parse safely."""
    return f"The arguments are nested too deeply to read: send one flat JSON object such as {_EXAMPLE}."


def arguments_too_long(chars: int, limit: int) -> str:
    """The raw argument text is over the tool's hard bound."""
    return (
        f"The arguments are {chars:,} characters long; this tool refuses more than {limit:,}: "
        "write less text, or split it into several files."
    )


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _show(value: object, max_chars: int = 100) -> str:
    """A value for a message: strings quoted and escaped, others as Python shows them; clipped."""
    if isinstance(value, str):
        return quote_value(value, max_chars)
    if isinstance(value, (list, tuple)) and len(value) > 10:
        value = [*value[:10], "..."]
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not break a message
        text = f"<{type(value).__name__}>"
    if len(text) > max_chars:
        text = text[:max_chars] + "..."
    return text
