"""Consolidation overhead per turn with the model time excluded, and the warm profile load (issue 12).

Each of ``--users`` users has a ~1,800-token profile (under the 2,000-token budget). One
measured *turn* is :meth:`UserMemoryPostprocessor.run` with a canned model: the gate answers
UPDATE, the rewrite returns the stored body with its first Recent Topics line changed (so every
turn writes), the scrub answers CLEAN. The answers are built before the run, so the model time
is the return of a prepared object (reported apart as ``model``: what is left of it is the
dispatch of each call to its worker thread, part of the library's overhead).

The *floor* is the same database work by hand on the raw driver (bench/floor.py's connection):
the pre-model opt-out read (one ``SELECT``, its own transaction), then one transaction with the
opt-out flag and the file row read together (``FOR UPDATE`` on the servers), the
compare-and-set ``UPDATE`` of the file (``WHERE file_id = ? AND version_no = ?``), the store's
counters and the audit event: 1 + 4 statements. Lib and floor alternate per user.

The *warm load* is ``load_user_memory`` of an unchanged profile in one committed transaction on a
held connection, against the floor's one ``SELECT`` of the row, alternating.

The per-phase split comes from a separate, instrumented pass (wrapping the functions costs
~1 µs a call; medians per phase over its turns): ``yaml`` (frontmatter parse), ``format`` (other parsing and rendering),
``scrub`` (the deterministic detectors: :func:`~dbmemory.profile.detectors.scan` and the
own-contact finders), ``tokens`` (counting), ``db`` (inside the postprocessor's transactions),
``model`` (the canned calls including thread dispatch), ``total`` (the whole run).

Run (PostgreSQL and MariaDB from DBMEMORY_TEST_POSTGRES_URL / DBMEMORY_TEST_MYSQL_URL; a fresh
database ``dbm_consolidation_bench`` is made there)::

    PYTHONPATH=src python bench/consolidation_bench.py --backends sqlite,postgresql,mysql \\
        --users 30 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODEL = "gpt-4o"
DATABASE = "dbm_consolidation_bench"
PATH = "/memories/memory.md"


def _p(ns: list[int], q: float) -> float:
    s = sorted(ns)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] / 1000


def _summary(ns: list[int]) -> dict[str, float]:
    return {"n": len(ns), "p50_us": _p(ns, 0.5), "p99_us": _p(ns, 0.99),
            "mean_us": statistics.fmean(ns) / 1000}


def _url(backend: str, tmp: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp / 'consolidation_bench.db'}"
    if backend == "postgresql":
        base = sa.engine.make_url(os.environ.get(
            "DBMEMORY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    else:
        base = sa.engine.make_url(os.environ.get(
            "DBMEMORY_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test"))
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        if backend == "postgresql":
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
            c.exec_driver_sql(f'CREATE DATABASE "{DATABASE}"')
        else:
            c.exec_driver_sql(f"DROP DATABASE IF EXISTS `{DATABASE}`")
            c.exec_driver_sql(
                f"CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    admin.dispose()
    return base.set(database=DATABASE).render_as_string(hide_password=False)


def _drop(backend: str, engine: sa.engine.Engine) -> None:
    if backend == "sqlite":
        return
    url = engine.url.set(database="postgres" if backend == "postgresql" else None)
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        if backend == "postgresql":
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        else:
            c.exec_driver_sql(f"DROP DATABASE IF EXISTS `{DATABASE}`")
    admin.dispose()


# -- the canned model ------------------------------------------------------------------------


class CannedModel:
    """``complete`` answering from prepared :class:`~dbmemory.llm.Completion` objects."""

    def __init__(self) -> None:
        from dbmemory.llm import Completion, Usage

        self._make = lambda text: Completion(text=text, finish_reason="stop", usage=Usage(1, 1))
        self.answers: dict[str, Any] = {"gate": self._make("UPDATE"), "scrub": self._make("CLEAN")}
        self.ns = 0

    def prepare(self, body: str, turn: int) -> None:
        """The rewrite for the next run: ``body`` with its first Recent Topics line changed."""
        head, sep, tail = body.partition("## Recent Topics\n")
        first, nl, rest = tail.partition("\n")
        self.answers["rewrite"] = self._make(
            head + sep + f"- turn {turn}: asked about window functions" + nl + rest)

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        t0 = time.perf_counter_ns()
        content = messages[0]["content"]
        from dbmemory.profile.prompts import PURPOSE_HEADERS

        for purpose, header in PURPOSE_HEADERS.items():
            if content.startswith(header):
                answer = self.answers[purpose]
                self.ns += time.perf_counter_ns() - t0
                return answer
        raise AssertionError("unknown prompt")


# -- the floor ---------------------------------------------------------------------------------


class ConsolidationFloor:
    """The consolidation's database work as minimal hand-written SQL on the raw driver."""

    def __init__(self, backend: str, url: str) -> None:
        from floor import STORE_ID, Floor

        self.f = Floor(backend, url)
        self.store_id_sql = STORE_ID
        self.is_sqlite = backend == "sqlite"

    def close(self) -> None:
        self.f.close()

    def select_row(self, store_key: str, ph: str) -> Any:
        """The warm load's floor: the file row by store key, one statement, one transaction."""
        f = self.f
        f.begin()
        row = f.q(
            "SELECT f.file_id, f.store_id, f.body, f.version_no, f.char_count, f.updated_at"
            f" FROM dbm_files f WHERE f.store_id = ({self.store_id_sql}) AND f.path_hash = %s",
            (store_key, ph),
        ).fetchone()
        f.commit()
        return row

    def consolidate(self, user_key: str, store_key: str, ph: str, version: int, text: str) -> int:
        f = self.f
        f.begin()
        enabled = f.q("SELECT memory_enabled FROM dbm_user_settings WHERE user_key = %s",
                      (user_key,)).fetchone()
        f.commit()
        assert enabled is None or enabled[0]
        f.begin()
        row = f.q(
            "SELECT f.file_id, f.store_id, f.version_no, f.char_count,"
            " (SELECT memory_enabled FROM dbm_user_settings WHERE user_key = %s)"
            f" FROM dbm_files f WHERE f.store_id = ({self.store_id_sql}) AND f.path_hash = %s"
            f"{f.lock}",
            (user_key, store_key, ph),
        ).fetchone()
        file_id, store_id, current, chars, flag = row
        assert current == version and (flag is None or flag)
        now = f.now()
        f.q(
            "UPDATE dbm_files SET body = %s, char_count = %s, version_no = %s, updated_at = %s,"
            " last_accessed_at = %s WHERE file_id = %s AND version_no = %s",
            (text, len(text), version + 1, now, now, file_id, version),
        )
        assert f.cur.rowcount == 1
        f.q("UPDATE dbm_stores SET updated_at = %s, total_chars = total_chars + %s"
            " WHERE store_id = %s", (now, len(text) - chars, store_id))
        f._audit(store_id, store_key, PATH, "put", chars, len(text), now)
        f.commit()
        return version + 1


