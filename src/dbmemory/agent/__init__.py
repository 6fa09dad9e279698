"""Agent turns with database memory: the turn runner, litellm tool helpers, the scripted
stand-in model, and conversation replay.

Example (a turn with the MEMORY tool and the user's profile; the Engine form commits the turn)::

    from dbmemory.agent import run_turn
    result = run_turn(engine, agent_code="SUPPORT", user_id="u-42", model="gpt-4o-mini",
                      messages=[{"role": "user", "content": "I prefer short answers."}])
    print(result.answer)
    result.post_processing.wait()   # optional: the profile update runs in the background

The names of :data:`__all__` are imported from their homes at import time, except the replay
helpers (:func:`~dbmemory.agent.replay.replay_conversation`,
:class:`~dbmemory.agent.replay.ReplaySummary`, :func:`~dbmemory.agent.transcripts.read_conversation`),
which load on first use (PEP 562 ``__getattr__``; the one mechanism of its kind besides
:mod:`dbmemory`'s own, and allowed only in a package ``__init__``). The chat session is
:mod:`dbmemory.agent.chat`; nothing here imports litellm.
"""

from __future__ import annotations

import importlib
from typing import Any

from dbmemory.agent.litellm_tools import (
    MEMORY_TOOL_NAME,
    ToolCallRecord,
    assistant_message,
    clip_result,
    handle_tool_calls,
    memory_tool_spec,
    memory_tools,
    tool_message,
)
from dbmemory.agent.postprocess import AsyncPostProcessing, PostProcessing, post_processing_failures
from dbmemory.agent.scripted import SCRIPTED_MODEL_NAME, SCRIPTED_NOTICE, ScriptedModel
from dbmemory.agent.turn import arun_turn, run_turn
from dbmemory.agent.turn_types import (
    DEFAULT_MAX_TOOL_CALLS,
    ModelCallRecord,
    StepEvent,
    TurnConfig,
    TurnEvent,
    TurnResult,
)

__all__ = [
    "run_turn",
    "arun_turn",
    "TurnConfig",
    "StepEvent",
    "TurnEvent",
    "TurnResult",
    "ModelCallRecord",
    "DEFAULT_MAX_TOOL_CALLS",
    "PostProcessing",
    "AsyncPostProcessing",
    "post_processing_failures",
    "MEMORY_TOOL_NAME",
    "ToolCallRecord",
    "memory_tools",
    "memory_tool_spec",
    "handle_tool_calls",
    "assistant_message",
    "tool_message",
    "clip_result",
    "ScriptedModel",
    "SCRIPTED_MODEL_NAME",
    "SCRIPTED_NOTICE",
    "replay_conversation",
    "ReplaySummary",
    "read_conversation",
]

_LAZY = {
    "replay_conversation": "dbmemory.agent.replay",
    "ReplaySummary": "dbmemory.agent.replay",
    "read_conversation": "dbmemory.agent.transcripts",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dbmemory.agent' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    # the public API only, never the helper names this module imports
    return sorted(__all__)
