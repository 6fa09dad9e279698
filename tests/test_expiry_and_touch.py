"""Expiry and touches (issue 2: ``expire_files``; "Reading a file touches it ... without holding
locks in the caller's transaction, without ever failing or slowing the read, at most one touch
per file per hour, without deadlocking SQLite's single writer"), on every backend.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from helpers import StatementLog, committed_view, file_view, store_files
from sqlalchemy.engine import Connection, Engine

from dbmemory import (
    InvalidArgumentError,
    count_expirable_files,
    enable_for_agent,
    expire_files,
    expire_files_committing,
    put_file,
    resolve_store_id,
)
from dbmemory.db.schema import audit_events, files
from dbmemory.tool import MemoryTool
from dbmemory.touch import flush_touches

KEY = "agent:QA"


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def ago(**delta: float) -> dt.datetime:
    return utcnow() - dt.timedelta(**delta)


def set_touched(engine: Engine, path: str, when: dt.datetime, key: str = KEY) -> None:
    """Back-date a file's last touch (committed), as if it was last used at ``when``."""
    with engine.begin() as c:
        store_id = resolve_store_id(c, scope=key.split(":")[0], agent_code=key.split(":")[1])
        c.execute(
            sa.update(files)
            .where(files.c.store_id == store_id, files.c.file_path == path)
            .values(last_accessed_at=when)
        )


def touched_at(engine: Engine, path: str) -> dt.datetime:
    with committed_view(engine) as c2:
        return c2.execute(
            sa.select(files.c.last_accessed_at).where(files.c.file_path == path)
        ).scalar_one()


@pytest.fixture
def store(engine: Engine) -> int:
    """Committed: agent QA with files /memories/f1.md .. f5.md (touched now)."""
    with engine.begin() as c:
        enable_for_agent(c, "QA")
        tool = MemoryTool(c, "QA")
        for i in range(1, 6):
            tool.execute({"command": "create", "path": f"/memories/f{i}.md", "file_text": f"file {i}\n"})
        return resolve_store_id(c, scope="agent", agent_code="QA")


def remaining(engine: Engine) -> list[str]:
    with committed_view(engine) as c2:
        return sorted(store_files(c2, KEY))


# ================================================================================= the rule


@pytest.mark.parametrize("days", [0, -1, -0.5, float("nan"), True, "30", None, [30]])
def test_expire_files_refuses_days_that_are_not_a_positive_number(
    conn: Connection, engine: Engine, days: Any
) -> None:
    with StatementLog(engine) as log, pytest.raises(InvalidArgumentError) as info:
        expire_files(conn, days=days)
    assert str(info.value) == (
        f"days must be a number greater than 0, got {days!r}: pass e.g. days=30"
    )
    assert log.statements == []
    with pytest.raises(InvalidArgumentError):
        count_expirable_files(conn, days=days)


@pytest.mark.parametrize("batch_size", [0, -1, 1001, True, 2.0])
def test_expire_files_refuses_a_bad_batch_size(conn: Connection, batch_size: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        expire_files(conn, days=30, batch_size=batch_size)


def test_expire_files_deletes_only_files_untouched_for_longer_than_days(
    conn: Connection, engine: Engine, store: int
) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=31))
    set_touched(engine, "/memories/f2.md", ago(days=29, hours=23))
    set_touched(engine, "/memories/f3.md", ago(days=400))
    assert count_expirable_files(conn, days=30) == 2
    assert expire_files(conn, days=30) == 2
    conn.commit()
    assert remaining(engine) == ["/memories/f2.md", "/memories/f4.md", "/memories/f5.md"]


def test_expire_files_accepts_fractions_of_a_day(conn: Connection, engine: Engine, store: int) -> None:
    set_touched(engine, "/memories/f1.md", ago(hours=13))
    set_touched(engine, "/memories/f2.md", ago(hours=11))
    assert expire_files(conn, days=0.5) == 1
    conn.commit()
    assert remaining(engine) == [f"/memories/f{i}.md" for i in (2, 3, 4, 5)]


def test_expire_files_keeps_exempt_files(conn: Connection, engine: Engine, store: int) -> None:
    with engine.begin() as c:
        put_file(c, store, "/memories/profile.md", "keep me", expiry_exempt=True)
    for path in ("/memories/profile.md", "/memories/f1.md"):
        set_touched(engine, path, ago(days=1000))
    assert expire_files(conn, days=30) == 1
    conn.commit()
    assert "/memories/profile.md" in remaining(engine)
    assert "/memories/f1.md" not in remaining(engine)


def test_expire_files_uses_the_given_now(conn: Connection, engine: Engine, store: int) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=29))
    assert expire_files(conn, days=30) == 0
    assert expire_files(conn, days=30, now=utcnow() + dt.timedelta(days=2)) == 1


