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
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
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


def transaction_pooling(bind: Connection | Engine) -> bool:
    """Whether ``bind``'s engine was configured for a transaction-mode pooler
    (:func:`configure_engine`)."""
    engine = bind.engine
    while True:
        if getattr(engine, "_dbmemory_transaction_pooling", False):
            return True
        proxied = getattr(engine, "_proxied", None)  # execution_options() copies, touch engine
        if proxied is None:
            return False
        engine = proxied


def transaction_pooling_connect_args(backend: str) -> dict[str, Any]:
    """Driver connect arguments for a server behind a transaction-mode pooler: psycopg 3
    prepares a statement after its 5th execution on a connection (``prepare_threshold``);
    PgBouncer before 1.21 (or without ``max_prepared_statements``) would route the prepared
    statement's later executions to server connections that never saw it ("prepared
    statement ... does not exist"), so preparing is turned off."""
    if backend == "postgresql":
        return {"prepare_threshold": None}
    return {}


def set_transaction_lock_timeout(conn: Connection, lock_timeout_ms: int | None = None) -> None:
    """``SET LOCAL lock_timeout`` for the transaction just begun on ``conn`` (PostgreSQL behind a
    transaction-mode pooler: :func:`configure_engine`). ``lock_timeout_ms`` defaults to the
    connection's ``dbmemory_lock_timeout_ms`` execution option, then the engine's timeout."""
    if lock_timeout_ms is None:
        lock_timeout_ms = conn.get_execution_options().get("dbmemory_lock_timeout_ms")
    if lock_timeout_ms is None:
        lock_timeout_ms = _engine_lock_ms(conn)
    _driver_execute(conn, f"SET LOCAL lock_timeout = '{int(lock_timeout_ms)}ms'")


def _engine_lock_ms(conn: Connection) -> int:
    engine = conn.engine
    while True:
        value = getattr(engine, "_dbmemory_lock_timeout_ms", None)
        if value is not None:
            return int(value)
        proxied = getattr(engine, "_proxied", None)
        if proxied is None:
            return DEFAULT_LOCK_TIMEOUT_MS
        engine = proxied


def _driver_execute(conn: Connection, statement: str) -> None:
    """Run a transaction-control statement on the DB-API connection, wrapping driver errors as
    SQLAlchemy would (so :func:`translate_db_error` sees them)."""
    dbapi_conn = conn.connection.driver_connection
    try:
        if conn.dialect.name == "sqlite":
            dbapi_conn.execute(statement)
        else:
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(statement)
            finally:
                cursor.close()
    except Exception as exc:
        dbapi = conn.dialect.loaded_dbapi
        if not isinstance(exc, dbapi.Error):
            raise
        raise sa.exc.DBAPIError.instance(
            statement, (), exc, dbapi.Error, dialect=conn.dialect
        ) from exc


def driver_in_transaction(conn: Connection) -> bool | None:
    """Whether the database connection itself has a transaction open, where the driver knows
    it without a round trip (``None`` when it cannot tell).

    SQLite: ``sqlite3.Connection.in_transaction``. PostgreSQL (psycopg 3): the libpq
    transaction status. MySQL/MariaDB (PyMySQL): the server-status flag of the last reply.
    """
    try:
        dbapi_conn = conn.connection.driver_connection
    except Exception:
        return None
    name = conn.dialect.name
    try:
        if name == "sqlite":
            return bool(dbapi_conn.in_transaction)
        if name == "postgresql":
            info = getattr(dbapi_conn, "info", None)
            status = getattr(info, "transaction_status", None)
            if status is None:
                return None
            return int(status) != 0  # psycopg.pq.TransactionStatus.IDLE
        if name in ("mysql", "mariadb"):
            status = getattr(dbapi_conn, "server_status", None)
            return None if status is None else bool(status & 1)  # SERVER_STATUS_IN_TRANS
    except Exception:
        return None
    return None


