"""Every connection mode and failure leaves the caller's transaction honest (issue 8, section 4).

* AUTOCOMMIT connections: each command is atomic and durable on its own (a second connection
  sees it at once), a failing command changes nothing, and the connection keeps working, still
  in AUTOCOMMIT, holding no transaction (no SQLite write lock).
* The database rolls back the caller's whole transaction on its own (SQLite disk full and
  interrupt, MariaDB packet over ``max_allowed_packet`` and deadlock victim): the tool says the
  whole transaction was rolled back, and the caller's later statements cannot commit alone.
* Lock waits are bounded by the engine's lock timeout on every backend and end in a retry text;
  a SQLite read blocked by another process's write lock is reported as busy.
* Connection failures name their cause and remedy; ``--debug`` shows the driver's error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url

from dbmemory import disable_for_agent, enable_for_agent
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.dialect.expiry import is_autocommit
from dbmemory.db.dialect.setup import configure_engine
from dbmemory.db.dialect.txn import driver_in_transaction
from dbmemory.db.engine import create_engine
from dbmemory.store import files
from dbmemory.store.expiry import expire_files
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import clear_store_files
from dbmemory.tool import MemoryTool, storage_messages
from helpers import ERROR, assert_no_leak, committed_view, statement_is, store_files

STORE = "modes"
KEY = f"shared:{STORE}"


def autocommit(engine: Engine) -> Connection:
    return engine.connect().execution_options(isolation_level="AUTOCOMMIT")


def durable(engine: Engine, store_key: str = KEY) -> dict[str, str]:
    """What a second connection sees as committed, right now."""
    with committed_view(engine) as c:
        return store_files(c, store_key)


def assert_idle(conn: Connection) -> None:
    """The connection is in AUTOCOMMIT and the database holds no transaction for it."""
    assert is_autocommit(conn)
    assert driver_in_transaction(conn) is not True
    assert not conn.invalidated


# ----------------------------------------------------------------------------- AUTOCOMMIT

COMMANDS = [
    ({"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"}, {"/memories/a.md": "alpha\n"}),
    ({"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "beta"}, {"/memories/a.md": "beta\n"}),
    ({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "top"}, {"/memories/a.md": "top\nbeta\n"}),
    ({"command": "create", "path": "/memories/d/b.md", "file_text": "b"}, {"/memories/a.md": "top\nbeta\n", "/memories/d/b.md": "b"}),
    ({"command": "view", "path": "/memories/a.md"}, {"/memories/a.md": "top\nbeta\n", "/memories/d/b.md": "b"}),
    ({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}, {"/memories/a.md": "top\nbeta\n", "/memories/e/b.md": "b"}),
    ({"command": "delete", "path": "/memories/e"}, {"/memories/a.md": "top\nbeta\n"}),
    ({"command": "delete", "path": "/memories/a.md"}, {}),
]


def test_every_tool_command_on_an_autocommit_connection_is_durable_at_once(engine: Engine) -> None:
    second_view = not is_memory_sqlite(engine)
    with autocommit(engine) as conn:
        tool = MemoryTool.for_store(conn, STORE)
        for arguments, expected in COMMANDS:
            text = tool.execute(arguments)
            assert not text.startswith(ERROR), (arguments, text)
            assert_idle(conn)
            if second_view:
                assert durable(engine) == expected, arguments
        assert tool.execute({"command": "view", "path": "/memories"}).startswith("Here're")
    with committed_view(engine) as c:
        assert store_files(c, KEY) == {}
        actions = [r[0] for r in c.exec_driver_sql(
            "SELECT action_name FROM dbm_audit_events WHERE store_key = 'shared:modes' ORDER BY event_id"
        )]
    assert actions == ["create", "str_replace", "insert", "create", "rename", "delete", "delete"]


@contextmanager
def failing_statement(engine: Engine, prefix: str) -> Iterator[list[str]]:
    """Make the next statement starting with ``prefix`` fail in the database itself (it is sent
    against a table that does not exist), after the earlier statements of the command ran."""
    fired: list[str] = []

    def rewrite(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> Any:
        if not fired and statement_is(statement, prefix):
            fired.append(statement)
            return statement.replace("dbm_", "dbm_missing_", 1), parameters
        return statement, parameters

    sa.event.listen(engine, "before_cursor_execute", rewrite, retval=True)
    try:
        yield fired
    finally:
        sa.event.remove(engine, "before_cursor_execute", rewrite)


FAILING = [
    pytest.param({"command": "create", "path": "/memories/new.md", "file_text": "n"}, "INSERT INTO dbm_audit_events", id="create-fails-at-audit"),
    pytest.param({"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "X"}, "INSERT INTO dbm_audit_events", id="edit-fails-at-audit"),
    pytest.param({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}, "INSERT INTO dbm_audit_events", id="rename-fails-at-audit"),
    pytest.param({"command": "delete", "path": "/memories/d"}, "INSERT INTO dbm_audit_events", id="delete-fails-at-audit"),
]


@pytest.mark.parametrize(("arguments", "prefix"), FAILING)
def test_a_failing_command_on_an_autocommit_connection_changes_nothing(
    engine: Engine, arguments: dict[str, Any], prefix: str
) -> None:
    with autocommit(engine) as conn:
        tool = MemoryTool.for_store(conn, STORE)
        for path, text in (("/memories/a.md", "alpha\n"), ("/memories/d/1.md", "1"), ("/memories/d/2.md", "2")):
            assert tool.execute({"command": "create", "path": path, "file_text": text}).startswith("File created")
        before = store_files(conn, KEY)
        with failing_statement(engine, prefix) as fired:
            text = tool.execute(arguments)
        assert fired, prefix
        assert text.startswith(ERROR), text
        assert_no_leak(text)
        assert_idle(conn)
        assert store_files(conn, KEY) == before  # the file change was undone with the audit row
        # the connection keeps working, and the next command is durable on its own
        assert tool.execute({"command": "create", "path": "/memories/after.md", "file_text": "z"}).startswith("File created")
        assert_idle(conn)
    assert durable(engine) == {**before, "/memories/after.md": "z"}


def test_admin_writes_and_expiry_on_an_autocommit_connection_commit_each_call(engine: Engine) -> None:
    second_view = not is_memory_sqlite(engine)
    with autocommit(engine) as conn:
        enable_for_agent(conn, "AC1")
        assert_idle(conn)
        tool = MemoryTool(conn, "AC1")
        assert tool.execute({"command": "create", "path": "/memories/x.md", "file_text": "x"}).startswith("File")
        store_id = find_store_id(conn, "agent:AC1")
        assert store_id is not None
        files.put_file(conn, store_id, "/memories/y.md", "y")
        assert_idle(conn)
        if second_view:
            assert set(durable(engine, "agent:AC1")) == {"/memories/x.md", "/memories/y.md"}
        future = utcnow() + __import__("datetime").timedelta(days=10)
        assert expire_files(conn, days=1, now=future) == 2
        assert_idle(conn)
        if second_view:
            assert durable(engine, "agent:AC1") == {}
        files.put_file(conn, store_id, "/memories/z.md", "z")
        assert clear_store_files(conn, store_id) == 1
        assert disable_for_agent(conn, "AC1", drop_store=True) == 1
        assert_idle(conn)
    with committed_view(engine) as c:
        assert find_store_id(c, "agent:AC1") is None
        enabled = c.exec_driver_sql("SELECT memory_enabled FROM dbm_agents WHERE agent_code = 'AC1'").scalar_one()
        assert not enabled


def test_the_caller_can_still_group_writes_by_hand_on_an_autocommit_connection(engine: Engine, backend_name: str) -> None:
    """A caller that opens a real transaction itself on an AUTOCOMMIT connection keeps it: the
    tool's write joins it (savepoint) and is undone by the caller's rollback."""
    if backend_name == "oracle":
        pytest.skip("Oracle has no BEGIN statement")
    begin = {"sqlite": "BEGIN IMMEDIATE", "mysql": "START TRANSACTION"}.get(engine.dialect.name, "BEGIN")
    with autocommit(engine) as conn:
        conn.exec_driver_sql(begin)
        text = MemoryTool.for_store(conn, STORE).execute({"command": "create", "path": "/memories/h.md", "file_text": "h"})
        assert text.startswith("File created"), text
        conn.exec_driver_sql("ROLLBACK")
        assert store_files(conn, KEY) == {}
        assert_idle(conn)


def test_a_transaction_the_server_ended_unseen_is_not_joined_and_no_saved_edit_is_called_lost(
    engine: Engine, backend_name: str
) -> None:
    """MariaDB/MySQL report "in a transaction" in every reply's status flags, and the flag can
    stay set after the server ended the transaction: here a caller's ``START TRANSACTION`` by
    hand, then a DDL statement that fails after its implicit commit (Galera showed the same
    after a replayed commit). Trusting the flag, the next command joined a transaction that did
    not exist: a "savepoint" over autocommitted statements, then ``RELEASE SAVEPOINT`` failed
    with 1305 and the tool said "nothing was saved" although the file was committed. Now the
    server is asked (``@@in_transaction``), the command runs in its own transaction, and the
    answer is the truth."""
    if engine.dialect.name != "mysql" or not getattr(engine.dialect, "is_mariadb", False):
        pytest.skip("MariaDB's stale in-transaction status flag")
    with autocommit(engine) as conn:
        tool = MemoryTool.for_store(conn, STORE)
        assert tool.execute({"command": "create", "path": "/memories/s.md", "file_text": "s\n"}).startswith("File created")
        conn.exec_driver_sql("START TRANSACTION")
        with pytest.raises(sa.exc.DBAPIError):  # implicit commit, then "table exists"
            conn.exec_driver_sql("CREATE TABLE dbm_stores (a INT)")
        assert driver_in_transaction(conn) is True  # the stale flag
        for command in (
            {"command": "insert", "path": "/memories/s.md", "insert_line": 1, "insert_text": "edited"},
            {"command": "create", "path": "/memories/t.md", "file_text": "t"},
        ):
            answer = tool.execute(command)
            assert not answer.startswith(ERROR), answer
        assert durable(engine) == {"/memories/s.md": "s\nedited\n", "/memories/t.md": "t"}
        assert not conn.invalidated


def test_a_write_whose_savepoint_vanished_unexplained_says_it_may_have_been_saved(
    engine: Engine, backend_name: str
) -> None:
    """The caller's by-hand transaction ends on the server in the middle of a tool write, with
    no error saying it was rolled back (here: a COMMIT slipped in just before the write's
    ``RELEASE SAVEPOINT``, which then fails with 1305). The write's statements were saved, so
    the tool must not say "nothing was saved": it says the database may have saved the change
    and to view the file before retrying; the connection is invalidated (nothing may join)."""
    if engine.dialect.name != "mysql":
        pytest.skip("MySQL/MariaDB error 1305 (savepoint does not exist)")
    with autocommit(engine) as conn:
        tool = MemoryTool.for_store(conn, STORE)
        conn.exec_driver_sql("START TRANSACTION")

        inserted: list[bool] = []

        def end_it(c: Any, cursor: Any, statement: str, *args: Any) -> None:
            if "INSERT INTO dbm_files" in statement:
                inserted.append(True)
            elif statement.startswith("RELEASE SAVEPOINT") and inserted:
                cursor.execute("COMMIT")  # the file's row is in: the server ends the transaction

        sa.event.listen(engine, "before_cursor_execute", end_it)
        try:
            answer = tool.execute({"command": "create", "path": "/memories/u.md", "file_text": "u"})
        finally:
            sa.event.remove(engine, "before_cursor_execute", end_it)
        assert answer.startswith(ERROR), answer
        assert "may have saved this change" in answer and "view the file before retrying" in answer, answer
        assert "NOT saved" not in answer and "nothing was" not in answer, answer
        assert conn.invalidated
    assert durable(engine) == {"/memories/u.md": "u"}  # it was saved: the answer did not deny it


def test_the_sqlite_begin_hook_opens_no_transaction_on_an_autocommit_connection(engine: Engine, backend_name: str) -> None:
    if not backend_name.startswith("sqlite"):
        pytest.skip("SQLite's BEGIN IMMEDIATE hook")
    with autocommit(engine) as conn:
        conn.exec_driver_sql("SELECT 1").all()
        assert conn.connection.driver_connection.in_transaction is False
        conn.commit()
        with conn.begin():  # SQLAlchemy's logical transaction: still no database transaction
            conn.exec_driver_sql("SELECT 1").all()
            assert conn.connection.driver_connection.in_transaction is False
    with engine.connect() as conn:  # the same pooled connection, back in normal mode
        conn.exec_driver_sql("SELECT 1").all()
        assert conn.connection.driver_connection.in_transaction is True
        conn.rollback()


# ------------------------------------------------- the database rolls back the whole transaction

ROLLED_BACK = "rolled back the whole transaction"


def caller_with_earlier_write(conn: Connection) -> MemoryTool:
    """The caller's own write, made first in its transaction."""
    mine = MemoryTool.for_store(conn, "caller-own")
    assert mine.execute({"command": "create", "path": "/memories/earlier.md", "file_text": "e"}).startswith("File")
    return mine


