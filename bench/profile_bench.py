"""Per-turn profile load (issue 3's ``load_user_memory``): cold and warm.

``samples`` users each get a ~1,800-token profile (under the 2,000-token budget, so nothing is
truncated). *Cold* is the first load of each user's profile in this process (the tokenizer
itself is loaded once before, and reported apart); *warm* is the next load of the same,
unchanged profile. Each load is one committed transaction on a held connection, as a turn
does it. The floor is the one ``SELECT`` of the file by store key through the raw driver.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any, Callable

from sqlalchemy.engine import Engine

MODEL = "gpt-4o"
FACTS = ("prefers concise answers with code", "works on the billing migration to PostgreSQL",
         "timezone Europe/Berlin, meetings before 15:00", "asked about Oracle CLOB limits",
         "likes tables over prose", "team lead of data platform", "follow up on the Q3 audit",
         "uses SQLAlchemy Core, not the ORM", "reads German and English", "on call every 4th week")


def _summary(ns: list[int]) -> dict[str, float]:
    s = sorted(ns)

    def pct(q: float) -> float:
        return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] / 1000

    return {"n": len(s), "p50_us": pct(0.5), "p99_us": pct(0.99), "mean_us": statistics.fmean(s) / 1000}


def make_profile(user_id: str, target_tokens: int, count: Callable[[str], int], rng: random.Random) -> str:
    from dbmemory.profile import SECTIONS, new_profile, render_profile

    profile = new_profile(user_id)
    lines: dict[str, list[str]] = {name: [] for name in SECTIONS}
    k = 0
    text = render_profile(profile)
    while count(text) < target_tokens:
        name = SECTIONS[k % len(SECTIONS)]
        lines[name].append(f"- {rng.choice(FACTS)} (note {k}, {rng.randrange(10**6)})")
        k += 1
        if k % 10 == 0:
            text = render_profile(profile.with_sections({n: "\n".join(v) for n, v in lines.items()}))
    return text


def run_profile_load(engine: Engine, load_user_memory: Any, samples: int) -> dict[str, Any]:
    from dbmemory.profile import UserMemoryConfig, count_tokens, profile_store_key, write_profile
    from floor import Floor

    rng = random.Random(11)
    t0 = time.perf_counter()
    count_tokens("warm the tokenizer", MODEL)
    tokenizer_load = time.perf_counter() - t0
    config = UserMemoryConfig()
    users = [f"bench-user-{n}" for n in range(samples)]
    template = make_profile("TEMPLATE", 1800, lambda t: count_tokens(t, MODEL), rng)
    with engine.begin() as c:
        for u in users:
            write_profile(c, u, template.replace("TEMPLATE", u, 1), expected_version=0)
    t0 = time.perf_counter_ns()
    count_tokens(template, MODEL)
    count_ns = time.perf_counter_ns() - t0
    cold: list[int] = []
    warm: list[int] = []
    conn = engine.connect()
    tokens = None
    try:
        for u in users:
            for bucket in (cold, warm):
                t0 = time.perf_counter_ns()
                with conn.begin():
                    state = load_user_memory(conn, u, config=config, model=MODEL)
                bucket.append(time.perf_counter_ns() - t0)
                assert state is not None and not state.truncated
                tokens = state.token_count
    finally:
        conn.close()
    floor = Floor(engine.dialect.name if engine.dialect.name != "mariadb" else "mysql",
                  engine.url.render_as_string(hide_password=False))
    fl: list[int] = []
    try:
        for u in users:
            key = profile_store_key(u, config.root_folder)
            t0 = time.perf_counter_ns()
            floor.view_file(key, "/memories/memory.md")
            fl.append(time.perf_counter_ns() - t0)
    finally:
        floor.close()
    return {
        "measured": True,
        "model": MODEL,
        "profile_tokens": tokens,
        "profile_chars": len(template),
        "tokenizer_load_s": tokenizer_load,
        "count_tokens_once_us": count_ns / 1000,
        "cold": _summary(cold),
        "warm": _summary(warm),
        "floor_select": _summary(fl),
        "note": f"{tokens} tokens; counting them once costs {count_ns / 1000:.0f} µs; "
                f"floor (one SELECT) p50 {_summary(fl)['p50_us']:.0f} µs",
    }
