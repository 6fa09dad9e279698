"""The view path's reads on the raw cursor (:mod:`dbmemory.db.raw`, issue 12): the same rows,
the same transaction and the same errors as ``conn.execute`` of the same statement, and the
listing rendered in one pass with today's output."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import enable_for_agent
from dbmemory.core.clock import utcnow
from dbmemory.core.model import StoreRef
from dbmemory.core.paths import path_hash
from dbmemory.db import raw
from dbmemory.db.schema import file_reads, files
from dbmemory.store import files as files_api
from dbmemory.store.locks import find_store_id
from dbmemory.store.statements import reads as st
from dbmemory.tool import MemoryTool
from dbmemory.tool.render import listing_of_rows, render_listing

REF = StoreRef(store_key="shared:rawreads", scope="shared", store_code="rawreads")


def _seed(engine: Engine, paths: list[str]) -> int:
    with engine.begin() as c:
        for i, path in enumerate(paths):
            files_api.put_file(c, REF, path, f"line {i}\nsecond ü\n")
        store_id = find_store_id(c, REF.store_key)
        c.execute(sa.update(files).values(last_accessed_at=utcnow() - dt.timedelta(days=3)))
    assert store_id is not None
    return store_id


def _sa_rows(conn: Connection, stmt: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(stmt, params)]


def test_raw_rows_equal_what_conn_execute_returns(engine: Engine) -> None:
    """Every statement of the view path, raw and through SQLAlchemy, in one transaction: the
    same values of the same types (aware UTC datetimes, bools, ``None`` for no read)."""
    store_id = _seed(engine, ["/memories/a.md", "/memories/d/b.md"])
    with engine.connect() as conn, conn.begin():
        with conn.begin_nested():  # a recorded read for one file
            raw.row_count(
                conn,
                st.INSERT_FILE_READ,
                {"p_sid": store_id, "p_fid": _file_id(conn, "/memories/a.md"), "p_now": utcnow()},
            )
        cases: list[tuple[Any, dict[str, Any]]] = [
            (st.SELECT_SIZES_BY_KEY, {"p_key": REF.store_key}),
            (st.SELECT_SIZES_DIR_BY_KEY, {"p_key": REF.store_key, **st.prefix_params("/memories/d")}),
            (st.SELECT_SIZES, {"p_sid": store_id}),
            (st.SELECT_LISTING, {"p_sid": store_id}),
        ]
        for path in ("/memories/a.md", "/memories/d/b.md", "/memories/none.md"):
            cases.append((st.SELECT_FILE_READ, {"p_sid": store_id, "p_ph": path_hash(path)}))
            cases.append((st.SELECT_FILE_READ_BY_KEY, {"p_key": REF.store_key, "p_ph": path_hash(path)}))
        for stmt, params in cases:
            got = raw.all_rows(conn, stmt, params)
            want = _sa_rows(conn, stmt, params)
            assert got == want
            assert [[type(v) for v in row] for row in got] == [[type(v) for v in row] for row in want]
            first = raw.first_row(conn, stmt, params)
            assert first == (want[0] if want else None)
        row = raw.first_row(conn, st.SELECT_FILE_READ, {"p_sid": store_id, "p_ph": path_hash("/memories/a.md")})
        assert row is not None
        cols = raw.columns(st.SELECT_FILE_READ)
        assert row[cols["read_at"]].tzinfo is not None
        assert row[cols["last_accessed_at"]].tzinfo is not None
        assert row[cols["expiry_exempt"]] is False


def _file_id(conn: Connection, path: str) -> int:
    return int(conn.execute(sa.select(files.c.file_id).where(files.c.path_hash == path_hash(path))).scalar_one())


def test_a_views_touch_joins_the_callers_transaction(engine: Engine) -> None:
    """The touch a view records (raw on SQLite) rolls back with the caller's transaction and
    is kept when it commits: it ran in that transaction, not on its own."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the inline touch is SQLite's; servers record it on a connection of their own")
    _seed(engine, ["/memories/a.md"])
    with engine.connect() as conn:
        tool = MemoryTool.for_store(conn, "rawreads")
        conn.commit()
        with conn.begin() as trans:
            assert "second ü" in tool.execute({"command": "view", "path": "/memories/a.md"})
            assert conn.connection.driver_connection.in_transaction
            trans.rollback()
        with engine.connect() as c:
            assert c.execute(sa.select(sa.func.count()).select_from(file_reads)).scalar_one() == 0
        with conn.begin():
            assert "second ü" in tool.execute({"command": "view", "path": "/memories/a.md"})
        with engine.connect() as c:
            assert c.execute(sa.select(sa.func.count()).select_from(file_reads)).scalar_one() == 1


