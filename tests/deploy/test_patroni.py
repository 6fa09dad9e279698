"""Issue 22: dbmemory on a two-node PostgreSQL cluster run by Patroni with synchronous
replication (.ci/patroni), through one libpq multi-host URL with
``target_session_attrs=read-write`` (DBMEMORY_TEST_PATRONI_URL), so the engine always reaches
whichever node is primary.

Checked here, through the package's public API only (``dbmemory.create_engine``,
``dbmemory.upgrade``, ``dbmemory.enable_for_agent``, ``dbmemory.MemoryTool``) and plain SQL on
the committed state:

* the engine over the multi-host URL works, its writes land on the primary, and its
  synchronous standby receives them;
* kill -9 of the primary's postmaster while four writer threads run MEMORY ``create`` and
  ``insert`` commands on files of their own (dbmemory's own transactions: AUTOCOMMIT
  connections; two writers hold one connection until it is lost, two check one out of the
  engine's pool per command): Patroni promotes the synchronous standby and the same engine
  (its pool never rebuilt) serves writes again. Every change a writer was told is saved is
  there, exactly once; a writer that does what the answers say (retry after "nothing was
  changed"; after "may or may not have been saved", view and retry only if it is absent)
  duplicates nothing; the store counters equal the aggregates over the files; each saved
  change has one audit row; every item added once with one ``item_add`` event; the profile
  holds every skill a consolidation said it wrote, once, its version and audit rows equal to
  the skills; every failed answer is one of the retry texts or "may or may not
  have been saved" (counted and reported). The time from the kill to the first write saved on
  the new primary stays under a bound measured here (docs/patroni.md);
* a planned switchover under the same load, with the same checks;
* after each test the old primary is back as the synchronous standby and the leader is the
  one the test found: the cluster is left as it was;
* an AUTOCOMMIT connection held across a lost server connection commits what the tool then
  says is saved, once the application did what the answer asked (``conn.rollback()``): the
  reconnected driver connection is switched back to autocommit
  (``dbmemory.db.dialect.expiry.is_autocommit``).

The kill needs the cluster of .ci/patroni on this machine (the test asks the script for the
primary's postmaster, the leader and a healthy cluster). Set DBMEMORY_TEST_PATRONI_LOG to a
file to append one JSON line of measurements per disruption.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import NullPool

import dbmemory
from backends import clean_tables, deploy_urls
from dbmemory.items.store import add_item, list_items
from dbmemory.llm import Completion
from dbmemory.profile import (
    UserMemoryConfig,
    UserMemoryPostprocessor,
    load_user_memory,
    parse_profile,
)
from dbmemory.profile.prompts import purpose_of

pytestmark = pytest.mark.patroni

AGENT = "HA"
USERS = ("u0", "u1")
WRITERS = 4
"""Writer threads; writers ``i`` and ``i + 2`` share user ``USERS[i % 2]``'s store."""
INSERTS_PER_FILE = 3
PACE_S = 0.01
"""Each writer's pause after a saved change: load, not a busy loop on a 2-core machine
(about 60 saved changes a second for the four writers)."""
ITEM_USER = "i0"
"""The user whose memory items the item writer adds."""
PROFILE_USER = "p0"
"""The user whose profile the consolidation writer rewrites."""
PROFILE_CONFIG = UserMemoryConfig()
MODEL = "gpt-4o-mini"
SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "patroni"
MAY_BE_SAVED = "may or may not have been saved"
ASKED_NOT_SAVED = "asked the database on a new connection and nothing was saved"
"""A lost COMMIT reply that dbmemory looked up: rolled back (dbmemory.store.units.commit_failed)."""
UNREACHABLE = (
    "Error: The memory store could not be reached; nothing was changed. Retry the command later."
)
RAISED = "raised "
"""How a writer records an exception instead of an answer: from ``engine.connect()`` (no
primary accepts connections yet: the driver's OperationalError) or from ``MemoryTool(...)``,
whose store lookup reads (the connection lost during it: ConflictError code
``transaction_rolled_back``, "retry the whole unit of work")."""
ROLL_BACK = "roll back, then redo the whole unit of work"
"""What every later command on an AUTOCOMMIT connection whose server connection was lost
answers, until the application calls ``conn.rollback()`` (the SQLAlchemy Connection stays
invalidated; the writers here replace such a connection instead, so they should never see it)."""
LOST_RETRY = re.compile(
    r"^Error: .* failed because .*; nothing was changed: retry the command$", re.DOTALL
)
WHOLE_UNIT = re.compile(
    r"^Error: the connection to the database was lost while .*; the database rolled back the "
    r"whole transaction on it, including every earlier change in it: retry the whole unit of work$",
    re.DOTALL,
)

