"""The texts of the Anthropic SDK's file-system memory tool, rebuilt from a store's contents.

:class:`dbmemory.integrations.anthropic_tool.DbMemoryTool` gives the model, for the same calls
and the same stored contents, the text ``anthropic.tools.memory.BetaLocalFilesystemMemoryTool``
gives (``anthropic`` 2.x, ``lib/tools/_beta_builtin_memory_tool.py``), byte for byte. The
functions here are pure (no database, no file system): they take what the store holds and
return the SDK's answer, or raise :class:`SdkError` with the SDK's error text. The SDK itself is
not imported here, so the rules can be read (and tested) on their own.

Sizes: the SDK shows ``os.stat().st_size``, the bytes a file takes on disk, which for the UTF-8
file it wrote is the UTF-8 length of the text (``"é"`` is 2 bytes); a directory shows what
ext4 and most Linux file systems report for a directory of a few entries, 4,096 bytes (``4K``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "DIRECTORY_BYTES",
    "LINE_NUMBER_WIDTH",
    "MAX_LINES",
    "SdkError",
    "format_size",
    "resolve",
    "listing",
    "file_view",
    "str_replace",
    "insert",
]

MAX_LINES = 999_999
"""The SDK refuses to show a file of more lines than this."""

LINE_NUMBER_WIDTH = len(str(MAX_LINES))
"""Line numbers are right-aligned in this many characters (6), then a TAB."""

DIRECTORY_BYTES = 4096
"""The size shown for a directory, in bytes (what ext4 reports for a small directory)."""

_ROOT = "/memories"


class SdkError(Exception):
    """A failure with the SDK's text (the adapter raises it as the SDK's ``ToolError``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def format_size(size: int) -> str:
    """A size in bytes as the SDK shows it: ``0B``, ``36B``, ``1.5K``, ``4K``, ``2.0M``.

    The unit is the largest power of 1,024 (B, K, M, G) not above the size; a whole number of
    units has no decimals, any other value one (rounded as ``format(x, ".1f")`` does).
    """
    if size == 0:
        return "0B"
    units = "BKMG"
    power = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**power)
    if value == int(value):
        return f"{int(value)}{units[power]}"
    return f"{value:.1f}{units[power]}"


def resolve(path: str) -> str:
    """The path the SDK's tool would act on, spelled as a dbmemory path (before its rules).

    The SDK requires the prefix ``/memories``, then resolves ``.``, ``..`` and repeated slashes
    against its root directory (``<base>/memories``) and refuses a result outside it.

    Returns:
        ``/memories`` or ``/memories/<segments>``.

    Raises:
        SdkError: ``Path must start with /memories, got: ...`` or
            ``Path ... would escape /memories directory`` (the SDK's texts); also, unlike the
            SDK, for a path such as ``/memoriesX`` that only shares the prefix's letters (the
            SDK maps it onto ``/memories/X``).
    """
    if not path.startswith(_ROOT):
        raise SdkError(f"Path must start with /memories, got: {path}")
    rest = path[len(_ROOT) :]
    if rest and not rest.startswith("/"):
        raise SdkError(
            f"Path must be /memories or start with /memories/, got: {path} (a name that only "
            "begins with the letters 'memories' is not inside it)"
        )
    # The SDK's root is the directory "memories"; ".." past it escapes unless the path comes
    # back into "memories" (``/memories/../memories/x`` is inside, as on the SDK's disk).
    stack = ["memories"]
    for segment in rest.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if stack:
                stack.pop()
        else:
            stack.append(segment)
    if not stack or stack[0] != "memories":
        raise SdkError(f"Path {path} would escape /memories directory")
    return "/" + "/".join(stack)


