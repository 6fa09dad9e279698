"""Load: N threads (and, on the servers, N processes) x mixed tool commands (issue 5, "Load").

Every worker runs, for a bounded time, a random mix of commands, each in a transaction of its
own, on a shared store (inserts of unique lines into one file, replacements of its own lines,
creates against a small ``max_files`` cap, deletes, views) and on a store of its own (a full
create/insert/str_replace/rename/delete/view cycle with an exact local expectation). Each call
carries its own audit actor, so the audit log names the call behind every change. Then:

* zero unexpected errors: a refusal is allowed only when it tells to retry, or is the
  ``max_files`` cap on a shared create;
* the cap was never exceeded (a monitor samples the shared store while the load runs);
* the audit log holds exactly one event per successful change and none for a refusal;
* no lost edit: replaying the successful edits of the shared file in the audit (commit) order
  gives exactly its final text, and every worker's own store equals its local expectation.

Bounded to a few seconds per backend (``DBMEMORY_LOAD_SECONDS``, default 6 per scenario).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import time
from collections import Counter
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory import enable_for_agent
from dbmemory.core.model import Caps
from dbmemory.db.schema import audit_events
from dbmemory.tool import MemoryTool, messages
from helpers import ERROR, committed_view, store_files

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("DBMEMORY_LOAD_SECONDS", "6"))
WORKERS = int(os.environ.get("DBMEMORY_LOAD_WORKERS", "4"))
SHARED_CAPS = Caps(max_files=8)
LOG = "/memories/log.md"
SEED_TEXT = "# shared log\n"


def _insert_at_top(text: str, line: str) -> str:
    if text == "":
        return line
    return line + "\n" + text


def run_worker(engine: Engine, shared: str, wid: int, seconds: float, seed: int) -> dict[str, Any]:
    """One worker's loop; returns its call log and the expected state of its own store."""
    rng = random.Random(seed)
    own_code = f"{shared}-w{wid}"
    own: dict[str, str] = {}
    live_tokens: list[str] = []
    my_shared_files: list[str] = []
    calls: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    k = 0
    while time.monotonic() < deadline:
        k += 1
        op = f"w{wid}-k{k}"
        r = rng.random()
        code = shared
        if r < 0.30:
            kind, token = "log_insert", f"[{op}]"
            args: dict[str, Any] = {"command": "insert", "path": LOG, "insert_line": 0, "insert_text": token}
        elif r < 0.42 and live_tokens:
            kind, token = "log_replace", rng.choice(live_tokens)
            args = {"command": "str_replace", "path": LOG, "old_str": token, "new_str": "{" + token[1:-1] + "}"}
        elif r < 0.52:
            kind = "shared_create"
            args = {"command": "create", "path": f"/memories/f/{op}.md", "file_text": op}
        elif r < 0.58 and my_shared_files:
            kind = "shared_delete"
            args = {"command": "delete", "path": rng.choice(my_shared_files)}
        elif r < 0.66:
            kind = "view"
            args = {"command": "view", "path": rng.choice(["/memories", LOG, "/memories/f"])}
        else:
            kind, code = "own", own_code
            args = _own_step(rng, own, op)
        started = time.monotonic()
        commit_failed = None
        try:
            with engine.begin() as conn:
                text = MemoryTool.for_store(conn, code, actor=op).execute(args)
        except sa.exc.PendingRollbackError as exc:
            # The tool invalidated the connection: the server rolled back the whole transaction
            # (a MariaDB deadlock victim); the commit refuses loudly. The caller's unit of work
            # is lost and must be retried; the tool's answer must have said so.
            commit_failed = type(exc).__name__
        ok = not text.startswith(ERROR) and commit_failed is None
        calls.append({"op": op, "kind": kind, "args": args, "ok": ok, "text": text[:400],
                      "commit_failed": commit_failed, "seconds": time.monotonic() - started})
        if not ok:
            continue
        if kind == "log_insert":
            live_tokens.append(args["insert_text"])
        elif kind == "log_replace":
            live_tokens.remove(args["old_str"])
        elif kind == "shared_create":
            my_shared_files.append(args["path"])
        elif kind == "shared_delete":
            my_shared_files.remove(args["path"])
        elif kind == "own":
            _apply_own(own, args)
    return {"calls": calls, "own_code": own_code, "own": own}


