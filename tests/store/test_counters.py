"""Store counters (revision 0004): ``dbm_stores.file_count`` and ``total_chars`` always equal
the aggregates over ``dbm_files``, after random sequences of every writer (tool commands, the
admin API, prefix deletes and renames, clears, failed writes, expiry) and after races of
writers and the expiry on one store, on every backend. The counters are what the caps are
checked against, so a drift would let a store exceed its caps or refuse a legal write."""

from __future__ import annotations

import datetime as dt
import random
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from counter_checks import mismatches
from dbmemory import enable_for_agent
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.dialect.expiry import snapshot_isolation
from dbmemory.db.dialect.oracle import Flag
from dbmemory.db.dialect.types import UtcDateTime
from dbmemory.db.schema import files, stores
from dbmemory.errors import DbMemoryError
from dbmemory.store import files as files_api
from dbmemory.store.expiry import expire_files, expire_files_committing
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import clear_store_files, delete_file
from dbmemory.tool import MemoryTool

PATHS = [
    "/memories/a.md",
    "/memories/b.md",
    "/memories/d/x.md",
    "/memories/d/y.md",
    "/memories/d/e/z.md",
    "/memories/e.md",
    "/memories/d",
    "/memories/d/e",
]




def random_command(rng: random.Random) -> dict[str, Any]:
    path = rng.choice(PATHS)
    kind = rng.choice(["create", "create", "str_replace", "insert", "delete", "rename", "view"])
    if kind == "create":
        return {"command": "create", "path": path, "file_text": "t" * rng.randint(0, 40) + " ab"}
    if kind == "str_replace":
        return {"command": "str_replace", "path": path, "old_str": "ab", "new_str": "x" * rng.randint(0, 9)}
    if kind == "insert":
        return {"command": "insert", "path": path, "insert_line": 0, "insert_text": "y" * rng.randint(1, 9)}
    if kind == "rename":
        return {"command": "rename", "old_path": path, "new_path": rng.choice(PATHS)}
    if kind == "delete":
        return {"command": "delete", "path": path}
    return {"command": "view", "path": path}


def test_counters_follow_random_sequences_of_every_writer(engine: Engine) -> None:
    """Tool commands (successes and refusals), put_file, delete_file, clear_store_files and
    expiry, each committed or rolled back at random: the counters equal the aggregates after
    every step."""
    rng = random.Random(12)
    with engine.begin() as c:
        enable_for_agent(c, "CNT", max_files=5, max_store_chars=160)
    with engine.connect() as conn:
        tool = MemoryTool(conn, "CNT")
        conn.commit()
        for step in range(160):
            choice = rng.random()
            with conn.begin() as tx:
                if choice < 0.75:
                    tool.execute(random_command(rng))
                elif choice < 0.85:
                    sid = find_store_id(conn, "agent:CNT")
                    if sid is not None:
                        try:
                            files_api.put_file(conn, sid, rng.choice(PATHS[:6]), "p" * rng.randint(0, 30))
                        except DbMemoryError:
                            pass
                elif choice < 0.9:
                    sid = find_store_id(conn, "agent:CNT")
                    if sid is not None:
                        try:
                            delete_file(conn, sid, rng.choice(PATHS[:6]))
                        except DbMemoryError:
                            pass
                elif choice < 0.93:
                    sid = find_store_id(conn, "agent:CNT")
                    if sid is not None:
                        clear_store_files(conn, sid)
                else:
                    conn.execute(
                        sa.update(files).values(
                            last_accessed_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=60)
                        ).where(files.c.file_id % 2 == step % 2)
                    )
                    if not snapshot_isolation(conn):
                        expire_files(conn, days=30)
                if rng.random() < 0.2:
                    tx.rollback()
            assert mismatches(engine) == [], f"after step {step}"
        expire_files_committing(engine, days=0.5, now=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=400))
    assert mismatches(engine) == []


def test_counters_stay_exact_under_racing_writers_and_expiry(engine: Engine) -> None:
    """Four threads run random commands on one store while a fifth back-dates files and runs
    the expiry: no deadlock surfaces as a lost write, and the counters equal the aggregates."""
    if is_memory_sqlite(engine):
        pytest.skip("in-memory SQLite has a single shared connection: no concurrent writers")
    with engine.begin() as c:
        enable_for_agent(c, "RACE", scope="shared", store_code="TEAM", max_files=6)
    errors: list[str] = []
    stop = threading.Event()

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with engine.connect() as conn:
                tool = MemoryTool(conn, "RACE")
                conn.commit()
                for _ in range(40):
                    with conn.begin():
                        out = tool.execute(random_command(rng))
                    if "rolled back the whole transaction" in out:
                        errors.append(out)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    def expirer() -> None:
        try:
            while not stop.is_set():
                with engine.begin() as c:
                    c.execute(
                        sa.update(files).values(
                            last_accessed_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=60)
                        ).where(files.c.file_id % 3 == 0)
                    )
                expire_files_committing(engine, days=30)
        except DbMemoryError as exc:
            if getattr(exc, "code", "") not in ("conflict", "busy"):
                errors.append(repr(exc))
        except Exception as exc:  # noqa: BLE001
            errors.append(repr(exc))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    janitor = threading.Thread(target=expirer)
    janitor.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    stop.set()
    janitor.join(timeout=120)
    assert not any(t.is_alive() for t in [*threads, janitor]), "a thread hung"
    assert errors == []
    assert mismatches(engine) == []


