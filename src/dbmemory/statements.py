"""Pure statement builders: every SQL statement dbmemory runs, built apart from running it.

Each function returns a SQLAlchemy Core statement and touches no connection, so the whole set
can be compiled for every dialect, Oracle 19c included, without a server
(:func:`example_statements` feeds that test). Executors live in :mod:`dbmemory.files` and
:mod:`dbmemory.stores`.

Rules kept: the CLOB ``body`` is only ever selected, inserted or assigned, never compared,
sorted, grouped or DISTINCTed; directory matches use ``SUBSTR(file_path, 1, n) = :prefix``
(exact, so LIKE wildcards and case-insensitive LIKE can never widen a match); equality on a path
uses ``path_hash``.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import visitors
from sqlalchemy.sql.expression import BindParameter, ColumnElement, Executable

from dbmemory.db.dialect import UtcDateTime
from dbmemory.db.schema import agents, audit_events, files, stores

__all__ = [
    "FILE_COLUMNS",
    "under_directory",
    "prefix_params",
    "SELECT_STORE_ID",
    "LOCK_STORE_BY_KEY",
    "LOCK_STORE_BY_ID",
    "INSERT_STORE",
    "STORE_CAP_COLUMNS",
    "BUMP_STORE",
    "INSERT_AUDIT_BUMP",
    "AUDIT_BUMP_COLUMNS",
    "SET_STORE_CAPS",
    "select_configured_caps",
    "update_configured_store_caps",
    "SELECT_FILE",
    "SELECT_FILE_FOR_UPDATE",
    "SELECT_FILE_BY_KEY",
    "LOCK_STORE_AND_FILE",
    "LOCK_STORE_WITH_FILE",
    "SELECT_FILE_META",
    "SELECT_LISTING",
    "SELECT_LISTING_DIR",
    "SELECT_LISTING_DIR_ANY",
    "SELECT_LISTING_BY_KEY",
    "SELECT_LISTING_DIR_BY_KEY",
    "SELECT_SIZES",
    "SELECT_SIZES_DIR",
    "SELECT_SIZES_BY_KEY",
    "SELECT_SIZES_DIR_BY_KEY",
    "SELECT_WRITE_FACTS",
    "SELECT_WRITE_FACTS_TOP",
    "write_facts",
    "INSERT_FILE",
    "insert_file_params",
    "UPDATE_FILE",
    "UPDATE_FILE_EXEMPT",
    "update_file_params",
    "DELETE_FILES_BY_ID",
    "DELETE_FILE_BY_ID",
    "MOVE_FILE",
    "SELECT_TOUCH_CANDIDATES",
    "TOUCH_FILES",
    "INSERT_AUDIT",
    "select_expirable",
    "count_expirable",
    "select_agent",
    "insert_agent",
    "update_agent",
    "select_agents",
    "select_stores_of_agent",
    "select_store_totals",
    "delete_stores_by_id",
    "example_statements",
]

FILE_COLUMNS = (
    files.c.file_id,
    files.c.store_id,
    files.c.file_path,
    files.c.body,
    files.c.char_count,
    files.c.version_no,
    files.c.expiry_exempt,
    files.c.created_at,
    files.c.updated_at,
    files.c.last_accessed_at,
)
"""Columns of a full file read, body included."""

_META_COLUMNS = tuple(c for c in FILE_COLUMNS if c.name != "body")


def under_directory(directory: str) -> ColumnElement[bool]:
    """Condition: ``file_path`` lies strictly under ``directory`` (exact prefix ``directory/``).

    ``SUBSTR`` counts characters on every supported backend, and ``=`` is exact (binary
    collation on MySQL/MariaDB), so ``_``/``%`` or letter case can never widen the match.
    """
    prefix = directory.rstrip("/") + "/"
    return sa.func.substr(files.c.file_path, 1, len(prefix)) == prefix


# -- prebuilt statements ----------------------------------------------------------------------
#
# The statements on the tool's hot paths are built once, at import, with ``bindparam()``
# placeholders, and executed with a parameter dict: ``conn.execute(st.SELECT_FILE, {"p_sid": 1,
# "p_ph": h})``. Building a Core statement per call costs more than executing it (construction,
# the cache-key walk of a new object, result-metadata adaptation). Bind names carry a ``p_``
# prefix: never an Oracle reserved word, never a column name (UPDATE ... SET reserves those).
# Timestamp placeholders are typed ``UtcDateTime`` so they bind as UTC on every backend.

_bp = sa.bindparam
_TS = UtcDateTime()


def _under(plen: str = "p_plen", prefix: str = "p_prefix") -> ColumnElement[bool]:
    """:func:`under_directory` with the prefix (``directory + "/"``) and its length bound at
    execute time: pass :func:`prefix_params`."""
    return sa.func.substr(files.c.file_path, 1, _bp(plen, type_=sa.Integer())) == _bp(
        prefix, type_=sa.String()
    )


def prefix_params(directory: str) -> dict[str, Any]:
    """Parameters ``p_plen`` and ``p_prefix`` of the statements that match ``directory/``."""
    prefix = directory.rstrip("/") + "/"
    return {"p_plen": len(prefix), "p_prefix": prefix}


_STORE_ID_BY_KEY = (
    sa.select(stores.c.store_id).where(stores.c.store_key == _bp("p_key")).scalar_subquery()
)
"""The store id of ``:p_key`` as a scalar subquery (not a join: two index look-ups even under
the generic plan PostgreSQL switches to once psycopg has prepared the statement)."""

SELECT_STORE_ID = sa.select(stores.c.store_id).where(stores.c.store_key == _bp("p_key"))
"""``store_id`` of the store ``:p_key`` (no lock)."""

STORE_CAP_COLUMNS = (stores.c.max_file_chars, stores.c.max_files, stores.c.max_store_chars)
"""The store's caps (revision 0002): every writer reads them from the row it locks."""