def server_in_transaction(conn: Connection) -> bool | None:
    """Whether the database connection has a transaction open, as the server says it.

    :func:`driver_in_transaction` first; when that says "in a transaction" on MariaDB, the
    server is asked (``SELECT @@in_transaction``, one round trip, only then): MariaDB's status
    flag in its replies can stay set after the server ended the transaction (a DDL statement's
    implicit commit followed by its failure; on Galera, after a replayed commit), and joining a
    transaction that does not exist would run a write as autocommitted statements under a
    savepoint that is gone at once. MySQL has no such variable: its flag is used as is.
    """
    known = driver_in_transaction(conn)
    if known is not True or conn.dialect.name not in ("mysql", "mariadb"):
        return known
    if not getattr(conn.dialect, "is_mariadb", False):
        return known
    cursor = conn.connection.driver_connection.cursor()
    try:
        cursor.execute("SELECT @@in_transaction")
        row = cursor.fetchone()
    except Exception:
        return known
    finally:
        cursor.close()
    return None if row is None else bool(int(row[0]))


def begin_own_transaction(conn: Connection) -> None:
    """Open a real transaction on an ``AUTOCOMMIT`` connection (see :mod:`dbmemory.txn`).

    SQLite ``BEGIN IMMEDIATE`` (the write lock first), PostgreSQL ``BEGIN``, MySQL/MariaDB
    ``START TRANSACTION``; Oracle has no BEGIN: the driver's autocommit is switched off until
    :func:`end_own_transaction`.
    """
    name = conn.dialect.name
    if name == "oracle":
        conn.connection.driver_connection.autocommit = False
        return
    statement = {"sqlite": "BEGIN IMMEDIATE", "postgresql": "BEGIN"}.get(name, "START TRANSACTION")
    _driver_execute(conn, statement)
    if name == "postgresql" and transaction_pooling(conn):
        set_transaction_lock_timeout(conn)


def end_own_transaction(conn: Connection, *, commit: bool) -> None:
    """Commit or roll back the transaction :func:`begin_own_transaction` opened."""
    if conn.dialect.name == "oracle":
        dbapi_conn = conn.connection.driver_connection
        try:
            dbapi_conn.commit() if commit else dbapi_conn.rollback()
        finally:
            dbapi_conn.autocommit = True
        return
    _driver_execute(conn, "COMMIT" if commit else "ROLLBACK")


def touch_inline(conn: Connection) -> bool:
    """Whether a read's touch runs inline, in the caller's transaction.

    True on SQLite: the caller's transaction already holds SQLite's single write lock (``BEGIN
    IMMEDIATE``), so the touch takes no new lock and no expiry can interleave, while a second
    connection would wait for the caller (a deadlock). Elsewhere the touch runs on a connection
    of its own (:mod:`dbmemory.touch`), so the caller's transaction never holds a lock because
    of a read.
    """
    return conn.dialect.name == "sqlite"


def _name(bind: Connection | Engine | Dialect) -> str:
    return (bind if isinstance(bind, Dialect) else bind.dialect).name


def file_read_upsert(bind: Connection | Engine | Dialect) -> sa.Executable:
    """The statement recording a read of ``:p_fid`` at ``:p_now`` in ``dbm_file_reads`` (insert,
    or move ``read_at`` forward, never back), for the touch connection of a server backend.

    PostgreSQL ``INSERT ... ON CONFLICT DO UPDATE``; MySQL/MariaDB ``INSERT ... ON DUPLICATE KEY
    UPDATE`` with ``GREATEST``; Oracle ``MERGE`` (two sessions merging one new key can still
    raise ORA-00001: the caller retries once). SQLite records reads inline with the portable
    :data:`dbmemory.statements.INSERT_FILE_READ` / ``UPDATE_FILE_READ`` pair instead.
    """
    from dbmemory.db.schema import file_reads

    name = _name(bind)
    fid = sa.bindparam("p_fid", type_=sa.BigInteger())
    now = sa.bindparam("p_now", type_=UtcDateTime())
    if name == "postgresql":
        pg = postgresql.insert(file_reads).values(file_id=fid, read_at=now)
        return pg.on_conflict_do_update(
            index_elements=[file_reads.c.file_id],
            set_={"read_at": pg.excluded.read_at},
            where=file_reads.c.read_at < pg.excluded.read_at,
        )
    if name in ("mysql", "mariadb"):
        my = mysql.insert(file_reads).values(file_id=fid, read_at=now)
        return my.on_duplicate_key_update(
            read_at=sa.func.greatest(file_reads.c.read_at, my.inserted.read_at)
        )
    if name == "oracle":
        return sa.text(
            "MERGE INTO dbm_file_reads r "
            "USING (SELECT :p_fid AS file_id, :p_now AS read_at FROM dual) s "
            "ON (r.file_id = s.file_id) "
            "WHEN MATCHED THEN UPDATE SET r.read_at = s.read_at WHERE r.read_at < s.read_at "
            "WHEN NOT MATCHED THEN INSERT (file_id, read_at) VALUES (s.file_id, s.read_at)"
        ).bindparams(fid, now)
    raise ValueError(f"no touch upsert for {name}: reads are recorded inline there")