def _own_step(rng: random.Random, own: dict[str, str], op: str) -> dict[str, Any]:
    """A command on the worker's own store that must succeed (nobody else writes there)."""
    if len(own) < 3 or not own:
        return {"command": "create", "path": f"/memories/{op}.md", "file_text": f"first <{op}>\n"}
    path = rng.choice(sorted(own))
    r = rng.random()
    if r < 0.3:
        return {"command": "insert", "path": path, "insert_line": 0, "insert_text": f"top <{op}>"}
    if r < 0.5:
        first = own[path].split("\n", 1)[0]
        return {"command": "str_replace", "path": path, "old_str": first, "new_str": f"line <{op}>"}
    if r < 0.65:
        return {"command": "rename", "old_path": path, "new_path": f"/memories/r/{op}.md"}
    if r < 0.8:
        return {"command": "delete", "path": path}
    return {"command": "view", "path": path}


def _apply_own(own: dict[str, str], args: dict[str, Any]) -> None:
    command = args["command"]
    if command == "create":
        own[args["path"]] = args["file_text"]
    elif command == "insert":
        own[args["path"]] = _insert_at_top(own[args["path"]], args["insert_text"])
    elif command == "str_replace":
        own[args["path"]] = own[args["path"]].replace(args["old_str"], args["new_str"], 1)
    elif command == "rename":
        own[args["new_path"]] = own.pop(args["old_path"])
    elif command == "delete":
        del own[args["path"]]


def _process_main(url: str, shared: str, wid: int, seconds: float, seed: int) -> dict[str, Any]:
    """Entry point of a worker process: its own engine, its own connections."""
    from dbmemory.db.engine import create_engine

    engine = create_engine(url)
    try:
        return run_worker(engine, shared, wid, seconds, seed)
    finally:
        engine.dispose()


class CapMonitor:
    """Samples the number of files of the shared store while the load runs."""

    def __init__(self, engine: Engine, key: str) -> None:
        self.engine, self.key = engine, key
        self.max_files = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with committed_view(self.engine) as c:
            while not self._stop.is_set():
                if c.in_transaction():
                    c.rollback()  # a fresh snapshot each time
                self.max_files = max(self.max_files, len(store_files(c, self.key)))
                self.samples += 1
                self._stop.wait(0.05)

    def __enter__(self) -> CapMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _allowed_error(call: dict[str, Any]) -> bool:
    text = call["text"]
    if call.get("commit_failed"):  # only after the tool itself answered with a retry error
        return text.startswith(ERROR) and "retry" in text.lower()
    if "retry" in text.lower():
        return True
    if call["kind"] == "view" and text == ERROR + messages.path_not_found(call["args"]["path"]):
        return True  # /memories/f has no file at that moment
    return call["kind"] == "shared_create" and text == ERROR + messages.too_many_files(
        call["args"]["path"], SHARED_CAPS.max_files
    )