def assert_honest_after_whole_rollback(engine: Engine, conn: Connection, text: str, mine: MemoryTool) -> None:
    """The tool said the whole transaction was rolled back, and nothing of it can commit."""
    assert text.startswith(ERROR) and ROLLED_BACK in text, text
    assert "nothing was changed" not in text
    assert_no_leak(text)
    assert conn.invalidated
    later = mine.execute({"command": "create", "path": "/memories/later.md", "file_text": "l"})
    assert later.startswith(ERROR) and "rolled back" in later, later  # a later write cannot go on alone
    with pytest.raises(sa.exc.PendingRollbackError):
        conn.commit()
    conn.rollback()
    assert durable(engine, "shared:caller-own") == {}  # neither the earlier nor a later write
    # the connection is usable again after the rollback
    assert mine.execute({"command": "create", "path": "/memories/again.md", "file_text": "a"}).startswith("File")
    conn.commit()
    assert durable(engine, "shared:caller-own") == {"/memories/again.md": "a"}


@pytest.fixture
def sqlite_file(engine: Engine, backend_name: str) -> Engine:
    if backend_name != "sqlite-file":
        pytest.skip("a SQLite file database (in-memory SQLite dies with its one connection)")
    return engine


def _allow_big_files(engine: Engine, max_file_chars: int) -> None:
    """Give the test store a file cap of ``max_file_chars`` (caps belong to the store row)."""
    from dbmemory.store.agents import set_store_caps
    from dbmemory.store.resolve import shared_store

    with engine.begin() as c:
        set_store_caps(c, shared_store(STORE), max_file_chars=max_file_chars)


