"""A COMMIT that dbmemory sends and whose connection is lost while it runs.

The server may have committed before the reply was lost, so the answer must never say
"nothing was saved" unless dbmemory found out (the model would redo an ``insert`` that is
already there): dbmemory asks the database on a new connection
(``dbmemory.store.units.resolved_commit``) and says "nothing was saved: retry" when the
transaction was rolled back, "may or may not have been saved" only when it cannot find out.
The owners of a COMMIT are checked, on PostgreSQL and MariaDB, by killing the session for real
from a second connection right after the write's last statement (the server rolls back): a
turn's own transaction around a MEMORY tool call, the one-command transaction dbmemory opens for
a caller in AUTOCOMMIT mode, MCP, the Anthropic tool, the LangGraph store. A cut after the
server committed: ``tests/store/test_commit_outcomes.py``. A COMMIT that fails for another
reason still says nothing was saved (``tests/agent/test_turn_prompt_and_locks.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.agent import run_turn
from dbmemory.errors import DbMemoryError
from dbmemory.items.extract_prompts import purpose_of as item_purpose_of
from dbmemory.llm import Completion, ToolCall
from dbmemory.profile.optout import lock_user_memory_enabled
from dbmemory.profile.prompts import purpose_of
from dbmemory.store.agents import enable_for_agent
from dbmemory.tool import MemoryTool

AGENT = "SUPPORT"
MODEL = "gpt-4o-mini"
MAY_BE_SAVED = "may or may not have been saved"
NOT_SAVED = "nothing was saved"


def _session_id(dbapi_conn: Any, engine: Engine) -> int:
    if engine.dialect.name == "postgresql":
        return int(dbapi_conn.info.backend_pid)
    return int(dbapi_conn.thread_id())


def _kill(engine: Engine, session: int) -> None:
    """End ``session`` on the server from another connection, and wait until it is gone."""
    postgres = engine.dialect.name == "postgresql"
    with engine.connect() as other:
        if postgres:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({session})")
            alive = f"SELECT count(*) FROM pg_stat_activity WHERE pid = {session}"
        else:
            other.exec_driver_sql(f"KILL {session}")
            alive = f"SELECT count(*) FROM information_schema.processlist WHERE id = {session}"
        for _ in range(100):
            if other.exec_driver_sql(alive).scalar() == 0:
                return
            other.rollback()
            time.sleep(0.05)
    raise AssertionError(f"session {session} did not end")


@contextmanager
def killed_after_the_audit_insert(engine: Engine) -> Iterator[list[int]]:
    """Kill the session that writes the first audit event, right after that statement: its
    transaction's COMMIT then meets a lost connection. Yields the killed session ids."""
    killed: list[int] = []

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not killed and statement.lstrip().upper().startswith(("INSERT", "WITH")) and "dbm_audit_events" in statement:
            session = _session_id(conn.connection.driver_connection, engine)
            killed.append(session)
            _kill(engine, session)

    sa.event.listen(engine, "after_cursor_execute", after)
    try:
        yield killed
    finally:
        sa.event.remove(engine, "after_cursor_execute", after)


@contextmanager
def killed_before_the_commit(engine: Engine) -> Iterator[list[int]]:
    """Kill the session of the first transaction committed through SQLAlchemy, just before its
    ``COMMIT`` is sent (the ``commit`` event). Yields the killed session ids."""
    killed: list[int] = []

    def before_commit(conn: Any) -> None:
        if not killed:
            session = _session_id(conn.connection.driver_connection, engine)
            killed.append(session)
            _kill(engine, session)

    sa.event.listen(engine, "commit", before_commit)
    try:
        yield killed
    finally:
        sa.event.remove(engine, "commit", before_commit)


@pytest.fixture
def agent(server_engine: Engine) -> Engine:
    with server_engine.begin() as conn:
        enable_for_agent(conn, AGENT)
    return server_engine


def _files(engine: Engine) -> str:
    with engine.begin() as conn:
        return MemoryTool(conn, AGENT).execute({"command": "view", "path": "/memories"})