def check_results(engine: Engine, shared: str, results: list[dict[str, Any]]) -> dict[str, int]:
    key = f"shared:{shared}"
    calls = [c for r in results for c in r["calls"]]
    unexpected = [c for c in calls if not c["ok"] and not _allowed_error(c)]
    assert not unexpected, unexpected[:5]
    ok = {c["op"]: c for c in calls if c["ok"]}
    changes = {op: c for op, c in ok.items() if c["kind"] != "view"}
    with committed_view(engine) as conn:
        final = store_files(conn, key)
        events = conn.execute(
            sa.select(audit_events.c.actor_name, audit_events.c.action_name, audit_events.c.file_path,
                      audit_events.c.chars_before, audit_events.c.chars_after)
            .where(audit_events.c.store_key == key)
            .order_by(audit_events.c.event_id)
        ).all()
        for r in results:  # every worker's own store is exactly what it expects
            assert store_files(conn, f"shared:{r['own_code']}") == r["own"], r["own_code"]
            own_ops = [c for c in r["calls"] if c["ok"] and c["kind"] == "own" and c["args"]["command"] != "view"]
            own_events = conn.execute(
                sa.select(audit_events.c.actor_name).where(audit_events.c.store_key == f"shared:{r['own_code']}")
            ).scalars().all()
            assert Counter(own_events) == Counter(c["op"] for c in own_ops)
    # exactly one audit event per successful change, none for a refusal or a view
    actors = Counter(e.actor_name for e in events if e.actor_name != "seed")
    assert actors == Counter(op for op, c in changes.items() if c["kind"] != "own"), "one event per change"
    # no lost edit: replay the shared log's edits in audit order
    text = SEED_TEXT
    previous_after = len(SEED_TEXT)
    for e in events:
        if e.file_path != LOG or e.actor_name == "seed":
            continue
        assert e.chars_before == previous_after, "the size chain of the log is broken (lost update)"
        args = ok[e.actor_name]["args"]
        if args["command"] == "insert":
            text = _insert_at_top(text, args["insert_text"])
        else:
            assert text.count(args["old_str"]) == 1
            text = text.replace(args["old_str"], args["new_str"], 1)
        assert len(text) == e.chars_after
        previous_after = e.chars_after
    assert final[LOG] == text, "final log differs from the serial replay of the committed edits"
    tokens = Counter(line for line in final[LOG].split("\n") if line and line != SEED_TEXT.strip())
    expected = Counter(c["args"]["insert_text"] for c in changes.values() if c["kind"] == "log_insert")
    for c in changes.values():
        if c["kind"] == "log_replace":
            expected[c["args"]["old_str"]] -= 1
            expected[c["args"]["new_str"]] += 1
    assert tokens == +expected, "a line whose insert succeeded is missing (or one appeared twice)"
    assert len(final) <= SHARED_CAPS.max_files, f"max_files exceeded: {len(final)} files"
    stats = Counter(c["kind"] + (":ok" if c["ok"] else ":refused") for c in calls)
    stats["transactions_rolled_back"] = sum(1 for c in calls if c.get("commit_failed"))
    return stats


def _configure(engine: Engine, code: str, caps: Caps) -> None:
    """Caps belong to the store: an agent configuration naming shared store ``code`` sets them
    (no writer brings its own)."""
    with engine.begin() as conn:
        enable_for_agent(
            conn,
            f"cfg-{code}",
            scope="shared",
            store_code=code,
            max_file_chars=caps.max_file_chars,
            max_files=caps.max_files,
            max_store_chars=caps.max_store_chars,
        )


def _seed(engine: Engine, shared: str) -> None:
    _configure(engine, shared, SHARED_CAPS)
    with engine.begin() as conn:
        tool = MemoryTool.for_store(conn, shared, actor="seed")
        assert tool.execute({"command": "create", "path": LOG, "file_text": SEED_TEXT}).startswith("File")


@pytest.fixture
def load_engine(engine: Engine, backend_name: str) -> Engine:
    if backend_name == "sqlite-memory":
        pytest.skip("in-memory SQLite has one shared connection: no concurrency to test")
    if backend_name == "oracle":
        pytest.skip("not run on Oracle here")
    return engine