LOCK_STORE_BY_KEY = (
    sa.select(stores.c.store_id, stores.c.store_key, *STORE_CAP_COLUMNS)
    .where(stores.c.store_key == _bp("p_key"))
    .with_for_update()
)
"""Lock the store row ``:p_key``; returns its id, key and caps. Every writer of a store takes
this lock (or :data:`LOCK_STORE_BY_ID`) first, so writers serialise and caps cannot be raced."""

LOCK_STORE_BY_ID = (
    sa.select(stores.c.store_id, stores.c.store_key, stores.c.scope_name, *STORE_CAP_COLUMNS)
    .where(stores.c.store_id == _bp("p_sid"))
    .with_for_update()
)
"""Lock the store row ``:p_sid``; returns its id, key, scope and caps."""

INSERT_STORE = sa.insert(stores)
"""Create a store row; values per execute: ``store_key``, ``scope_name``, ``agent_code``,
``store_code``, ``created_at``, ``updated_at``, ``max_file_chars``, ``max_files``,
``max_store_chars`` (the caps of the store's configuration, :mod:`dbmemory.caps`)."""

BUMP_STORE = (
    sa.update(stores)
    .where(stores.c.store_id == _bp("p_sid"))
    .values(updated_at=_bp("p_now", type_=_TS))
)
"""Mark store ``:p_sid`` as written (``updated_at = :p_now``), under the store lock the writer
already holds. Where :func:`dbmemory.db.dialect.bump_store_on_write` says so (PostgreSQL,
Oracle), every write modifies the store row, so a second writer whose REPEATABLE READ or
SERIALIZABLE snapshot predates the first writer's commit fails to lock the row with a
serialisation failure instead of counting files from its stale snapshot."""

SET_STORE_CAPS = (
    sa.update(stores)
    .where(stores.c.store_id == _bp("p_sid"))
    .values(
        max_file_chars=_bp("p_max_file_chars", type_=sa.Integer()),
        max_files=_bp("p_max_files", type_=sa.Integer()),
        max_store_chars=_bp("p_max_store_chars", type_=sa.BigInteger()),
        updated_at=_bp("p_now", type_=_TS),
    )
)
"""Set the caps of store ``:p_sid`` (:func:`dbmemory.set_store_caps`)."""

