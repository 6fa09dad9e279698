"""The MEMORY tool for litellm (OpenAI function calling), for callers that run their own loop.

:func:`memory_tools` returns the tool list to pass as ``tools=`` to ``litellm.completion`` (the
MEMORY tool's OpenAI function schema, or Anthropic's native ``memory_20250818`` tool type, which
litellm forwards to Anthropic with the ``context-management-2025-06-27`` beta header; plus the
caller's own tools). :func:`handle_tool_calls` executes the tool calls of one model answer and
returns the ``tool`` messages to append before the next call. The turn runner
(:func:`dbmemory.agent.turn.run_turn`) uses the same pieces.

Example (your own loop; ``conn`` is a SQLAlchemy Connection inside your transaction)::

    import litellm
    from dbmemory.agent import memory_tools, handle_tool_calls, assistant_message
    from dbmemory.tool import MemoryTool

    tool = MemoryTool(conn, "support-bot", user_id="u-1")
    messages = [{"role": "user", "content": "Remember that I prefer tea."}]
    while True:
        reply = litellm.completion(model="gpt-4o-mini", messages=messages, tools=memory_tools())
        msg = reply.choices[0].message
        if not msg.tool_calls:
            break
        messages.append(assistant_message(msg))
        messages.extend(handle_tool_calls(msg.tool_calls, tool))

Tool-call arguments arrive as JSON strings (OpenAI), dicts (some providers and SDKs) or wrapped
one level deep (``{"input": {...}}``): all are passed to the MEMORY tool, which accepts each form.
A result longer than ``max_result_chars`` is cut with a hint naming the total and, for files,
``view_range``. Nothing here imports litellm.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dbmemory.core import checks as _v
from dbmemory.core.checks import (
    INT64_MAX,
    argument_error,
    check_callable,
    check_int,
)
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.search_tool import run_search_tool
from dbmemory.tool.schema import tool_schema

__all__ = [
    "MEMORY_TOOL_NAME",
    "ANTHROPIC_MEMORY_TOOL_TYPE",
    "DEFAULT_MAX_RESULT_CHARS",
    "ToolHandler",
    "ToolCallRecord",
    "memory_tool_spec",
    "memory_tools",
    "tool_call_parts",
    "decode_arguments",
    "assistant_message",
    "tool_message",
    "clip_result",
    "caller_result_text",
    "execute_tool_call",
    "search_tool_record",
    "execute_tool_calls",
    "handle_tool_calls",
    "is_anthropic_model",
    "ERROR_PREFIX",
    "check_tool_list",
]

logger = logging.getLogger(__name__)

MEMORY_TOOL_NAME = "memory"
"""Name of the MEMORY tool in every schema (the name Anthropic's memory tool uses)."""

ANTHROPIC_MEMORY_TOOL_TYPE = "memory_20250818"
"""Anthropic's native memory tool type; litellm passes it through as a hosted tool."""

DEFAULT_MAX_RESULT_CHARS = 20_000
"""Longest tool result fed back to the model, in characters. The MEMORY tool already clips its
own views at about 16,000 characters; this outer limit catches everything else (caller tools,
or a lower limit chosen by the host)."""

ERROR_PREFIX = "Error: "

ToolHandler = Callable[[str, Any], Any]
"""Caller tool callback: ``(name, arguments) -> str`` (``arguments`` decoded to a dict when it
is JSON; may return an awaitable in :func:`~dbmemory.agent.turn.arun_turn`)."""


class _Executes(Protocol):
    def execute(self, arguments: object) -> str: ...


@dataclass(frozen=True)
class ToolCallRecord:
    """One executed tool call.

    Attributes:
        id: the provider's call id.
        name: the tool name (``"memory"`` or a caller tool).
        arguments: the arguments as received (string, dict or wrapper).
        result: the text fed back to the model (after clipping).
        is_error: True when the result is a failure text (starts with ``"Error: "``).
        duration_s: wall time of the execution, in seconds.
        clipped: True when the result was cut to ``max_result_chars``.
    """

    id: str
    name: str
    arguments: object
    result: str
    is_error: bool
    duration_s: float
    clipped: bool = False

    @property
    def is_memory(self) -> bool:
        """Whether this was a MEMORY tool call."""
        return self.name == MEMORY_TOOL_NAME

    @property
    def command(self) -> str | None:
        """The MEMORY command when it can be read from the arguments (for display), else None."""
        args = decode_arguments(self.arguments)
        if isinstance(args, Mapping):
            inner = args.get("command")
            if inner is None and len(args) == 1:
                only = next(iter(args.values()))
                inner = only.get("command") if isinstance(only, Mapping) else None
            return str(inner) if inner is not None else None
        return None


def is_anthropic_model(model: str) -> bool:
    """Whether a litellm model name addresses Anthropic directly (``anthropic/...`` or ``claude-...``).

    Bedrock and Vertex names are not matched: their native memory tool support differs.
    """
    name = model.lower()
    return name.startswith("anthropic/") or name.startswith("claude")


def memory_tool_spec(*, native_anthropic: bool = False) -> dict[str, Any]:
    """The MEMORY tool as one entry of a litellm ``tools`` list.

    Args:
        native_anthropic: offer Anthropic's native memory tool type (``memory_20250818``) instead
            of the function schema; only for Anthropic models (litellm adds the beta header).

    Returns:
        ``{"type": "function", "function": {"name": "memory", ...}}`` (from
        :func:`dbmemory.tool.tool_schema`) or ``{"type": "memory_20250818", "name": "memory"}``.
    """
    if native_anthropic:
        return {"type": ANTHROPIC_MEMORY_TOOL_TYPE, "name": MEMORY_TOOL_NAME}
    schema = tool_schema()
    if schema.get("type") == "function" and "function" in schema:
        return schema
    return {"type": "function", "function": schema}


def memory_tools(
    extra_tools: Iterable[Mapping[str, Any]] = (), *, native_anthropic: bool = False
) -> list[dict[str, Any]]:
    """The tool list for one model call: the MEMORY tool first, then the caller's tools.

    Args:
        extra_tools: the caller's own tools in OpenAI function format; the caller executes them
            (see :func:`handle_tool_calls`'s ``tool_handler``).
        native_anthropic: see :func:`memory_tool_spec`.

    Returns:
        list of tool dicts, ready for ``litellm.completion(tools=...)``.

    Raises:
        InvalidArgumentError: a caller tool is also named ``"memory"``; ``extra_tools`` is not
            an iterable of mappings; ``native_anthropic`` is not a bool.
    """
    _v.check_bool(native_anthropic, "native_anthropic")
    extra_tools = check_tool_list(extra_tools, "extra_tools")
    tools = [memory_tool_spec(native_anthropic=native_anthropic)]
    for tool in extra_tools:
        if _tool_name(tool) == MEMORY_TOOL_NAME:
            raise InvalidArgumentError(
                "a caller tool is named 'memory', the name of the MEMORY tool: rename your tool"
            )
        tools.append(dict(tool))
    return tools


def _tool_name(tool: Mapping[str, Any]) -> str | None:
    function = tool.get("function")
    if isinstance(function, Mapping):
        return function.get("name")
    return tool.get("name")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def tool_call_parts(call: object) -> tuple[str, str, object]:
    """Read ``(id, name, arguments)`` from a tool call in any common shape.

    Accepts :class:`dbmemory.llm.ToolCall`, litellm/OpenAI ``ChatCompletionMessageToolCall``
    objects, OpenAI dicts (``{"id", "function": {"name", "arguments"}}``) and Anthropic
    ``tool_use`` blocks (``{"id", "name", "input"}``).

    Returns:
        ``(id, name, arguments)``; ``arguments`` is returned as sent (string, dict, ...).
    """
    function = _get(call, "function")
    if function is not None:
        return str(_get(call, "id") or ""), str(_get(function, "name") or ""), _get(function, "arguments")
    arguments = _get(call, "arguments")
    if arguments is None:
        arguments = _get(call, "input")
    return str(_get(call, "id") or ""), str(_get(call, "name") or ""), arguments


def decode_arguments(arguments: object) -> object:
    """Decode JSON-string arguments to a Python object; anything else is returned unchanged."""
    if isinstance(arguments, (str, bytes)):
        try:
            return json.loads(arguments)
        except (ValueError, TypeError):
            return arguments
    return arguments


def _arguments_json(arguments: object) -> str:
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(str(arguments), ensure_ascii=False)


def assistant_message(message_or_completion: object) -> dict[str, Any]:
    """The assistant message to append to the history before the tool results.

    Args:
        message_or_completion: a :class:`dbmemory.llm.Completion`, or a litellm/OpenAI message
            object or dict with ``content`` and ``tool_calls``.

    Returns:
        ``{"role": "assistant", "content": text or None, "tool_calls": [{"id", "type":
        "function", "function": {"name", "arguments": <JSON string>}}]}`` (arguments are always
        re-encoded as a JSON string, as the OpenAI format requires).
    """
    text = _get(message_or_completion, "text")
    if text is None:
        text = _get(message_or_completion, "content")
    calls = []
    for call in _get(message_or_completion, "tool_calls") or []:
        call_id, name, arguments = tool_call_parts(call)
        calls.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": _arguments_json(arguments)}}
        )
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


