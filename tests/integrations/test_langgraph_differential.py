"""DbMemoryStore against LangGraph's own ``InMemoryStore``: random batches of get, put, delete,
search and list-namespaces operations (hostile labels and keys included) give the same results
on every backend, modulo the ordering rules of :mod:`dbmemory.integrations.langgraph`:

* search without a query: ours is in creation order (a put of an existing item keeps its
  place); the reference groups by namespace, so its full result is sorted by a model of the
  creation order before ``offset``/``limit`` are applied;
* search with a query: the reference ignores the query (no index); ours ranks by BM25, so the
  full result must hold the same items, be sorted by (-score, creation), and the page must be
  that order's slice;
* namespaces: ours lists a namespace while it holds an item; the reference also lists one
  whose items were all deleted or that was only read, so its empty namespaces are removed
  before each of its list operations;
* ``created_at``/``updated_at``: ours come from the file rows (aware UTC, created kept across
  updates), the reference's from each put; not compared, only checked.

Budget: ``DBMEMORY_LG_EXAMPLES`` examples (default 40) per backend.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from sqlalchemy.engine import Engine

pytest.importorskip("langgraph")

from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from dbmemory.integrations.langgraph import DbMemoryStore  # noqa: E402

EXAMPLES = int(os.environ.get("DBMEMORY_LG_EXAMPLES", "40"))
FULL = 10**6

LABELS = ["a", "b", "A", "x y", "ü", "_", "%41", "*", "-", ":", "日本", "a_5F", "reserved", "/"]
KEYS = ["k", "K", "", "a/b", "..", "%2e%2e", "über", " x", "a.json", "_5F", "n\x00ul", "\u200b", "../x"]
TAGS = ["x", "y", "X", "%", "_", "x_", "/", "\\", '"', "ü"]  # strings a filter narrows in SQL
WORDS = ["tea", "green", "coffee", "Tea", "black", "été"]

# Half the draws from two plain labels and keys, so that operations meet each other's items.
labels = hs.one_of(hs.sampled_from(["a", "b"]), hs.sampled_from(LABELS))
namespaces = hs.lists(labels, min_size=1, max_size=3).map(tuple)
prefixes = hs.one_of(hs.just(()), hs.lists(labels, min_size=1, max_size=2).map(tuple))
keys = hs.one_of(hs.sampled_from(["k", "K"]), hs.sampled_from(KEYS))
texts = hs.lists(hs.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)
values = hs.fixed_dictionaries(
    {"n": hs.one_of(hs.integers(-3, 3), hs.floats(-3, 3, allow_nan=False))},
    optional={
        "text": texts,
        "tag": hs.sampled_from(TAGS),
        "nested": hs.fixed_dictionaries({"a": hs.integers(0, 2)}),
        "list": hs.lists(hs.integers(0, 2), max_size=2),
    },
)
filters = hs.one_of(
    hs.none(),
    hs.builds(lambda t: {"tag": t}, hs.sampled_from(TAGS)),
    hs.builds(lambda t: {"tag": {"$eq": t}}, hs.sampled_from(TAGS)),
    hs.builds(lambda t: {"tag": {"$ne": t}}, hs.sampled_from(TAGS)),
    hs.builds(lambda o, v: {"n": {o: v}}, hs.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq", "$ne"]), hs.integers(-2, 2)),
    hs.builds(lambda v, t: {"n": {"$gte": v}, "tag": t}, hs.integers(-2, 2), hs.sampled_from(["x", "y"])),
    hs.builds(lambda v: {"nested": {"a": v}}, hs.integers(0, 2)),
    hs.builds(lambda v: {"nested": {"a": {"$gt": v}}}, hs.integers(0, 2)),
    hs.builds(lambda v: {"list": v}, hs.lists(hs.integers(0, 2), max_size=2)),
)
paths_with_wildcards = hs.lists(hs.one_of(labels, hs.just("*")), min_size=1, max_size=2).map(tuple)
conditions = hs.just(()) | hs.lists(
    hs.builds(lambda t, p: MatchCondition(t, p), hs.sampled_from(["prefix", "suffix"]), paths_with_wildcards),
    max_size=2,
).map(tuple)

puts = hs.builds(lambda n, k, v: PutOp(n, k, v), namespaces, keys, values)
ops = hs.one_of(
    puts,
    puts,
    hs.builds(lambda n, k: PutOp(n, k, None), namespaces, keys),
    hs.builds(lambda n, k: GetOp(n, k), namespaces, keys),
    hs.builds(
        lambda p, f, lim, off, q: SearchOp(p, f, lim, off, q),
        prefixes,
        filters,
        hs.integers(0, 6),
        hs.integers(0, 3),
        hs.one_of(hs.none(), hs.sampled_from(WORDS + ["green tea", "zzz"])),
    ),
    hs.builds(
        lambda c, d, lim, off: ListNamespacesOp(c, d, lim, off),
        conditions,
        hs.one_of(hs.none(), hs.integers(0, 3)),
        hs.integers(0, 6),
        hs.integers(0, 3),
    ),
)
batches = hs.tuples(
    hs.lists(puts, min_size=1, max_size=8),  # a first batch of puts, so that reads meet items
    hs.lists(hs.lists(ops, min_size=1, max_size=5), min_size=2, max_size=12),
).map(lambda t: [t[0], *t[1]])


def _prune(reference: InMemoryStore) -> None:
    for namespace in [n for n, items in reference._data.items() if not items]:
        del reference._data[namespace]


def _full(op: SearchOp) -> SearchOp:
    return op._replace(limit=FULL, offset=0)


def _triple(item: Any) -> tuple[Any, ...]:
    return (tuple(item.namespace), item.key, item.value)


def _check_times(item: Any) -> None:
    assert item.created_at.tzinfo is not None and item.created_at.utcoffset() == dt.timedelta(0)
    assert item.updated_at.tzinfo is not None and item.created_at <= item.updated_at


def _reference_results(reference: InMemoryStore, batch: list[Any]) -> list[Any]:
    """The reference's results with our ordering rules applied (see the module docstring)."""
    listed = {}
    for i, op in enumerate(batch):  # list ops first: they read the state before the puts
        if isinstance(op, ListNamespacesOp):
            _prune(reference)
            listed[i] = reference.batch([op])[0]
    transformed = [_full(op) if isinstance(op, SearchOp) else op for op in batch]
    results = reference.batch(transformed)
    for i, result in listed.items():
        results[i] = result
    return results


