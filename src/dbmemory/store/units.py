"""One write unit: how every dbmemory mutator runs its statements on the caller's connection.

:func:`write_unit` is the only place that decides how a write joins (or does not join) the
caller's transaction. Every mutator of the store layer (:mod:`dbmemory.store.files`,
:mod:`dbmemory.store.moves`, :mod:`dbmemory.store.agents`, :mod:`dbmemory.store.drop`,
:mod:`dbmemory.store.expiry`) and of :mod:`dbmemory.items` runs inside it:

* **In the caller's transaction** (the usual case): a savepoint around the write, so a statement
  that fails leaves the caller's transaction usable (PostgreSQL would otherwise abort it).
  When the database has rolled back the caller's *whole* transaction on its own (MySQL/MariaDB
  deadlock victim, packet over ``max_allowed_packet``, ``innodb_rollback_on_timeout``; SQLite
  disk full or interrupt; a lost connection), the savepoint is gone with it: the connection is
  invalidated, so the caller's later statements and its ``COMMIT`` fail instead of committing
  half a unit of work, and a :class:`~dbmemory.errors.ConflictError` with code
  ``transaction_rolled_back`` says that the whole transaction was rolled back.
* **On an AUTOCOMMIT connection** (``conn.execution_options(isolation_level="AUTOCOMMIT")``):
  the write opens a real transaction of its own around the one command (SQLite ``BEGIN
  IMMEDIATE``, PostgreSQL ``BEGIN``, MySQL ``START TRANSACTION``, Oracle: driver autocommit off)
  and commits it when the command succeeds, or rolls it back when it fails: each command is
  atomic and durable on its own, and the connection stays usable and in AUTOCOMMIT. If the
  caller opened a real transaction by hand on that connection (as the server says:
  :func:`dbmemory.db.dialect.txn.server_in_transaction`, not a reply's stale status flag), the
  write joins it (savepoint). A write whose savepoint vanished with no sign of a rollback
  may have been saved: :func:`outcome_unknown` says so, never "nothing was changed".

Nested units (a mutator calling another) become savepoints of the outer unit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.db.dialect.errors import (
    LOCK_REASONS,
    lost_transaction_reason,
    translate_db_error,
    write_outcome_unknown,
)
from dbmemory.db.dialect.expiry import is_autocommit
from dbmemory.db.dialect.outcome import (
    WROTE,
    commit_outcome_wait_s,
    commit_token,
    forget_audit_row,
    resolve_commit,
)
from dbmemory.db.dialect.txn import (
    begin_own_transaction,
    end_own_transaction,
    join_driver_transaction,
    server_in_transaction,
)
from dbmemory.db.engine import connect
from dbmemory.errors import (
    ConflictError,
    DbMemoryError,
    StorageError,
)

__all__ = [
    "write_unit",
    "transaction_rolled_back",
    "outcome_unknown",
    "commit_failed",
    "committing",
    "mark_single_unit",
    "clear_single_unit",
    "OUTCOME_UNKNOWN",
    "run_statement",
    "resolved_commit",
    "resolved_transaction",
    "NOT_SAVED_AFTER_CHECK",
]

NOT_SAVED_AFTER_CHECK = "nothing was saved"
"""What a lost ``COMMIT`` reply's answer says when dbmemory found out that the database rolled
the transaction back (:func:`resolved_commit`)."""

_OUTCOME = "dbmemory_commit_outcome"
"""Attribute :func:`resolved_commit` sets on the error of a lost ``COMMIT``: ``"not_saved"``,
or None (no answer in time); :func:`commit_failed` words the error from it."""

OUTCOME_UNKNOWN = "outcome_unknown"
""":class:`ConflictError` code of a write whose outcome nobody can tell: the database may have
saved it (:func:`outcome_unknown`)."""

_OWN = "dbmemory_own_transaction"
"""``conn.info`` key: set while :func:`write_unit` runs its own transaction on the connection."""

_SINGLE = "dbmemory_single_unit"
"""``conn.info`` key: the root transaction dbmemory opened for exactly one unit of work (a
turn's MEMORY tool call, :func:`mark_single_unit`)."""


def mark_single_unit(conn: Connection, transaction: Any) -> None:
    """Say that ``transaction`` (a root transaction dbmemory just began on ``conn``) holds one
    unit of work only: its first write unit then runs without a savepoint, and a failure in it
    rolls the whole transaction back (there is nothing else in it to keep). Two statements
    less per write (SAVEPOINT, RELEASE). The mark is used once; later or nested units take
    savepoints as usual."""
    conn.info[_SINGLE] = transaction


def clear_single_unit(conn: Connection) -> None:
    """Forget an unused :func:`mark_single_unit` mark (the call made no write)."""
    if not conn.invalidated:
        conn.info.pop(_SINGLE, None)


def transaction_rolled_back(action: str, reason: str) -> ConflictError:
    """The error for a transaction the database rolled back as a whole on its own."""
    return ConflictError(
        f"{action} failed because {reason}, and the database rolled back the whole "
        "transaction: this change and every earlier change made in the same transaction were "
        "NOT saved. Nothing more can be committed in it (the connection was invalidated): "
        "roll back, then redo the whole unit of work from its start",
        code="transaction_rolled_back",
    )


def outcome_unknown(action: str, *, invalidated: bool = True) -> ConflictError:
    """The error for a write whose outcome cannot be known: its savepoint was gone when it was
    released or rolled back, without any sign that the database rolled the transaction back
    (:func:`dbmemory.db.dialect.errors.write_outcome_unknown`), so its statements may have been saved
    (autocommitted) or not. Never "nothing was changed": the caller must look first."""
    return ConflictError(
        f"{action} may or may not have been saved: the database had already ended the "
        "transaction this change ran in (its savepoint was gone), so the database may have "
        "saved this change: view the file before retrying"
        + (
            ". Nothing more can be committed in that transaction (the connection was "
            "invalidated): roll back first"
            if invalidated
            else ""
        ),
        code=OUTCOME_UNKNOWN,
    )


def commit_failed(exc: BaseException, action: str, *, check: str = "view the file") -> DbMemoryError:
    """The error for a ``COMMIT`` dbmemory sent that failed.

    When the connection was lost while the ``COMMIT`` ran (SQLAlchemy marks the error
    ``connection_invalidated``: the server closed it, the network dropped, the session was
    killed), the server may have committed before the reply was lost: the error says the change
    may or may not have been saved (code ``outcome_unknown``), never "nothing was saved", so
    nobody redoes a non-idempotent write (an ``insert``) that is already there. Any other
    failure of a ``COMMIT`` (a serialization failure, a deferred constraint, a full disk) means
    the server did not commit: :func:`dbmemory.db.dialect.errors.translate_db_error`.

    Args:
        exc: what the ``COMMIT`` raised.
        action: what was being committed, for the message, e.g. ``"committing a memory change"``.
        check: what the caller should look at before retrying, e.g. ``"view the file"``.
    """
    if getattr(exc, "connection_invalidated", False):
        looked = hasattr(exc, _OUTCOME)
        if looked and getattr(exc, _OUTCOME) == "not_saved":
            return ConflictError(
                f"{action}: the connection to the database was lost while committing; dbmemory "
                f"asked the database on a new connection and {NOT_SAVED_AFTER_CHECK} (the "
                "transaction was rolled back): retry the command",
                code="commit_not_saved",
            )
        return ConflictError(
            f"{action}: the connection to the database was lost while committing, so the "
            f"change may or may not have been saved (the database may have saved it"
            + ("; dbmemory could not find out in time" if looked else "")
            + f"): {check} before retrying",
            code=OUTCOME_UNKNOWN,
        )
    if isinstance(exc, sa.exc.SQLAlchemyError):
        return translate_db_error(exc, action)
    return StorageError(f"{action} failed: the database refused the commit")


def resolved_commit(conn: Connection, commit: Callable[[], Any]) -> None:
    """Run ``commit()``, the ``COMMIT`` of a transaction dbmemory owns on ``conn``, and resolve
    its outcome when the connection is lost while it runs.

    Just before the ``COMMIT``, the transaction's token is taken
    (:func:`dbmemory.db.dialect.outcome.commit_token`: PostgreSQL's transaction id, one short
    statement; the id of an audit row the transaction wrote on MariaDB/MySQL; the LTXID under
    Oracle Transaction Guard). When the ``COMMIT`` fails because the connection was lost, dbmemory
    asks the database on new connections of the same engine, for at most the engine's bound
    (:func:`dbmemory.db.dialect.outcome.commit_outcome_wait_s`, default 10 s):

    * committed: returns normally (the change is saved; the caller answers as on success);
    * rolled back: the error is re-raised marked "not saved" (:func:`commit_failed` then says
      nothing was saved: retry);
    * no answer in time, or no token: re-raised unmarked or marked unknown
      (:func:`commit_failed` says it may or may not have been saved).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: what ``commit()`` raised, unless it was resolved as saved.
    """
    try:
        token = commit_token(conn)
    except sa.exc.SQLAlchemyError as exc:
        if getattr(exc, "connection_invalidated", False):
            setattr(exc, _OUTCOME, "not_saved")  # lost before the COMMIT was sent: rolled back
        forget_audit_row(conn)
        raise
    try:
        commit()
    except sa.exc.SQLAlchemyError as exc:
        if token is None or not getattr(exc, "connection_invalidated", False):
            raise
        outcome = resolve_commit(conn.engine, token, commit_outcome_wait_s(conn))
        if outcome == "saved":
            return
        setattr(exc, _OUTCOME, outcome)
        raise
    finally:
        forget_audit_row(conn)


@contextlib.contextmanager
def resolved_transaction(conn: Connection, action: str, *, check: str = "look again") -> Iterator[Connection]:
    """A transaction of dbmemory's own on ``conn`` (a connection the job opened itself, not in
    AUTOCOMMIT): committed when the block ends (:func:`resolved_commit`: a lost ``COMMIT``
    reply is looked up), rolled back when it raises (the exception propagates).

    Raises:
        ConflictError / StorageError: the ``COMMIT`` failed (:func:`commit_failed`: code
            ``commit_not_saved`` when the lost ``COMMIT`` was rolled back, ``outcome_unknown``
            when nobody could tell in time).
    """
    transaction = conn.begin()
    forget_audit_row(conn)
    try:
        yield conn
    except BaseException:
        if transaction.is_active:
            transaction.rollback()
        raise
    if not transaction.is_active:
        return
    try:
        resolved_commit(conn, transaction.commit)
    except sa.exc.SQLAlchemyError as exc:
        try:
            transaction.rollback()
        except Exception:  # the connection may be gone; the outcome is in the error
            pass
        raise commit_failed(exc, action, check=check) from exc


@contextlib.contextmanager
def committing(
    engine: sa.Engine, action: str, *, check: str = "view the file", single_unit: bool = False
) -> Iterator[Connection]:
    """A transaction of dbmemory's own on a new connection of ``engine`` (an adapter's one
    command: MCP, the Anthropic SDK tool, the LangGraph store): committed when the block ends,
    rolled back when it raises. A block that met a lost connection (the connection is
    invalidated when it ends) has had its failure reported already, as the MEMORY tool's
    answer: nothing is committed then.

    Args:
        single_unit: the block is one unit of work (one MEMORY command): its first write runs
            without a savepoint (:func:`mark_single_unit`).

    Yields:
        The connection, in its transaction.

    Raises:
        StorageError: the engine cannot connect (code ``connect_failed``, naming the database)
            or its pool had no free connection in time (code ``pool_exhausted``).
        ConflictError / StorageError: the ``COMMIT`` failed (:func:`commit_failed`: code
            ``outcome_unknown`` when the connection was lost while it ran).
        Whatever the block raised, after the rollback; a raw SQLAlchemy error from the block
            (a read) translated by :func:`~dbmemory.db.dialect.errors.translate_db_error`.
    """
    with connect(engine, action) as conn:
        try:
            transaction = conn.begin()
        except sa.exc.SQLAlchemyError as exc:
            raise translate_db_error(exc, action, target=engine) from exc
        forget_audit_row(conn)  # a row of an earlier transaction on this connection
        if single_unit:
            mark_single_unit(conn, transaction)
        try:
            yield conn
        except BaseException as exc:
            try:
                conn.rollback()
            except Exception:  # the connection may be gone; nothing of the block was committed
                pass
            if isinstance(exc, sa.exc.SQLAlchemyError):  # a read outside any write unit
                raise translate_db_error(exc, action, target=engine) from exc
            raise
        finally:
            if single_unit:
                clear_single_unit(conn)
        if conn.invalidated or not transaction.is_active:
            return  # the block's own failure ended the transaction (and said so)
        try:
            resolved_commit(conn, conn.commit)
        except sa.exc.SQLAlchemyError as exc:
            try:
                conn.rollback()
            except Exception:
                pass
            raise commit_failed(exc, action, check=check) from exc


def write_unit(conn: Connection, action: str) -> contextlib.AbstractContextManager[None]:
    """Run one write (its statements go in the ``with`` block) atomically on ``conn``.

    Args:
        conn: the caller's connection (in a transaction, none yet, or AUTOCOMMIT).
        action: what is being done, for messages, e.g. ``"creating /memories/a.md"``.

    Returns:
        A context manager (use it as ``with write_unit(conn, action): ...``).

    Raises:
        DbMemoryError: raised in the block, unchanged (the write was undone).
        ConflictError: a lock wait timed out or a deadlock was broken (code ``conflict`` or
            ``busy``; retry), or the database rolled back the caller's whole transaction
            (code ``transaction_rolled_back``; the connection is invalidated), or nobody can
            tell whether the write was saved (code ``outcome_unknown``: view before retrying).
        StorageError: any other database failure (no SQL or driver text in the message).
    """
    if conn.invalidated:
        single = None
    else:
        info = conn.info
        single = info.pop(_SINGLE, None)
        info[WROTE] = True  # its transaction's COMMIT takes a token (resolved_commit)
    if single is not None:
        if single.is_active and conn.get_transaction() is single and not conn.in_nested_transaction():
            return _SingleUnit(conn, action, single)
    if is_autocommit(conn) and not conn.invalidated and not _own(conn):
        if server_in_transaction(conn) is not True:
            return _own_transaction(conn, action)
    return _Savepoint(conn, action)


class _SingleUnit:
    """The one write unit of a transaction dbmemory began for it (:func:`mark_single_unit`):
    no savepoint; on any exception the whole transaction is rolled back, so nothing of the
    unit stays, and a database error becomes a :class:`~dbmemory.errors.DbMemoryError`."""

    __slots__ = ("_conn", "_action", "_tx")

    def __init__(self, conn: Connection, action: str, tx: Any) -> None:
        self._conn = conn
        self._action = action
        self._tx = tx

    def __enter__(self) -> None:
        try:
            join_driver_transaction(self._conn)
        except sa.exc.SQLAlchemyError as exc:
            raise translate_db_error(exc, self._action) from exc

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # never swallows the exception: it propagates, or a translated one
        if exc is None:
            return
        reason = (
            lost_transaction_reason(exc, self._conn)
            if isinstance(exc, sa.exc.SQLAlchemyError)
            else None
        )
        try:
            if self._tx.is_active:
                self._tx.rollback()
        except Exception:  # the connection may be gone; nothing of the unit was committed
            pass
        if isinstance(exc, sa.exc.SQLAlchemyError):
            if reason is not None:
                raise _undone(self._action, reason) from exc
            raise translate_db_error(exc, self._action) from exc


def _own(conn: Connection) -> bool:
    """Whether ``conn`` runs inside :func:`_own_transaction` (False once it is invalidated)."""
    if conn.invalidated:
        return False
    try:
        return bool(conn.info.get(_OWN))
    except sa.exc.SQLAlchemyError:
        return False


class _Savepoint:
    """A savepoint around one write in the caller's transaction (a plain class, not a
    generator: it runs for every write). A database error inside it becomes a
    :class:`~dbmemory.errors.DbMemoryError` (:func:`_savepoint_error`); a DbMemoryError or any
    other exception passes through unchanged, after the savepoint was rolled back."""

    __slots__ = ("_conn", "_action", "_tx")

    def __init__(self, conn: Connection, action: str) -> None:
        self._conn = conn
        self._action = action
        self._tx: Any = None

    def __enter__(self) -> None:
        try:
            join_driver_transaction(self._conn)
            tx = self._conn.begin_nested()
            tx.__enter__()
        except DbMemoryError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            raise _savepoint_error(self._conn, self._action, exc) from exc
        self._tx = tx

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # never swallows the exception: it propagates, or a translated one
        try:
            self._tx.__exit__(exc_type, exc, tb)  # RELEASE, or ROLLBACK TO on an exception
        except DbMemoryError:
            raise
        except sa.exc.SQLAlchemyError as error:
            raise _savepoint_error(self._conn, self._action, error) from error
        if isinstance(exc, sa.exc.SQLAlchemyError):
            raise _savepoint_error(self._conn, self._action, exc) from exc


def _undone(action: str, reason: str) -> ConflictError:
    """The error for a one-command transaction the database rolled back on its own (so nothing
    else was lost): cause ``locked`` for a deadlock victim or a lock wait timeout, else
    ``failed`` (the message names the reason)."""
    return ConflictError(
        f"{action} failed because {reason}; nothing was changed: retry the command",
        cause="locked" if reason in LOCK_REASONS else "failed",
    )


def _savepoint_error(conn: Connection, action: str, exc: sa.exc.SQLAlchemyError) -> DbMemoryError:
    """The error for a database failure inside a write's savepoint."""
    reason = lost_transaction_reason(exc, conn)
    if reason is None:
        return translate_db_error(exc, action)
    if write_outcome_unknown(exc, conn):
        if _own(conn):  # an AUTOCOMMIT connection: no caller's transaction to protect
            return outcome_unknown(action, invalidated=False)
        if not conn.invalidated:
            conn.invalidate()  # whatever transaction there was is gone: nothing may join it
        return outcome_unknown(action)
    if _own(conn):  # only our own one-command transaction is gone: say retry
        return _undone(action, reason)
    if not conn.invalidated:
        # The savepoint is gone with the caller's transaction. Invalidate the connection
        # so the caller's later statements and COMMIT fail loudly instead of committing
        # the rest of a half-lost unit of work on their own.
        conn.invalidate()
    return transaction_rolled_back(action, reason)


@contextlib.contextmanager
def _own_transaction(conn: Connection, action: str) -> Iterator[None]:
    """A real transaction around one command on an AUTOCOMMIT connection."""
    try:
        begin_own_transaction(conn)
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, action) from exc
    conn.info[_OWN] = True
    forget_audit_row(conn)
    conn.info[WROTE] = True  # the one command is a write
    committed = False
    try:
        try:
            yield
        except BaseException:
            _rollback_quietly(conn)
            raise
        try:
            resolved_commit(conn, lambda: end_own_transaction(conn, commit=True))
            committed = True
        except sa.exc.SQLAlchemyError as exc:
            _rollback_quietly(conn)
            raise commit_failed(exc, action) from exc
    except DbMemoryError:
        raise
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, action) from exc
    finally:
        if not conn.invalidated:
            conn.info.pop(_OWN, None)
        if not committed:
            _reset_logical_transaction(conn)


def _rollback_quietly(conn: Connection) -> None:
    try:
        end_own_transaction(conn, commit=False)
    except Exception:  # the connection may be gone; nothing of ours was committed
        pass


def _reset_logical_transaction(conn: Connection) -> None:
    """After a failed command, leave SQLAlchemy's bookkeeping clean: a failed savepoint can
    leave the connection's (AUTOCOMMIT, so empty) logical transaction inactive, which would
    refuse the caller's next statement."""
    try:
        if conn.in_transaction() and not conn.get_transaction().is_active:  # type: ignore[union-attr]
            conn.rollback()
    except Exception:
        pass


def run_statement(conn: Connection, stmt: Any, action: str) -> Any:
    try:
        return conn.execute(stmt)
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, action) from exc


