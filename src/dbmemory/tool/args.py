"""Read the MEMORY tool's arguments, however a model or SDK hands them over, into a command.

Parameter names follow Anthropic's memory tool schema (``memory_20250818``): ``view(path,
view_range)``, ``create(path, file_text)``, ``str_replace(path, old_str, new_str)``,
``insert(path, insert_line, insert_text)``, ``delete(path)``, ``rename(old_path, new_path)``.

Tolerated, because real providers send them:

* a ``dict``; a JSON string of an object (also a JSON string of such a string); ``bytes``;
  an object with ``model_dump()`` (pydantic) or a ``__dict__``;
* arguments wrapped one level deep: ``{"input": {...}}``, ``{"arguments": "<json>"}``,
  ``{"args": ...}``, ``{"parameters": ...}``, ``{"params": ...}``, ``{"tool_input": ...}``, or any
  single key whose value is an object containing ``command``;
* OpenAI strict mode, which sends every parameter, unused ones as ``null`` or invented values:
  parameters a command does not use are ignored, and ``view_range`` is kept raw
  (:attr:`View.view_range_raw`) because it only matters for a file; :class:`~dbmemory.tool.memory_tool.MemoryTool` calls
  :func:`coerce_view_range` once it knows the path is a file;
* ``command`` in any case with surrounding spaces; ``insert_line`` as ``"3"`` or ``3.0``
  (never a boolean; in text only ASCII digits count, never ``"٣"`` or ``"３"``); ``insert`` with ``new_str`` instead of ``insert_text`` (the text editor
  tool's name); ``rename`` with ``path`` instead of ``old_path``.

Paths are normalised here (:func:`dbmemory.core.paths.normalize_path`), so every path in a command is
canonical. Every failure raises :class:`~dbmemory.tool.messages.ToolInputError` with a message
naming the parameter and the expected type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dbmemory.core.paths import normalize_path
from dbmemory.errors import InvalidPathError
from dbmemory.tool import messages
from dbmemory.tool.messages import COMMANDS, ToolInputError

_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate (not encodable as UTF-8); searched without copying the text."""

__all__ = [
    "MAX_TEXT_CHARS",
    "EXPECTED_TEXT",
    "EXPECTED_PATH",
    "EXPECTED_LINE",
    "MAX_ARGUMENT_CHARS",
    "WRAPPER_KEYS",
    "View",
    "Create",
    "StrReplace",
    "Insert",
    "Delete",
    "Rename",
    "Command",
    "parse_arguments",
    "coerce_view_range",
]

MAX_TEXT_CHARS = 10_000_000
"""Longest string parameter, in characters; refused at once (the store's caps are lower and are
checked later, with their own messages)."""

MAX_ARGUMENT_CHARS = 6 * MAX_TEXT_CHARS + 1_000_000
"""Longest JSON argument text, in characters (room for ``\\uXXXX`` escapes of the longest
parameter); longer text is refused without parsing."""

WRAPPER_KEYS: tuple[str, ...] = ("input", "arguments", "args", "parameters", "params", "tool_input")
"""Keys under which some clients nest the real arguments one level deep."""

_INTEGER = re.compile(r"[ \t\r\n]*[+-]?[0-9]{1,18}[ \t\r\n]*")
"""A number in a text argument: ASCII digits only (``\\d`` would also take ``"٣"``, ``"３"`` and
every other script's decimal digits, which ``int()`` reads), with ASCII blanks around."""
_MAX_VIEW_RANGE_TEXT = 100

EXPECTED_TEXT = "a string"
EXPECTED_PATH = "a path string under /memories, e.g. '/memories/notes.md'"
EXPECTED_LINE = "an integer line number (0 inserts at the top of the file)"
"""What the texts of a wrong or missing parameter say is expected (the SQL ``run_command``
renders the same texts)."""
_TEXT, _PATH, _LINE = EXPECTED_TEXT, EXPECTED_PATH, EXPECTED_LINE


@dataclass(frozen=True)
class View:
    """``view``: list a directory or show a file.

    Attributes:
        path: canonical path.
        view_range_raw: ``view_range`` exactly as received (``None`` if absent); turn it into
            ``(start, end)`` with :func:`coerce_view_range` only when ``path`` is a file; a
            directory view ignores it.
    """

    path: str
    view_range_raw: object = None
    command: ClassVar[str] = "view"


@dataclass(frozen=True)
class Create:
    """``create``: write a new file. ``file_text`` may be ``""`` (an empty file)."""

    path: str
    file_text: str
    command: ClassVar[str] = "create"


@dataclass(frozen=True)
class StrReplace:
    """``str_replace``: replace the one occurrence of ``old_str``; ``new_str=None`` deletes it.

    ``old_str`` is passed on even when empty, so the edit reports that rule with its own text.
    """

    path: str
    old_str: str
    new_str: str | None = None
    command: ClassVar[str] = "str_replace"