@pytest.mark.parametrize("mode", ["autobegin", "autocommit"])
def test_a_view_outside_a_begun_transaction_goes_through_sqlalchemy(engine: Engine, mode: str) -> None:
    """No transaction begun yet (SQLAlchemy autobegins it) or an AUTOCOMMIT connection: the
    statements go through ``conn.execute``, and the view answers as usual."""
    _seed(engine, ["/memories/a.md"])
    with engine.connect() as base:
        conn = base.execution_options(isolation_level="AUTOCOMMIT") if mode == "autocommit" else base
        tool = MemoryTool.for_store(conn, "rawreads")
        if mode == "autobegin":
            conn.commit()
        seen: list[str] = []
        listener = lambda _c, _cur, statement, *a: seen.append(statement.split(None, 1)[0])  # noqa: E731
        out = raw.all_rows(conn, st.SELECT_SIZES_BY_KEY, {"p_key": REF.store_key})
        assert out == [("/memories/a.md", len("line 0\nsecond ü\n"))]
        assert "second ü" in tool.execute({"command": "view", "path": "/memories/a.md"})
        assert "/memories/a.md" in tool.execute({"command": "view", "path": "/memories"})
        sa.event.listen(engine, "before_cursor_execute", listener)
        try:
            if mode == "autobegin":
                conn.rollback()  # no transaction: the next statement autobegins one
            raw.all_rows(conn, st.SELECT_SIZES_BY_KEY, {"p_key": REF.store_key})
        finally:
            sa.event.remove(engine, "before_cursor_execute", listener)
        assert seen == ["SELECT"]  # a cursor listener sees it: it went through SQLAlchemy
        if mode == "autobegin":
            conn.rollback()


def test_a_driver_error_on_the_raw_path_runs_the_statement_through_sqlalchemy(engine: Engine) -> None:
    """A raw statement the driver refuses is run again by ``conn.execute``: the caller gets
    SQLAlchemy's answer (here the right rows), never the driver's exception."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the raw path is SQLite's")
    _seed(engine, ["/memories/a.md"])
    with engine.connect() as conn, conn.begin():
        plan = raw.plan_of(conn.dialect, st.SELECT_SIZES_BY_KEY)
        assert plan is not None
        good = plan.sql
        plan.sql = "SELECT no_such_column FROM dbm_files WHERE store_id = ?"
        try:
            rows = raw.all_rows(conn, st.SELECT_SIZES_BY_KEY, {"p_key": REF.store_key})
        finally:
            plan.sql = good
        assert rows == [("/memories/a.md", len("line 0\nsecond ü\n"))]
        assert conn.connection.driver_connection.in_transaction


def test_a_missing_parameter_fails_as_conn_execute_does(engine: Engine) -> None:
    with engine.connect() as conn, conn.begin():
        with pytest.raises(sa.exc.StatementError):
            raw.all_rows(conn, st.SELECT_SIZES_BY_KEY, {})


def _valid_store(rng: random.Random, directory: str) -> list[tuple[str, int]]:
    names = ["a", "b", "a-b", "a.b", ".h", "node_modules", "x.md", "é", "Z", "a b", "_"]
    paths: set[str] = set()
    for _ in range(rng.randint(0, 14)):
        paths.add(directory + "/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 4))))
    paths = {p for p in paths if not any(q.startswith(p + "/") for q in paths)}
    return [(p, rng.choice([0, 7, 1023, 1024, 5000, 10**7])) for p in paths]


def _reference_listing(directory: str, entries: list[tuple[str, int]], max_chars: int | None) -> str:
    """The listing as it was rendered before issue 12 (a dict of key tuples), for comparison."""
    from dbmemory.tool import messages
    from dbmemory.tool.render import EXCLUDED_NAMES, format_size

    prefix = directory + "/"
    total = 0
    rows: dict[tuple[str, ...], list[int]] = {}
    for path, size in entries:
        total += size
        parts = tuple(path[len(prefix) :].split("/"))
        for depth in range(1, min(len(parts), 2) + 1):
            name = parts[depth - 1]
            if name.startswith(".") or name in EXCLUDED_NAMES:
                break
            row = rows.setdefault(parts[:depth], [0, int(depth < len(parts)), 0])
            row[0] += size
            if depth == 2 or len(parts) == 1:  # the line that accounts for this file
                row[2] += 1
    lines = [messages.view_directory_header(directory), f"{format_size(total)}\t{directory}"]
    listed = [0, 0]
    for key in sorted(rows):
        size, is_directory, files = rows[key]
        lines.append(f"{format_size(size)}\t{prefix}{'/'.join(key)}{'/' if is_directory else ''}")
        listed.append(files)
    text = "\n".join(lines)
    if max_chars is None or len(text) <= max_chars:
        return text
    n = len(entries)
    note = messages.listing_clipped(max_chars, min(2 * n, max_chars), n, n)
    budget = max_chars - len(note) - 1
    kept, used = 2, len(lines[0]) + 1 + len(lines[1])
    while kept < len(lines) and used + 1 + len(lines[kept]) <= budget:
        used += 1 + len(lines[kept])
        kept += 1
    left = n - sum(listed[:kept])
    return "\n".join(lines[:kept]) + "\n" + messages.listing_clipped(max_chars, kept - 2, left, n)


def test_the_one_pass_listing_renders_what_the_listing_rendered_before() -> None:
    rng = random.Random(12)
    for _ in range(3000):
        directory = rng.choice(["/memories", "/memories/a", "/memories/.h"])
        entries = _valid_store(rng, directory)
        rng.shuffle(entries)
        limit = rng.choice([None, 16_000, 300, 200, 120])
        want = _reference_listing(directory, entries, limit)
        assert render_listing(directory, entries, max_chars=limit) == want
        assert listing_of_rows(directory, entries, max_chars=limit) == want


@pytest.mark.parametrize(
    "entries",
    [
        [("/memories/a.md", 1), ("/memories/a.md", 2)],
        [("/memories/a", 1), ("/memories/a/b.md", 2)],
        [("/memories/d/a", 1), ("/memories/d/a/b.md", 2)],
    ],
)
def test_render_listing_refuses_a_path_twice_or_both_file_and_directory(entries: list[tuple[str, int]]) -> None:
    with pytest.raises(ValueError):
        render_listing("/memories", entries)


def test_a_large_directory_view_is_the_listing_of_its_rows(engine: Engine) -> None:
    """The tool's ``view`` of a 300-file store (clipped) is :func:`render_listing` of the
    store's files, on every backend."""
    paths = [f"/memories/fill/f{j:04d}.md" for j in range(250)] + [f"/memories/t{j}.md" for j in range(50)]
    _seed(engine, paths)
    with engine.connect() as conn:
        enable_for_agent(conn, "RAWV", scope="shared", store_code="rawreads")
        conn.commit()
        tool = MemoryTool(conn, "RAWV")
        conn.commit()
        with conn.begin():
            out = tool.execute({"command": "view", "path": "/memories"})
        entries = [(p, len(f"line {i}\nsecond ü\n")) for i, p in enumerate(paths)]
        assert out == render_listing("/memories", entries)
        assert out.endswith("view a subdirectory to see the rest)") or len(out) < 16_000


