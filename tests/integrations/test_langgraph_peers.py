"""DbMemoryStore against LangGraph's own SQL stores (``SqliteStore``, and ``PostgresStore`` when
our backend is PostgreSQL): search filters and TTL behave alike, and where they differ the
difference is the one docs/langgraph.md states (ours follows ``InMemoryStore``).

The peers are in the ``test`` extra (``langgraph-checkpoint-sqlite``,
``langgraph-checkpoint-postgres``), not dependencies of dbmemory itself: an install without
them skips these tests.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

pytest.importorskip("langgraph")
pytest.importorskip("langgraph.store.sqlite", reason="langgraph-checkpoint-sqlite is not installed")

from langgraph.store.base import TTLConfig  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402
from langgraph.store.sqlite import SqliteStore  # noqa: E402

from dbmemory.db.dialect.types import UtcDateTime  # noqa: E402
from dbmemory.errors import InvalidArgumentError  # noqa: E402
from dbmemory.integrations.langgraph import DbMemoryStore  # noqa: E402

ITEMS: dict[str, dict[str, Any]] = {
    "a": {"tag": "x", "n": 1, "list": [1, 2]},
    "b": {"tag": "y", "n": 2.5, "flag": True},
    "c": {"tag": "%", "n": -1},
    "d": {"tag": "x_", "n": 0, "flag": False},
    "e": {"n": None, "tag": "X"},
    "f": {"tag": 'say "hi" \\ /', "n": 3},
}

AGREED = [  # the same items on every store
    {"tag": "x"},
    {"tag": "%"},
    {"tag": "x_"},
    {"tag": 'say "hi" \\ /'},
    {"tag": {"$eq": "y"}},
    {"n": 1},
    {"n": None},
    {"n": {"$gt": 0}},
    {"n": {"$gte": 0}},
    {"n": {"$lt": 1}},
    {"n": {"$lte": 2.5}},
    {"flag": True},
    {"list": [1, 2]},
    {"tag": "x", "n": 1},
    {"tag": {"$ne": "x"}},
]

DIFFERENT = [  # ours as InMemoryStore: a missing or null field is "not equal"; SqliteStore drops it
    {"n": {"$ne": 1}},
    {"missing": {"$ne": 1}},
]

TTL = TTLConfig(default_ttl=60, refresh_on_read=True)


def _peer_url(engine: Engine) -> str | None:
    if engine.dialect.name != "postgresql":
        return None
    pytest.importorskip("langgraph.store.postgres", reason="langgraph-checkpoint-postgres is not installed")
    return os.environ["DBMEMORY_TEST_POSTGRES_URL"]


class _Peer:
    """One of LangGraph's SQL stores on a scratch database, and a way to age its items."""

    def __init__(self, engine: Engine, ttl: TTLConfig | None) -> None:
        self.url = _peer_url(engine)
        self.admin: Engine | None = None
        if self.url is None:
            self._cm: Any = SqliteStore.from_conn_string(":memory:", ttl=ttl)
        else:
            from langgraph.store.postgres import PostgresStore  # optional peer, checked above

            self.admin = sa.create_engine(self.url, isolation_level="AUTOCOMMIT")
            with self.admin.connect() as c:
                c.exec_driver_sql("DROP DATABASE IF EXISTS dbm_test_lg_peer WITH (FORCE)")
                c.exec_driver_sql("CREATE DATABASE dbm_test_lg_peer")
            dsn = sa.make_url(self.url).set(drivername="postgresql", database="dbm_test_lg_peer")
            self._cm = PostgresStore.from_conn_string(dsn.render_as_string(hide_password=False), ttl=ttl)
        self.store = self._cm.__enter__()
        self.store.setup()

    def age(self) -> None:
        """Every item with a TTL past its deadline."""
        if self.url is None:
            self.store.conn.execute(
                "UPDATE store SET expires_at = datetime('now', '-1 minutes') WHERE expires_at IS NOT NULL"
            )
        else:
            with self.store._cursor() as cur:
                cur.execute("UPDATE store SET expires_at = now() - interval '1 minute' WHERE expires_at IS NOT NULL")

    def close(self) -> None:
        self._cm.__exit__(None, None, None)
        if self.admin is not None:
            with self.admin.connect() as c:
                c.exec_driver_sql("DROP DATABASE IF EXISTS dbm_test_lg_peer WITH (FORCE)")
            self.admin.dispose()


