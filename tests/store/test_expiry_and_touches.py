"""Expiry and read touches, on every backend (issue 8 section 1: "a file that was created,
edited, renamed or read less than N days before the expiry's delete commits is never deleted by
it"; section 7: ``flush_touches`` is bounded).

Race tests use two connections and threads (or a subprocess), each bounded in time.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from typer.testing import CliRunner

from dbmemory import (
    InvalidArgumentError,
    count_expirable_files,
    enable_for_agent,
    expire_files,
    expire_files_committing,
    put_file,
    resolve_store_id,
)
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.dialect.expiry import job_lock, lock_expiry_candidates
from dbmemory.db.dialect.oracle import oracle19_dialect
from dbmemory.db.engine import create_engine
from dbmemory.db.schema import audit_events, file_reads, files, stores
from dbmemory.store import expiry as expiry_module
from dbmemory.store.expiry import MIN_EXPIRY_DAYS, validate_days
from dbmemory.store.statements.bulk import SELECT_JOB_LOCK, select_expiry_candidates
from dbmemory.store.touches import TOUCH_INTERVAL, TOUCH_LOCK_TIMEOUT, touch_engine
from dbmemory.tool import MemoryTool
from helpers import ERROR, StatementLog, committed_view, file_view, store_files

KEY = "agent:QA"
SRC = str(Path(__file__).resolve().parents[2] / "src")
SMALLEST = (
    "days must be a number of at least 0.0416667 (1 hour, the touch interval: reads are "
    "recorded at most once an hour)"
)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def ago(**delta: float) -> dt.datetime:
    return utcnow() - dt.timedelta(**delta)


def set_touched(engine: Engine, path: str, when: dt.datetime) -> None:
    """Back-date a file's last write (committed), as if it was last used at ``when``."""
    with engine.begin() as c:
        c.execute(sa.update(files).where(files.c.file_path == path).values(last_accessed_at=when))


def age_all(engine: Engine, days: float) -> None:
    """Back-date every file's last write by ``days`` days (committed)."""
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=ago(days=days)))


def set_read(engine: Engine, path: str, when: dt.datetime) -> None:
    """Record (committed) a read of ``path`` at ``when``."""
    with engine.begin() as c:
        store_id, file_id = c.execute(
            sa.select(files.c.store_id, files.c.file_id).where(files.c.file_path == path)
        ).one()
        c.execute(sa.delete(file_reads).where(file_reads.c.file_id == file_id))
        c.execute(sa.insert(file_reads).values(store_id=store_id, file_id=file_id, read_at=when))


def reads(engine: Engine) -> dict[str, dt.datetime]:
    """``{path: read_at}`` of the committed recorded reads."""
    with committed_view(engine) as c2:
        rows = c2.execute(
            sa.select(files.c.file_path, file_reads.c.read_at).select_from(
                file_reads.join(files, files.c.file_id == file_reads.c.file_id)
            )
        ).all()
    return {p: r for p, r in rows}


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


def expire_events(engine: Engine) -> list[str]:
    with committed_view(engine) as c2:
        return sorted(
            c2.execute(
                sa.select(audit_events.c.file_path).where(audit_events.c.action_name == "expire")
            ).scalars()
        )


def _servers_only(engine: Engine) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite has no row locks: the touch runs inline under the caller's write lock")


def _two_connections(engine: Engine) -> None:
    if is_memory_sqlite(engine):
        pytest.skip("in-memory SQLite has one shared connection")


# ================================================================================= days


BAD_DAYS = [0, -1, -0.5, 0.001, 1 / 25, float("nan"), True, "30", None, [30]]


@pytest.mark.parametrize("days", BAD_DAYS)
def test_expiry_refuses_days_that_are_not_a_number_of_at_least_one_hour(
    conn: Connection, engine: Engine, days: Any
) -> None:
    with StatementLog(engine) as log:
        for call in (
            lambda: expire_files(conn, days=days),
            lambda: count_expirable_files(conn, days=days),
            lambda: expire_files_committing(engine, days=days),
        ):
            with pytest.raises(InvalidArgumentError) as info:
                call()
            assert str(info.value) == f"{SMALLEST}, got {days!r}: pass e.g. days=30"
    assert log.statements == []


