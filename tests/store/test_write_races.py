"""Races of the short write path (issue 12) on the servers, at READ COMMITTED and REPEATABLE
READ: on MySQL/MariaDB an edit moves the counters in the file's own ``UPDATE`` (a multi-table
``UPDATE dbm_files, dbm_stores``) and a one-file delete locks the store and uncounts the file
in one ``UPDATE dbm_stores INNER JOIN dbm_files`` before it inserts the audit event and
deletes the row. Whatever the interleaving, the counters equal the aggregates of the files,
every change has its one audit event, and no write is lost silently (a refused write is a
serialisation failure the caller sees)."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from counter_checks import mismatches
from dbmemory import enable_for_agent
from dbmemory.core.model import StoreRef
from dbmemory.db.schema import audit_events, files, stores
from dbmemory.errors import DbMemoryError
from dbmemory.store import files as files_api
from dbmemory.store.locks import get_or_create_store
from dbmemory.store.moves import delete_path
from dbmemory.tool import MemoryTool

LEVELS = ["READ COMMITTED", "REPEATABLE READ"]
STALE = "another writer changed this memory store after the current transaction began"


def _store(engine: Engine, n_files: int) -> int:
    with engine.begin() as c:
        enable_for_agent(c, "WR", scope="shared", store_code="WR")
        sid = get_or_create_store(c, "shared:WR", scope="shared", store_code="WR")
        sid = getattr(sid, "store_id", sid)
        for i in range(n_files):
            files_api.put_file(c, sid, f"/memories/f{i}.md", "ab " * (i + 1))
    return int(sid)


def _events(engine: Engine, action: str) -> int:
    with engine.connect() as c:
        return c.execute(
            sa.select(sa.func.count()).where(audit_events.c.action_name == action)
        ).scalar_one()


@pytest.mark.parametrize("level", LEVELS)
def test_two_threads_editing_and_deleting_one_store_keep_the_counters_exact(
    server_engine: Engine, level: str
) -> None:
    """Two tool connections each grow every file of the store (``insert``), then delete half
    of them (even / odd) while the other may still be editing: every committed delete has its
    audit event and the counters equal the aggregates."""
    engine = server_engine.execution_options(isolation_level=level)
    _store(engine, 12)
    before_deletes = _events(engine, "delete")
    errors: list[str] = []
    deleted: list[int] = []
    lock = threading.Lock()

    def worker(parity: int) -> None:
        try:
            with engine.connect() as conn:
                tool = MemoryTool(conn, "WR")
                conn.commit()
                for round_no in range(3):
                    for i in range(12):
                        path = f"/memories/f{i}.md"
                        with conn.begin():
                            out = tool.execute(
                                {"command": "insert", "path": path, "insert_line": 0,
                                 "insert_text": "xy" * (round_no + parity + 1)}
                            )
                        if out.startswith("Error") and "does not exist" not in out:
                            errors.append(out)
                for i in range(parity, 12, 2):
                    with conn.begin():
                        out = tool.execute({"command": "delete", "path": f"/memories/f{i}.md"})
                    if out.startswith("Error") or "rolled back" in out:
                        errors.append(out)
                    else:
                        with lock:
                            deleted.append(i)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(p,)) for p in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if engine.dialect.name == "postgresql" and level == "REPEATABLE READ":
        # a writer whose snapshot predates the other's commit is refused, visibly
        errors = [e for e in errors if STALE not in e]
    assert errors == []
    assert mismatches(engine) == []
    with engine.connect() as c:
        assert c.execute(sa.select(stores.c.file_count)).scalar_one() == 12 - len(deleted)
    assert _events(engine, "delete") - before_deletes == len(deleted)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("by_key", [False, True], ids=["store-id", "store-ref"])
def test_a_delete_waiting_for_the_store_lock_uncounts_the_files_latest_size(
    server_engine: Engine, level: str, by_key: bool
) -> None:
    """The deleter's transaction read the file first (a REPEATABLE READ snapshot with the old
    size); meanwhile another writer holds the store lock and grows the file. After the writer
    commits, the delete must take the grown size out of ``total_chars`` (or, where the
    database refuses the stale snapshot, fail visibly with nothing changed)."""
    engine = server_engine.execution_options(isolation_level=level)
    sid = _store(engine, 2)
    path = "/memories/f0.md"
    store: int | StoreRef = sid
    if by_key:
        store = StoreRef(store_key="shared:WR", scope="shared", store_id=sid)
    writer = engine.connect()
    deleter = engine.connect()
    outcome: dict[str, object] = {}
    try:
        deleter.begin()
        deleter.execute(sa.select(files.c.char_count).where(files.c.store_id == sid)).all()
        writer.begin()
        files_api.edit_file(writer, sid, path, lambda old: (old + "z" * 500, None), actor="w")

        def delete() -> None:
            try:
                outcome["deleted"] = delete_path(deleter, store, path, actor="d")
                deleter.commit()
            except DbMemoryError as exc:
                outcome["error"] = exc
                deleter.rollback()

        thread = threading.Thread(target=delete)
        thread.start()
        time.sleep(0.5)  # the delete now waits for the store lock
        assert thread.is_alive(), outcome
        writer.commit()
        thread.join(timeout=60)
        assert not thread.is_alive()
    finally:
        writer.close()
        deleter.close()
    assert mismatches(engine) == []
    with engine.connect() as c:
        left = c.execute(sa.select(files.c.file_path).where(files.c.store_id == sid)).scalars().all()
        last = c.execute(
            sa.select(audit_events.c.action_name, audit_events.c.chars_before)
            .where(audit_events.c.file_path == path)
            .order_by(audit_events.c.event_id.desc())
        ).first()
    if "error" in outcome:  # PostgreSQL at REPEATABLE READ: a serialisation failure
        assert path in left
        assert last is not None and last.action_name == "edit"
    else:
        assert outcome == {"deleted": 1}
        assert path not in left
        assert last is not None and (last.action_name, last.chars_before) == ("delete", 503)


@pytest.mark.parametrize("command", ["delete", "str_replace"])
def test_a_writer_waiting_for_the_store_lock_holds_no_lock_on_the_file(
    server_engine: Engine, command: str
) -> None:
    """Lock order: store row, then file row. While a delete (on MySQL/MariaDB its first
    statement is the ``UPDATE dbm_stores INNER JOIN dbm_files``) or an edit waits for the
    store row, a third connection can still lock the file row at once (``NOWAIT``), so a
    writer that holds the store lock and then asks for the file row never deadlocks with it."""
    engine = server_engine
    sid = _store(engine, 3)
    path = "/memories/f1.md"
    holder = engine.connect()
    waiter = engine.connect()
    outcome: dict[str, object] = {}
    try:
        with engine.connect() as c:
            file_id = c.execute(
                sa.select(files.c.file_id).where(files.c.file_path == path)
            ).scalar_one()
        tool = MemoryTool(waiter, "WR")
        waiter.commit()
        with waiter.begin():  # the tool learns its store id: the next call is the short path
            assert "ab" in tool.execute({"command": "view", "path": path})
        holder.begin()
        holder.execute(
            sa.select(stores.c.store_id).where(stores.c.store_id == sid).with_for_update()
        ).all()

        def write() -> None:
            with waiter.begin():
                if command == "delete":
                    args = {"command": "delete", "path": path}
                else:
                    args = {"command": "str_replace", "path": path, "old_str": "ab ab",
                            "new_str": "cd ab"}
                outcome["out"] = tool.execute(args)

        thread = threading.Thread(target=write)
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive(), outcome
        with engine.connect() as probe, probe.begin():
            probe.execute(
                sa.select(files.c.file_id)
                .where(files.c.file_id == file_id)
                .with_for_update(nowait=True)
            ).all()
        holder.rollback()
        thread.join(timeout=60)
        assert not thread.is_alive()
    finally:
        holder.close()
        waiter.close()
    assert not str(outcome["out"]).startswith("Error"), outcome
    assert mismatches(engine) == []
