"""LangGraph's long-term memory store in dbmemory's stores: :class:`DbMemoryStore` (a LangGraph
``BaseStore``), for Oracle, PostgreSQL, MariaDB/MySQL and SQLite.

Modules: :mod:`~dbmemory.integrations.langgraph.store` (the store and its batches),
:mod:`~dbmemory.integrations.langgraph.codec` (namespaces and keys to store keys and paths, and
back), :mod:`~dbmemory.integrations.langgraph.sql` (the listing and search statements),
:mod:`~dbmemory.integrations.langgraph.search` (what a search does in SQL and in Python),
:mod:`~dbmemory.integrations.langgraph.ttl` (``TTLConfig`` onto the expiry job, the sweeper),
:mod:`~dbmemory.integrations.langgraph.ranking` (BM25). Needs the ``langgraph`` extra.
"""

from __future__ import annotations

from dbmemory.integrations.langgraph.store import (
    STORE_CODE_PREFIX,
    DbMemoryStore,
    LangGraphNamespaceError,
)

__all__ = ["DbMemoryStore", "LangGraphNamespaceError", "STORE_CODE_PREFIX"]


def __dir__() -> list[str]:
    # the public API only, never the helper names this module imports
    return sorted(__all__)
