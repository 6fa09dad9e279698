"""The 100-auto-item cap holds at every isolation level of every backend (issue 21): two writers
of one user at 98 live auto items each add 3 in their own transaction; the second waits for the
first's lock on the user's switch row, and after both end the user has exactly 100 live auto
items (the second writer either evicts what it must or, at REPEATABLE READ on PostgreSQL and
MariaDB and PostgreSQL's SERIALIZABLE, is refused with a ConflictError and writes nothing).
Before the fix MariaDB at REPEATABLE READ (the server default of an engine not made by
:func:`dbmemory.create_engine`) counted from the second writer's snapshot and left 103.

Writers of different users at MariaDB REPEATABLE READ never deadlock over the count (it takes
no locks on the counted rows)."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from dbmemory import items as I
from dbmemory.errors import ConflictError

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
START = I.MAX_AUTO_ITEMS - 2
LEVELS = ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE", "plain-engine"]


def _engine_at(engine: Engine, backend_name: str, level: str) -> Engine:
    if backend_name == "sqlite-memory":
        pytest.skip("in-memory SQLite has one shared connection")
    if backend_name == "sqlite-file":
        if level != "SERIALIZABLE":
            pytest.skip("SQLite has one level (SERIALIZABLE, one writer at a time)")
        return engine
    if level == "plain-engine":  # the caller's own engine at the server's default level
        return sa.create_engine(engine.url, poolclass=NullPool)
    return engine.execution_options(isolation_level=level)  # type: ignore[return-value]


def _level_of(engine: Engine) -> str:
    with engine.connect() as c:
        if engine.dialect.name in ("mysql", "mariadb"):
            return str(c.exec_driver_sql("SELECT @@tx_isolation").scalar())
        if engine.dialect.name == "postgresql":
            return str(c.exec_driver_sql("SHOW transaction_isolation").scalar())
    return "serializable"


@pytest.mark.parametrize("read_first", [False, True], ids=["fresh", "after-a-read"])
@pytest.mark.parametrize("level", LEVELS)
def test_two_writers_at_98_auto_items_adding_3_each_leave_100(
    engine: Engine, backend_name: str, level: str, read_first: bool
) -> None:
    writers = _engine_at(engine, backend_name, level)
    if level == "plain-engine" and backend_name == "mysql":
        assert _level_of(writers) == "REPEATABLE-READ"  # MariaDB's server default
    with engine.begin() as c:
        for n in range(START):
            I.add_item(c, "u1", f"old fact {n}", kind="auto", now=T0 + dt.timedelta(minutes=n))
    now = T0 + dt.timedelta(hours=3)
    outcome: dict[str, object] = {}
    with writers.connect() as a, writers.connect() as b:
        a_tx = a.begin()
        for n in range(3):
            I.add_item(a, "u1", f"writer a fact {n}", kind="auto", now=now)

        def run_b() -> None:
            try:
                with b.begin():
                    if read_first:  # a turn read the user's items first (its snapshot)
                        I.list_items(b, "u1", now=now)
                    for n in range(3):
                        I.add_item(b, "u1", f"writer b fact {n}", kind="auto", now=now)
                outcome["b"] = "committed"
            except ConflictError as exc:
                outcome["b"] = exc
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome["b"] = exc

        thread = threading.Thread(target=run_b)
        thread.start()
        time.sleep(0.7)  # B waits for A's lock on the user's switch row (SQLite: the writer lock)
        a_tx.commit()
        thread.join(60)
    assert not thread.is_alive()
    b_result = outcome["b"]
    if isinstance(b_result, BaseException) and not isinstance(b_result, ConflictError):
        raise b_result
    if isinstance(b_result, ConflictError):  # refused: nothing of B's was written
        # the same answer on every backend: a snapshot refusal, not a lock wait that gave up
        assert b_result.code == "serialization_failure", b_result
        assert "snapshot" in b_result.message and "retry the whole transaction" in b_result.message
        assert "waited for another writer's lock" not in b_result.message, b_result
        snapshot_levels = {"postgres": ("REPEATABLE READ", "SERIALIZABLE"),
                           "mysql": ("REPEATABLE READ", "plain-engine")}
        assert level in snapshot_levels.get(backend_name, ()), b_result
    with engine.connect() as c:
        live = I.list_items(c, "u1", kind="auto", now=now)
        assert len(live) == I.MAX_AUTO_ITEMS, (level, b_result, len(live))
        names = {i.text for i in live}
        assert {f"writer a fact {n}" for n in range(3)} <= names
        if b_result == "committed":
            assert {f"writer b fact {n}" for n in range(3)} <= names
        # every eviction event names an item that is really evicted, once
        evicted = [e.item_id for e in I.audit_events(c, user_id="u1", action="item_evict")]
        expected = START + (6 if b_result == "committed" else 3) - I.MAX_AUTO_ITEMS
        assert len(evicted) == len(set(evicted)) == expected
    if level == "plain-engine":
        writers.dispose()


def test_writers_of_different_users_at_repeatable_read_do_not_deadlock(engine: Engine, backend_name: str) -> None:
    """The fix takes no next-key locks on the counted items: three users' writers, each adding
    auto items in transactions that read first, all commit (a locking count made 17 of 120
    transactions deadlock victims on MariaDB)."""
    if backend_name not in ("mysql", "postgres"):
        pytest.skip("row locks and REPEATABLE READ: server backends")
    writers = engine.execution_options(isolation_level="REPEATABLE READ")
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def write(user: str) -> None:
        barrier.wait(timeout=30)
        for n in range(15):
            try:
                with writers.begin() as c:
                    I.list_items(c, user, now=T0)
                    for k in range(3):
                        I.add_item(c, user, f"{user} fact {n}.{k}", kind="auto", now=T0)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=write, args=(u,)) for u in ("u1", "u2", "u3")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    with engine.connect() as c:
        assert [I.count_items(c, u, now=T0)["auto"] for u in ("u1", "u2", "u3")] == [45, 45, 45]
