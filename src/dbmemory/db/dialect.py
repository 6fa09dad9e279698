"""Every difference between the supported databases, in one module.

Nothing else in dbmemory branches on the dialect name. What lives here:

* column types pinned per backend (the file body is ``CLOB`` on Oracle and ``LONGTEXT`` on
  MySQL/MariaDB; timestamps keep fractions and are stored as UTC everywhere);
* engine set-up for SQLite (WAL, busy timeout, ``BEGIN IMMEDIATE`` so a read-then-write never
  fails with "database is locked");
* how a read's touch is recorded (inline on SQLite, on a separate connection elsewhere), the
  upsert of ``dbm_file_reads``, the expiry's job lock and its batch lock (:func:`touch_inline`,
  :func:`file_read_upsert`, :func:`job_lock`, :func:`lock_expiry_candidates`);
* translation of driver errors into :mod:`dbmemory.errors` (one place, ``raise ... from``).

Facts behind each choice are in the project's DATABASES.md.

For size (STYLE rule 19) groups of it live in sibling modules that this one imports and
re-exports, name for name (import every name from here): :mod:`~dbmemory.db.dialect_txn`
(transactions on the driver's connection), :mod:`~dbmemory.db.dialect_writes` (the write
path's shape), :mod:`~dbmemory.db.dialect_expiry` (touches and the expiry),
:mod:`~dbmemory.db.dialect_deploy` (Galera), :mod:`~dbmemory.db.dialect_errors` (driver errors),
:mod:`~dbmemory.db.dialect_oracle` (Oracle specifics) and :mod:`~dbmemory.db.dialect_health`
(``dbmemory doctor``). They reach this module only on use, so :func:`utcnow` here stays the
one clock (tests patch ``dialect.utcnow``) and any import order works.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, oracle, postgresql
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.ext.compiler import compiles

from dbmemory.errors import DbMemoryError

__all__ = [
    "UtcDateTime",
    "BodyText",
    "PathText",
    "big_id",
    "utcnow",
    "configure_engine",
    "DEFAULT_LOCK_TIMEOUT_MS",
    "is_autocommit",
    "driver_in_transaction",
    "join_driver_transaction",
    "server_in_transaction",
    "write_outcome_unknown",
    "begin_own_transaction",
    "end_own_transaction",
    "is_sqlite",
    "is_memory_sqlite",
    "touch_inline",
    "lock_skip_locked",
    "file_read_upsert",
    "job_lock",
    "lock_expiry_candidates",
    "expiry_candidates",
    "delete_returning",
    "touch_connection_setup",
    "snapshot_isolation",
    "is_autocommit",
    "batch_isolation",
    "current_read",
    "insert_store_statement",
    "store_and_file_lock",
    "bump_store_on_write",
    "store_bump",
    "guarded_create",
    "insert_returns_id",
    "PATH_KEY_CHARS",
    "PathKey",
    "path_prefix_index_ddl",
    "serialization_failure",
    "engine_defaults",
    "transaction_lost",
    "lost_transaction_reason",
    "translate_db_error",
    "oracle19_dialect",
    "Flag",
    "flag_check",
    "is_oracle",
    "ORACLE_SESSION_SQL",
    "configure_oracle_session",
    "oracle_session_listener",
    "ddl_commits_transaction",
    "oracle_object_exists",
    "drop_table",
    "utf8_length",
]


def utcnow() -> dt.datetime:
    """The current time as an aware UTC ``datetime`` (microsecond precision)."""
    return dt.datetime.now(dt.timezone.utc)


class UtcDateTime(sa.types.TypeDecorator[dt.datetime]):
    """A timestamp that is always UTC, whatever the server or session time zone.

    Stored as ``TIMESTAMP WITH TIME ZONE`` on PostgreSQL, ``TIMESTAMP(6)`` on Oracle (never
    ``DATE``, which loses fractions), ``DATETIME(6)`` on MySQL/MariaDB (naive UTC: MySQL drops
    zones) and ISO text on SQLite (naive UTC). Binds accept aware datetimes (converted to UTC)
    or naive ones (taken as UTC); results are always aware UTC datetimes.
    """

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.TIMESTAMP(timezone=True))
        if dialect.name == "oracle":
            return dialect.type_descriptor(oracle.TIMESTAMP())
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        if dialect.name == "postgresql":
            return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return value.replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # SQLite text in a raw view or a hand-written row
            value = dt.datetime.fromisoformat(value)
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc)


BodyText: sa.types.TypeEngine[str] = (
    sa.UnicodeText()
    .with_variant(oracle.CLOB(), "oracle")
    .with_variant(mysql.LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb")
)
"""A file body: ``CLOB`` on Oracle, ``LONGTEXT`` on MySQL/MariaDB (``TEXT`` stops at 64 KiB),
``TEXT`` on PostgreSQL and SQLite. Never compared, sorted, grouped or DISTINCTed."""

PathText: sa.types.TypeEngine[str] = sa.String(1000).with_variant(
    mysql.VARCHAR(1000, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
)
"""A memory path, at most 1,000 characters. On MySQL/MariaDB the binary collation makes
comparisons case- and accent-sensitive like the other backends. Equality lookups and the unique
key use the ``path_hash`` column instead, so no backend needs an index on 1,000 characters
(InnoDB's 3,072-byte key limit, PostgreSQL's ~2,700-byte B-tree row limit)."""

big_id: sa.types.TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""Surrogate-key type: ``BIGINT`` everywhere but SQLite, where only ``INTEGER PRIMARY KEY``
autoincrements."""


