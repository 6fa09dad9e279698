"""Scaling: view latency with 1k, 10k and 100k stores (5 files each), expiry on 100k+ rows.

Stores are bulk-loaded through the raw driver (``COPY`` on PostgreSQL, ``executemany`` on
SQLite and PyMySQL) as shared stores ``shared:scale-NNNNNN`` with 5 files of ~200 characters,
so the tool can open them with ``MemoryTool.for_store``. At each level, ``samples`` random
stores are viewed (directory, then one file) through a fresh tool (as at the start of a turn)
and through the floor.
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
import time
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from floor import Floor, path_hash

SCALE_FILES = ("/memories/profile.md", "/memories/todo.md", "/memories/notes/a.md",
               "/memories/notes/b.md", "/memories/projects/x/readme.md")


def _body(n: int, j: int) -> str:
    return f"# store {n} file {j}\n" + "- a short remembered fact about the user\n" * 4


def bulk_load(floor: Floor, start: int, stop: int) -> float:
    """Insert stores ``start..stop-1`` with 5 files each; return seconds taken."""
    t0 = time.perf_counter()
    now = floor.now()
    keys = [f"shared:scale-{n:06d}" for n in range(start, stop)]
    chunk = 20_000
    for a in range(0, len(keys), chunk):
        part = keys[a : a + chunk]
        floor.begin()
        floor.cur.executemany(
            floor.sql(
                "INSERT INTO dbm_stores (store_key, scope_name, agent_code, store_code, created_at,"
                " updated_at, file_count, total_chars) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            ),
            [
                (k, "shared", None, k.split(":", 1)[1], now, now, len(SCALE_FILES),
                 sum(len(_body(int(k.rsplit("-", 1)[1]), j)) for j in range(len(SCALE_FILES))))
                for k in part
            ],
        )
        floor.cur.execute(
            floor.sql("SELECT store_id, store_key FROM dbm_stores WHERE store_key BETWEEN %s AND %s"),
            (part[0], part[-1]),
        )
        ids = floor.cur.fetchall()
        rows = []
        for store_id, key in ids:
            n = int(key.rsplit("-", 1)[1])
            for j, path in enumerate(SCALE_FILES):
                body = _body(n, j)
                rows.append((store_id, path, path_hash(path), body, len(body), 1, False, now, now, now))
        cols = ("store_id, file_path, path_hash, body, char_count, version_no, expiry_exempt,"
                " created_at, updated_at, last_accessed_at")
        if floor.kind == "postgresql":
            with floor.cur.copy(f"COPY dbm_files ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            floor.cur.executemany(
                floor.sql(f"INSERT INTO dbm_files ({cols}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"),
                rows,
            )
        floor.commit()
    if floor.kind == "postgresql":
        floor.conn.autocommit = True
        floor.cur.execute("ANALYZE dbm_files")
        floor.cur.execute("ANALYZE dbm_stores")
        floor.conn.autocommit = False
    elif floor.kind == "sqlite":
        floor.cur.execute("ANALYZE")
    else:
        floor.cur.execute("ANALYZE TABLE dbm_files, dbm_stores")
        floor.cur.fetchall()
        floor.conn.commit()
    return time.perf_counter() - t0


def _pct(values: list[int], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] / 1000


def measure_views(engine: Engine, floor: Floor, n_stores: int, samples: int, rng: random.Random) -> dict[str, Any]:
    from dbmemory import MemoryTool

    lat: dict[str, list[int]] = {"lib view directory": [], "lib view file": [],
                                  "floor view directory": [], "floor view file": []}
    from workload import StatementCounter

    path = SCALE_FILES[2]
    conn = engine.connect()
    round_trips: dict[str, int] = {}
    try:
        code = "scale-000000"
        for op, args in (("lib view directory", {"command": "view", "path": "/memories"}),
                         ("lib view file", {"command": "view", "path": path})):
            tool = MemoryTool.for_store(conn, code)
            with StatementCounter(engine, conn) as counter:
                with conn.begin():
                    tool.execute(args)
            round_trips[op] = counter.count
        for k in range(samples + 20):
            n = rng.randrange(n_stores)
            code = f"scale-{n:06d}"
            tool = MemoryTool.for_store(conn, code)
            record = k >= 20  # the first 20 warm caches
            for op, fn in (
                ("lib view directory", lambda: tool.execute({"command": "view", "path": "/memories"})),
                ("lib view file", lambda: tool.execute({"command": "view", "path": path})),
            ):
                t0 = time.perf_counter_ns()
                with conn.begin():
                    out = fn()
                t1 = time.perf_counter_ns()
                if out.startswith("Error"):
                    raise RuntimeError(out)
                if record:
                    lat[op].append(t1 - t0)
            for op, ffn in (
                ("floor view directory", lambda: floor.view_dir("shared:" + code)),
                ("floor view file", lambda: floor.view_file("shared:" + code, path)),
            ):
                t0 = time.perf_counter_ns()
                ffn()
                t1 = time.perf_counter_ns()
                if record:
                    lat[op].append(t1 - t0)
    finally:
        conn.close()
    return {op: {"p50_us": _pct(v, 0.5), "p99_us": _pct(v, 0.99),
                 "mean_us": statistics.fmean(v) / 1000, "n": len(v),
                 "round_trips": round_trips.get(op, 1)} for op, v in lat.items()}


def run_scaling(engine: Engine, floor: Floor, levels: list[int], samples: int,
                expiry_rows: int, progress: Callable[[str], None]) -> dict[str, Any]:
    rng = random.Random(7)
    out: dict[str, Any] = {"levels": {}, "load_seconds": {}}
    loaded = 0
    for level in levels:
        t = bulk_load(floor, loaded, level)
        out["load_seconds"][level] = t
        progress(f"  scale: loaded {level:,} stores ({level * len(SCALE_FILES):,} files) in {t:.1f}s")
        loaded = level
        out["levels"][level] = measure_views(engine, floor, level, samples, rng)
    if expiry_rows:
        out["expiry"] = expire_at_scale(engine, floor, loaded, expiry_rows, progress)
    return out


def _backdate_range(engine: Engine, first: int, last: int) -> int:
    from dbmemory.db.schema import files, stores

    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=40)
    ids = sa.select(stores.c.store_id).where(
        stores.c.store_key.between(f"shared:scale-{first:06d}", f"shared:scale-{last:06d}")
    )
    with engine.begin() as c:
        return c.execute(sa.update(files).where(files.c.store_id.in_(ids)).values(last_accessed_at=old)).rowcount


def expire_at_scale(engine: Engine, floor: Floor, loaded: int, rows: int,
                    progress: Callable[[str], None]) -> dict[str, Any]:
    """Back-date ``rows`` files (whole stores), expire them with dbmemory; then another
    ``rows`` for the floor. The table holds ``loaded * 5`` files when it starts."""
    from dbmemory.store.expiry import expire_files_committing

    per = len(SCALE_FILES)
    n_stores = max(1, rows // per)
    if 2 * n_stores > loaded:
        n_stores = loaded // 2
    out: dict[str, Any] = {"table_files": loaded * per}
    n = _backdate_range(engine, 0, n_stores - 1)
    t0 = time.perf_counter()
    deleted = expire_files_committing(engine, days=30)
    t = time.perf_counter() - t0
    out["lib"] = {"backdated": n, "deleted": deleted, "seconds": t, "rows_per_s": deleted / t}
    progress(f"  scale: dbmemory expired {deleted:,} of {loaded * per:,} files in {t:.1f}s")
    n = _backdate_range(engine, n_stores, 2 * n_stores - 1)
    cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=30)
    t0 = time.perf_counter()
    deleted = floor.expire(cutoff)
    t = time.perf_counter() - t0
    out["floor"] = {"backdated": n, "deleted": deleted, "seconds": t, "rows_per_s": deleted / t}
    progress(f"  scale: floor expired {deleted:,} files in {t:.1f}s")
    return out
