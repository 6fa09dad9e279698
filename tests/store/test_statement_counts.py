"""Statements per MEMORY tool command (issue 12), counted, never timed: every statement the
tool's connection sends is seen (SQLite: the driver's trace callback, which also sees the reads
run on the raw cursor; elsewhere a ``before_cursor_execute`` listener). The budgets are what
the write path sends today with every guarantee kept; a change that adds a statement to a hot
path fails here.

Two ways a command runs: in the **caller's** transaction (a savepoint pair around each write,
so a failed statement leaves the caller's transaction usable) and as a **turn's tool call**
(:func:`dbmemory.store.units.mark_single_unit`: the transaction holds the one call, so no savepoint;
a failure rolls the whole transaction back). Counts exclude BEGIN/COMMIT; a turn's write adds
those two wire round trips.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import enable_for_agent
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.writes import (
    counted_file_update,
    delete_uncounts_first,
    one_statement_store_moves,
)
from dbmemory.db.schema import file_reads, files, stores
from dbmemory.store.locks import get_or_create_store
from dbmemory.store.statements.examples import join_update_statements
from dbmemory.store.units import clear_single_unit, mark_single_unit
from dbmemory.tool import MemoryTool

# statements without SAVEPOINT/RELEASE, for a reused tool on a store with files
BUDGET = {
    "create": {"postgresql": 3, "mysql": 3, "sqlite": 3},
    "view directory": {"postgresql": 1, "mysql": 1, "sqlite": 1},
    "view file": {"postgresql": 1, "mysql": 1, "sqlite": 1},
    "str_replace": {"postgresql": 3, "mysql": 3, "sqlite": 4},
    "insert": {"postgresql": 3, "mysql": 3, "sqlite": 4},
    "rename": {"postgresql": 4, "mysql": 4, "sqlite": 5},
    "delete": {"postgresql": 3, "mysql": 3, "sqlite": 3},
}

COMMANDS: list[tuple[str, dict[str, Any]]] = [
    ("create", {"command": "create", "path": "/memories/p/a.md", "file_text": "hello world\nline 2"}),
    ("view directory", {"command": "view", "path": "/memories"}),
    ("view file", {"command": "view", "path": "/memories/p/a.md"}),
    ("str_replace", {"command": "str_replace", "path": "/memories/p/a.md", "old_str": "hello", "new_str": "bye"}),
    ("insert", {"command": "insert", "path": "/memories/p/a.md", "insert_line": 1, "insert_text": "new"}),
    ("rename", {"command": "rename", "old_path": "/memories/p/a.md", "new_path": "/memories/q/a.md"}),
    ("delete", {"command": "delete", "path": "/memories/q/a.md"}),
]


class Counter:
    """The statements one connection sends, by first word; BEGIN, COMMIT and ROLLBACK left out.

    On SQLite every statement the driver runs is seen (``sqlite3``'s trace callback), whether
    it went through SQLAlchemy or straight to the cursor (:mod:`dbmemory.db.raw`); elsewhere a
    ``before_cursor_execute`` listener sees them (nothing bypasses SQLAlchemy there)."""

    def __init__(self, engine: Engine, conn: Connection) -> None:
        self.engine = engine
        self.conn = conn
        self.dbapi = conn.connection.dbapi_connection
        self.traced = engine.dialect.name == "sqlite"
        self.log: list[str] = []

    def _record(self, statement: str) -> None:
        text = statement.strip().upper()
        if text.startswith("BEGIN") or text in ("COMMIT", "ROLLBACK"):
            return
        self.log.append(text.split(None, 1)[0])

    def _on(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if conn.connection.dbapi_connection is self.dbapi:
            self._record(statement)

    def __enter__(self) -> Counter:
        if self.traced:
            self.conn.connection.driver_connection.set_trace_callback(self._record)
        else:
            sa.event.listen(self.engine, "before_cursor_execute", self._on)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.traced:
            self.conn.connection.driver_connection.set_trace_callback(None)
        else:
            sa.event.remove(self.engine, "before_cursor_execute", self._on)


@pytest.fixture
def seeded(engine: Engine) -> Iterator[tuple[Connection, MemoryTool]]:
    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pass
    with engine.begin() as c:
        enable_for_agent(c, "RT")
    conn = engine.connect()
    tool = MemoryTool(conn, "RT")
    conn.commit()
    with conn.begin():
        assert "created" in tool.execute({"command": "create", "path": "/memories/seed.md", "file_text": "s"})
    try:
        yield conn, tool
    finally:
        conn.close()


def _family(engine: Engine) -> str:
    return "mysql" if engine.dialect.name in ("mysql", "mariadb") else engine.dialect.name


@pytest.mark.parametrize("mode", ["caller", "turn"])
def test_statements_per_command_stay_within_the_budget(
    engine: Engine, seeded: tuple[Connection, MemoryTool], mode: str
) -> None:
    conn, tool = seeded
    family = _family(engine)
    seen: dict[str, list[str]] = {}
    for name, args in COMMANDS:
        with Counter(engine, conn) as counter:
            trans = conn.begin()
            if mode == "turn":
                mark_single_unit(conn, trans)
            out = tool.execute(args)
            clear_single_unit(conn)
            trans.commit()
        assert not out.startswith("Error"), (name, out)
        seen[name] = counter.log
    for name, log in seen.items():
        savepoints = [s for s in log if s in ("SAVEPOINT", "RELEASE")]
        statements = [s for s in log if s not in ("SAVEPOINT", "RELEASE")]
        assert len(statements) <= BUDGET[name][family], (name, log)
        if name.startswith("view"):
            assert savepoints == [], (name, log)
        else:
            assert len(savepoints) == (2 if mode == "caller" else 0), (name, log)


def test_a_failed_write_of_a_turns_tool_call_leaves_nothing(
    engine: Engine, seeded: tuple[Connection, MemoryTool]
) -> None:
    """Without a savepoint, a write refused after its first statement (a create whose path
    is taken: the caps were already counted) rolls the whole call back: counters, files and
    audit events are as before, and the connection is usable."""
    conn, tool = seeded
    with engine.connect() as c:
        before = c.execute(sa.select(stores.c.file_count, stores.c.total_chars)).all()
        n_files = c.execute(sa.select(sa.func.count()).select_from(files)).scalar_one()
    for args in (
        {"command": "create", "path": "/memories/seed.md", "file_text": "again"},
        {"command": "create", "path": "/memories/seed.md/inner.md", "file_text": "under a file"},
    ):
        trans = conn.begin()
        mark_single_unit(conn, trans)
        out = tool.execute(args)
        clear_single_unit(conn)
        assert out.startswith("Error"), out
        if trans.is_active:  # what a turn does after the tool answered (it commits what is left)
            trans.commit()
        elif conn.get_transaction() is not None:
            conn.rollback()
    with engine.connect() as c:
        assert c.execute(sa.select(stores.c.file_count, stores.c.total_chars)).all() == before
        assert c.execute(sa.select(sa.func.count()).select_from(files)).scalar_one() == n_files
    with conn.begin():
        assert "created" in tool.execute({"command": "create", "path": "/memories/ok.md", "file_text": "ok"})


def _run_commands(engine: Engine, conn: Connection, tool: MemoryTool) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for name, args in COMMANDS:
        with Counter(engine, conn) as counter:
            with conn.begin():
                out = tool.execute(args)
        assert not out.startswith("Error"), (name, out)
        seen[name] = counter.log
    return seen


def _age_the_files(engine: Engine) -> None:
    """Every file last touched 3 days ago, no read recorded: the next view records a touch."""
    with engine.begin() as c:
        c.execute(sa.update(files).values(last_accessed_at=utcnow() - dt.timedelta(days=3)))
        c.execute(sa.delete(file_reads))


def test_the_count_does_not_depend_on_the_path_a_read_takes(
    engine: Engine, seeded: tuple[Connection, MemoryTool]
) -> None:
    """Reads that run on the raw cursor (SQLite, :mod:`dbmemory.db.raw`) are counted like the
    ones SQLAlchemy runs: the same commands with a cursor listener (which sends every
    statement through SQLAlchemy) count the same statements, the touch of a view included."""
    conn, tool = seeded
    _age_the_files(engine)
    raw_path = _run_commands(engine, conn, tool)
    _age_the_files(engine)
    listener = lambda *a: None  # noqa: E731
    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        sa_path = _run_commands(engine, conn, tool)
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)
    assert raw_path == sa_path
    assert raw_path["view directory"] == ["SELECT"]


def test_views_on_sqlite_run_on_the_raw_cursor(
    engine: Engine, seeded: tuple[Connection, MemoryTool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite a view of a directory and of a file (with the touch it records) sends no
    statement through ``Connection.execute``: they run on the driver's cursor."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the raw-cursor reads are SQLite's")
    conn, tool = seeded
    _age_the_files(engine)
    calls: list[object] = []
    real = Connection.execute

    def counting(self: Connection, statement: Any, *args: Any, **kw: Any) -> Any:
        calls.append(statement)
        return real(self, statement, *args, **kw)

    monkeypatch.setattr(Connection, "execute", counting)
    with Counter(engine, conn) as counter:
        for path in ("/memories", "/memories/seed.md"):
            with conn.begin():
                out = tool.execute({"command": "view", "path": path})
            assert not out.startswith("Error"), out
    assert calls == []
    assert counter.log == ["SELECT", "SELECT", "INSERT"], counter.log

def test_an_expiry_batch_sends_no_statement_per_store_or_per_file(engine: Engine) -> None:
    """Issue 12: a batch's audit events are built in the database (one ``INSERT ... SELECT``,
    no parameter set per file) and, on MySQL/MariaDB, whose driver sends an ``UPDATE``
    executemany as one round trip per row, the store counters move in one multi-table UPDATE for
    all its stores; the batch's statement count does not grow with its stores."""
    import datetime as dt

    from dbmemory.store import files as files_api
    from dbmemory.store.expiry import expire_files_committing

    family = _family(engine)
    with engine.begin() as c:
        for i in range(40):
            sid = get_or_create_store(c, f"shared:EXP{i}", scope="shared", store_code=f"EXP{i}")
            sid = getattr(sid, "store_id", sid)
            for j in range(2):
                files_api.put_file(c, sid, f"/memories/f{j}.md", "x" * (i + j + 1))
        c.execute(
            sa.update(files).values(
                last_accessed_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=60)
            )
        )
    log: list[tuple[str, bool, int]] = []

    def on(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        log.append((statement.split(None, 1)[0].upper(), many, len(params) if many else 1))

    sa.event.listen(engine, "before_cursor_execute", on)
    try:
        assert expire_files_committing(engine, days=30) == 80
    finally:
        sa.event.remove(engine, "before_cursor_execute", on)
    per_row = [
        entry
        for entry in log
        if entry[1] and entry[2] > 1 and (entry[0] == "INSERT" or family == "mysql")
    ]
    assert per_row == [], log
    assert len(log) <= 14, log
    with engine.connect() as c:
        assert c.execute(sa.select(sa.func.sum(stores.c.file_count))).scalar_one() == 0
        assert c.execute(sa.select(sa.func.sum(stores.c.total_chars))).scalar_one() == 0


def test_the_multi_table_updates_compile_for_mysql_and_are_picked_only_there() -> None:
    """The MySQL/MariaDB-only statements (:func:`dbmemory.store.statements.reads.join_update_statements`)
    compile for MySQL and MariaDB; Oracle cannot compile them (so they are not in
    ``example_statements()``, whose statements the Oracle test compiles), PostgreSQL and SQLite
    would render an ``UPDATE ... JOIN`` they do not accept, and
    :mod:`dbmemory.db.dialect` picks them for MySQL/MariaDB only."""
    from types import SimpleNamespace

    from sqlalchemy.dialects import mysql, oracle, postgresql, sqlite


    for name, stmt in join_update_statements().items():
        for dia in (mysql.dialect(), mysql.dialect(is_mariadb=True)):
            sql = str(stmt.compile(dialect=dia))
            assert sql.startswith("UPDATE dbm_"), (name, sql)
        with pytest.raises((sa.exc.CompileError, NotImplementedError)):
            stmt.compile(dialect=oracle.dialect())
        for dia in (postgresql.dialect(), sqlite.dialect()):  # no valid SQL there either
            try:
                sql = str(stmt.compile(dialect=dia))
            except (sa.exc.CompileError, NotImplementedError):
                continue
            assert sql.startswith("UPDATE dbm_stores JOIN"), (name, dia.name, sql)
    for name in ("mysql", "mariadb", "postgresql", "sqlite", "oracle"):
        bind: Any = SimpleNamespace(dialect=SimpleNamespace(name=name))
        family = name in ("mysql", "mariadb")
        assert counted_file_update(bind) is family
        assert one_statement_store_moves(bind) is family
        assert (delete_uncounts_first(bind) == "join") is family