@pytest.fixture
def peer(engine: Engine) -> Iterator[_Peer]:
    p = _Peer(engine, None)
    yield p
    p.close()


@pytest.fixture
def ttl_peer(engine: Engine) -> Iterator[_Peer]:
    p = _Peer(engine, TTL)
    yield p
    p.close()


def _age_ours(engine: Engine) -> None:
    """As if every file had been written and read two hours ago (past a 60-minute TTL)."""
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2, minutes=5)
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE dbm_files SET last_accessed_at = :t").bindparams(sa.bindparam("t", type_=UtcDateTime())),
            {"t": old},
        )
        conn.execute(sa.text("DELETE FROM dbm_file_reads"))


def _keys(store: Any, namespace: tuple[str, ...] = ("ns",), **kwargs: Any) -> list[str]:
    return sorted(i.key for i in store.search(namespace, limit=100, **kwargs))


def test_search_filters_agree_with_langgraphs_sql_store(engine: Engine, peer: _Peer) -> None:
    ours, reference = DbMemoryStore(engine), InMemoryStore()
    for key, value in ITEMS.items():
        for store in (ours, peer.store, reference):
            store.put(("ns",), key, value)
        peer.store.put(("other",), key, value)  # outside the prefix on every store
        ours.put(("other",), key, value)
    for flt in AGREED:
        assert _keys(ours, filter=flt) == _keys(peer.store, filter=flt), flt
    for flt in DIFFERENT:
        assert _keys(ours, filter=flt) == _keys(reference, filter=flt), flt
        if peer.url is None:
            assert _keys(ours, filter=flt) != _keys(peer.store, filter=flt), flt
    for flt in ({"n": {"$gte": 0}}, {"tag": "x"}, None):  # pages of the same size
        for limit, offset in ((2, 0), (2, 1), (10, 3)):
            got = ours.search(("ns",), filter=flt, limit=limit, offset=offset)
            want = peer.store.search(("ns",), filter=flt, limit=limit, offset=offset)
            assert len(got) == len(want), (flt, limit, offset)


def test_ttl_sweeps_and_refreshes_as_langgraphs_sql_store(engine: Engine, ttl_peer: _Peer) -> None:
    ours = DbMemoryStore(engine, ttl=TTL)
    theirs = ttl_peer.store
    assert ours.supports_ttl and theirs.supports_ttl
    for store in (ours, theirs):
        store.put(("t",), "default", {"v": 1})  # default_ttl
        store.put(("t",), "forever", {"v": 2}, ttl=None)
        store.put(("t",), "read", {"v": 3}, ttl=60)
    _age_ours(engine)
    ttl_peer.age()
    for store in (ours, theirs):  # expired but not swept: still visible (no omit_expired)
        assert store.get(("t",), "default", refresh_ttl=False) is not None
        assert store.get(("t",), "read") is not None  # refresh_on_read: the TTL starts again
    assert ours.sweep_ttl() == theirs.sweep_ttl() == 1
    assert _keys(ours, ("t",)) == _keys(theirs, ("t",)) == ["forever", "read"]


def test_a_ttl_other_than_the_stores_is_refused_where_langgraph_keeps_it(engine: Engine, ttl_peer: _Peer) -> None:
    ttl_peer.store.put(("t",), "short", {"v": 1}, ttl=5)
    assert ttl_peer.store.get(("t",), "short") is not None
    with pytest.raises(InvalidArgumentError, match="pass ttl=60") as caught:
        DbMemoryStore(engine, ttl=TTL).put(("t",), "short", {"v": 1}, ttl=5)
    assert caught.value.code == "unsupported_ttl"
