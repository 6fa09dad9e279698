"""Expiry throughput, dbmemory vs the floor, alternating in one process (issue 12).

    PYTHONPATH=src python bench/expiry_rounds.py mysql --rows 5000 --rounds 6

Loads ``2 * rounds * rows / 5`` shared stores of 5 files (bench/scale.py's layout) into a
scratch database, then per round back-dates ``rows`` files for dbmemory
(``expire_files_committing``, batches of 1,000, audit events and store counters included) and
as many for the floor (bench/floor.py's batch loop), so both sides see the same load. Prints
rows/s per side and lib ÷ floor throughput (target ≥ 0.8). bench/run.py's at-scale expiry
runs each side once, which on a loaded machine swings by 2x between runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as bench_run  # noqa: E402
import scale  # noqa: E402
from floor import Floor  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("backend", choices=("sqlite", "postgresql", "mysql"))
    p.add_argument("--rows", type=int, default=5000, help="files expired per side and round")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--table-files", type=int, default=0,
                   help="load extra untouched stores so dbm_files holds at least this many files "
                        "(issue 19: 100,000 of 500,000 is --rows 50000 --rounds 1 --table-files 500000)")
    p.add_argument("--postgres-url", default=os.environ.get("DBMEMORY_BENCH_POSTGRES_URL",
                   "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"))
    p.add_argument("--mysql-url", default=os.environ.get("DBMEMORY_BENCH_MYSQL_URL",
                   "mysql+pymysql://root@127.0.0.1:3306/mysql"))
    p.add_argument("--database", default="dbm_bench_expiry")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)

    from dbmemory import create_engine, upgrade
    from dbmemory.metrics import default_memory_metrics
    from dbmemory.store.expiry import expire_files_committing

    default_memory_metrics()  # its first use imports modules: keep that out of the timing
    bench_run.create_scratch(args.backend, args)
    url = bench_run.scratch_url(args.backend, args, Path(tempfile.mkdtemp()))
    engine = create_engine(url)
    upgrade(engine)
    floor = Floor(args.backend, url)
    try:
        n_stores = max(1, args.rows // len(scale.SCALE_FILES))
        loaded = 2 * n_stores * args.rounds
        extra = max(0, args.table_files // len(scale.SCALE_FILES) - loaded)
        scale.bulk_load(floor, 0, loaded + extra)
        seconds = {"lib": 0.0, "floor": 0.0}
        rows = {"lib": 0, "floor": 0}
        for r in range(args.rounds):
            base = 2 * n_stores * r
            scale._backdate_range(engine, base, base + n_stores - 1)
            t0 = time.perf_counter()
            rows["lib"] += expire_files_committing(engine, days=30)
            seconds["lib"] += time.perf_counter() - t0
            scale._backdate_range(engine, base + n_stores, base + 2 * n_stores - 1)
            cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=30)
            t0 = time.perf_counter()
            rows["floor"] += floor.expire(cutoff)
            seconds["floor"] += time.perf_counter() - t0
        lib, flo = rows["lib"] / seconds["lib"], rows["floor"] / seconds["floor"]
        load = "/".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"table {(loaded + extra) * len(scale.SCALE_FILES):,} files; "
              f"{args.backend}: lib {lib:,.0f} rows/s, floor {flo:,.0f} rows/s, lib/floor "
              f"{lib / flo:.2f} ({rows['lib']:,} and {rows['floor']:,} files, load {load})")
    finally:
        floor.close()
        engine.dispose()
        if not args.keep:
            bench_run.drop_scratch(args.backend, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
