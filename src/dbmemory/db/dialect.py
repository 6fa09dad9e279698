"""Every difference between the supported databases, in one module.

Nothing else in dbmemory branches on the dialect name. What lives here:

* column types pinned per backend (the file body is ``CLOB`` on Oracle and ``LONGTEXT`` on
  MySQL/MariaDB; timestamps keep fractions and are stored as UTC everywhere);
* engine set-up for SQLite (WAL, busy timeout, ``BEGIN IMMEDIATE`` so a read-then-write never
  fails with "database is locked");
* the best-effort touch strategy (inline on SQLite, a background connection elsewhere);
* translation of driver errors into :mod:`dbmemory.errors` (one place, ``raise ... from``).

Facts behind each choice are in the project's DATABASES.md.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, oracle, postgresql
from sqlalchemy.engine import Connection, Dialect, Engine

from dbmemory.errors import ConflictError, DbMemoryError, StorageError

__all__ = [
    "UtcDateTime",
    "BodyText",
    "PathText",
    "big_id",
    "utcnow",
    "configure_engine",
    "is_sqlite",
    "is_memory_sqlite",
    "touch_inline",
    "lock_skip_locked",
    "current_read",
    "insert_store_statement",
    "store_and_file_lock",
    "bump_store_on_write",
    "store_bump",
    "serialization_failure",
    "engine_defaults",
    "transaction_lost",
    "translate_db_error",
    "oracle19_dialect",
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


def configure_engine(engine: Engine, *, busy_timeout_ms: int = 30_000) -> Engine:
    """Apply dbmemory's connection set-up to ``engine`` and return it.

    SQLite only (other backends need nothing): turns off pysqlite's own transaction handling,
    issues ``BEGIN IMMEDIATE`` at the start of every transaction so the write lock is taken before
    the first read (SQLite ignores ``SELECT ... FOR UPDATE``), enables WAL for file databases, a
    busy timeout of ``busy_timeout_ms`` milliseconds, and foreign keys. This is SQLAlchemy's
    documented recipe for serialisable SQLite transactions.

    Idempotent: calling it twice on one engine installs the listeners once.
    """
    if engine.dialect.name != "sqlite" or getattr(engine, "_dbmemory_configured", False):
        return engine

    memory = is_memory_sqlite(engine)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if not memory:
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # straight on the DB-API connection: Connection.exec_driver_sql costs ~15-25 µs more
        # per transaction (statement events, result set-up) for a statement with no result
        dbapi_conn = conn.connection.driver_connection
        try:
            dbapi_conn.execute("BEGIN IMMEDIATE")
        except Exception as exc:  # wrapped as exec_driver_sql would ("database is locked", ...)
            dbapi = conn.dialect.loaded_dbapi
            if not isinstance(exc, dbapi.Error):
                raise
            raise sa.exc.DBAPIError.instance(
                "BEGIN IMMEDIATE", (), exc, dbapi.Error, dialect=conn.dialect
            ) from exc

    engine._dbmemory_configured = True  # type: ignore[attr-defined]
    return engine


def touch_inline(conn: Connection) -> bool:
    """Whether a read's touch should run inline in the caller's transaction.

    True on SQLite: the caller's transaction already holds the single write lock (``BEGIN
    IMMEDIATE``), so an inline ``UPDATE`` takes no new lock and a second connection would only
    wait for the caller. Elsewhere the touch runs on its own connection in the background with
    ``SKIP LOCKED`` semantics, so the caller's transaction never holds a lock because of a read.
    """
    return conn.dialect.name == "sqlite"


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
    """Whether every write must also modify its store row
    (:data:`dbmemory.statements.BUMP_STORE`) for caps and shape to hold at every isolation
    level.

    True on PostgreSQL and Oracle: at REPEATABLE READ / SERIALIZABLE a writer reads from a
    snapshot taken at its transaction's first statement, so after the store lock is granted
    its count of files and characters (and its file/directory shape check) can miss another
    writer's commit. When every write modifies the store row, locking that row fails with a
    serialisation failure (PostgreSQL SQLSTATE 40001, Oracle ORA-08177) instead, and the
    caller is told to retry the whole transaction. Locking a row that was only locked, not
    changed, would not fail. At READ COMMITTED the bump changes nothing but costs one statement.

    False on MySQL/MariaDB, whose reads under the store lock are locking reads that see the
    latest committed rows (:func:`current_read`, :func:`store_and_file_lock`), and on SQLite
    (one writer at a time, ``BEGIN IMMEDIATE``).
    """
    return store_bump(bind) is not None


def store_bump(bind: Connection) -> str | None:
    """How a write modifies its store row (see :func:`bump_store_on_write`): ``"cte"`` on
    PostgreSQL (a data-modifying ``WITH`` on the audit ``INSERT``, no extra round trip:
    :data:`dbmemory.statements.INSERT_AUDIT_BUMP`), ``"statement"`` on Oracle (no DML in
    ``WITH``: :data:`dbmemory.statements.BUMP_STORE` before the audit insert), ``None`` on
    MySQL/MariaDB and SQLite."""
    name = bind.dialect.name
    if name == "postgresql":
        return "cte"
    if name == "oracle":
        return "statement"
    return None


def serialization_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a serialisation failure of the caller's REPEATABLE READ/SERIALIZABLE
    transaction: PostgreSQL SQLSTATE 40001 ("could not serialize access"), Oracle ORA-08177.
    Retrying inside the same transaction fails again: only a new transaction can succeed."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for candidate in (getattr(current, "orig", None), current):
            if candidate is None:
                continue
            state = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
            if state == "40001":
                return True
            text = str(candidate).lower()
            if "could not serialize access" in text or "ora-08177" in text:
                return True
        current = current.__cause__ or current.__context__
    return False


def _error_codes(exc: BaseException) -> set[int]:
    codes: set[int] = set()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        orig = getattr(current, "orig", None)
        for candidate in (orig, current):
            args = getattr(candidate, "args", ())
            if args and isinstance(args[0], int):
                codes.add(args[0])
        current = current.__cause__ or current.__context__
    return codes


def transaction_lost(exc: BaseException, bind: Connection | Engine) -> bool:
    """Whether ``exc`` means the server rolled back the caller's *whole* transaction.

    MySQL/MariaDB resolve a deadlock by rolling back the victim's entire transaction (error
    1213), after which ``ROLLBACK TO SAVEPOINT`` fails (1305). PostgreSQL and Oracle roll back
    only the failed statement, which the savepoint undoes.
    """
    if bind.dialect.name not in ("mysql", "mariadb"):
        return False
    return bool(_error_codes(exc) & {1213, 1305})


_CONFLICT_MARKERS = (
    "deadlock",
    "lock wait timeout",
    "could not obtain lock",
    "lock timeout",
    "could not serialize",
    "database is locked",
    "ora-00060",  # deadlock detected
    "ora-00054",  # resource busy (NOWAIT)
    "ora-30006",  # resource busy (WAIT timeout)
    "ora-08177",  # cannot serialize
)


def translate_db_error(exc: BaseException, action: str) -> DbMemoryError:
    """Map a driver/SQLAlchemy exception to a dbmemory error without leaking its text.

    Args:
        exc: the exception raised by SQLAlchemy or the driver.
        action: what was being done, for the message, e.g. ``"writing /memories/a.md"``.

    Returns:
        A :class:`ConflictError` for lock timeouts, deadlocks and serialisation failures (the
        caller may retry), an existing :class:`DbMemoryError` unchanged, otherwise a
        :class:`StorageError`. The caller raises it ``from exc``.
    """
    if isinstance(exc, DbMemoryError):
        return exc
    text = str(getattr(exc, "orig", exc) or exc).lower()
    if isinstance(exc, sa.exc.IntegrityError) and any(
        marker in text for marker in ("unique", "duplicate", "ora-00001")
    ):  # a concurrent writer created the same store or file first
        return ConflictError(f"{action} collided with a concurrent change: retry the operation")
    if any(marker in text for marker in _CONFLICT_MARKERS):
        return ConflictError(
            f"{action} waited for another writer and gave up: retry the operation"
        )
    if any(
        marker in text
        for marker in ("no such table: dbm_", "ora-00942", "(1146,")
    ) or ('relation "dbm_' in text and "does not exist" in text):
        return StorageError(
            "dbmemory's tables are missing in this database: run 'dbmemory db upgrade' "
            "(or dbmemory.upgrade(engine)) first"
        )
    if "unknown database" in text or ('database "' in text and "does not exist" in text):
        return StorageError(
            "the database named in the URL does not exist: create it or fix the URL"
        )
    if isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)) or getattr(
        exc, "connection_invalidated", False
    ):
        return StorageError(f"the memory store could not be reached while {action}: retry later")
    return StorageError(f"the memory store failed while {action}")


def oracle19_dialect() -> Dialect:
    """An unconnected Oracle dialect configured as a 19c server, for compile-only checks.

    An unconnected ``oracle.dialect()`` assumes 23ai (native BOOLEAN and JSON); dbmemory
    supports 19c, so statements are compiled against 19c's features.
    """
    dialect = oracle.dialect()
    dialect.server_version_info = (19, 0)
    dialect.supports_native_boolean = False
    dialect._supports_oracle_json = False  # type: ignore[attr-defined]
    return dialect