def test_the_smallest_days_allowed_is_the_touch_interval(conn: Connection, store: int) -> None:
    assert MIN_EXPIRY_DAYS == TOUCH_INTERVAL / dt.timedelta(days=1) == 1 / 24
    assert validate_days(1 / 24) == 1 / 24
    assert expire_files(conn, days=1 / 24) == 0


@pytest.mark.parametrize("days", [1e9, 10**12, float("inf")])
def test_an_absurd_number_of_days_is_an_invalid_argument_not_a_crash(conn: Connection, days: float) -> None:
    with pytest.raises(InvalidArgumentError, match="too large"):
        expire_files(conn, days=days)
    with pytest.raises(InvalidArgumentError, match="too large"):
        count_expirable_files(conn, days=days)


@pytest.mark.parametrize("batch_size", [0, -1, 1001, True, 2.0])
def test_expire_files_refuses_a_bad_batch_size(conn: Connection, batch_size: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        expire_files(conn, days=30, batch_size=batch_size)


@pytest.mark.parametrize("now", ["2026-01-01", 1.5, dt.date(2026, 1, 1)])
def test_expire_files_refuses_a_now_that_is_not_a_datetime(conn: Connection, now: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="now must be a datetime"):
        expire_files(conn, days=30, now=now)


def test_the_cli_refuses_days_below_one_hour_with_exit_code_2(tmp_path: Path) -> None:
    from dbmemory.cli import app

    url = f"sqlite:///{(tmp_path / 'none.db').as_posix()}"
    result = CliRunner().invoke(app, ["expire", "--days", "0.001", "--url", url], prog_name="dbmemory")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"Error: {SMALLEST}, got 0.001: pass e.g. days=30"
    assert not (tmp_path / "none.db").exists(), "validated before connecting"


# ================================================================================= the rule


def test_expire_files_deletes_only_files_untouched_for_longer_than_days_and_the_interval(
    conn: Connection, engine: Engine, store: int
) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=31))
    set_touched(engine, "/memories/f2.md", ago(days=30, minutes=30))  # within the interval
    set_touched(engine, "/memories/f3.md", ago(days=400))
    set_touched(engine, "/memories/f4.md", ago(days=90))
    set_read(engine, "/memories/f4.md", ago(days=29))  # read since: kept
    assert count_expirable_files(conn, days=30) == 2
    assert expire_files(conn, days=30) == 2
    conn.commit()
    assert remaining(engine) == ["/memories/f2.md", "/memories/f4.md", "/memories/f5.md"]
    assert expire_events(engine) == ["/memories/f1.md", "/memories/f3.md"]


def test_expire_files_accepts_fractions_of_a_day(conn: Connection, engine: Engine, store: int) -> None:
    set_touched(engine, "/memories/f1.md", ago(hours=14))
    set_touched(engine, "/memories/f2.md", ago(hours=12, minutes=30))
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
    assert len(log.deleting("dbm_files")) == 3
    conn.commit()
    assert remaining(engine) == []
    with committed_view(engine) as c2:
        events = c2.execute(
            sa.select(audit_events.c.action_name, audit_events.c.actor_name, audit_events.c.store_key,
                      audit_events.c.file_path, audit_events.c.chars_before, audit_events.c.chars_after)
            .where(audit_events.c.action_name == "expire")
        ).all()
    assert sorted(tuple(e) for e in events) == [
        ("expire", "expiry", KEY, f"/memories/f{i}.md", 7, None) for i in range(1, 6)
    ]


def test_expire_files_with_an_exact_multiple_of_the_batch_size_stops(
    conn: Connection, engine: Engine, store: int
) -> None:
    with engine.begin() as c:
        c.execute(sa.update(files).where(files.c.file_path != "/memories/f5.md").values(last_accessed_at=ago(days=90)))
    with StatementLog(engine) as log:
        assert expire_files(conn, days=30, batch_size=2) == 4
    assert len(log.deleting("dbm_files")) == 2