def test_sqlite_disk_full_rolls_back_the_whole_transaction_and_says_so(sqlite_file: Engine) -> None:
    engine = sqlite_file
    _allow_big_files(engine, 1_000_000)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.exec_driver_sql("VACUUM")  # no free pages left by earlier tests: the file must grow
    with engine.connect() as conn:
        conn.begin()
        mine = caller_with_earlier_write(conn)
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
        conn.exec_driver_sql(f"PRAGMA max_page_count = {int(pages) + 2}")
        big = MemoryTool.for_store(conn, STORE)
        text = big.execute({"command": "create", "path": "/memories/big.md", "file_text": "x" * 200_000})
        assert "disk is full" in text, text
        assert_honest_after_whole_rollback(engine, conn, text, mine)


def test_sqlite_interrupt_during_a_write_rolls_back_the_whole_transaction_and_says_so(sqlite_file: Engine) -> None:
    engine = sqlite_file
    with engine.connect() as conn:
        conn.begin()
        mine = caller_with_earlier_write(conn)
        driver = conn.connection.driver_connection
        fired: list[str] = []

        def interrupt_the_insert(c: Any, cursor: Any, statement: str, *args: Any) -> None:
            if not fired and statement.startswith("INSERT INTO dbm_files"):
                fired.append(statement)
                # a progress handler that asks to stop: SQLite aborts the statement with
                # SQLITE_INTERRUPT, exactly as sqlite3_interrupt() from another thread does
                driver.set_progress_handler(lambda: 1, 1)

        sa.event.listen(engine, "before_cursor_execute", interrupt_the_insert)
        try:
            text = MemoryTool.for_store(conn, STORE).execute({"command": "create", "path": "/memories/i.md", "file_text": "i"})
        finally:
            sa.event.remove(engine, "before_cursor_execute", interrupt_the_insert)
        assert fired
        assert "interrupted" in text, text
        assert_honest_after_whole_rollback(engine, conn, text, mine)


