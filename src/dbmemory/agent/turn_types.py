"""The values of one agent turn: :class:`TurnConfig` (its settings), :class:`TurnEvent` (live
display), :class:`ModelCallRecord` and :class:`TurnResult` (what it produced).

:func:`dbmemory.agent.turn.run_turn` and :func:`~dbmemory.agent.turn.arun_turn` take and return
them; :mod:`dbmemory.agent` exposes the public ones.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dbmemory.agent.litellm_tools import DEFAULT_MAX_RESULT_CHARS, MEMORY_TOOL_NAME, ToolCallRecord
from dbmemory.agent.postprocess import AsyncPostProcessing, PostProcessing
from dbmemory.core import checks as _v
from dbmemory.errors import InvalidArgumentError
from dbmemory.llm import Usage

__all__ = [
    "DEFAULT_MAX_TOOL_CALLS",
    "PostProcessMode",
    "ProtocolMode",
    "TurnConfig",
    "TurnEvent",
    "StepEvent",
    "step_of",
    "EventHandler",
    "ModelCallRecord",
    "TurnResult",
]

DEFAULT_MAX_TOOL_CALLS = 16
"""Most tool calls one turn executes before the model must answer."""

PostProcessMode = Literal["background", "inline", "deferred", "off"]
ProtocolMode = Literal["auto", "include", "omit"]

def _check_config_fields(config: TurnConfig) -> None:
    """The rules of TurnConfig's other fields (:mod:`dbmemory.core.checks`)."""
    _v.check_int(config.max_tool_result_chars, "max_tool_result_chars", minimum=1, maximum=_v.INT64_MAX)
    _v.check_bool(config.user_memory_enabled, "user_memory_enabled")
    _v.check_bool(config.native_anthropic_memory_tool, "native_anthropic_memory_tool")
    if config.timeout_s is not None:
        _v.check_days(config.timeout_s, "timeout_s")  # a finite number > 0
    _v.check_mapping(config.model_kwargs, "model_kwargs", optional=False, scope=False)
    _v.check_now(config.now)
    _v.check_bool(config.item_memory, "item_memory")
    _v.check_bool(config.item_skip_window, "item_skip_window")
    _v.check_bool(config.memory_search, "memory_search")


@dataclass(frozen=True)
class TurnConfig:
    """Settings of one turn.

    Attributes:
        max_tool_calls: most tool calls executed in the turn (default 16); more are answered with
            an error text and the model gets one last call without tools.
        max_tool_result_chars: longest tool result fed back, in characters (cut with a hint).
        user_memory: the profile settings (:class:`dbmemory.profile.config.UserMemoryConfig`);
            None = its defaults.
        user_memory_enabled: whether user memory is on for this turn; compute it with
            :func:`dbmemory.profile.memory_enabled` (feature flag, space setting, opt-out).
        native_anthropic_memory_tool: for Anthropic models, offer Anthropic's native memory tool
            type instead of the function schema (litellm forwards it); the same executor answers.
        post_process: ``"background"`` (a thread or task, default), ``"inline"`` (before
            ``run_turn`` returns), ``"deferred"`` (the caller calls ``start()``/``wait()``) or
            ``"off"``.
        timeout_s: seconds per model call, or None for litellm's default.
        model_kwargs: extra keyword arguments for every model call of the turn (``temperature``,
            ``api_base``, litellm's ``mock_response`` ...).
        now: the turn's time (UTC) used for the profile's Recent Topics, or None for the clock
            (replays pass the recorded session time).
        memory_protocol: when the MEMORY PROTOCOL block is added (agents with the MEMORY tool
            only; never twice): ``"auto"`` (default) adds it to a new conversation only, i.e.
            when ``messages`` hold no earlier assistant or tool message; ``"include"`` adds it
            to any turn whose system prompt lacks it (the conversation started with it and the
            host rebuilds its system prompt each turn: pass ``"include"`` when the first turn's
            :attr:`TurnResult.memory_protocol` was True); ``"omit"`` never adds it.
        item_memory: load and inject the organisation memory and the user's memory items, and
            extract items after the turn (needs a ``user_id``). The user's memory switch
            (:func:`dbmemory.items.set_memory_switch`) still applies: off, nothing of the user's
            memory is injected or updated, the profile included, and everything is kept.
        item_skip_window: apply the organisation's extraction skip window to this turn's chat
            (``session_id``): a message less than ``skip_window_seconds`` after the chat's last
            extraction is not extracted. False extracts every turn (``replay`` passes False:
            recorded transcripts carry one time per session, not per message).
        memory_search: with the item memory on, keep each exchange as an episode after the
            turn and inject the episodes and file snippets found for the user's message
            (:mod:`dbmemory.items.search_inject`, within the organisation's
            ``search_token_budget``). The memory switch and the opt-out apply as for the items.
    """

    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    max_tool_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    user_memory: Any = None
    user_memory_enabled: bool = True
    native_anthropic_memory_tool: bool = False
    post_process: PostProcessMode = "background"
    timeout_s: float | None = None
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)
    now: dt.datetime | None = None
    memory_protocol: ProtocolMode = "auto"
    item_memory: bool = True
    item_skip_window: bool = True
    memory_search: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_tool_calls, bool) or not isinstance(self.max_tool_calls, int) or self.max_tool_calls < 0:
            raise InvalidArgumentError(
                f"max_tool_calls must be a whole number >= 0, got {self.max_tool_calls!r}: "
                f"pass e.g. max_tool_calls={DEFAULT_MAX_TOOL_CALLS}"
            )
        if self.post_process not in ("background", "inline", "deferred", "off"):
            raise InvalidArgumentError(
                f"post_process must be 'background', 'inline', 'deferred' or 'off', got "
                f"{self.post_process!r}: pick one of them"
            )
        if self.memory_protocol not in ("auto", "include", "omit"):
            raise InvalidArgumentError(
                f"memory_protocol must be 'auto', 'include' or 'omit', got {self.memory_protocol!r}"
            )
        _check_config_fields(self)