def test_a_sqlite_batch_is_set_based_and_keeps_audit_and_counters_exact(
    conn: Connection, engine: Engine, store: int
) -> None:
    """On SQLite no statement of a batch carries the candidates' ids (issue 19: they stay in
    a temporary table); the audit events and the store counters stay exact. The servers keep
    the IN lists (their store rows are locked ``SKIP LOCKED`` from the ids)."""
    with engine.begin() as c:
        c.execute(sa.update(files).where(files.c.file_path != "/memories/f5.md").values(last_accessed_at=ago(days=90)))
    with StatementLog(engine) as log:
        assert expire_files(conn, days=30, batch_size=3) == 4
    conn.commit()
    widest = max(s.count("?") + s.count("%s") + s.count("%(") for s in log.statements)
    if engine.dialect.name == "sqlite":
        assert widest <= 6, "a statement with one placeholder per candidate id"
        assert any("dbm_expiry_ids" in s for s in log.of_kind("INSERT"))
    assert remaining(engine) == ["/memories/f5.md"]
    assert expire_events(engine) == [f"/memories/f{i}.md" for i in range(1, 5)]
    with committed_view(engine) as c2:
        count, chars = c2.execute(
            sa.select(stores.c.file_count, stores.c.total_chars).where(stores.c.store_id == store)
        ).one()
    assert (count, chars) == (1, len("file 5\n"))


def test_expire_files_committing_commits_each_batch(engine: Engine, store: int) -> None:
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=ago(days=90)))
    batches: list[int] = []
    assert expire_files_committing(engine, days=30, batch_size=2, on_batch=batches.append) == 5
    assert batches == [2, 2, 1]
    assert remaining(engine) == []


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


@pytest.mark.parametrize("returning", [True, False], ids=["delete-returning", "select-what-is-left"])
def test_the_delete_carries_the_rule_and_audits_only_what_it_deleted(
    conn: Connection, engine: Engine, store: int, monkeypatch: pytest.MonkeyPatch, returning: bool
) -> None:
    """Between the candidate selection and the delete, one candidate is written and another
    read (in the batch's own transaction: on a backend whose locks would not stop that, the
    delete's own rule is what keeps them)."""
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=ago(days=90)))
    if not returning:
        monkeypatch.setattr(expiry_module, "delete_returning", lambda bind: False)
    seen: list[list[int]] = []

    def meanwhile(c: Connection, ids: list[int]) -> None:
        seen.append(ids)
        ids_by_path = {p: i for p, i in c.execute(sa.select(files.c.file_path, files.c.file_id))}
        c.execute(
            sa.update(files).where(files.c.file_path == "/memories/f1.md").values(last_accessed_at=utcnow())
        )
        c.execute(
            sa.insert(file_reads).values(
                store_id=store, file_id=ids_by_path["/memories/f2.md"], read_at=utcnow()
            )
        )

    monkeypatch.setattr(expiry_module, "_after_candidates", meanwhile)
    assert expire_files(conn, days=30) == 3
    conn.commit()
    assert len(seen[0]) == 5, "all five were candidates"
    assert remaining(engine) == ["/memories/f1.md", "/memories/f2.md"]
    assert expire_events(engine) == ["/memories/f3.md", "/memories/f4.md", "/memories/f5.md"]
    assert set(reads(engine)) == {"/memories/f2.md"}