FAILOVER_BOUND_S = 15.0
"""kill -9 of the primary's postmaster -> first write saved on the promoted standby. Measured
on the shared 2-core machine (load average 4-6): 2.3-3.8 s over 13 runs (Patroni sees the dead
postmaster within 1-3 loops of ``loop_wait`` = 1 s, demotes it at once since
``primary_start_timeout`` = 0, the standby takes the leader key and promotes; see
docs/patroni.md). Four times the worst seen: room for a slower machine, not for a second
failure."""
SWITCHOVER_GAP_S = 10.0
"""A planned switchover: last write saved on the old primary -> first on the new one. Measured
1.4-1.6 s (the old primary serves writes for another 2-6 s after the request, while Patroni
checks the candidate and checkpoints)."""
SWITCHOVER_BOUND_S = 30.0
"""A planned switchover: the request -> the first write saved on the new primary (3.5-7.2 s)."""
HEAL_BOUND_S = 90.0
"""The old primary back as the synchronous standby: 8.7-10.5 s after a kill, 22 s when it
needed pg_rewind (1 kill in 8: 11 s of pg_rewind on the loaded machine), 13-19 s after a
switchover."""


def _ci(*args: str, timeout: float = 180) -> str:
    """Run ``.ci/patroni <args>``; its stdout (a failure shows what it said)."""
    done = subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f".ci/patroni {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done.stdout.strip()


def _node_ports() -> dict[str, int]:
    """Node name -> PostgreSQL port, from ``.ci/patroni urls`` (pg1, pg2 in that order)."""
    urls = [sa.make_url(u) for u in _ci("urls").split(",")]
    return {f"pg{i + 1}": int(u.port or 5432) for i, u in enumerate(urls)}


# -- the session database on the cluster -------------------------------------------------------