SELECT_FILE = sa.select(*FILE_COLUMNS).where(
    files.c.store_id == _bp("p_sid"), files.c.path_hash == _bp("p_ph")
)
"""One file with its body (``:p_sid``, ``:p_ph``)."""

SELECT_FILE_FOR_UPDATE = SELECT_FILE.with_for_update()
""":data:`SELECT_FILE`, locking the row."""

SELECT_FILE_BY_KEY = sa.select(*FILE_COLUMNS).where(
    files.c.store_id == _STORE_ID_BY_KEY, files.c.path_hash == _bp("p_ph")
)
"""One file with its body by store key (``:p_key``, ``:p_ph``): one round trip for a reader
that does not know the store id yet."""

_LOCKED_STORE_COLUMNS = (
    stores.c.store_id.label("locked_store_id"),
    stores.c.store_key,
    *STORE_CAP_COLUMNS,
)
_STORE_AND_FILE = (
    sa.select(*_LOCKED_STORE_COLUMNS, *FILE_COLUMNS)
    .select_from(
        stores.outerjoin(
            files,
            sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == _bp("p_ph")),
        )
    )
    .where(stores.c.store_id == _bp("p_sid"))
)

LOCK_STORE_AND_FILE = _STORE_AND_FILE.with_for_update()
"""The store row ``:p_sid`` (``locked_store_id``, ``store_key``, caps) and the file ``:p_ph`` in it
(file columns ``NULL`` when there is none), locking both rows, in one round trip. The outer
join reads the store row first, so the lock order stays store row, then file row. For the
backends :func:`dbmemory.db.dialect.store_and_file_lock` names ``"outer"`` (a locking read
there sees the latest committed rows)."""

LOCK_STORE_WITH_FILE = (
    sa.select(*_LOCKED_STORE_COLUMNS, *FILE_COLUMNS)
    .select_from(
        stores.join(
            files,
            sa.and_(files.c.store_id == stores.c.store_id, files.c.path_hash == _bp("p_ph")),
        )
    )
    .where(stores.c.store_id == _bp("p_sid"))
    .with_for_update()
)
"""Like :data:`LOCK_STORE_AND_FILE` but an inner join: no row when the file does not exist
(the caller then locks the store alone). Locks the store row, then the file row (PostgreSQL
locks the rows of a join in ``FROM`` order), and a file row changed by the writer it waited
for is re-read at its latest version."""

SELECT_FILE_META = sa.select(*_META_COLUMNS).where(
    files.c.store_id == _bp("p_sid"), files.c.path_hash == _bp("p_ph")
)
"""One file without its body (``:p_sid``, ``:p_ph``)."""

SELECT_LISTING = sa.select(*_META_COLUMNS).where(files.c.store_id == _bp("p_sid"))
"""Files (no body) of store ``:p_sid``. Ordering is done by the caller in Python (binary
code-point order on every backend, which ``ORDER BY`` under a linguistic collation would not
give)."""

SELECT_LISTING_DIR = SELECT_LISTING.where(_under())
"""Files (no body) of ``:p_sid`` under a directory (:func:`prefix_params`)."""

SELECT_LISTING_DIR_ANY = SELECT_LISTING_DIR.limit(1)
"""At most one file under a directory: does the directory exist?"""

_SIZE_COLUMNS = (files.c.file_path, files.c.char_count)
SELECT_SIZES = sa.select(*_SIZE_COLUMNS).where(files.c.store_id == _bp("p_sid"))
"""Path and size of every file of ``:p_sid``: what the tool's directory view shows (no
timestamps to convert)."""

SELECT_SIZES_DIR = SELECT_SIZES.where(_under())
SELECT_SIZES_BY_KEY = sa.select(*_SIZE_COLUMNS).where(files.c.store_id == _STORE_ID_BY_KEY)
SELECT_SIZES_DIR_BY_KEY = SELECT_SIZES_BY_KEY.where(_under())
SELECT_LISTING_BY_KEY = sa.select(*_META_COLUMNS).where(files.c.store_id == _STORE_ID_BY_KEY)
SELECT_LISTING_DIR_BY_KEY = SELECT_LISTING_BY_KEY.where(_under())