def test_a_file_being_edited_while_the_expiry_runs_is_never_deleted(
    engine: Engine, store: int
) -> None:
    """A writer holds the file row (its edit not committed yet) while the expiry runs: the
    expiry skips the row instead of deleting it after the edit commits."""
    _two_connections(engine)
    set_touched(engine, "/memories/f1.md", ago(days=90))
    locked, release, done = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with engine.connect() as c2, c2.begin():
                MemoryTool(c2, "QA").execute(
                    {"command": "str_replace", "path": "/memories/f1.md", "old_str": "file", "new_str": "edited"}
                )
                locked.set()
                release.wait(timeout=30)
                if engine.dialect.name == "sqlite":
                    time.sleep(0.5)  # the expiry waits for SQLite's write lock meanwhile
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    assert locked.wait(timeout=30)
    try:
        if engine.dialect.name != "sqlite":
            started = time.monotonic()
            assert expire_files_committing(engine, days=30) == 0
            assert time.monotonic() - started < 5, "the expiry waited for the writer"
            release.set()
        else:
            release.set()
            assert expire_files_committing(engine, days=30) == 0
    finally:
        release.set()
        thread.join(timeout=60)
    assert done.is_set() and not errors, errors
    with committed_view(engine) as c2:
        assert store_files(c2, KEY)["/memories/f1.md"] == "edited 1\n"
    assert expire_events(engine) == []


# ================================================================================= touches


def test_reading_a_file_records_its_read_so_it_no_longer_expires(
    conn: Connection, engine: Engine, store: int
) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=40))
    set_touched(engine, "/memories/f2.md", ago(days=40))
    before = utcnow()
    assert MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"}) == (
        file_view("/memories/f1.md", "file 1")
    )
    if engine.dialect.name != "sqlite":  # committed before the read returned
        assert reads(engine)["/memories/f1.md"] >= before
    conn.commit()
    assert reads(engine)["/memories/f1.md"] >= before
    assert expire_files(conn, days=30) == 1
    conn.commit()
    assert "/memories/f1.md" in remaining(engine)
    assert "/memories/f2.md" not in remaining(engine)


def test_a_ranged_read_touches_the_file_too(conn: Connection, engine: Engine, store: int) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=40))
    MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md", "view_range": [1, 1]})
    conn.commit()
    assert reads(engine)["/memories/f1.md"] > ago(minutes=5)


def test_a_read_within_the_interval_of_the_last_touch_writes_nothing(
    conn: Connection, engine: Engine, store: int
) -> None:
    set_touched(engine, "/memories/f1.md", ago(minutes=50))
    set_touched(engine, "/memories/f2.md", ago(days=3))
    set_read(engine, "/memories/f2.md", ago(minutes=30))
    with StatementLog(engine) as log:
        tool = MemoryTool(conn, "QA")
        tool.execute({"command": "view", "path": "/memories/f1.md"})
        tool.execute({"command": "view", "path": "/memories/f2.md"})
        conn.commit()
    assert [s for s in log.statements if "dbm_file_reads" in s and "SELECT dbm_files" not in s] == []
    assert set(reads(engine)) == {"/memories/f2.md"}


def test_a_second_read_after_a_touch_writes_nothing(conn: Connection, engine: Engine, store: int) -> None:
    set_touched(engine, "/memories/f1.md", ago(hours=2))
    tool = MemoryTool(conn, "QA")
    tool.execute({"command": "view", "path": "/memories/f1.md"})
    conn.commit()
    first = reads(engine)["/memories/f1.md"]
    assert first > ago(minutes=5)
    with StatementLog(engine) as log:
        tool.execute({"command": "view", "path": "/memories/f1.md"})
        conn.commit()
    assert len(log.of_kind("SELECT")) == 1 and len(log.of_kind("INSERT", "UPDATE", "MERGE")) == 0
    assert reads(engine)["/memories/f1.md"] == first


def test_a_file_view_is_one_select_on_the_caller_connection(
    conn: Connection, engine: Engine, store: int
) -> None:
    tool = MemoryTool(conn, "QA")
    tool.execute({"command": "view", "path": "/memories/f1.md"})  # learns the store id
    with StatementLog(engine) as log:
        tool.execute({"command": "view", "path": "/memories/f2.md"})
    assert len(log.of_kind("SELECT")) == 1, log.statements


