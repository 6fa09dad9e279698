"""Expiry: deleting files neither written nor read for N days.

The guarantee (every backend; :func:`expire_files`, :func:`expire_files_committing`,
``dbmemory expire`` and the ``dbm_expire_files`` procedures of ``sql/`` alike): a file that was
created, edited, renamed or read less than ``days`` days before the expiry's delete commits is
never deleted by it.

The rule (one source: :func:`dbmemory.store.statements.bulk.expiry_rule`, rendered into the procedures by
:mod:`dbmemory.sqlgen`): a file expires when it is not ``expiry_exempt`` (user profiles
are), its ``last_accessed_at`` (last write) is older than the cutoff, and no read of it at or
after the cutoff is recorded in ``dbm_file_reads``. The cutoff is ``now - days -
TOUCH_INTERVAL``: a read within :data:`~dbmemory.store.touches.TOUCH_INTERVAL` of the file's last touch
is not recorded (:mod:`dbmemory.store.touches`), so the interval is added. ``days`` is validated by
:func:`validate_days` (also used by the CLI; the procedures repeat the check).

Each batch of at most ``batch_size`` files (1,000: Oracle's IN-list limit) is one transaction:

1. lock the ``expiry`` row of ``dbm_job_locks`` exclusively: expiry runs serialise, and the
   batch waits for touches in flight (they hold the row shared) and holds new ones off until it
   commits, so a read is either recorded before the batch looks or finds its file gone;
2. select candidates by the rule (no lock), then lock their store rows ``FOR UPDATE SKIP
   LOCKED`` (the writers' lock order: store row first; a store a writer holds is being
   written, so its files are skipped until the next run);
3. delete the candidates of the locked stores **with the rule again** (``DELETE ... WHERE
   file_id IN (...) AND <rule>``), so nothing written or read since step 2 goes. Just before
   it, one ``expire`` audit event per file that still matches is inserted by the
   database itself (``INSERT ... SELECT`` with the same rule, :data:`~dbmemory.store.statements.bulk.INSERT_EXPIRED_AUDIT`: no per-row parameters); the two counts must agree, else the batch
   rolls back;
4. move each store's counters (``file_count``, ``total_chars``) by what was really deleted
   (``DELETE ... RETURNING`` where the backend has it, else the candidates that no longer
   exist; on MySQL/MariaDB one ``UPDATE ... JOIN`` of the per-store totals just before the
   delete, :data:`~dbmemory.store.statements.bulk.UNCOUNT_EXPIRED_JOIN`); forget the deleted files' rows in
   ``dbm_file_reads``.

On SQLite the batch is set-based (:func:`dbmemory.db.dialect.expiry.set_based_expiry`): the
candidates go into a temporary table once (``INSERT ... SELECT`` with the rule), candidates
changed in the batch's own transaction are dropped by the rule again, and the audit events,
the counters, the recorded reads and the delete (with the rule once more) read the ids from
that table; the audit, delete and candidate counts must agree, else the batch rolls back
(:mod:`dbmemory.store.statements.expiry_set`). The database's write lock, held from ``BEGIN
IMMEDIATE``, keeps every other writer out, so no store row needs locking there.

Afterwards recorded reads older than the cutoff whose file no longer exists (orphans, e.g.
after a store drop) are purged in chunks of 1,000.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.errors import concurrent_conflict, translate_db_error
from dbmemory.db.dialect.expiry import (
    batch_isolation,
    delete_returning,
    expiry_candidates,
    is_autocommit,
    job_lock,
    lock_expiry_candidates,
    lock_skip_locked,
    set_based_expiry,
    snapshot_isolation,
)
from dbmemory.db.dialect.galera import causal_reads
from dbmemory.db.dialect.outcome import note_audit_row
from dbmemory.db.dialect.writes import one_statement_store_moves
from dbmemory.db.schema import files
from dbmemory.errors import InvalidArgumentError, StorageError
from dbmemory.metrics import record_expiry
from dbmemory.store.statements import expiry_set as _set
from dbmemory.store.statements import reads as st
from dbmemory.store.statements.bulk import (
    DELETE_EXPIRED,
    DELETE_FILE_READS_BY_ID,
    INSERT_EXPIRED_AUDIT,
    SELECT_FILES_LEFT,
    SELECT_JOB_LOCK,
    UNCOUNT_EXPIRED_JOIN,
    count_expirable,
    id_chunks,
    lock_stores_by_id,
    select_expiry_candidates,
    select_orphan_reads,
)
from dbmemory.store.touches import EXPIRY_LOCK_INFO, TOUCH_INTERVAL
from dbmemory.store.units import resolved_transaction, write_unit

__all__ = [
    "MIN_EXPIRY_DAYS",
    "MAX_EXPIRY_DAYS",
    "validate_days",
    "expiry_cutoff",
    "count_expirable_files",
    "expire_files",
    "expire_files_committing",
]

MIN_EXPIRY_DAYS = TOUCH_INTERVAL / dt.timedelta(days=1)
"""The smallest ``days`` allowed: the touch interval (1 hour = 1/24 day). Shorter retention
would be shorter than the granularity at which reads are recorded."""

MAX_EXPIRY_DAYS = 100_000
"""The largest ``days`` allowed (about 270 years; the cutoff must stay a valid timestamp)."""

ORPHAN_CHUNK = 1000
"""Orphan ``dbm_file_reads`` rows purged per statement (Oracle's IN-list limit)."""

BATCH_MISMATCH = "expiry_batch_mismatch"
"""The code of the error for a batch whose audit, counters and delete disagreed (a concurrent
writer changed its rows between them); the batch was rolled back."""

_after_candidates: Callable[[Connection, list[int]], None] | None = None
"""Test hook: called inside each batch between the candidate selection and the delete."""


def validate_days(days: object) -> float:
    """Check an expiry's ``days`` (the API, the CLI and, in SQL, the procedures share the rule).

    Returns:
        ``days`` as a float.

    Raises:
        InvalidArgumentError: not a real number (a bool, a string, ``None``, NaN, infinity),
            smaller than :data:`MIN_EXPIRY_DAYS` or larger than :data:`MAX_EXPIRY_DAYS`; the
            message names the smallest value allowed.
    """
    smallest = f"{MIN_EXPIRY_DAYS:.6g}"
    rule = (
        f"days must be a number of at least {smallest} (1 hour, the touch interval: reads are "
        "recorded at most once an hour)"
    )
    if isinstance(days, bool) or not isinstance(days, (int, float)):
        raise InvalidArgumentError(f"{rule}, got {days!r}: pass e.g. days=30")
    if isinstance(days, int) and days > MAX_EXPIRY_DAYS:
        raise InvalidArgumentError(
            f"days={days!r} is too large: pass at most {MAX_EXPIRY_DAYS} (about 270 years)"
        )
    value = float(days)
    if value != value or value < MIN_EXPIRY_DAYS:  # NaN, or too small
        raise InvalidArgumentError(f"{rule}, got {days!r}: pass e.g. days=30")
    if value > MAX_EXPIRY_DAYS:  # infinity included
        raise InvalidArgumentError(
            f"days={days!r} is too large: pass at most {MAX_EXPIRY_DAYS} (about 270 years)"
        )
    return value


def expiry_cutoff(days: object, now: dt.datetime | None = None) -> dt.datetime:
    """The cutoff of an expiry run at ``now``: ``now - days - TOUCH_INTERVAL`` (UTC).

    Raises:
        InvalidArgumentError: bad ``days`` (:func:`validate_days`); ``now`` not a datetime.
    """
    value = validate_days(days)
    if now is None:
        now = utcnow()
    elif not isinstance(now, dt.datetime):
        raise InvalidArgumentError(
            f"now must be a datetime, got {type(now).__name__}: pass e.g. "
            "datetime.now(timezone.utc), or leave it out"
        )
    elif now.tzinfo is None:
        now = now.replace(tzinfo=dt.timezone.utc)
    try:
        return now - dt.timedelta(days=value) - TOUCH_INTERVAL
    except OverflowError:
        raise InvalidArgumentError(
            f"now={now.isoformat()} minus days={value!r} and the touch interval falls before the "
            "year 1: pass a later now or fewer days"
        ) from None


def _check_batch_size(batch_size: object) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= 1000:
        raise InvalidArgumentError(
            f"batch_size must be a whole number from 1 to 1000, got {batch_size!r}: "
            "pass e.g. batch_size=1000"
        )
    return batch_size


def _check_store_id(store_id: object) -> int | None:
    if store_id is None:
        return None
    if isinstance(store_id, bool) or not isinstance(store_id, int) or not 0 < store_id < 2**63:
        raise InvalidArgumentError(
            f"store_id must be a positive whole number or None, got {store_id!r}: "
            "look it up with resolve_store_id(...)"
        )
    return store_id


def _params(cutoff: dt.datetime, store_id: int | None) -> dict[str, Any]:
    params: dict[str, Any] = {"p_cutoff": cutoff}
    if store_id is not None:
        params["p_sid"] = store_id
    return params


def count_expirable_files(
    conn: Connection, *, days: float, store_id: int | None = None, now: dt.datetime | None = None
) -> int:
    """How many files :func:`expire_files` would delete now (a dry run with the same rule; no
    lock taken).

    Raises:
        InvalidArgumentError: bad ``days``, ``store_id`` or ``now``.
    """
    check_arguments(conn=conn)
    now = _v.check_now(now)
    cutoff = expiry_cutoff(days, now)
    store_id = _check_store_id(store_id)
    try:
        stmt = count_expirable(store_id is not None)
        return int(conn.execute(stmt, _params(cutoff, store_id)).scalar_one())
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "counting expirable files") from exc