def test_expire_files_limited_to_one_store_leaves_the_others(
    conn: Connection, engine: Engine, store: int
) -> None:
    with engine.begin() as c:
        enable_for_agent(c, "OTHER")
        MemoryTool(c, "OTHER").execute({"command": "create", "path": "/memories/o.md", "file_text": "o"})
        other = resolve_store_id(c, scope="agent", agent_code="OTHER")
        c.execute(sa.update(files).values(last_accessed_at=ago(days=90)))
    assert count_expirable_files(conn, days=30, store_id=other) == 1
    assert expire_files(conn, days=30, store_id=other) == 1
    conn.commit()
    assert len(remaining(engine)) == 5
    with committed_view(engine) as c2:
        assert store_files(c2, "agent:OTHER") == {}


def test_expire_files_works_in_batches_and_audits_every_file(
    conn: Connection, engine: Engine, store: int
) -> None:
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=ago(days=90)))
    with StatementLog(engine) as log:
        assert expire_files(conn, days=30, batch_size=2) == 5
    assert len(log.touching("dbm_files", "DELETE")) == 3
    conn.commit()
    assert remaining(engine) == []
    with committed_view(engine) as c2:
        events = c2.execute(
            sa.select(audit_events.c.action_name, audit_events.c.actor_name, audit_events.c.file_path,
                      audit_events.c.chars_before, audit_events.c.chars_after)
            .where(audit_events.c.action_name == "expire")
        ).all()
    assert sorted(tuple(e) for e in events) == [
        ("expire", "expiry", f"/memories/f{i}.md", 7, None) for i in range(1, 6)
    ]


def test_expire_files_with_an_exact_multiple_of_the_batch_size_stops(
    conn: Connection, engine: Engine, store: int
) -> None:
    with engine.begin() as c:
        c.execute(sa.update(files).where(files.c.file_path != "/memories/f5.md").values(last_accessed_at=ago(days=90)))
    with StatementLog(engine) as log:
        assert expire_files(conn, days=30, batch_size=2) == 4
    assert len(log.touching("dbm_files", "DELETE")) == 2


def test_expire_files_committing_commits_each_batch(engine: Engine, store: int) -> None:
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=ago(days=90)))
    batches: list[int] = []
    assert expire_files_committing(engine, days=30, batch_size=2, on_batch=batches.append) == 5
    assert batches == [2, 2, 1]
    assert remaining(engine) == []


def test_expire_files_committing_refuses_bad_days(engine: Engine) -> None:
    with pytest.raises(InvalidArgumentError):
        expire_files_committing(engine, days=0)


def test_count_expirable_files_deletes_nothing(conn: Connection, engine: Engine, store: int) -> None:
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=ago(days=90)))
    assert count_expirable_files(conn, days=30) == 5
    conn.commit()
    assert len(remaining(engine)) == 5


def test_a_write_counts_as_a_touch(conn: Connection, engine: Engine, store: int) -> None:
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=ago(days=90)))
    tool = MemoryTool(conn, "QA")
    tool.execute({"command": "str_replace", "path": "/memories/f1.md", "old_str": "file", "new_str": "File"})
    tool.execute({"command": "rename", "old_path": "/memories/f2.md", "new_path": "/memories/g2.md"})
    conn.commit()
    assert expire_files(conn, days=30) == 3
    conn.commit()
    assert remaining(engine) == ["/memories/f1.md", "/memories/g2.md"]


# ================================================================================= touches


def test_reading_a_file_through_the_tool_touches_it_so_it_no_longer_expires(
    conn: Connection, engine: Engine, store: int
) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=40))
    set_touched(engine, "/memories/f2.md", ago(days=40))
    before = utcnow()
    assert MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"}) == (
        file_view("/memories/f1.md", "file 1")
    )
    conn.commit()
    flush_touches()
    assert touched_at(engine, "/memories/f1.md") >= before
    assert expire_files(conn, days=30) == 1
    conn.commit()
    assert "/memories/f1.md" in remaining(engine)
    assert "/memories/f2.md" not in remaining(engine)


def test_a_ranged_read_touches_the_file_too(conn: Connection, engine: Engine, store: int) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=40))
    MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md", "view_range": [1, 1]})
    conn.commit()
    flush_touches()
    assert touched_at(engine, "/memories/f1.md") > ago(minutes=5)


def test_a_read_within_the_hour_of_the_last_touch_writes_nothing(
    conn: Connection, engine: Engine, store: int
) -> None:
    recent = ago(minutes=50)
    set_touched(engine, "/memories/f1.md", recent)
    with StatementLog(engine) as log:
        MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"})
        conn.commit()
        flush_touches()
    assert log.touching("dbm_files", "UPDATE") == []
    assert touched_at(engine, "/memories/f1.md") == recent


