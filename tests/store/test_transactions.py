"""The transaction policy of every mutator (STYLE.md point 13; DESIGN.md section 6): writes join
the caller's transaction, nothing commits for the caller, a rollback removes them, a failure in
the middle leaves the caller's transaction usable, and every change writes its audit events in
the same transaction.

Each mutator runs three ways -- no outer transaction (SQLAlchemy autobegins, then the test
commits), inside an outer transaction that commits, inside one that rolls back -- and the result
is read through a second connection.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import (
    clear_store_files,
    delete_file,
    disable_for_agent,
    enable_for_agent,
    end_session,
    expire_files,
    put_file,
    resolve_store_id,
)
from dbmemory.db.schema import agents, audit_events, files, stores
from dbmemory.tool import MemoryTool
from helpers import (
    ERROR,
    assert_no_leak,
    committed_view,
    has_second_connection,
    store_files,
)

QA = "agent:QA"
SESSION = "session:S1"
SEED = {"/memories/a.md": "a\n", "/memories/d/b.md": "b", "/memories/d/c.md": "c"}


def snapshot(c: Connection) -> dict[str, Any]:
    """What the second connection sees: files per store, agent configurations, audit count."""
    by_store: dict[str, dict[str, str]] = {}
    for key in c.execute(sa.select(stores.c.store_key)).scalars():
        by_store[key] = store_files(c, key)
    agent_rows = {
        r.agent_code: (r.scope_name, bool(r.memory_enabled))
        for r in c.execute(sa.select(agents.c.agent_code, agents.c.scope_name, agents.c.memory_enabled))
    }
    return {"stores": by_store, "agents": agent_rows}


def audit_since(c: Connection, after_id: int) -> list[tuple[str, str | None]]:
    rows = c.execute(
        sa.select(audit_events.c.action_name, audit_events.c.file_path)
        .where(audit_events.c.event_id > after_id)
        .order_by(audit_events.c.event_id)
    )
    return sorted((r[0], r[1]) for r in rows)


def last_audit_id(c: Connection) -> int:
    return c.execute(sa.select(sa.func.coalesce(sa.func.max(audit_events.c.event_id), 0))).scalar_one()


@pytest.fixture
def seeded(engine: Engine) -> dict[str, Any]:
    """Committed: agents QA (agent scope) and SES (session scope); store agent:QA with three
    files (a.md touched 40 days ago) and session:S1 with one file."""
    with engine.begin() as c:
        enable_for_agent(c, "QA")
        enable_for_agent(c, "SES", scope="session")
        tool = MemoryTool(c, "QA")
        for path, text in SEED.items():
            assert not tool.execute({"command": "create", "path": path, "file_text": text}).startswith(ERROR)
        MemoryTool(c, "SES", session_id="S1").execute(
            {"command": "create", "path": "/memories/s.md", "file_text": "s"}
        )
        old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=40)
        c.execute(
            sa.update(files).where(files.c.file_path == "/memories/a.md").values(last_accessed_at=old)
        )
    with committed_view(engine) as c2:
        base = snapshot(c2)
        base_audit = last_audit_id(c2)
        store_id = resolve_store_id(c2, scope="agent", agent_code="QA")
    return {"base": base, "audit": base_audit, "store_id": store_id}


def _tool(command: dict[str, Any]) -> Callable[[Connection, dict[str, Any]], Any]:
    def act(conn: Connection, ctx: dict[str, Any]) -> Any:
        answer = MemoryTool(conn, "QA").execute(command)
        assert not answer.startswith(ERROR), answer
        return answer

    return act


def _with_files(base: dict[str, Any], key: str, new: dict[str, str] | None) -> dict[str, Any]:
    stores_ = dict(base["stores"])
    if new is None:
        stores_.pop(key)
    else:
        stores_[key] = new
    return {"stores": stores_, "agents": base["agents"]}


@dataclass(frozen=True)
class Mutator:
    act: Callable[[Connection, dict[str, Any]], Any]
    after: Callable[[dict[str, Any]], dict[str, Any]]
    audit: list[tuple[str, str | None]]


MUTATORS: dict[str, Mutator] = {
    "tool create": Mutator(
        _tool({"command": "create", "path": "/memories/new.md", "file_text": "n"}),
        lambda b: _with_files(b, QA, {**SEED, "/memories/new.md": "n"}),
        [("create", "/memories/new.md")],
    ),
    "tool str_replace": Mutator(
        _tool({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "A"}),
        lambda b: _with_files(b, QA, {**SEED, "/memories/a.md": "A\n"}),
        [("str_replace", "/memories/a.md")],
    ),
    "tool insert": Mutator(
        _tool({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "top"}),
        lambda b: _with_files(b, QA, {**SEED, "/memories/a.md": "top\na\n"}),
        [("insert", "/memories/a.md")],
    ),
    "tool delete": Mutator(
        _tool({"command": "delete", "path": "/memories/d"}),
        lambda b: _with_files(b, QA, {"/memories/a.md": "a\n"}),
        [("delete", "/memories/d/b.md"), ("delete", "/memories/d/c.md")],
    ),
    "tool rename": Mutator(
        _tool({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
        lambda b: _with_files(b, QA, {"/memories/a.md": "a\n", "/memories/e/b.md": "b",
                                      "/memories/e/c.md": "c"}),
        [("rename", "/memories/d/b.md"), ("rename", "/memories/d/c.md")],
    ),
    "put_file": Mutator(
        lambda conn, ctx: put_file(conn, ctx["store_id"], "/memories/a.md", "put"),
        lambda b: _with_files(b, QA, {**SEED, "/memories/a.md": "put"}),
        [("put", "/memories/a.md")],
    ),
    "put_file new": Mutator(
        lambda conn, ctx: put_file(conn, ctx["store_id"], "/memories/p/new.md", "new"),
        lambda b: _with_files(b, QA, {**SEED, "/memories/p/new.md": "new"}),
        [("put", "/memories/p/new.md")],
    ),
    "delete_file": Mutator(
        lambda conn, ctx: delete_file(conn, ctx["store_id"], "/memories/a.md"),
        lambda b: _with_files(b, QA, {"/memories/d/b.md": "b", "/memories/d/c.md": "c"}),
        [("delete", "/memories/a.md")],
    ),
    "clear_store_files": Mutator(
        lambda conn, ctx: clear_store_files(conn, ctx["store_id"]),
        lambda b: _with_files(b, QA, {}),
        [("clear", "/memories/a.md"), ("clear", "/memories/d/b.md"), ("clear", "/memories/d/c.md")],
    ),
    "expire_files": Mutator(
        lambda conn, ctx: expire_files(conn, days=30),
        lambda b: _with_files(b, QA, {"/memories/d/b.md": "b", "/memories/d/c.md": "c"}),
        [("expire", "/memories/a.md")],
    ),
    "enable_for_agent": Mutator(
        lambda conn, ctx: enable_for_agent(conn, "NEW", scope="user"),
        lambda b: {"stores": b["stores"], "agents": {**b["agents"], "NEW": ("user", True)}},
        [("agent_enable", None)],
    ),
    "enable_for_agent again": Mutator(
        lambda conn, ctx: enable_for_agent(conn, "QA", scope="shared", store_code="TEAM"),
        lambda b: {"stores": b["stores"], "agents": {**b["agents"], "QA": ("shared", True)}},
        [("agent_enable", None)],
    ),
    "disable_for_agent drop_store": Mutator(
        lambda conn, ctx: disable_for_agent(conn, "QA", drop_store=True),
        lambda b: {"stores": {SESSION: b["stores"][SESSION]}, "agents": {**b["agents"], "QA": ("agent", False)}},
        [("agent_disable", None), ("store_drop", None)],
    ),
    "disable_for_agent": Mutator(
        lambda conn, ctx: disable_for_agent(conn, "QA"),
        lambda b: {"stores": b["stores"], "agents": {**b["agents"], "QA": ("agent", False)}},
        [("agent_disable", None)],
    ),
    "end_session": Mutator(
        lambda conn, ctx: end_session(conn, "S1"),
        lambda b: _with_files(b, SESSION, None),
        [("store_drop", None)],
    ),
}


@pytest.mark.parametrize("name", MUTATORS)
def test_a_mutator_without_an_outer_transaction_commits_only_when_the_caller_commits(
    conn: Connection, engine: Engine, seeded: dict[str, Any], name: str
) -> None:
    mutator = MUTATORS[name]
    mutator.act(conn, seeded)
    assert conn.in_transaction()
    if has_second_connection(engine):
        with committed_view(engine) as c2:
            assert snapshot(c2) == seeded["base"]
            assert audit_since(c2, seeded["audit"]) == []
    conn.commit()
    with committed_view(engine) as c2:
        assert snapshot(c2) == mutator.after(seeded["base"])
        assert audit_since(c2, seeded["audit"]) == sorted(mutator.audit, key=lambda a: (a[0], a[1] or ""))


@pytest.mark.parametrize("name", MUTATORS)
def test_a_mutator_inside_an_outer_transaction_that_commits_is_committed_with_it(
    conn: Connection, engine: Engine, seeded: dict[str, Any], name: str
) -> None:
    mutator = MUTATORS[name]
    with conn.begin():
        mutator.act(conn, seeded)
        if has_second_connection(engine):
            with committed_view(engine) as c2:
                assert snapshot(c2) == seeded["base"]
    with committed_view(engine) as c2:
        assert snapshot(c2) == mutator.after(seeded["base"])
        assert audit_since(c2, seeded["audit"]) == sorted(mutator.audit, key=lambda a: (a[0], a[1] or ""))


@pytest.mark.parametrize("name", MUTATORS)
def test_a_mutator_inside_an_outer_transaction_that_rolls_back_leaves_no_trace(
    conn: Connection, engine: Engine, seeded: dict[str, Any], name: str
) -> None:
    mutator = MUTATORS[name]
    trans = conn.begin()
    mutator.act(conn, seeded)
    trans.rollback()
    with committed_view(engine) as c2:
        assert snapshot(c2) == seeded["base"]
        assert audit_since(c2, seeded["audit"]) == []


def test_writes_inside_a_savepoint_of_the_caller_roll_back_with_that_savepoint(
    conn: Connection, engine: Engine, seeded: dict[str, Any]
) -> None:
    with conn.begin():
        tool = MemoryTool(conn, "QA")
        tool.execute({"command": "create", "path": "/memories/kept.md", "file_text": "k"})
        nested = conn.begin_nested()
        tool.execute({"command": "create", "path": "/memories/undone.md", "file_text": "u"})
        nested.rollback()
        tool.execute({"command": "create", "path": "/memories/also.md", "file_text": "a"})
    with committed_view(engine) as c2:
        assert store_files(c2, QA) == {**SEED, "/memories/kept.md": "k", "/memories/also.md": "a"}
        assert audit_since(c2, seeded["audit"]) == [
            ("create", "/memories/also.md"), ("create", "/memories/kept.md")
        ]


def test_one_tool_call_writes_one_audit_event_per_changed_file_with_sizes(
    conn: Connection, engine: Engine, seeded: dict[str, Any]
) -> None:
    with conn.begin():
        tool = MemoryTool(conn, "QA", actor="qa-run")
        tool.execute({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "abc"})
    with committed_view(engine) as c2:
        row = c2.execute(
            sa.select(audit_events).where(audit_events.c.event_id > seeded["audit"])
        ).one()
    assert (row.action_name, row.actor_name, row.store_key, row.file_path, row.chars_before,
            row.chars_after) == ("str_replace", "qa-run", QA, "/memories/a.md", 2, 4)
    assert row.created_at.tzinfo is not None


def test_a_failed_tool_call_writes_no_audit_event(
    conn: Connection, engine: Engine, seeded: dict[str, Any]
) -> None:
    with conn.begin():
        tool = MemoryTool(conn, "QA")
        for command in (
            {"command": "create", "path": "/memories/a.md", "file_text": "x"},
            {"command": "str_replace", "path": "/memories/a.md", "old_str": "zz", "new_str": "y"},
            {"command": "delete", "path": "/memories/none"},
            {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/d/b.md"},
        ):
            assert tool.execute(command).startswith(ERROR)
    with committed_view(engine) as c2:
        assert audit_since(c2, seeded["audit"]) == []
        assert snapshot(c2) == seeded["base"]


def test_an_unchanged_write_writes_no_audit_event(
    conn: Connection, engine: Engine, seeded: dict[str, Any]
) -> None:
    with conn.begin():
        put_file(conn, seeded["store_id"], "/memories/a.md", "a\n")
        MemoryTool(conn, "QA").execute(
            {"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "a"}
        )
    with committed_view(engine) as c2:
        assert audit_since(c2, seeded["audit"]) == []


# ================================================= a failure in the middle of the caller's work

caller_metadata = sa.MetaData()
caller_rows = sa.Table(
    "qa_tx_rows",
    caller_metadata,
    sa.Column("row_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("note", sa.String(100)),
)


@pytest.fixture
def caller_table(engine: Engine, conn: Connection) -> Iterator[sa.Table]:
    caller_metadata.create_all(engine, checkfirst=True)
    with engine.begin() as c:
        c.execute(sa.delete(caller_rows))
    yield caller_rows
    conn.rollback()
    caller_metadata.drop_all(engine, checkfirst=True)


def _caller_rows(engine: Engine) -> list[tuple[int, str]]:
    with committed_view(engine) as c2:
        return [tuple(r) for r in c2.execute(sa.select(caller_rows).order_by(caller_rows.c.row_id))]  # type: ignore[misc]


_TRIGGERS = {
    "sqlite": (
        [("CREATE TRIGGER qa_boom BEFORE INSERT ON dbm_files WHEN instr(NEW.file_path, 'boom') > 0 "
         "BEGIN SELECT RAISE(ABORT, 'boom: INSERT INTO dbm_files refused'); END")],
        ["DROP TRIGGER IF EXISTS qa_boom"],
    ),
    "postgresql": (
        [("CREATE OR REPLACE FUNCTION qa_boom() RETURNS trigger AS $$ BEGIN "
         "IF position('boom' in NEW.file_path) > 0 THEN RAISE EXCEPTION 'boom: INSERT INTO dbm_files refused'; "
         "END IF; RETURN NEW; END $$ LANGUAGE plpgsql"),
         "CREATE TRIGGER qa_boom BEFORE INSERT ON dbm_files FOR EACH ROW EXECUTE FUNCTION qa_boom()"],
        ["DROP TRIGGER IF EXISTS qa_boom ON dbm_files", "DROP FUNCTION IF EXISTS qa_boom()"],
    ),
    "mysql": (
        [("CREATE TRIGGER qa_boom BEFORE INSERT ON dbm_files FOR EACH ROW BEGIN "
         "IF LOCATE('boom', NEW.file_path) > 0 THEN SIGNAL SQLSTATE '45000' "
         "SET MESSAGE_TEXT = 'boom: INSERT INTO dbm_files refused'; END IF; END")],
        ["DROP TRIGGER IF EXISTS qa_boom"],
    ),
}


@pytest.fixture
def failing_insert(engine: Engine, caller_table: sa.Table) -> Iterator[None]:
    """A trigger that makes the database itself refuse any file whose path contains 'boom'."""
    name = "mysql" if engine.dialect.name in ("mysql", "mariadb") else engine.dialect.name
    if name not in _TRIGGERS:
        pytest.skip(f"no test trigger written for {name}")
    create, drop = _TRIGGERS[name]
    with engine.begin() as c:
        for sql in drop + create:
            c.exec_driver_sql(sql)
    yield
    with engine.begin() as c:
        for sql in drop:
            c.exec_driver_sql(sql)


def test_a_statement_failing_in_the_database_leaves_the_caller_transaction_usable(
    conn: Connection, engine: Engine, seeded: dict[str, Any], caller_table: sa.Table,
    failing_insert: None,
) -> None:
    trans = conn.begin()
    conn.execute(sa.insert(caller_table).values(row_id=1, note="mine"))
    tool = MemoryTool(conn, "QA")
    assert tool.execute({"command": "create", "path": "/memories/ok1.md", "file_text": "1"}) == (
        "File created successfully at: /memories/ok1.md"
    )
    answer = tool.execute({"command": "create", "path": "/memories/boom.md", "file_text": "x"})
    assert answer == (
        "Error: The memory store could not be reached; nothing was changed. Retry the command "
        "later."
    )
    assert_no_leak(answer)
    assert tool.execute({"command": "create", "path": "/memories/ok2.md", "file_text": "2"}) == (
        "File created successfully at: /memories/ok2.md"
    )
    conn.execute(sa.insert(caller_table).values(row_id=2, note="mine too"))
    trans.commit()
    assert _caller_rows(engine) == [(1, "mine"), (2, "mine too")]
    with committed_view(engine) as c2:
        assert store_files(c2, QA) == {**SEED, "/memories/ok1.md": "1", "/memories/ok2.md": "2"}
        assert audit_since(c2, seeded["audit"]) == [
            ("create", "/memories/ok1.md"), ("create", "/memories/ok2.md")
        ]


def test_a_database_failure_in_the_first_write_of_a_store_leaves_no_store_behind(
    conn: Connection, engine: Engine, caller_table: sa.Table, failing_insert: None
) -> None:
    enable_for_agent(conn, "NEWBIE")
    conn.commit()
    trans = conn.begin()
    conn.execute(sa.insert(caller_table).values(row_id=1, note="mine"))
    answer = MemoryTool(conn, "NEWBIE").execute(
        {"command": "create", "path": "/memories/boom.md", "file_text": "x"}
    )
    assert answer.startswith(ERROR)
    conn.execute(sa.insert(caller_table).values(row_id=2, note="mine too"))
    trans.commit()
    assert _caller_rows(engine) == [(1, "mine"), (2, "mine too")]
    with committed_view(engine) as c2:
        assert c2.execute(sa.select(sa.func.count()).select_from(stores)).scalar_one() == 0


def test_a_deadlock_inside_a_tool_call_never_silently_drops_the_caller_earlier_rows(
    conn: Connection, engine: Engine, seeded: dict[str, Any], caller_table: sa.Table
) -> None:
    """The caller holds a row lock, another transaction holds the store row and waits for the
    caller's row, then the caller's tool call waits for the store row: a deadlock. Whoever the
    database picks as victim, the caller must never end up committing its later rows without
    its earlier ones."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite has one writer at a time: no deadlock between two writers")
    with engine.begin() as c:
        c.execute(sa.insert(caller_table).values(row_id=1, note="seed"))
    store_locked = threading.Event()
    other_result: list[Any] = []

    def other() -> None:
        try:
            with engine.begin() as c2:
                # heavier than the caller, so MySQL/MariaDB pick the caller as the victim
                c2.execute(sa.insert(caller_table), [{"row_id": 100 + i, "note": "x"} for i in range(50)])
                c2.execute(sa.select(stores.c.store_id).where(stores.c.store_key == QA).with_for_update())
                store_locked.set()
                c2.execute(sa.update(caller_table).where(caller_table.c.row_id == 1).values(note="other"))
            other_result.append("committed")
        except Exception as exc:  # noqa: BLE001 - the other side may be the victim
            other_result.append(type(exc).__name__)
        finally:
            store_locked.set()

    trans = conn.begin()
    conn.execute(sa.update(caller_table).where(caller_table.c.row_id == 1).values(note="caller"))
    conn.execute(sa.insert(caller_table).values(row_id=2, note="before the tool"))
    thread = threading.Thread(target=other)
    thread.start()
    assert store_locked.wait(timeout=30)
    answer = MemoryTool(conn, "QA").execute(
        {"command": "create", "path": "/memories/late.md", "file_text": "x"}
    )
    commit_error: Exception | None = None
    try:
        conn.execute(sa.insert(caller_table).values(row_id=3, note="after the tool"))
        trans.commit()
    except Exception as exc:  # noqa: BLE001 - a loud failure is acceptable
        commit_error = exc
        conn.rollback()
    thread.join(timeout=60)
    rows = dict(_caller_rows(engine))
    assert_no_leak(answer)
    if commit_error is None:
        assert 2 in rows and 3 in rows, (
            f"the tool answered {answer!r}, the caller committed, but its earlier row is gone: "
            f"{sorted(rows)}"
        )
        assert rows[2] == "before the tool"