def test_a_file_read_23_hours_ago_survives_days_1(
    conn: Connection, engine: Engine, store: int, monkeypatch: pytest.MonkeyPatch, set_clock: Callable[[Any], None]
) -> None:
    """Written 24.5 hours ago, read 0.9 hour later (within the touch interval: not recorded),
    so read 23.6 hours ago: ``days=1`` keeps it; it goes only once neither happened for a day
    plus the interval."""
    t0 = utcnow() - dt.timedelta(hours=24.5)
    set_touched(engine, "/memories/f1.md", t0)
    set_clock(lambda: t0 + dt.timedelta(hours=0.9))
    assert "file 1" in MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"})
    conn.commit()
    assert reads(engine) == {}, "within the interval: no touch recorded"
    monkeypatch.undo()
    now = utcnow()
    assert expire_files(conn, days=1, now=now) == 0
    assert expire_files(conn, days=1, now=now + dt.timedelta(hours=0.3)) == 0
    assert expire_files(conn, days=1, now=now + dt.timedelta(hours=1.6)) == 1
    conn.commit()


def test_a_read_followed_at_once_by_expiry_keeps_the_file(engine: Engine, store: int) -> None:
    age_all(engine, 40)
    with engine.connect() as c:
        assert "file 1" in MemoryTool(c, "QA").execute({"command": "view", "path": "/memories/f1.md"})
        if engine.dialect.name == "sqlite":
            c.commit()  # the touch joined this transaction, which holds the write lock
        assert expire_files_committing(engine, days=30) == 4
        c.commit()
    assert remaining(engine) == ["/memories/f1.md"]


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "PYTHONPATH": SRC, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _url(engine: Engine) -> str:
    from dbmemory.db.engine import engine_url

    return engine_url(engine, hide_password=False)  # keeps PgBouncer's transaction pooling


def test_a_read_followed_at_once_by_an_expiry_in_another_process_keeps_the_file(
    engine: Engine, store: int
) -> None:
    _two_connections(engine)
    age_all(engine, 40)
    with engine.connect() as c:
        assert "file 1" in MemoryTool(c, "QA").execute({"command": "view", "path": "/memories/f1.md"})
        if engine.dialect.name == "sqlite":
            c.commit()
        done = subprocess.run(
            [sys.executable, "-m", "dbmemory", "expire", "--days", "30", "--url", _url(engine), "--json"],
            env={**os.environ, "PYTHONPATH": SRC},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert '"expired": 4' in done.stdout
        c.commit()
    assert remaining(engine) == ["/memories/f1.md"]


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "exits-inside-its-transaction"])
def test_a_read_in_a_process_that_exits_right_after_keeps_the_file(
    engine: Engine, store: int, commit: bool
) -> None:
    _two_connections(engine)
    if not commit and engine.dialect.name == "sqlite":
        pytest.skip("SQLite: the touch joins the reader's transaction, which rolls back with it")
    age_all(engine, 40)
    done = _python(
        f"""
        import os
        from dbmemory.db.engine import create_engine
        from dbmemory.tool import MemoryTool
        engine = create_engine({_url(engine)!r})
        c = engine.connect()
        c.begin()
        text = MemoryTool(c, "QA").execute({{"command": "view", "path": "/memories/f1.md"}})
        assert "file 1" in text, text
        if {commit!r}:
            c.commit()
        os._exit(0)
        """
    )
    assert done.returncode == 0, done.stderr
    assert expire_files_committing(engine, days=30) == 4
    assert remaining(engine) == ["/memories/f1.md"]


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


def test_a_read_of_a_row_another_transaction_holds_records_its_touch_without_waiting(
    conn: Connection, engine: Engine, row_locked_elsewhere: None
) -> None:
    _servers_only(engine)
    started = time.monotonic()
    answer = MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"})
    elapsed = time.monotonic() - started
    assert answer == file_view("/memories/f1.md", "file 1")
    assert elapsed < 3, f"the read took {elapsed:.1f} s while the row was locked"
    assert reads(engine)["/memories/f1.md"] > ago(minutes=5), "recorded and committed"
    conn.rollback()


