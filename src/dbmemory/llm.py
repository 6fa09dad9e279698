"""The one module that talks to language models, through litellm.

litellm is imported lazily, inside :func:`complete` and :func:`acomplete` only: ``import
litellm`` takes several seconds and hundreds of megabytes, and ``import dbmemory`` (and every CLI
command that needs no model) must stay fast. Every LLM step in dbmemory takes a
:data:`CompleteFn` so tests inject a deterministic fake instead of this wrapper.

Before the first import, ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set **only when the variable is
unset**, so litellm reads its bundled price map instead of fetching one (DESIGN.md section 8: no
outbound call other than the model the user configured). A host that sets it keeps its value.

Example:
    >>> from dbmemory.llm import complete
    >>> reply = complete("gpt-4o-mini", [{"role": "user", "content": "hi"}],
    ...                  mock_response="hello")  # litellm's offline mock   # doctest: +SKIP
    >>> reply.text, reply.finish_reason                                     # doctest: +SKIP
    ('hello', 'stop')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dbmemory.errors import MissingDependencyError

__all__ = [
    "Usage",
    "ToolCall",
    "Completion",
    "CompleteFn",
    "complete",
    "acomplete",
    "normalize_response",
    "embed",
    "LLM_EXTRA_HINT",
]

LLM_EXTRA_HINT = "pip install 'dbmemory[llm]'"
"""What to install when litellm is missing."""


@dataclass(frozen=True)
class Usage:
    """Token usage of one model call as the provider reported it (0 when not reported).

    Attributes:
        prompt_tokens: tokens of the input messages.
        completion_tokens: tokens of the answer.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ToolCall:
    """One tool call requested by the model (OpenAI function-calling shape).

    Attributes:
        id: the provider's call id, echoed back in the ``tool`` message that answers it.
        name: the function name, e.g. ``"memory"``.
        arguments: the arguments exactly as the provider sent them: usually a JSON *string*,
            sometimes an already-decoded ``dict``. Callers decode (the MEMORY tool accepts both).
    """

    id: str
    name: str
    arguments: object


@dataclass
class Completion:
    """A model answer, normalised from litellm's ``ModelResponse`` (or a plain dict of that shape).

    Attributes:
        text: the assistant message text of the first choice; ``""`` when the model sent none
            (for example a pure tool-call turn).
        finish_reason: ``"stop"``, ``"length"`` (cut off at the token limit), ``"tool_calls"``,
            ``"content_filter"``, or None when the provider did not say.
        tool_calls: the tool calls of the first choice, in order (empty list when none).
        usage: token usage (zeros when the provider did not report it).
        raw: the original response object, for callers that need provider-specific fields.
    """

    text: str
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    raw: object = None


CompleteFn = Callable[..., Completion]
"""Signature of a model call: ``(model: str, messages: list[dict], *, tools=None, timeout=None,
**kwargs) -> Completion``. :func:`complete` is the default; tests pass a deterministic fake."""


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """Read ``name`` from an attribute-style object or a mapping."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def normalize_response(response: object) -> Completion:
    """Turn a litellm ``ModelResponse`` (or a dict in the OpenAI chat shape) into a :class:`Completion`.

    Args:
        response: what ``litellm.completion`` returned, or a dict such as
            ``{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {...}}``.

    Returns:
        A :class:`Completion` for the first choice; an empty text when there is no choice.
    """
    choices = _get(response, "choices") or []
    first = choices[0] if choices else None
    message = _get(first, "message") or {}
    content = _get(message, "content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(
            str(_get(part, "text", "")) for part in content if _get(part, "type", "text") == "text"
        )
    text = "" if content is None else str(content)
    calls: list[ToolCall] = []
    for raw_call in _get(message, "tool_calls") or []:
        function = _get(raw_call, "function") or {}
        calls.append(
            ToolCall(
                id=str(_get(raw_call, "id") or ""),
                name=str(_get(function, "name") or ""),
                arguments=_get(function, "arguments"),
            )
        )
    usage_obj = _get(response, "usage")
    usage = Usage(
        prompt_tokens=_as_int(_get(usage_obj, "prompt_tokens")),
        completion_tokens=_as_int(_get(usage_obj, "completion_tokens")),
    )
    finish = _get(first, "finish_reason")
    return Completion(
        text=text,
        finish_reason=None if finish is None else str(finish),
        tool_calls=calls,
        usage=usage,
        raw=response,
    )


def _import_litellm() -> Any:
    """Import litellm lazily, keeping it offline for its price map.

    Raises:
        MissingDependencyError: litellm is not installed.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            f"calling a language model needs litellm, which is not installed: {LLM_EXTRA_HINT}"
        ) from exc
    # No "Give Feedback / Get Help" banners on stderr: dbmemory reports errors itself.
    litellm.suppress_debug_info = True
    return litellm


