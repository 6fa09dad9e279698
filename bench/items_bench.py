"""Per-turn memory assembly (issue 9): organisation memory + profile + selection over 100 items,
warm, against the profile load alone.

For each of ``--users`` users: a ~1,800-token profile, 100 auto items (so selection ranks: the
threshold is 20) and one organisation memory of ~150 tokens for everyone. Each measured turn is
what ``run_turn`` does before its first model call, on a held connection:

* ``profile``: one committed transaction running ``load_user_memory`` (the baseline);
* ``assembly``: one committed transaction running ``load_user_memory`` and the item loader
  (memory switch, settings, organisation memory, live items), then, outside it, the BM25
  selection of the top 10 for the turn's question and the rendering of the three blocks within
  their budgets (the system-prompt text the model gets).

Between two turns (not timed) the bench does what the post-processing of a turn does for the
next one: it counts the item lines not yet counted for the model
(:func:`dbmemory.items.inject.count_item_lines`, as ``agent.item_memory.after_turn`` does).

Warm = each user's second and later turns (tokenizer, caches and the driver's statement caches
are warm). Reported: p50/p99 in microseconds and the assembly/profile ratio of the p50s.

Run:  PYTHONPATH=src python bench/items_bench.py --backends sqlite,postgres [--users 50 --rounds 5]
(PostgreSQL from DBMEMORY_TEST_POSTGRES_URL; a fresh database ``dbm_items_bench`` is made there.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODEL = "gpt-4o"
QUESTIONS = (
    "Which database does my team use for billing?", "Remind me what I said about meetings.",
    "How do I prefer code reviews?", "What was the audit follow-up?", "Where do I live now?",
)
TOPICS = ("billing migration", "code reviews", "audit follow-up", "on-call rota", "meeting times",
          "Oracle CLOB limits", "SQLAlchemy Core", "data platform team", "German documentation",
          "quarterly reports", "night batch jobs", "PostgreSQL replicas", "test coverage")


def _p(ns: list[int], q: float) -> float:
    s = sorted(ns)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] / 1000


def _engine(backend: str, tmp: Path) -> sa.engine.Engine:
    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import upgrade

    if backend == "sqlite":
        url = f"sqlite:///{tmp / 'items_bench.db'}"
    else:
        base = sa.engine.make_url(os.environ.get("DBMEMORY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
        admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.exec_driver_sql("DROP DATABASE IF EXISTS dbm_items_bench")
            c.exec_driver_sql("CREATE DATABASE dbm_items_bench")
        admin.dispose()
        url = base.set(database="dbm_items_bench").render_as_string(hide_password=False)
    engine = create_engine(url)
    upgrade(engine)
    return engine


def seed(engine: sa.engine.Engine, users: list[str], rng: random.Random) -> None:
    from dbmemory.items import add_item, set_org_memory
    from dbmemory.profile import count_tokens, write_profile
    from profile_bench import make_profile

    template = make_profile("TEMPLATE", 1800, lambda t: count_tokens(t, MODEL), rng)
    org_text = "\n".join(
        f"- Policy {n}: answers about {TOPICS[n % len(TOPICS)]} cite the handbook, section {n}." for n in range(8)
    )
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=2)
    with engine.begin() as c:
        set_org_memory(c, "default", org_text, is_admin=True, actor="bench")
        for u in users:
            write_profile(c, u, template.replace("TEMPLATE", u, 1), expected_version=0)
            for n in range(100):
                topic = TOPICS[(n * 7 + len(u)) % len(TOPICS)]
                add_item(c, u, f"User mentioned {topic} (fact {n}, ref {rng.randrange(10**6)})", kind="auto",
                         confidence=0.9, now=start + dt.timedelta(seconds=n))


def measure(engine: sa.engine.Engine, users: list[str], rounds: int) -> dict[str, Any]:
    from dbmemory.items.inject import count_item_lines, memory_sections
    from dbmemory.items.turn_memory import choose, load_turn_items
    from dbmemory.profile import UserMemoryConfig
    from dbmemory.profile.load import load_user_memory, memory_prompt_section

    config = UserMemoryConfig()
    profile_ns: list[int] = []
    assembly_ns: list[int] = []
    conn = engine.connect()
    injected = 0
    try:
        for r in range(rounds + 1):
            for i, u in enumerate(users):
                question = QUESTIONS[(i + r) % len(QUESTIONS)]
                t0 = time.perf_counter_ns()
                with conn.begin():
                    state = load_user_memory(conn, u, config=config, model=MODEL)
                t1 = time.perf_counter_ns()
                with conn.begin():
                    state = load_user_memory(conn, u, config=config, model=MODEL)
                    loaded = load_turn_items(conn, org_id="default", user_id=u)
                selection = choose(loaded, question)
                settings = loaded.settings
                blocks, block = memory_sections(
                    org_memory=loaded.org_memory, profile_section=memory_prompt_section(state),
                    items=selection.items, model=MODEL,
                    org_max_tokens=settings.org_memory_token_budget, items_max_tokens=settings.item_token_budget,
                    lines=loaded.lines,
                )
                t2 = time.perf_counter_ns()
                # what the post-processing does after every turn (agent.item_memory.after_turn):
                # count the lines not counted yet for the model, so the next turn counts none
                count_item_lines(loaded.items, model=MODEL, lines=loaded.lines)
                assert selection.mode == "ranked" and len(blocks) == 3
                injected = len(block.items)
                if r > 0:  # round 0 warms caches
                    profile_ns.append(t1 - t0)
                    assembly_ns.append(t2 - t1)
    finally:
        conn.close()
    p50_profile, p50_assembly = _p(profile_ns, 0.5), _p(assembly_ns, 0.5)
    return {
        "turns": len(profile_ns),
        "profile_p50_us": p50_profile, "profile_p99_us": _p(profile_ns, 0.99),
        "assembly_p50_us": p50_assembly, "assembly_p99_us": _p(assembly_ns, 0.99),
        "assembly_mean_us": statistics.fmean(assembly_ns) / 1000,
        "ratio_p50": round(p50_assembly / p50_profile, 2),
        "items_injected": injected,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}",
        "users": args.users, "rounds": args.rounds, "results": {},
    }
    rng = random.Random(9)
    users = [f"bench-items-{n}" for n in range(args.users)]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            engine = _engine(backend, Path(tmp))
            seed(engine, users, rng)
            out["results"][backend] = measure(engine, users, args.rounds)
            engine.dispose()
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
