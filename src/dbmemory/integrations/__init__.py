"""Integrations with other agent tooling, each behind an optional extra.

- :mod:`dbmemory.integrations.mcp_server`: the MEMORY tool (and the user's profile, read-only)
  over MCP stdio with the official ``mcp`` SDK (extra ``mcp``); ``dbmemory mcp``.
- :mod:`dbmemory.integrations.anthropic_tool`: ``DbMemoryTool``, the Anthropic SDK's abstract
  memory tool backed by dbmemory, answering as the SDK's file-system tool does byte for byte
  (extra ``anthropic``); its texts are rebuilt by :mod:`dbmemory.integrations.anthropic_texts`.
- :mod:`dbmemory.integrations.langgraph`: ``DbMemoryStore``, LangGraph's ``BaseStore`` (long-term
  memory of a graph) on dbmemory's stores (extra ``langgraph``).

Nothing is imported here: import the submodule you use (each names its extra when missing).
"""

from __future__ import annotations

__all__: list[str] = []


def __dir__() -> list[str]:
    # the integration modules to import, never helper names
    return ["anthropic_tool", "langgraph", "mcp_server"]