Created = dict[tuple[tuple[str, ...], str], int]


def _record_creations(created: Created, batch: list[Any]) -> None:
    """Our creation order after a batch: of several puts of one item the last wins, new items
    are created in the order of their first put in the batch, a delete forgets one."""
    final: dict[tuple[tuple[str, ...], str], Any] = {}
    for op in batch:
        if isinstance(op, PutOp):
            final[(tuple(op.namespace), op.key)] = op.value
    for item, value in final.items():
        if value is None:
            created.pop(item, None)
        elif item not in created:
            created[item] = max(created.values(), default=0) + 1


def _compare(
    ours: list[Any], expected: list[Any], batch: list[Any], extra: dict[int, list[Any]], created: Created
) -> None:
    def seq(x: Any) -> int:
        return created[(tuple(x.namespace), x.key)]

    for i, op in enumerate(batch):
        got, want = ours[i], expected[i]
        if isinstance(op, PutOp):
            assert got is None
        elif isinstance(op, GetOp):
            assert (got is None) == (want is None), (op, got, want)
            if got is not None:
                assert _triple(got) == _triple(want)
                _check_times(got)
        elif isinstance(op, ListNamespacesOp):
            assert got == want, op
        elif op.query is None:
            want_sorted = sorted(want, key=seq)
            page = want_sorted[op.offset : op.offset + op.limit]
            assert [_triple(x) for x in got] == [_triple(x) for x in page], op
            assert all(x.score is None for x in got)
            for x in got:
                _check_times(x)
        else:
            full = extra[i]
            assert sorted(map(_triple, full), key=repr) == sorted(map(_triple, want), key=repr), op
            order = [(-x.score, seq(x)) for x in full]
            assert order == sorted(order), op
            assert [_triple(x) for x in got] == [_triple(x) for x in full[op.offset : op.offset + op.limit]]


def test_random_batches_agree_with_langgraphs_in_memory_store(engine: Engine) -> None:
    from backends import clean_tables

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(batches)
    def run(sequence: list[list[Any]]) -> None:
        clean_tables(engine)
        ours, reference = DbMemoryStore(engine), InMemoryStore()
        created: Created = {}
        for batch in sequence:
            query_ops = {i: op for i, op in enumerate(batch) if isinstance(op, SearchOp) and op.query is not None}
            extended = batch + [_full(op) for op in query_ops.values()]
            got = ours.batch(extended)
            extra = {i: got[len(batch) + n] for n, i in enumerate(query_ops)}
            expected = _reference_results(reference, batch)
            _compare(got[: len(batch)], expected, batch, extra, created)
            _record_creations(created, batch)
        # the whole state agrees at the end
        everything = ours.search((), limit=FULL)
        want = reference.search((), limit=FULL)
        assert sorted(map(_triple, everything), key=repr) == sorted(map(_triple, want), key=repr)
        _prune(reference)
        assert ours.list_namespaces(limit=FULL) == reference.list_namespaces(limit=FULL)

    run()
