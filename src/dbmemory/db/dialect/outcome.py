"""The outcome of a ``COMMIT`` whose reply was lost: the token a transaction carries
(:func:`commit_token`, taken just before dbmemory sends its ``COMMIT``) and the look-up on a new
connection that says whether it committed (:func:`resolve_commit`).

* **PostgreSQL** (13 and later): the transaction's own id, ``pg_current_xact_id_if_assigned()``
  (``txid_current_if_assigned()`` before 13), read on the transaction's connection just before
  the ``COMMIT``; afterwards ``pg_xact_status(xid)`` says ``committed``, ``aborted`` or ``in
  progress`` (the look-up waits while the old backend still runs it). A transaction that wrote
  nothing has no id: nothing to save. The id is trusted as "committed" only on the same running
  server (address, port and ``pg_postmaster_start_time()`` taken with the id): a server that
  restarted or a standby promoted without this transaction's WAL may give the same id to
  another transaction, so "committed" there is not an answer (it stays unknown), while
  "aborted" is (this transaction's commit is not on that server).
* **MariaDB / MySQL**: no transaction id survives the transaction, so the token is written by
  the transaction itself: the id of one of its ``dbm_audit_events`` rows (every store change
  writes one; the driver reports it with the insert's reply, no statement more:
  :func:`note_audit_row`), with the session id. The look-up waits until the old session is gone
  from ``information_schema.processlist`` (its transaction is then committed or rolled back,
  never half-way), then looks for the audit row.
* **Oracle**: Transaction Guard, when the service has it enabled (``COMMIT_OUTCOME = TRUE``):
  the logical transaction id (``LTXID``, python-oracledb's ``connection.ltxid``) and
  ``DBMS_APP_CONT.GET_LTXID_OUTCOME``, which also blocks the lost transaction from committing
  later. Written and compiled, not run against an Oracle server.
* **SQLite**: no network between dbmemory and the database: no token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.db.dialect.base import driver_connection

__all__ = [
    "CommitToken",
    "DEFAULT_COMMIT_OUTCOME_WAIT_S",
    "commit_outcome_wait_s",
    "commit_token",
    "forget_audit_row",
    "WROTE",
    "note_audit_row",
    "resolve_commit",
]

DEFAULT_COMMIT_OUTCOME_WAIT_S = 10.0
"""How long, in seconds, dbmemory looks for the outcome of a ``COMMIT`` whose reply was lost
(reconnecting and asking) before it answers "may or may not have been saved"."""

_AUDIT_ROW = "dbmemory_commit_token_row"
"""``conn.info`` key: the id of an audit row the open transaction wrote (MariaDB/MySQL)."""

WROTE = "dbmemory_commit_token_wrote"
"""``conn.info`` key: a write unit ran in the open transaction (set by
:func:`dbmemory.store.units.write_unit`); PostgreSQL takes a token only then (a transaction of
reads has nothing to save, and its ``COMMIT`` needs no statement more)."""

Outcome = Literal["saved", "not_saved"]


@dataclass(frozen=True)
class CommitToken:
    """What identifies one transaction after its connection is gone.

    Attributes:
        kind: ``"xid"`` (PostgreSQL), ``"audit_row"`` (MariaDB/MySQL), ``"ltxid"`` (Oracle)
            or ``"nothing"`` (the transaction wrote nothing: there is nothing to save).
        value: the transaction id (text), the audit row id (int) or the LTXID (bytes).
        session: the server session id of the old connection (PostgreSQL backend pid,
            MariaDB thread id), or None.
        server: PostgreSQL: which running server gave the id (address, port, start time).
    """

    kind: str
    value: Any = None
    session: int | None = None
    server: str | None = None


def commit_outcome_wait_s(bind: Connection | Engine) -> float:
    """The engine's bound of :func:`resolve_commit`, in seconds
    (:func:`~dbmemory.db.dialect.setup.configure_engine`, default
    :data:`DEFAULT_COMMIT_OUTCOME_WAIT_S`)."""
    engine: Any = bind.engine
    while engine is not None:
        value = getattr(engine, "_dbmemory_commit_outcome_wait_s", None)
        if value is not None:
            return float(value)
        engine = getattr(engine, "_proxied", None)
    return DEFAULT_COMMIT_OUTCOME_WAIT_S


def note_audit_row(conn: Connection, result: Any) -> None:
    """Remember the id of an audit row the open transaction inserted (MariaDB/MySQL: the
    driver's ``lastrowid``, sent with the insert's reply), as its commit token. Any one row of
    the transaction will do: the first one is kept until :func:`commit_token` takes it. Also
    marks the transaction as one that wrote (:data:`WROTE`)."""
    info = conn.info
    info[WROTE] = True
    if _AUDIT_ROW in info or conn.dialect.name not in ("mysql", "mariadb"):
        return
    try:
        row_id = result.lastrowid
    except Exception:  # no id reported (a driver or statement without one): no token
        return
    if row_id:
        conn.info[_AUDIT_ROW] = int(row_id)


def forget_audit_row(conn: Connection) -> None:
    """Drop a remembered audit row id and write mark (the transaction ended or begins)."""
    if not conn.invalidated:
        conn.info.pop(_AUDIT_ROW, None)
        conn.info.pop(WROTE, None)


def commit_token(conn: Connection) -> CommitToken | None:
    """The token of ``conn``'s open transaction, taken just before its ``COMMIT`` (one short
    statement on PostgreSQL, none elsewhere). None when the outcome could not be looked up
    later (SQLite; MariaDB/MySQL without an audit row; PostgreSQL when no write unit ran;
    Oracle without Transaction Guard).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: PostgreSQL's statement failed (the connection lost
            before the ``COMMIT`` was sent: the transaction cannot commit).
    """
    name = conn.dialect.name
    if name == "postgresql":
        if not conn.info.pop(WROTE, False):
            return None  # no write unit ran: nothing dbmemory wrote can be lost
        driver = driver_connection(conn)
        function = (
            "pg_current_xact_id_if_assigned()"
            if driver.info.server_version >= 130000
            else "txid_current_if_assigned()"
        )
        xid, server = conn.exec_driver_sql(f"SELECT CAST({function} AS text), {_PG_SERVER}").one()
        if xid is None:
            return CommitToken("nothing")
        return CommitToken("xid", str(xid), int(driver.info.backend_pid), str(server))
    try:
        if name in ("mysql", "mariadb"):
            row_id = conn.info.pop(_AUDIT_ROW, None)
            if row_id is None:
                return None
            return CommitToken("audit_row", row_id, int(driver_connection(conn).thread_id()))
        if name == "oracle":
            ltxid = getattr(driver_connection(conn), "ltxid", None)
            return CommitToken("ltxid", bytes(ltxid)) if ltxid else None
    except Exception:  # the driver cannot say: the outcome stays unknown
        return None
    return None


def resolve_commit(engine: Engine, token: CommitToken, wait_s: float) -> Outcome | None:
    """Find out, on new connections of ``engine``, whether the transaction of ``token``
    committed: ``"saved"``, ``"not_saved"``, or None when no answer came within ``wait_s``
    seconds (the server unreachable, the old session still alive, the id too old)."""
    if token.kind == "nothing":
        return "not_saved"
    deadline = time.monotonic() + max(0.0, wait_s)
    while True:
        try:
            with engine.connect() as conn:
                outcome = _look_up(conn, token)
        except sa.exc.SQLAlchemyError:
            outcome = None  # not reachable yet (a failover, a restart): try again
        if outcome == "unknown":
            return None
        if outcome is not None and outcome != "pending":
            return outcome
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def _look_up(conn: Connection, token: CommitToken) -> Outcome | Literal["pending", "unknown"] | None:
    if token.kind == "xid":
        status, server = conn.exec_driver_sql(_xid_status(conn, int(token.value))).one()
        if status == "committed":
            return "saved" if str(server) == token.server else "unknown"
        if status == "aborted":
            return "not_saved"
        return "pending" if status == "in progress" else None
    if token.kind == "audit_row":
        alive = conn.exec_driver_sql(
            f"SELECT count(*) FROM information_schema.processlist WHERE id = {int(token.session or 0)}"
        ).scalar()
        if alive:
            return "pending"  # its transaction may still commit or roll back
        found = conn.exec_driver_sql(
            f"SELECT count(*) FROM dbm_audit_events WHERE event_id = {int(token.value)}"
        ).scalar()
        return "saved" if found else "not_saved"
    if token.kind == "ltxid":
        return _ltxid_outcome(conn, token.value)
    return None


def _xid_status(conn: Connection, xid: int) -> str:
    if driver_connection(conn).info.server_version >= 130000:
        return f"SELECT pg_xact_status(CAST('{xid}' AS xid8)), {_PG_SERVER}"
    return f"SELECT txid_status({xid}), {_PG_SERVER}"


_PG_SERVER = (
    "concat_ws(' ', inet_server_addr(), inet_server_port(), "
    "CAST(pg_postmaster_start_time() AS text))"
)
"""Which running PostgreSQL server answers (a restart or another node gives another text)."""


LTXID_OUTCOME = sa.text(
    "DECLARE committed BOOLEAN; completed BOOLEAN; "
    "BEGIN DBMS_APP_CONT.GET_LTXID_OUTCOME(:p_ltxid, committed, completed); "
    ":p_committed := CASE WHEN committed THEN 1 ELSE 0 END; END;"
)
"""Oracle Transaction Guard's look-up (PL/SQL; ``GET_LTXID_OUTCOME`` also blocks the lost
transaction from committing afterwards, so "not committed" stays true)."""


def _ltxid_outcome(conn: Connection, ltxid: bytes) -> Outcome | None:
    """Oracle: compiled and reviewed, not run (no Oracle server in CI)."""
    driver = driver_connection(conn)
    cursor = driver.cursor()
    try:
        committed = cursor.var(int)
        cursor.execute(str(LTXID_OUTCOME), p_ltxid=ltxid, p_committed=committed)
        return "saved" if committed.getvalue() == 1 else "not_saved"
    finally:
        cursor.close()
