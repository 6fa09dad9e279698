"""Writes join the caller's transaction also on a SQLite engine dbmemory did not configure
(``sqlalchemy.create_engine("sqlite:///...")``, pysqlite's own transaction handling on).

pysqlite sends no ``BEGIN`` before a ``SAVEPOINT``: the write's savepoint opened the database
transaction itself and its ``RELEASE`` committed it, so the caller's rollback kept the memory
write (found by the hattack review: a note survived the rollback of its order)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

import dbmemory
from dbmemory import MemoryTool
from dbmemory import create_engine as dbmemory_engine
from dbmemory.core.clock import utcnow
from dbmemory.db.migrate import upgrade
from dbmemory.db.schema import files


class Boom(Exception):
    """The caller's unit of work fails after the memory write."""


@pytest.fixture
def plain(tmp_path: Path) -> Engine:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    dbmemory.upgrade(dbmemory.create_engine(url))
    engine = sa.create_engine(url)  # not dbmemory.create_engine: no configure_engine
    with engine.begin() as conn:
        dbmemory.enable_for_agent(conn, "PLAIN", scope="user", max_files=2)
    yield engine
    engine.dispose()


def paths(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return sorted(conn.execute(sa.text("SELECT file_path FROM dbm_files")).scalars())


def create(conn: sa.Connection, path: str) -> str:
    return MemoryTool(conn, "PLAIN", user_id="u1").execute(
        {"command": "create", "path": path, "file_text": "a note"}
    )


def test_the_callers_rollback_removes_a_write_made_first_in_its_transaction(plain: Engine) -> None:
    with pytest.raises(Boom), plain.begin() as conn:
        assert create(conn, "/memories/x.md").startswith("File created")
        raise Boom
    assert paths(plain) == []


def test_a_connection_closed_without_commit_keeps_nothing(plain: Engine) -> None:
    with plain.connect() as conn:  # autobegin, never committed
        assert create(conn, "/memories/x.md").startswith("File created")
    assert paths(plain) == []


def test_the_callers_commit_keeps_the_writes_and_a_failed_write_leaves_it_usable(plain: Engine) -> None:
    with plain.begin() as conn:
        assert create(conn, "/memories/a.md").startswith("File created")
        assert create(conn, "/memories/b.md").startswith("File created")
        assert create(conn, "/memories/c.md").startswith("Error")  # max_files=2
    assert paths(plain) == ["/memories/a.md", "/memories/b.md"]


def test_a_read_only_sqlite_file_gets_a_read_only_answer_not_unreachable(tmp_path: Path) -> None:
    """A view records its read (expiry), so on a read-only database file it cannot be
    completed: the answer says the store is read-only (what to fix), not "could not be
    reached"."""
    path = tmp_path / "ro.db"
    writable = dbmemory_engine(f"sqlite:///{path}")
    upgrade(writable)
    with writable.begin() as conn:
        tool = MemoryTool.for_store(conn, "RO")
        assert tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "a"}).startswith("File created")
    with writable.begin() as conn:  # no read recorded, last touched long ago: a view must touch
        conn.execute(sa.update(files).values(last_accessed_at=utcnow() - dt.timedelta(days=3)))
    writable.dispose()
    plain = sa.create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    with plain.connect() as conn:
        answer = MemoryTool.for_store(conn, "RO").execute({"command": "view", "path": "/memories/a.md"})
    assert answer.startswith("Error: ") and "read-only" in answer, answer
    assert "could not be reached" not in answer
