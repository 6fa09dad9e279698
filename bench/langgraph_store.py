"""DbMemoryStore against LangGraph's own SqliteStore / PostgresStore, interleaved in one run.

    python bench/langgraph_store.py                       # sqlite and postgres, 40 items, 5 rounds
    python bench/langgraph_store.py --backends sqlite --items 40 --rounds 5

Each round times, on each side in turn: ``put`` of every item (40 items in 6 namespaces),
``get`` of every item, ``search`` of one namespace (limit 10) and ``list_namespaces``; the
figure is the median per call over the rounds, and the ratio dbmemory / LangGraph (below 1.0:
dbmemory faster). Both sides use the same database server (PostgreSQL: a scratch database
each, dropped at the end; SQLite: a temporary file each). The load average is printed first
(a run above the core count is marked LOADED and is not for publication).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from dbmemory.db.engine import create_engine
from dbmemory.integrations.langgraph import DbMemoryStore

PG_URL = os.environ.get("DBMEMORY_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/")
NAMESPACES = [("users", f"u{i}") for i in range(5)] + [("org",)]


def _items(n: int) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    return [
        (NAMESPACES[i % len(NAMESPACES)], f"k{i}", {"text": f"item {i} likes tea and rain", "n": i})
        for i in range(n)
    ]


def _ops(store: Any, items: list[Any]) -> dict[str, Callable[[], None]]:
    def put() -> None:
        for ns, key, value in items:
            store.put(ns, key, value)

    def get() -> None:
        for ns, key, _ in items:
            store.get(ns, key)

    return {
        "put": put,
        "get": get,
        "search": lambda: store.search(NAMESPACES[0], limit=10),
        "list_namespaces": lambda: store.list_namespaces(),
    }


def _calls(name: str, items: int) -> int:
    return items if name in ("put", "get") else 1


def _sqlite_pair(tmp: str) -> tuple[Any, Any, Callable[[], None]]:
    from langgraph.store.sqlite import SqliteStore  # optional: langgraph-checkpoint-sqlite

    ours = DbMemoryStore(create_engine(f"sqlite:///{tmp}/dbm.db"))
    ours.setup()
    cm = SqliteStore.from_conn_string(f"{tmp}/lg.db")
    theirs = cm.__enter__()
    theirs.setup()
    return ours, theirs, lambda: (cm.__exit__(None, None, None), ours._bind.dispose())


def _postgres_pair() -> tuple[Any, Any, Callable[[], None]]:
    from langgraph.store.postgres import PostgresStore  # optional: langgraph-checkpoint-postgres

    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        for db in ("dbm_bench_lg_ours", "dbm_bench_lg_theirs"):
            c.execute(sa.text(f"DROP DATABASE IF EXISTS {db}"))
            c.execute(sa.text(f"CREATE DATABASE {db}"))
    engine = create_engine(PG_URL.rstrip("/") + "/dbm_bench_lg_ours")
    ours = DbMemoryStore(engine)
    ours.setup()
    dsn = sa.make_url(PG_URL).set(drivername="postgresql", database="dbm_bench_lg_theirs")
    cm = PostgresStore.from_conn_string(dsn.render_as_string(hide_password=False))
    theirs = cm.__enter__()
    theirs.setup()

    def close() -> None:
        cm.__exit__(None, None, None)
        engine.dispose()
        with admin.connect() as c:
            for db in ("dbm_bench_lg_ours", "dbm_bench_lg_theirs"):
                c.execute(sa.text(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        admin.dispose()

    return ours, theirs, close


def run(backend: str, n_items: int, rounds: int) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs, close = _sqlite_pair(tmp) if backend == "sqlite" else _postgres_pair()
        try:
            items = _items(n_items)
            sides = {"dbmemory": _ops(ours, items), "langgraph": _ops(theirs, items)}
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(rounds + 1):  # the first round warms up and is dropped
                for name in ("put", "get", "search", "list_namespaces"):
                    for side, ops in sides.items():
                        t0 = time.perf_counter()
                        ops[name]()
                        times.setdefault((side, name), []).append(
                            (time.perf_counter() - t0) / _calls(name, n_items)
                        )
            return {
                name: (
                    statistics.median(times[("dbmemory", name)][1:]),
                    statistics.median(times[("langgraph", name)][1:]),
                )
                for name in ("put", "get", "search", "list_namespaces")
            }
        finally:
            close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    print(f"load {os.getloadavg()} on {cores} cores" + ("  LOADED: not for publication" if load > cores else ""))
    print("| backend | op | dbmemory µs | LangGraph µs | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for backend in args.backends.split(","):
        for name, (ours, theirs) in run(backend, args.items, args.rounds).items():
            print(f"| {backend} | {name} | {ours * 1e6:,.0f} | {theirs * 1e6:,.0f} | {ours / theirs:.2f}× |")


if __name__ == "__main__":
    main()
