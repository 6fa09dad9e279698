"""dbmemory benchmark: the MEMORY tool against the raw-driver floor, scaling, start-up.

One command (see bench/README.md)::

    python bench/run.py --backends sqlite,postgres,mysql --stores 200 --files 20

Writes a Markdown report to stdout and ``bench/results/latest.md``, and every number with the
machine, versions and command to ``bench/results/latest.json``. PostgreSQL and MariaDB run in a
scratch database (``dbm_bench`` by default) that is created at the start and dropped at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TARGET_RATIO = 1.5
TARGET_ROUND_TRIPS = 3
TARGET_SCALE_RATIO = 1.5
TARGET_IMPORT_S = 0.2
TARGET_WARM_PROFILE_US = 300
OPS = ("turn start", "create", "view directory", "view file", "str_replace", "insert", "rename",
       "delete")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- databases -----------------------------------------------------------------------------------


def scratch_url(kind: str, args: argparse.Namespace, tmp: Path) -> str:
    from sqlalchemy.engine import make_url

    if kind == "sqlite":
        return f"sqlite:///{tmp / 'bench.db'}"
    base = make_url(args.postgres_url if kind == "postgresql" else args.mysql_url)
    return base.set(database=args.database).render_as_string(hide_password=False)


def create_scratch(kind: str, args: argparse.Namespace) -> None:
    from sqlalchemy.engine import make_url

    if kind == "postgresql":
        import psycopg

        u = make_url(args.postgres_url)
        with psycopg.connect(host=u.host, port=u.port or 5432, user=u.username,
                             password=u.password or None, dbname="postgres", autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
            c.execute(f'CREATE DATABASE "{args.database}"')
    elif kind == "mysql":
        import pymysql

        u = make_url(args.mysql_url)
        c = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, password=u.password or "")
        try:
            with c.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{args.database}`")
                cur.execute(f"CREATE DATABASE `{args.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        finally:
            c.close()


def drop_scratch(kind: str, args: argparse.Namespace) -> None:
    from sqlalchemy.engine import make_url

    if args.keep:
        return
    if kind == "postgresql":
        import psycopg

        u = make_url(args.postgres_url)
        with psycopg.connect(host=u.host, port=u.port or 5432, user=u.username,
                             password=u.password or None, dbname="postgres", autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
    elif kind == "mysql":
        import pymysql

        u = make_url(args.mysql_url)
        c = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, password=u.password or "")
        try:
            with c.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{args.database}`")
        finally:
            c.close()


def server_facts(kind: str, engine: Any) -> dict[str, Any]:
    import sqlalchemy as sa

    with engine.connect() as c:
        if kind == "sqlite":
            import sqlite3

            return {
                "version": sqlite3.sqlite_version,
                "journal_mode": c.exec_driver_sql("PRAGMA journal_mode").scalar(),
                "synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(
                    c.exec_driver_sql("PRAGMA synchronous").scalar()),
            }
        if kind == "postgresql":
            return {
                "version": c.exec_driver_sql("SHOW server_version").scalar(),
                "synchronous_commit": c.exec_driver_sql("SHOW synchronous_commit").scalar(),
                "fsync": c.exec_driver_sql("SHOW fsync").scalar(),
            }
        row = c.execute(sa.text("SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin")).one()
        return {"version": row[0], "innodb_flush_log_at_trx_commit": int(row[1]),
                "sync_binlog": int(row[2]), "log_bin": int(row[3])}


# -- statistics ----------------------------------------------------------------------------------


def summarize(ns: list[int]) -> dict[str, float]:
    s = sorted(ns)

    def pct(q: float) -> float:
        return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] / 1000

    total = sum(s) / 1e9
    return {"n": len(s), "ops_per_s": len(s) / total if total else 0.0, "p50_us": pct(0.5),
            "p99_us": pct(0.99), "mean_us": statistics.fmean(s) / 1000}


# -- start-up and profile --------------------------------------------------------------------------


def measure_startup(runs: int = 5) -> dict[str, Any]:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true")
    probe = ("import sys, time; t = time.perf_counter(); import dbmemory; "
             "d = time.perf_counter() - t; print(d, 'litellm' in sys.modules, len(sys.modules))")
    imports, wall = [], []
    litellm = False
    for _ in range(runs):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
        wall.append(time.perf_counter() - t0)
        d, lit, _n = out.stdout.split()
        imports.append(float(d))
        litellm = litellm or lit == "True"
    base = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        base.append(time.perf_counter() - t0)
    help_probe = ("import sys, time; t = time.perf_counter(); sys.argv = ['dbmemory', '--help']\n"
                  "from dbmemory.cli import main\n"
                  "try:\n    main()\nexcept SystemExit:\n    pass\n"
                  "print(time.perf_counter() - t, 'litellm' in sys.modules, file=sys.stderr)")
    help_wall, help_inproc = [], []
    help_litellm = False
    for _ in range(max(3, runs // 2)):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", help_probe], capture_output=True, text=True, env=env)
        help_wall.append(time.perf_counter() - t0)
        d, lit = out.stderr.strip().splitlines()[-1].split()
        help_inproc.append(float(d))
        help_litellm = help_litellm or lit == "True"
    exe = Path(sys.executable).with_name("dbmemory")
    script_wall = []
    if exe.exists():
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([str(exe), "--help"], capture_output=True, env=env)
            script_wall.append(time.perf_counter() - t0)
    # the slowest imports under `import dbmemory`
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import dbmemory"],
                         capture_output=True, text=True, env=env)
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            parts = [p.strip() for p in line[len("import time:"):].split("|")]
            if parts[0].isdigit():
                rows.append((int(parts[1]), parts[2].strip()))
    top = [{"module": m, "cumulative_ms": us / 1000} for us, m in sorted(rows, reverse=True)[:8]]
    return {
        "import_dbmemory_s": statistics.median(imports),
        "import_dbmemory_wall_s": statistics.median(wall),
        "python_startup_s": statistics.median(base),
        "litellm_imported_by_import": litellm,
        "help_inprocess_s": statistics.median(help_inproc),
        "help_wall_s": statistics.median(help_wall),
        "help_script_wall_s": statistics.median(script_wall) if script_wall else None,
        "litellm_imported_by_help": help_litellm,
        "slowest_imports": top,
    }


def measure_profile(engine: Any, samples: int) -> dict[str, Any]:
    """Per-turn profile load, cold and warm, if ``dbmemory.profile.load_user_memory`` exists."""
    try:
        from dbmemory.profile import load_user_memory  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001
        return {"measured": False, "reason": f"dbmemory.profile.load_user_memory not available ({type(exc).__name__})"}
    from profile_bench import run_profile_load

    return run_profile_load(engine, load_user_memory, samples)


# -- one backend -------------------------------------------------------------------------------------


def run_backend(kind: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import upgrade
    from floor import Floor
    from scale import run_scaling
    from workload import run_workload

    create_scratch(kind, args)
    url = scratch_url(kind, args, tmp)
    engine = create_engine(url)
    result: dict[str, Any] = {"backend": kind}
    try:
        upgrade(engine)
        result["server"] = server_facts(kind, engine)
        floor = Floor(kind, url)
        try:
            t0 = time.perf_counter()
            log(f"[{kind}] workload: {args.stores} stores x {args.files} files")
            w = run_workload(engine, floor, stores=args.stores, files=args.files, progress=log,
                             unit=args.unit)
            result["workload_seconds"] = time.perf_counter() - t0
            rec = w["rec"]
            ops: dict[str, Any] = {}
            for op in OPS:
                entry: dict[str, Any] = {}
                for side in ("lib", "floor"):
                    if rec.ns.get((side, op)):
                        entry[side] = summarize(rec.ns[(side, op)])
                    rts = rec.round_trips.get((side, op))
                    if rts:
                        entry.setdefault("round_trips", {})[side] = int(statistics.median(rts))
                        entry.setdefault("round_trips_max", {})[side] = max(rts)
                if "lib" in entry and "floor" in entry:
                    entry["ratio_p50"] = entry["lib"]["p50_us"] / entry["floor"]["p50_us"]
                    entry["ratio_mean"] = entry["lib"]["mean_us"] / entry["floor"]["mean_us"]
                ops[op] = entry
            result["ops"] = ops
            result["expiry"] = w["expiry"]
            import extras

            if args.sizes:
                log(f"[{kind}] store size: {args.sizes}")
                sizes = tuple(int(x) for x in args.sizes.split(",") if x)
                result["store_size"] = extras.store_size(engine, floor, sizes, args.size_samples)
            if args.workers and kind != "sqlite":
                log(f"[{kind}] shared-store concurrency: {args.workers}")
                counts = tuple(int(x) for x in args.workers.split(",") if x)
                result["concurrency"] = extras.concurrency(engine, counts, args.worker_ops)
            if args.latency_ms and kind != "sqlite":
                log(f"[{kind}] latency proxy: {args.latency_ms} ms per round trip")
                result["latency"] = extras.latency_view(kind, url, args.latency_ms, args.latency_samples)
            if args.profile_samples:
                result["profile"] = measure_profile(engine, args.profile_samples)
            if args.scale:
                levels = [int(x) for x in args.scale.split(",") if x]
                log(f"[{kind}] scaling: {levels}")
                t0 = time.perf_counter()
                result["scaling"] = run_scaling(engine, floor, levels, args.scale_samples,
                                                args.expiry_rows, log)
                result["scaling_seconds"] = time.perf_counter() - t0
        finally:
            floor.close()
    finally:
        engine.dispose()
        drop_scratch(kind, args)
    return result


# -- report ---------------------------------------------------------------------------------------


def _f(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def render(report: dict[str, Any]) -> str:
    out: list[str] = []
    m = report["machine"]
    out.append("# dbmemory benchmark\n")
    out.append(f"- command: `{report['command']}`")
    out.append(f"- date: {report['date']}  ·  commit: {report['git']}")
    lb, la = report.get("load_before"), report.get("load_after")
    if lb and la:
        out.append(f"- load average (1/5/15 min) before {lb[0]:.2f}/{lb[1]:.2f}/{lb[2]:.2f}, after "
                   f"{la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f} on {m['cores']} cores"
                   + ("  ·  **LOADED: the load exceeded the core count; compare ratios within this "
                      "run only**" if report.get("loaded") else ""))
    out.append(f"- machine: {m['cpu']} ({m['cores']} cores), {m['memory_gb']} GB RAM, {m['os']}")
    out.append(f"- Python {m['python']}; " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    for b in report["backends"]:
        if "server" in b:
            out.append(f"- {b['backend']}: " + ", ".join(f"{k}={v}" for k, v in b["server"].items()))
    out.append("- each operation is one committed transaction (default durability of each backend, "
               "listed above); lib = `MemoryTool.execute`, floor = minimal SQL on the raw driver "
               "(bench/floor.py). Round trips (RT) exclude BEGIN/COMMIT and include SAVEPOINT/RELEASE (none with `--unit turn`, the default: each command is its transaction's one unit, as in a turn); "
               "'7 (11)' = 7 typically, 11 for the store's first write (creates the store row). "
               "Views here reuse the turn's tool, which knows the store id after its first write; "
               "a fresh tool's view RTs are in the scaling table.\n")
    out.append("## Operations (lib vs floor)\n")
    out.append("| backend | operation | lib ops/s | lib p50 µs | lib p99 µs | floor ops/s | floor p50 µs "
               "| floor p99 µs | ratio p50 | ratio mean | RT lib | RT floor | ≤1.5× | ≤3 RT |")
    out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|:-:|")
    for b in report["backends"]:
        if "error" in b:
            out.append(f"| {b['backend']} | **failed**: {b['error']} |" + " |" * 12)
            continue
        for op, e in b["ops"].items():
            lib, flo = e.get("lib", {}), e.get("floor", {})
            rt = e.get("round_trips", {})
            rtmax = e.get("round_trips_max", {})
            rt_lib = "-" if "lib" not in rt else (
                f"{rt['lib']}" + (f" ({rtmax['lib']})" if rtmax.get("lib", rt["lib"]) != rt["lib"] else ""))
            ratio = e.get("ratio_p50")
            ok_ratio = "-" if ratio is None else ("yes" if ratio <= TARGET_RATIO else "**no**")
            ok_rt = "-" if "lib" not in rt else ("yes" if rt["lib"] <= TARGET_ROUND_TRIPS else "**no**")
            out.append(
                f"| {b['backend']} | {op} | {_f(lib.get('ops_per_s'))} | {_f(lib.get('p50_us'))} | "
                f"{_f(lib.get('p99_us'))} | {_f(flo.get('ops_per_s'))} | {_f(flo.get('p50_us'))} | "
                f"{_f(flo.get('p99_us'))} | {_f(ratio, 2)} | {_f(e.get('ratio_mean'), 2)} | "
                f"{rt_lib} | {rt.get('floor', '-')} | {ok_ratio} | {ok_rt} |"
            )
    if any("store_size" in b for b in report["backends"]):
        out.append("\n## Store size (files in one store), p50 µs, lib and floor alternating\n")
        out.append("| backend | files | lib create | floor create | lib view /memories | floor view | "
                   "view ×floor |")
        out.append("|---|--:|--:|--:|--:|--:|--:|")
        for b in report["backends"]:
            ss = b.get("store_size")
            if not ss:
                continue
            for size, v in ss.items():
                out.append(f"| {b['backend']} | {int(size):,} | {_f(v['lib create'])} | {_f(v['floor create'])} | "
                           f"{_f(v['lib view'])} | {_f(v['floor view'])} | {_f(v['lib view'] / v['floor view'], 2)} |")
            keys = list(ss)
            if len(keys) > 1:
                lo, hi = ss[keys[0]], ss[keys[-1]]
                out.append(f"| {b['backend']} | {int(keys[-1]):,} ÷ {int(keys[0]):,} | "
                           f"{_f(hi['lib create'] / lo['lib create'], 2)}× | "
                           f"{_f(hi['floor create'] / lo['floor create'], 2)}× | "
                           f"{_f(hi['lib view'] / lo['lib view'], 2)}× | | |")
    if any("concurrency" in b for b in report["backends"]):
        out.append("\n## One shared store, concurrent workers (each edits its own file)\n")
        out.append("| backend | workers | p50 µs | p99 µs | calls/s | p50 ÷ 1 worker | errors |")
        out.append("|---|--:|--:|--:|--:|--:|---|")
        for b in report["backends"]:
            cc = b.get("concurrency")
            if not cc:
                continue
            base = next(iter(cc.values()))["p50_us"]
            for w, v in cc.items():
                out.append(f"| {b['backend']} | {w} | {_f(v['p50_us'])} | {_f(v['p99_us'])} | "
                           f"{_f(v['ops_per_s'])} | {_f(v['p50_us'] / base, 2)} | {len(v['errors'])} |")
    if any("latency" in b for b in report["backends"]):
        out.append("\n## Network latency view (loopback delay proxy), p50 µs\n")
        out.append("| backend | added RTT ms | command | lib | floor | ×floor |")
        out.append("|---|--:|---|--:|--:|--:|")
        for b in report["backends"]:
            lv = b.get("latency")
            if not lv:
                continue
            for k, v in lv.items():
                if k.startswith("lib "):
                    cmd = k[4:]
                    fl = lv.get("floor " + cmd)
                    out.append(f"| {b['backend']} | {lv['rtt_ms']} | {cmd} | {_f(v)} | {_f(fl)} | "
                               f"{_f(v / fl if fl else None, 2)} |")
    out.append("\n## Expiry\n")
    out.append("| backend | table | files deleted | lib rows/s | floor rows/s | ratio (floor/lib time) |")
    out.append("|---|---|--:|--:|--:|--:|")
    for b in report["backends"]:
        if "expiry" in b:
            e = b["expiry"]
            out.append(f"| {b['backend']} | workload ({e['lib']['backdated']:,} back-dated) | "
                       f"{e['lib']['deleted']:,} | {_f(e['lib']['rows_per_s'])} | "
                       f"{_f(e['floor']['rows_per_s'])} | {_f(e['floor']['rows_per_s'] / e['lib']['rows_per_s'], 2)} |")
        s = b.get("scaling", {}).get("expiry")
        if s:
            out.append(f"| {b['backend']} | {s['table_files']:,} files | {s['lib']['deleted']:,} | "
                       f"{_f(s['lib']['rows_per_s'])} | {_f(s['floor']['rows_per_s'])} | "
                       f"{_f(s['floor']['rows_per_s'] / s['lib']['rows_per_s'], 2)} |")
    if any("scaling" in b for b in report["backends"]):
        out.append("\n## Scaling: view latency by number of stores (5 files each)\n")
        out.append("A fresh tool per sample (as at the start of a turn): RT = round trips of that view.\n")
        out.append("| backend | stores | lib view dir p50/p99 µs | lib view file p50/p99 µs | "
                   "floor view dir p50 µs | floor view file p50 µs | RT lib dir/file | load s |")
        out.append("|---|--:|--:|--:|--:|--:|--:|--:|")
        for b in report["backends"]:
            sc = b.get("scaling")
            if not sc:
                continue
            for level, v in sc["levels"].items():
                out.append(
                    f"| {b['backend']} | {int(level):,} | {_f(v['lib view directory']['p50_us'])} / "
                    f"{_f(v['lib view directory']['p99_us'])} | {_f(v['lib view file']['p50_us'])} / "
                    f"{_f(v['lib view file']['p99_us'])} | {_f(v['floor view directory']['p50_us'])} | "
                    f"{_f(v['floor view file']['p50_us'])} | {v['lib view directory'].get('round_trips', '-')}/"
                    f"{v['lib view file'].get('round_trips', '-')} | {_f(sc['load_seconds'][level], 1)} |"
                )
            levels = list(sc["levels"])
            if len(levels) > 1:
                lo, hi = sc["levels"][levels[0]], sc["levels"][levels[-1]]
                rd = hi["lib view directory"]["p50_us"] / lo["lib view directory"]["p50_us"]
                rf = hi["lib view file"]["p50_us"] / lo["lib view file"]["p50_us"]
                out.append(f"| {b['backend']} | {int(levels[-1]):,} ÷ {int(levels[0]):,} | {rd:.2f}× | {rf:.2f}× | | | | |")
    out.append("\n## Profile load\n")
    for b in report["backends"]:
        p = b.get("profile")
        if p is None:
            continue
        if not p.get("measured"):
            out.append(f"- {b['backend']}: not measured: {p.get('reason')}")
        else:
            out.append(f"- {b['backend']}: cold p50 {_f(p['cold']['p50_us'])} µs (p99 {_f(p['cold']['p99_us'])}), "
                       f"warm p50 {_f(p['warm']['p50_us'])} µs (p99 {_f(p['warm']['p99_us'])}); "
                       f"{p.get('note', '')}")
    s = report.get("startup")
    if s:
        out.append("\n## Start-up\n")
        out.append(f"- `import dbmemory`: {s['import_dbmemory_s'] * 1000:.0f} ms in-process "
                   f"(process wall {s['import_dbmemory_wall_s'] * 1000:.0f} ms, bare Python "
                   f"{s['python_startup_s'] * 1000:.0f} ms); litellm imported: {s['litellm_imported_by_import']}")
        hw = s["help_script_wall_s"]
        out.append(f"- `dbmemory --help`: {s['help_inprocess_s'] * 1000:.0f} ms in-process, "
                   f"process wall {s['help_wall_s'] * 1000:.0f} ms"
                   + (f" (console script {hw * 1000:.0f} ms)" if hw else "")
                   + f"; litellm imported: {s['litellm_imported_by_help']}")
        out.append("- slowest imports under `import dbmemory` (cumulative): " + ", ".join(
            f"{t['module']} {t['cumulative_ms']:.0f} ms" for t in s["slowest_imports"][:6]))
    out.append("\n## Targets\n")
    out.extend(f"- {line}" for line in targets(report))
    return "\n".join(out) + "\n"


def targets(report: dict[str, Any]) -> list[str]:
    lines = []
    for b in report["backends"]:
        if "ops" not in b:
            continue
        worst = max(((e["ratio_p50"], op) for op, e in b["ops"].items() if "ratio_p50" in e), default=None)
        missed = [f"{op} {e['ratio_p50']:.2f}×" for op, e in b["ops"].items()
                  if e.get("ratio_p50", 0) > TARGET_RATIO]
        lines.append(f"{b['backend']}: tool ≤ {TARGET_RATIO}× floor (p50): "
                     + ("met" if not missed else "missed: " + ", ".join(missed))
                     + (f" (worst {worst[1]} {worst[0]:.2f}×)" if worst else ""))
        rts = [f"{op} {e['round_trips']['lib']}" for op, e in b["ops"].items()
               if e.get("round_trips", {}).get("lib", 0) > TARGET_ROUND_TRIPS]
        lines.append(f"{b['backend']}: ≤ {TARGET_ROUND_TRIPS} round trips per command: "
                     + ("met" if not rts else "missed: " + ", ".join(rts)))
        sc = b.get("scaling")
        if sc and len(sc["levels"]) > 1:
            levels = list(sc["levels"])
            lo, hi = sc["levels"][levels[0]], sc["levels"][levels[-1]]
            r = max(hi[o]["p50_us"] / lo[o]["p50_us"] for o in ("lib view directory", "lib view file"))
            lines.append(f"{b['backend']}: view latency at {int(levels[-1]):,} stores ≤ {TARGET_SCALE_RATIO}× of "
                         f"{int(levels[0]):,}: {'met' if r <= TARGET_SCALE_RATIO else 'missed'} ({r:.2f}×)")
        p = b.get("profile")
        if p and p.get("measured") and b["backend"] == "sqlite":
            w = p["warm"]["p50_us"]
            lines.append(f"sqlite: warm profile load ≤ {TARGET_WARM_PROFILE_US} µs p50: "
                         f"{'met' if w <= TARGET_WARM_PROFILE_US else 'missed'} ({w:.0f} µs)")
        elif p and not p.get("measured") and b["backend"] == "sqlite":
            lines.append("sqlite: warm profile load: not measured (no load_user_memory)")
    s = report.get("startup")
    if s:
        lines.append(f"import dbmemory ≤ {TARGET_IMPORT_S} s: "
                     f"{'met' if s['import_dbmemory_s'] <= TARGET_IMPORT_S else 'missed'} "
                     f"({s['import_dbmemory_s']:.3f} s); litellm not imported: "
                     f"{'met' if not (s['litellm_imported_by_import'] or s['litellm_imported_by_help']) else 'MISSED'}")
    return lines


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": mem, "os": platform.platform(),
            "python": platform.python_version()}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("dbmemory", "SQLAlchemy", "psycopg", "PyMySQL", "alembic"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    import sqlite3

    out["sqlite3 (library)"] = sqlite3.sqlite_version
    return out


def git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE.parent,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=HERE.parent,
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (+ uncommitted changes under src/)" if dirty else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", default="sqlite,postgres,mysql",
                   help="comma list of sqlite, postgres, mysql (default: all three)")
    p.add_argument("--stores", type=int, default=200, help="stores in the workload (S)")
    p.add_argument("--files", type=int, default=20, help="files per store (F), ~2 KB each")
    p.add_argument("--scale", default="1000,10000,100000",
                   help="store counts for the scaling run, 5 files each; '' to skip")
    p.add_argument("--scale-samples", type=int, default=300, help="views sampled per scale level")
    p.add_argument("--expiry-rows", type=int, default=100_000,
                   help="files expired at scale (per side); 0 to skip")
    p.add_argument("--profile-samples", type=int, default=300, help="profile loads per side (cold/warm)")
    p.add_argument("--no-startup", action="store_true", help="skip the start-up measurement")
    p.add_argument("--unit", choices=("turn", "caller"), default="turn",
                   help="how the lib runs each command: as a turn's tool call (its transaction's one "
                        "unit, no savepoint) or in a caller's transaction (a savepoint pair per write)")
    p.add_argument("--sizes", default="20,1000",
                   help="store sizes (files) for the store-size view; '' skips it")
    p.add_argument("--size-samples", type=int, default=60, help="creates/views per store size")
    p.add_argument("--workers", default="1,2,4,8",
                   help="worker counts for the shared-store concurrency view (servers); '' skips it")
    p.add_argument("--worker-ops", type=int, default=60, help="edits per worker")
    p.add_argument("--latency-ms", type=float, default=0.5,
                   help="round-trip delay of the loopback proxy for the latency view (servers); 0 skips it")
    p.add_argument("--latency-samples", type=int, default=40, help="commands per side through the proxy")
    p.add_argument("--force-latest", action="store_true",
                   help="write results/latest.* even when the load average exceeded the core count")
    p.add_argument("--postgres-url", default=os.environ.get("DBMEMORY_BENCH_POSTGRES_URL",
                                                            "postgresql+psycopg://postgres@127.0.0.1:5432/"))
    p.add_argument("--mysql-url", default=os.environ.get("DBMEMORY_BENCH_MYSQL_URL",
                                                         "mysql+pymysql://root@127.0.0.1:3306/"))
    p.add_argument("--database", default="dbm_bench", help="scratch database name (dropped after)")
    p.add_argument("--keep", action="store_true", help="keep the scratch databases")
    p.add_argument("--out", default=str(HERE / "results"), help="folder for latest.md / latest.json")
    args = p.parse_args(argv)
    if args.database in ("test", "postgres", "root", "mysql", "information_schema"):
        p.error(f"refusing to use database {args.database!r}: pick a scratch name")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    names = {"sqlite": "sqlite", "postgres": "postgresql", "postgresql": "postgresql",
             "mysql": "mysql", "mariadb": "mysql"}
    kinds = [names[b.strip()] for b in args.backends.split(",") if b.strip()]
    report: dict[str, Any] = {
        "command": " ".join(["python bench/run.py", *(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git": git_rev(),
        "machine": machine(),
        "versions": versions(),
        "backends": [],
    }
    report["load_before"] = os.getloadavg()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dbm-bench-") as tmp:
        for kind in kinds:
            try:
                report["backends"].append(run_backend(kind, args, Path(tmp)))
            except Exception as exc:  # noqa: BLE001 - report and go on with the next backend
                import traceback

                traceback.print_exc()
                report["backends"].append({"backend": kind, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    if not args.no_startup:
        log("start-up")
        report["startup"] = measure_startup()
    report["seconds"] = time.perf_counter() - t0
    report["load_after"] = os.getloadavg()
    cores = os.cpu_count() or 1
    report["loaded"] = max(report["load_before"][0], report["load_after"][0]) > cores
    text = render(report)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "latest"
    if report["loaded"] and not args.force_latest:
        name = "loaded"
        log(f"load average exceeded the {cores} cores: NOT writing latest.*; results in {name}.*")
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    log(f"wrote {out / (name + '.md')} and {out / (name + '.json')} ({report['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