@dataclass(frozen=True)
class Insert:
    """``insert``: insert ``insert_text`` after line ``insert_line`` (0 = top); the range is
    checked against the file later."""

    path: str
    insert_line: int
    insert_text: str
    command: ClassVar[str] = "insert"


@dataclass(frozen=True)
class Delete:
    """``delete``: remove a file, or a directory with everything under it."""

    path: str
    command: ClassVar[str] = "delete"


@dataclass(frozen=True)
class Rename:
    """``rename``: move a file or a directory to a new path."""

    old_path: str
    new_path: str
    command: ClassVar[str] = "rename"


Command = View | Create | StrReplace | Insert | Delete | Rename
"""Any parsed command; match on the class or on ``.command``."""


def parse_arguments(arguments: object) -> Command:
    """Turn the tool's raw arguments into a command with canonical paths.

    Args:
        arguments: a ``dict``, a JSON text (``str`` or ``bytes``) of an object, an object with
            ``model_dump()`` or ``__dict__``, or any of these wrapped one level deep (see the
            module docstring).

    Returns:
        One of :class:`View`, :class:`Create`, :class:`StrReplace`, :class:`Insert`,
        :class:`Delete`, :class:`Rename`.

    Raises:
        ToolInputError: invalid JSON, JSON that is not an object, nesting too deep for the
            parser, argument text over :data:`MAX_ARGUMENT_CHARS`; no or an unknown
            ``command`` (the message lists the six); a required parameter missing or ``null``;
            a parameter of the wrong type; a string parameter over :data:`MAX_TEXT_CHARS`; a
            NUL character or a lone surrogate in text to be written (``file_text``,
            ``new_str``, ``insert_text``); an invalid path (``code="invalid_path"``).
    """
    data = _unwrap(_to_mapping(arguments))
    if "command" not in data or data["command"] is None:
        raise ToolInputError(messages.missing_command())
    raw_command = data["command"]
    if not isinstance(raw_command, str):
        raise ToolInputError(
            messages.wrong_type("command", "one of " + ", ".join(COMMANDS), raw_command)
        )
    command = raw_command.strip().lower()
    if command == "view":
        return View(_path(data, "path", command), data.get("view_range"))
    if command == "create":
        return Create(
            _path(data, "path", command),
            _text(data, "file_text", command, "the file's full text as a string ('' for empty)"),
        )
    if command == "str_replace":
        return StrReplace(
            _path(data, "path", command),
            _string(data, "old_str", command, "the exact text to replace (it must occur once)"),
            _optional_text(data, "new_str"),
        )
    if command == "insert":
        return Insert(
            _path(data, "path", command),
            _insert_line(data),
            _insert_text(data),
        )
    if command == "delete":
        return Delete(_path(data, "path", command))
    if command == "rename":
        old_name = "old_path" if data.get("old_path") is not None or data.get("path") is None else "path"
        return Rename(_path(data, old_name, command), _path(data, "new_path", command))
    raise ToolInputError(messages.unknown_command(raw_command))


def coerce_view_range(raw: object) -> tuple[int, int] | None:
    """Read a raw ``view_range`` into ``(start, end)``.

    Only the shape is checked here; :func:`dbmemory.tool.render.resolve_view_range` checks the
    numbers against the file. Call it for a file view only: a directory view ignores
    ``view_range``.

    Args:
        raw: :attr:`View.view_range_raw`: ``None``, ``[]`` or ``""`` (no range, as OpenAI strict
            mode sends for an unused parameter), a list or tuple of two integers (``"4"`` and
            ``4.0`` accepted, booleans refused), or a JSON text of such a list (``"[4, -1]"``,
            also ``"4, -1"``).

    Returns:
        ``(start, end)``, or ``None`` for no range.

    Raises:
        ToolInputError: any other shape or type; the message shows the value and the expected
            form ``[start, end]``.
    """
    if raw is None:
        return None
    value = raw
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return None
        if len(text) > _MAX_VIEW_RANGE_TEXT:
            raise ToolInputError(messages.view_range_malformed(raw))
        if not text.startswith("["):
            text = f"[{text}]"
        try:
            value = json.loads(text)
        except ValueError:
            raise ToolInputError(messages.view_range_malformed(raw)) from None
    if isinstance(value, (list, tuple)):
        if len(value) == 0:
            return None
        if len(value) == 2:
            start, end = (_as_int(item) for item in value)
            if start is not None and end is not None:
                return start, end
    raise ToolInputError(messages.view_range_malformed(raw))


# ------------------------------------------------------------------------------ internals


