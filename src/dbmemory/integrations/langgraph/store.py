"""LangGraph's long-term memory store, in dbmemory's stores: :class:`DbMemoryStore`.

One class for Oracle, PostgreSQL, MariaDB/MySQL and SQLite (LangGraph's own answers are one
package per database)::

    from dbmemory.db.engine import create_engine
    from dbmemory.integrations.langgraph import DbMemoryStore

    store = DbMemoryStore(create_engine("sqlite:///memory.db"))
    store.setup()                                  # dbmemory's schema (once; or `dbmemory db upgrade`)
    store.put(("users", "u-42"), "prefs", {"drink": "tea"})
    store.get(("users", "u-42"), "prefs").value    # {'drink': 'tea'}
    graph = builder.compile(store=store)           # LangGraph hands it to nodes as `store`

**Data.** Each namespace is a shared store of ours and each item one JSON file in it, so caps
(characters per file, files per store), the audit trail, the expiry job, ``dbmemory files``
and the MEMORY tool see them like any file (an agent configured with ``scope="shared",
store_code="lg.users.u-42"`` reads ``/memories/prefs.json``). Namespace ``("users", "u 42")``
is the store ``shared:lg.users.u_2042``; key ``"prefs"`` the file ``/memories/prefs.json``;
the encoding is reversible and validated (:mod:`dbmemory.integrations.langgraph.codec`: labels and
keys keep ASCII letters, digits and ``-`` (keys also ``.``), every other character becomes
``_XX`` per UTF-8 byte; the store code is at most 200 characters, the path at most 1,000).
``created_at`` is when the file was first written, ``updated_at`` its last change (aware UTC,
from the file row; an unchanged value written again keeps both). Values are JSON objects:
tuples come back as lists, and a ``datetime``, a set or ``nan`` is refused.

**Transactions.** Given an Engine (or a URL, or nothing: ``DBMEMORY_URL``), each
:meth:`~DbMemoryStore.batch` runs in one transaction of its own and commits it, except a batch
of one read that records no read (``get``, ``list_namespaces``, a ``search`` without filter
or with a query; no TTL refresh): on SQLite and PostgreSQL (psycopg) that is one statement,
its own snapshot, run on a pooled connection outside any transaction
(:func:`dbmemory.db.raw.engine_rows`; elsewhere, or when it cannot run so, a transaction). Given a
Connection, batches join the caller's transaction and nothing is committed: the caller's
rollback removes the puts. A batch's puts are all or nothing (one savepoint): a put refused by
a cap leaves none of the batch. :meth:`~DbMemoryStore.abatch` runs the same work in a worker
thread (``asyncio.to_thread``; a Connection, or an in-memory SQLite engine's one shared
connection, is used by one batch at a time); async engines are refused.

**Batches** follow LangGraph's ``InMemoryStore``: reads (get, search, list) see the data as it
was before the batch's puts, and of several puts of one item the last wins.

**Search.** ``namespace_prefix`` matches whole labels; ``filter`` matches value fields as
``InMemoryStore`` does (plain values by ``==``, nested dicts field by field, lists by element,
and ``$eq $ne $gt $gte $lt $lte``), except that an ordering operator on a missing or
non-numeric field does not match where ``InMemoryStore`` raises. Order: creation order of the
items (a put of an existing item keeps its place; a deleted and re-created one goes last).
With a ``query`` the items are ranked by BM25 (``bm25s``: lower-cased words of 2+ characters,
no stop words; the corpus is the items that pass the prefix and filter; an item's text is
every string in its value), score in ``SearchItem.score``, highest first, ties in creation
order; the query never drops an item. ``limit``/``offset`` slice that order. Prefix, order
and, without filter or query, the page itself run in SQL; a filter's string equalities narrow
the rows in SQL and every condition is then checked exactly (:mod:`~dbmemory.integrations.langgraph.search`).
There is no vector index: ``index=`` is refused, a put's ``index`` argument ignored (as by
``InMemoryStore`` made without one). Files that are not items (another name, or not a JSON
object) are skipped (a page without filter may then be short).

**Namespaces** (:meth:`list_namespaces`): a namespace is listed while it holds an item (as
LangGraph's PostgreSQL store; ``InMemoryStore`` also keeps listing one whose items were all
deleted, or that was only read); prefix and suffix conditions with ``"*"`` wildcards and
``max_depth`` as LangGraph defines them; sorted as tuples.

**TTL** (:mod:`~dbmemory.integrations.langgraph.ttl`): there is no per-item deadline: the
expiry job deletes files neither written nor read for N days, so a store has at most one
TTL, ``N * 1440`` minutes (:attr:`DbMemoryStore.ttl_minutes`, at least 60), set by
``expiry_days=N`` or ``default_ttl`` (or ``ttl=TTLConfig(...)``). Without it ``supports_ttl``
is False and a put with a ``ttl`` raises ``NotImplementedError``; with it a put's ``ttl`` is
that TTL (the item is left to the job; a write, and a read unless ``refresh_ttl=False``,
restarts it) or ``None`` (kept until deleted); any other raises ``InvalidArgumentError``
(code ``unsupported_ttl``). Expired items stay visible until the job, :meth:`sweep_ttl` or
:meth:`start_ttl_sweeper`'s thread deletes them.

Needs the ``langgraph`` extra (``pip install -e ".[langgraph]"``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import threading
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from dbmemory.db import raw
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.errors import (
    CapExceededError,
    InvalidArgumentError,
    MissingDependencyError,
    NotFoundError,
    extra_hint,
)

try:
    from langgraph.store.base import (
        BaseStore,
        InvalidNamespaceError,
        Item,
        Op,
        Result,
        SearchItem,
        TTLConfig,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "the LangGraph store needs the langgraph package: " + extra_hint("langgraph")
    ) from exc

from dbmemory.core.model import Caps, StoreRef
from dbmemory.core.paths import path_hash
from dbmemory.db.engine import connect, create_engine
from dbmemory.db.migrate import upgrade
from dbmemory.integrations.langgraph import codec
from dbmemory.integrations.langgraph import sql as lg_sql
from dbmemory.integrations.langgraph.plan import Get as _Get
from dbmemory.integrations.langgraph.plan import ListNamespaces as _List
from dbmemory.integrations.langgraph.plan import Put as _Put
from dbmemory.integrations.langgraph.plan import Search as _Search
from dbmemory.integrations.langgraph.plan import plan_ops
from dbmemory.integrations.langgraph.search import find_items
from dbmemory.integrations.langgraph.ttl import (
    MINUTES_PER_DAY,
    Sweeper,
    check_put_ttl,
    ttl_settings,
)
from dbmemory.store.expiry import expire_files, expire_files_committing
from dbmemory.store.files import put_file
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import delete_file
from dbmemory.store.statements import reads as st
from dbmemory.store.touches import touch_after_read
from dbmemory.store.units import committing, write_unit

__all__ = ["DbMemoryStore", "LangGraphNamespaceError", "STORE_CODE_PREFIX"]

STORE_CODE_PREFIX = codec.STORE_CODE_PREFIX
"""Store codes of LangGraph namespaces start with ``lg.`` (store keys with ``shared:lg.``)."""


class LangGraphNamespaceError(codec.NamespaceError, InvalidNamespaceError):
    """A namespace label breaks LangGraph's rules or does not fit a store key: both dbmemory's
    :class:`~dbmemory.errors.InvalidScopeError` (code ``invalid_namespace``) and LangGraph's
    ``InvalidNamespaceError``."""


class _FileRead(NamedTuple):
    """The columns of a get's row (:data:`~dbmemory.store.statements.reads.SELECT_FILE_READ_BY_KEY`)."""

    file_id: int
    store_id: int
    body: str | None
    expiry_exempt: bool
    created_at: dt.datetime
    updated_at: dt.datetime
    last_accessed_at: dt.datetime
    read_at: dt.datetime | None


