"""``view /memories`` as a store grows (issue 19: a listing bounded by what it shows).

    PYTHONPATH=src python bench/listing_bench.py --backends sqlite,postgresql,mysql

For each layout, one shared store per size (10, 1,000, 10,000 files by default) is loaded in
bulk (its counters set from the rows), then ``view /memories`` runs through one MemoryTool per
store, each call in a transaction of its own, the sizes interleaved call by call so machine load
hits them alike. Prints the p50 per size in microseconds and the ratio of the largest to the
smallest (target ≤ 3), with the load average before and after (a 1-minute load above the core
count is marked LOADED).

Layouts: ``fill`` (bench/extras.py's store-size view: every file in ``/memories/fill/``, so the
listing shows one directory and the files that fit), ``flat`` (every file directly in
``/memories``), ``deep`` (``/memories/dNN/sNN/fNN.md``: second-level directories, each of whose
sizes is one aggregate).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as bench_run  # noqa: E402


def _paths(layout: str, n: int) -> list[str]:
    if layout == "fill":
        return [f"/memories/fill/f{j:05d}.md" for j in range(n)]
    if layout == "flat":
        return [f"/memories/f{j:05d}.md" for j in range(n)]
    return [f"/memories/d{j // 1000:02d}/s{(j // 10) % 100:02d}/f{j % 10}.md" for j in range(n)]


def _load(engine: Any, code: str, paths: list[str]) -> None:
    import sqlalchemy as sa

    from dbmemory import enable_for_agent
    from dbmemory.core.clock import utcnow
    from dbmemory.core.model import StoreRef
    from dbmemory.core.paths import path_hash
    from dbmemory.db.schema import files, stores
    from dbmemory.store import files as files_api

    body = "# note\n- a remembered fact about the user\n"
    with engine.begin() as c:
        enable_for_agent(c, code.upper(), scope="shared", store_code=code, max_files=len(paths) + 10)
        ref = StoreRef(store_key=f"shared:{code}", scope="shared", store_code=code)
        sid = files_api.put_file(c, ref, paths[0], body).store_id
        now = utcnow()
        rows = [{"store_id": sid, "file_path": p, "path_hash": path_hash(p), "body": body,
                 "char_count": len(body), "version_no": 1, "expiry_exempt": False,
                 "created_at": now, "updated_at": now, "last_accessed_at": now} for p in paths[1:]]
        for a in range(0, len(rows), 2000):
            c.execute(sa.insert(files), rows[a : a + 2000])
        c.execute(sa.update(stores).where(stores.c.store_id == sid)
                  .values(file_count=len(paths), total_chars=len(paths) * len(body)))


def _load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def run_backend(kind: str, args: argparse.Namespace) -> list[str]:
    from dbmemory import MemoryTool, create_engine, upgrade

    bench_run.create_scratch(kind, args)
    url = bench_run.scratch_url(kind, args, Path(tempfile.mkdtemp()))
    engine = create_engine(url)
    upgrade(engine)
    out = []
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        for layout in args.layouts.split(","):
            for size in sizes:
                _load(engine, f"{layout}{size}", _paths(layout, size))
            if kind == "postgresql":
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                    c.exec_driver_sql("ANALYZE")
            elif kind == "sqlite":
                with engine.begin() as c:
                    c.exec_driver_sql("ANALYZE")
            times: dict[int, list[int]] = {s: [] for s in sizes}
            chars: dict[int, int] = {}
            with engine.connect() as conn:
                tools = {s: MemoryTool(conn, f"{layout}{s}".upper()) for s in sizes}
                conn.commit()
                for i in range(args.samples + 5):
                    for s in sizes:
                        t0 = time.perf_counter_ns()
                        with conn.begin():
                            text = tools[s].execute({"command": "view", "path": "/memories"})
                        t1 = time.perf_counter_ns()
                        if text.startswith("Error"):
                            raise RuntimeError(text[:300])
                        chars[s] = len(text)
                        if i >= 5:
                            times[s].append(t1 - t0)
            p50 = {s: statistics.median(v) / 1000 for s, v in times.items()}
            ratio = p50[sizes[-1]] / p50[sizes[0]]
            cells = ", ".join(f"{s:,} files {p50[s]:,.0f} µs ({chars[s]:,} chars)" for s in sizes)
            out.append(f"{kind} {layout}: {cells}; {sizes[-1]:,} ÷ {sizes[0]:,} = {ratio:.2f}")
            print(out[-1], flush=True)
    finally:
        engine.dispose()
        bench_run.drop_scratch(kind, args)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", default="sqlite,postgresql,mysql")
    p.add_argument("--sizes", default="10,1000,10000")
    p.add_argument("--layouts", default="fill,flat,deep")
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--postgres-url", default=os.environ.get("DBMEMORY_BENCH_POSTGRES_URL",
                   os.environ.get("DBMEMORY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")))
    p.add_argument("--mysql-url", default=os.environ.get("DBMEMORY_BENCH_MYSQL_URL",
                   os.environ.get("DBMEMORY_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/mysql")))
    p.add_argument("--database", default="dbm_bench_listing")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)
    before = os.getloadavg()
    print(f"load before {_load_avg()} on {os.cpu_count()} cores", flush=True)
    for kind in args.backends.split(","):
        run_backend(kind, args)
    after = os.getloadavg()
    loaded = max(before[0], after[0]) > (os.cpu_count() or 1)
    print(f"load after {_load_avg()}{' LOADED' if loaded else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