@pytest.fixture(scope="session")
def patroni_url() -> Iterator[URL]:
    """A throw-away database on the Patroni cluster (created on the primary through the
    multi-host URL, replicated), dropped at the end of the session."""
    base = deploy_urls("patroni")[0]
    assert base.query.get("target_session_attrs") == "read-write", base
    if not SCRIPT.exists():
        pytest.fail(f"{SCRIPT} is missing", pytrace=False)
    _ci("wait", "120")  # a cluster left half-healed by an earlier failure heals first
    name = f"dbmt_pat_{os.getpid()}_{secrets.token_hex(4)}"
    admin = sa.create_engine(base, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield base.set(database=name)
    finally:
        try:
            _ci("wait", "120")
        finally:
            with admin.connect() as c:
                c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.dispose()


@pytest.fixture(scope="session")
def patroni_engine(patroni_url: URL) -> Iterator[Engine]:
    """dbmemory's engine on the session database (default settings: pool_pre_ping on)."""
    engine = dbmemory.create_engine(patroni_url)
    dbmemory.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def ha_engine(patroni_engine: Engine) -> Iterator[Engine]:
    """The session engine with empty memory tables, agent ``HA`` (user scope) enabled; after
    the test the cluster is healthy again with the leader it had before."""
    leader = _ci("leader")
    clean_tables(patroni_engine)
    with patroni_engine.begin() as c:
        dbmemory.enable_for_agent(c, AGENT, scope="user", max_files=100_000)
    yield patroni_engine
    _ci("wait", str(int(HEAL_BOUND_S)))
    if _ci("leader") != leader:
        _ci("switchover", leader)


# -- the writers ---------------------------------------------------------------------------------


@dataclass
class Answer:
    writer: int
    what: str
    """``create <path>`` / ``insert <line>`` / ``view <path>``"""
    started: float
    ended: float
    text: str
    port: int | None
    """The port of the server that answered (None: the connection was lost)."""


@dataclass
class Outcome:
    """What a writer knows about one change when it moves on."""

    kind: str
    """``path`` (a create) or ``line`` (an insert)"""
    key: str
    result: str
    """``saved`` (the tool said so), ``found`` (it said "may or may not"; a view showed it) or
    ``gave up`` (still failing at the writer's deadline)"""


class Writer:
    """How a writer thread talks to the store: ``held`` keeps one AUTOCOMMIT connection until it
    is lost (dbmemory's own transaction per command), then opens a new one; ``per-command``
    checks one out of the engine's pool for each command (dbmemory's engine pings it first)."""

    def __init__(self, engine: Engine, style: str, user: str) -> None:
        self.engine, self.style, self.user = engine, style, user
        self.conn: sa.Connection | None = None
        self.tool: Any = None

    def execute(self, command: dict[str, Any]) -> tuple[str, int | None]:
        """The tool's answer, and the port of the server that gave it (None: unknown)."""
        if self.style == "held":
            try:
                if self.conn is None:
                    self.conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
                    self.tool = dbmemory.MemoryTool(self.conn, AGENT, user_id=self.user)
            except (sa.exc.DBAPIError, dbmemory.DbMemoryError) as exc:  # no primary yet
                self.close()
                return _raised(exc), None
            text = self.tool.execute(command)
            port = _server_port(self.conn)
            if self.conn.invalidated:
                # Its server connection was lost. Reused, the Connection would reconnect
                # without AUTOCOMMIT and "save" into a transaction nobody commits (see
                # test_a_held_autocommit_connection_commits_after_its_server_connection_was_lost):
                # a new one, as the application must do today.
                self.close()
            return text, port
        try:
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                text = dbmemory.MemoryTool(conn, AGENT, user_id=self.user).execute(command)
                return text, _server_port(conn)
        except (sa.exc.DBAPIError, dbmemory.DbMemoryError) as exc:  # no primary to connect to yet
            return _raised(exc), None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = self.tool = None


def _raised(exc: BaseException) -> str:
    """How a writer records an exception instead of an answer: ``raised <type>[(code)]: text``."""
    code = getattr(exc, "code", None) if isinstance(exc, dbmemory.DbMemoryError) else None
    kind = f"{type(exc).__name__}({code})" if code else type(exc).__name__
    return f"{RAISED}{kind}: {str(exc).splitlines()[0][:300]}"


def _server_port(conn: sa.Connection) -> int | None:
    """The port of the server ``conn``'s driver connection reached (libpq picked one of the
    multi-host URL's hosts), or None when it is lost."""
    if conn.invalidated:
        return None
    try:
        info = conn.connection.driver_connection.info
        return int(info.port) if not conn.connection.driver_connection.broken else None
    except Exception:  # noqa: BLE001 - no connection: unknown
        return None


@dataclass
class Load:
    """Writer threads on one engine (its pool never rebuilt by the test): writers 0 and 1 hold
    one connection each for the whole run, writers 2 and 3 check one out per command."""

    engine: Engine
    answers: list[Answer] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    item_outcomes: list[Outcome] = field(default_factory=list)
    skill_outcomes: list[Outcome] = field(default_factory=list)
    problems: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for i in range(WRITERS):
            t = threading.Thread(target=self._writer, args=(i,), daemon=True, name=f"writer-{i}")
            t.start()
            self.threads.append(t)
        for i, target in ((WRITERS, self._item_writer), (WRITERS + 1, self._profile_writer)):
            t = threading.Thread(target=target, args=(i,), daemon=True, name=f"writer-{i}")
            t.start()
            self.threads.append(t)

    def _item_writer(self, i: int) -> None:
        """Adds item ``fact <k>`` of user ITEM_USER in a transaction of its own, as an
        application that owns the commit: after a failure it lists the items (until the list
        answers) and adds again only when the fact is absent."""
        try:
            k = 0
            while not self.stop.is_set():
                text = f"fact {k}"
                result = self._attempt(i, f"item {text}", lambda text=text: self._add_item(text),
                                       lambda text=text: text in self._items())
                self.item_outcomes.append(Outcome("item", text, result))
                if result == "gave up":
                    return
                k += 1
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.problems.append(exc)

    def _add_item(self, text: str) -> str:
        with self.engine.begin() as c:
            add_item(c, ITEM_USER, text)
        return "saved"

    def _items(self) -> list[str]:
        deadline = time.monotonic() + 90
        while True:
            try:
                with self.engine.connect() as c:
                    return [item.text for item in list_items(c, ITEM_USER)]
            except (sa.exc.DBAPIError, dbmemory.DbMemoryError):
                assert time.monotonic() < deadline, "the items could not be listed for 90 s"
                time.sleep(0.05)

    def _profile_writer(self, i: int) -> None:
        """Runs consolidations of user PROFILE_USER's profile, each adding skill ``skill <k>``
        (the fake model rewrites the profile it is shown with the skill added, or answers NOOP
        when the skill is there): retried until one says "updated" or the skill is found."""
        try:
            k = 0
            while not self.stop.is_set():
                skill = f"skill {k}"
                result = self._attempt(i, f"consolidate {skill}", lambda skill=skill: self._consolidate(skill),
                                       lambda skill=skill: skill in _skills(self._profile()))
                self.skill_outcomes.append(Outcome("skill", skill, result))
                if result == "gave up":
                    return
                k += 1
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.problems.append(exc)

    def _consolidate(self, skill: str) -> str:
        with self.engine.connect() as c:
            state = load_user_memory(c, PROFILE_USER, config=PROFILE_CONFIG, model=MODEL)
            c.rollback()
        shown = _skills(state.text if state is not None else None)

        def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
            if purpose_of(messages) == "gate":
                return Completion("UPDATE", "stop")
            if purpose_of(messages) == "scrub":
                return Completion("CLEAN", "stop")
            if skill in shown:
                return Completion("NOOP", "stop")
            return Completion(_profile_body([*shown, skill]), "stop")

        result = UserMemoryPostprocessor(
            self.engine, PROFILE_CONFIG, MODEL, PROFILE_USER, state, complete=complete
        ).run("I learned " + skill, "Good.")
        if result.outcome in ("updated", "noop") and skill in _skills(result.text):
            return "saved"
        return f"{RAISED}consolidation {result.outcome}: {result.reason}"

    def _profile(self) -> str | None:
        deadline = time.monotonic() + 90
        while True:
            try:
                with self.engine.connect() as c:
                    state = load_user_memory(c, PROFILE_USER, config=PROFILE_CONFIG, model=MODEL)
                return state.text if state is not None else None
            except (sa.exc.DBAPIError, dbmemory.DbMemoryError):
                assert time.monotonic() < deadline, "the profile could not be loaded for 90 s"
                time.sleep(0.05)

    def _attempt(self, i: int, what: str, write: Callable[[], str], present: Callable[[], bool]) -> str:
        """``write()`` until it says saved; after any failure, ``present()`` decides whether
        it was saved after all (counted: ``found``) or is tried again."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                text = write()
            except (sa.exc.DBAPIError, dbmemory.DbMemoryError) as exc:
                text = _raised(exc)
            self._record(Answer(i, what, started, time.monotonic(), text, None))
            if _saved(text):
                time.sleep(PACE_S)
                return "saved"
            if present():
                return "found"
            time.sleep(0.05)
        return "gave up"

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)
            if t.is_alive():
                import sys
                import traceback

                stack = "".join(traceback.format_stack(sys._current_frames()[t.ident]))
                last = [a for a in self.answers if a.writer == int(t.name.split("-")[1])][-5:]
                raise AssertionError(f"{t.name} hung in\n{stack}\nits last answers: {last}")
        assert not self.problems, self.problems

    def saved_after(self, moment: float, port: int | None = None) -> list[Answer]:
        """Writes saved that began at ``moment`` or later (on the server at ``port``)."""
        with self.lock:
            return [
                a for a in self.answers
                if a.started >= moment and _saved(a.text) and not a.what.startswith("view")
                and (port is None or a.port == port)
            ]

    def last(self, writer: int, n: int) -> list[Answer]:
        with self.lock:
            return [a for a in self.answers if a.writer == writer][-n:]

    def _record(self, answer: Answer) -> None:
        with self.lock:
            self.answers.append(answer)

    def _writer(self, i: int) -> None:
        writer = Writer(self.engine, "held" if i < 2 else "per-command", USERS[i % 2])
        try:
            k = 0
            while not self.stop.is_set():
                path = f"/memories/w{i}-{k}.md"
                head = f"w{i}-{k}-head"
                result = self._change(
                    i, writer, f"create {path}",
                    {"command": "create", "path": path, "file_text": head + "\n"},
                    lambda path=path, head=head: self._shows(i, writer, path, head),
                )
                self.outcomes.append(Outcome("path", path, result))
                if result == "gave up":
                    return
                for j in range(INSERTS_PER_FILE):
                    line = f"w{i}-{k}-l{j}"
                    result = self._change(
                        i, writer, f"insert {line}",
                        {"command": "insert", "path": path, "insert_line": 1, "insert_text": line},
                        lambda path=path, line=line: self._shows(i, writer, path, line),
                    )
                    self.outcomes.append(Outcome("line", line, result))
                    if result == "gave up":
                        return
                k += 1
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.problems.append(exc)
        finally:
            writer.close()

    def _change(
        self, i: int, writer: Writer, what: str, command: dict[str, Any], present: Callable[[], bool]
    ) -> str:
        """Run ``command`` until it is known saved, the way an agent told by the answers would:
        "nothing was changed ... retry" -> retry; "may or may not have been saved" -> view, and
        retry only when the change is not there."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            started = time.monotonic()
            text, port = writer.execute(command)
            self._record(Answer(i, what, started, time.monotonic(), text, port))
            if _saved(text):
                time.sleep(PACE_S)
                return "saved"
            if MAY_BE_SAVED in text and present():
                return "found"
            time.sleep(0.05)
        return "gave up"

    def _shows(self, i: int, writer: Writer, path: str, line: str) -> bool:
        """Whether ``path`` holds ``line`` now (views until the store answers)."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            started = time.monotonic()
            text, port = writer.execute({"command": "view", "path": path})
            self._record(Answer(i, f"view {path}", started, time.monotonic(), text, port))
            if _saved(text):
                return any(row.split("\t", 1)[-1] == line for row in text.splitlines()[1:])
            if "does not exist" in text:
                return False
            time.sleep(0.05)
        raise AssertionError(f"writer {i}: {path} could not be viewed for 90 s: {text}")


def _skills(profile: str | None) -> list[str]:
    """The bullets of the profile's "Skills & Expertise" section, in order."""
    if not profile:
        return []
    lines = parse_profile(profile).sections.get("Skills & Expertise", "").splitlines()
    return [line[2:] for line in lines if line.startswith("- ")]


def _profile_body(skills: list[str]) -> str:
    sections = ["# User Memory", ""]
    for name in ("Identity", "Communication Preferences", "Work Context", "Skills & Expertise",
                 "Follow-ups", "Recent Topics"):
        sections.append(f"## {name}")
        bullets = skills if name == "Skills & Expertise" else []
        sections.extend([f"- {b}" for b in bullets] or ["_(empty)_"])
        sections.append("")
    return "\n".join(sections)


def _saved(text: str) -> bool:
    return not text.startswith(("Error: ", RAISED))


def _kind(answer: Answer) -> str:
    """An answer's kind, for the counts of the report."""
    text = answer.text
    if answer.what.startswith(("item ", "consolidate ")):
        return _kind_of_item_or_profile(answer)
    if _saved(text):
        return "saved" if not answer.what.startswith("view") else "view"
    if text == UNREACHABLE:
        return "could not be reached; nothing was changed; retry"
    if MAY_BE_SAVED in text:
        return "may or may not have been saved"
    if ASKED_NOT_SAVED in text:
        return "commit lost; looked up: nothing was saved; retry"
    if LOST_RETRY.match(text):
        return "connection lost; nothing was changed; retry"
    if ROLL_BACK in text:
        return "held connection: roll back, then redo"
    if WHOLE_UNIT.match(text):
        return "connection lost; whole transaction rolled back; retry the whole unit of work"
    if text.startswith(RAISED):
        return text.split(":", 1)[0]
    if "does not exist" in text and answer.what.startswith("view"):
        return "view: not there"
    return "other: " + re.sub(r"/memories/\S+?(?=[\s;:,]|$)", "<path>", text)


def _kind_of_item_or_profile(answer: Answer) -> str:
    """The item writer's failures are the driver's (it owns the commit), as are the
    consolidation writer's own profile loads; a consolidation's are its outcome and reason."""
    who = "item" if answer.what.startswith("item ") else "consolidation"
    text = answer.text.removeprefix(RAISED)
    if not text.startswith("consolidation "):
        return f"{who}: raised {text.split(':', 1)[0]}"
    if MAY_BE_SAVED in text:
        return "consolidation: may or may not have been saved"
    if ASKED_NOT_SAVED in text:
        return "consolidation: commit lost; looked up: nothing was saved; retry"
    for words in ("nothing was changed", "could not be reached", "nothing accepts connections",
                  "read-only", "retry"):
        if words in text:
            return f"consolidation: {text.split(':', 1)[0].removeprefix('consolidation ')}: {words.strip()}"
    return "other: " + text[:200]


def _allowed(kind: str) -> bool:
    """A clear retry, a resolved outcome, or (item writer, its own loads) the driver's error."""
    return kind in ALLOWED_FAILURES or kind.startswith(("item: raised ", "consolidation: "))


ALLOWED_FAILURES = {
    "could not be reached; nothing was changed; retry",
    "may or may not have been saved",
    "commit lost; looked up: nothing was saved; retry",
    "connection lost; nothing was changed; retry",
    "connection lost; whole transaction rolled back; retry the whole unit of work",
    "held connection: roll back, then redo",
    "raised OperationalError",
    "raised ConflictError(transaction_rolled_back)",
    "view: not there",
}


# -- the committed state -------------------------------------------------------------------------


def _committed_state(
    engine: Engine,
) -> tuple[dict[str, tuple[str, int]], list[Any], Counter[tuple[str, str]]]:
    """(path -> (body, version_no), store rows with their aggregates, audit rows per
    (path, action)) of agent HA's user stores, read on the primary."""
    with engine.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT f.file_path, f.body, f.version_no, f.char_count FROM dbm_files f "
                "JOIN dbm_stores s ON s.store_id = f.store_id WHERE s.store_key LIKE 'user:HA:%'"
            )
        ).all()
        files = {path: (body or "", version) for path, body, version, _chars in rows}
        wrong = [(path, chars) for path, body, _v, chars in rows if chars != len(body or "")]
        assert not wrong, wrong
        stores = c.execute(
            sa.text(
                "SELECT s.store_key, s.file_count, s.total_chars, count(f.file_id), "
                "coalesce(sum(f.char_count), 0) FROM dbm_stores s "
                "LEFT JOIN dbm_files f ON f.store_id = s.store_id "
                "WHERE s.store_key LIKE 'user:HA:%' "
                "GROUP BY s.store_key, s.file_count, s.total_chars ORDER BY s.store_key"
            )
        ).all()
        audit = Counter(
            {
                (path, action): n
                for path, action, n in c.execute(
                    sa.text(
                        "SELECT file_path, action_name, count(*) FROM dbm_audit_events "
                        "WHERE store_key LIKE 'user:HA:%' GROUP BY file_path, action_name"
                    )
                )
            }
        )
    return files, stores, audit


