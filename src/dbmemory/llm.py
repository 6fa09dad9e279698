"""The one module that talks to language models, through litellm.

litellm is imported lazily, inside :func:`complete` and :func:`acomplete` only: ``import
litellm`` takes several seconds and hundreds of megabytes, and ``import dbmemory`` (and every CLI
command that needs no model) must stay fast. Every LLM step in dbmemory takes a
:data:`CompleteFn` so tests inject a deterministic fake instead of this wrapper.

Before the first import, ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set **only when the variable is
unset**, so litellm reads its bundled price map instead of fetching one (no
outbound call other than the model the user configured). A host that sets it keeps its value.

Example:
    >>> from dbmemory.llm import complete
    >>> reply = complete("gpt-4o-mini", [{"role": "user", "content": "hi"}],
    ...                  mock_response="hello")  # litellm's offline mock   # doctest: +SKIP
    >>> reply.text, reply.finish_reason                                     # doctest: +SKIP
    ('hello', 'stop')
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from dbmemory.errors import MissingDependencyError, ModelError, extra_hint

__all__ = [
    "Usage", "ToolCall", "Completion", "CompleteFn", "complete", "acomplete", "normalize_response",
    "embed", "cost", "LLM_EXTRA_HINT", "check_model", "preflight", "model_error",
    "PYTHON_STAND_IN", "CLI_STAND_IN",
]

LLM_EXTRA_HINT = extra_hint("llm")
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
        import litellm  # optional dependency (llm extra), imported on use
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
        MissingDependencyError: litellm is not installed (``pip install -e ".[llm]"``).
        ModelError: litellm's provider errors (authentication, unknown model, rate limit,
            timeout, connection refused...) mapped by :func:`model_error` to one line with a
            remedy (the litellm exception is chained as ``__cause__``).
        Exception: anything litellm raises that is not one of its provider errors.
    """
    litellm = _import_litellm()
    try:
        response = litellm.completion(**_call_kwargs(model, messages, tools, timeout, kwargs))
    except Exception as exc:
        mapped = model_error(exc, model, api_base=kwargs.get("api_base"))
        if mapped is None:
            raise
        raise mapped from exc
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
    try:
        response = await litellm.acompletion(**_call_kwargs(model, messages, tools, timeout, kwargs))
    except Exception as exc:
        mapped = model_error(exc, model, api_base=kwargs.get("api_base"))
        if mapped is None:
            raise
        raise mapped from exc
    return normalize_response(response)


# -- preflight and error mapping ----------------------------------------------------------------

PYTHON_STAND_IN = "or pass complete=ScriptedModel() (from dbmemory.agent) to run without a model"
"""The remedy's tail in Python exceptions."""

CLI_STAND_IN = "or pass --model scripted"
"""The remedy's tail in command-line messages."""

LOCAL_BASE_ENV = {
    "ollama": "OLLAMA_API_BASE",
    "ollama_chat": "OLLAMA_API_BASE",
    "lm_studio": "LM_STUDIO_API_BASE",
    "hosted_vllm": "HOSTED_VLLM_API_BASE",
    "llamafile": "LLAMAFILE_API_BASE",
}
"""Providers served from a local server, and the variable naming its URL."""

_LOOPBACK = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def _error(
    code: str, model: str, diagnosis: str, remedy: str, *, stand_in: bool = True
) -> ModelError:
    """A :class:`ModelError` with the Python and the command-line remedy."""
    py = f"{diagnosis}: {remedy}" + (f", {PYTHON_STAND_IN}" if stand_in else "")
    cli = f"{diagnosis}: {remedy}" + (f", {CLI_STAND_IN}" if stand_in else "")
    return ModelError(py, code=code, cli_message=cli, model=model)


def _base_hint(provider: str | None, api_base: str | None) -> str:
    env = LOCAL_BASE_ENV.get(provider or "")
    if env is None:
        return f"the server at {api_base}" if api_base else "the provider's server"
    source = f"{env}={os.environ[env]}" if os.environ.get(env) else f"{env} unset, litellm's default"
    return f"the local model server at {api_base} ({source})"