def job_lock(
    bind: Connection | Engine | Dialect, *, shared: bool, wait_seconds: int | None = None
) -> sa.Executable:
    """Lock the expiry's ``dbm_job_locks`` row: exclusive for an expiry batch, shared for a
    read's touch (touches never wait for one another, only for a running batch).

    PostgreSQL ``FOR SHARE`` / ``FOR UPDATE``, MySQL/MariaDB ``LOCK IN SHARE MODE`` / ``FOR
    UPDATE``. Oracle has no shared row lock, so there the lock is a table lock on
    ``dbm_job_locks``: ``ROW SHARE`` for a touch (compatible with other touches), ``EXCLUSIVE``
    for an expiry batch, with ``WAIT n`` when ``wait_seconds`` is given (the servers bound the
    wait by the session's lock timeout instead, see :func:`touch_connection_setup`). SQLite:
    nothing is locked (``FOR UPDATE`` is not rendered); ``BEGIN IMMEDIATE`` already serialises.
    """
    from dbmemory import statements as st

    if _name(bind) == "oracle":
        mode = "ROW SHARE" if shared else "EXCLUSIVE"
        wait = f" WAIT {int(wait_seconds)}" if wait_seconds is not None else ""
        return sa.text(f"LOCK TABLE dbm_job_locks IN {mode} MODE{wait}")
    return st.SELECT_JOB_LOCK.with_for_update(read=shared)


def lock_expiry_candidates(
    bind: Connection | Engine | Dialect, stmt: sa.Select[Any], limit: int
) -> sa.Select[Any]:
    """``stmt`` limited to ``limit`` rows and locked ``FOR UPDATE SKIP LOCKED`` (rows a writer
    holds are skipped: they are being written, so they are not expiring).

    Oracle refuses ``FETCH FIRST`` with ``FOR UPDATE`` (ORA-02014): there the limit is
    ``ROWNUM <= n``. PostgreSQL locks only the ``dbm_files`` rows (``FOR UPDATE OF``), never the
    rows of the tables in its subqueries. SQLite has no row locks (``BEGIN IMMEDIATE``).
    """
    name = _name(bind)
    if name == "sqlite":
        return stmt.limit(limit)
    table = stmt.get_final_froms()[0]
    if name == "oracle":
        return stmt.where(sa.text(f"ROWNUM <= {int(limit)}")).with_for_update(skip_locked=True)
    if name == "postgresql":
        return stmt.limit(limit).with_for_update(skip_locked=True, of=table)
    return stmt.limit(limit).with_for_update(skip_locked=True)


def expiry_candidates(
    bind: Connection | Engine | Dialect, stmt: sa.Select[Any], limit: int
) -> sa.Select[Any]:
    """``stmt`` limited to ``limit`` rows, without a lock (the expiry locks the candidates'
    store rows next, ``SKIP LOCKED``: writers' order, store row first). Oracle 19c: ``FETCH
    FIRST``; elsewhere ``LIMIT``."""
    return stmt.limit(limit)