def _check_nothing_lost_or_doubled(load: Load) -> dict[str, int]:
    files, stores, audit = _committed_state(load.engine)
    results = Counter(o.result for o in load.outcomes)
    assert results["gave up"] == 0, [o for o in load.outcomes if o.result == "gave up"]
    lines: Counter[str] = Counter()
    for path, (body, _version) in files.items():
        rows = body.split("\n")
        assert rows[-1] == "", (path, body)
        lines.update(rows[1:-1])
        assert rows[0] == Path(path).stem + "-head", (path, body)
    doubled = {line: n for line, n in lines.items() if n > 1}
    assert not doubled, doubled
    for o in load.outcomes:  # every change a writer was told (or saw) is saved is there once
        if o.kind == "path":
            assert o.key in files, o
        else:
            assert lines[o.key] == 1, o
    attempted = {o.key for o in load.outcomes}
    assert set(files) <= attempted and set(lines) <= attempted
    # counters of each store = the aggregates over its files
    assert len(stores) == len(USERS), stores
    for key, file_count, total_chars, counted, summed in stores:
        assert (file_count, total_chars) == (counted, summed), (key, file_count, total_chars)
    # one audit row per saved change: the create, then one per line inserted
    for path, (body, version) in files.items():
        inserted = body.count("\n") - 1
        assert audit[(path, "create")] == 1, (path, audit[(path, "create")])
        assert sum(n for (p, _a), n in audit.items() if p == path) == 1 + inserted == version, (
            path, version, {a: n for (p, a), n in audit.items() if p == path},
        )
    audited = {p for p, _a in audit}
    assert audited == set(files), audited ^ set(files)
    return {
        "files": len(files),
        "lines": sum(lines.values()),
        **{f"outcome {k}": v for k, v in results.items()},
    }