def test_a_read_holds_no_lock_in_the_caller_transaction(
    conn: Connection, engine: Engine, store: int
) -> None:
    _servers_only(engine)
    set_touched(engine, "/memories/f1.md", ago(days=40))
    trans = conn.begin()
    MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"})
    with engine.connect() as c2, c2.begin():
        assert c2.execute(
            sa.select(files.c.file_id).where(files.c.file_path == "/memories/f1.md").with_for_update(nowait=True)
        ).all()
        assert c2.execute(sa.select(file_reads.c.file_id).with_for_update(nowait=True)).all()
    trans.commit()


def test_a_view_then_an_edit_in_one_repeatable_read_transaction_does_not_conflict_with_the_touch(
    engine: Engine, store: int
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's REPEATABLE READ (snapshot isolation)")
    set_touched(engine, "/memories/f1.md", ago(days=40))
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as c, c.begin():
        tool = MemoryTool(c, "QA")
        assert "file 1" in tool.execute({"command": "view", "path": "/memories/f1.md"})
        answer = tool.execute(
            {"command": "str_replace", "path": "/memories/f1.md", "old_str": "file", "new_str": "File"}
        )
        assert not answer.startswith(ERROR), answer
    assert "/memories/f1.md" in reads(engine)
    with committed_view(engine) as c2:
        assert store_files(c2, KEY)["/memories/f1.md"] == "File 1\n"


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
    assert reads(engine)["/memories/f1.md"] > ago(minutes=5)


def test_a_touch_that_cannot_be_recorded_fails_the_read_with_a_retry_text(
    conn: Connection, engine: Engine, store: int
) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=40))
    dbapi_error = engine.dialect.loaded_dbapi.OperationalError

    def refuse_touch(_c: Any, _cur: Any, statement: str, *args: Any) -> None:
        if "INTO dbm_file_reads" in statement:
            raise dbapi_error("touch refused")

    sa.event.listen(engine, "before_cursor_execute", refuse_touch)
    try:
        answer = MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f1.md"})
    finally:
        sa.event.remove(engine, "before_cursor_execute", refuse_touch)
    assert answer.startswith(ERROR) and "retry" in answer.lower(), answer
    assert "file 1" not in answer
    assert MemoryTool(conn, "QA").execute(
        {"command": "create", "path": "/memories/after.md", "file_text": "x"}
    ) == "File created successfully at: /memories/after.md"
    conn.commit()
    assert "/memories/after.md" in remaining(engine)


def test_a_touch_waits_for_a_running_expiry_batch_at_most_the_lock_timeout(
    engine: Engine, store: int
) -> None:
    """An expiry holding its lock in an open transaction: a read that must record a touch
    fails with a retry text after the bounded wait (and the file is not reported read)."""
    _servers_only(engine)
    set_touched(engine, "/memories/f1.md", ago(days=40))
    set_touched(engine, "/memories/f2.md", ago(days=5))
    with engine.connect() as expiring, expiring.begin():
        assert expire_files(expiring, days=30) == 1  # holds the expiry lock until the end
        with engine.connect() as reader:
            started = time.monotonic()
            answer = MemoryTool(reader, "QA").execute({"command": "view", "path": "/memories/f2.md"})
            elapsed = time.monotonic() - started
    assert answer.startswith(ERROR) and "retry" in answer.lower(), answer
    assert TOUCH_LOCK_TIMEOUT - 1 < elapsed < TOUCH_LOCK_TIMEOUT + 10, elapsed