def test_threads_running_mixed_commands_lose_nothing_and_keep_caps(load_engine: Engine) -> None:
    engine = load_engine
    shared = f"load-t{os.getpid()}"
    _seed(engine, shared)
    results: list[dict[str, Any]] = [{} for _ in range(WORKERS)]
    errors: list[BaseException] = []

    def target(wid: int) -> None:
        try:
            results[wid] = run_worker(engine, shared, wid, SECONDS, seed=1000 + wid)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with CapMonitor(engine, f"shared:{shared}") as monitor:
        threads = [threading.Thread(target=target, args=(w,)) for w in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=SECONDS + 60)
    assert not errors, errors
    stats = check_results(engine, shared, results)
    assert monitor.samples > 0 and monitor.max_files <= SHARED_CAPS.max_files, "max_files exceeded"
    assert stats["log_insert:ok"] > 0 and stats["own:ok"] > 0, stats
    print(f"\n{engine.dialect.name} threads: {dict(sorted(stats.items()))}")


@pytest.fixture
def process_engine(engine: Engine, backend_name: str) -> Engine:
    if backend_name not in ("postgres", "mysql"):
        pytest.skip("processes run against a server (PostgreSQL, MariaDB)")
    return engine


def test_processes_running_mixed_commands_lose_nothing_and_keep_caps(process_engine: Engine) -> None:
    engine = process_engine
    shared = f"load-p{os.getpid()}"
    _seed(engine, shared)
    url = engine.url.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("spawn")
    with CapMonitor(engine, f"shared:{shared}") as monitor:
        with ctx.Pool(WORKERS) as pool:
            pending = [pool.apply_async(_process_main, (url, shared, w, SECONDS, 2000 + w)) for w in range(WORKERS)]
            results = [p.get(timeout=SECONDS + 120) for p in pending]
    stats = check_results(engine, shared, results)
    assert monitor.max_files <= SHARED_CAPS.max_files, "max_files exceeded"
    assert stats["log_insert:ok"] > 0 and stats["own:ok"] > 0, stats
    print(f"\n{engine.dialect.name} processes: {dict(sorted(stats.items()))}")


# ------------------------------------------------------------------- the cap under a race


@pytest.mark.parametrize("read_first", [False, True], ids=["fresh-transaction", "after-a-read"])
@pytest.mark.parametrize("race", ["cap", "same-path"])
@pytest.mark.parametrize("isolation", ["default", "repeatable-read"])
def test_two_concurrent_creates_at_the_cap_exactly_one_succeeds(
    load_engine: Engine, read_first: bool, race: str, isolation: str
) -> None:
    """Case C8's races, made deterministic: A creates the last allowed file (or a path) and holds
    its transaction open; B (optionally after reading the store in its own transaction, as a turn
    does) creates another file (or the same path) and waits for A's lock on the store; A commits.
    B must be refused: its checks must see A's committed file, not an older snapshot (MariaDB's
    REPEATABLE READ gives a non-locking read the snapshot of the transaction's first read).
    ``repeatable-read``: the caller's own MySQL/MariaDB engine at REPEATABLE READ (dbmemory's
    engines use READ COMMITTED), where dbmemory must use locking reads."""
    engine = load_engine
    if isolation == "repeatable-read":
        if engine.dialect.name not in ("mysql", "mariadb"):
            pytest.skip("REPEATABLE READ snapshots matter on MySQL/MariaDB only")
        engine = engine.execution_options(isolation_level="REPEATABLE READ")  # type: ignore[assignment]
    caps = Caps(max_files=2 if race == "cap" else 10)
    code = f"race-{os.getpid()}-{race}-{int(read_first)}"
    b_path = "/memories/three.md" if race == "cap" else "/memories/two.md"
    _configure(engine, code, caps)
    with engine.begin() as c:
        assert MemoryTool.for_store(c, code).execute(
            {"command": "create", "path": "/memories/one.md", "file_text": "1"}).startswith("File")
    answers: dict[str, str] = {}
    with engine.connect() as a, engine.connect() as b:
        a_tx = a.begin()
        if isolation == "repeatable-read":
            assert a.exec_driver_sql("SELECT @@tx_isolation").scalar() == "REPEATABLE-READ"
        answers["a"] = MemoryTool.for_store(a, code).execute(
            {"command": "create", "path": "/memories/two.md", "file_text": "2"})
        assert answers["a"].startswith("File"), answers["a"]

        def run_b() -> None:
            with b.begin():
                tool = MemoryTool.for_store(b, code)
                if read_first:
                    tool.execute({"command": "view", "path": "/memories"})
                answers["b"] = tool.execute({"command": "create", "path": b_path, "file_text": "3"})

        thread = threading.Thread(target=run_b)
        thread.start()
        time.sleep(0.5)  # B now waits for A (the store row lock; SQLite: BEGIN IMMEDIATE)
        a_tx.commit()
        thread.join(timeout=60)
    expected = (messages.too_many_files(b_path, 2) if race == "cap" else messages.file_exists(b_path))
    assert answers["b"] == ERROR + expected, answers
    with committed_view(engine) as c:
        assert store_files(c, f"shared:{code}") == {"/memories/one.md": "1", "/memories/two.md": "2"}