def utf8_length(bind: Connection | Engine | Dialect, column: Any) -> Any:
    """SQL for the UTF-8 length in bytes of a text column, or ``None`` where the database
    cannot give it (Oracle: ``LENGTHB`` refuses a CLOB in a multibyte character set; the caller
    then reads the text and measures it). ``NULL`` stays ``NULL``.

    PostgreSQL (UTF8 database) and MySQL/MariaDB (``utf8mb4`` column): ``OCTET_LENGTH``;
    SQLite (UTF-8 database, its default): ``LENGTH(CAST(x AS BLOB))``.
    """
    name = _name(bind)
    if name == "oracle":
        return None
    if name == "sqlite":
        return sa.func.length(sa.cast(column, sa.LargeBinary()))
    return sa.func.octet_length(column)


def delete_returning(bind: Connection | Engine | Dialect) -> bool:
    """Whether the expiry learns what it deleted from ``DELETE ... RETURNING`` (PostgreSQL,
    MariaDB 10.0.5+). Elsewhere it selects which candidates are left, in the same transaction
    with the candidates locked: MySQL 8 has no ``DELETE ... RETURNING``, Oracle's needs OUT
    binds, and on SQLite (one local writer) the extra select is cheap (measured: ~8% of a
    batch) and keeps every statement the package runs there compilable for Oracle
    (``tests/test_oracle_compile_runtime.py``)."""
    dia = bind if isinstance(bind, Dialect) else bind.dialect
    return bool(dia.delete_returning) and dia.name in ("postgresql", "mysql", "mariadb")


def touch_connection_setup(
    name: str, lock_timeout_s: float, *, transaction_pooling: bool = False
) -> list[str]:
    """Session statements for a new connection of the touch pool (:mod:`dbmemory.touch`): bound
    every lock wait to ``lock_timeout_s`` seconds, so a touch never waits long for a running
    expiry batch. Oracle bounds the wait in the lock statement itself (``WAIT n``). Behind a
    transaction-mode pooler none (each transaction sets ``SET LOCAL lock_timeout`` from the
    touch engine's ``dbmemory_lock_timeout_ms`` execution option)."""
    if transaction_pooling:
        return []
    if name == "postgresql":
        return [f"SET lock_timeout = '{int(lock_timeout_s * 1000)}ms'"]
    if name in ("mysql", "mariadb"):
        return [f"SET SESSION innodb_lock_wait_timeout = {max(1, int(lock_timeout_s))}"]
    return []


def _isolation(conn: Connection) -> str | None:
    level = conn.get_execution_options().get("isolation_level")
    if level is None:
        level = getattr(conn.dialect, "_on_connect_isolation_level", None)
    return None if level is None else str(level).upper().replace("_", " ")


def is_autocommit(conn: Connection) -> bool:
    """Whether ``conn`` runs in ``AUTOCOMMIT`` mode (each statement commits on its own).

    Runs for every write and every SQLite ``BEGIN``: :func:`_isolation` spelled out with the
    common cases (no level set; the exact name) answered first."""
    level = conn.get_execution_options().get("isolation_level")
    if level is None:
        level = getattr(conn.dialect, "_on_connect_isolation_level", None)
        if level is None:
            return False
    if level == "AUTOCOMMIT":
        return True
    return str(level).upper().replace("_", " ") == "AUTOCOMMIT"


def batch_isolation(bind: Connection | Engine | Dialect) -> str:
    """The isolation level for a transaction dbmemory opens itself on a connection that is in
    AUTOCOMMIT mode: READ COMMITTED (every statement sees the latest committed rows), or
    ``SERIALIZABLE`` on SQLite (pysqlite knows no other name for a normal transaction)."""
    return "SERIALIZABLE" if _name(bind) == "sqlite" else "READ COMMITTED"


def snapshot_isolation(conn: Connection) -> bool:
    """Whether ``conn`` reads from one snapshot per transaction that a locking statement does
    not refresh: PostgreSQL (and Oracle) at REPEATABLE READ or SERIALIZABLE. There a
    transaction's later plain reads never see rows committed after its first statement, even
    after waiting for a lock. (MySQL/MariaDB DELETEs read the rows of their subqueries with
    locking reads, which see the latest rows, at any level; SQLite has one writer.)"""
    name = conn.dialect.name
    if name not in ("postgresql", "oracle"):
        return False
    level = _isolation(conn)
    if level is None and name == "postgresql":
        level = str(conn.get_isolation_level()).upper().replace("_", " ")
    return level in ("REPEATABLE READ", "SERIALIZABLE")


