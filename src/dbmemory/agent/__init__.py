"""Agent turns with database memory: the turn runner, litellm tool helpers, the scripted
stand-in model, and conversation replay.

Example (a turn with the MEMORY tool and the user's profile; the Engine form commits the turn)::

    from dbmemory.agent import run_turn
    result = run_turn(engine, agent_code="SUPPORT", user_id="u-42", model="gpt-4o-mini",
                      messages=[{"role": "user", "content": "I prefer short answers."}])
    print(result.answer)
    result.post_processing.wait()   # optional: the profile update runs in the background

The replay and chat helpers (:mod:`dbmemory.agent.replay`, :mod:`dbmemory.agent.chat`) load on
first use: they import rich.
"""

from __future__ import annotations

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
from dbmemory.agent.turn import (
    DEFAULT_MAX_TOOL_CALLS,
    ModelCallRecord,
    TurnConfig,
    TurnEvent,
    TurnResult,
    arun_turn,
    run_turn,
)

__all__ = [
    "run_turn",
    "arun_turn",
    "TurnConfig",
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
    import importlib

    return getattr(importlib.import_module(module), name)