@dataclass(frozen=True)
class TurnEvent:
    """Something that happened during a turn, for live display (the ``chat`` command).

    Attributes:
        kind: ``"memory_loading"``, ``"memory_loaded"`` (data: the profile state or None),
            ``"memory_load_failed"`` (data: the exception), ``"model_call"`` (a
            :class:`ModelCallRecord`), ``"tool_call"`` (a :class:`ToolCallRecord`),
            ``"tool_limit"`` (data: the limit), ``"answer"`` (data: the text),
            ``"memory_updating"``, ``"memory_updated"`` (data: the consolidation result) or
            ``"memory_update_failed"`` (data: the exception). The ``memory_updat*`` events come
            from the post-processing thread.
        data: see ``kind``.
    """

    kind: str
    data: object = None

    @property
    def step(self) -> StepEvent:
        """This event as a typed step a chat UI can show as a badge (:class:`StepEvent`)."""
        return step_of(self)


StepStatus = Literal["running", "ok", "failed", "limited"]
StepKind = Literal["memory", "items", "model", "tool", "answer", "other"]


@dataclass(frozen=True)
class StepEvent:
    """One step of a turn, typed for display (a badge such as "memory view ✓").

    Attributes:
        name: the step: ``"memory_load"``, ``"items_load"``, ``"model_call"``, the tool's
            name and command for a tool call (``"memory view"``, ``"get_weather"``),
            ``"tool_limit"``, ``"answer"``, ``"items_extract"``, ``"memory_update"``; the
            event's kind for an event this version does not know.
        status: ``"running"`` (the step started: ``memory_loading``, ``memory_updating``),
            ``"ok"``, ``"failed"`` (``memory_load_failed``, ``memory_update_failed``, a tool
            call whose answer is an error) or ``"limited"`` (``tool_limit``: the turn's
            ``max_tool_calls`` was reached).
        kind: what the step is about: ``"memory"`` (the profile), ``"items"`` (memory
            items), ``"model"``, ``"tool"``, ``"answer"``, or ``"other"``.
        event: the :attr:`TurnEvent.kind` it was made from.
    """

    name: str
    status: StepStatus
    kind: StepKind
    event: str