def lock_skip_locked(stmt: sa.Select[Any], bind: Connection | Engine) -> sa.Select[Any]:
    """``FOR UPDATE SKIP LOCKED`` where the backend has it (SQLite has no row locks)."""
    if bind.dialect.name == "sqlite":
        return stmt
    return stmt.with_for_update(skip_locked=True)


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


def _mysql_repeatable(conn: Connection) -> bool:
    level = conn.get_execution_options().get("isolation_level")
    if level is None:
        level = conn.engine.get_execution_options().get("isolation_level")
    if level is None:
        level = getattr(conn.dialect, "_on_connect_isolation_level", None) or getattr(
            conn.dialect, "default_isolation_level", None
        )
    return str(level or "REPEATABLE READ").upper().replace("_", " ") != "READ COMMITTED"


def current_read(stmt: sa.Select[Any], bind: Connection) -> sa.Select[Any]:
    """Make a read taken under the store lock see the latest committed rows.

    At MySQL/MariaDB's default REPEATABLE READ a plain ``SELECT`` answers from the transaction's
    snapshot, so after waiting for the store lock a writer would count files as they were
    before the previous writer committed, and caps could be exceeded by a race. There the read
    becomes a locking read (``LOCK IN SHARE MODE``), which sees the current rows; its next-key
    locks can make writers of neighbouring stores deadlock, which InnoDB reports by rolling back
    one caller's whole transaction (dbmemory then says so and invalidates the connection, never
    silently). Engines made by :func:`dbmemory.create_engine` run MySQL at READ COMMITTED, where
    the plain read is already current and no gap locks are taken. PostgreSQL and Oracle (READ
    COMMITTED) and SQLite (one writer) need nothing.
    """
    if bind.dialect.name in ("mysql", "mariadb") and _mysql_repeatable(bind):
        return stmt.with_for_update(read=True)
    return stmt


def insert_store_statement(bind: Connection, insert: sa.Insert) -> sa.Insert:
    """The statement that creates a store row on its first write.

    On MySQL/MariaDB an ``INSERT ... ON DUPLICATE KEY UPDATE`` (a no-op update): when several
    first writers of one new store race, the losers of a plain ``INSERT`` would each keep a
    shared lock on the winner's row after their duplicate-key error, then all ask for the
    exclusive lock (``FOR UPDATE``) and deadlock, and InnoDB would roll back a caller's whole
    transaction. The upsert takes the exclusive lock at once, so the losers simply queue.
    PostgreSQL, Oracle and SQLite make a second inserter wait for the first and then fail with
    a duplicate key inside the savepoint, which is harmless.
    """
    if bind.dialect.name in ("mysql", "mariadb"):
        upsert = mysql.insert(insert.table)
        return upsert.on_duplicate_key_update(store_key=upsert.inserted.store_key)
    return insert


def store_and_file_lock(bind: Connection) -> str | None:
    """How one statement may replace "lock the store row, then lock the file row" (one round
    trip less per edit and delete): ``"outer"``, ``"inner"`` or ``None`` (two statements).

    ``"outer"`` on MySQL/MariaDB (:data:`dbmemory.statements.LOCK_STORE_AND_FILE`): the outer
    join reads and locks the store row first, then the file row, and a locking read returns
    the latest committed rows at any isolation level. Also on SQLite: one writer at a time
    (``BEGIN IMMEDIATE``); ``FOR UPDATE`` is not even rendered.

    ``"inner"`` on PostgreSQL (:data:`dbmemory.statements.LOCK_STORE_WITH_FILE`, falling back
    to two statements when no row comes back): PostgreSQL refuses ``FOR UPDATE`` on the
    nullable side of an outer join, and ``FOR UPDATE OF`` the store row alone would return the
    file row from the statement's snapshot, taken *before* it waited for the store lock, so an
    edit would see the text as it was before the previous writer committed and lose its
    compare-and-set. Locking both rows of an inner join re-reads a changed file row at its
    latest version; rows are locked in ``FROM`` order, store row first.

    ``None`` elsewhere (Oracle: compile-only here, not measured).
    """
    name = bind.dialect.name
    if name in ("sqlite", "mysql", "mariadb"):
        return "outer"
    if name == "postgresql":
        return "inner"
    return None