def test_writers_of_separate_stores_never_deadlock_each_other(load_engine: Engine) -> None:
    """Writers of different stores share no lock (DESIGN.md section 6: writers of *one* store
    serialise), so none of them may become a deadlock victim and lose its caller's whole
    transaction. Each thread creates and deletes files in its own store for a few seconds."""
    engine = load_engine
    seconds = min(SECONDS, 4.0)
    answers: list[list[tuple[str, str | None]]] = [[] for _ in range(WORKERS)]

    def writer(wid: int) -> None:
        code = f"sep-{os.getpid()}-{wid}"
        _configure(engine, code, Caps(max_files=6))
        deadline = time.monotonic() + seconds
        k = -1
        while time.monotonic() < deadline:
            k += 1
            path = f"/memories/n{k % 6}.md"  # create n0..n5, then delete them, and again
            arguments = ({"command": "create", "path": path, "file_text": f"{wid}-{k}"} if (k // 6) % 2 == 0
                         else {"command": "delete", "path": path})
            failed = None
            try:
                with engine.begin() as conn:
                    text = MemoryTool.for_store(conn, code).execute(arguments)
            except sa.exc.SQLAlchemyError as exc:
                failed = type(exc).__name__
            answers[wid].append((text, failed))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 60)
    flat = [a for per in answers for a in per]
    lost = [a for a in flat if a[1] is not None or "deadlock" in a[0]]
    assert flat and not lost, f"{len(lost)} of {len(flat)} calls lost their transaction: {lost[:3]}"
    assert all(not text.startswith(ERROR) for text, _ in flat), [t for t, _ in flat if t.startswith(ERROR)][:3]


@pytest.mark.parametrize("isolation", ["default", "repeatable-read"])
def test_racing_first_writes_to_a_new_store_never_lose_a_caller_transaction(
    load_engine: Engine, isolation: str
) -> None:
    """Six callers create files at once in a store that does not exist yet (cap 3 files): each
    caller's transaction survives and commits, exactly three files land, the other three get
    the cap error. On MariaDB the losers of a plain INSERT of the store row used to keep shared
    locks and deadlock each other, and InnoDB rolled back a caller's whole transaction."""
    engine = load_engine
    if isolation == "repeatable-read":
        if engine.dialect.name not in ("mysql", "mariadb"):
            pytest.skip("REPEATABLE READ matters on MySQL/MariaDB only")
        engine = engine.execution_options(isolation_level="REPEATABLE READ")  # type: ignore[assignment]
    for trial in range(4):
        code = f"first-{os.getpid()}-{isolation}-{trial}"
        caps = Caps(max_files=3)
        _configure(engine, code, caps)
        answers: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(6)

        def write(
            index: int,
            code: str = code,
            barrier: threading.Barrier = barrier,
            lock: threading.Lock = lock,
            answers: list[str] = answers,
        ) -> None:  # this trial's objects bound now: B023
            with engine.connect() as conn:
                barrier.wait(timeout=30)
                trans = conn.begin()  # SQLite: BEGIN IMMEDIATE queues the writers here
                answer = MemoryTool.for_store(conn, code).execute(
                    {"command": "create", "path": f"/memories/f{index}.md", "file_text": "x"}
                )
                trans.commit()  # raises if the database rolled the caller's transaction back
                with lock:
                    answers.append(answer)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert len(answers) == 6, answers
        created = [a for a in answers if a.startswith("File created")]
        assert len(created) == 3, answers
        assert all(a.startswith(ERROR) and "3 files" in a for a in answers if a not in created), answers
        with committed_view(engine) as c:
            assert len(store_files(c, f"shared:{code}")) == 3