def expire_files(
    conn: Connection,
    *,
    days: float,
    store_id: int | None = None,
    batch_size: int = 1000,
    now: dt.datetime | None = None,
) -> int:
    """Delete files neither written nor read for more than ``days`` days (the module's rule).

    Joins the caller's transaction and never commits it: the deletes, their audit events and
    the expiry lock (which makes reads that need a touch wait, at most
    :data:`~dbmemory.store.touches.TOUCH_LOCK_TIMEOUT` seconds, then fail with a retry text) last until
    the caller commits or rolls back; for a large clean-up use :func:`expire_files_committing`.
    On a connection in ``AUTOCOMMIT`` mode each batch runs in a transaction of its own (opened
    and committed here), so a batch is still all or nothing.

    Args:
        days: age threshold in days, fractions allowed (:data:`MIN_EXPIRY_DAYS` ..
            :data:`MAX_EXPIRY_DAYS`).
        store_id: limit to one store; ``None`` = every store.
        batch_size: files per batch (1..1000).
        now: the current time (tests; a naive datetime is taken as UTC); default: UTC now.

    Returns:
        The number of files deleted.

    Raises:
        InvalidArgumentError: bad ``days``, ``batch_size``, ``store_id`` or ``now`` (naive is
            taken as UTC); ``conn`` not a Connection; a
            PostgreSQL/Oracle connection at REPEATABLE READ or SERIALIZABLE (its snapshot,
            taken before the expiry lock, would hide reads recorded meanwhile).
        ConflictError: a lock wait timed out: retry.
    """
    check_arguments(conn=conn)
    now = _v.check_now(now)
    cutoff = expiry_cutoff(days, now)
    batch_size = _check_batch_size(batch_size)
    store_id = _check_store_id(store_id)
    try:
        if snapshot_isolation(conn):
            raise InvalidArgumentError(
                "expire_files needs a READ COMMITTED connection here: a REPEATABLE READ or "
                "SERIALIZABLE snapshot taken before the expiry lock would hide reads recorded "
                "meanwhile; use expire_files_committing(engine) or a READ COMMITTED connection"
            )
        return _measured(lambda: _run(lambda: _batch_transaction(conn), cutoff, store_id, batch_size))
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "expiring files") from exc