def _write_facts(with_ancestors: bool) -> sa.Select[Any]:
    one, zero = sa.literal(1), sa.literal(0)
    same = sa.case((files.c.path_hash == _bp("p_ph"), one), else_=zero)
    if with_ancestors:
        anc: Any = sa.case(
            (files.c.path_hash.in_(_bp("p_anc", expanding=True)), one), else_=zero
        )
    else:
        anc = zero
    desc = sa.case((_under(), one), else_=zero)
    return sa.select(
        sa.func.count().label("file_count"),
        sa.func.coalesce(sa.func.sum(files.c.char_count), 0).label("total_chars"),
        sa.func.coalesce(sa.func.sum(same), 0).label("same"),
        sa.func.coalesce(sa.func.sum(anc), 0).label("ancestor_files"),
        sa.func.coalesce(sa.func.sum(desc), 0).label("descendants"),
    ).where(files.c.store_id == _bp("p_sid"))


SELECT_WRITE_FACTS = _write_facts(True)
"""One aggregate row answering everything a new file's write must know, in one round trip.

Parameters: :func:`write_facts_params`. Columns: ``file_count`` and ``total_chars`` of the
store; ``same`` (1 when the path already exists as a file); ``ancestor_files`` (files sitting
where the path needs a directory); ``descendants`` (files under the path: it is a directory)."""

SELECT_WRITE_FACTS_TOP = _write_facts(False)
""":data:`SELECT_WRITE_FACTS` for a path directly under the root (no ancestors)."""