def test_a_schema_translate_map_keeps_the_statements_on_sqlalchemy(engine: Engine) -> None:
    """SQLAlchemy renders a ``schema_translate_map`` per execution, which a compiled raw
    statement would not: such a connection's reads go through ``conn.execute``."""
    _seed(engine, ["/memories/a.md"])
    seen: list[str] = []
    listener = lambda _c, _cur, statement, *a: seen.append(statement)  # noqa: E731
    with engine.connect() as base:
        conn = base.execution_options(schema_translate_map={"nowhere": None})
        with conn.begin():
            assert raw.dbapi_connection(conn) is None
            sa.event.listen(engine, "before_cursor_execute", listener)
            try:
                rows = raw.all_rows(conn, st.SELECT_SIZES_BY_KEY, {"p_key": REF.store_key})
            finally:
                sa.event.remove(engine, "before_cursor_execute", listener)
    assert rows == [("/memories/a.md", len("line 0\nsecond ü\n"))]
    assert len(seen) == 1


def test_a_views_touch_in_a_savepoint_rolls_back_with_it(engine: Engine) -> None:
    """Raw statements run inside the caller's savepoint as SQLAlchemy's would: the touch of a
    view made in a savepoint is undone when the savepoint is rolled back."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the inline touch is SQLite's")
    _seed(engine, ["/memories/a.md"])
    with engine.connect() as conn:
        tool = MemoryTool.for_store(conn, "rawreads")
        conn.commit()
        with conn.begin():
            savepoint = conn.begin_nested()
            assert "second ü" in tool.execute({"command": "view", "path": "/memories/a.md"})
            assert conn.execute(sa.select(sa.func.count()).select_from(file_reads)).scalar_one() == 1
            savepoint.rollback()
            assert conn.execute(sa.select(sa.func.count()).select_from(file_reads)).scalar_one() == 0


def test_a_parameter_its_type_refuses_fails_as_conn_execute_does(engine: Engine) -> None:
    """A bind processor's error is SQLAlchemy's ``StatementError``, on the raw path too."""
    with engine.connect() as conn, conn.begin():
        with pytest.raises(sa.exc.StatementError):
            raw.row_count(conn, st.UPDATE_FILE_READ, {"p_sid": 1, "p_fid": 1, "p_now": "not a datetime"})