def expire_files_committing(
    engine: Engine,
    *,
    days: float,
    store_id: int | None = None,
    batch_size: int = 1000,
    on_batch: Callable[[int], None] | None = None,
    now: dt.datetime | None = None,
) -> int:
    """Like :func:`expire_files`, but opens its own READ COMMITTED transactions and **commits
    each batch** (and each chunk of the orphan purge).

    For operators and the ``dbmemory expire`` command. ``on_batch(n)`` is called after each
    committed batch that deleted ``n`` > 0 files (progress bars).

    Returns:
        The number of files deleted.

    Raises:
        InvalidArgumentError: bad ``days``, ``batch_size``, ``store_id`` or ``now``; ``engine``
            not an Engine; ``on_batch`` not callable.
        ConflictError: a lock wait timed out: retry (committed batches stay committed).
    """
    check_arguments(engine=engine)
    _v.check_callable(on_batch, "on_batch")
    now = _v.check_now(now)
    cutoff = expiry_cutoff(days, now)
    batch_size = _check_batch_size(batch_size)
    store_id = _check_store_id(store_id)

    @contextlib.contextmanager
    def own_transaction() -> Iterator[Connection]:
        isolation = batch_isolation(engine)
        with engine.connect().execution_options(isolation_level=isolation) as conn:
            with resolved_transaction(conn, "committing an expiry batch", check="run the expiry again"):
                yield conn

    try:
        return _measured(
            lambda: _run(own_transaction, cutoff, store_id, batch_size, on_batch, retry=True)
        )
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "expiring files", target=engine) from exc