def tool_message(call_id: str, content: str, *, name: str | None = None) -> dict[str, Any]:
    """One ``tool`` message answering the call ``call_id``."""
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
    if name:
        message["name"] = name
    return message


def clip_result(text: str, max_chars: int = DEFAULT_MAX_RESULT_CHARS) -> tuple[str, bool]:
    """Cut a tool result to about ``max_chars`` characters, with a hint.

    Args:
        text: the result.
        max_chars: the limit in characters (at least 200; smaller values are raised to 200).

    Returns:
        ``(text, clipped)``: the text unchanged and False when it fits; else its first part plus
        ``"[... result cut: showed N of M characters; view a part of a file with view_range
        [start, end], or a subdirectory]"`` and True. The hint counts toward the limit.
    """
    limit = max(200, int(max_chars))
    if len(text) <= limit:
        return text, False
    hint = (
        f"\n[... result cut: showed {{shown:,}} of {len(text):,} characters; view a part of a file "
        "with view_range [start, end], or a subdirectory]"
    )
    shown = max(0, limit - len(hint.format(shown=limit)))
    cut = text[:shown]
    newline = cut.rfind("\n")
    if newline > shown // 2:
        cut = cut[:newline]
    return cut + hint.format(shown=len(cut)), True


def caller_result_text(value: object) -> str:
    """A caller tool's return value as the text fed back (strings as is, anything else as JSON)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def execute_tool_call(
    call: object,
    memory_tool: _Executes | None,
    *,
    tool_handler: ToolHandler | None = None,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> ToolCallRecord:
    """Execute one tool call (never raises).

    Args:
        call: the tool call (any shape :func:`tool_call_parts` reads).
        memory_tool: the :class:`~dbmemory.tool.MemoryTool` answering ``memory`` calls (on the
            caller's connection), or None when the agent has no memory tool.
        tool_handler: the caller's callback for its own tools, ``(name, arguments) -> str``;
            ``arguments`` is decoded from JSON when possible. Its exceptions become error texts.
        max_result_chars: see :func:`clip_result`.

    Returns:
        a :class:`ToolCallRecord`.
    """
    call_id, name, arguments = tool_call_parts(call)
    started = time.perf_counter()
    if name == MEMORY_TOOL_NAME and memory_tool is not None:
        result = memory_tool.execute(arguments if arguments is not None else {})
    elif name != MEMORY_TOOL_NAME and tool_handler is not None and name:
        try:
            result = caller_result_text(tool_handler(name, decode_arguments(arguments)))
        except Exception as exc:  # the caller's tool failed: tell the model, keep the turn
            logger.warning("caller tool %r failed: %s", name, exc, exc_info=True)
            result = f"{ERROR_PREFIX}the tool {name!r} failed ({type(exc).__name__}); try another approach"
    else:
        result = f"{ERROR_PREFIX}there is no tool named {name!r}: use one of the tools offered"
    text, clipped = clip_result(result, max_result_chars)
    return ToolCallRecord(
        id=call_id,
        name=name,
        arguments=arguments,
        result=text,
        is_error=text.startswith(ERROR_PREFIX),
        duration_s=time.perf_counter() - started,
        clipped=clipped,
    )


def search_tool_record(
    conn: Any,
    call: object,
    *,
    user_id: str | None,
    org_id: str = "default",
    now: Any = None,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> ToolCallRecord:
    """Execute one ``memory_search`` call on ``conn`` for ``user_id``
    (:func:`dbmemory.items.search_tool.run_search_tool`; never raises)."""
    call_id, name, arguments = tool_call_parts(call)
    started = time.perf_counter()
    result = run_search_tool(conn, decode_arguments(arguments), user_id=user_id, org_id=org_id, now=now)
    text, clipped = clip_result(result, max_result_chars)
    return ToolCallRecord(
        id=call_id,
        name=name,
        arguments=arguments,
        result=text,
        is_error=text.startswith(ERROR_PREFIX),
        duration_s=time.perf_counter() - started,
        clipped=clipped,
    )


def execute_tool_calls(
    tool_calls: Sequence[object],
    memory_tool: _Executes | None,
    *,
    tool_handler: ToolHandler | None = None,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> list[ToolCallRecord]:
    """Execute tool calls in order; see :func:`execute_tool_call`.

    Returns:
        list of :class:`ToolCallRecord`, one per call, in order.
    """
    return [
        execute_tool_call(call, memory_tool, tool_handler=tool_handler, max_result_chars=max_result_chars)
        for call in tool_calls
    ]


def handle_tool_calls(
    tool_calls: Sequence[object],
    memory_tool: _Executes | None,
    *,
    tool_handler: ToolHandler | None = None,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> list[dict[str, Any]]:
    """Execute the tool calls of one model answer and return the ``tool`` messages.

    MEMORY calls run on ``memory_tool`` (and so on its connection and transaction: nothing is
    committed here); other calls go to ``tool_handler``. Never raises for a bad call: failures are
    error texts the model can act on.

    Args:
        tool_calls: the answer's tool calls (``message.tool_calls`` of litellm, or
            :attr:`dbmemory.llm.Completion.tool_calls`).
        memory_tool: a :class:`~dbmemory.tool.MemoryTool`, or None.
        tool_handler: the caller's callback for its own tools, or None.
        max_result_chars: see :func:`clip_result`.

    Returns:
        list of ``{"role": "tool", "tool_call_id", "name", "content"}`` dicts, one per call in
        order, to append after :func:`assistant_message`.

    Raises:
        InvalidArgumentError: ``tool_calls`` is not a list or tuple; ``memory_tool`` has no
            ``execute``; ``tool_handler`` is not callable; ``max_result_chars`` is not a whole
            number (the caller's mistakes, before any call runs).
    """

    check_tool_calls_arguments(tool_calls, memory_tool, tool_handler, max_result_chars)
    records = execute_tool_calls(
        tool_calls, memory_tool, tool_handler=tool_handler, max_result_chars=max_result_chars
    )
    return [tool_message(r.id, r.result, name=r.name) for r in records]


def check_tool_list(tools: object, name: str = "tools") -> list[Any]:
    """A list or tuple of tool definitions, each a mapping (OpenAI function format). Returns
    them as a list."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, (list, tuple)):
        raise argument_error(name, tools, "must be a list of tool definitions", "pass a list, or leave it out")
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise argument_error(
                f"{name}[{index}]", tool, "must be a mapping (OpenAI function format)",
                "pass e.g. {'type': 'function', 'function': {'name': 'lookup', ...}}",
            )
    return list(tools)


def check_tool_calls_arguments(
    tool_calls: object, memory_tool: object, tool_handler: object, max_result_chars: object
) -> None:
    """The argument rules of :func:`dbmemory.agent.handle_tool_calls`."""
    if isinstance(tool_calls, (str, bytes, Mapping)) or not isinstance(tool_calls, (list, tuple)):
        raise argument_error(
            "tool_calls", tool_calls, "must be a list of tool calls",
            "pass the answer's message.tool_calls (or [])",
        )
    if memory_tool is not None and not callable(getattr(memory_tool, "execute", None)):
        raise argument_error(
            "memory_tool", memory_tool, "must be a MemoryTool (an object with execute()) or None",
            "pass dbmemory.MemoryTool(conn, agent_code)",
        )
    check_callable(tool_handler, "tool_handler")
    check_int(max_result_chars, "max_result_chars", minimum=1, maximum=INT64_MAX)


