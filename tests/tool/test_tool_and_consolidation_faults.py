"""Faults during tool calls and profile consolidation (issue 5, "Faults").

* The connection drops in the middle of a tool call (PostgreSQL: ``pg_terminate_backend`` from
  another connection; MariaDB: ``KILL``; SQLite file: the DB-API connection is closed under the
  tool), at a chosen statement: the tool answers the documented "could not be reached ... retry"
  text, nothing is half-written, and the caller's connection is in a defined state: invalidated,
  its transaction rolled back as a whole, usable again after ``rollback()``.
* A lock wait times out (PostgreSQL ``lock_timeout``, MariaDB ``innodb_lock_wait_timeout``):
  the tool answers the documented text telling to retry, changes nothing, and the caller's
  transaction stays usable (its earlier and later writes commit). Reads never wait for a writer.
* Profile consolidation: the model raises, times out, or returns garbage; the process is killed
  (simulated) between the consolidation and the write, or after the write but before its
  commit. The stored profile is the old one or a complete new one, never half-written, and the
  next turn consolidates normally.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.db.schema import audit_events
from dbmemory.tool import MemoryTool, storage_messages
from helpers import ERROR, committed_view, counts, statement_is, store_files

STORE = "faults"
KEY = f"shared:{STORE}"


def snapshot(engine: Engine) -> tuple[Any, ...]:
    with committed_view(engine) as c:
        return counts(c), store_files(c)


def seed(engine: Engine, files: dict[str, str]) -> None:
    with engine.begin() as c:
        tool = MemoryTool.for_store(c, STORE)
        for path, text in files.items():
            assert tool.execute({"command": "create", "path": path, "file_text": text}).startswith("File created")


@pytest.fixture
def dropping_engine(engine: Engine, backend_name: str) -> Engine:
    if backend_name == "sqlite-memory":
        pytest.skip("in-memory SQLite: closing its one connection destroys the database")
    if backend_name == "oracle":
        pytest.skip("no connection-kill recipe for Oracle here")
    return engine


@contextmanager
def drop_connection_at(engine: Engine, conn: Connection, prefix: str, nth: int = 1) -> Iterator[list[str]]:
    """Kill ``conn``'s database connection just before its ``nth`` statement starting with
    ``prefix`` is sent; yields the list of statements that triggered it."""
    kind = engine.dialect.name
    target = conn.connection.dbapi_connection
    server_id = None
    if kind == "postgresql":
        server_id = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    elif kind in ("mysql", "mariadb"):
        server_id = conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar()
    seen: list[str] = []
    fired: list[str] = []

    def before(c: Any, cursor: Any, statement: str, *args: Any) -> None:
        if fired or c.connection.dbapi_connection is not target:
            return
        if not statement_is(statement, prefix):
            return
        seen.append(statement)
        if len(seen) < nth:
            return
        fired.append(statement)
        if kind == "sqlite":
            target.close()
            return
        with engine.connect() as admin:
            if kind == "postgresql":
                assert admin.exec_driver_sql(f"SELECT pg_terminate_backend({int(server_id)}, 5000)").scalar()
            else:
                admin.exec_driver_sql(f"KILL CONNECTION {int(server_id)}")
                time.sleep(0.1)

    sa.event.listen(engine, "before_cursor_execute", before)
    try:
        yield fired
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)


SEED = {
    "/memories/a.md": "alpha\nbeta\n",
    "/memories/dir/one.md": "1\n",
    "/memories/dir/two.md": "2\n",
    "/memories/dir/three.md": "3\n",
}

DROP_CASES = [
    pytest.param({"command": "create", "path": "/memories/new.md", "file_text": "x"}, "SELECT", 1, id="create-at-lock"),
    pytest.param({"command": "create", "path": "/memories/new.md", "file_text": "x"}, "INSERT INTO dbm_files", 1, id="create-at-insert"),
    pytest.param({"command": "create", "path": "/memories/new.md", "file_text": "x"}, "INSERT INTO dbm_audit_events", 1, id="create-at-audit"),
    pytest.param({"command": "create", "path": "/memories/new.md", "file_text": "x"}, "RELEASE SAVEPOINT", 1, id="create-at-release"),
    pytest.param({"command": "str_replace", "path": "/memories/a.md", "old_str": "beta", "new_str": "BETA"}, "UPDATE dbm_files", 1, id="str_replace-at-update"),
    pytest.param({"command": "str_replace", "path": "/memories/a.md", "old_str": "beta", "new_str": "BETA"}, "INSERT INTO dbm_audit_events", 1, id="str_replace-at-audit"),
    pytest.param({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "top"}, "UPDATE dbm_files", 1, id="insert-at-update"),
    pytest.param({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/moved"}, "UPDATE dbm_files", 2, id="rename-dir-at-second-move"),
    pytest.param({"command": "delete", "path": "/memories/dir"}, "DELETE FROM dbm_files", 1, id="delete-dir-at-delete"),
    pytest.param({"command": "delete", "path": "/memories/a.md"}, "INSERT INTO dbm_audit_events", 1, id="delete-at-audit"),
    pytest.param({"command": "view", "path": "/memories/a.md"}, "SELECT", 1, id="view-file"),
    pytest.param({"command": "view", "path": "/memories"}, "SELECT", 1, id="view-root"),
]


@pytest.mark.parametrize(("arguments", "prefix", "nth"), DROP_CASES)
def test_a_connection_dropped_mid_call_gives_a_retry_text_and_writes_nothing(
    dropping_engine: Engine, arguments: dict[str, Any], prefix: str, nth: int
) -> None:
    engine = dropping_engine
    seed(engine, SEED)
    before = snapshot(engine)
    with engine.connect() as conn:
        tx = conn.begin()
        # the caller wrote something of its own first, in the same transaction
        mine = MemoryTool.for_store(conn, "caller-own")
        assert mine.execute({"command": "create", "path": "/memories/mine.md", "file_text": "m"}).startswith("File")
        tool = MemoryTool.for_store(conn, STORE)
        if arguments["command"] != "create":
            tool.execute({"command": "view", "path": "/memories/a.md"})  # the tool knows its store id
        with drop_connection_at(engine, conn, prefix, nth) as fired:
            text = tool.execute(arguments)
        assert fired, f"no statement starting with {prefix!r} was sent"
        # the caller's own earlier write went with the connection: never "nothing was changed"
        assert text.startswith(ERROR) and "rolled back the whole transaction" in text, text
        assert "connection to the database was lost" in text and "nothing was changed" not in text
        # defined state: the connection is invalidated and its whole transaction is gone
        assert conn.invalidated
        tx.rollback()
        with conn.begin():
            again = MemoryTool.for_store(conn, STORE).execute({"command": "view", "path": "/memories/a.md"})
            assert again.startswith("Here's the content of /memories/a.md"), again
    assert snapshot(engine) == before  # nothing half-written, the caller's own row rolled back too


def test_a_dropped_connection_is_not_retried_silently_by_the_tool(dropping_engine: Engine) -> None:
    """One drop, one answer: the tool does not reconnect and re-run a write on its own."""
    engine = dropping_engine
    seed(engine, SEED)
    statements: list[str] = []

    def count(c: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE DBM_FILES"):
            statements.append(statement)

    with engine.connect() as conn:
        tx = conn.begin()
        tool = MemoryTool.for_store(conn, STORE)
        sa.event.listen(engine, "before_cursor_execute", count)
        try:
            with drop_connection_at(engine, conn, "UPDATE dbm_files"):
                text = tool.execute({"command": "str_replace", "path": "/memories/a.md", "old_str": "beta", "new_str": "B"})
        finally:
            sa.event.remove(engine, "before_cursor_execute", count)
        tx.rollback()
    assert text.startswith(ERROR)
    assert len(statements) == 1


# --------------------------------------------------------------------------- lock wait timeout


@pytest.fixture
def server(engine: Engine, backend_name: str) -> Engine:
    if backend_name not in ("postgres", "mysql"):
        pytest.skip("SQLite takes its write lock at BEGIN IMMEDIATE: the tool never waits for a lock")
    return engine


@contextmanager
def short_lock_timeout(conn: Connection) -> Iterator[None]:
    """Make lock waits of ``conn`` give up after about a second (transaction-local on PG)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL lock_timeout = '700ms'")
        yield
        return
    before = conn.exec_driver_sql("SELECT @@session.innodb_lock_wait_timeout").scalar_one()
    conn.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 1")
    try:
        yield
    finally:  # back to the engine's own lock timeout (dbmemory sets it on connect)
        conn.exec_driver_sql(f"SET SESSION innodb_lock_wait_timeout = {int(before)}")


