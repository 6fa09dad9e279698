"""Driver errors of every backend, recognised and translated into :mod:`dbmemory.errors` in one
place (:func:`translate_db_error`, used with ``raise ... from``): serialisation failures and
deadlocks (:func:`serialization_failure`), lost connections and transactions
(:func:`lost_transaction_reason`, :func:`transaction_lost`), commits whose outcome is unknown
(:func:`write_outcome_unknown`), lock timeouts, busy SQLite files and connection failures.

Recognition goes by the driver's error codes (MySQL/MariaDB, Oracle ``ORA-`` numbers,
PostgreSQL SQLSTATE) and, where a driver gives none, by the text of the exception chain. No
message built here contains SQL, a DSN, a table name or a driver code."""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.db.dialect.expiry import is_autocommit
from dbmemory.db.dialect.txn import driver_in_transaction
from dbmemory.errors import ConflictError, DbMemoryError, StorageError

__all__ = [
    "concurrent_conflict",
    "database_target",
    "statement_timeout",
    "serialization_failure",
    "lost_transaction_reason",
    "LOCK_REASONS",
    "write_outcome_unknown",
    "translate_db_error",
]


def serialization_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a serialisation failure of the caller's REPEATABLE READ/SERIALIZABLE
    transaction: PostgreSQL SQLSTATE 40001 ("could not serialize access"), Oracle ORA-08177.
    Retrying inside the same transaction fails again: only a new transaction can succeed.

    Not MySQL/MariaDB error 1213 (deadlock, also a Galera certification failure), although its
    SQLSTATE is 40001 too: the server has already rolled back the whole transaction, which
    :func:`lost_transaction_reason` and :func:`translate_db_error` report (a new transaction,
    e.g. dbmemory's next own transaction on an AUTOCOMMIT connection, can simply retry)."""
    if 1213 in _error_codes(exc):
        return False
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


def concurrent_conflict(exc: BaseException) -> bool:
    """Whether the database rolled back ``exc``'s transaction because a concurrent writer won:
    MySQL/MariaDB error 1213 (an InnoDB deadlock victim, or a Galera certification conflict or
    brute-force abort), PostgreSQL SQLSTATE 40P01 (deadlock) or a serialisation failure
    (:func:`serialization_failure`). A new transaction may simply retry."""
    if 1213 in _error_codes(exc):
        return True
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for candidate in (getattr(current, "orig", None), current):
            state = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
            if state == "40P01":
                return True
        current = current.__cause__ or current.__context__
    return serialization_failure(exc)


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


_MYSQL_LOST = {
    1213: "it was chosen as a deadlock victim",
    1305: "the database had already rolled it back",
    1153: "a statement was larger than the server's max_allowed_packet",
    1205: "a lock wait timed out (innodb_rollback_on_timeout)",
}

LOCK_REASONS = frozenset({_MYSQL_LOST[1213], _MYSQL_LOST[1205]})
"""The :func:`lost_transaction_reason` texts that mean another writer held a lock this write
needed (a deadlock victim, a lock wait timeout): a :class:`ConflictError` with cause ``locked``."""


def _chain_text(exc: BaseException) -> str:
    """The lower-cased messages of ``exc`` and the exceptions it was raised from or during."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(str(getattr(current, "orig", current) or current).lower())
        current = current.__cause__ or current.__context__
    return " | ".join(parts)


def lost_transaction_reason(exc: BaseException, conn: Connection) -> str | None:
    """Why the database rolled back the caller's *whole* transaction on its own, or ``None``
    when only the failed statement was undone (the savepoint can be rolled back).

    Called after a statement inside a savepoint failed. MySQL/MariaDB: deadlock (1213), a
    packet over ``max_allowed_packet`` (1153, the server then closes the connection), a lock
    wait timeout with ``innodb_rollback_on_timeout=ON`` (1205 followed by ``ROLLBACK TO
    SAVEPOINT`` failing with 1305). SQLite: disk full, interrupt, I/O errors -- detected by
    the DB-API connection having no transaction while SQLAlchemy has one. Every backend: a
    lost connection (the server rolls back what it had). PostgreSQL and Oracle otherwise roll
    back only the failed statement.
    """
    name = conn.dialect.name
    if name in ("mysql", "mariadb"):
        codes = _error_codes(exc)
        if 1305 in codes or 1213 in codes or 1153 in codes:
            for code in (1213, 1153, 1205, 1305):
                if code in codes:
                    return _MYSQL_LOST[code]
        if codes & {2006, 2013, 2014, 2055}:
            return "the connection to the database was lost"
    if getattr(exc, "connection_invalidated", False) or conn.invalidated:
        return "the connection to the database was lost"
    if name in ("mysql", "mariadb"):
        return None
    if name == "sqlite" and conn.in_transaction() and not is_autocommit(conn):
        if driver_in_transaction(conn) is False:
            text = _chain_text(exc)
            if "full" in text:
                return "the disk is full"
            if "interrupt" in text:
                return "the statement was interrupted"
            return "the database failed"
    return None


def write_outcome_unknown(exc: BaseException, conn: Connection) -> bool:
    """Whether, after ``exc`` inside a write's savepoint, nobody can tell if the write's
    statements were saved: MySQL/MariaDB error 1305 (the savepoint is gone) with no error in
    the chain saying the server rolled the transaction back (1213 deadlock or certification,
    1153 packet, 1205 with ``innodb_rollback_on_timeout``). A missing savepoint then means the
    transaction had ended before the write, and its statements may have been autocommitted."""
    if conn.dialect.name not in ("mysql", "mariadb"):
        return False
    codes = _error_codes(exc)
    return 1305 in codes and not codes & {1213, 1153, 1205}


def transaction_lost(exc: BaseException, bind: Connection | Engine) -> bool:
    """Whether ``exc`` means the server rolled back the caller's *whole* transaction (see
    :func:`lost_transaction_reason`)."""
    if isinstance(bind, Connection):
        return lost_transaction_reason(exc, bind) is not None
    if bind.dialect.name not in ("mysql", "mariadb"):
        return False
    return bool(_error_codes(exc) & {1213, 1305, 1153})


_CONFLICT_MARKERS = (
    "deadlock",
    "lock wait timeout",
    "could not obtain lock",
    "lock timeout",
    "canceling statement due to lock timeout",
    "could not serialize",
    "ora-00060",  # deadlock detected
    "ora-00054",  # resource busy (NOWAIT)
    "ora-30006",  # resource busy (WAIT timeout)
    "ora-08177",  # cannot serialize
)

_BUSY_MARKERS = ("database is locked", "database is busy", "database table is locked")


def _connect_failure(text: str, codes: set[int]) -> str | None:
    """A message naming the cause and remedy of a failure to connect, or ``None``."""
    if 1045 in codes or "password authentication failed" in text or "access denied for user" in text:
        return (
            "the database refused the user name or password in the URL: check the credentials "
            "(URL or DBMEMORY_URL) and that this user may connect from this host"
        )
    if ("role " in text and "does not exist" in text) or "ora-01017" in text:
        return (
            "the database user named in the URL does not exist (or its password is wrong): "
            "fix the user name in the URL or create the user"
        )
    if 1049 in codes or "unknown database" in text or (
        'database "' in text and "does not exist" in text
    ):
        return "the database named in the URL does not exist: create it or fix the URL"
    if 1044 in codes or ("permission denied for database" in text):
        return (
            "the database user in the URL may not use that database: grant it access or use "
            "another database"
        )
    if (
        "connection refused" in text
        or "can't connect to" in text
        or "could not connect to server" in text
        or "ora-12541" in text
    ):
        return (
            "nothing accepts connections at the host and port in the URL: check that the "
            "database server is running and the host and port are right"
        )
    if (
        "could not translate host name" in text
        or "name or service not known" in text
        or "nodename nor servname" in text
        or "unknown mysql server host" in text
        or "failed to resolve host" in text
    ):
        return "the host name in the URL cannot be resolved: check the host name"
    if "timeout expired" in text or "timed out" in text and "connect" in text:
        return (
            "the database server did not answer in time: check the host, port and network, "
            "then retry"
        )
    if "unable to open database file" in text:
        return (
            "the SQLite database file cannot be opened: check that its folder exists and is "
            "writable, or fix the path in the URL"
        )
    return None


_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "oracle": 1521, "mssql": 1433}


def database_target(bind: Connection | Engine | sa.URL | None) -> str | None:
    """The database ``bind`` connects to, for messages: ``host:port/database`` (the server's
    default port when the URL names none), or ``the SQLite file PATH`` / ``an in-memory SQLite
    database``. Never the user name, the password or the query string; ``None`` without a
    bind."""
    if bind is None:
        return None
    url = bind if isinstance(bind, sa.URL) else getattr(bind, "url", None)
    if url is None and isinstance(bind, Connection):
        url = bind.engine.url
    if url is None:
        return None
    backend = url.get_backend_name()
    if backend == "sqlite":
        name = url.database or ""
        if name in ("", ":memory:") or url.query.get("mode") == "memory":
            return "an in-memory SQLite database"
        return f"the SQLite file {name}"
    port = url.port or _DEFAULT_PORTS.get(backend)
    where = ",".join(_query_hosts(url, port)) or f"{url.host or 'localhost'}" + (f":{port}" if port else "")
    return where + (f"/{url.database}" if url.database else "")


def _query_hosts(url: sa.URL, default_port: int | None) -> list[str]:
    """The hosts a PostgreSQL URL names in its query (``?host=h1:5432&host=h2:5433``, libpq's
    ``?host=h1,h2&port=5432,5433``, a socket folder ``?host=/run/postgresql``), each as
    ``host:port``; empty when the query names none."""
    def values(key: str) -> list[str]:
        raw = url.query.get(key)
        items = raw if isinstance(raw, tuple) else (raw,) if raw else ()
        return [part.strip() for item in items for part in str(item).split(",") if part.strip()]

    hosts, ports = values("host") or values("hostaddr"), values("port")
    named = []
    for number, host in enumerate(hosts):
        if host.startswith("/"):
            named.append(f"{host} (socket)")
            continue
        name, colon, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
        if not colon:
            name = host
            port = ports[number] if number < len(ports) else ports[0] if len(ports) == 1 else ""
        port = port or (str(url.port or default_port) if (url.port or default_port) else "")
        named.append(f"{name}:{port}" if port else name)
    return named


_STATEMENT_LIMITS = {
    "postgresql": "statement_timeout",
    "mysql": "max_execution_time",
    "mariadb": "max_statement_time",
    "oracle": "the resource limit or call timeout",
}


def statement_timeout(exc: BaseException) -> str | None:
    """The name of the limit that stopped a statement, when ``exc`` says the database cancelled
    it for running too long: ``"statement_timeout"`` (PostgreSQL SQLSTATE 57014 "canceling
    statement due to statement timeout"), ``"max_statement_time"`` (MariaDB error 1969), ``"max_execution_time"`` (MySQL
    error 3024); ``None`` otherwise. Only that statement was undone: the transaction stays
    usable (after its savepoint is rolled back)."""
    codes = _error_codes(exc)
    if 1969 in codes:
        return "max_statement_time"
    if 3024 in codes:
        return "max_execution_time"
    text = _chain_text(exc)
    if "canceling statement due to statement timeout" in text:
        return "statement_timeout"
    if "max_statement_time exceeded" in text:
        return "max_statement_time"
    return None


_POOL_LIMIT = re.compile(r"limit of size (\d+) overflow (-?\d+) reached.*timeout ([\d.]+)")


def _pool_exhausted(exc: BaseException, action: str) -> StorageError:
    match = _POOL_LIMIT.search(str(exc))
    detail = (
        f" (pool_size={match.group(1)}, max_overflow={match.group(2)}, waited "
        f"pool_timeout={match.group(3)} s)"
        if match
        else ""
    )
    return StorageError(
        f"no database connection came free while {action}: every connection of the engine's "
        f"pool was in use{detail}; nothing was changed: retry in a moment, return idle "
        "connections to the pool, or raise pool_size / max_overflow / pool_timeout",
        code="pool_exhausted",
    )


def translate_db_error(
    exc: BaseException, action: str, *, target: Connection | Engine | sa.URL | None = None
) -> DbMemoryError:
    """Map a driver/SQLAlchemy exception to a dbmemory error without leaking its text.

    Args:
        exc: the exception raised by SQLAlchemy or the driver.
        action: what was being done, for the message, e.g. ``"writing /memories/a.md"``.

    Returns:
        An existing :class:`DbMemoryError` unchanged; a :class:`ConflictError` for lock
        timeouts and deadlocks (code ``conflict``: retry), for a serialisation failure
        (PostgreSQL SQLSTATE 40001, Oracle ORA-08177 at REPEATABLE READ/SERIALIZABLE: code
        ``serialization_failure``, roll back and retry the whole transaction) and for a
        busy SQLite database (code ``busy``); a :class:`ConflictError` with code
        ``transaction_rolled_back`` when the connection was lost (the server rolled back the
        transaction on it); a :class:`StorageError` naming the cause and remedy of a failure
        to connect (wrong password, unknown user or database, refused port, missing SQLite
        folder, read-only SQLite file) or of missing tables; otherwise a generic
        :class:`StorageError`. No SQL, URL or driver code appears in the message. The caller
        raises it ``from exc``. A statement the database cancelled at its time limit (code
        ``statement_timeout``) names the limit and says nothing was written; a Galera node cut
        off from its cluster's majority (error 1047, non-primary component) gives code
        ``no_majority``; an engine whose
        pool had no free connection in time gives code ``pool_exhausted``. With ``target`` (the
        engine, connection or URL in use), a failure to connect or to reach the database names
        it as :func:`database_target` does (host:port/database, never the password).
    """
    if isinstance(exc, DbMemoryError):
        return exc
    if isinstance(exc, sa.exc.TimeoutError):  # the engine's pool, not the server
        return _pool_exhausted(exc, action)
    limit = statement_timeout(exc)
    if limit is not None:
        return _timed_out(exc, action, limit)
    if isinstance(exc, sa.exc.PendingRollbackError):
        return ConflictError(
            f"{action} is not possible: an earlier failure made the database roll back the "
            "whole transaction on this connection (it was invalidated), so nothing of that "
            "transaction was saved: roll back, then redo the whole unit of work",
            code="transaction_rolled_back",
        )
    text = str(getattr(exc, "orig", exc) or exc).lower()
    codes = _error_codes(exc)
    if isinstance(exc, sa.exc.IntegrityError) and any(
        marker in text for marker in ("unique", "duplicate", "ora-00001")
    ):  # a concurrent writer created the same store or file first
        return ConflictError(f"{action} collided with a concurrent change: retry the operation")
    if any(marker in text for marker in _BUSY_MARKERS):
        return ConflictError(
            f"the database is busy: another connection holds its write lock and did not "
            f"release it in time while {action}; nothing was changed: retry in a moment",
            code="busy",
        )
    if 1213 in codes:  # InnoDB deadlock victim, or a Galera certification failure at COMMIT
        return ConflictError(
            f"{action} conflicted with a concurrent writer (a deadlock, or on a Galera cluster "
            "a write to the same store committed first on another node) and the database "
            "rolled back the whole transaction; nothing of it was saved: retry the operation",
            cause="locked",
        )
    if serialization_failure(exc):  # PostgreSQL 40001, Oracle ORA-08177: a snapshot, not a lock
        return ConflictError(
            f"{action} was refused: another writer committed a change to the same rows after "
            "this transaction took its snapshot (REPEATABLE READ or SERIALIZABLE isolation), "
            "so it could not be checked against what is committed. Nothing was written. Roll "
            "back and retry the whole transaction: retrying inside the same transaction fails "
            "again",
            code="serialization_failure",
        )
    if any(marker in text for marker in _CONFLICT_MARKERS) or codes & {1205, 1213}:
        return ConflictError(
            f"{action} waited for another writer's lock and gave up; nothing was changed: "
            "retry the operation",
            cause="locked",
        )
    if "readonly database" in text or "read-only" in text and "sqlite" in type(
        getattr(exc, "orig", exc)
    ).__module__:
        return StorageError(
            "the SQLite database file is read-only (file permissions, a read-only mount or "
            "mode=ro in the URL): make the file and its folder writable, or open another file",
            code="read_only",
        )
    if any(
        marker in text
        for marker in ("no such table: dbm_", "ora-00942", "(1146,")
    ) or ('relation "dbm_' in text and "does not exist" in text):
        return StorageError(
            "dbmemory's tables are missing in this database: run 'dbmemory db upgrade' "
            "(or dbmemory.upgrade(engine)) first"
        )
    if 1047 in codes and "wsrep" in text:  # MariaDB Galera: the node lost its cluster's majority
        return StorageError(
            f"the database node refused {action}: it is cut off from the majority of its Galera "
            "cluster (a non-primary component) and accepts no reads or writes until it rejoins; "
            "nothing was changed: retry later, or connect to a node of the majority",
            code="no_majority",
        )
    where = database_target(target)
    at = f" (database: {where})" if where else ""
    connect = _connect_failure(text, codes)
    if connect is not None:
        if where and "," in where.partition("/")[0]:  # several hosts: none of them answered
            connect = connect.replace("at the host and port in the URL", "at any host and port in the URL")
        return StorageError(connect + at, code="connect_failed")
    if getattr(exc, "connection_invalidated", False):
        return ConflictError(
            f"the connection to the database was lost while {action}; the database rolled "
            "back the whole transaction on it, including every earlier change in it: "
            "retry the whole unit of work",
            code="transaction_rolled_back",
        )
    if isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)):
        return StorageError(
            f"the memory store could not be reached while {action}{at}: retry later"
        )
    return StorageError(f"the memory store failed while {action}")


def _timed_out(exc: BaseException, action: str, limit: str) -> StorageError:
    """The error for a statement the database cancelled at ``limit`` (see
    :func:`statement_timeout`)."""
    what = f"the database's statement time limit ({limit})"
    return StorageError(
        f"{action} timed out: {what} stopped it before it finished; nothing was written: "
        f"retry in a moment, or raise {limit} for this connection",
        code="statement_timeout",
    )
