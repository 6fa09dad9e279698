"""Argument checks of the agent layer's public calls (:func:`~dbmemory.agent.run_turn`,
:func:`~dbmemory.agent.handle_tool_calls`), run before any SQL or model call."""

from __future__ import annotations

from collections.abc import Mapping

from dbmemory.agent.litellm_tools import check_tool_list
from dbmemory.agent.turn_types import TurnConfig
from dbmemory.core.checks import (
    argument_error,
    check_bind,
    check_callable,
    check_key_text,
    check_mapping,
    check_text,
)
from dbmemory.core.keys import validate_component

__all__ = [
    "check_turn_arguments",
]


def check_turn_arguments(
    engine_or_conn: object,
    *,
    agent_code: object,
    user_id: object,
    messages: object,
    model: object,
    session_id: object,
    run_context: object,
    tools: object,
    tool_handler: object,
    config: object,
    complete: object,
    on_event: object,
) -> None:
    """The argument rules of :func:`dbmemory.agent.run_turn` and ``arun_turn``, checked before
    any SQL or model call (see their docstrings)."""
    check_bind(engine_or_conn)
    validate_component(agent_code, "agent code")
    check_key_text(user_id, "user_id")
    check_key_text(session_id, "session_id")
    check_mapping(run_context)
    if isinstance(messages, (str, bytes)) or not isinstance(messages, (list, tuple)):
        raise argument_error(
            "messages", messages, "must be a list of chat messages",
            "pass e.g. [{'role': 'user', 'content': 'Hello'}]",
        )
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise argument_error(
                f"messages[{index}]", message, "must be a mapping with 'role' and 'content'",
                "pass e.g. {'role': 'user', 'content': 'Hello'}",
            )
    check_text(model, "model", empty=False)
    check_tool_list(tools, "tools")
    check_callable(tool_handler, "tool_handler")
    check_callable(complete, "complete")
    check_callable(on_event, "on_event")
    if config is not None:
        if not isinstance(config, TurnConfig):
            raise argument_error("config", config, "must be a TurnConfig or None", "pass dbmemory.TurnConfig(...)")


