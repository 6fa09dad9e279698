"""Search of the LangGraph store (:mod:`dbmemory.integrations.langgraph`): what the database
does and what is left to Python.

In SQL (:func:`dbmemory.integrations.langgraph.sql.select_search_rows`): the namespace prefix
(exact store-key prefix), item-shaped file names, the order (creation order, ``file_id``), and

* without filter or query: ``LIMIT``/``OFFSET`` themselves, so a page reads only its rows;
* with a filter: every text the filter needs literally (a string compared by equality, at any
  depth, ``{"tag": "x"}``, ``{"a": {"b": "x"}}``, ``{"tag": {"$eq": "x"}}``, list elements)
  narrows the rows with ``body LIKE '%"x"%'``; the rows come in chunks, each checked exactly
  in Python (:func:`~dbmemory.integrations.langgraph.codec.matches_filter`, the semantics of
  LangGraph's ``InMemoryStore``), until the page is full;
* with a query: the rows that pass prefix and filter, ranked by BM25 in Python
  (:mod:`~dbmemory.integrations.langgraph.ranking`), then sliced.

Numbers, booleans, ``None`` and the operators other than ``$eq`` are checked in Python only:
``InMemoryStore`` compares with Python's ``==`` (``1 == 1.0 == True``), which no text pattern
states exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from dbmemory.integrations.langgraph import codec
from dbmemory.integrations.langgraph import sql as lg_sql
from dbmemory.integrations.langgraph.ranking import bm25_scores

__all__ = ["Found", "needles_of", "find_items", "CHUNK", "MAX_NEEDLE_CHARS"]

CHUNK = 200
"""Rows read per statement by a filtered search, at least (more when the page needs more)."""

MAX_NEEDLE_CHARS = 1000
"""Longer filter strings are checked in Python only (a ``LIKE`` pattern stays small)."""


class Found(NamedTuple):
    """One item a search found: its namespace, key, file row and decoded value."""

    namespace: tuple[str, ...]
    key: str
    row: lg_sql.SearchRow
    value: dict[str, Any]
    score: float | None = None


def _texts(value: str) -> list[str]:
    """The ways a string appears in an item's JSON text (:func:`codec.encode_value`: as is, or
    ASCII-escaped when the value held a lone surrogate)."""
    plain = json.dumps(value, ensure_ascii=False)
    ascii_ = json.dumps(value, ensure_ascii=True)
    try:
        plain.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the value can only be stored escaped
        return [ascii_]
    return [plain] if plain == ascii_ else [plain, ascii_]


def needles_of(filter: Mapping[str, Any] | None) -> list[list[str]]:
    """The literal texts a value passing ``filter`` must contain: one group per string the
    filter compares by equality (a body must contain one text of each group).

    A necessary condition only (the text may sit under another field); ``[]`` when the filter
    compares no string.
    """
    groups: list[list[str]] = []

    def walk(wanted: Any) -> None:
        if isinstance(wanted, str):
            if len(wanted) <= MAX_NEEDLE_CHARS:
                groups.append(_texts(wanted))
        elif isinstance(wanted, Mapping):
            if any(isinstance(k, str) and k.startswith("$") for k in wanted):
                if isinstance(wanted.get("$eq"), str):
                    walk(wanted["$eq"])
                return
            for v in wanted.values():
                walk(v)
        elif isinstance(wanted, (list, tuple)):
            for v in wanted:
                walk(v)

    if filter:
        walk(dict(filter))
    return groups


def _decoded(row: lg_sql.SearchRow, prefix: tuple[str, ...]) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    namespace = codec.namespace_of_key(row.store_key)
    if namespace is None or namespace[: len(prefix)] != prefix:
        return None
    key = codec.key_of_path(row.file_path)
    if key is None:
        return None
    value = codec.decode_value(row.body or "")
    if value is None:
        return None
    return namespace, key, value


def _matching(
    fetch: lg_sql.Fetch,
    key_prefix: str,
    prefix: tuple[str, ...],
    filter: Mapping[str, Any] | None,
    want: int | None,
    touch: bool,
) -> Iterator[Found]:
    """The items under the prefix passing the filter, in creation order, read in chunks of at
    least :data:`CHUNK` rows (``want``: how many the caller needs at most; ``None``: all, in
    one statement)."""
    needles = needles_of(filter)
    size = None if want is None else max(CHUNK, 2 * want)
    after: int | None = None
    while True:
        rows = lg_sql.search_rows(fetch, lg_sql.search_statement(key_prefix, needles=needles, after_id=after, limit=size, touch=touch))
        for row in rows:
            decoded = _decoded(row, prefix)
            if decoded is not None and codec.matches_filter(decoded[2], filter):
                yield Found(decoded[0], decoded[1], row, decoded[2])
        if size is None or len(rows) < size:
            return
        after = rows[-1].file_id


def find_items(
    fetch: lg_sql.Fetch,
    key_prefix: str,
    prefix: tuple[str, ...],
    filter: Mapping[str, Any] | None,
    query: str | None,
    limit: int,
    offset: int,
    touch: bool = True,
) -> list[Found]:
    """One search's page (see the module docstring): the items in order, scored with a
    ``query`` (highest first, ties in creation order), ``[offset:offset + limit]``, read with
    ``fetch`` (:data:`~dbmemory.integrations.langgraph.sql.Fetch`). ``touch=False``: the
    caller records no read (the rows' last touch and read are not read)."""
    if limit <= 0:
        return []
    if not filter and query is None:  # the page itself in SQL
        page = []
        for row in lg_sql.search_rows(fetch, lg_sql.search_statement(key_prefix, limit=limit, offset=offset, touch=touch)):
            decoded = _decoded(row, prefix)
            if decoded is not None:
                page.append(Found(decoded[0], decoded[1], row, decoded[2]))
        return page
    if query is None:
        page = []
        for n, item in enumerate(_matching(fetch, key_prefix, prefix, filter, offset + limit, touch)):
            if n >= offset:
                page.append(item)
            if n + 1 >= offset + limit:
                break
        return page
    every = list(_matching(fetch, key_prefix, prefix, filter, None, touch))
    scores = bm25_scores(query, [codec.text_of_value(f.value) for f in every])
    ranked = sorted(
        (f._replace(score=s) for f, s in zip(every, scores, strict=True)),
        key=lambda f: -(f.score or 0.0),
    )  # stable: ties keep creation order
    return ranked[offset : offset + limit]
