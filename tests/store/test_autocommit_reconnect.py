"""An AUTOCOMMIT connection whose server connection was lost keeps its promise after it
reconnects: SQLAlchemy gives the reconnected connection the driver's default (autocommit off)
while the ``isolation_level`` option still says AUTOCOMMIT; dbmemory reads the driver's real
state, so a write the MEMORY tool reports as saved is committed (seen from another connection),
never left in a driver transaction nobody commits. Server backends (a SQLite file connection
cannot be lost this way)."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.store.agents import enable_for_agent
from dbmemory.tool import MemoryTool

AGENT = "SUPPORT"
ROLL_BACK = "roll back, then redo the whole unit of work"


def _session_id(conn: Connection) -> int:
    if conn.dialect.name == "postgresql":
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    return int(conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar_one())


def _end_session(engine: Engine, session: int) -> None:
    """End the server session ``session`` from a second connection and wait until it is gone."""
    with engine.connect() as other:
        if engine.dialect.name == "postgresql":
            other.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": session})
            alive = "SELECT count(*) FROM pg_stat_activity WHERE pid = :p"
        else:
            other.exec_driver_sql(f"KILL {int(session)}")
            alive = "SELECT count(*) FROM information_schema.processlist WHERE id = :p"
        deadline = time.monotonic() + 5
        while other.execute(sa.text(alive), {"p": session}).scalar_one():
            assert time.monotonic() < deadline, "the session did not end"
            time.sleep(0.05)
            other.rollback()


def _committed(engine: Engine, path: str) -> int:
    with engine.connect() as other:
        return int(
            other.execute(
                sa.text("SELECT count(*) FROM dbm_files WHERE file_path = :p"), {"p": path}
            ).scalar_one()
        )


def test_a_held_autocommit_connection_commits_its_writes_after_the_server_ended_its_session(
    engine: Engine,
) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("a SQLite connection has no server session to lose")
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        tool = MemoryTool(conn, AGENT, user_id="u0")
        first = tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
        assert not first.startswith("Error: "), first
        _end_session(engine, _session_id(conn))
        answers = []
        for _ in range(4):  # what an application does: follow each answer
            answers.append(
                tool.execute({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
            )
            if not answers[-1].startswith("Error: "):
                break
            if ROLL_BACK in answers[-1]:
                conn.rollback()
        assert not answers[-1].startswith("Error: "), answers
        assert _committed(engine, "/memories/b.md") == 1, (answers, "reported saved, not committed")
        # the caller's own statements autocommit again, as the option says
        assert conn.connection.driver_connection is not None
        later = tool.execute({"command": "create", "path": "/memories/c.md", "file_text": "c\n"})
        assert not later.startswith("Error: "), later
        assert _committed(engine, "/memories/c.md") == 1
    # the pool's next borrower gets a normal transaction again (nothing leaks from the repair)
    with engine.begin() as conn:
        enable_for_agent(conn, "AFTER")
        conn.exec_driver_sql("SAVEPOINT after_repair")
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        state = driver.autocommit if engine.dialect.name == "postgresql" else driver.get_autocommit()
        assert state is False or state == 0, state