def test_a_second_read_after_a_touch_writes_nothing(conn: Connection, engine: Engine, store: int) -> None:
    set_touched(engine, "/memories/f1.md", ago(hours=2))
    tool = MemoryTool(conn, "QA")
    tool.execute({"command": "view", "path": "/memories/f1.md"})
    conn.commit()
    flush_touches()
    first = touched_at(engine, "/memories/f1.md")
    assert first > ago(minutes=5)
    with StatementLog(engine) as log:
        tool.execute({"command": "view", "path": "/memories/f1.md"})
        conn.commit()
        flush_touches()
    assert log.touching("dbm_files", "UPDATE") == []
    assert touched_at(engine, "/memories/f1.md") == first


def test_a_file_view_is_one_select_on_the_caller_connection(
    conn: Connection, engine: Engine, store: int
) -> None:
    tool = MemoryTool(conn, "QA")
    tool.execute({"command": "view", "path": "/memories/f1.md"})  # learns the store id
    with StatementLog(engine) as log:
        tool.execute({"command": "view", "path": "/memories/f2.md"})
    assert len(log.of_kind("SELECT")) == 1, log.statements


def test_a_failing_touch_never_fails_the_read(conn: Connection, engine: Engine, store: int) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=40))
    dbapi_error = engine.dialect.loaded_dbapi.OperationalError

    def refuse_touch(_c: Any, _cur: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith("UPDATE dbm_files") or "SKIP LOCKED" in statement:
            raise dbapi_error("touch refused")

    sa.event.listen(engine, "before_cursor_execute", refuse_touch)
    try:
        answer = MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"})
        flush_touches()
    finally:
        sa.event.remove(engine, "before_cursor_execute", refuse_touch)
    assert answer == file_view("/memories/f1.md", "file 1")
    assert MemoryTool(conn, "QA").execute(
        {"command": "create", "path": "/memories/after.md", "file_text": "x"}
    ) == "File created successfully at: /memories/after.md"
    conn.commit()
    assert "/memories/after.md" in remaining(engine)


def _servers_only(engine: Engine) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite has no row locks: the touch runs inline under the caller's write lock")


@pytest.fixture
def row_locked_elsewhere(engine: Engine, store: int) -> Iterator[None]:
    """Another connection holds ``SELECT ... FOR UPDATE`` on /memories/f1.md's row."""
    set_touched(engine, "/memories/f1.md", ago(days=40))
    ready, release = threading.Event(), threading.Event()

    def holder() -> None:
        with engine.connect() as c2, c2.begin():
            c2.execute(
                sa.select(files.c.file_id).where(files.c.file_path == "/memories/f1.md").with_for_update()
            ).all()
            ready.set()
            release.wait(timeout=60)

    thread = threading.Thread(target=holder)
    thread.start()
    assert ready.wait(timeout=30)
    try:
        yield
    finally:
        release.set()
        thread.join(timeout=60)


def test_a_touch_never_waits_for_a_row_lock_held_by_another_connection(
    conn: Connection, engine: Engine, row_locked_elsewhere: None
) -> None:
    _servers_only(engine)
    started = time.monotonic()
    answer = MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"})
    conn.commit()
    flush_touches()
    elapsed = time.monotonic() - started
    assert answer == file_view("/memories/f1.md", "file 1")
    assert elapsed < 3, f"the read took {elapsed:.1f} s while the row was locked"


def test_a_read_holds_no_lock_in_the_caller_transaction(
    conn: Connection, engine: Engine, store: int
) -> None:
    _servers_only(engine)
    set_touched(engine, "/memories/f1.md", ago(days=40))
    trans = conn.begin()
    MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"})
    flush_touches()
    with engine.connect() as c2, c2.begin():
        locked = c2.execute(
            sa.select(files.c.file_id)
            .where(files.c.file_path == "/memories/f1.md")
            .with_for_update(nowait=True)
        ).all()
    assert len(locked) == 1
    trans.commit()


def test_touches_on_sqlite_never_deadlock_the_single_writer(
    conn: Connection, engine: Engine, store: int
) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite only")
    set_touched(engine, "/memories/f1.md", ago(days=40))
    with conn.begin():
        tool = MemoryTool(conn, "QA")
        tool.execute({"command": "view", "path": "/memories/f1.md"})
        tool.execute({"command": "str_replace", "path": "/memories/f1.md", "old_str": "file", "new_str": "File"})
        tool.execute({"command": "view", "path": "/memories/f1.md"})
    assert touched_at(engine, "/memories/f1.md") > ago(minutes=5)


@pytest.mark.parametrize("days", [1e9, 10**12])
def test_an_absurd_number_of_days_is_an_invalid_argument_not_a_crash(conn: Connection, days: float) -> None:
    from dbmemory.errors import InvalidArgumentError
    from dbmemory.files import count_expirable_files, expire_files

    with pytest.raises(InvalidArgumentError, match="too large"):
        expire_files(conn, days=days)
    with pytest.raises(InvalidArgumentError, match="too large"):
        count_expirable_files(conn, days=days)