def is_sqlite(bind: Connection | Engine | Dialect) -> bool:
    """Whether ``bind`` talks to SQLite."""
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return dialect.name == "sqlite"


def is_memory_sqlite(engine: Engine) -> bool:
    """Whether ``engine`` is an in-memory SQLite database (no second connection can see it)."""
    if engine.dialect.name != "sqlite":
        return False
    database = engine.url.database
    return database in (None, "", ":memory:") or "mode=memory" in str(engine.url)


DEFAULT_LOCK_TIMEOUT_MS = 5_000
"""How long a statement waits for another transaction's lock before giving up, by default
(setting ``DBMEMORY_LOCK_TIMEOUT_MS``)."""


def _lock_wait_seconds(lock_timeout_ms: int) -> int:
    """Whole seconds for backends that count lock waits in seconds (rounded up, at least 1)."""
    return max(1, -(-int(lock_timeout_ms) // 1000))


def configure_engine(
    engine: Engine,
    *,
    lock_timeout_ms: int | None = None,
    busy_timeout_ms: int | None = None,
    transaction_pooling: bool = False,
) -> Engine:
    """Apply dbmemory's connection set-up to ``engine`` (yours or dbmemory's) and return it.

    Every backend gets a bounded lock wait of ``lock_timeout_ms`` milliseconds (default
    :data:`DEFAULT_LOCK_TIMEOUT_MS`), set on each new connection: PostgreSQL ``SET
    lock_timeout``, MySQL/MariaDB ``SET SESSION innodb_lock_wait_timeout`` (whole seconds,
    rounded up), SQLite ``PRAGMA busy_timeout``; Oracle has no session setting, so dbmemory's
    locking statements compile to ``FOR UPDATE WAIT n`` (seconds, rounded up) on this engine.
    A write that waits longer ends in a :class:`~dbmemory.errors.ConflictError` whose text says
    to retry.

    SQLite also gets: pysqlite's own transaction handling off, ``BEGIN IMMEDIATE`` at the start
    of every transaction SQLAlchemy begins (the write lock is taken before the first read, as
    SQLite ignores ``SELECT ... FOR UPDATE``; never on an ``AUTOCOMMIT`` connection, whose
    statements commit on their own), WAL for file databases and foreign keys. This is
    SQLAlchemy's documented recipe for serialisable SQLite transactions.

    The set-up runs when the pool opens a connection: call this before the engine's first
    connection (or ``engine.dispose()`` afterwards). Idempotent: a second call changes nothing.

    PostgreSQL behind a transaction-mode pooler (``transaction_pooling=True``, e.g. PgBouncer
    ``pool_mode = transaction``): consecutive transactions of one connection may run on
    different server connections, and a session ``SET`` would stay behind on a server
    connection other clients then get. ``lock_timeout`` is then set with ``SET LOCAL`` at the
    start of every transaction (SQLAlchemy's and dbmemory's own ones on ``AUTOCOMMIT``
    connections) and never per session.

    Args:
        lock_timeout_ms: lock wait bound in milliseconds (> 0).
        busy_timeout_ms: SQLite only: overrides ``lock_timeout_ms`` for the busy timeout.
        transaction_pooling: PostgreSQL only: per-transaction settings (see above).
    """
    if getattr(engine, "_dbmemory_configured", False):
        return engine
    lock_ms = int(lock_timeout_ms if lock_timeout_ms is not None else DEFAULT_LOCK_TIMEOUT_MS)
    if lock_ms <= 0:
        raise DbMemoryError("lock_timeout_ms must be a positive number of milliseconds")
    name = engine.dialect.name
    engine._dbmemory_configured = True  # type: ignore[attr-defined]
    engine._dbmemory_lock_timeout_ms = lock_ms  # type: ignore[attr-defined]
    if name == "oracle":
        configure_oracle_session(engine)  # binary NLS_COMP/NLS_SORT on every connection
        engine.dialect._dbmemory_lock_wait_s = _lock_wait_seconds(lock_ms)  # type: ignore[attr-defined]
        return engine
    if name == "postgresql" and transaction_pooling:
        engine._dbmemory_transaction_pooling = True  # type: ignore[attr-defined]

        @sa.event.listens_for(engine, "begin")
        def _on_pooled_begin(conn: Connection) -> None:
            if not is_autocommit(conn):
                set_transaction_lock_timeout(conn)

        return engine
    if name in ("postgresql", "mysql", "mariadb"):
        setting = (
            f"SET lock_timeout = '{lock_ms}ms'"
            if name == "postgresql"
            else f"SET SESSION innodb_lock_wait_timeout = {_lock_wait_seconds(lock_ms)}"
        )

        @sa.event.listens_for(engine, "connect")
        def _on_server_connect(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(setting)
            finally:
                cursor.close()
            autocommit = getattr(dbapi_conn, "autocommit", False)
            if callable(autocommit):  # PyMySQL: autocommit is a method; SET opens no transaction
                return
            if not autocommit:  # psycopg opened a transaction for the SET: keep the setting
                dbapi_conn.commit()

        return engine
    if name != "sqlite":
        return engine

    memory = is_memory_sqlite(engine)
    busy_ms = int(busy_timeout_ms if busy_timeout_ms is not None else lock_ms)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if not memory:
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # An AUTOCOMMIT connection commits each statement on its own and SQLAlchemy will
        # never send COMMIT for it: a BEGIN here would swallow its writes and keep the write
        # lock until the connection closes. dbmemory's writes open their own transaction there
        # (dbmemory.txn).
        if is_autocommit(conn):
            return
        # straight on the DB-API connection: Connection.exec_driver_sql costs ~15-25 µs more
        # per transaction (statement events, result set-up) for a statement with no result
        try:
            # _driver_execute spelled out for SQLite (this runs for every transaction)
            conn.connection.driver_connection.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            # SQLAlchemy sets Connection.__in_begin before this event and clears it only after
            # the dialect's do_begin: left set, it would turn autobegin off for good, and every
            # later statement of the connection would commit on its own ("database is locked"
            # once, then silent autocommit).
            conn._Connection__in_begin = False  # type: ignore[attr-defined]
            dbapi = conn.dialect.loaded_dbapi
            if isinstance(exc, dbapi.Error):  # wrapped as SQLAlchemy would
                raise sa.exc.DBAPIError.instance(
                    "BEGIN IMMEDIATE", (), exc, dbapi.Error, dialect=conn.dialect
                ) from exc
            raise

    return engine


def _name(bind: Connection | Engine | Dialect) -> str:
    return (bind if isinstance(bind, Dialect) else bind.dialect).name


def engine_defaults(backend: str) -> dict[str, Any]:
    """Keyword arguments :func:`dbmemory.db.engine.create_engine` adds for ``backend``
    (``"mysql"``, ``"postgresql"``, ``"sqlite"``, ``"oracle"``) unless the caller sets them.

    MySQL/MariaDB engines run at READ COMMITTED, as PostgreSQL and Oracle do by default: InnoDB
    then takes no gap locks, so writers of different stores never deadlock each other, and a
    plain read after the store lock sees the rows committed by the previous writer.
    """
    if backend in ("mysql", "mariadb"):
        return {"isolation_level": "READ COMMITTED"}
    return {}


# -- sibling modules (split out for size), re-exported here --------------------------------------
#
# (split out for size, STYLE rule 19; they import this module on use, never at import time)

from dbmemory.db.dialect_txn import (  # noqa: E402, F401
    _driver_execute,
    _engine_lock_ms,
    begin_own_transaction,
    driver_in_transaction,
    end_own_transaction,
    join_driver_transaction,
    server_in_transaction,
    set_transaction_lock_timeout,
    touch_inline,
    transaction_pooling,
    transaction_pooling_connect_args,
)
from dbmemory.db.dialect_writes import (  # noqa: E402, F401
    bump_store_on_write,
    counted_file_update,
    current_read,
    delete_uncounts_first,
    guarded_create,
    insert_returns_id,
    insert_store_statement,
    one_statement_store_moves,
    store_and_file_lock,
    store_bump,
    _mysql_repeatable,
)
from dbmemory.db.dialect_deploy import (  # noqa: E402, F401
    causal_reads,
    is_galera,
)
from dbmemory.db.dialect_expiry import (  # noqa: E402, F401
    batch_isolation,
    delete_returning,
    expiry_candidates,
    file_read_upsert,
    is_autocommit,
    job_lock,
    lock_expiry_candidates,
    lock_skip_locked,
    snapshot_isolation,
    touch_connection_setup,
    utf8_length,
    _isolation,
)
from dbmemory.db.dialect_errors import (  # noqa: E402, F401
    lost_transaction_reason,
    serialization_failure,
    transaction_lost,
    translate_db_error,
    write_outcome_unknown,
    _BUSY_MARKERS,
    _chain_text,
    _CONFLICT_MARKERS,
    _connect_failure,
    _error_codes,
    _MYSQL_LOST,
)
from dbmemory.db.dialect_oracle import (  # noqa: E402, F401
    configure_oracle_session,
    ddl_commits_transaction,
    drop_table,
    Flag,
    flag_check,
    is_oracle,
    oracle19_dialect,
    oracle_object_exists,
    oracle_session_listener,
    ORACLE_SESSION_SQL,
    _compile_flag_constant,
    _compile_flag_constant_oracle,
    _DBM_TABLE,
    _flag_result,
    _FlagConstant,
    _FOR_UPDATE_AT_END,
    _ORACLE_EXISTS,
    _oracle_flag_bind,
    _oracle_select_wait,
)
from dbmemory.db.dialect_health import (  # noqa: E402, F401
    expiry_job_probe,
    health_probes,
    pg_cron_installed,
    Probe,
    server_version,
    _mb,
    _PATH_COLLATIONS,
    _value,
)


# -- the indexed prefix check (revision 0004) ---------------------------------------------------

PATH_KEY_CHARS = 600
"""Characters of ``file_path`` in the prefix index ``ix_dbm_files_prefix`` (revision 0004):
600 characters of UTF-8 (2,400 bytes at most) stay under PostgreSQL's B-tree row limit
(~2,700 bytes) and InnoDB's 3,072-byte key limit. A directory prefix longer than this is
checked by the scan form (:data:`dbmemory.statements.INSERT_FILE_IF_FREE_SCAN`)."""


class PathKey(sa.sql.expression.ColumnElement[str]):
    """The indexed key of a ``file_path`` column, compared in binary (code point) order:
    ``substr(path, 1, 600)`` on SQLite (an expression index), ``substr(path, 1, 600) COLLATE
    "C"`` on PostgreSQL (an expression index in the ``C`` collation, whatever the database's
    collation), the column itself on MySQL/MariaDB (a prefix index of 600 characters,
    ``utf8mb4_bin``) and Oracle (an index on the column; comparisons are binary under the
    default ``NLS_COMP``). The 600 is rendered as a literal so the expression matches the
    index's."""

    inherit_cache = True
    type = sa.String()
    _traverse_internals = [("column", sa.sql.visitors.InternalTraversal.dp_clauseelement)]
    """Part of the statement cache key: without it SQLAlchemy compiles the statement anew on
    every execute (measured: ~25 ms per create on SQLite under load)."""

    def __init__(self, column: Any) -> None:
        self.column = column


@compiles(PathKey)
def _path_key_default(element: PathKey, compiler: Any, **kw: Any) -> str:
    return f"substr({compiler.process(element.column, **kw)}, 1, {PATH_KEY_CHARS})"


@compiles(PathKey, "postgresql")
def _path_key_postgresql(element: PathKey, compiler: Any, **kw: Any) -> str:
    return f'(substr({compiler.process(element.column, **kw)}, 1, {PATH_KEY_CHARS}) COLLATE "C")'


@compiles(PathKey, "mysql")
@compiles(PathKey, "mariadb")
@compiles(PathKey, "oracle")
def _path_key_column(element: PathKey, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.column, **kw))


def path_prefix_index_ddl(name: str) -> str:
    """``CREATE INDEX ix_dbm_files_prefix`` for dialect ``name``: ``(store_id, <PathKey>)``,
    so "is anything under this directory?" is an index range probe, not a scan of the store."""
    n = PATH_KEY_CHARS
    if name == "postgresql":
        return (
            "CREATE INDEX ix_dbm_files_prefix ON dbm_files "
            f'(store_id, (substr(file_path, 1, {n})) COLLATE "C")'
        )
    if name in ("mysql", "mariadb"):
        return f"CREATE INDEX ix_dbm_files_prefix ON dbm_files (store_id, file_path({n}))"
    if name == "oracle":
        return "CREATE INDEX ix_dbm_files_prefix ON dbm_files (store_id, file_path)"
    return f"CREATE INDEX ix_dbm_files_prefix ON dbm_files (store_id, substr(file_path, 1, {n}))"


def raw_reads(bind: Connection | Engine | Dialect) -> bool:
    """Whether the MEMORY tool's hot reads may run on the DB-API cursor
    (:mod:`dbmemory.db.raw`): SQLite only, where SQLAlchemy's per-statement cost is several
    times the statement's own; the servers' round trip dwarfs it."""
    return _name(bind) == "sqlite"


def locks_by_update(bind: Connection | Engine | Dialect) -> bool:
    """Whether a row a writer locks so that others serialise on it is locked by a no-op
    ``UPDATE ... RETURNING`` instead of ``SELECT ... FOR UPDATE``: PostgreSQL. A transaction
    there with an older snapshot (REPEATABLE READ, SERIALIZABLE) that waited for the writer's
    lock then fails with a serialization error instead of going on with a snapshot that cannot
    see the writer's rows (and, say, deleting everything of a user but them). MariaDB's locking
    reads see the latest rows at every level; SQLite has one writer; Oracle keeps its
    ``FOR UPDATE`` (not run here)."""
    return _name(bind) == "postgresql"
