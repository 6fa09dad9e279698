"""Statements of the LangGraph store (:mod:`dbmemory.integrations.langgraph`): builders apart
from their one executor each. Plain reads; writes go through :mod:`dbmemory.store.files`.

Store keys are matched by exact prefix (``SUBSTR(store_key, 1, n) = :prefix``, never ``LIKE``:
``_`` is a LIKE wildcard and our escape character), and every row is checked again in Python
(:func:`dbmemory.integrations.langgraph.codec.namespace_of_key`). The body (a CLOB) is only
selected, or matched with ``LIKE`` against a literal piece of JSON text (``ESCAPE '/'``: ``%``,
``_`` and ``/`` itself are escaped), which narrows a filtered search. The search statement is
built once per shape with bind parameters (:func:`search_statement`).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from dbmemory.core.paths import ROOT
from dbmemory.db import raw
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.schema import file_reads, files, stores
from dbmemory.integrations.langgraph.codec import ITEM_SUFFIX, namespace_of_key
from dbmemory.store.statements.bulk import id_chunks

__all__ = [
    "Fetch",
    "on_connection",
    "SELECT_ITEM_BY_KEY",
    "select_search_rows",
    "search_statement",
    "SearchRow",
    "search_rows",
    "select_item_rows",
    "select_bodies",
    "select_namespace_rows",
    "item_rows",
    "bodies",
    "namespace_rows",
    "select_namespace_keys",
    "namespace_statement",
    "namespace_keys",
    "select_store_ids",
    "store_ids",
]

Fetch = Callable[[Any, dict[str, Any], str], list[tuple[Any, ...]]]
"""How a read runs: ``fetch(statement, params, action)`` returns the rows as tuples in the
statement's column order (:func:`on_connection`, or a lone read on an Engine's pooled
connection, :func:`dbmemory.db.raw.engine_rows`); a database failure raises a
:class:`~dbmemory.errors.DbMemoryError` naming ``action``."""


def on_connection(conn: Connection) -> Fetch:
    """The :data:`Fetch` of reads on ``conn`` (in its transaction; on the driver's cursor
    where :mod:`dbmemory.db.raw` allows it, else ``conn.execute``)."""

    def fetch(stmt: Any, params: dict[str, Any], action: str) -> list[tuple[Any, ...]]:
        try:
            return raw.all_rows(conn, stmt, params)
        except sa.exc.SQLAlchemyError as exc:
            raise translate_db_error(exc, action) from exc

    return fetch


_READ_AT = (
    sa.select(file_reads.c.read_at)
    .where(file_reads.c.store_id == files.c.store_id, file_reads.c.file_id == files.c.file_id)
    .scalar_subquery()
    .label("read_at")
)

_META = (
    stores.c.store_key,
    files.c.store_id,
    files.c.file_id,
    files.c.file_path,
    files.c.expiry_exempt,
    files.c.created_at,
    files.c.updated_at,
    files.c.last_accessed_at,
    _READ_AT,
)


SELECT_ITEM_BY_KEY = sa.select(files.c.body, files.c.created_at, files.c.updated_at).where(
    files.c.store_id
    == sa.select(stores.c.store_id).where(stores.c.store_key == sa.bindparam("p_key", type_=sa.String())).scalar_subquery(),
    files.c.path_hash == sa.bindparam("p_ph", type_=files.c.path_hash.type),
)
"""Body, ``created_at`` and ``updated_at`` of one file by store key (``:p_key``) and path hash
(``:p_ph``): a get that records no read (no TTL refresh) needs nothing more."""


_NO_TOUCH = (
    *_META[:7],
    sa.null().label("last_accessed_at"),
    sa.null().label("read_at"),
)
""":data:`_META` for a search that records no read: the last touch and read are ``NULL``
(neither read nor converted)."""


def _under_key(key_prefix: str) -> sa.ColumnElement[bool]:
    """Store keys equal to ``key_prefix`` or starting with ``key_prefix + "."`` (a namespace
    prefix), or starting with ``key_prefix`` when it ends with ``.`` (every namespace)."""
    if key_prefix.endswith("."):
        return sa.func.substr(stores.c.store_key, 1, len(key_prefix)) == key_prefix
    deeper = key_prefix + "."
    return sa.or_(
        stores.c.store_key == key_prefix,
        sa.func.substr(stores.c.store_key, 1, len(deeper)) == deeper,
    )


def select_item_rows(key_prefix: str, *, with_body: bool) -> sa.Select[Any]:
    """Every file of the stores under ``key_prefix``: store key, store id, file id, path, exemption,
    timestamps, last recorded read (``read_at``) and, ``with_body``, the text. Unordered (the
    caller sorts in Python, by decoded namespace and key)."""
    columns = (*_META, files.c.body) if with_body else _META
    return (
        sa.select(*columns)
        .select_from(stores.join(files, files.c.store_id == stores.c.store_id))
        .where(_under_key(key_prefix))
    )


def select_bodies(file_ids: Sequence[int]) -> sa.Select[Any]:
    """``file_id`` and body of at most 1,000 files (Oracle's IN-list limit)."""
    return sa.select(files.c.file_id, files.c.body).where(files.c.file_id.in_(list(file_ids)))


def select_namespace_rows(key_prefix: str) -> sa.Select[Any]:
    """Store key and file path of every file of the stores under ``key_prefix`` (no body):
    a namespace is listed while its store holds an item."""
    return (
        sa.select(stores.c.store_key, files.c.file_path)
        .select_from(stores.join(files, files.c.store_id == stores.c.store_id))
        .where(_under_key(key_prefix))
    )


def _text(value: str) -> sa.ColumnElement[str]:
    """A constant string written into the statement's text (no quote in it), not bound: SQLite
    prepares a statement again whenever a bound ``LIKE`` pattern is bound anew, which costs
    more than the statement itself."""
    assert "'" not in value
    return sa.literal_column(f"'{value}'", sa.String())


def _item_shaped() -> sa.ColumnElement[bool]:
    """Files named like an item: ``/memories/<name>.json``, no deeper folder (constants in the
    statement's text, :func:`_text`)."""
    head = ROOT + "/"
    path = files.c.file_path
    return sa.and_(
        sa.func.substr(path, sa.literal_column("1"), sa.literal_column(str(len(head)))) == _text(head),
        path.like(_text("%" + ITEM_SUFFIX)),
        sa.not_(path.like(_text(head + "%/%"))),
    )


def _like_pattern(text: str) -> str:
    """``%text%`` with the LIKE wildcards and the escape character ``/`` escaped."""
    return "%" + text.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"


@functools.lru_cache(maxsize=256)
def _search_shape(
    every: bool, groups: tuple[int, ...], after: bool, limit: bool, offset: bool, touch: bool = True
) -> sa.Select[Any]:
    """The statement of :func:`select_search_rows` for one shape, with bind parameters: built
    and compiled once (SQLAlchemy's statement cache), whatever the prefix and needles."""
    head = _key_head(every)
    body = files.c.body
    stmt = (
        sa.select(*(_META if touch else _NO_TOUCH), body)
        .select_from(stores.join(files, files.c.store_id == stores.c.store_id))
        .where(head, _item_shaped())
    )
    for g, size in enumerate(groups):
        stmt = stmt.where(
            sa.or_(*(body.like(sa.bindparam(f"p_n{g}_{i}", type_=sa.String()), escape="/") for i in range(size)))
        )
    if after:
        stmt = stmt.where(files.c.file_id > sa.bindparam("p_after", type_=sa.BigInteger()))
    stmt = stmt.order_by(files.c.file_id)
    if limit:
        stmt = stmt.limit(sa.bindparam("p_limit", type_=sa.Integer()))
    if offset:
        stmt = stmt.offset(sa.bindparam("p_offset", type_=sa.Integer()))
    return stmt


def search_statement(
    key_prefix: str,
    *,
    needles: Sequence[Sequence[str]] = (),
    after_id: int | None = None,
    limit: int | None = None,
    offset: int = 0,
    touch: bool = True,
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The statement and parameters of :func:`select_search_rows` (the statement is shared by
    every call of the same shape). ``touch=False``: for a search that records no read, whose
    rows' ``last_accessed_at`` and ``read_at`` are ``None``."""
    every = key_prefix.endswith(".")
    params = _key_params(key_prefix)
    for g, group in enumerate(needles):
        for i, text in enumerate(group):
            params[f"p_n{g}_{i}"] = _like_pattern(text)
    if after_id is not None:
        params["p_after"] = after_id
    if limit is not None:
        params["p_limit"] = limit
    if offset:
        params["p_offset"] = offset
    shape = (every, tuple(len(g) for g in needles), after_id is not None, limit is not None, bool(offset), touch)
    return _search_shape(*shape), params


def select_search_rows(
    key_prefix: str,
    *,
    needles: Sequence[Sequence[str]] = (),
    after_id: int | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> sa.Select[Any]:
    """The item-shaped files of the stores under ``key_prefix``, in creation order
    (``file_id``), with their text: the rows of :func:`select_item_rows` and ``body``.

    Args:
        key_prefix: a store key prefix (as :func:`_under_key`).
        needles: groups of literal texts; a row's body must contain at least one text of each
            group (``LIKE '%text%' ESCAPE '/'``). A necessary condition of a filter, never the
            whole of it: the caller checks every row again.
        after_id: only files with a larger ``file_id`` (the next chunk).
        limit, offset: a page in SQL (``None``: no limit).
    """
    stmt, params = search_statement(key_prefix, needles=needles, after_id=after_id, limit=limit, offset=offset)
    return stmt.params(params)


def select_namespace_keys(key_prefix: str) -> sa.Select[Any]:
    """The distinct store keys under ``key_prefix`` whose store holds an item-shaped file
    (``/memories/<name>.json``, no deeper folder): one row per store, not per item."""
    stmt, params = namespace_statement(key_prefix)
    return stmt.params(params)


def _key_head(every: bool) -> sa.ColumnElement[bool]:
    """:func:`_under_key` with bind parameters ``p_key``/``p_len`` (and ``p_exact`` unless
    ``every``): :func:`_key_params` gives their values."""
    key, length = sa.bindparam("p_key", type_=sa.String()), sa.bindparam("p_len", type_=sa.Integer())
    head = sa.func.substr(stores.c.store_key, sa.literal_column("1"), length) == key
    if not every:  # the namespace itself, or a deeper one
        head = sa.or_(stores.c.store_key == sa.bindparam("p_exact", type_=sa.String()), head)
    return head


def _key_params(key_prefix: str) -> dict[str, Any]:
    if key_prefix.endswith("."):
        return {"p_key": key_prefix, "p_len": len(key_prefix)}
    return {"p_exact": key_prefix, "p_key": key_prefix + ".", "p_len": len(key_prefix) + 1}


@functools.lru_cache(maxsize=2)
def _namespace_shape(every: bool) -> sa.Select[Any]:
    has_item = sa.exists().where(files.c.store_id == stores.c.store_id, _item_shaped())
    return sa.select(stores.c.store_key).where(_key_head(every), has_item)


def namespace_statement(key_prefix: str) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The statement and parameters of :func:`select_namespace_keys` (the statement is built
    once, whatever the prefix: the store key index answers the prefix, one row per store)."""
    return _namespace_shape(key_prefix.endswith(".")), _key_params(key_prefix)


def _run(conn: Connection, stmt: sa.Executable, action: str) -> list[Row[Any]]:
    try:
        return list(conn.execute(stmt).all())
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, action) from exc


def item_rows(conn: Connection, key_prefix: str, *, with_body: bool) -> list[Row[Any]]:
    """Run :func:`select_item_rows`."""
    return _run(conn, select_item_rows(key_prefix, with_body=with_body), "searching LangGraph items")


class SearchRow(NamedTuple):
    """A row of :func:`select_search_rows`, in its column order."""

    store_key: str
    store_id: int
    file_id: int
    file_path: str
    expiry_exempt: bool
    created_at: dt.datetime
    updated_at: dt.datetime
    last_accessed_at: dt.datetime
    read_at: dt.datetime | None
    body: str | None


def search_rows(fetch: Fetch, statement: tuple[sa.Select[Any], dict[str, Any]]) -> list[SearchRow]:
    """Run a :func:`search_statement` with ``fetch`` (:data:`Fetch`)."""
    stmt, params = statement
    return [SearchRow(*row) for row in fetch(stmt, params, "searching LangGraph items")]


def bodies(conn: Connection, file_ids: Sequence[int]) -> dict[int, str]:
    """Run :func:`select_bodies` in chunks of 1,000: ``{file_id: text}`` (``""`` for NULL)."""
    out: dict[int, str] = {}
    for chunk in id_chunks(list(file_ids)):
        for row in _run(conn, select_bodies(chunk), "reading LangGraph items"):
            out[row.file_id] = row.body or ""
    return out


def namespace_rows(conn: Connection, key_prefix: str) -> list[Row[Any]]:
    """Run :func:`select_namespace_rows`."""
    return _run(conn, select_namespace_rows(key_prefix), "listing LangGraph namespaces")


def namespace_keys(fetch: Fetch, key_prefix: str) -> list[str]:
    """Run :func:`namespace_statement` with ``fetch`` (:data:`Fetch`): the store keys (each
    once)."""
    stmt, params = namespace_statement(key_prefix)
    return [row[0] for row in fetch(stmt, params, "listing LangGraph namespaces")]


def select_store_ids(key_prefix: str) -> sa.Select[Any]:
    """``store_id`` and ``store_key`` of the stores under ``key_prefix``."""
    return sa.select(stores.c.store_id, stores.c.store_key).where(_under_key(key_prefix))


def store_ids(conn: Connection, key_prefix: str) -> list[int]:
    """Run :func:`select_store_ids`; keep the stores that are exactly LangGraph namespaces."""
    rows = _run(conn, select_store_ids(key_prefix), "listing LangGraph stores")
    return sorted(r.store_id for r in rows if namespace_of_key(r.store_key) is not None)
