"""An edit's change, audit row and store counters on the driver's cursor (SQLite, the MEMORY
tool's hot path): the same rows as through SQLAlchemy, in the caller's transaction and
savepoint, on every backend."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.db.schema import audit_events, files, stores
from dbmemory.tool import MemoryTool

CODE = "rawwrites"
NAMES = ["/memories/a.md", "/memories/b%_!.md", "/memories/ü/é.md"]


def _state(conn: Connection, code: str = CODE) -> tuple[Any, ...]:
    sid = conn.execute(sa.select(stores.c.store_id).where(stores.c.store_key == f"shared:{code}")).scalar_one()
    body = sorted(
        conn.execute(
            sa.select(files.c.file_path, files.c.body, files.c.char_count, files.c.version_no)
            .where(files.c.store_id == sid)
        ).all()
    )
    counters = conn.execute(sa.select(stores.c.file_count, stores.c.total_chars).where(stores.c.store_id == sid)).all()
    events = sorted(
        conn.execute(
            sa.select(
                audit_events.c.file_path,
                audit_events.c.action_name,
                audit_events.c.actor_name,
                audit_events.c.chars_before,
                audit_events.c.chars_after,
                audit_events.c.detail_text,
            ).where(audit_events.c.store_id == sid)
        ).all(),
        key=repr,
    )
    return tuple(map(tuple, body)), tuple(map(tuple, counters)), tuple(map(tuple, events))


def _edits(tool: MemoryTool, conn: Connection) -> None:
    for path in NAMES:
        with conn.begin():
            assert not tool.execute({"command": "create", "path": path, "file_text": "one\ntwo\n"}).startswith("Error")
        with conn.begin():
            out = tool.execute({"command": "str_replace", "path": path, "old_str": "two", "new_str": "two ü"})
            assert not out.startswith("Error"), out
        with conn.begin():
            out = tool.execute({"command": "insert", "path": path, "insert_line": 1, "insert_text": "x"})
            assert not out.startswith("Error"), out
    with conn.begin():
        out = tool.execute({"command": "rename", "old_path": NAMES[1], "new_path": "/memories/_%/ü_.md"})
        assert not out.startswith("Error"), out
    with conn.begin():
        assert not tool.execute({"command": "delete", "path": NAMES[2]}).startswith("Error")


def test_an_edit_writes_the_rows_sqlalchemy_writes(engine: Engine) -> None:
    """The same edits with a cursor listener (which keeps every statement on SQLAlchemy) and
    without: the same files, counters and audit rows (hostile and non-ASCII names included)."""
    seen: list[str] = []

    def listener(*args: Any) -> None:
        seen.append(args[2])

    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        with engine.connect() as conn:
            _edits(MemoryTool.for_store(conn, "viasqlalchemy"), conn)
            want = _state(conn, "viasqlalchemy")
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)
    assert seen
    with engine.connect() as conn:
        _edits(MemoryTool.for_store(conn, CODE), conn)
        got = _state(conn)
    assert got == want
    assert len(got[2]) == 3 * len(NAMES) + 2


def test_an_edit_rolls_back_with_the_callers_transaction_and_savepoint(engine: Engine) -> None:
    """An edit inside the caller's savepoint, and inside the caller's transaction, leaves no
    text, counter or audit row when either is rolled back."""
    with engine.connect() as conn:
        tool = MemoryTool.for_store(conn, CODE)
        with conn.begin():
            tool.execute({"command": "create", "path": NAMES[1], "file_text": "one\ntwo\n"})
        before = _state(conn)
        conn.commit()
        with conn.begin() as trans:
            savepoint = conn.begin_nested()
            out = tool.execute({"command": "str_replace", "path": NAMES[1], "old_str": "two", "new_str": "2"})
            assert not out.startswith("Error"), out
            assert _state(conn) != before
            savepoint.rollback()
            assert _state(conn) == before
            tool.execute({"command": "insert", "path": NAMES[1], "insert_line": 0, "insert_text": "x"})
            assert _state(conn) != before
            trans.rollback()
        assert _state(conn) == before
        conn.commit()


def test_on_sqlite_an_edits_writes_bypass_sqlalchemys_execute(engine: Engine) -> None:
    """SQLite: none of the statements of an edit or a delete goes through
    ``Connection.execute`` (a ``before_execute`` listener would see it): the store-and-file
    lock, the file update or delete, the counters and the audit row run on the driver's
    cursor."""
    if engine.dialect.name != "sqlite":
        return  # the servers' round trip dwarfs SQLAlchemy's cost: everything on SQLAlchemy
    with engine.connect() as conn:
        tool = MemoryTool.for_store(conn, CODE)
        with conn.begin():
            tool.execute({"command": "create", "path": NAMES[0], "file_text": "one\ntwo\n"})
        seen: list[str] = []

        def listener(c: Any, clause: Any, *rest: Any) -> None:
            seen.append(str(clause).split()[0])

        sa.event.listen(conn, "before_execute", listener)
        outs = []
        for args in (
            {"command": "str_replace", "path": NAMES[0], "old_str": "two", "new_str": "2"},
            {"command": "insert", "path": NAMES[0], "insert_line": 0, "insert_text": "x"},
            {"command": "delete", "path": NAMES[0]},
        ):
            with conn.begin():
                outs.append(tool.execute(args))
        sa.event.remove(conn, "before_execute", listener)
        assert not any(out.startswith("Error") for out in outs), outs
        assert [s for s in seen if s != "SAVEPOINT" and s != "RELEASE"] == []