_READ_POSITIONS = tuple(raw.columns(st.SELECT_FILE_READ_BY_KEY)[name] for name in _FileRead._fields)


class _NotAlone(Exception):
    """A lone read could not run (:meth:`DbMemoryStore._read_alone`): the batch runs in a
    transaction instead."""


class DbMemoryStore(BaseStore):
    """LangGraph ``BaseStore`` on dbmemory's stores (see the module docstring for the rules).

    Args:
        bind: an Engine (from :func:`dbmemory.create_engine`: on SQLite it sets up the write
            lock at ``BEGIN``), a URL, ``None`` (``DBMEMORY_URL`` or the embedded SQLite file),
            or a Connection whose transaction batches join (never committed here).
        expiry_days: the ``days`` of the expiry job that runs on this database; enables TTL
            (``supports_ttl``) with the one TTL ``expiry_days * 1440`` minutes. ``None``
            (default): no TTL unless ``default_ttl`` gives it; every item exempt from expiry.
        default_ttl: the TTL of a put that gives none, in minutes (at least 60): without
            ``expiry_days`` it sets ``expiry_days = default_ttl / 1440``; with it, it must
            equal ``expiry_days * 1440``. ``None`` (default): a put without ``ttl`` never
            expires.
        refresh_on_read: whether reads refresh an item's TTL by default (LangGraph's
            ``TTLConfig.refresh_on_read``; default True).
        ttl: LangGraph's ``TTLConfig`` instead of ``default_ttl``/``refresh_on_read`` (as
            ``SqliteStore(conn, ttl=...)``): ``default_ttl``, ``refresh_on_read``,
            ``sweep_interval_minutes`` (:meth:`start_ttl_sweeper`); ``omit_expired=True``
            raises ``NotImplementedError`` (:mod:`dbmemory.integrations.langgraph.ttl`).
        index: LangGraph's ``IndexConfig`` (vector search): not supported, ``None`` only.
        caps: the caps a namespace's store gets when its first put creates it; ``None``
            (default): the caps of an agent configuration naming the store, else the defaults
            (100,000 characters per file, 1,000 files). An existing store keeps its own caps
            (:func:`dbmemory.set_store_caps`).
        actor: who writes, in the audit trail (default ``"langgraph"``).

    Raises:
        InvalidArgumentError: an async engine or connection, an unknown kind of ``bind``, or a
            bad ``expiry_days``/``default_ttl``/``ttl``/``caps``/``actor``.
        NotImplementedError: an ``index`` (no embeddings here: a query is ranked by BM25), or
            ``ttl={"omit_expired": True}``.
    """

    supports_ttl: bool = False
    ttl_config: TTLConfig | None = None

    def __init__(
        self,
        bind: Engine | Connection | str | URL | None = None,
        *,
        expiry_days: float | None = None,
        default_ttl: float | None = None,
        refresh_on_read: bool | None = None,
        ttl: TTLConfig | None = None,
        index: Any = None,
        caps: Caps | None = None,
        actor: str = "langgraph",
    ) -> None:
        if index is not None:
            raise NotImplementedError(
                "DbMemoryStore has no vector index (no embeddings are stored): pass index=None; "
                "a search query is ranked by BM25 over the items' text instead"
            )
        settings = ttl_settings(expiry_days, default_ttl, refresh_on_read, ttl)
        self._owned = False
        self._sweeper = Sweeper()
        self._sweep_minutes = settings.sweep_minutes
        self._lock = threading.Lock()
        if bind is None or isinstance(bind, (str, URL)):
            bind = create_engine(bind)
            self._owned = True
        if type(bind).__name__ in ("AsyncEngine", "AsyncConnection"):
            raise InvalidArgumentError(
                "DbMemoryStore takes a synchronous Engine or Connection (abatch runs the work in "
                "a worker thread): pass engine.sync_engine, or dbmemory.create_engine(url)"
            )
        if not isinstance(bind, (Engine, Connection)):
            raise InvalidArgumentError(
                f"DbMemoryStore needs an Engine, a Connection or a URL, got {type(bind).__name__}"
            )
        if caps is not None and not isinstance(caps, Caps):
            raise InvalidArgumentError(f"caps must be a dbmemory Caps, got {type(caps).__name__}")
        if not isinstance(actor, str) or not actor:
            raise InvalidArgumentError("actor must be a non-empty string, e.g. 'langgraph'")
        self._bind = bind
        self._shared_connection = isinstance(bind, Engine) and is_memory_sqlite(bind)
        self._caps = caps
        self._actor = actor
        self.expiry_days: float | None = settings.expiry_days
        self.supports_ttl = settings.expiry_days is not None
        self.ttl_config = settings.config

    # -- TTL -------------------------------------------------------------------------------

    @property
    def ttl_minutes(self) -> float | None:
        """The one TTL accepted, in minutes (``expiry_days * 1440``), or ``None`` without TTL."""
        return None if self.expiry_days is None else self.expiry_days * MINUTES_PER_DAY

    def _check_ttl(self, ttl: object) -> bool:
        """Whether a put's ``ttl`` leaves the item to the expiry job (else it is exempt)."""
        return check_put_ttl(ttl, self.expiry_days)

    # -- planning (pure: every op checked before any SQL) ---------------------------------------

    # -- running -----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph operations (``GetOp``, ``SearchOp``, ``ListNamespacesOp``, ``PutOp``).

        Returns:
            One result per op, in order: ``Item | None``, ``list[SearchItem]``,
            ``list[tuple[str, ...]]``, ``None``.

        Raises:
            LangGraphNamespaceError: a label breaks LangGraph's rules, or a put's namespace does
                not fit a store key; nothing ran.
            InvalidArgumentError: a bad key, value, filter, limit or ttl; nothing ran.
            NotImplementedError: a ``ttl`` without ``expiry_days``.
            CapExceededError: a put over a cap of its store; none of the batch's puts stay.
            ConflictError / StorageError: the database refused or failed (retry / see cause).
        """
        ops = list(ops)
        reads, puts = plan_ops(ops, self._check_ttl, LangGraphNamespaceError)
        if not puts and len(reads) == 1 and isinstance(self._bind, Engine) and self._alone(reads[0]):
            results = self._read_alone(len(ops), reads[0])
            if results is not None:
                return results
        if isinstance(self._bind, Connection):
            with self._lock:
                return self._run(self._bind, len(ops), reads, puts)
        single = not reads and self._one_unit(puts)  # e.g. store.put: no savepoint at all
        batch = committing(self._bind, "committing the store batch", check="get the items", single_unit=single)
        if self._shared_connection:  # in-memory SQLite: one DB-API connection for the engine
            with self._lock, batch as conn:
                return self._run(conn, len(ops), reads, puts)
        with batch as conn:
            return self._run(conn, len(ops), reads, puts)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (``asyncio.to_thread``)."""
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    def _alone(self, read: Any) -> bool:
        """Whether a batch of this one read runs as one statement that records no read
        (:meth:`_read_alone`): a get or search without a TTL refresh, a search whose rows come
        in one statement (no filter, or a query), a listing."""
        if isinstance(read, _List):
            return True
        if self._refreshes(read.refresh, False):
            return False
        return isinstance(read, _Get) or not read.filter or read.query is not None

    def _read_alone(self, count: int, read: Any) -> list[Result] | None:
        """A one-read batch as one statement outside any transaction, on a pooled DB-API
        connection (:func:`dbmemory.db.raw.engine_rows`: one statement is its own snapshot);
        ``None`` when that cannot run here (the caller runs the batch in a transaction)."""
        engine = self._bind
        assert isinstance(engine, Engine)

        def fetch(stmt: Any, params: dict[str, Any], action: str) -> list[tuple[Any, ...]]:
            try:
                rows = raw.engine_rows(engine, stmt, params)
            except sa.exc.SQLAlchemyError as exc:  # no connection (as dbmemory.db.engine.connect)
                raise translate_db_error(exc, action, target=engine) from exc
            if rows is None:
                raise _NotAlone
            return rows

        results: list[Result] = [None] * count
        try:
            with self._lock if self._shared_connection else contextlib.nullcontext():
                results[read.slot] = self._read(fetch, None, read)
        except _NotAlone:
            return None
        return results

    def _read(self, fetch: lg_sql.Fetch, conn: Connection | None, read: Any) -> Result:
        if isinstance(read, _Get):
            return self._get(fetch, conn, read)
        if isinstance(read, _Search):
            return self._search(fetch, conn, read)
        return self._list(fetch, read)

    def _run(self, conn: Connection, count: int, reads: list[Any], puts: dict[Any, _Put]) -> list[Result]:
        results: list[Result] = [None] * count
        fetch = lg_sql.on_connection(conn)
        for read in reads:
            results[read.slot] = self._read(fetch, conn, read)
        if self._one_unit(puts):  # the put's own write unit is the batch's: no outer savepoint
            for put in puts.values():
                self._put(conn, put)
            return results
        if puts:
            with write_unit(conn, "writing LangGraph items"):
                for put in puts.values():
                    self._put(conn, put)
        return results

    @staticmethod
    def _one_unit(puts: dict[Any, _Put]) -> bool:
        """Whether the puts are one write unit of :mod:`dbmemory.store` (one put or delete, no
        TTL refresh after it): its own atomicity is the batch's."""
        return len(puts) == 1 and all(p.text is None or p.exempt for p in puts.values())

    def _refreshes(self, refresh: bool, exempt: bool) -> bool:
        return refresh and self.supports_ttl and not exempt

    def _touch(self, conn: Connection, row: Any, path: str) -> bool:
        """Record a read; ``False`` when the file was removed meanwhile."""
        try:
            touch_after_read(
                conn, row.store_id, row.file_id, row.last_accessed_at, row.read_at, path=path
            )
        except NotFoundError:
            return False
        return True

    def _get(self, fetch: lg_sql.Fetch, conn: Connection | None, op: _Get) -> Item | None:
        """``conn``: the batch's connection (``None``: a lone read, which never refreshes)."""
        if op.store_key is None or op.path is None:
            return None
        params = {"p_key": op.store_key, "p_ph": path_hash(op.path)}
        touching = conn is not None and self._refreshes(op.refresh, False)
        rows = fetch(st.SELECT_FILE_READ_BY_KEY if touching else lg_sql.SELECT_ITEM_BY_KEY, params, f"reading {op.path}")
        if not rows:
            return None
        if touching:
            row = _FileRead(*(rows[0][i] for i in _READ_POSITIONS))
            body, created_at, updated_at = row.body, row.created_at, row.updated_at
        else:  # records no read: body and times only
            body, created_at, updated_at = rows[0]
        value = codec.decode_value(body or "")
        if value is None:  # not JSON, or not an object: not an item, as search and list skip it
            return None
        if touching and not row.expiry_exempt and not self._touch(conn, row, op.path):  # type: ignore[arg-type]
            return None
        return Item(value=value, key=op.key, namespace=op.namespace, created_at=created_at, updated_at=updated_at)

    def _search(self, fetch: lg_sql.Fetch, conn: Connection | None, op: _Search) -> list[SearchItem]:
        if op.key_prefix is None:
            return []
        touching = conn is not None and self._refreshes(op.refresh, False)
        page = find_items(fetch, op.key_prefix, op.prefix, op.filter, op.query, op.limit, op.offset, touching)
        out = []
        for found in page:
            row = found.row
            if touching and not row.expiry_exempt and not self._touch(conn, row, row.file_path):  # type: ignore[arg-type]
                continue  # removed meanwhile
            out.append(
                SearchItem(
                    namespace=found.namespace, key=found.key, value=found.value,
                    created_at=row.created_at, updated_at=row.updated_at, score=found.score,
                )
            )
        return out

    def _list(self, fetch: lg_sql.Fetch, op: _List) -> list[tuple[str, ...]]:
        names = set()
        for store_key in lg_sql.namespace_keys(fetch, op.key_prefix):  # one row per store
            namespace = codec.namespace_of_key(store_key)
            if namespace is not None and codec.matches_conditions(namespace, op.conditions):
                names.add(namespace)
        if op.max_depth is not None:
            names = {n[: op.max_depth] for n in names}
        return sorted(names)[op.offset : op.offset + op.limit]

    def _put(self, conn: Connection, op: _Put) -> None:
        if op.text is None:
            store_id = find_store_id(conn, op.store_key)
            if store_id is not None:
                delete_file(conn, store_id, op.path, actor=self._actor)
            return
        store = StoreRef(op.store_key, "shared", store_code=op.store_code, caps=self._caps)
        try:
            record = put_file(conn, store, op.path, op.text, expiry_exempt=op.exempt, actor=self._actor)
        except CapExceededError as exc:
            raise CapExceededError(
                f"item {op.key!r} of namespace {op.namespace!r} was refused: {exc.message}",
                cap=exc.cap, limit=exc.limit, actual=exc.actual,
            ) from exc
        if not op.exempt:  # a write refreshes the TTL, also when the value is unchanged
            touch_after_read(
                conn, record.store_id, record.file_id, record.last_accessed_at, None, path=op.path
            )

    # -- set-up and housekeeping -------------------------------------------------------------

    def setup(self) -> None:
        """Create or upgrade dbmemory's schema (:func:`dbmemory.upgrade`; the same as
        ``dbmemory db upgrade``). With a Connection, the caller commits."""
        upgrade(self._bind)

    def sweep_ttl(self) -> int:
        """Run the expiry job now on the LangGraph stores only: delete the items (TTL given)
        neither written nor read for ``expiry_days`` days. Returns the number deleted.

        With an Engine each store's batches commit; with a Connection they join its
        transaction (:func:`dbmemory.expire_files`).

        Raises:
            NotImplementedError: the store was made without ``expiry_days``.
        """
        if self.expiry_days is None:
            raise NotImplementedError("sweep_ttl needs expiry_days: create the store with expiry_days=N")
        if isinstance(self._bind, Connection):
            with self._lock:
                ids = lg_sql.store_ids(self._bind, codec.STORE_KEY_PREFIX)
                return sum(expire_files(self._bind, days=self.expiry_days, store_id=i) for i in ids)
        with self._lock if self._shared_connection else contextlib.nullcontext():
            with connect(self._bind, "listing the LangGraph stores") as conn:
                ids = lg_sql.store_ids(conn, codec.STORE_KEY_PREFIX)
            return sum(expire_files_committing(self._bind, days=self.expiry_days, store_id=i) for i in ids)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        """Run :meth:`sweep_ttl` in a daemon thread every ``sweep_interval_minutes`` (default
        the ``TTLConfig``'s, else 5), as LangGraph's stores do. A failed sweep is logged and
        tried again at the next interval. Returns a future that completes when the thread
        stops (cancelling it stops the thread); a running sweeper is kept.

        Raises:
            NotImplementedError: the store has no TTL (``expiry_days``/``default_ttl``).
            InvalidArgumentError: the store joins a Connection (the caller's transaction is
                not for a thread: run :meth:`sweep_ttl` or the database's expiry job), or a
                bad interval.
        """
        if self.expiry_days is None:
            raise NotImplementedError("start_ttl_sweeper needs a TTL: create the store with expiry_days=N or default_ttl")
        if isinstance(self._bind, Connection):
            raise InvalidArgumentError(
                "start_ttl_sweeper needs an Engine: a store on a Connection joins the caller's "
                "transaction, which a thread must not use (call sweep_ttl, or schedule `dbmemory expire`)"
            )
        minutes = self._sweep_minutes
        if sweep_interval_minutes is not None:
            minutes = ttl_settings(None, None, None, {"sweep_interval_minutes": sweep_interval_minutes}).sweep_minutes
        return self._sweeper.start(self.sweep_ttl, minutes)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the thread of :meth:`start_ttl_sweeper`; ``True`` when it stopped (or was not
        running) within ``timeout`` seconds (``None``: wait)."""
        return self._sweeper.stop(timeout)

    def close(self) -> None:
        """Dispose of the engine this store made from a URL (a given Engine or Connection is
        the caller's and is left alone)."""
        self._sweeper.stop()
        if self._owned and isinstance(self._bind, Engine):
            self._bind.dispose()

    def __enter__(self) -> DbMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(cls, url: str | URL, **kwargs: Any) -> Iterator[DbMemoryStore]:
        """A store on a new engine for ``url``, disposed of on exit (like LangGraph's
        ``PostgresStore.from_conn_string``)."""
        store = cls(url, **kwargs)
        try:
            yield store
        finally:
            store.close()
