"""DbMemoryStore's one-read batches on an Engine (``store.get``, ``store.search``,
``store.list_namespaces``): one statement on a pooled DB-API connection outside any
transaction (:func:`dbmemory.db.raw.engine_rows`). The answers are those of the same read in a
batch (a transaction), on every backend; hostile labels list and match exactly; the pooled
connection goes back as it came (a later write in a caller's transaction still rolls back);
observers still see every statement; a failed lone read reports the error the usual way."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

pytest.importorskip("langgraph")

from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, SearchOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from dbmemory.db.engine import create_engine  # noqa: E402
from dbmemory.errors import DbMemoryError  # noqa: E402
from dbmemory.integrations.langgraph import DbMemoryStore  # noqa: E402

# labels whose encoding holds '_' (LIKE's one-character wildcard, and our escape), '%', '*',
# spaces, non-ASCII letters and an encoded-looking text
HOSTILE = [
    ("a_b",),
    ("aXb",),
    ("a%",),
    ("a%", "x y"),
    ("a_5F",),
    ("é", "日本"),
    ("*", "z"),
    ("users", "u 42"),
    ("users", "u_42"),
    ("users", "u-42", "deep"),
]


def _fill(store: Any) -> None:
    for i, ns in enumerate(HOSTILE):
        store.put(ns, f"k{i}", {"text": f"tea {i}", "n": i})
        store.put(ns, "k_%", {"text": "rain", "n": -i})


def _lists(store: Any) -> list[Any]:
    return [
        store.list_namespaces(),
        store.list_namespaces(prefix=("a_b",)),
        store.list_namespaces(prefix=("a%",)),
        store.list_namespaces(prefix=("users",), max_depth=2),
        store.list_namespaces(suffix=("z",)),
        store.list_namespaces(prefix=("*",)),
        store.list_namespaces(prefix=("users", "*", "deep")),
        store.list_namespaces(prefix=("é",)),
        store.list_namespaces(limit=3, offset=2),
        store.list_namespaces(prefix=("a",)),
    ]


def _items(items: list[Any]) -> list[tuple[Any, ...]]:
    return [(tuple(i.namespace), i.key, i.value) for i in items]


def test_hostile_namespaces_are_listed_exactly_as_langgraphs_in_memory_store(engine: Engine) -> None:
    ours, reference = DbMemoryStore(engine), InMemoryStore()
    _fill(ours)
    _fill(reference)
    assert _lists(ours) == _lists(reference)
    assert ("a_b",) in ours.list_namespaces() and ("aXb",) not in ours.list_namespaces(prefix=("a_b",))


def test_a_lone_read_answers_as_the_same_read_in_a_batch(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    _fill(store)
    reads = [
        GetOp(("a_b",), "k0"),
        GetOp(("a%", "x y"), "k_%"),
        GetOp(("aXb",), "k0"),  # absent
        GetOp(("nowhere",), "k0"),
        SearchOp(("users",), limit=10),
        SearchOp(("a%",), limit=2, offset=1),
        SearchOp((), query="tea", limit=5),
        SearchOp(("users",), filter={"n": {"$gte": 0}}, query="rain", limit=10),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("users",)),), limit=10),
    ]
    in_a_batch = store.batch([*reads, GetOp(("a_b",), "k0")])[: len(reads)]  # a transaction
    alone = [store.batch([op])[0] for op in reads]  # each alone: one statement, no transaction
    for got, want in zip(alone, in_a_batch, strict=True):
        if isinstance(want, list) and want and hasattr(want[0], "key"):
            assert _items(got) == _items(want)
            assert [i.score for i in got] == [i.score for i in want]
            assert [(i.created_at, i.updated_at) for i in got] == [(i.created_at, i.updated_at) for i in want]
        elif want is not None and hasattr(want, "key"):
            assert (got.value, got.key, got.namespace, got.created_at, got.updated_at) == (
                want.value, want.key, want.namespace, want.created_at, want.updated_at,
            )
        else:
            assert got == want


def test_after_a_lone_read_a_write_in_the_callers_transaction_still_rolls_back(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.put(("n",), "a", {"v": 1})
    for _ in range(3):  # the pooled connections of these reads go back to the pool as they came
        assert store.get(("n",), "a").value == {"v": 1}
        assert store.list_namespaces() == [("n",)]
        assert [i.key for i in store.search(("n",))] == ["a"]
    with engine.connect() as conn:
        conn.begin()
        DbMemoryStore(conn).put(("n",), "b", {"v": 2})
        conn.rollback()
    assert store.get(("n",), "b") is None
    assert [i.key for i in store.search(("n",))] == ["a"]


def test_a_listener_on_the_engine_still_sees_every_read_statement(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.put(("n",), "a", {"v": 1})
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        assert store.get(("n",), "a").value == {"v": 1}
        assert store.list_namespaces() == [("n",)]
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    assert any("dbm_files" in s for s in seen) and any("dbm_stores" in s for s in seen)


def test_a_failed_lone_read_reports_the_error_the_usual_way(tmp_path: Any) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'empty.db'}")  # no schema: every read fails
    try:
        store = DbMemoryStore(engine)
        for read in (lambda: store.get(("n",), "a"), store.list_namespaces, lambda: store.search(("n",))):
            with pytest.raises(DbMemoryError):
                read()
    finally:
        engine.dispose()


def test_a_lone_read_on_a_connection_the_server_dropped_still_answers(engine: Engine) -> None:
    """A pooled connection the server closed is not handed to a lone read (the pool's
    pre-ping), or fails it, is dropped, and the read runs again the usual way."""
    if engine.dialect.name != "postgresql":
        pytest.skip("lone reads on a server: PostgreSQL only (SQLite has none; MariaDB reads in a transaction)")
    store = DbMemoryStore(engine)
    store.put(("n",), "a", {"v": 1})
    assert store.get(("n",), "a").value == {"v": 1}  # a lone-read connection is now pooled
    with engine.connect() as conn:
        mine = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> %(me)s AND backend_type = 'client backend'",
            {"me": mine},
        )
        conn.commit()
    for _ in range(3):
        assert store.get(("n",), "a").value == {"v": 1}
        assert store.list_namespaces() == [("n",)]