# -- phases ------------------------------------------------------------------------------------


class Phases:
    """Per-phase wall time, by wrapping the pipeline's functions (instrumented pass only)."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = {}
        self._depth = 0
        self._undo: list[Callable[[], None]] = []

    def _wrap(self, module: Any, name: str, phase: str, inner: bool = False) -> None:
        """Time ``module.name`` as ``phase``; an ``inner`` phase is also timed inside another
        (``yaml`` inside ``format``: :meth:`result` takes it out of the outer one)."""
        original = getattr(module, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if inner:
                t0 = time.perf_counter_ns()
                try:
                    return original(*args, **kwargs)
                finally:
                    self.ns[phase] = self.ns.get(phase, 0) + time.perf_counter_ns() - t0
            if self._depth:
                return original(*args, **kwargs)  # count the outermost phase only
            self._depth += 1
            t0 = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                self.ns[phase] = self.ns.get(phase, 0) + time.perf_counter_ns() - t0
                self._depth -= 1

        setattr(module, name, timed)
        self._undo.append(lambda: setattr(module, name, original))

    def install(self, post: Any) -> None:
        import dbmemory.profile.consolidate as c_mod
        from dbmemory.profile import budget, consolidate, detectors, format, tokens

        modules = [consolidate, c_mod]
        for extra in ("dbmemory.profile.pipeline", "dbmemory.profile.write_gate"):
            if extra in sys.modules:
                modules.append(sys.modules[extra])
        self._wrap(format, "parse_frontmatter", "yaml", inner=True)
        for mod in modules:
            for name in ("scan", "find_emails", "find_phones", "own_contacts_from_text"):
                if hasattr(mod, name):
                    self._wrap(mod, name, "scrub")
            for name in ("parse_profile", "render_body", "render_profile", "extract_body",
                         "parse_body", "fit_profile", "hard_truncate"):
                if hasattr(mod, name):
                    self._wrap(mod, name, "format")
        self._wrap(tokens, "count_tokens", "tokens")
        self._wrap(budget, "count_tokens", "tokens")
        del detectors
        begin = post._begin

        @contextmanager
        def timed_begin() -> Iterator[Any]:
            t0 = time.perf_counter_ns()
            self._depth += 1
            try:
                with begin() as conn:
                    yield conn
            finally:
                self._depth -= 1
                self.ns["db"] = self.ns.get("db", 0) + time.perf_counter_ns() - t0

        post._begin = timed_begin
        call = post._call

        def timed_call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter_ns()
            self._depth += 1
            try:
                return call(*args, **kwargs)
            finally:
                self._depth -= 1
                self.ns["model"] = self.ns.get("model", 0) + time.perf_counter_ns() - t0

        post._call = timed_call

    def result(self) -> dict[str, int]:
        """Nanoseconds per phase, ``yaml`` taken out of ``format``."""
        out = dict(self.ns)
        out["format"] = out.get("format", 0) - out.get("yaml", 0)
        return out

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()


# -- the run -----------------------------------------------------------------------------------


def seed(engine: sa.engine.Engine, users: list[str]) -> str:
    from dbmemory.profile import count_tokens, write_profile
    from profile_bench import make_profile

    template = make_profile("TEMPLATE", 1800, lambda t: count_tokens(t, MODEL), random.Random(12))
    with engine.begin() as c:
        for u in users:
            write_profile(c, u, template.replace("TEMPLATE", u, 1), expected_version=0)
    return template


def measure(backend: str, engine: sa.engine.Engine, url: str, users: list[str],
            rounds: int) -> dict[str, Any]:
    from dbmemory.core.paths import path_hash
    from dbmemory.profile import (
        ProfileMetrics,
        UserMemoryConfig,
        UserMemoryPostprocessor,
        encode_user_id,
        load_user_memory,
        profile_store_key,
    )

    config = UserMemoryConfig()
    model = CannedModel()
    metrics = ProfileMetrics()
    floor = ConsolidationFloor(backend, url)
    ph = path_hash(PATH)
    lib_ns: list[int] = []
    floor_ns: list[int] = []
    load_ns: list[int] = []
    select_ns: list[int] = []
    model_ns: list[int] = []
    split: dict[str, list[int]] = {}
    statements: list[int] = []
    floor_text: dict[str, tuple[int, str]] = {}
    turn = 0
    conn = engine.connect()
    try:
        # round 0 warms; rounds 1..rounds are timed; round rounds+1 is the instrumented pass
        for r in range(rounds + 2):
            for u in users:
                turn += 1
                key = profile_store_key(u, config.root_folder)
                # warm load vs one SELECT, alternating
                with conn.begin():
                    state = load_user_memory(conn, u, config=config, model=MODEL, metrics=metrics)
                t0 = time.perf_counter_ns()
                with conn.begin():
                    state = load_user_memory(conn, u, config=config, model=MODEL, metrics=metrics)
                t1 = time.perf_counter_ns()
                floor.select_row(key, ph)
                t2 = time.perf_counter_ns()
                assert state is not None and not state.truncated
                model.prepare(state.body, turn)
                post = UserMemoryPostprocessor(
                    engine, config, MODEL, u, state, complete=model, metrics=metrics)
                phases = None
                seen: list[str] = []
                if r == rounds + 1:
                    phases = Phases()
                    phases.install(post)

                    def on(c: Any, cur: Any, statement: str, *a: Any) -> None:
                        seen.append(statement)

                    sa.event.listen(engine, "before_cursor_execute", on)
                model.ns = 0
                t3 = time.perf_counter_ns()
                result = post.run("I moved to the BI team.", "Congratulations!")
                t4 = time.perf_counter_ns()
                if phases is not None:
                    sa.event.remove(engine, "before_cursor_execute", on)
                    phases.uninstall()
                assert result.outcome == "updated", (result.outcome, result.reason)
                # the floor: the same write by hand (its own user copy of the text)
                if u not in floor_text:
                    floor_text[u] = (result.version, result.text)
                fv, ftext = floor_text[u]
                t5 = time.perf_counter_ns()
                floor.consolidate(encode_user_id(u), key, ph, result.version,
                                  ftext + f"<!-- floor {turn} -->")
                t6 = time.perf_counter_ns()
                if r == 0:
                    continue
                if phases is not None:
                    for k, v in {**phases.result(), "total": t4 - t3}.items():
                        split.setdefault(k, []).append(v)
                    statements.append(sum(
                        1 for s in seen if s.split(None, 1)[0].upper() not in ("BEGIN", "COMMIT")))
                    continue
                load_ns.append(t1 - t0)
                select_ns.append(t2 - t1)
                lib_ns.append(t4 - t3)
                floor_ns.append(t6 - t5)
                model_ns.append(model.ns)
    finally:
        conn.close()
        floor.close()
    lib, fl = _summary(lib_ns), _summary(floor_ns)
    # medians per phase over the instrumented turns (robust to a neighbour's burst; they need
    # not add up to the median total exactly)
    per_turn = {k: round(statistics.median(v) / 1000, 1) for k, v in split.items()}
    load, sel = _summary(load_ns), _summary(select_ns)
    return {
        "turns": len(lib_ns),
        "consolidation": lib,
        "floor": fl,
        "overhead_p50_us": round(lib["p50_us"] - fl["p50_us"], 1),
        "ratio_p50": round(lib["p50_us"] / fl["p50_us"], 2),
        "canned_model_p50_us": _p(model_ns, 0.5),
        "split_p50_us (instrumented)": per_turn,
        "statements_per_turn": statements[0] if statements else None,
        "warm_load": load,
        "one_select": sel,
        "load_ratio_p50": round(load["p50_us"] / sel["p50_us"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--label", default="", help="what code ran (e.g. 'before: <commit>')")
    args = parser.parse_args()
    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import upgrade

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    out: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load_before": round(os.getloadavg()[0], 2),
        "users": args.users, "rounds": args.rounds, "label": args.label, "results": {},
    }
    try:
        import yaml

        out["libyaml"] = bool(getattr(yaml, "__with_libyaml__", False))
    except ImportError:
        pass
    users = [f"bench-consolidation-{n}" for n in range(args.users)]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            url = _url(backend, Path(tmp))
            engine = create_engine(url)
            try:
                upgrade(engine)
                seed(engine, users)
                out["results"][backend] = measure(backend, engine, url, users, args.rounds)
            finally:
                engine.dispose()
                _drop(backend, engine)
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