def listing(shown_path: str, files: Iterable[tuple[str, int]]) -> str:
    """The SDK's directory view.

    Args:
        shown_path: the path as the model gave it (the SDK echoes it verbatim: ``/memories/``
            gives ``/memories//notes.md`` lines, as the SDK does).
        files: ``(path relative to the directory, size in bytes)`` of every file under it, at
            any depth (``"notes.md"``, ``"a/b/c.md"``).

    Returns:
        A header line, the directory itself, then every entry up to two levels deep, each
        level sorted by name (code-point order) and directories before their contents; a name
        starting with ``.`` is hidden with everything under it.
    """
    tree: dict[str, object] = {}
    for relative, size in files:
        node = tree
        *parents, name = relative.split("/")
        for part in parents:
            child = node.setdefault(part, {})
            assert isinstance(child, dict)  # a file is never the parent of another
            node = child
        node[name] = size
    lines = [f"{format_size(DIRECTORY_BYTES)}\t{shown_path}"]

    def walk(node: dict[str, object], prefix: str, depth: int) -> None:
        for name in sorted(node):
            if name.startswith("."):
                continue
            entry = node[name]
            relative = f"{prefix}{name}"
            if isinstance(entry, dict):
                lines.append(f"{format_size(DIRECTORY_BYTES)}\t{shown_path}/{relative}/")
                if depth < 2:
                    walk(entry, relative + "/", depth + 1)
            else:
                assert isinstance(entry, int)
                lines.append(f"{format_size(entry)}\t{shown_path}/{relative}")

    walk(tree, "", 1)
    header = (
        f"Here're the files and directories up to 2 levels deep in {shown_path}, "
        "excluding hidden items:"
    )
    return header + "\n" + "\n".join(lines)


def _numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{line}" for n, line in enumerate(lines, first))


def file_view(shown_path: str, text: str, view_range: Sequence[int] | None) -> str:
    """The SDK's file view: every line (the text split on LF, so a final newline shows an
    empty last line), or the lines of ``view_range`` ``[first, last]`` (1-based, ``-1`` = to
    the end; as in the SDK, a range outside the file shows no line rather than an error, and
    a range of another length than 2 shows the whole file).

    Raises:
        SdkError: more than 999,999 lines.
    """
    lines = text.split("\n")
    if len(lines) > MAX_LINES:
        raise SdkError(f"File {shown_path} exceeds maximum line limit of 999,999 lines.")
    first = 1
    if view_range and len(view_range) == 2:
        start = max(1, view_range[0]) - 1
        end = len(lines) if view_range[1] == -1 else view_range[1]
        lines = lines[start:end]
        first = start + 1
    return f"Here's the content of {shown_path} with line numbers:\n" + _numbered(lines, first)


def str_replace(shown_path: str, text: str, old: str, new: str) -> tuple[str, str]:
    """The SDK's ``str_replace``: ``old`` must occur exactly once (occurrences counted as
    :meth:`str.count` counts them, without overlap).

    Returns:
        ``(new text, answer)``: the answer shows the changed line with two lines of context on
        each side, numbered, from the new text.

    Raises:
        SdkError: ``old`` does not occur, or occurs more than once (the message lists the line
            of every match, overlapping ones included, as the SDK does).
    """
    count = text.count(old)
    if count == 0:
        raise SdkError(
            f"No replacement was performed, old_str `{old}` did not appear verbatim in {shown_path}."
        )
    if count > 1:
        found, at = [], text.find(old)
        while at != -1:
            found.append(str(text.count("\n", 0, at) + 1))
            at = text.find(old, at + 1)
        raise SdkError(
            f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
            f"{', '.join(found)}. Please ensure it is unique"
        )
    changed = text.count("\n", 0, text.find(old))
    new_text = text.replace(old, new)
    new_lines = new_text.split("\n")
    first = max(0, changed - 2)
    last = min(len(new_lines), changed + 3)
    answer = (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n" + _numbered(new_lines[first:last], first + 1)
    )
    return new_text, answer


def insert(shown_path: str, text: str, line: int, inserted: str) -> str:
    """The SDK's ``insert``: ``inserted`` (its trailing newlines dropped) becomes a line after
    line ``line`` (0 = before the first); lines split on LF only (a CR stays in its line), a
    final newline ends the last line, and the result always ends with a newline.

    Returns:
        The new text (the answer is ``The file <path> has been edited.``).

    Raises:
        SdkError: ``line`` outside ``[0, number of lines]``.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if line < 0 or line > len(lines):
        raise SdkError(
            f"Invalid `insert_line` parameter: {line}. It should be within the range [0, {len(lines)}]."
        )
    lines.insert(line, inserted.rstrip("\n"))
    result = "\n".join(lines)
    return result if result.endswith("\n") else result + "\n"