def bump_store_on_write(bind: Connection) -> bool:
    """Whether every write modifies its store row: True on every backend since revision 0004,
    whose counters (``file_count``, ``total_chars``) every write moves
    (:data:`dbmemory.statements.ADJUST_STORE`, deltas 0 for a rename).

    That is also what keeps caps and shape at REPEATABLE READ / SERIALIZABLE on PostgreSQL and
    Oracle: a writer whose snapshot predates another writer's commit fails to lock the modified
    row (SQLSTATE 40001, ORA-08177) instead of checking from a stale snapshot. On MySQL/MariaDB
    the reads under the store lock see the latest rows anyway (:func:`current_read`,
    :func:`store_and_file_lock`); on Galera the modified store row makes cross-node writers of
    one store conflict at certification, so the store lock holds across nodes too.
    """
    return store_bump(bind) is not None


def store_bump(bind: Connection) -> str | None:
    """How a write moves its store row's counters (:func:`bump_store_on_write`): ``"cte"`` on
    PostgreSQL (a data-modifying ``WITH`` on the audit ``INSERT``, no extra round trip:
    :data:`dbmemory.statements.INSERT_AUDIT_ADJUST`), ``"statement"`` elsewhere
    (:data:`dbmemory.statements.ADJUST_STORE` before the audit insert: Oracle, MySQL/MariaDB
    and SQLite have no DML in ``WITH``)."""
    if bind.dialect.name == "postgresql":
        return "cte"
    return "statement"


def counted_file_update(bind: Connection) -> bool:
    """Whether an edit (and a one-file rename) changes the file row and moves its store row's
    counters in one multi-table ``UPDATE dbm_files, dbm_stores`` (MySQL/MariaDB:
    :data:`dbmemory.statements.UPDATE_FILE_COUNTED`, :data:`~dbmemory.statements.MOVE_FILE_COUNTED`)
    instead of :data:`~dbmemory.statements.UPDATE_FILE` then
    :data:`~dbmemory.statements.ADJUST_STORE`. Both rows are already locked (store row first)
    when it runs. PostgreSQL moves the counters with the audit insert instead
    (:func:`store_bump`); SQLite and Oracle have no multi-table ``UPDATE``."""
    return bind.dialect.name in ("mysql", "mariadb")


def delete_uncounts_first(bind: Connection) -> str | None:
    """How a one-file delete takes three statements: its first statement locks the store row
    and takes the file out of the counters; the audit event is then inserted from the file row
    (:data:`dbmemory.statements.INSERT_AUDIT_OF_FILE`) and the file deleted by its unique key
    (:data:`~dbmemory.statements.DELETE_FILE_AT`).

    ``"join"`` on MySQL/MariaDB (:data:`~dbmemory.statements.UNCOUNT_FILE_JOIN`, a multi-table
    ``UPDATE dbm_stores INNER JOIN dbm_files``: the store row is locked first, then the file
    row read with a shared lock, its latest committed ``char_count``, at READ COMMITTED and
    REPEATABLE READ). ``"subquery"`` on SQLite
    (:data:`~dbmemory.statements.UNCOUNT_FILE_SUBQUERY`: one writer at a time, so the
    subquery reads the current row). ``None`` elsewhere: PostgreSQL already deletes in three
    (the counters ride on the audit insert, :func:`store_bump`), and at READ COMMITTED its
    subquery would read the snapshot taken before the statement waited for the store lock;
    Oracle keeps the lock, delete, counters and audit statements."""
    name = bind.dialect.name
    if name in ("mysql", "mariadb"):
        return "join"
    if name == "sqlite":
        return "subquery"
    return None