def write_facts(
    store_id: int, path: str, path_hash: str, ancestor_hashes: Sequence[str]
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The write-facts statement for ``path`` and its parameters."""
    params = {"p_sid": store_id, "p_ph": path_hash, **prefix_params(path)}
    if ancestor_hashes:
        params["p_anc"] = list(ancestor_hashes)
        return SELECT_WRITE_FACTS, params
    return SELECT_WRITE_FACTS_TOP, params


INSERT_FILE = sa.insert(files)
"""Insert a file; values per execute (:func:`insert_file_params`)."""


def insert_file_params(
    store_id: int,
    path: str,
    path_hash: str,
    text: str,
    now: dt.datetime,
    *,
    expiry_exempt: bool = False,
) -> dict[str, Any]:
    """Values of a new file at version 1. An empty text is stored as NULL (Oracle does anyway)."""
    return {
        "store_id": store_id,
        "file_path": path,
        "path_hash": path_hash,
        "body": text if text != "" else None,
        "char_count": len(text),
        "version_no": 1,
        "expiry_exempt": expiry_exempt,
        "created_at": now,
        "updated_at": now,
        "last_accessed_at": now,
    }


def _update_file(with_exempt: bool) -> sa.Update:
    now = _bp("p_now", type_=_TS)
    values: dict[str, Any] = {
        "body": _bp("p_body", type_=files.c.body.type),
        "char_count": _bp("p_chars", type_=sa.Integer()),
        "version_no": _bp("p_new_version", type_=sa.Integer()),
        "updated_at": now,
        "last_accessed_at": now,
    }
    if with_exempt:
        values["expiry_exempt"] = _bp("p_exempt", type_=sa.Boolean(create_constraint=False))
    return (
        sa.update(files)
        .where(files.c.file_id == _bp("p_fid"), files.c.version_no == _bp("p_version"))
        .values(**values)
    )


UPDATE_FILE = _update_file(False)
"""Replace a file's text if it is still at ``:p_version``; bumps the version. A rowcount of 0
means another writer changed or removed it (compare-and-set lost)."""

UPDATE_FILE_EXEMPT = _update_file(True)
""":data:`UPDATE_FILE` that also sets ``expiry_exempt``."""


def update_file_params(
    file_id: int,
    text: str,
    expected_version: int,
    now: dt.datetime,
    *,
    expiry_exempt: bool | None = None,
) -> tuple[sa.Update, dict[str, Any]]:
    """The update statement and its parameters (``expiry_exempt=None`` keeps the flag)."""
    params: dict[str, Any] = {
        "p_body": text if text != "" else None,
        "p_chars": len(text),
        "p_new_version": expected_version + 1,
        "p_now": now,
        "p_fid": file_id,
        "p_version": expected_version,
    }
    if expiry_exempt is None:
        return UPDATE_FILE, params
    params["p_exempt"] = expiry_exempt
    return UPDATE_FILE_EXEMPT, params


DELETE_FILES_BY_ID = sa.delete(files).where(files.c.file_id.in_(_bp("p_ids", expanding=True)))
"""Delete files by id (``:p_ids``, at most 1,000 per statement: Oracle's IN-list limit)."""

DELETE_FILE_BY_ID = sa.delete(files).where(files.c.file_id == _bp("p_fid"))
"""Delete one file by id (``:p_fid``); run with many parameter sets for a directory, so every
delete is a primary-key lookup (MariaDB may scan, and lock, other stores' rows for an IN list
on a small table)."""

_MOVED_AT = _bp("p_now", type_=_TS)
MOVE_FILE = (
    sa.update(files)
    .where(files.c.file_id == _bp("p_fid"))
    .values(
        file_path=_bp("p_path", type_=files.c.file_path.type),
        path_hash=_bp("p_hash", type_=sa.String(64)),
        version_no=_bp("p_new_version", type_=sa.Integer()),
        updated_at=_MOVED_AT,
        last_accessed_at=_MOVED_AT,
    )
)
"""Give file ``:p_fid`` a new path (rename): ``:p_path``, ``:p_hash``, ``:p_new_version``,
``:p_now``."""

SELECT_TOUCH_CANDIDATES = sa.select(files.c.file_id).where(
    files.c.file_id.in_(_bp("p_ids", expanding=True)),
    files.c.last_accessed_at < _bp("p_older", type_=_TS),
)
"""Ids among ``:p_ids`` whose last touch is older than ``:p_older`` (the touch worker adds
``FOR UPDATE SKIP LOCKED`` where the backend has it)."""

TOUCH_FILES = (
    sa.update(files)
    .where(
        files.c.file_id.in_(_bp("p_ids", expanding=True)),
        files.c.last_accessed_at < _bp("p_older", type_=_TS),
    )
    .values(last_accessed_at=_bp("p_now", type_=_TS))
)
"""Record a read: ``last_accessed_at = :p_now`` where it is older than ``:p_older``."""

INSERT_AUDIT = sa.insert(audit_events)
"""Insert audit events; one dict of values per row (keys: ``store_id``, ``store_key``,
``file_path``, ``action_name``, ``actor_name``, ``chars_before``, ``chars_after``,
``detail_text``, ``created_at``)."""

AUDIT_BUMP_COLUMNS = (
    "store_id",
    "store_key",
    "file_path",
    "action_name",
    "actor_name",
    "chars_before",
    "chars_after",
    "detail_text",
    "created_at",
)
INSERT_AUDIT_BUMP = (
    sa.insert(audit_events)
    .values({name: _bp(f"p_a_{name}", type_=audit_events.c[name].type) for name in AUDIT_BUMP_COLUMNS})
    .add_cte(BUMP_STORE.cte("bumped_store"))
)
""":data:`INSERT_AUDIT` with :data:`BUMP_STORE` as a data-modifying ``WITH`` (PostgreSQL): a
write's audit events and the store-row bump in one round trip. Parameters per row: the audit
columns as ``p_a_<column>`` (:data:`AUDIT_BUMP_COLUMNS`; a bare column name would also be
taken as a ``SET`` of the ``UPDATE``), plus ``p_sid`` and ``p_now``."""


# -- stores (admin paths) ---------------------------------------------------------------------


def select_stores_of_agent(agent_code: str) -> sa.Select[Any]:
    """The stores an agent owns: its agent, user and session stores and the context stores under
    its own namespace; never shared, global, or context stores under a store code."""
    return sa.select(stores.c.store_id, stores.c.store_key).where(
        stores.c.agent_code == agent_code,
        sa.or_(
            stores.c.scope_name.in_(("agent", "user", "session")),
            sa.and_(stores.c.scope_name == "context", stores.c.store_code.is_(None)),
        ),
    )


def select_store_totals(store_ids: Sequence[int]) -> sa.Select[Any]:
    """Per store: number of files and characters (for audit events of a drop)."""
    return (
        sa.select(
            files.c.store_id,
            sa.func.count().label("file_count"),
            sa.func.coalesce(sa.func.sum(files.c.char_count), 0).label("total_chars"),
        )
        .where(files.c.store_id.in_(list(store_ids)))
        .group_by(files.c.store_id)
    )


def delete_stores_by_id(store_ids: Sequence[int]) -> tuple[sa.Delete, sa.Delete]:
    """Delete the files, then the rows, of the given stores (two statements; no reliance on
    ``ON DELETE CASCADE`` being enabled, e.g. SQLite without ``PRAGMA foreign_keys``)."""
    ids = list(store_ids)
    return (
        sa.delete(files).where(files.c.store_id.in_(ids)),
        sa.delete(stores).where(stores.c.store_id.in_(ids)),
    )


def select_configured_caps(
    scope: str, agent_code: str | None, store_code: str | None
) -> sa.Select[Any]:
    """Enabled agent configurations that may name a new store of ``scope``: those with the same
    store code (shared, store-code context), every global one, or those of ``agent_code``
    (agent, user, agent-keyed context, session). Columns: ``agent_code``, ``scope_name``,
    ``store_code``, ``context_key`` and the three caps; the caller keeps the rows whose
    configuration really names the store (:func:`dbmemory.caps.names_store`)."""
    stmt = sa.select(
        agents.c.agent_code,
        agents.c.scope_name,
        agents.c.store_code,
        agents.c.context_key,
        agents.c.max_file_chars,
        agents.c.max_files,
        agents.c.max_store_chars,
    ).where(agents.c.memory_enabled == sa.true(), agents.c.scope_name == scope)
    if store_code is not None:
        return stmt.where(agents.c.store_code == store_code)
    if scope == "global":
        return stmt
    return stmt.where(agents.c.agent_code == (agent_code or ""), agents.c.store_code.is_(None))


def update_configured_store_caps(
    *,
    scope: str,
    key: str,
    is_prefix: bool,
    agent_code: str | None,
    store_code: str | None,
    caps: dict[str, Any],
    now: dt.datetime,
) -> sa.Update:
    """Set ``caps`` on the existing stores an agent configuration names: the store ``key``, or
    every store whose key starts with ``key`` when ``is_prefix`` (an exact ``SUBSTR`` match,
    never ``LIKE``), of that scope and owner (``agent_code`` / ``store_code`` columns, ``None``
    = must be NULL; not checked for ``shared`` and ``global``, whose key says it all)."""
    if is_prefix:
        match: ColumnElement[bool] = sa.func.substr(stores.c.store_key, 1, len(key)) == key
    else:
        match = stores.c.store_key == key
    conditions = [match, stores.c.scope_name == scope]
    if scope not in ("shared", "global"):
        conditions.append(
            stores.c.agent_code.is_(None) if agent_code is None else stores.c.agent_code == agent_code
        )
        conditions.append(
            stores.c.store_code.is_(None) if store_code is None else stores.c.store_code == store_code
        )
    return sa.update(stores).where(*conditions).values(**caps, updated_at=now)


# -- expiry -----------------------------------------------------------------------------------


def select_expirable(
    cutoff: dt.datetime, store_id: int | None, limit: int
) -> sa.Select[Any]:
    """Up to ``limit`` files untouched since ``cutoff`` and not exempt, with what their audit
    events need (id, store, store key, path, size)."""
    stmt = (
        sa.select(
            files.c.file_id,
            files.c.store_id,
            stores.c.store_key,
            files.c.file_path,
            files.c.char_count,
        )
        .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
        .where(files.c.last_accessed_at < cutoff, files.c.expiry_exempt == sa.false())
        .order_by(files.c.file_id)
        .limit(limit)
    )
    if store_id is not None:
        stmt = stmt.where(files.c.store_id == store_id)
    return stmt


def count_expirable(cutoff: dt.datetime, store_id: int | None) -> sa.Select[Any]:
    """How many files :func:`select_expirable` would eventually return."""
    stmt = sa.select(sa.func.count()).select_from(files).where(
        files.c.last_accessed_at < cutoff, files.c.expiry_exempt == sa.false()
    )
    if store_id is not None:
        stmt = stmt.where(files.c.store_id == store_id)
    return stmt


# -- agents -----------------------------------------------------------------------------------


def select_agent(agent_code: str, *, for_update: bool = False) -> sa.Select[Any]:
    """One agent configuration row.

    Read at the start of every turn: the statement of an agent code is built once and reused
    (a reused statement also skips SQLAlchemy's per-object cache-key walk); statements are
    immutable, so sharing them is safe.
    """
    if type(agent_code) is str and len(agent_code) <= 200:
        return _select_agent_cached(agent_code, for_update)
    return _build_select_agent(agent_code, for_update)


def _build_select_agent(agent_code: str, for_update: bool) -> sa.Select[Any]:
    stmt = sa.select(agents).where(agents.c.agent_code == agent_code)
    return stmt.with_for_update() if for_update else stmt


_select_agent_cached = functools.lru_cache(maxsize=1024)(_build_select_agent)


def select_agents() -> sa.Select[Any]:
    """Every agent configuration, by code."""
    return sa.select(agents).order_by(agents.c.agent_code)


def insert_agent(values: dict[str, Any]) -> sa.Insert:
    """Create an agent configuration row."""
    return sa.insert(agents).values(**values)


def update_agent(agent_code: str, values: dict[str, Any]) -> sa.Update:
    """Change an agent configuration row."""
    return sa.update(agents).where(agents.c.agent_code == agent_code).values(**values)


# -- for the compile checks -------------------------------------------------------------------


def _with_values(stmt: Executable, **values: Any) -> Executable:
    """``stmt`` with sample values bound to its (expanding) placeholders, for compile checks:
    ``params()`` does the same for a SELECT but is not available on INSERT/UPDATE/DELETE."""

    def replace(element: Any) -> Any:
        if isinstance(element, BindParameter) and element.key in values:
            return element._with_value(values[element.key], maintain_key=True, required=False)
        return None

    return visitors.replacement_traverse(stmt, {}, replace)


def example_statements() -> dict[str, Executable]:
    """Every statement the package runs (prebuilt ones as they are; expanding IN lists bound to
    sample values so they render).

    Returns:
        Name -> statement. The Oracle compile test compiles each for Oracle 19c and checks
        identifiers and CLOB use; add new statements here when you add them above.
    """
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    h = "0" * 64
    drop_files, drop_stores = delete_stores_by_id([1, 2])
    facts, facts_params = write_facts(1, "/memories/a/b.md", h, [h])
    # statements with post-compile parts (expanding IN lists, Oracle's FETCH FIRST) render
    # only with every value bound
    sample: dict[str, Any] = {
        **facts_params,
        "p_ids": [1, 2, 3],
        "p_now": now,
        "p_older": now,
    }
    return {
        "select_store_id": SELECT_STORE_ID,
        "lock_store_by_key": LOCK_STORE_BY_KEY,
        "lock_store_by_id": LOCK_STORE_BY_ID,
        "insert_store": INSERT_STORE.values(
            store_key="agent:A",
            scope_name="agent",
            agent_code="A",
            store_code=None,
            created_at=now,
            updated_at=now,
            max_file_chars=100_000,
            max_files=1_000,
            max_store_chars=None,
        ),
        "bump_store": BUMP_STORE,
        "insert_audit_bump": INSERT_AUDIT_BUMP,
        "set_store_caps": SET_STORE_CAPS,
        "select_configured_caps_shared": select_configured_caps("shared", None, "TEAM"),
        "select_configured_caps_global": select_configured_caps("global", None, None),
        "select_configured_caps_agent": select_configured_caps("user", "A", None),
        "update_configured_store_caps": update_configured_store_caps(
            scope="user",
            key="user:A:",
            is_prefix=True,
            agent_code="A",
            store_code=None,
            caps={"max_file_chars": 10, "max_files": 3, "max_store_chars": None},
            now=now,
        ),
        "update_configured_store_caps_shared": update_configured_store_caps(
            scope="shared",
            key="shared:TEAM",
            is_prefix=False,
            agent_code=None,
            store_code="TEAM",
            caps={"max_file_chars": 10, "max_files": 3, "max_store_chars": 30},
            now=now,
        ),
        "select_stores_of_agent": select_stores_of_agent("A"),
        "select_store_totals": select_store_totals([1, 2]),
        "delete_store_files": drop_files,
        "delete_stores": drop_stores,
        "select_file": SELECT_FILE,
        "select_file_for_update": SELECT_FILE_FOR_UPDATE,
        "select_file_by_key": SELECT_FILE_BY_KEY,
        "lock_store_and_file": LOCK_STORE_AND_FILE,
        "lock_store_with_file": LOCK_STORE_WITH_FILE,
        "select_file_meta": SELECT_FILE_META,
        "select_listing": SELECT_LISTING,
        "select_listing_dir": SELECT_LISTING_DIR,
        "select_listing_dir_any": _with_values(SELECT_LISTING_DIR_ANY, **sample),
        "select_listing_by_key": SELECT_LISTING_BY_KEY,
        "select_listing_dir_by_key": SELECT_LISTING_DIR_BY_KEY,
        "select_sizes": SELECT_SIZES,
        "select_sizes_dir": SELECT_SIZES_DIR,
        "select_sizes_by_key": SELECT_SIZES_BY_KEY,
        "select_sizes_dir_by_key": SELECT_SIZES_DIR_BY_KEY,
        "select_write_facts": _with_values(facts, **sample),
        "select_write_facts_top": SELECT_WRITE_FACTS_TOP,
        "insert_file": INSERT_FILE.values(
            **insert_file_params(1, "/memories/a.md", h, "x" * 5000, now)
        ),
        "update_file": UPDATE_FILE,
        "update_file_exempt": UPDATE_FILE_EXEMPT,
        "delete_files_by_id": _with_values(DELETE_FILES_BY_ID, **sample),
        "delete_file_by_id": DELETE_FILE_BY_ID,
        "move_file": MOVE_FILE,
        "select_touch_candidates": _with_values(SELECT_TOUCH_CANDIDATES, **sample),
        "touch_files": _with_values(TOUCH_FILES, **sample),
        "select_expirable": select_expirable(now, None, 1000),
        "select_expirable_store": select_expirable(now, 1, 1000),
        "count_expirable": count_expirable(now, None),
        "insert_audit": INSERT_AUDIT.values(
            store_id=1,
            store_key="agent:A",
            file_path="/memories/a.md",
            action_name="create",
            actor_name="tool:A",
            chars_before=None,
            chars_after=3,
            detail_text=None,
            created_at=now,
        ),
        "select_agent": select_agent("A"),
        "select_agent_for_update": select_agent("A", for_update=True),
        "select_agents": select_agents(),
        "insert_agent": insert_agent(
            {
                "agent_code": "A",
                "scope_name": "agent",
                "store_code": None,
                "context_key": None,
                "max_file_chars": 100_000,
                "max_files": 1_000,
                "max_store_chars": None,
                "memory_enabled": True,
                "created_at": now,
                "updated_at": now,
            }
        ),
        "update_agent": update_agent("A", {"memory_enabled": False, "updated_at": now}),
    }
