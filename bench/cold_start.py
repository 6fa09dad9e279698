"""A fresh process's first command, against the interpreter's own start-up.

    PYTHONPATH=src python bench/cold_start.py --rounds 7

Each round starts, in turn, a bare ``python -c pass``, ``python -c "import sqlalchemy"``,
``python -m dbmemory --help``, a first MEMORY command (``tool ... view /memories``) on a migrated
SQLite file, and the refusal of ``replay --model gpt-4o-mini`` without ``OPENAI_API_KEY``; so the
sides see the same load. Prints the median wall time of each and the ratios the targets name:

- first command ÷ ``import sqlalchemy`` (target ≤ 3.0);
- ``--help`` ÷ (bare Python + 150 ms) (target ≤ 1.5 with the 150 ms inside: ``help ≤ 1.5 × pass + 0.15 s``);
- the missing-key refusal (target ≤ 1 s).

The load average before and after is printed; a run whose 1-minute load exceeds the core
count is marked LOADED and its figures are not to be published.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def _wall(argv: list[str], env: dict[str, str], *, expect_failure: bool = False) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if (done.returncode != 0) != expect_failure:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[:300]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7, help="rounds of the five process starts")
    args = p.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true")
    py = sys.executable
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'cold.db'}"
    for setup in (["db", "upgrade", "--url", url], ["agent", "enable", "BENCH", "--url", url]):
        subprocess.run([py, "-m", "dbmemory", *setup], env=env, check=True, capture_output=True)
    sides: dict[str, tuple[list[str], bool]] = {
        "python -c pass": ([py, "-c", "pass"], False),
        "import sqlalchemy": ([py, "-c", "import sqlalchemy"], False),
        "dbmemory --help": ([py, "-m", "dbmemory", "--help"], False),
        "first command (view)": (
            [py, "-m", "dbmemory", "tool", "--url", url, "-a", "BENCH", '{"command": "view", "path": "/memories"}'],
            False,
        ),
        "missing-key refusal": (
            [py, "-m", "dbmemory", "replay", str(SRC / "dbmemory" / "data" / "sample_conversation.jsonl"),
             "--url", url, "--model", "gpt-4o-mini"],
            True,
        ),
    }
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, (command, fails) in sides.items():
            times[name].append(_wall(command, env, expect_failure=fails))
    load_after = os.getloadavg()
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        print(f"{name:24s} {value * 1000:8.0f} ms  (min {min(times[name]) * 1000:.0f} ms)")
    first = median["first command (view)"] / median["import sqlalchemy"]
    help_bound = 1.5 * median["python -c pass"] + 0.150
    print(f"first command ÷ import sqlalchemy: {first:.2f} (target ≤ 3.0)")
    print(f"--help: {median['dbmemory --help'] * 1000:.0f} ms against a bound of {help_bound * 1000:.0f} ms")
    print(f"missing-key refusal: {median['missing-key refusal']:.2f} s (target ≤ 1 s)")
    cores = os.cpu_count() or 1
    loaded = max(load_before[0], load_after[0]) > cores
    print(
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} on {cores} cores"
        + ("  LOADED: do not publish these figures" if loaded else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