def one_statement_store_moves(bind: Connection) -> bool:
    """Whether the expiry moves a batch's store counters with one statement for all its
    stores (:data:`dbmemory.statements.UNCOUNT_EXPIRED_JOIN`, a multi-table ``UPDATE`` joined
    to the per-store totals of what the batch deletes) rather than
    :data:`~dbmemory.statements.ADJUST_STORE` with one parameter set per store: True on
    MySQL/MariaDB, whose driver (PyMySQL) sends an ``UPDATE`` executemany as one round trip
    per row (~200 per 1,000-file batch of 5-file stores). False elsewhere: psycopg pipelines
    an executemany, SQLite runs it in process, and neither has a multi-table ``UPDATE``
    (Oracle: compile-only)."""
    return bind.dialect.name in ("mysql", "mariadb")


def guarded_create(bind: Connection) -> bool:
    """Whether a new file is created by the short path: the caps checked and counted while
    the store row is locked (:data:`dbmemory.statements.CLAIM_FILE_SLOT`), then an insert that
    checks the path is free in the same statement
    (:data:`dbmemory.statements.INSERT_FILE_IF_FREE`). True on PostgreSQL (``RETURNING``),
    MySQL/MariaDB and SQLite (the driver's ``lastrowid``); False on Oracle, where ``INSERT ...
    SELECT`` cannot return the new id and the CLOB would be bound in a select list: the
    long path (lock, facts, insert) runs there. Also False on MySQL/MariaDB at REPEATABLE
    READ (a host engine's default): the ``NOT EXISTS`` of an ``INSERT ... SELECT`` reads the
    transaction's snapshot there, not the latest rows (measured: two racing creates of ``/a``
    and ``/a/b.md`` both succeeded), so the long path's locking read (:func:`current_read`)
    runs instead."""
    name = bind.dialect.name
    if name in ("mysql", "mariadb"):
        return not _mysql_repeatable(bind)
    return name in ("postgresql", "sqlite")


def insert_returns_id(bind: Connection) -> bool:
    """Whether the short create path learns the new file's id from ``RETURNING`` (PostgreSQL)
    rather than from the driver's ``lastrowid`` (SQLite, MySQL/MariaDB)."""
    return bind.dialect.name == "postgresql"


def is_galera(bind: Connection) -> bool:
    """Whether ``bind``'s server is a Galera cluster node (MariaDB ``wsrep_on = ON``; MySQL has
    no such variable). Asked once per engine (``SHOW VARIABLES``, no transaction effect) and
    remembered on its dialect; False on other backends."""
    dia = bind.dialect
    known = getattr(dia, "_dbmemory_galera", None)
    if known is not None:
        return bool(known)
    if dia.name not in ("mysql", "mariadb"):
        return False
    row = bind.exec_driver_sql("SHOW VARIABLES LIKE 'wsrep_on'").first()
    known = row is not None and str(row[1]).upper() in ("ON", "1")
    dia._dbmemory_galera = known  # type: ignore[attr-defined]
    return known


@contextlib.contextmanager
def causal_reads(conn: Connection) -> Iterator[None]:
    """Within the block, reads and deletes on a Galera node first wait until the node has
    applied every write committed anywhere in the cluster before them (``wsrep_sync_wait`` bits
    1 and 2, READ and UPDATE/DELETE), so an expiry batch sees a touch or write committed on
    another node just before it; the session's own value is restored afterwards. Nothing on
    other backends."""
    if conn.dialect.name not in ("mysql", "mariadb") or not is_galera(conn):
        yield
        return
    _driver_execute(conn, "SET @dbm_sync_wait = @@session.wsrep_sync_wait")
    _driver_execute(conn, "SET SESSION wsrep_sync_wait = @@session.wsrep_sync_wait | 3")
    try:
        yield
    finally:
        if not conn.invalidated and not conn.closed:
            with contextlib.suppress(sa.exc.DBAPIError):
                _driver_execute(conn, "SET SESSION wsrep_sync_wait = @dbm_sync_wait")


# -- error translation, Oracle specifics, health checks: sibling modules, re-exported here ----
#
# (split out for size, STYLE rule 19; they import this module on use, never at import time)

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
