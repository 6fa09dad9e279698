"""The issue-5 workload: S stores x F files through the MEMORY tool, interleaved with the floor.

For every store, each operation runs once through dbmemory (``MemoryTool.execute`` in its own
committed transaction) and right after through the floor (:mod:`floor`) on a twin store, so
machine noise hits both sides alike. Per store: create F files (~2 KB Markdown), view the
directory, view each file, one ``str_replace`` and one ``insert`` per file, one ``rename``, one
``delete``. Then an expiry pass removes the ~30% of files that were back-dated.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections import defaultdict
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from floor import Floor

AGENT = "BENCH"
WORDS = (
    "customer prefers email follow-up invoices quarterly review migration oracle schema "
    "deadline project alpha beta gamma release notes pending approved blocked meeting "
    "summary contact timezone europe berlin tea coffee format markdown tables bullet"
).split()


def markdown(i: int, j: int, rng: random.Random, size: int = 2000) -> str:
    """A ~``size``-character Markdown note, unique per (store, file)."""
    lines = [f"# Topic {i}-{j}", "", f"- status {i}-{j}: open", "", "## Facts"]
    k = 0
    while sum(len(x) + 1 for x in lines) < size - 40:
        lines.append(f"- fact {k}: " + " ".join(rng.choice(WORDS) for _ in range(8)))
        k += 1
    lines += ["", "## Log", f"- created for store {i}", ""]
    return "\n".join(lines)


def file_paths(files: int) -> list[str]:
    """F paths: a third at the root, the rest in two levels of directories."""
    out = []
    for j in range(files):
        if j % 3 == 0:
            out.append(f"/memories/topic-{j:03d}.md")
        else:
            out.append(f"/memories/projects/p{j % 4}/note-{j:03d}.md")
    return out


class Recorder:
    """Latencies in nanoseconds per (side, operation); round trips per (side, operation)."""

    def __init__(self) -> None:
        self.ns: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.round_trips: dict[tuple[str, str], list[int]] = defaultdict(list)

    def time(self, side: str, op: str, fn: Callable[[], Any], *, record: bool = True) -> Any:
        t0 = time.perf_counter_ns()
        out = fn()
        t1 = time.perf_counter_ns()
        if record:
            self.ns[(side, op)].append(t1 - t0)
        return out


class StatementCounter:
    """Counts the statements one SQLAlchemy connection sends, SAVEPOINT/RELEASE included,
    BEGIN/COMMIT/ROLLBACK excluded (not counted on either side).

    SQLite: every statement the driver runs (``sqlite3``'s trace callback), so reads that the
    library runs on the raw cursor (``dbmemory.db.raw``) are counted like the others; elsewhere
    a ``before_cursor_execute`` listener on the connection's statements."""

    def __init__(self, engine: Engine, conn: sa.Connection) -> None:
        self.engine = engine
        self.conn = conn
        self.dbapi = conn.connection.dbapi_connection
        self.traced = engine.dialect.name == "sqlite"
        self.count = 0
        self.log: list[str] = []

    def __enter__(self) -> StatementCounter:
        if self.traced:
            self.conn.connection.driver_connection.set_trace_callback(self._count)
        else:
            sa.event.listen(self.engine, "before_cursor_execute", self._on)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.traced:
            self.conn.connection.driver_connection.set_trace_callback(None)
        else:
            sa.event.remove(self.engine, "before_cursor_execute", self._on)

    def _count(self, statement: str) -> None:
        text = statement.strip().upper()
        if text.startswith("BEGIN") or text in ("COMMIT", "ROLLBACK"):
            return
        self.count += 1
        self.log.append(statement.split("\n")[0][:80])

    def _on(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if conn.connection.dbapi_connection is not self.dbapi:
            return  # another connection (e.g. a touch connection)
        self._count(statement)


def check(out: str, what: str) -> str:
    if out.startswith("Error"):
        raise RuntimeError(f"{what} failed: {out[:300]}")
    return out


def run_workload(
    engine: Engine,
    floor: Floor,
    *,
    stores: int,
    files: int,
    warmup_stores: int = 3,
    seed: int = 5,
    unit: str = "turn",
    progress: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Run the workload; return latencies, round trips and expiry figures for both sides."""
    from dbmemory import MemoryTool, enable_for_agent
    from dbmemory.store.units import mark_single_unit

    rec = Recorder()
    rng = random.Random(seed)
    paths = file_paths(files)
    with engine.begin() as c:
        enable_for_agent(c, AGENT, scope="user")
    conn = engine.connect()
    try:
        for i in range(-warmup_stores, stores):
            warm = i < 0
            counter = StatementCounter(engine, conn) if warm else None
            key = f"shared:floor-{i + warmup_stores:05d}"
            texts = [markdown(i, j, rng) for j in range(files)]
            # turn start: the tool resolves the agent's store (one SELECT of the agent config)
            with conn.begin():
                tool = rec.time("lib", "turn start", lambda: MemoryTool(conn, AGENT, user_id=f"u{i + warmup_stores}"), record=not warm)

            def lib(op: str, args: dict[str, Any]) -> str:
                def call() -> str:
                    with conn.begin() as trans:
                        if unit == "turn":  # as a turn runs a tool call: its transaction's one unit
                            mark_single_unit(conn, trans)
                        return tool.execute(args)

                if counter is not None:
                    before = counter.count
                    with counter:
                        out = call()
                    rec.round_trips[("lib", op)].append(counter.count - before)
                    return check(out, op)
                return check(rec.time("lib", op, call), op)

            def flo(op: str, fn: Callable[[], str]) -> str:
                before = floor.statements
                out = rec.time("floor", op, fn, record=not warm)
                if warm:
                    rec.round_trips[("floor", op)].append(floor.statements - before)
                return check(out, "floor " + op)

            for path, text in zip(paths, texts):
                lib("create", {"command": "create", "path": path, "file_text": text})
                flo("create", lambda: floor.create(key, path, text))
            lib("view directory", {"command": "view", "path": "/memories"})
            flo("view directory", lambda: floor.view_dir(key))
            for path in paths:
                lib("view file", {"command": "view", "path": path})
                flo("view file", lambda: floor.view_file(key, path))
            for j, path in enumerate(paths):
                old, new = f"status {i}-{j}: open", f"status {i}-{j}: closed"
                lib("str_replace", {"command": "str_replace", "path": path, "old_str": old, "new_str": new})
                flo("str_replace", lambda: floor.str_replace(key, path, old, new))
            for j, path in enumerate(paths):
                note = f"- inserted note {i}-{j}"
                lib("insert", {"command": "insert", "path": path, "insert_line": 2, "insert_text": note})
                flo("insert", lambda: floor.insert(key, path, 2, note))
            src, dst = paths[0], "/memories/archive/" + paths[0].rsplit("/", 1)[1]
            lib("rename", {"command": "rename", "old_path": src, "new_path": dst})
            flo("rename", lambda: floor.rename(key, src, dst))
            victim = paths[1 % files]
            lib("delete", {"command": "delete", "path": victim})
            flo("delete", lambda: floor.delete(key, victim))
            if i >= 0 and (i + 1) % max(1, stores // 10) == 0:
                progress(f"  workload: {i + 1}/{stores} stores")
    finally:
        conn.close()
    expiry = run_expiry(engine, floor)
    return {"rec": rec, "expiry": expiry}


def backdate(engine: Engine, store_keys_like: str, fraction_mod: int = 10, below: int = 3,
             days: int = 40) -> int:
    """Set ``last_accessed_at`` ``days`` back on ~``below/fraction_mod`` of the matching files."""
    from dbmemory.db.schema import files, stores

    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
    ids = sa.select(stores.c.store_id).where(stores.c.store_key.like(store_keys_like))
    stmt = (
        sa.update(files)
        .where(files.c.store_id.in_(ids), (files.c.file_id % fraction_mod) < below)
        .values(last_accessed_at=old)
    )
    with engine.begin() as c:
        return c.execute(stmt).rowcount


def run_expiry(engine: Engine, floor: Floor) -> dict[str, Any]:
    """Back-date ~30% of each side's files, then expire them: dbmemory, then the floor."""
    from dbmemory.store.expiry import expire_files_committing

    out: dict[str, Any] = {}
    n = backdate(engine, "user:BENCH:%")
    t0 = time.perf_counter()
    deleted = expire_files_committing(engine, days=30)
    t = time.perf_counter() - t0
    out["lib"] = {"backdated": n, "deleted": deleted, "seconds": t, "rows_per_s": deleted / t if t else None}
    n = backdate(engine, "shared:floor-%")
    cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=30)
    t0 = time.perf_counter()
    deleted = floor.expire(cutoff)
    t = time.perf_counter() - t0
    out["floor"] = {"backdated": n, "deleted": deleted, "seconds": t, "rows_per_s": deleted / t if t else None}
    return out