def test_a_tool_never_reads_a_dropped_store_through_its_cached_id(load_engine: Engine) -> None:
    """A tool keeps its store id after a write; the store is then dropped (end_session) and a
    new store of another tenant may get the freed id (SQLite reuses the largest id). The old
    tool must read its own (now empty) store, never the other tenant's files, and its next
    write must be readable."""
    from dbmemory import enable_for_agent, end_session

    engine = load_engine
    code = f"stale{os.getpid()}"
    with engine.begin() as c:
        enable_for_agent(c, f"{code}S", scope="session")
        enable_for_agent(c, f"{code}U", scope="user")
    with engine.connect() as conn:
        tool = MemoryTool(conn, f"{code}S", session_id=f"{code}-s1")
        assert tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "mine"}).startswith("File")
        conn.commit()
        with engine.begin() as other:
            assert end_session(other, f"{code}-s1") == 1
        with engine.begin() as other:
            MemoryTool(other, f"{code}U", user_id="other").execute(
                {"command": "create", "path": "/memories/other.md", "file_text": "OTHER USER PRIVATE"}
            )
        listing = tool.execute({"command": "view", "path": "/memories"})
        assert "other.md" not in listing and "a.md" not in listing, listing
        assert tool.execute({"command": "view", "path": "/memories/other.md"}).startswith(ERROR)
        assert tool.execute({"command": "create", "path": "/memories/b.md", "file_text": "new"}).startswith("File")
        assert "new" in tool.execute({"command": "view", "path": "/memories/b.md"})
        assert tool.execute(
            {"command": "str_replace", "path": "/memories/b.md", "old_str": "new", "new_str": "newer"}
        ).startswith("The memory file")
        assert "newer" in tool.execute({"command": "view", "path": "/memories/b.md"})
        conn.commit()


def test_directory_deletes_and_renames_in_separate_stores_never_deadlock(load_engine: Engine) -> None:
    """Writers of different stores share no lock, directory operations included: on MariaDB a
    FOR UPDATE over a path prefix could scan and lock other stores' rows."""
    engine = load_engine
    errors: list[str] = []
    deadline = time.monotonic() + min(SECONDS, 4.0)

    def work(worker: int) -> None:
        code = f"dirs-{os.getpid()}-{worker}"
        round_no = 0
        with engine.connect() as conn:
            while time.monotonic() < deadline:
                round_no += 1
                with conn.begin():
                    tool = MemoryTool.for_store(conn, code)
                    for i in range(3):
                        answer = tool.execute({"command": "create", "path": f"/memories/d{round_no}/f{i}.md", "file_text": "x"})
                        if answer.startswith(ERROR):
                            errors.append(answer)
                    answer = tool.execute({"command": "rename", "old_path": f"/memories/d{round_no}", "new_path": f"/memories/e{round_no}"})
                    if answer.startswith(ERROR):
                        errors.append(answer)
                    answer = tool.execute({"command": "delete", "path": f"/memories/e{round_no}"})
                    if answer.startswith(ERROR):
                        errors.append(answer)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == [], errors[:5]