def test_a_turns_tool_call_whose_commit_lost_the_connection_says_nothing_was_saved(agent: Engine) -> None:
    calls = iter(
        [
            Completion("", "tool_calls", [ToolCall("c1", "memory", {"command": "create", "path": "/memories/a.md", "file_text": "x"})]),
            Completion("done", "stop"),
        ]
    )

    def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages):
            return Completion("NOOP", "stop")
        if item_purpose_of(messages):
            return Completion("[]", "stop")
        return next(calls)

    with killed_after_the_audit_insert(agent) as killed:
        result = run_turn(agent, agent_code=AGENT, user_id=None, messages=[{"role": "user", "content": "x"}],
                          model=MODEL, complete=complete)
    assert killed, "the tool call wrote no audit event"
    record = result.tool_calls[0]
    assert record.is_error, record.result
    assert NOT_SAVED in record.result and "retry the command" in record.result, record.result
    assert MAY_BE_SAVED not in record.result, record.result
    assert result.answer == "done"  # the turn went on after the lost connection
    assert "a.md" not in _files(agent)  # the server ended the session before it saw the COMMIT


def test_an_autocommit_callers_command_whose_commit_lost_the_connection_says_nothing_was_saved(
    agent: Engine,
) -> None:
    with agent.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        tool = MemoryTool(conn, AGENT)
        assert tool.execute({"command": "create", "path": "/memories/b.md", "file_text": "b\n"}).startswith("File created")
        with killed_after_the_audit_insert(agent) as killed:
            answer = tool.execute({"command": "insert", "path": "/memories/b.md", "insert_line": 1, "insert_text": "again"})
        assert killed
        assert answer.startswith("Error: "), answer
        assert NOT_SAVED in answer and "retry the command" in answer, answer
        assert MAY_BE_SAVED not in answer, answer
        # the connection was lost: the next command runs on a new one, and sees the truth
        assert "again" not in tool.execute({"command": "view", "path": "/memories/b.md"})


def test_the_mcp_servers_call_whose_commit_lost_the_connection_says_nothing_was_saved(agent: Engine) -> None:
    from dbmemory.integrations.mcp_server import McpMemoryServer

    server = McpMemoryServer(agent, AGENT)
    with killed_after_the_audit_insert(agent) as killed:
        answer = server.call_memory({"command": "create", "path": "/memories/m.md", "file_text": "m"})
    assert killed
    assert answer.startswith("Error: ") and NOT_SAVED in answer, answer
    assert "retry the command" in answer, answer


def test_the_anthropic_tools_command_whose_commit_lost_the_connection_says_nothing_was_saved(agent: Engine) -> None:
    pytest.importorskip("anthropic")
    from anthropic.lib.tools import ToolError
    from anthropic.types.beta import BetaMemoryTool20250818CreateCommand as Create

    from dbmemory.integrations.anthropic_tool import DbMemoryTool

    tool = DbMemoryTool(agent, AGENT)
    with killed_after_the_audit_insert(agent) as killed, pytest.raises(ToolError) as raised:
        tool.create(Create(command="create", path="/memories/c.md", file_text="c"))
    assert killed
    assert NOT_SAVED in str(raised.value), raised.value


def test_the_langgraph_stores_batch_whose_commit_lost_the_connection_says_nothing_was_saved(agent: Engine) -> None:
    pytest.importorskip("langgraph")
    from dbmemory.errors import ConflictError
    from dbmemory.integrations.langgraph import DbMemoryStore

    store = DbMemoryStore(agent)
    with killed_before_the_commit(agent) as killed, pytest.raises(ConflictError) as raised:
        store.put(("users", "u1"), "prefs", {"drink": "tea"})
    assert killed
    assert raised.value.code == "commit_not_saved" and NOT_SAVED in raised.value.message
    assert "retry the command" in raised.value.message


def test_a_connection_lost_at_the_opt_out_lock_is_a_database_error_not_a_crash(agent: Engine) -> None:
    """The first statement of a profile write (the user's settings row, locked) meets a killed
    session: the caller gets dbmemory's error for a lost connection, never SQLAlchemy's
    PendingRollbackError from reading the lost connection's state afterwards."""
    with agent.begin() as conn:
        assert lock_user_memory_enabled(conn, "u1") is True  # the table is known, the row made

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not killed and "dbm_user_settings" in statement:
            killed.append(_session_id(conn.connection.driver_connection, agent))
            _kill(agent, killed[-1])

    killed: list[int] = []
    sa.event.listen(agent, "before_cursor_execute", before)
    try:
        with agent.connect() as conn:
            conn.begin()
            with pytest.raises(DbMemoryError) as raised:
                lock_user_memory_enabled(conn, "u1")
            conn.rollback()
    finally:
        sa.event.remove(agent, "before_cursor_execute", before)
    assert killed
    assert "reading the memory setting" in raised.value.message, raised.value.message
