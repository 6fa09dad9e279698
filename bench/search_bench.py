"""Injection latency with the searched block: search + assembly for a user with many episodes.

    PYTHONPATH=src python bench/search_bench.py                      # sqlite, postgres, mysql
    PYTHONPATH=src python bench/search_bench.py --backends sqlite --episodes 20000 --queries 300

Each backend gets a scratch database (SQLite: a temporary file; PostgreSQL/MariaDB:
``dbm_search_bench``, dropped at the end), migrated with ``dbmemory.db.migrate.upgrade``. One
user gets ``--episodes`` episodes (default 20,000) and four other users ``--episodes / 4`` each,
so the index holds other users' rows too. Texts are the LoCoMo dialog turns of
``--locomo PATH`` (default ``$DBMEMORY_LOCOMO``; read, never copied), else generated sentences; the queries are LoCoMo's questions (or sentences). Each query runs
:func:`dbmemory.agent.injection.injected_memory` (the turn's own load, search and assembly) on
a warm connection; the report gives p50/p95/max in milliseconds (wall clock), the client
thread's CPU time per query (p50/p95: on SQLite the whole cost, on the servers the client's
part; far less disturbed than the wall clock when other jobs share the cores), the load average
before and after, and the mean tokens of the searched block. Targets (wall clock): p95 <= 20 ms
on SQLite, <= 30 ms on PostgreSQL and MariaDB.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from dbmemory.agent.injection import injected_memory
from dbmemory.db import migrate
from dbmemory.db.engine import create_engine
from dbmemory.db.schema import episodes
from dbmemory.items.model import user_key_of

LOCOMO = Path(os.environ.get("DBMEMORY_LOCOMO", "locomo10.json"))
SERVERS = {
    "postgres": os.environ.get("DBMEMORY_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/"),
    "mysql": os.environ.get("DBMEMORY_BENCH_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/"),
}
DATABASE = "dbm_search_bench"
T0 = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc)


def corpus(path: Path) -> tuple[list[str], list[str]]:
    """(turn texts, questions) from LoCoMo, or generated ones."""
    if path.exists():
        data = json.loads(path.read_text())
        turns, questions = [], []
        for sample in data:
            conv = sample["conversation"]
            for key, value in conv.items():
                if key.startswith("session_") and isinstance(value, list):
                    turns.extend(t["text"] for t in value if t.get("text"))
            questions.extend(q["question"] for q in sample["qa"])
        return turns, questions
    rng = random.Random(7)
    words = "hike dog paint guitar trip sister school work garden cook book city beach run".split()
    turns = [" ".join(rng.choice(words) for _ in range(15)) for _ in range(5000)]
    return turns, [" ".join(rng.choice(words) for _ in range(6)) for _ in range(500)]


def _server_engine(name: str) -> sa.Engine:
    base = sa.make_url(SERVERS[name])
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f"DROP DATABASE IF EXISTS {DATABASE}")
        c.exec_driver_sql(f"CREATE DATABASE {DATABASE}")
    admin.dispose()
    return create_engine(base.set(database=DATABASE))


def _drop(name: str) -> None:
    admin = sa.create_engine(sa.make_url(SERVERS[name]), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f"DROP DATABASE IF EXISTS {DATABASE}")
    admin.dispose()


def fill(engine: sa.Engine, turns: list[str], n: int) -> None:
    rows = []
    users = [("bench-user", n)] + [(f"other-{i}", n // 4) for i in range(4)]
    for user, count in users:
        key = user_key_of(user)
        for i in range(count):
            user_text = turns[i % len(turns)]
            reply = turns[(i + 1) % len(turns)]
            text = user_text + "\n" + reply
            when = T0 + dt.timedelta(hours=i)
            rows.append({
                "org_id": "default", "user_key": key, "chat_id": f"s{i // 20}", "turn_at": when,
                "episode_text": text, "user_chars": len(user_text), "char_count": len(text),
                "retention_class": "episode", "created_at": when, "expires_at": None,
            })
    with engine.begin() as c:
        for i in range(0, len(rows), 2000):
            c.execute(sa.insert(episodes), rows[i : i + 2000])
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql("ANALYZE dbm_episodes")
    elif engine.dialect.name == "sqlite":
        with engine.begin() as c:
            c.exec_driver_sql("INSERT INTO dbm_episodes_fts(dbm_episodes_fts) VALUES ('optimize')")


def measure(engine: sa.Engine, questions: list[str], queries: int) -> dict[str, float]:
    now = T0 + dt.timedelta(days=3000)
    times, cpu, tokens = [], [], []
    with engine.connect() as conn:
        for q in questions[:10]:  # warm the caches and the tokenizer
            injected_memory(conn, user_id="bench-user", question=q, model="gpt-4o-mini", now=now)
            conn.rollback()
        for q in questions[:queries]:
            started, started_cpu = time.perf_counter(), time.thread_time()
            report = injected_memory(conn, user_id="bench-user", question=q, model="gpt-4o-mini", now=now)
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
            conn.rollback()
            tokens.append(report.search_tokens)
    times.sort()
    cpu.sort()
    return {
        "p50_ms": statistics.median(times),
        "p95_ms": times[int(len(times) * 0.95) - 1],
        "max_ms": times[-1],
        "cpu_p50_ms": statistics.median(cpu),
        "cpu_p95_ms": cpu[int(len(cpu) * 0.95) - 1],
        "search_tokens_mean": statistics.mean(tokens),
        "queries": len(times),
    }


def _load() -> str:
    """``/proc/loadavg``'s 1/5/15-minute load averages (empty where there is none)."""
    try:
        return "/".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres,mysql")
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    args = parser.parse_args()
    turns, questions = corpus(args.locomo)
    random.Random(11).shuffle(questions)
    print(f"load average before: {_load()} ({os.cpu_count()} cores)")
    print("| backend | episodes (user) | queries | p50 ms | p95 ms | max ms | client CPU p50 ms | "
          "client CPU p95 ms | search tokens (mean) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in [b.strip() for b in args.backends.split(",") if b.strip()]:
        tmp = None
        if name == "sqlite":
            tmp = tempfile.TemporaryDirectory()
            engine = create_engine(f"sqlite:///{tmp.name}/bench.db")
        else:
            engine = _server_engine(name)
        try:
            migrate.upgrade(engine)
            fill(engine, turns, args.episodes)
            r = measure(engine, questions, args.queries)
            print(f"| {name} | {args.episodes:,} | {r['queries']} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                  f"{r['max_ms']:.1f} | {r['cpu_p50_ms']:.1f} | {r['cpu_p95_ms']:.1f} | "
                  f"{r['search_tokens_mean']:.0f} |")
        finally:
            engine.dispose()
            if tmp is not None:
                tmp.cleanup()
            else:
                _drop(name)
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