def _check_items_and_profile(load: Load) -> dict[str, int]:
    """The item writer's and the consolidation writer's changes: each once, none lost, their
    audit events and the profile store's counters exact."""
    for kind, outcomes in (("items", load.item_outcomes), ("skills", load.skill_outcomes)):
        results = Counter(o.result for o in outcomes)
        assert results["gave up"] == 0, (kind, outcomes)
        assert results["saved"] + results["found"] >= 1, (kind, "nothing saved")
    with load.engine.connect() as c:
        items = list_items(c, ITEM_USER)
        added = Counter(dict(c.execute(sa.text(
            "SELECT item_id, count(*) FROM dbm_audit_events WHERE action_name = 'item_add' "
            "GROUP BY item_id"
        )).all()))
        state = load_user_memory(c, PROFILE_USER, config=PROFILE_CONFIG, model=MODEL)
        assert state is not None
        profile = c.execute(sa.text(
            "SELECT f.version_no, s.file_count, s.total_chars, f.char_count, "
            "(SELECT count(*) FROM dbm_audit_events a WHERE a.store_id = s.store_id) "
            "FROM dbm_stores s JOIN dbm_files f ON f.store_id = s.store_id WHERE s.store_id = :s"
        ), {"s": state.store_id}).one()
    texts = Counter(item.text for item in items)
    assert not {t: n for t, n in texts.items() if n > 1}, texts
    assert all(texts[o.key] == 1 for o in load.item_outcomes), (texts, load.item_outcomes)
    assert set(texts) <= {o.key for o in load.item_outcomes}, texts
    assert {item.item_id: 1 for item in items} == dict(added), (items, added)
    skills = _skills(state.text)
    assert len(skills) == len(set(skills)), skills
    assert skills == [o.key for o in load.skill_outcomes], (skills, load.skill_outcomes)
    version, file_count, total_chars, chars, audited = profile
    assert version == len(skills) == audited, (version, skills, audited)
    assert (file_count, total_chars) == (1, chars), profile
    return {
        "items": len(items),
        **{f"item {k}": v for k, v in Counter(o.result for o in load.item_outcomes).items()},
        "skills": len(skills),
        **{f"skill {k}": v for k, v in Counter(o.result for o in load.skill_outcomes).items()},
    }