def test_sqlite_interrupt_from_another_thread_during_a_long_write(sqlite_file: Engine) -> None:
    """``sqlite3.Connection.interrupt()`` from a timer thread while a long write runs."""
    engine = sqlite_file
    _allow_big_files(engine, 1_000_000)
    with engine.connect() as conn:
        conn.begin()
        mine = caller_with_earlier_write(conn)
        driver = conn.connection.driver_connection
        started = threading.Event()

        def slow(c: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.startswith("INSERT INTO dbm_files"):
                # slow the statement down (each VM step sleeps) so the timer thread lands in it
                driver.set_progress_handler(lambda: (started.set(), time.sleep(0.01))[1] or 0, 1)

        timer = threading.Thread(target=lambda: (started.wait(5), time.sleep(0.02), driver.interrupt()))
        timer.start()
        sa.event.listen(engine, "before_cursor_execute", slow)
        try:
            text = MemoryTool.for_store(conn, STORE).execute(
                {"command": "create", "path": "/memories/long.md", "file_text": "y" * 500_000}
            )
        finally:
            sa.event.remove(engine, "before_cursor_execute", slow)
            timer.join(10)
        assert "interrupted" in text, text
        assert_honest_after_whole_rollback(engine, conn, text, mine)


@pytest.fixture
def mariadb(engine: Engine, backend_name: str) -> Engine:
    if backend_name != "mysql":
        pytest.skip("MariaDB/MySQL behaviour")
    return engine


def test_mariadb_packet_over_max_allowed_packet_rolls_back_the_whole_transaction_and_says_so(mariadb: Engine) -> None:
    engine = mariadb
    with engine.connect() as c:
        packet = int(c.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
    text = "\U0001F355" * (packet // 4 + 1)  # 4 bytes each in utf8mb4: just over one packet
    _allow_big_files(engine, len(text))
    with engine.connect() as conn:
        conn.begin()
        mine = caller_with_earlier_write(conn)
        big = MemoryTool.for_store(conn, STORE)
        answer = big.execute({"command": "create", "path": "/memories/big.md", "file_text": text})
        assert "max_allowed_packet" in answer, answer[:300]
        assert_honest_after_whole_rollback(engine, conn, answer, mine)


@pytest.fixture
def server(engine: Engine, backend_name: str) -> Engine:
    if backend_name not in ("postgres", "mysql"):
        pytest.skip("a server backend (row locks)")
    return engine


def seed(engine: Engine, store: str, paths: list[str]) -> None:
    with engine.begin() as c:
        tool = MemoryTool.for_store(c, store)
        for path in paths:
            assert tool.execute({"command": "create", "path": path, "file_text": "s\n"}).startswith("File")


def test_a_deadlock_victim_never_commits_half_its_transaction(server: Engine) -> None:
    """Two callers lock two stores in opposite orders. The database breaks the deadlock: the
    victim is told the truth (MariaDB: its whole transaction is gone and nothing of it commits;
    PostgreSQL: only the command failed and its earlier write commits), the other commits."""
    engine = server
    seed(engine, "s1", ["/memories/f.md"])
    seed(engine, "s2", ["/memories/f.md"])
    edit = {"command": "insert", "path": "/memories/f.md", "insert_line": 0}
    results: dict[str, str] = {}
    outcome: dict[str, bool] = {}

    def finish(name: str, conn: Connection) -> None:
        if conn.invalidated:
            conn.rollback()
            outcome[name] = False
        else:
            conn.commit()
            outcome[name] = True

    with engine.connect() as a, engine.connect() as b:
        a.begin()
        b.begin()
        own_a = MemoryTool.for_store(a, "own-a")
        own_b = MemoryTool.for_store(b, "own-b")
        assert own_a.execute({"command": "create", "path": "/memories/x.md", "file_text": "a"}).startswith("File")
        assert own_b.execute({"command": "create", "path": "/memories/x.md", "file_text": "b"}).startswith("File")
        assert not MemoryTool.for_store(a, "s1").execute({**edit, "insert_text": "A"}).startswith(ERROR)
        assert not MemoryTool.for_store(b, "s2").execute({**edit, "insert_text": "B"}).startswith(ERROR)

        def b_side() -> None:
            results["b"] = MemoryTool.for_store(b, "s1").execute({**edit, "insert_text": "B"})
            finish("b", b)

        thread = threading.Thread(target=b_side)
        thread.start()
        time.sleep(0.3)  # b now waits for s1
        results["a"] = MemoryTool.for_store(a, "s2").execute({**edit, "insert_text": "A"})
        finish("a", a)
        thread.join(30)
        assert not thread.is_alive()
    errors = [n for n in ("a", "b") if results[n].startswith(ERROR)]
    assert len(errors) == 1, results  # exactly one victim
    victim = errors[0]
    text = results[victim]
    assert_no_leak(text)
    committed = durable(engine, f"shared:own-{victim}")
    assert "changed by another writer" not in text, text  # a deadlock, not a change
    if ROLLED_BACK in text:
        assert engine.dialect.name in ("mysql", "mariadb")
        assert "deadlock victim" in text, text
        assert outcome[victim] is False and committed == {}
    else:
        assert text == ERROR + storage_messages.store_contended("/memories/f.md"), text
        assert text == (
            "Error: Another writer was writing this memory store at the same time, so the command "
            "on /memories/f.md could not complete; nothing was written. View it again and retry "
            "the command."
        )
        assert outcome[victim] is True and committed == {"/memories/x.md": victim}
    winner = "b" if victim == "a" else "a"
    assert durable(engine, f"shared:own-{winner}") == {"/memories/x.md": winner}


# ------------------------------------------------------------------------ bounded lock waits


def test_dbmemory_engines_bound_lock_waits_with_the_setting(engine: Engine, backend_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if backend_name in ("sqlite-memory", "oracle"):
        pytest.skip("a file or server database (Oracle: FOR UPDATE WAIT n, compile-checked)")

    def applied(eng: Engine) -> Any:
        with eng.connect() as c:
            name = eng.dialect.name
            if name == "postgresql":
                return c.exec_driver_sql("SHOW lock_timeout").scalar_one()
            if name in ("mysql", "mariadb"):
                return int(c.exec_driver_sql("SELECT @@session.innodb_lock_wait_timeout").scalar_one())
            return int(c.exec_driver_sql("PRAGMA busy_timeout").scalar_one())

    expected_default = {"postgresql": "5s", "sqlite": 5000}.get(engine.dialect.name, 5)
    monkeypatch.delenv("DBMEMORY_LOCK_TIMEOUT_MS", raising=False)
    for eng_args, expected in (({}, expected_default), ({"lock_timeout_ms": 1200}, {"postgresql": "1200ms", "sqlite": 1200}.get(engine.dialect.name, 2))):
        eng = create_engine(engine.url, **eng_args)
        try:
            assert applied(eng) == expected
        finally:
            eng.dispose()
    monkeypatch.setenv("DBMEMORY_LOCK_TIMEOUT_MS", "2500")
    eng = create_engine(engine.url)
    try:
        assert applied(eng) == {"postgresql": "2500ms", "sqlite": 2500}.get(engine.dialect.name, 3)
        assert eng.pool._pre_ping is (engine.dialect.name != "sqlite")  # type: ignore[attr-defined]
    finally:
        eng.dispose()
    # the caller's own engine, configured by dbmemory
    own = sa.create_engine(engine.url)
    configure_engine(own, lock_timeout_ms=2500)
    try:
        assert applied(own) == {"postgresql": "2500ms", "sqlite": 2500}.get(engine.dialect.name, 3)
    finally:
        own.dispose()


SHORT_MS = 800
SLACK_S = 3.0


@pytest.fixture
def short_engine(engine: Engine, backend_name: str) -> Iterator[Engine]:
    """A second dbmemory engine on the same database with an 800 ms lock timeout."""
    if backend_name in ("sqlite-memory", "oracle"):
        pytest.skip("needs a second connection to the same database")
    eng = create_engine(engine.url, lock_timeout_ms=SHORT_MS)
    yield eng
    eng.dispose()


LOCK_CASES = [
    pytest.param({"command": "str_replace", "path": "/memories/a.md", "old_str": "s", "new_str": "t"}, id="str_replace"),
    pytest.param({"command": "create", "path": "/memories/b.md", "file_text": "b"}, id="create"),
    pytest.param({"command": "delete", "path": "/memories/a.md"}, id="delete"),
]


@pytest.mark.parametrize("arguments", LOCK_CASES)
def test_a_write_waiting_on_a_held_store_lock_gives_up_after_the_timeout_with_a_retry_text(
    server: Engine, short_engine: Engine, arguments: dict[str, Any]
) -> None:
    engine = server
    seed(engine, STORE, ["/memories/a.md"])
    with engine.connect() as holder, short_engine.connect() as caller:
        holder.begin()
        store_id = find_store_id(holder, KEY)
        holder.execute(sa.text("SELECT store_id FROM dbm_stores WHERE store_id = :s FOR UPDATE"), {"s": store_id}).all()
        with caller.begin():
            own = MemoryTool.for_store(caller, "caller-own")
            assert own.execute({"command": "create", "path": "/memories/before.md", "file_text": "1"}).startswith("File")
            t0 = time.perf_counter()
            text = MemoryTool.for_store(caller, STORE).execute(arguments)
            waited = time.perf_counter() - t0
            assert text == ERROR + storage_messages.store_contended(arguments["path"]), text
            assert "retry" in text.lower()
            assert SHORT_MS / 1000 * 0.8 <= waited < SHORT_MS / 1000 + SLACK_S, waited
            assert own.execute({"command": "create", "path": "/memories/after.md", "file_text": "2"}).startswith("File")
        holder.rollback()
    assert durable(engine, "shared:caller-own") == {"/memories/before.md": "1", "/memories/after.md": "2"}
    assert durable(engine) == {"/memories/a.md": "s\n"}


HOLD_WRITE_LOCK = textwrap.dedent(
    """
    import sqlite3, sys, time
    c = sqlite3.connect(sys.argv[1], isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    c.execute("ROLLBACK")
    """
)


def test_a_sqlite_read_blocked_by_another_process_write_lock_is_reported_as_busy(
    sqlite_file: Engine, short_engine: Engine
) -> None:
    engine = sqlite_file
    seed(engine, STORE, ["/memories/a.md"])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(engine.url.database), "6"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with short_engine.connect() as conn:
            for arguments in ({"command": "view", "path": "/memories/a.md"}, {"command": "view", "path": "/memories"},
                              {"command": "create", "path": "/memories/n.md", "file_text": "n"}):
                t0 = time.perf_counter()
                text = MemoryTool.for_store(conn, STORE).execute(arguments)
                waited = time.perf_counter() - t0
                assert text == ERROR + storage_messages.database_busy(), text
                assert "changed by another writer" not in text
                assert waited < SHORT_MS / 1000 + SLACK_S, waited
                conn.rollback()
    finally:
        holder.kill()
        holder.wait(10)
    with short_engine.connect() as conn:  # the lock is gone: the same engine works again
        assert MemoryTool.for_store(conn, STORE).execute({"command": "view", "path": "/memories/a.md"}).startswith("Here's")
        conn.commit()


# ----------------------------------------------------------------- connection failures, --debug


def cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from dbmemory.cli import app

    return CliRunner().invoke(app, list(args), prog_name="dbmemory", env={"DBMEMORY_URL": None})


def server_url(env_var: str) -> sa.engine.URL:
    raw = os.environ.get(env_var)
    if not raw:
        pytest.skip(f"set {env_var}")
    from dbmemory.db.engine import normalize_url

    return normalize_url(raw)


def connect_cases() -> list[Any]:
    cases: list[Any] = [
        pytest.param("sqlite", lambda tmp: "sqlite:////nonexistent/dir/x.db", "folder exists", id="sqlite-missing-folder"),
        pytest.param("sqlite", "read-only", "read-only", id="sqlite-read-only-file"),
        pytest.param("DBMEMORY_TEST_POSTGRES_URL", {"database": "no_such_memory_db"}, "database named in the URL does not exist", id="postgres-unknown-database"),
        pytest.param("DBMEMORY_TEST_POSTGRES_URL", {"username": "no_such_memory_role"}, "user named in the URL does not exist", id="postgres-unknown-role"),
        pytest.param("DBMEMORY_TEST_POSTGRES_URL", {"port": 1}, "nothing accepts connections", id="postgres-refused-port"),
        pytest.param("DBMEMORY_TEST_MYSQL_URL", {"database": "no_such_memory_db"}, "database named in the URL does not exist", id="mysql-unknown-database"),
        pytest.param("DBMEMORY_TEST_MYSQL_URL", {"password": "wrong-Secret-9"}, "refused the user name or password", id="mysql-wrong-password"),
        pytest.param("DBMEMORY_TEST_MYSQL_URL", {"port": 1}, "nothing accepts connections", id="mysql-refused-port"),
    ]
    return cases


@pytest.mark.parametrize(("where", "change", "cause"), connect_cases())
def test_connection_failures_name_their_cause_and_remedy(where: str, change: Any, cause: str, tmp_path: Path) -> None:
    if where == "sqlite":
        if change == "read-only":
            path = tmp_path / "ro.db"
            made = create_engine(f"sqlite:///{path.as_posix()}")
            from dbmemory.db import migrate

            migrate.upgrade(made)
            made.dispose()
            url = f"sqlite:///file:{path.as_posix()}?mode=ro&uri=true"
        else:
            url = change(tmp_path)
    else:
        url = server_url(where).set(**change).render_as_string(hide_password=False)
    command = ("agent", "enable", "RO") if change == "read-only" else ("files", "ls", "--store", "global")
    result = cli(*command, "--url", url)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert cause in lines[0], lines[0]
    assert "retry later" not in lines[0]
    assert_no_leak(lines[0])
    assert "wrong-Secret-9" not in result.output and "@127.0.0.1" not in lines[0]
    if where != "sqlite":  # the target is named: host:port/database, never user or password
        target = make_url(url)
        assert f"(database: {target.host}:{target.port or ''}" in lines[0], lines[0]
        assert f"/{target.database})" in lines[0], lines[0]
    assert not any(code in lines[0] for code in ("1045", "1049", "2003", "08001", "28P01", "3D000"))
    debug = cli("--debug", *command, "--url", url)
    assert debug.exit_code == 1
    first, *rest = [line for line in debug.stderr.splitlines() if line.strip()]
    assert first == lines[0]
    assert "Traceback" in debug.stderr and len(rest) > 3
    assert "wrong-Secret-9" not in debug.stderr
    driver_names = ("sqlite3", "psycopg", "pymysql")
    assert any(name in debug.stderr for name in driver_names), debug.stderr[-500:]


def test_pre_ping_replaces_a_connection_the_server_dropped(server: Engine) -> None:
    """After the server drops a pooled connection (as a restart does), the next call works."""
    eng = create_engine(server.url, pool_size=1)
    try:
        with eng.connect() as c:
            c.exec_driver_sql("SELECT 1")
            if eng.dialect.name == "postgresql":
                pid = c.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            else:
                pid = c.exec_driver_sql("SELECT CONNECTION_ID()").scalar_one()
            c.rollback()
        with server.connect() as admin:
            if eng.dialect.name == "postgresql":
                admin.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)}, 5000)")
            else:
                admin.exec_driver_sql(f"KILL CONNECTION {int(pid)}")
            admin.commit()
        time.sleep(0.2)
        with eng.connect() as c:
            text = MemoryTool.for_store(c, STORE).execute({"command": "view", "path": "/memories"})
            assert text.startswith("Here're"), text
            c.commit()
    finally:
        eng.dispose()