def _measured(run: Callable[[], int]) -> int:
    """``run()``, recorded as one expiry run (:mod:`dbmemory.metrics`: outcome, files, time)."""
    started = time.perf_counter()
    try:
        deleted = run()
    except BaseException:
        record_expiry(ok=False, files=0, seconds=time.perf_counter() - started)
        raise
    record_expiry(ok=True, files=deleted, seconds=time.perf_counter() - started)
    return deleted


def _run(
    transaction: Callable[[], contextlib.AbstractContextManager[Connection]],
    cutoff: dt.datetime,
    store_id: int | None,
    batch_size: int,
    on_batch: Callable[[int], None] | None = None,
    retry: bool = False,
) -> int:
    total = 0
    seen: set[int] = set()
    while True:
        candidates, deleted, batch_size = _batch_retrying(
            transaction, cutoff, store_id, batch_size, retry
        )
        total += deleted
        if on_batch is not None and deleted:
            on_batch(deleted)
        fresh = not seen.issuperset(candidates)
        seen.update(candidates)
        # A candidate the delete kept (it was touched) is never chosen twice in a row from a
        # fresh snapshot; from an old snapshot (MySQL REPEATABLE READ) it could be: stop then.
        if len(candidates) < batch_size or not fresh:
            break
    while True:
        with transaction() as conn, causal_reads(conn):
            purged = _purge_orphan_reads(conn, cutoff)
        if purged < ORPHAN_CHUNK:
            return total


BATCH_RETRIES = 6
"""How many times :func:`expire_files_committing` retries a batch that lost to a concurrent
writer (halving the batch each time, down to one file) before it reports the conflict."""