def _stuck(load: Load, engine: Engine) -> str:
    """What the writers last got, and the sessions on the primary (a failure's message)."""
    last = [
        f"writer {i}: {a.what} -> {a.port} in {a.ended - a.started:.3f} s: {a.text[:200]}"
        for i in range(WRITERS)
        for a in load.last(i, 3)
    ]
    return "the writers did not all recover:\n" + "\n".join(last) + f"\n{_activity(engine)}"


def _activity(engine: Engine) -> list[Any]:
    with engine.connect() as c:
        rows = c.execute(sa.text(
            "SELECT pid, state, xact_start, wait_event_type, left(query, 80) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ))
        return [tuple(r) for r in rows]


def _rewinds() -> int:
    """How many times Patroni ran pg_rewind so far (its logs under .../patroni/node*)."""
    base = Path(os.environ.get("DBMEMORY_CI_DIR", "/var/tmp/dbmemory-ci")) / "patroni"
    count = 0
    for log in base.glob("node*/patroni.log*"):
        try:
            count += log.read_text(errors="replace").count("pg_rewind exit code=")
        except OSError:  # rotated away meanwhile
            pass
    return count


def _primary_port(engine: Engine) -> int:
    with engine.connect() as c:
        port, recovery = c.execute(sa.text("SELECT inet_server_port(), pg_is_in_recovery()")).one()
    assert recovery is False
    return int(port)


def _run_disruption(
    engine: Engine, name: str, disrupt: Callable[[], None], bound: float
) -> dict[str, Any]:
    """Writers run, ``disrupt()`` changes the primary, writers go on until each has saved
    writes on the new primary; then everything is checked. Returns the measurements."""
    ports = _node_ports()
    rewinds = _rewinds()
    old_leader = _ci("leader")
    assert _primary_port(engine) == ports[old_leader]
    load = Load(engine)
    load.start()
    try:
        deadline = time.monotonic() + 30
        while len(load.saved_after(0)) < 4 * WRITERS:  # every writer is under way
            assert not load.problems, load.problems
            assert time.monotonic() < deadline, "the writers are too slow"
            time.sleep(0.05)
        time.sleep(1.0)
        moment = time.monotonic()
        disrupt()
        old_port = ports[old_leader]
        new_port = next(port for port in ports.values() if port != old_port)
        deadline = moment + bound + 30
        while not load.saved_after(moment, new_port):
            assert time.monotonic() < deadline, f"no write saved {bound + 30:.0f} s after the {name}"
            assert not load.problems, load.problems
            time.sleep(0.02)
        first = min(a.ended for a in load.saved_after(moment, new_port))
        while (
            {a.writer for a in load.saved_after(first, new_port)} != set(range(WRITERS))
            or len(load.saved_after(first, new_port)) < 5 * WRITERS
        ):
            assert time.monotonic() < first + 60, _stuck(load, engine)
            assert not load.problems, load.problems
            time.sleep(0.05)
    finally:
        load.finish()
    _ci("wait", str(int(HEAL_BOUND_S)))
    healed = time.monotonic() - moment
    new_leader = _ci("leader")
    assert new_leader != old_leader
    assert _primary_port(engine) == ports[new_leader]
    with engine.connect() as c:
        assert c.execute(sa.text(
            "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'"
        )).scalar() == 1
    counts = _check_nothing_lost_or_doubled(load)
    counts.update(_check_items_and_profile(load))
    during = Counter(_kind(a) for a in load.answers if not _saved(a.text))
    others = {k: n for k, n in during.items() if not _allowed(k)}
    assert not others, others
    unknown = [o for o in load.outcomes if o.result == "found"]
    on_old = load.saved_after(moment, ports[old_leader])
    last_old = max((a.ended for a in on_old), default=moment)
    report = {
        "disruption": name,
        "from": old_leader,
        "to": new_leader,
        "first_saved_on_new_primary_s": round(first - moment, 3),
        "saved_on_old_primary_after": len(on_old),
        "last_saved_on_old_primary_s": round(last_old - moment, 3),
        "write_gap_s": round(first - last_old, 3),
        "healthy_after_s": round(healed, 1),
        "answers": len(load.answers),
        "failed_answers": dict(during),
        "samples": {k: next(a.text[:300] for a in load.answers if _kind(a) == k) for k in during},
        "may_be_saved_then_found": len(unknown),
        "pg_rewind_runs": _rewinds() - rewinds,
        **counts,
    }
    log = os.environ.get("DBMEMORY_TEST_PATRONI_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(report) + "\n")
    print(report)
    assert first - moment <= bound, report
    return report


# -- tests ---------------------------------------------------------------------------------------


def test_the_multi_host_url_writes_on_the_primary_and_the_standby_receives(ha_engine: Engine) -> None:
    ports = _node_ports()
    leader = _ci("leader")
    with ha_engine.begin() as c:
        answer = dbmemory.MemoryTool(c, AGENT, user_id="u0").execute(
            {"command": "create", "path": "/memories/hello.md", "file_text": "hello\n"}
        )
        assert _saved(answer), answer
        port, recovery = c.execute(sa.text("SELECT inet_server_port(), pg_is_in_recovery()")).one()
        assert (port, recovery) == (ports[leader], False)
        sync = c.execute(sa.text(
            "SELECT application_name FROM pg_stat_replication "
            "WHERE sync_state = 'sync' AND state = 'streaming'"
        )).scalars().all()
    assert len(sync) == 1 and sync[0] != leader, sync
    standby_url = ha_engine.url.difference_update_query(["host", "target_session_attrs"]).set(
        host="127.0.0.1", port=ports[sync[0]]
    )
    standby = sa.create_engine(standby_url, poolclass=NullPool)
    try:
        deadline = time.monotonic() + 10
        while True:
            with standby.connect() as c:
                assert c.execute(sa.text("SELECT pg_is_in_recovery()")).scalar() is True
                found = c.execute(sa.text(
                    "SELECT count(*) FROM dbm_files WHERE file_path = '/memories/hello.md'"
                )).scalar()
            if found == 1:
                break
            assert time.monotonic() < deadline, "the standby did not replay the write"
            time.sleep(0.1)
    finally:
        standby.dispose()


def test_kill_9_of_the_primary_under_load_loses_nothing_and_the_same_engine_writes_again(
    ha_engine: Engine,
) -> None:
    def kill_the_primary() -> None:
        pid = int(_ci("primary-pid"))
        # the postmaster killed is the one the engine writes to: the parent of its backend
        with ha_engine.connect() as c:
            backend = c.execute(sa.text("SELECT pg_backend_pid()")).scalar()
        status = Path(f"/proc/{backend}/status").read_text()
        parent = int(re.search(r"^PPid:\s+(\d+)", status, re.MULTILINE).group(1))
        assert parent == pid, (parent, pid)
        os.kill(pid, signal.SIGKILL)

    report = _run_disruption(
        ha_engine, "kill -9 of the primary's postmaster", kill_the_primary, FAILOVER_BOUND_S
    )
    assert report["failed_answers"], "the kill went unnoticed by every writer"


def test_a_planned_switchover_under_load_loses_nothing(ha_engine: Engine) -> None:
    def switch() -> None:
        other = next(n for n in ("pg1", "pg2") if n != _ci("leader"))
        _ci("switchover", other)  # returns when the cluster is healthy again

    report = _run_disruption(ha_engine, "planned switchover", switch, SWITCHOVER_BOUND_S)
    assert report["write_gap_s"] <= SWITCHOVER_GAP_S, report


def test_a_held_autocommit_connection_commits_after_its_server_connection_was_lost(
    ha_engine: Engine,
) -> None:
    """The same as a failover, without one: the primary ends the session of a held AUTOCOMMIT
    connection between two commands (pg_terminate_backend). The application does what the
    answers say (retry; roll back, then redo); the write the tool then says is saved must be
    committed."""
    with ha_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        tool = dbmemory.MemoryTool(conn, AGENT, user_id="u0")
        assert _saved(tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}))
        backend = conn.connection.driver_connection.info.backend_pid
        with ha_engine.connect() as other:
            other.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": backend})
        deadline = time.monotonic() + 5
        while backend in _backends(ha_engine):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        answers = []
        for _ in range(3):
            answers.append(
                tool.execute({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
            )
            if _saved(answers[-1]):
                break
            if ROLL_BACK in answers[-1]:
                conn.rollback()
        assert _saved(answers[-1]), answers
        with ha_engine.connect() as other:
            committed = other.execute(sa.text(
                "SELECT count(*) FROM dbm_files WHERE file_path = '/memories/b.md'"
            )).scalar()
        assert committed == 1, (answers, "created, but not committed")


def _backends(engine: Engine) -> set[int]:
    with engine.connect() as c:
        return set(c.execute(sa.text("SELECT pid FROM pg_stat_activity")).scalars())