def _refused(host: str, port: int, seconds: float) -> str | None:
    """Why a TCP connection to ``host:port`` fails within ``seconds``, or None when it opens."""
    try:
        with socket.create_connection((host, port), timeout=seconds):
            return None
    except OSError as exc:
        return "connection refused" if isinstance(exc, ConnectionRefusedError) else (
            "no answer" if isinstance(exc, TimeoutError) else type(exc).__name__
        )


_KEY_BY_PREFIX = (
    ("openai/", "OPENAI_API_KEY"),
    ("anthropic/", "ANTHROPIC_API_KEY"),
    ("gemini/", "GEMINI_API_KEY"),
    ("mistral/", "MISTRAL_API_KEY"),
    ("groq/", "GROQ_API_KEY"),
    ("deepseek/", "DEEPSEEK_API_KEY"),
    ("openrouter/", "OPENROUTER_API_KEY"),
)
"""litellm's ``provider/`` prefixes whose key variable is certain from the name alone."""

_KEY_BY_PROVIDER = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
"""The key variable of the providers of bare model names (``gpt-4o-mini``, ``claude-...``)."""


_LITELLM_CALLS = (complete, acomplete)
"""This module's own model calls, as defined (a host or a test may replace the names)."""


def default_call_is_litellm() -> bool:
    """Whether this module's :func:`complete` (looked up now: a host or a test may replace it)
    is still the litellm call, so that :func:`preflight` would check the model."""
    return _is_litellm_call(globals()["complete"])


def _is_litellm_call(fn: Callable[..., Any]) -> bool:
    return any(fn is call for call in _LITELLM_CALLS)


def missing_key_error(
    model: str, *, api_key: str | None = None, api_base: str | None = None
) -> ModelError | None:
    """The ``model_missing_key`` :class:`ModelError` when ``model``'s provider is certain without
    importing litellm (a ``provider/`` prefix, or a bare name in litellm's price-map file) and
    its key variable is not set; None otherwise (also with ``api_key`` or ``api_base``: the
    full :func:`check_model` then decides). Costs a file read, never a litellm import (seconds
    on a cold start), so the CLI refuses before it imports the agent."""
    known = _known_key_variable(model)
    if known is None or api_key or api_base or os.environ.get(known):
        return None
    return _error("model_missing_key", model, f"model {model!r} needs {known}, which is not set", f"set {known}")


def _known_key_variable(model: str) -> str | None:
    """The key variable of ``model``'s provider when it is certain without importing litellm:
    a ``provider/`` prefix, or a bare name listed in the price map litellm ships as a file
    (read as JSON, about 70 ms, instead of a multi-second import). None when not certain: the
    full check then asks litellm."""
    name = model.strip()
    for prefix, variable in _KEY_BY_PREFIX:
        if name.startswith(prefix) and len(name) > len(prefix):
            return variable
    if "/" in name:
        return None
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "model_prices_and_context_window_backup.json")
    try:
        with open(path, encoding="utf-8") as handle:
            entry = json.load(handle).get(name)
    except (OSError, ValueError):
        return None
    provider = entry.get("litellm_provider") if isinstance(entry, dict) else None
    return _KEY_BY_PROVIDER.get(provider) if isinstance(provider, str) else None