def _batch_retrying(
    transaction: Callable[[], contextlib.AbstractContextManager[Connection]],
    cutoff: dt.datetime,
    store_id: int | None,
    batch_size: int,
    retry: bool,
) -> tuple[list[int], int, int]:
    """One committed batch: ``(candidate ids, files deleted, the batch size used)``. With
    ``retry`` (dbmemory's own transactions), a batch the database rolled back because a
    concurrent writer won (a Galera certification conflict or an InnoDB deadlock, error 1213;
    a PostgreSQL deadlock or serialisation failure; the batch's own consistency check) runs
    again, half as large, after a short pause, at most :data:`BATCH_RETRIES` times; nothing of
    a rolled-back batch stays, so a retry deletes and audits each file once."""
    attempt = 0
    while True:
        try:
            with transaction() as conn, causal_reads(conn):  # Galera: see other nodes' commits
                candidates, deleted = _expire_batch(conn, cutoff, store_id, batch_size)
            return candidates, deleted, batch_size
        except (sa.exc.DBAPIError, StorageError) as exc:
            if not retry or attempt >= BATCH_RETRIES or not _lost_to_a_writer(exc):
                raise
        attempt += 1
        batch_size = max(1, batch_size // 2)
        time.sleep(min(0.02 * 2**attempt, 0.5))


def _lost_to_a_writer(exc: BaseException) -> bool:
    if isinstance(exc, StorageError):
        return exc.code == BATCH_MISMATCH
    return concurrent_conflict(exc)


@contextlib.contextmanager
def _batch_transaction(conn: Connection) -> Iterator[Connection]:
    """The transaction one batch of :func:`expire_files` runs in: the caller's (joined, never
    committed here) or, on a connection in AUTOCOMMIT mode, one opened and committed here, so
    the lock, the selection, the delete and its audit events are one atomic unit."""
    if not is_autocommit(conn):
        with write_unit(conn, "expiring files"):  # a savepoint: a failure leaves it usable
            yield conn
        return
    if conn.in_transaction():  # SQLAlchemy's bookkeeping only: in AUTOCOMMIT nothing is pending
        conn.commit()
    conn.execution_options(isolation_level=batch_isolation(conn))
    try:
        with conn.begin():
            yield conn
    finally:
        conn.execution_options(isolation_level="AUTOCOMMIT")


def _lock_expiry(conn: Connection) -> None:
    result = conn.execute(job_lock(conn, SELECT_JOB_LOCK, shared=False))
    if result.returns_rows and result.first() is None:
        raise StorageError(
            "the expiry lock row is missing from this database: run 'dbmemory db upgrade' "
            "(or dbmemory.upgrade(engine))"
        )
    conn.info[EXPIRY_LOCK_INFO] = conn.get_transaction()


def _expire_batch(
    conn: Connection, cutoff: dt.datetime, store_id: int | None, limit: int
) -> tuple[list[int], int]:
    """One batch: ``(candidate ids, number of files deleted)``.

    Lock order as every writer's: store rows first, then file rows. The candidates are chosen
    without a lock, their store rows are then locked ``SKIP LOCKED`` (a store a writer holds
    is being written: its files wait for the next run), and only the candidates of the locked
    stores are deleted, so the batch never waits for a writer and no writer waits for a file
    row the batch holds while the batch waits for its store row (a deadlock). The counters of
    each locked store move by what was really deleted."""
    _lock_expiry(conn)
    params = _params(cutoff, store_id)
    if set_based_expiry(conn):
        return _expire_set(conn, params, store_id is not None, limit)
    select = expiry_candidates(conn, select_expiry_candidates(store_id is not None), limit)
    candidates = conn.execute(select, params).all()
    ids = [r.file_id for r in candidates]
    if not ids:
        return ids, 0
    keys = _lock_free_stores(conn, sorted({r.store_id for r in candidates}))
    mine = [r for r in candidates if r.store_id in keys]
    if _after_candidates is not None:
        _after_candidates(conn, ids)
    if not mine:
        return ids, 0
    mine_ids = [r.file_id for r in mine]
    now = utcnow()
    inserted = conn.execute(
        INSERT_EXPIRED_AUDIT,
        {"p_ids": mine_ids, "p_cutoff": cutoff, "p_action": "expire", "p_actor": "expiry", "p_now": now},
    )
    note_audit_row(conn, inserted, {"created_at": now, "action_name": "expire", "actor_name": "expiry"})
    audited = inserted.rowcount
    joined = one_statement_store_moves(conn)
    if joined:
        moved = conn.execute(
            UNCOUNT_EXPIRED_JOIN,
            {
                "p_ids": mine_ids,
                "p_sids": sorted({r.store_id for r in mine}),
                "p_cutoff": cutoff,
                "p_now": now,
            },
        ).rowcount
    gone = _delete_expired(conn, mine, mine_ids, cutoff)
    # the audit insert, the counter move and the delete read the same rows under the batch's
    # locks; a disagreement would be a bug: roll the batch back rather than commit it
    if audited != len(gone) or (joined and moved != len({g[1] for g in gone})):
        raise StorageError(
            f"the expiry batch audited {audited} files but deleted {len(gone)}: the batch was "
            "rolled back; run the expiry again",
            code=BATCH_MISMATCH,
        )
    if gone:
        conn.execute(DELETE_FILE_READS_BY_ID, {"p_ids": [g[0] for g in gone]})
        if not joined:
            _uncount_expired(conn, gone, now)
    return ids, len(gone)


def _expire_set(
    conn: Connection, params: dict[str, Any], by_store: bool, limit: int
) -> tuple[list[int], int]:
    """:func:`_expire_batch` set-based (:func:`dbmemory.db.dialect.expiry.set_based_expiry`):
    the candidates go into a temporary table once, and the audit events, the counters, the
    recorded reads and the delete read them there (:mod:`dbmemory.store.statements.expiry_set`).
    SQLite's write lock, held since ``BEGIN IMMEDIATE``, keeps every other writer out, so the
    candidates' stores need no lock; candidates changed in the batch's own transaction are
    dropped by the rule before anything is written (:data:`~dbmemory.store.statements.expiry_set.PRUNE_EXPIRY_IDS`)."""
    for ddl in _set.create_expiry_ids_sql(conn.dialect):
        conn.exec_driver_sql(ddl)
    conn.execute(_set.CLEAR_EXPIRY_IDS)
    chosen = conn.execute(_set.fill_expiry_ids(by_store, limit), params).rowcount
    if not chosen:
        return [], 0
    ids = list(conn.execute(_set.SELECT_EXPIRY_IDS).scalars())
    if _after_candidates is not None:
        _after_candidates(conn, ids)
    left = chosen - conn.execute(_set.PRUNE_EXPIRY_IDS, params).rowcount
    if not left:
        return ids, 0
    now = utcnow()
    audited = conn.execute(
        _set.INSERT_EXPIRED_AUDIT_SET,
        {**params, "p_action": "expire", "p_actor": "expiry", "p_now": now},
    ).rowcount
    note_audit_row(conn, None)
    conn.execute(_set.UNCOUNT_EXPIRED_SET, {"p_now": now})
    conn.execute(_set.DELETE_FILE_READS_SET)
    deleted = conn.execute(_set.DELETE_EXPIRED_SET, params).rowcount
    # the counters moved by the candidates left: exact only if the delete took them all
    if audited != left or deleted != left:
        raise StorageError(
            f"the expiry batch audited {audited} files and deleted {deleted} of {left}: the "
            "batch was rolled back; run the expiry again",
            code=BATCH_MISMATCH,
        )
    return ids, deleted


def _lock_free_stores(conn: Connection, store_ids: list[int]) -> dict[int, str]:
    """Lock the rows of ``store_ids`` that no writer holds (``SKIP LOCKED``, in IN lists of
    :func:`dbmemory.store.statements.bulk.id_chunks`); ``{store_id: store_key}`` of those
    locked."""
    keys: dict[int, str] = {}
    for chunk in id_chunks(store_ids):
        lock = lock_skip_locked(lock_stores_by_id(chunk), conn)
        keys.update((sid, key) for sid, key in conn.execute(lock))
    return keys


def _uncount_expired(
    conn: Connection, gone: list[tuple[int, int, str, int]], now: dt.datetime
) -> None:
    """Move the counters of each store by the files of ``gone`` (``(file_id, store_id, path,
    chars)`` rows) the batch deleted: one executemany of
    :data:`~dbmemory.store.statements.reads.ADJUST_STORE`, in store order."""
    deltas: dict[int, list[int]] = {}
    for _fid, sid, _path, chars in gone:
        d = deltas.setdefault(sid, [0, 0])
        d[0] -= 1
        d[1] -= chars
    conn.execute(
        st.ADJUST_STORE,
        [{"p_sid": sid, "p_df": d[0], "p_dc": d[1], "p_now": now} for sid, d in sorted(deltas.items())],
    )


def _delete_expired(
    conn: Connection, candidates: Sequence[Any], ids: list[int], cutoff: dt.datetime
) -> list[tuple[int, int, str, int]]:
    """Delete the candidates that still match the rule; return what was really deleted as
    ``(file id, store id, path, size)``, by file id."""
    params = {"p_ids": ids, "p_cutoff": cutoff}
    if delete_returning(conn):
        returning = DELETE_EXPIRED.returning(
            files.c.file_id, files.c.store_id, files.c.file_path, files.c.char_count
        )
        return sorted(tuple(r) for r in conn.execute(returning, params))
    conn.execute(DELETE_EXPIRED, params)
    left = set(conn.execute(SELECT_FILES_LEFT, {"p_ids": ids}).scalars())
    return sorted(
        (r.file_id, r.store_id, r.file_path, r.char_count) for r in candidates if r.file_id not in left
    )


def _purge_orphan_reads(conn: Connection, cutoff: dt.datetime) -> int:
    """Delete up to :data:`ORPHAN_CHUNK` recorded reads older than ``cutoff`` whose file no
    longer exists. Only rows older than the cutoff: they protect nothing, whereas a recent row
    might belong to a file a transaction has not committed yet."""
    select = lock_expiry_candidates(conn, select_orphan_reads(), ORPHAN_CHUNK)
    ids = list(conn.execute(select, {"p_cutoff": cutoff}).scalars())
    if ids:
        conn.execute(DELETE_FILE_READS_BY_ID, {"p_ids": ids})
    return len(ids)
