"""Reads' touches and the expiry per backend: the upsert of ``dbm_file_reads``, the job
lock, the batch's candidate select and locks, the isolation a batch runs at, what a delete
returns. Part of :mod:`dbmemory.db.dialect`, which re-exports every name here; split out for
size (STYLE rule 19).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, oracle, postgresql
from sqlalchemy.engine import Connection, Dialect, Engine



def _dialect() -> Any:
    """:mod:`dbmemory.db.dialect`, imported on use: it imports this module while it loads."""
    from dbmemory.db import dialect

    return dialect


def file_read_upsert(bind: Connection | Engine | Dialect) -> sa.Executable:
    """The statement recording a read of ``:p_fid`` at ``:p_now`` in ``dbm_file_reads`` (insert,
    or move ``read_at`` forward, never back), for the touch connection of a server backend.

    PostgreSQL ``INSERT ... ON CONFLICT DO UPDATE``; MySQL/MariaDB ``INSERT ... ON DUPLICATE KEY
    UPDATE`` with ``GREATEST``; Oracle ``MERGE`` (two sessions merging one new key can still
    raise ORA-00001: the caller retries once). SQLite records reads inline with the portable
    :data:`dbmemory.statements.INSERT_FILE_READ` / ``UPDATE_FILE_READ`` pair instead.
    """
    from dbmemory.db.schema import file_reads

    name = _dialect()._name(bind)
    fid = sa.bindparam("p_fid", type_=sa.BigInteger())
    now = sa.bindparam("p_now", type_=_dialect().UtcDateTime())
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

    if _dialect()._name(bind) == "oracle":
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
    name = _dialect()._name(bind)
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
    name = _dialect()._name(bind)
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
    return "SERIALIZABLE" if _dialect()._name(bind) == "sqlite" else "READ COMMITTED"


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