LOCK_CASES = [
    pytest.param({"command": "str_replace", "path": "/memories/a.md", "old_str": "beta", "new_str": "B"}, id="str_replace"),
    pytest.param({"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "x"}, id="insert"),
    pytest.param({"command": "create", "path": "/memories/b.md", "file_text": "b"}, id="create"),
    pytest.param({"command": "delete", "path": "/memories/dir"}, id="delete-dir"),
    pytest.param({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/z.md"}, id="rename"),
]


@pytest.mark.parametrize("arguments", LOCK_CASES)
def test_a_lock_wait_timeout_says_retry_and_leaves_the_callers_transaction_usable(
    server: Engine, arguments: dict[str, Any]
) -> None:
    engine = server
    seed(engine, SEED)
    path = arguments.get("path") or arguments["old_path"]
    with engine.connect() as holder, engine.connect() as caller:
        holder_tx = holder.begin()
        held = MemoryTool.for_store(holder, STORE).execute(
            {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "ALPHA"}
        )
        assert not held.startswith(ERROR), held  # the holder now locks the store row
        with caller.begin():
            with short_lock_timeout(caller):
                own = MemoryTool.for_store(caller, "caller-own")
                assert own.execute({"command": "create", "path": "/memories/before.md", "file_text": "1"}).startswith("File")
                t0 = time.perf_counter()
                text = MemoryTool.for_store(caller, STORE).execute(arguments)
                waited = time.perf_counter() - t0
                assert text == ERROR + storage_messages.store_contended(path), text
                assert "retry" in text
                assert waited < 10
                # a read does not wait for the writer
                t0 = time.perf_counter()
                seen = MemoryTool.for_store(caller, STORE).execute({"command": "view", "path": "/memories/a.md"})
                assert seen.startswith("Here's the content") and "alpha" in seen
                assert time.perf_counter() - t0 < 0.5
                # the caller's transaction goes on and commits
                assert own.execute({"command": "create", "path": "/memories/after.md", "file_text": "2"}).startswith("File")
        holder_tx.commit()
    with committed_view(engine) as c:
        assert store_files(c, "shared:caller-own") == {"/memories/before.md": "1", "/memories/after.md": "2"}
        files = store_files(c, KEY)
        assert files["/memories/a.md"] == "ALPHA\nbeta\n"
        assert set(files) == set(SEED)
        actions = c.execute(
            sa.select(audit_events.c.action_name, audit_events.c.file_path).where(
                audit_events.c.store_key == KEY, audit_events.c.action_name != "create"
            )
        ).all()
        assert actions == [("str_replace", "/memories/a.md")]  # only the holder's edit


def test_the_writer_that_waited_succeeds_when_the_lock_is_released_in_time(server: Engine) -> None:
    engine = server
    seed(engine, SEED)
    with engine.connect() as holder, engine.connect() as caller:
        holder_tx = holder.begin()
        assert not MemoryTool.for_store(holder, STORE).execute(
            {"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "H"}
        ).startswith(ERROR)
        releaser = threading.Timer(0.3, holder_tx.commit)
        releaser.start()
        try:
            with caller.begin():
                text = MemoryTool.for_store(caller, STORE).execute(
                    {"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "C"}
                )
        finally:
            releaser.join()
        assert not text.startswith(ERROR), text
    with committed_view(engine) as c:
        assert store_files(c, KEY)["/memories/a.md"] == "C\nH\nalpha\nbeta\n"  # no lost update


# ------------------------------------------------------------------ profile consolidation faults

profile = pytest.importorskip("dbmemory.profile", reason="the user profile (issue 3) is not built yet")
from _profile_fakes import FakeModel, body_with, fixed_now, user_settings_table  # noqa: E402
from dbmemory.llm import Completion, Usage  # noqa: E402
from dbmemory.profile import (  # noqa: E402
    SECTIONS,
    UserMemoryConfig,
    UserMemoryPostprocessor,
    load_user_memory,
    parse_profile,
    profile_store_key,
    read_profile,
    write_profile,
)
from dbmemory.profile import consolidate as consolidate_module  # noqa: E402

USER = "u-faults"
MODEL = "gpt-4o-mini"
CONFIG = UserMemoryConfig()
OLD = body_with({"Identity": ["Name: Ada"], "Work Context": ["migrates reports"]})
NEW = body_with({"Identity": ["Name: Ada"], "Work Context": ["moved to the BI team"]})


class SimulatedKill(BaseException):
    """The process dies here (not an ``Exception``: nothing may catch it and carry on)."""


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    with user_settings_table(engine):
        with engine.begin() as c:
            write_profile(c, USER, "---\nuser_id: u-faults\n---\n" + OLD, expected_version=0)
        yield engine


def stored(engine: Engine) -> tuple[str | None, int | None, int]:
    """(profile text, version, audit events of the profile store)."""
    with committed_view(engine) as c:
        record = read_profile(c, USER)
        events = c.execute(
            sa.select(sa.func.count()).select_from(audit_events).where(
                audit_events.c.store_key == profile_store_key(USER, CONFIG.root_folder)
            )
        ).scalar_one()
    return (None, None, events) if record is None else (record.text, record.version, events)


def consolidate(engine: Engine, fake: Any, **kwargs: Any) -> Any:
    with engine.begin() as c:
        state = load_user_memory(c, USER, config=CONFIG, model=MODEL)
    post = UserMemoryPostprocessor(
        kwargs.pop("target", engine), CONFIG, MODEL, USER, state, complete=fake,
        now=fixed_now(), timeout=kwargs.pop("timeout", 2.0), **kwargs
    )
    return post.run("I moved to the BI team.", "Congratulations!")


def assert_whole_profile(text: str | None) -> None:
    assert text is not None and "\x00" not in text
    parsed = parse_profile(text)
    assert all(f"## {name}" in text for name in SECTIONS), text[:500]
    assert parsed.user_id == USER


@pytest.mark.parametrize(
    "error",
    [RuntimeError("provider exploded"), ConnectionError("reset by peer"), TimeoutError("timed out"),
     MemoryError(), ValueError("bad json from provider")],
    ids=["runtime", "connection", "timeout", "memory", "value"],
)
@pytest.mark.parametrize("purpose", ["gate", "rewrite", "scrub"])
def test_a_model_that_raises_keeps_the_old_profile(db: Engine, error: BaseException, purpose: str) -> None:
    before = stored(db)
    fake = FakeModel(**{"rewrite": NEW, purpose: error})
    result = consolidate(db, fake)
    if purpose == "gate":  # a failing gate fails open: the rewrite still runs and is written
        assert result.outcome == "updated", result
        assert_whole_profile(stored(db)[0])
        assert stored(db)[1:] == (before[1] + 1, before[2] + 1)
    else:
        assert result.outcome in ("rejected", "scrub_veto"), result
        assert stored(db) == before


def test_a_model_that_hangs_until_its_timeout_holds_no_transaction(db: Engine, backend_name: str) -> None:
    """While the model call hangs, another connection can lock the profile row at once."""
    if backend_name == "sqlite-memory":
        pytest.skip("one shared connection")
    before = stored(db)
    probes: list[float] = []

    def hanging(messages: list[dict[str, Any]]) -> str:
        t0 = time.perf_counter()
        with db.connect() as other, other.begin():
            lock = sa.text(
                "SELECT file_id FROM dbm_files WHERE file_path = '/memories/memory.md'"
                + ("" if db.dialect.name == "sqlite" else " FOR UPDATE NOWAIT")
            )
            if db.dialect.name == "sqlite":
                other.exec_driver_sql("SELECT 1")  # BEGIN IMMEDIATE already took the write lock
            else:
                other.execute(lock).all()
        probes.append(time.perf_counter() - t0)
        time.sleep(0.2)
        raise TimeoutError("model timed out")

    result = consolidate(db, FakeModel(rewrite=hanging), timeout=0.1)
    assert result.outcome == "rejected" and result.reason == "model_error", result
    assert probes and probes[0] < 5
    assert stored(db) == before


GARBAGE = [
    "", " ", "\x00\x00\x00", "NOOP NOOP and more", "🍕" * 20_000, "<|endoftext|>", '{"profile": 1}',
    "```markdown\n```", "## Identity\n- x\n", "# User Memory\n" + "## Identity\n" * 500,
    body_with({"Identity": ["x"]}).replace("## Recent Topics", "## Something Else"),
    "I cannot help with that.", "\ud800 broken", "a" * 1_000_000,
    Completion(text=NEW, finish_reason="length", usage=Usage(1, 1)),
    Completion(text="", finish_reason="content_filter", usage=Usage(1, 0)),
]


@pytest.mark.parametrize("answer", GARBAGE, ids=[f"garbage-{i}" for i in range(len(GARBAGE))])
@pytest.mark.parametrize("purpose", ["rewrite", "scrub", "condense"])
def test_garbage_from_the_model_is_never_stored(db: Engine, answer: Any, purpose: str) -> None:
    before = stored(db)
    script: dict[str, Any] = {"rewrite": NEW, "scrub": "CLEAN", purpose: answer}
    result = consolidate(db, FakeModel(**script))
    text, version, events = stored(db)
    if (text, version, events) != before:
        assert result.outcome == "updated", result
        assert_whole_profile(text)
        assert (version, events) == (before[1] + 1, before[2] + 1)
        assert "Something Else" not in text and "endoftext" not in text
    else:
        assert result.outcome in ("rejected", "scrub_veto", "noop", "unchanged"), result


@pytest.mark.parametrize("when", ["before-write", "after-write-before-commit"])
def test_a_kill_between_consolidation_and_commit_leaves_the_old_profile_then_recovers(
    db: Engine, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    before = stored(db)
    real = consolidate_module.write_profile

    def dying_write(conn: Connection, *args: Any, **kwargs: Any) -> Any:
        if when == "before-write":
            raise SimulatedKill()
        real(conn, *args, **kwargs)
        raise SimulatedKill()  # the write ran; the process dies before the commit

    monkeypatch.setattr(consolidate_module, "write_profile", dying_write)
    with pytest.raises(SimulatedKill):
        consolidate(db, FakeModel(rewrite=NEW))
    assert stored(db) == before  # nothing half-written, no audit event
    monkeypatch.setattr(consolidate_module, "write_profile", real)
    result = consolidate(db, FakeModel(rewrite=NEW))  # the next turn, as after a restart
    assert result.outcome == "updated", result
    text, version, events = stored(db)
    assert_whole_profile(text)
    assert "moved to the BI team" in text
    assert (version, events) == (before[1] + 1, before[2] + 1)


def test_a_kill_during_the_write_transaction_of_a_connection_factory_rolls_back(db: Engine) -> None:
    """With a caller's connection factory, a kill after the write statements and before the
    commit leaves the old profile (the factory's transaction never commits)."""
    before = stored(db)
    calls = {"n": 0}

    @contextmanager
    def factory() -> Iterator[Connection]:
        with db.begin() as conn:
            yield conn
            calls["n"] += 1
            if conn.in_transaction() and calls["n"] >= 2:  # the 2nd transaction is the write
                raise SimulatedKill()

    with pytest.raises(SimulatedKill):
        consolidate(db, FakeModel(rewrite=NEW), target=factory)
    assert stored(db) == before