def _to_mapping(value: object) -> dict[str, object]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolInputError(messages.invalid_json(f"not UTF-8 text at byte {exc.start}")) from None
    if isinstance(value, str):
        loaded = _load_json(value)
        if isinstance(loaded, str) and loaded.lstrip().startswith("{"):  # JSON text of JSON text
            loaded = _load_json(loaded)
        if not isinstance(loaded, dict):
            raise ToolInputError(messages.arguments_not_an_object(loaded))
        return loaded
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            dumped = dump()
        except Exception:  # noqa: BLE001 - a broken model object is an input error
            dumped = None
        if isinstance(dumped, Mapping):
            return dict(dumped)
        raise ToolInputError(messages.arguments_not_an_object(value))
    if (
        value is not None
        and not isinstance(value, (list, tuple, int, float, bool))
        and hasattr(value, "__dict__")
    ):
        return {key: item for key, item in vars(value).items() if not key.startswith("_")}
    raise ToolInputError(messages.arguments_not_an_object(value))


def _load_json(text: str) -> object:
    if len(text) > MAX_ARGUMENT_CHARS:
        raise ToolInputError(messages.arguments_too_long(len(text), MAX_ARGUMENT_CHARS))
    if text.strip() == "":
        raise ToolInputError(messages.invalid_json("the text is empty"))
    try:
        return json.loads(text)
    except RecursionError:
        raise ToolInputError(messages.arguments_too_deep()) from None
    except json.JSONDecodeError as exc:
        detail = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise ToolInputError(messages.invalid_json(detail)) from None
    except ValueError as exc:  # e.g. an integer with too many digits
        raise ToolInputError(messages.invalid_json(str(exc)[:100])) from None


def _unwrap(data: dict[str, object]) -> dict[str, object]:
    """Return the arguments, looking one level inside a wrapper when ``command`` is absent.

    A known wrapper key (:data:`WRAPPER_KEYS`) whose value cannot be read reports that error;
    any other single key is only tried when its value is an object or a JSON object text.
    """
    if "command" in data:
        return data
    keys = [key for key in WRAPPER_KEYS if key in data]
    known = bool(keys)
    if not known and len(data) == 1:
        keys = list(data)
    first_error: ToolInputError | None = None
    for key in keys:
        inner = data[key]
        if isinstance(inner, (bytes, bytearray)):
            inner = inner.decode("utf-8", errors="replace")
        if isinstance(inner, str):
            if not known and not inner.lstrip().startswith("{"):
                continue
        elif not isinstance(inner, Mapping) and not hasattr(inner, "model_dump"):
            continue
        try:
            candidate = _to_mapping(inner)
        except ToolInputError as exc:
            first_error = first_error or exc
            continue
        if "command" in candidate:
            return candidate
    if first_error is not None:
        raise first_error
    return data


def _string(data: Mapping[str, object], name: str, command: str, expected: str) -> str:
    value = data.get(name)
    if value is None:
        raise ToolInputError(messages.missing_parameter(name, command, expected))
    if not isinstance(value, str):
        raise ToolInputError(messages.wrong_type(name, _TEXT, value))
    if len(value) > MAX_TEXT_CHARS:
        raise ToolInputError(messages.text_too_long(name, len(value), MAX_TEXT_CHARS))
    surrogate = None if value.isascii() else _SURROGATE.search(value)
    if surrogate is not None:
        raise ToolInputError(messages.surrogate_in_text(name, surrogate.start()))
    return value


def _check_written_text(name: str, value: str) -> str:
    if len(value) > MAX_TEXT_CHARS:
        raise ToolInputError(messages.text_too_long(name, len(value), MAX_TEXT_CHARS))
    index = value.find("\x00")
    if index != -1:
        raise ToolInputError(messages.nul_in_text(name, index))
    surrogate = None if value.isascii() else _SURROGATE.search(value)
    if surrogate is not None:
        raise ToolInputError(messages.surrogate_in_text(name, surrogate.start()))
    return value


def _text(data: Mapping[str, object], name: str, command: str, expected: str) -> str:
    return _check_written_text(name, _string(data, name, command, expected))


def _optional_text(data: Mapping[str, object], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolInputError(messages.wrong_type(name, _TEXT + " or null", value))
    return _check_written_text(name, value)


def _insert_text(data: Mapping[str, object]) -> str:
    if data.get("insert_text") is None and isinstance(data.get("new_str"), str):
        return _check_written_text("new_str", data["new_str"])  # type: ignore[arg-type]
    return _text(data, "insert_text", "insert", "the text to insert as a string")


def _path(data: Mapping[str, object], name: str, command: str) -> str:
    raw = _string(data, name, command, _PATH)
    try:
        return normalize_path(raw)
    except InvalidPathError as exc:
        message = str(exc)
        if name != "path" and message.startswith("path "):
            message = name + message[len("path") :]
        raise ToolInputError(message, code=exc.code) from exc


def _as_int(value: object) -> int | None:
    """An integer from an int, an integral float or a digit string; never from a boolean."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    return None


def _insert_line(data: Mapping[str, object]) -> int:
    value = data.get("insert_line")
    if value is None:
        raise ToolInputError(messages.missing_parameter("insert_line", "insert", _LINE))
    number = _as_int(value)
    if number is None:
        raise ToolInputError(messages.wrong_type("insert_line", _LINE, value))
    return number