def _call_kwargs(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    timeout: float | None,
    kwargs: dict[str, Any],
) -> dict[str, Any]:
    call: dict[str, Any] = {"model": model, "messages": messages, **kwargs}
    if tools:
        call["tools"] = tools
    if timeout is not None:
        call["timeout"] = timeout
    return call


def complete(
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    timeout: float | None = None,
    **kwargs: Any,
) -> Completion:
    """Call a chat model through ``litellm.completion`` and normalise the answer.

    Args:
        model: a litellm model name, e.g. ``"gpt-4o-mini"``, ``"anthropic/claude-3-5-haiku-latest"``
            or ``"ollama/llama3.1"``.
        messages: OpenAI-style chat messages (``{"role": ..., "content": ...}``).
        tools: OpenAI-style function tools (``[{"type": "function", "function": {...}}]``), or None.
        timeout: seconds before the call is abandoned (litellm raises a timeout error), or None
            for litellm's default.
        **kwargs: passed to ``litellm.completion`` unchanged (``temperature``, ``max_tokens``,
            ``api_base``, ``mock_response`` for offline tests, ...).

    Returns:
        A :class:`Completion` for the first choice.

    Raises:
        MissingDependencyError: litellm is not installed (``pip install 'dbmemory[llm]'``).
        Exception: whatever litellm raises for the provider (authentication, rate limit,
            timeout, connection errors); callers that must not fail catch it.
    """
    litellm = _import_litellm()
    response = litellm.completion(**_call_kwargs(model, messages, tools, timeout, kwargs))
    return normalize_response(response)


async def acomplete(
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    timeout: float | None = None,
    **kwargs: Any,
) -> Completion:
    """Async twin of :func:`complete` (``litellm.acompletion``); same arguments, result and errors."""
    litellm = _import_litellm()
    response = await litellm.acompletion(**_call_kwargs(model, messages, tools, timeout, kwargs))
    return normalize_response(response)


def embed(model: str, texts: list[str], *, timeout: float | None = None, **kwargs: Any) -> list[list[float]]:
    """Embed texts through ``litellm.embedding`` (memory-item selection by embeddings).

    Args:
        model: a litellm embedding model name, e.g. ``"text-embedding-3-small"``.
        texts: the texts, in order.
        timeout: seconds before the call is abandoned, or None for litellm's default.
        **kwargs: passed to ``litellm.embedding`` unchanged.

    Returns:
        One vector (list of floats) per text, in order.

    Raises:
        MissingDependencyError: litellm is not installed (``pip install 'dbmemory[llm]'``).
        Exception: whatever litellm raises for the provider.
    """
    litellm = _import_litellm()
    call: dict[str, Any] = {"model": model, "input": list(texts), **kwargs}
    if timeout is not None:
        call["timeout"] = timeout
    response = litellm.embedding(**call)
    rows = _get(response, "data", []) or []
    ordered = sorted(rows, key=lambda row: _as_int(_get(row, "index", 0)))
    return [[float(x) for x in (_get(row, "embedding", []) or [])] for row in ordered]