def check_model(
    model: str,
    *,
    api_key: str | None = None,
    api_base: str | None = None,
    connect_timeout: float = 1.0,
) -> None:
    """Check that ``model`` can be called, before any long work (no model call is made).

    Three checks, all local except a TCP connect to a loopback server:

    1. litellm knows the provider of the name (``litellm.get_llm_provider``); a name it does not
       know is refused, with the closest known name when there is one;
    2. a model served from a local server (Ollama, LM Studio, vLLM, llamafile) or any loopback
       ``api_base``: the server accepts a TCP connection within ``connect_timeout`` seconds; a
       refusal names the URL tried and the variable that sets it (``OLLAMA_API_BASE``);
    3. otherwise the provider's key is in the environment (``litellm.validate_environment``),
       unless ``api_key`` is given. Providers whose credentials may come from elsewhere (AWS,
       Google application credentials) are not refused here: only missing ``*_API_KEY``
       variables are.

    Args:
        model: a litellm model name, e.g. ``"gpt-4o-mini"`` or ``"ollama/llama3.1"``.
        api_key: the key the caller passes to litellm, if any.
        api_base: the server URL the caller passes to litellm, if any.
        connect_timeout: seconds to wait for a local server's TCP connection.

    Raises:
        ModelError: ``model_unknown``, ``model_unreachable`` or ``model_missing_key``; the
            message names the remedy for Python callers, :attr:`ModelError.cli_message` the one
            for the command line.
        MissingDependencyError: litellm is not installed.
    """
    refusal = missing_key_error(model, api_key=api_key, api_base=api_base)
    if refusal is not None:
        raise refusal
    litellm = _import_litellm()
    try:
        _name, provider, _key, base = litellm.get_llm_provider(model, api_base=api_base, api_key=api_key)
    except Exception:
        close = difflib.get_close_matches(model, list(getattr(litellm, "model_cost", {}) or {}), n=1, cutoff=0.8)
        hint = f"did you mean {close[0]!r}? Else use" if close else "use"
        raise _error(
            "model_unknown",
            model,
            f"unknown model {model!r}: litellm cannot tell its provider",
            f"{hint} a litellm model name such as gpt-4o-mini, anthropic/claude-3-5-haiku-latest "
            "or ollama/llama3.1",
        ) from None
    base = api_base or base
    if base or provider in LOCAL_BASE_ENV:
        parts = urlsplit(base or "")
        host = parts.hostname or ""
        if provider in LOCAL_BASE_ENV or host in _LOOPBACK or host.startswith("127."):
            port = parts.port or (443 if parts.scheme == "https" else 80)
            why = _refused(host or "localhost", port, connect_timeout) if host else "no URL"
            if why is not None:
                env = LOCAL_BASE_ENV.get(provider, "api_base")
                raise _error(
                    "model_unreachable",
                    model,
                    f"cannot reach {_base_hint(provider, base)} for model {model!r}: {why}",
                    f"start the server, or set {env} to its URL",
                )
            return
    if api_key:
        return
    try:
        env = litellm.validate_environment(model=model, api_base=api_base)
    except Exception:  # pragma: no cover - litellm's helper failing is not the user's problem
        return
    missing = [k for k in env.get("missing_keys") or [] if str(k).endswith("_API_KEY")]
    if missing and not env.get("keys_in_environment"):
        keys = " and ".join(missing)
        raise _error("model_missing_key", model, f"model {model!r} needs {keys}, which is not set", f"set {keys}")