def test_the_migration_backfills_the_counters(empty_engine: Engine) -> None:
    """A database at revision 0002 with files gets exact counters from revision 0004."""
    from dbmemory.db import migrate

    migrate.upgrade(empty_engine, "0002")
    now = dt.datetime.now(dt.timezone.utc)
    with empty_engine.begin() as c:
        for key in ("agent:M1", "agent:M2", "agent:M3"):
            c.execute(
                sa.text(
                    "INSERT INTO dbm_stores (store_key, scope_name, agent_code, created_at, updated_at,"
                    " max_file_chars, max_files) VALUES (:k, 'agent', :a, :n, :n, 100000, 1000)"
                ).bindparams(sa.bindparam("n", type_=UtcDateTime())),
                {"k": key, "a": key.split(":")[1], "n": now},
            )
        ids = dict(c.execute(sa.text("SELECT store_key, store_id FROM dbm_stores")).all())
        for i, (key, n_files) in enumerate((("agent:M1", 3), ("agent:M2", 1))):
            for j in range(n_files):
                path = f"/memories/f{j}.md"
                c.execute(
                    sa.text(
                        "INSERT INTO dbm_files (store_id, file_path, path_hash, body, char_count,"
                        " version_no, expiry_exempt, created_at, updated_at, last_accessed_at)"
                        " VALUES (:s, :p, :h, :b, :cc, 1, :x, :n, :n, :n)"
                    ).bindparams(
                        sa.bindparam("n", type_=UtcDateTime()),
                        sa.bindparam("x", type_=Flag()),
                    ),
                    {"s": ids[key], "p": path, "h": f"{i}{j}".ljust(64, "0"), "b": "z" * (j + 5),
                     "cc": j + 5, "x": False, "n": now},
                )
    migrate.upgrade(empty_engine)
    with empty_engine.connect() as c:
        got = dict(
            (k, (n, t))
            for k, n, t in c.execute(sa.text("SELECT store_key, file_count, total_chars FROM dbm_stores"))
        )
    assert got == {"agent:M1": (3, 5 + 6 + 7), "agent:M2": (1, 5), "agent:M3": (0, 0)}


def test_a_cap_refusal_reads_the_counters_not_the_files(conn: Connection) -> None:
    """The counters are what the caps check: a store whose counter says it is full refuses a
    create although it holds fewer files (the counter is the one source; this proves the
    check is O(1), it reads no aggregate)."""
    enable_for_agent(conn, "FULL", max_files=3)
    tool = MemoryTool(conn, "FULL")
    assert "created" in tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    conn.execute(sa.update(stores).where(stores.c.store_key == "agent:FULL").values(file_count=3))
    out = tool.execute({"command": "create", "path": "/memories/b.md", "file_text": "b"})
    assert out.startswith("Error") and "already holds 3 files" in out, out
    conn.rollback()


def test_the_sql_expiry_procedure_moves_the_counters(server_engine: Engine, server_name: str) -> None:
    """``dbm_expire_files`` (sql/<dialect>/expiry_job.sql) keeps the counters exact too."""
    from sql_clients import call_procedure, install_procedure

    install_procedure(server_engine, "postgresql" if server_name == "postgres" else "mysql")
    with server_engine.begin() as c:
        enable_for_agent(c, "PROC")
    with server_engine.connect() as conn:
        tool = MemoryTool(conn, "PROC")
        for i in range(6):
            tool.execute({"command": "create", "path": f"/memories/f{i}.md", "file_text": "q" * (i + 1)})
        conn.commit()
    with server_engine.begin() as c:
        c.execute(
            sa.update(files)
            .where(files.c.file_path.in_(["/memories/f1.md", "/memories/f4.md"]))
            .values(last_accessed_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=60))
        )
    assert call_procedure(server_engine, server_name, 30) == 2
    assert mismatches(server_engine) == []
    with server_engine.connect() as c:
        row = c.execute(
            sa.select(stores.c.file_count, stores.c.total_chars).where(stores.c.store_key == "agent:PROC")
        ).one()
    assert tuple(row) == (4, 1 + 3 + 4 + 6)


def test_the_indexed_directory_check_is_exact(conn: Connection) -> None:
    """The range probe of ``ix_dbm_files_prefix`` (``[<dir>/, <dir>0)`` in binary order) finds
    exactly the files under a directory: names that sort next to it (``a.md``, ``a-b``,
    ``a0``, ``a/`` siblings, upper case, non-ASCII) are not inside it; a directory longer than
    the index key (600 characters) takes the scan form and is still refused."""
    enable_for_agent(conn, "SHAPE")
    tool = MemoryTool(conn, "SHAPE")

    def create(path: str) -> str:
        return tool.execute({"command": "create", "path": path, "file_text": "x"})

    assert "created" in create("/memories/a/inner.md")
    for sibling in ("/memories/a.md", "/memories/a-b", "/memories/a0", "/memories/A", "/memories/aé", "/memories/a b"):
        assert "created" in create(sibling), sibling
    out = create("/memories/a")
    assert out.startswith("Error") and "directory" in out, out
    deep = "/memories/" + "d" * 650
    assert "created" in create(deep + "/leaf.md")
    out = create(deep)
    assert out.startswith("Error") and "directory" in out, out
    out = create(deep + "/leaf.md/under.md")
    assert out.startswith("Error"), out
    conn.rollback()