_STEPS: dict[str, tuple[str, StepStatus, StepKind]] = {
    "memory_loading": ("memory_load", "running", "memory"),
    "memory_loaded": ("memory_load", "ok", "memory"),
    "memory_load_failed": ("memory_load", "failed", "memory"),
    "items_loaded": ("items_load", "ok", "items"),
    "model_call": ("model_call", "ok", "model"),
    "tool_limit": ("tool_limit", "limited", "tool"),
    "answer": ("answer", "ok", "answer"),
    "items_extracted": ("items_extract", "ok", "items"),
    "memory_updating": ("memory_update", "running", "memory"),
    "memory_updated": ("memory_update", "ok", "memory"),
    "memory_update_failed": ("memory_update", "failed", "memory"),
}


def step_of(event: TurnEvent) -> StepEvent:
    """The :class:`StepEvent` of ``event`` (see its attributes for the mapping)."""
    if event.kind == "tool_call":
        record = event.data
        name = str(getattr(record, "name", "tool"))
        command = getattr(record, "command", None)  # the MEMORY tool's command, if any
        if isinstance(command, str) and command:
            name = f"{name} {command}"
        status: StepStatus = "failed" if getattr(record, "is_error", False) else "ok"
        return StepEvent(name, status, "tool", event.kind)
    known = _STEPS.get(event.kind)
    if known is None:
        return StepEvent(event.kind, "ok", "other", event.kind)
    return StepEvent(*known, event.kind)


EventHandler = Callable[[TurnEvent], None]


@dataclass(frozen=True)
class ModelCallRecord:
    """One model call of the turn.

    Attributes:
        model: the litellm model name.
        usage: token usage as reported (zeros when not reported).
        duration_s: wall time in seconds.
        finish_reason: the provider's finish reason.
        tool_calls: number of tool calls the answer requested.
    """

    model: str
    usage: Usage
    duration_s: float
    finish_reason: str | None
    tool_calls: int


@dataclass
class TurnResult:
    """What one turn produced.

    Attributes:
        answer: the model's final text, unchanged.
        finish_reason: the final call's finish reason (``"stop"``, ``"length"``, ...).
        tool_calls: every tool call executed (or refused over the limit), in order.
        model_calls: every model call, in order, with its token usage and time.
        timings: seconds per stage: ``ready``, ``load``, ``model``, ``tools``, ``total``.
        tool_limit_reached: True when the model asked for more than ``max_tool_calls`` calls.
        memory_tool: whether the agent had the MEMORY tool.
        profile_loaded: whether a profile was injected into the system prompt.
        memory_protocol: whether the system prompt sent carried the MEMORY PROTOCOL block (added
            by this turn or already in the caller's system prompt).
        messages: the full message list of the turn (system prompt, history, tool messages and
            the final assistant message).
        post_processing: the post-processing handle (:class:`PostProcessing` or
            :class:`AsyncPostProcessing`; its result is the profile's consolidation result, or
            None when only items were processed), or None when user memory was off.
        org_memory_loaded: whether an organisation-memory block was injected.
        items_injected: the memory items injected (selected and within the budget), in order.
        item_extraction: the :class:`~dbmemory.items.extract.ExtractionResult` once the
            post-processing extracted items (None before, or when it did not run).
    """

    answer: str
    finish_reason: str | None
    tool_calls: list[ToolCallRecord]
    model_calls: list[ModelCallRecord]
    timings: dict[str, float]
    tool_limit_reached: bool
    memory_tool: bool
    profile_loaded: bool
    messages: list[dict[str, Any]]
    memory_protocol: bool = False
    post_processing: PostProcessing | AsyncPostProcessing | None = None
    org_memory_loaded: bool = False
    items_injected: tuple[Any, ...] = ()
    item_extraction: Any = None

    @property
    def usage(self) -> Usage:
        """Token usage summed over the turn's model calls."""
        return Usage(
            prompt_tokens=sum(c.usage.prompt_tokens for c in self.model_calls),
            completion_tokens=sum(c.usage.completion_tokens for c in self.model_calls),
        )

    @property
    def memory_tool_calls(self) -> list[ToolCallRecord]:
        """The MEMORY tool calls only."""
        return [c for c in self.tool_calls if c.name == MEMORY_TOOL_NAME]
