"""DbMemoryStore's contract on every backend: transactions (joining the caller's, one per
batch with an Engine), caps, audit, hostile namespace labels and keys, the mapping onto store
keys and paths, filters against InMemoryStore operator by operator, query ranking, TTL onto
the expiry job, async, and statements that compile for Oracle 19c."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

pytest.importorskip("langgraph")

from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from dbmemory.core.keys import parse_store_key  # noqa: E402
from dbmemory.core.model import Caps, StoreRef  # noqa: E402
from dbmemory.db.dialect.oracle import oracle19_dialect  # noqa: E402
from dbmemory.db.dialect.types import UtcDateTime
from dbmemory.errors import CapExceededError, DbMemoryError, InvalidArgumentError  # noqa: E402
from dbmemory.integrations.langgraph import (  # noqa: E402
    DbMemoryStore,
    LangGraphNamespaceError,
    codec,  # noqa: E402
)
from dbmemory.integrations.langgraph import sql as lg_sql  # noqa: E402
from dbmemory.store.expiry import expire_files_committing  # noqa: E402
from dbmemory.store.files import put_file  # noqa: E402
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file

Other = Callable[..., AbstractContextManager[Connection]]


def _rows(conn: Connection) -> list[tuple[str, str]]:
    return [
        (r[0], r[1])
        for r in conn.execute(
            sa.text(
                "SELECT s.store_key, f.file_path FROM dbm_stores s JOIN dbm_files f "
                "ON f.store_id = s.store_id"
            )
        )
    ]


# -- transactions -----------------------------------------------------------------------------


def test_rollback_of_caller_transaction_removes_puts(engine: Engine, other_connection: Other) -> None:
    with engine.connect() as conn:
        conn.begin()
        store = DbMemoryStore(conn)
        store.put(("users", "u1"), "prefs", {"drink": "tea"})
        assert store.get(("users", "u1"), "prefs").value == {"drink": "tea"}  # seen inside
        with other_connection() as c2:
            assert _rows(c2) == []  # nothing committed by the store
        conn.rollback()
    assert DbMemoryStore(engine).get(("users", "u1"), "prefs") is None


def test_commit_of_caller_transaction_keeps_puts(engine: Engine, other_connection: Other) -> None:
    with engine.connect() as conn:
        conn.begin()
        DbMemoryStore(conn).put(("users", "u1"), "prefs", {"drink": "tea"})
        conn.commit()
    with other_connection() as c2:
        assert _rows(c2) == [("shared:lg.users.u1", "/memories/prefs.json")]


def test_a_one_put_batch_on_an_engine_takes_no_savepoint(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.put(("n",), "a", {"v": 1})
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement.split(None, 1)[0].upper())

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        store.put(("n",), "b", {"v": 2})
        store.delete(("n",), "a")
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    assert "SAVEPOINT" not in seen and "RELEASE" not in seen
    assert [i.key for i in store.search(("n",))] == ["b"]
    assert store.list_namespaces() == [("n",)]


def test_with_an_engine_each_batch_commits(engine: Engine, other_connection: Other) -> None:
    DbMemoryStore(engine).put(("docs",), "a", {"text": "x"})
    with other_connection() as c2:
        assert _rows(c2) == [("shared:lg.docs", "/memories/a.json")]


def test_a_refused_put_leaves_the_callers_transaction_usable(engine: Engine, other_connection: Other) -> None:
    with engine.connect() as conn:
        conn.begin()
        put_file(conn, StoreRef("shared:lg.small", "shared", caps=Caps(max_file_chars=30)), "/memories/x.json", "{}")
        store = DbMemoryStore(conn)
        with pytest.raises(CapExceededError):
            store.put(("small",), "big", {"text": "y" * 100})
        store.put(("small",), "ok", {"t": 1})  # the transaction goes on (PostgreSQL: savepoint)
        conn.commit()
    with other_connection() as c2:
        assert sorted(_rows(c2)) == [("shared:lg.small", "/memories/ok.json"), ("shared:lg.small", "/memories/x.json")]


# -- caps and audit ---------------------------------------------------------------------------


def test_a_value_over_max_file_chars_is_refused_with_a_clear_error(engine: Engine) -> None:
    store = DbMemoryStore(engine, caps=Caps(max_file_chars=50))
    store.put(("notes",), "small", {"text": "fits"})
    with pytest.raises(CapExceededError) as caught:
        store.put(("notes",), "big", {"text": "x" * 100})
    message = str(caught.value)
    assert message.startswith("item 'big' of namespace ('notes',) was refused: ")
    assert "max_file_chars = 50" in message and caught.value.cap == "max_file_chars"
    assert caught.value.actual == len('{"text":"' + "x" * 100 + '"}')
    assert store.get(("notes",), "big") is None


def test_a_batch_with_a_refused_put_keeps_none_of_its_puts(engine: Engine) -> None:
    store = DbMemoryStore(engine, caps=Caps(max_file_chars=50))
    with pytest.raises(CapExceededError):
        store.batch([PutOp(("n",), "a", {"t": 1}), PutOp(("n",), "b", {"t": "x" * 100})])
    assert store.search(("n",)) == []


def test_max_files_caps_a_namespace(engine: Engine) -> None:
    store = DbMemoryStore(engine, caps=Caps(max_files=2))
    store.put(("n",), "a", {})
    store.put(("n",), "b", {})
    with pytest.raises(CapExceededError) as caught:
        store.put(("n",), "c", {})
    assert caught.value.cap == "max_files"
    store.put(("n",), "a", {"changed": True})  # an update adds no file


def test_parallel_puts_from_threads_never_exceed_the_files_cap(engine: Engine) -> None:
    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pytest.skip("in-memory SQLite has one shared connection: batches run one at a time")
    store = DbMemoryStore(engine, caps=Caps(max_files=5))
    store.put(("n",), "first", {})  # the store row exists: its cap applies to every writer
    outcomes: list[str] = []

    def put(i: int) -> None:
        try:
            store.put(("n",), f"k{i}", {"i": i})
            outcomes.append("ok")
        except CapExceededError:
            outcomes.append("cap")

    threads = [threading.Thread(target=put, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["cap"] * 8 + ["ok"] * 4
    assert len(store.search(("n",), limit=100)) == 5


def test_every_change_is_audited_with_the_actor(engine: Engine) -> None:
    store = DbMemoryStore(engine, actor="graph-7")
    store.put(("n",), "a", {"v": 1})
    store.put(("n",), "a", {"v": 2})
    store.delete(("n",), "a")
    with engine.connect() as conn:
        events = conn.execute(
            sa.text("SELECT store_key, file_path, action_name, actor_name FROM dbm_audit_events ORDER BY event_id")
        ).all()
    assert [tuple(e) for e in events] == [
        ("shared:lg.n", "/memories/a.json", "put", "graph-7"),
        ("shared:lg.n", "/memories/a.json", "put", "graph-7"),
        ("shared:lg.n", "/memories/a.json", "delete", "graph-7"),
    ]


# -- the mapping and hostile input ----------------------------------------------------------

HOSTILE_LABELS = ["reserved", "reserved:profile", ":", "/", "%2F", "~x", "a b", "ü", "日本", "_", "_5F", "*", "\u200b", "\\", "x\ny", "\udc80"]
HOSTILE_KEYS = ["", ".", "..", "../x", "/memories/../x", "%2e%2e", "a\\b", "\u200b", " ", "x\x00y", "a/b/c", "über", "\udc80", "k.json", "_5F"]


def test_hostile_labels_and_keys_round_trip_inside_langgraph_stores(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    written = []
    for i, label in enumerate(HOSTILE_LABELS):
        key = HOSTILE_KEYS[i % len(HOSTILE_KEYS)]
        namespace = (label, "x") if i % 2 else (label,)
        store.put(namespace, key, {"i": i, "s": label + key})
        written.append((namespace, key, i))
    for namespace, key, i in written:
        item = store.get(namespace, key)
        assert item is not None and item.value == {"i": i, "s": namespace[0] + key}
        assert item.namespace == namespace and item.key == key
    assert sorted(store.list_namespaces(limit=1000)) == sorted({n for n, _, _ in written})
    with engine.connect() as conn:
        rows = _rows(conn)
    assert len(rows) == len(written)
    for store_key, path in rows:
        parts = parse_store_key(store_key)
        assert parts.scope == "shared" and store_key.startswith("shared:lg.")
        assert re.fullmatch(r"/memories/[A-Za-z0-9._-]*\.json", path), path


@pytest.mark.parametrize("bad", ["a.b", "", "x\x00"])
def test_a_label_breaking_langgraphs_rules_is_refused_before_sql(engine: Engine, bad: str) -> None:
    store = DbMemoryStore(engine)
    for op in (PutOp((bad,), "k", {}), GetOp(("ok", bad), "k"), SearchOp((bad,))):
        with pytest.raises(LangGraphNamespaceError) as caught:
            store.batch([op])
        assert isinstance(caught.value, InvalidNamespaceError) and isinstance(caught.value, DbMemoryError)
        assert caught.value.code == "invalid_namespace"


def test_the_root_label_langgraph_and_an_empty_namespace_are_refused_for_puts(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("langgraph", "x"), "k", {})])
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", {})])
    assert store.batch([GetOp((), "k")]) == [None]


def test_a_namespace_too_long_for_a_store_key_is_refused_on_put_and_absent_on_read(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    fits, too_long = ("a" * 197,), ("ü" * 33,)  # 'lg.' + 197 = 200; 3 + 33 * 6 = 201
    store.put(fits, "k", {"v": 1})
    assert store.get(fits, "k").value == {"v": 1}
    with pytest.raises(LangGraphNamespaceError, match="201 characters as a store code.*limit is 200"):
        store.put(too_long, "k", {})
    assert store.get(too_long, "k") is None
    assert store.search(too_long) == []


def test_a_key_too_long_for_a_path_is_refused(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.put(("n",), "k" * 985, {})
    with pytest.raises(InvalidArgumentError, match="limit is 985"):
        store.put(("n",), "k" * 986, {})


@pytest.mark.parametrize(
    "value, where",
    [
        ({"when": dt.datetime(2026, 1, 1)}, "value['when'] is a datetime"),
        ({"x": float("nan")}, "value['x'] is nan"),
        ({"x": {1: "a"}}, "value['x'] has a key 1"),
        ({"x": [1, {2}]}, "value['x'][1] is a set"),
    ],
)
def test_a_value_that_is_not_json_is_refused_naming_where(engine: Engine, value: Any, where: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(where)):
        DbMemoryStore(engine).put(("n",), "k", value)


def test_files_that_are_not_items_are_skipped_and_a_broken_item_says_so(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.put(("n",), "good", {"v": 1})
    with engine.begin() as conn:
        ref = StoreRef("shared:lg.n", "shared")
        put_file(conn, ref, "/memories/notes.md", "an agent's note")
        put_file(conn, ref, "/memories/sub/x.json", "{}")
        put_file(conn, ref, "/memories/broken.json", "[1, 2]")
        put_file(conn, StoreRef("shared:lg.only-notes", "shared"), "/memories/n.md", "x")
    assert [i.key for i in store.search(("n",))] == ["good"]
    assert store.list_namespaces() == [("n",)]
    assert store.get(("n",), "broken") is None  # a JSON array: not an item


def test_a_json_file_that_is_not_json_reads_as_a_missing_item(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    with engine.begin() as conn:
        ref = StoreRef("shared:lg.n", "shared")
        put_file(conn, ref, "/memories/bad.json", "{not json")
        put_file(conn, ref, "/memories/deep.json", "[" * 100_000)
        put_file(conn, ref, "/memories/empty.json", "")
    for key in ("bad", "deep", "empty", "missing"):
        assert store.get(("n",), key) is None, key
    assert store.search(("n",)) == []


def test_codec_decodes_only_its_own_encoding() -> None:
    for labels in [("a",), ("ü", "x y"), ("_", "*"), ("\udc80",)]:
        assert codec.namespace_of_key(codec.store_key_of(labels)) == labels
    for key in HOSTILE_KEYS:
        assert codec.key_of_path(codec.path_of(key)) == key
    for foreign in ["shared:lg.A_41", "shared:lg.a_2e", "shared:lg.", "shared:lg.a..b", "shared:lgx", "global"]:
        assert codec.namespace_of_key(foreign) is None
    for foreign in ["/memories/a.md", "/memories/a/b.json", "/memories/a_zz.json", "/memories/A_2E.json"]:
        assert codec.key_of_path(foreign) is None


# -- search -----------------------------------------------------------------------------------

DATA = [
    (("u", "1"), "a", {"n": 1, "tag": "x", "nested": {"a": 1}, "list": [1, 2]}),
    (("u", "1"), "b", {"n": 2.5, "tag": "y"}),
    (("u", "2"), "c", {"n": -1, "tag": "x", "nested": {"a": 2}}),
    (("u", "2"), "d", {"n": True, "list": [1]}),
    (("v",), "e", {"n": 0, "tag": "x"}),
]


@pytest.mark.parametrize("operator", ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])
def test_every_filter_operator_matches_in_memory_store(engine: Engine, operator: str) -> None:
    ours, reference = DbMemoryStore(engine), InMemoryStore()
    for namespace, key, value in DATA:
        ours.put(namespace, key, value)
        reference.put(namespace, key, value)
    for operand in [-2, -1, 0, 0.5, 1, 2, 2.5, 3, True]:
        for flt in ({"n": {operator: operand}}, {"n": {operator: operand}, "tag": "x"}):
            want = sorted((tuple(i.namespace), i.key) for i in reference.search((), filter=flt, limit=100))
            got = [(tuple(i.namespace), i.key) for i in ours.search((), filter=flt, limit=100)]
            assert got == want, flt


def test_nested_and_list_filters_match_in_memory_store(engine: Engine) -> None:
    ours, reference = DbMemoryStore(engine), InMemoryStore()
    for namespace, key, value in DATA:
        ours.put(namespace, key, value)
        reference.put(namespace, key, value)
    for flt in ({"nested": {"a": 1}}, {"nested": {"a": {"$gte": 1}}}, {"list": [1]}, {"list": [1, 2]}, {"tag": "x"}, {"missing": None}):
        want = sorted((tuple(i.namespace), i.key) for i in reference.search(("u",), filter=flt))
        assert [(tuple(i.namespace), i.key) for i in ours.search(("u",), filter=flt)] == want, flt


HOSTILE_TEXTS = ["%", "_", "a_b", "50%", "/", "a/b", "\\", 'say "hi"', "it's", "ü", "日本", "\ud800x", "", "x" * 1200, "\n"]


def test_string_filters_narrowed_in_sql_still_match_exactly(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    for i, text in enumerate(HOSTILE_TEXTS):
        store.put(("h",), f"k{i}", {"tag": text, "nested": {"a": [text, i]}})
    store.put(("h",), "other", {"tag": "A", "n": 1, "note": HOSTILE_TEXTS})  # every text, but not as tag
    store.put(("h",), "num", {"tag": 1})
    for i, text in enumerate(HOSTILE_TEXTS):
        for flt in ({"tag": text}, {"tag": {"$eq": text}}, {"nested": {"a": [text, i]}}):
            assert [x.key for x in store.search(("h",), filter=flt, limit=100)] == [f"k{i}"], flt
    assert [x.key for x in store.search(("h",), filter={"tag": "a"})] == []  # case kept (SQLite's LIKE is not)
    assert [x.key for x in store.search(("h",), filter={"tag": 1})] == ["num"]
    assert len(store.search(("h",), filter={"tag": {"$ne": "%"}}, limit=100)) == len(HOSTILE_TEXTS) + 1


def test_a_filtered_page_is_cut_in_creation_order_across_chunks(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.batch([PutOp(("c", str(i % 3)), f"k{i:04d}", {"even": i % 2 == 0, "i": i}) for i in range(450)])
    evens = [f"k{i:04d}" for i in range(0, 450, 2)]
    assert [x.key for x in store.search(("c",), filter={"even": True}, limit=1000)] == evens
    assert [x.key for x in store.search(("c",), filter={"even": True}, limit=5, offset=200)] == evens[200:205]
    assert [x.key for x in store.search(("c",), limit=3, offset=448)] == ["k0448", "k0449"]


def test_an_ordering_operator_on_a_missing_or_text_field_does_not_match(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.put(("n",), "a", {"n": 1})
    store.put(("n",), "b", {"n": "text"})
    store.put(("n",), "c", {})
    assert [i.key for i in store.search(("n",), filter={"n": {"$gte": 0}})] == ["a"]
    with pytest.raises(InvalidArgumentError, match="'\\$in' is not supported"):
        store.search(("n",), filter={"n": {"$in": [1]}})


def test_query_ranks_by_bm25_and_never_drops_an_item(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.put(("docs",), "tea", {"text": "green tea from Japan", "more": ["tea"]})
    store.put(("docs",), "coffee", {"text": "black coffee"})
    store.put(("docs",), "both", {"text": "tea or coffee"})
    store.put(("docs",), "none", {"n": 1})
    found = store.search(("docs",), query="green tea")
    assert [i.key for i in found] == ["tea", "both", "coffee", "none"]
    assert found[0].score > found[1].score > 0 and found[2].score == found[3].score == 0.0
    assert [i.key for i in store.search(("docs",), query="green tea", limit=2, offset=1)] == ["both", "coffee"]
    assert all(i.score is None for i in store.search(("docs",)))
    assert [i.key for i in store.search(("docs",))] == ["tea", "coffee", "both", "none"]  # creation order


def test_timestamps_come_from_the_file_row(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    store.put(("n",), "a", {"v": 1})
    first = store.get(("n",), "a")
    store.put(("n",), "a", {"v": 2})
    second = store.get(("n",), "a")
    store.put(("n",), "a", {"v": 2})  # unchanged: not written
    third = store.get(("n",), "a")
    assert first.created_at.utcoffset() == dt.timedelta(0)
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    assert third.updated_at == second.updated_at
    with engine.connect() as conn:
        record = get_file(conn, find_store_id(conn, "shared:lg.n"), "/memories/a.json")
    assert (record.created_at, record.updated_at) == (second.created_at, second.updated_at)


# -- TTL onto the expiry job ----------------------------------------------------------------


def _exempt(engine: Engine, key: str) -> bool:
    with engine.connect() as conn:
        return get_file(conn, find_store_id(conn, "shared:lg.n"), f"/memories/{key}.json").expiry_exempt


def test_without_expiry_days_there_is_no_ttl_and_items_never_expire(engine: Engine) -> None:
    store = DbMemoryStore(engine)
    assert store.supports_ttl is False and store.ttl_config is None
    with pytest.raises(NotImplementedError):
        store.put(("n",), "a", {}, ttl=5)
    with pytest.raises(NotImplementedError, match="expiry_days"):
        store.batch([PutOp(("n",), "a", {}, ttl=5)])
    store.put(("n",), "a", {})
    assert _exempt(engine, "a")
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=400)
    assert expire_files_committing(engine, days=30, now=future) == 0


def test_with_expiry_days_the_one_ttl_leaves_an_item_to_the_expiry_job(engine: Engine) -> None:
    store = DbMemoryStore(engine, expiry_days=30)
    assert store.supports_ttl and store.ttl_minutes == 43200
    store.put(("n",), "kept", {"v": 1})  # ttl None: never expires
    store.put(("n",), "goes", {"v": 2}, ttl=43200)
    assert _exempt(engine, "kept") and not _exempt(engine, "goes")
    with pytest.raises(InvalidArgumentError, match="pass ttl=43200") as caught:
        store.put(("n",), "x", {}, ttl=60)
    assert caught.value.code == "unsupported_ttl"
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=31)
    assert expire_files_committing(engine, days=30, now=future) == 1
    assert store.get(("n",), "goes") is None and store.get(("n",), "kept").value == {"v": 1}


def _age_every_file(engine: Engine, days: int) -> None:
    """As if every file had been written ``days`` days ago (and never read since)."""
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
    stmt = sa.text("UPDATE dbm_files SET last_accessed_at = :t").bindparams(sa.bindparam("t", type_=UtcDateTime()))
    with engine.begin() as conn:
        conn.execute(stmt, {"t": old})


def test_a_read_refreshes_the_ttl_unless_told_not_to(engine: Engine) -> None:
    store = DbMemoryStore(engine, expiry_days=30)
    for key in ("got", "got-quietly", "searched", "searched-quietly", "rewritten"):
        store.put(("n",), key, {"name": key}, ttl=43200)
    _age_every_file(engine, 40)
    store.put(("n",), "rewritten", {"name": "rewritten"}, ttl=43200)  # unchanged, yet refreshed
    assert store.get(("n",), "got") is not None
    assert store.get(("n",), "got-quietly", refresh_ttl=False) is not None
    assert [i.key for i in store.search(("n",), filter={"name": "searched"})] == ["searched"]
    assert len(store.search(("n",), filter={"name": "searched-quietly"}, refresh_ttl=False)) == 1
    assert expire_files_committing(engine, days=30) == 2
    assert sorted(i.key for i in store.search(("n",), refresh_ttl=False)) == ["got", "rewritten", "searched"]


def test_sweep_ttl_expires_only_langgraph_items(engine: Engine) -> None:
    store = DbMemoryStore(engine, expiry_days=1)
    store.put(("n",), "goes", {}, ttl=1440)
    with engine.begin() as conn:
        put_file(conn, StoreRef("shared:other", "shared"), "/memories/a.md", "x")
    _age_every_file(engine, 3)
    assert store.sweep_ttl() == 1
    with engine.connect() as conn:
        assert _rows(conn) == [("shared:other", "/memories/a.md")]


def test_ttl_settings_are_checked() -> None:
    engine = sa.create_engine("sqlite://")
    with pytest.raises(InvalidArgumentError, match="shorter than 60 minutes") as caught:
        DbMemoryStore(engine, default_ttl=10)
    assert caught.value.code == "unsupported_ttl"
    with pytest.raises(InvalidArgumentError, match="pass ttl=1440"):
        DbMemoryStore(engine, expiry_days=1, default_ttl=10)
    store = DbMemoryStore(engine, expiry_days=1, default_ttl=1440, refresh_on_read=False)
    assert store.ttl_config == {"refresh_on_read": False, "default_ttl": 1440}
    with pytest.raises(InvalidArgumentError):
        DbMemoryStore(engine, expiry_days=0)
    with pytest.raises(InvalidArgumentError, match="not both"):
        DbMemoryStore(engine, ttl={"default_ttl": 120}, default_ttl=120)
    with pytest.raises(InvalidArgumentError, match="unknown TTLConfig keys"):
        DbMemoryStore(engine, ttl={"default_tl": 120})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(InvalidArgumentError, match="sweep_interval_minutes"):
        DbMemoryStore(engine, ttl={"default_ttl": 120, "sweep_interval_minutes": 0})
    with pytest.raises(NotImplementedError, match="omit_expired"):
        DbMemoryStore(engine, ttl={"default_ttl": 120, "omit_expired": True})


def test_a_ttl_config_sets_the_one_ttl_as_langgraphs_stores_take_it(engine: Engine) -> None:
    store = DbMemoryStore(engine, ttl={"default_ttl": 120, "refresh_on_read": False, "sweep_interval_minutes": 7})
    assert store.supports_ttl and store.expiry_days == pytest.approx(120 / 1440) and store.ttl_minutes == pytest.approx(120)
    assert store.ttl_config == {"default_ttl": 120, "refresh_on_read": False, "sweep_interval_minutes": 7}
    store.put(("n",), "default", {"v": 1})  # the default TTL: left to the expiry job
    store.put(("n",), "kept", {"v": 2}, ttl=None)
    assert not _exempt(engine, "default") and _exempt(engine, "kept")
    with pytest.raises(InvalidArgumentError, match="pass ttl=120"):
        store.put(("n",), "x", {}, ttl=60)
    _age_every_file(engine, 1)
    assert store.get(("n",), "default") is not None  # refresh_on_read=False: no touch
    assert store.sweep_ttl() == 1
    assert [i.key for i in store.search(("n",))] == ["kept"]


def test_the_ttl_sweeper_thread_sweeps_and_stops(engine: Engine) -> None:
    store = DbMemoryStore(engine, ttl={"default_ttl": 60, "sweep_interval_minutes": 0.001})
    store.put(("n",), "goes", {})
    _age_every_file(engine, 1)
    future = store.start_ttl_sweeper()
    deadline = dt.datetime.now() + dt.timedelta(seconds=20)
    while store.get(("n",), "goes", refresh_ttl=False) is not None and dt.datetime.now() < deadline:
        threading.Event().wait(0.05)
    assert store.stop_ttl_sweeper(timeout=10) and future.result(timeout=10) is None
    assert store.get(("n",), "goes") is None
    with pytest.raises(NotImplementedError, match="needs a TTL"):
        DbMemoryStore(engine).start_ttl_sweeper()
    with engine.connect() as conn, pytest.raises(InvalidArgumentError, match="needs an Engine"):
        DbMemoryStore(conn, expiry_days=1).start_ttl_sweeper()


def test_a_vector_index_is_refused_and_a_puts_index_argument_ignored(engine: Engine) -> None:
    with pytest.raises(NotImplementedError, match="no vector index"):
        DbMemoryStore(engine, index={"dims": 3, "embed": lambda texts: [[0.0] * 3 for _ in texts]})
    store = DbMemoryStore(engine)
    store.put(("n",), "a", {"text": "x"}, index=["text"])
    assert store.get(("n",), "a").value == {"text": "x"}


# -- async, binds, Oracle -----------------------------------------------------------------------


def test_abatch_runs_the_same_work(engine: Engine) -> None:
    store = DbMemoryStore(engine)

    async def work() -> Any:
        await store.aput(("n",), "a", {"v": 1})
        await asyncio.gather(*(store.aput(("n",), f"k{i}", {"v": i}) for i in range(5)))
        return await store.aget(("n",), "a"), await store.asearch(("n",), limit=100), await store.alist_namespaces()

    item, found, names = asyncio.run(work())
    assert item.value == {"v": 1} and len(found) == 6 and names == [("n",)]


def test_a_url_or_an_async_engine(tmp_path: Any) -> None:
    url = f"sqlite:///{(tmp_path / 'lg.db').as_posix()}"
    with DbMemoryStore.from_conn_string(url) as store:
        store.setup()
        store.put(("n",), "a", {"v": 1})
    with DbMemoryStore(url) as again:
        assert again.get(("n",), "a").value == {"v": 1}

    class AsyncEngine:  # the class name is what is checked: no async driver needed
        pass

    with pytest.raises(InvalidArgumentError, match="synchronous Engine"):
        DbMemoryStore(AsyncEngine())  # type: ignore[arg-type]


def test_statements_compile_for_oracle_19c() -> None:
    dialect = oracle19_dialect()
    for stmt in (
        lg_sql.select_item_rows("shared:lg.a", with_body=True),
        lg_sql.select_item_rows("shared:lg.", with_body=False),
        lg_sql.select_bodies([1, 2]),
        lg_sql.select_namespace_rows("shared:lg.a"),
        lg_sql.select_store_ids("shared:lg."),
    ):
        sql = str(stmt.compile(dialect=dialect))
        assert "LIKE" not in sql  # exact prefixes only: '_' is our escape character
    search = lg_sql.select_search_rows("shared:lg.a", needles=[['"a_b%"']], after_id=5, limit=10, offset=2)
    sql = str(search.compile(dialect=dialect))
    assert "ESCAPE '/'" in sql and "FETCH FIRST" in sql or "ROWNUM" in sql
    compiled = search.compile(dialect=dialect)
    assert '"a/_b/%"' in [v.strip("%") for v in compiled.params.values() if isinstance(v, str)]
    compiled = lg_sql.select_namespace_keys("shared:lg.").compile(dialect=dialect)
    # the path patterns are constants in the text (a bound LIKE pattern makes SQLite prepare
    # the statement again at each run): no wildcard '_' in them
    patterns = re.findall(r"LIKE '([^']*)'", str(compiled))
    assert patterns == ["%.json", "/memories/%/%"]


# -- the docs page (docs/langgraph.md) and the example run as shipped -----------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _python(code_or_file: list[str], cwd: Path, **env: str) -> str:
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **env}
    done = subprocess.run([sys.executable, *code_or_file], cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_docs_page_runs_as_pasted_and_prints_what_it_says(tmp_path: Path) -> None:
    section = (ROOT / "docs" / "langgraph.md").read_text(encoding="utf-8").split("# LangGraph store\n", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    said = [line.split("# ", 1)[1].strip() for line in block.splitlines() if line.startswith("print(")]
    assert _python(["-c", block], tmp_path).splitlines() == said


def test_the_example_graph_runs_offline(tmp_path: Path) -> None:
    out = _python([str(ROOT / "examples" / "langgraph_store.py")], tmp_path, DBMEMORY_URL=f"sqlite:///{(tmp_path / 'x.db').as_posix()}")
    assert "bot:  You like green tea, hiking, jazz." in out
    assert "namespaces: [('preferences', 'u-42')]" in out