def model_error(exc: BaseException, model: str, *, api_base: str | None = None) -> ModelError | None:
    """Map a litellm exception to a one-line :class:`ModelError` with a remedy.

    Args:
        exc: what ``litellm.completion`` raised.
        model: the model name of the call.
        api_base: the server URL the call used, if the caller set one.

    Returns:
        The :class:`ModelError` to raise (``from exc``), or None when ``exc`` is not one of
        litellm's provider errors (or litellm is not loaded).
    """
    if isinstance(exc, ModelError):
        return exc
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return None
    ex = getattr(litellm, "exceptions", None)
    if ex is None:
        return None
    provider = getattr(exc, "llm_provider", None) or None
    text = " ".join(str(getattr(exc, "message", "") or exc).split())
    short = text[:160] + ("..." if len(text) > 160 else "")

    def is_(name: str) -> bool:
        cls = getattr(ex, name, None)
        return isinstance(cls, type) and isinstance(exc, cls)

    if is_("ContextWindowExceededError"):
        return _error("model_context_window", model, f"the prompt is too long for model {model!r}",
                      "lower the profile budget (max_tokens) or shorten the conversation", stand_in=False)
    if is_("AuthenticationError") or (is_("InternalServerError") and "credential" in text.lower()) or (
        is_("APIError") and "api_key" in text.lower() and "must be set" in text.lower()
    ):
        try:
            check_model(model, api_base=api_base)
        except ModelError as missing:
            if missing.code == "model_missing_key":
                return missing
        return _error("model_auth", model, f"the provider refused the key for model {model!r}",
                      "check the key (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY)")
    if is_("PermissionDeniedError"):
        return _error("model_auth", model, f"the key may not use model {model!r}",
                      "use a model the account may use, or another key")
    if is_("NotFoundError"):
        return _error("model_unknown", model, f"the provider does not know model {model!r} ({short})",
                      "check the model name (litellm names, e.g. gpt-4o-mini, ollama/llama3.1)")
    if is_("RateLimitError"):
        return _error("model_rate_limit", model, f"the provider rate-limited model {model!r}",
                      "wait and try again, or raise the account's limits", stand_in=False)
    if is_("Timeout"):
        return _error("model_timeout", model, f"model {model!r} did not answer in time",
                      "try again, or raise the timeout", stand_in=False)
    if is_("APIConnectionError"):
        return _error("model_unreachable", model,
                      f"cannot reach {_base_hint(provider, api_base or getattr(exc, 'api_base', None))} "
                      f"for model {model!r} ({short})",
                      "check the network or start the server", stand_in=True)
    if is_("BadRequestError") or is_("UnprocessableEntityError"):
        return _error("model_refused", model, f"model {model!r} refused the request ({short})",
                      "check the model name and its parameters", stand_in=False)
    if is_("InternalServerError") and "connection error" in text.lower():
        return _error("model_unreachable", model,
                      f"cannot reach {_base_hint(provider, api_base)} for model {model!r}",
                      "check the network, the proxy settings or api_base", stand_in=True)
    if is_("ServiceUnavailableError") or is_("InternalServerError") or is_("BadGatewayError"):
        return _error("model_unavailable", model, f"the provider's server failed for model {model!r} ({short})",
                      "try again later", stand_in=True)
    if is_("APIError") or is_("OpenAIError"):
        return _error("model_error", model, f"model {model!r} failed ({short})", "try again", stand_in=True)
    return None


def preflight(
    model: str,
    complete_fn: Callable[..., Any] | None,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
) -> None:
    """:func:`check_model` when ``complete_fn`` is this module's litellm call; else nothing.

    A caller's own model call (a test fake, the scripted stand-in, a host's wrapper) is not
    checked: dbmemory cannot know what it needs.

    Args:
        model: the litellm model name.
        complete_fn: the model call the work will use (None: :func:`complete`).
        model_kwargs: the keyword arguments passed to litellm (``api_key``, ``api_base`` are read).

    Raises:
        ModelError: as :func:`check_model`.
    """
    if complete_fn is not None and not _is_litellm_call(complete_fn):
        return
    kw = model_kwargs or {}
    if "mock_response" in kw:  # litellm's offline mock calls no provider
        return
    check_model(model, api_key=kw.get("api_key"), api_base=kw.get("api_base"))


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
        MissingDependencyError: litellm is not installed (``pip install -e ".[llm]"``).
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


def cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What ``prompt_tokens`` and ``completion_tokens`` of ``model`` cost in US dollars, from
    litellm's price table (``litellm.cost_per_token``; offline with
    ``LITELLM_LOCAL_MODEL_COST_MAP=True``); None when litellm is missing or does not know the
    model's price."""
    try:
        litellm = _import_litellm()
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # noqa: BLE001 - an unknown price is "unknown", never an error
        return None
    return float(prompt_cost) + float(completion_cost)