def test_a_read_racing_an_expiry_batch_returns_text_only_for_a_file_that_stays(
    engine: Engine, store: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The expiry is held mid-batch (candidates chosen, not yet deleted) while another
    connection reads a candidate: the read either finds the file gone (after the batch
    commits) or returns its text, and then the file must still exist."""
    _two_connections(engine)
    set_touched(engine, "/memories/f1.md", ago(days=40))
    in_batch, results = threading.Event(), []

    def hold(_c: Connection, _ids: list[int]) -> None:
        in_batch.set()
        time.sleep(1.0)

    monkeypatch.setattr(expiry_module, "_after_candidates", hold)

    def run_expiry() -> None:
        results.append(expire_files_committing(engine, days=30))

    thread = threading.Thread(target=run_expiry)
    thread.start()
    assert in_batch.wait(timeout=30)
    with engine.connect() as reader:
        answer = MemoryTool(reader, "QA").execute({"command": "view", "path": "/memories/f1.md"})
        reader.commit()
    thread.join(timeout=60)
    assert results == [1]
    assert answer.startswith("Error: The path /memories/f1.md does not exist.") or (
        answer.startswith(ERROR) and "retry" in answer.lower()
    ), answer
    assert remaining(engine) == [f"/memories/f{i}.md" for i in (2, 3, 4, 5)]


def test_a_touch_does_not_need_a_slot_of_the_caller_pool(engine: Engine, store: int) -> None:
    _servers_only(engine)
    set_touched(engine, "/memories/f1.md", ago(days=40))
    small = create_engine(engine.url, pool_size=1, max_overflow=0, pool_timeout=2)
    try:
        with small.connect() as c:
            assert "file 1" in MemoryTool(c, "QA").execute({"command": "view", "path": "/memories/f1.md"})
        assert touch_engine(small).pool is not small.pool
    finally:
        small.dispose()
    assert "/memories/f1.md" in reads(engine)


def test_a_read_after_expire_files_in_the_same_transaction_does_not_wait_for_itself(
    conn: Connection, engine: Engine, store: int
) -> None:
    set_touched(engine, "/memories/f1.md", ago(days=40))
    set_touched(engine, "/memories/f2.md", ago(days=5))
    with conn.begin():
        assert expire_files(conn, days=30) == 1
        started = time.monotonic()
        assert "file 2" in MemoryTool(conn, "QA").execute({"command": "view", "path": "/memories/f2.md"})
        assert time.monotonic() - started < 2
    assert "/memories/f2.md" in reads(engine)


def test_expire_files_on_an_autocommit_connection_runs_each_batch_as_one_transaction(
    engine: Engine, store: int
) -> None:
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=ago(days=90)))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        assert expire_files(c, days=30, batch_size=2) == 5
        assert c.get_execution_options()["isolation_level"] == "AUTOCOMMIT"
        assert c.exec_driver_sql("SELECT 1").scalar() == 1
    assert remaining(engine) == []
    assert len(expire_events(engine)) == 5


def test_expire_files_refuses_a_repeatable_read_connection_on_postgresql(engine: Engine, store: int) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL snapshot isolation")
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as c:
        with pytest.raises(InvalidArgumentError, match="READ COMMITTED"):
            expire_files(c, days=30)


def test_the_expiry_purges_old_recorded_reads_of_files_that_are_gone(
    engine: Engine, store: int
) -> None:
    with engine.begin() as c:
        c.execute(sa.insert(file_reads), [
            {"store_id": store, "file_id": 10**9, "read_at": ago(days=90)},
            {"store_id": store, "file_id": 10**9 + 1, "read_at": ago(minutes=5)},
        ])
    set_read(engine, "/memories/f1.md", ago(days=90))
    assert expire_files_committing(engine, days=30) == 0
    with committed_view(engine) as c2:
        left = sorted(c2.execute(sa.select(file_reads.c.file_id)).scalars())
    assert 10**9 not in left and 10**9 + 1 in left and len(left) == 2


def test_the_oracle_job_lock_is_a_table_lock_shared_by_touches_and_exclusive_for_expiry() -> None:
    ora = oracle19_dialect()
    shared = job_lock(ora, SELECT_JOB_LOCK, shared=True, wait_seconds=5)
    exclusive = job_lock(ora, SELECT_JOB_LOCK, shared=False)
    assert str(shared.compile(dialect=ora)) == "LOCK TABLE dbm_job_locks IN ROW SHARE MODE WAIT 5"
    assert str(exclusive.compile(dialect=ora)) == "LOCK TABLE dbm_job_locks IN EXCLUSIVE MODE"
    candidates = lock_expiry_candidates(
        ora, select_expiry_candidates(False), 1000
    )
    sql = str(candidates.compile(dialect=ora))
    assert "ROWNUM <= 1000 FOR UPDATE SKIP LOCKED" in sql and "FETCH" not in sql
