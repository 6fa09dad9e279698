"""The MEMORY PROTOCOL prompt block and the helper that adds it to an agent's system prompt."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.errors import NotFoundError
from dbmemory.store.agents import get_agent_config

__all__ = ["MEMORY_PROTOCOL", "get_memory_protocol", "augment_system_prompt", "has_memory_protocol"]

MEMORY_PROTOCOL = """\
MEMORY PROTOCOL
You have a persistent memory: a small file tree under /memories, kept in a database, that you
read and edit with the `memory` tool (commands: view, create, str_replace, insert, delete,
rename).
1. ALWAYS view /memories first, before anything else, to see what earlier work left for you.
2. Record as you go — decisions, the user's preferences, learnings, and progress on the task —
   not only at the end.
3. Assume you can be interrupted at any moment: anything not written to memory is lost.
4. Keep files small, current and organised: update or merge existing files rather than adding
   new ones, and delete what is obsolete. Never store secrets, credentials or payment data.
5. If the memory tool answers with an error, read it and act on it. A failure to reach the
   store is NOT an empty memory: do not conclude that nothing was saved."""


def get_memory_protocol() -> str:
    """The MEMORY PROTOCOL block to put in an agent's system prompt.

    Returns:
        Plain text (no trailing newline): view ``/memories`` first; record decisions,
        preferences, learnings and progress as you go; assume you can be interrupted; keep
        files small and current; a failure to reach the store is not an empty memory.
    """
    return MEMORY_PROTOCOL


_PROTOCOL_TITLE = MEMORY_PROTOCOL.split("\n", 1)[0]


def has_memory_protocol(system_prompt: str | None) -> bool:
    """Whether ``system_prompt`` already carries the MEMORY PROTOCOL block.

    Returns:
        True when the prompt holds the block verbatim, or a line that is exactly its title
        ``MEMORY PROTOCOL`` (a copy re-wrapped or edited by the host still counts).
    """
    if not system_prompt:
        return False
    if MEMORY_PROTOCOL in system_prompt:
        return True
    return any(line.strip() == _PROTOCOL_TITLE for line in system_prompt.splitlines())


def augment_system_prompt(system_prompt: str | None, conn: Connection, agent_code: str) -> str:
    """Append the MEMORY PROTOCOL to ``system_prompt`` when ``agent_code`` has memory enabled.

    Idempotent: a prompt that already carries the block (:func:`has_memory_protocol`) is
    returned unchanged, so augmenting twice never adds it twice. Call it when a conversation
    starts and keep the result for the whole conversation (an open conversation keeps the
    system prompt it started with).

    Returns:
        ``system_prompt`` unchanged (``""`` for ``None``) when the agent has no configuration,
        memory is disabled, or the prompt already carries the block; otherwise the prompt, a
        blank line, and the protocol block.

    Raises:
        InvalidScopeError: invalid agent code.
        InvalidArgumentError: ``system_prompt`` not text or None; ``conn`` not a Connection.
    """
    _v.check_text(system_prompt, "system_prompt", optional=True)
    check_arguments(conn=conn)
    base = system_prompt or ""
    try:
        config = get_agent_config(conn, agent_code)
    except NotFoundError:
        return base
    if not config.memory_enabled or has_memory_protocol(base):
        return base
    return f"{base.rstrip()}\n\n{MEMORY_PROTOCOL}" if base.strip() else MEMORY_PROTOCOL
