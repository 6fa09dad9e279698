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
  :func:`note_audit_row`), with the session id and which running server gave both (host, port
  and start time, read once per server connection). On the same running server the look-up
  waits until the old session is gone from ``information_schema.processlist`` (its
  transaction is then committed or rolled back, never half-way), then looks for the audit row.
  After a restart of that server the old session is gone (a new session may carry its id: it
  is not waited for) and the row says it. On another Galera node the old node's session may
  still commit: the look-up waits (and says "may or may not" at the bound).

Both servers also keep the audit row's identity (:func:`note_audit_row`: its time to the
microsecond, action, actor and store, user or item, all sent by dbmemory): the row is looked
for by that identity, so an id a restarted or promoted server gave to another transaction is
never taken for this one's. On PostgreSQL it answers when the server that answers is not the
one that gave the id (a restart, a Patroni failover: the old primary is dead or demoted, so
what the new primary holds is what was saved): the row there means saved, no row nothing was
saved.
* **Oracle**: Transaction Guard, when the service has it enabled (``COMMIT_OUTCOME = TRUE``):
  the logical transaction id (``LTXID``, python-oracledb's ``connection.ltxid``) and
  ``DBMS_APP_CONT.GET_LTXID_OUTCOME``, which also blocks the lost transaction from committing
  later. Written and compiled, not run against an Oracle server.
* **SQLite**: no network between dbmemory and the database: no token.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.db.dialect.base import driver_connection
from dbmemory.db.dialect.types import UtcDateTime

__all__ = [
    "CommitToken",
    "DEFAULT_COMMIT_OUTCOME_WAIT_S",
    "commit_outcome_wait_s",
    "commit_token",
    "forget_audit_row",
    "WROTE",
    "note_audit_row",
    "remember_server",
    "resolve_commit",
]

DEFAULT_COMMIT_OUTCOME_WAIT_S = 10.0
"""How long, in seconds, dbmemory looks for the outcome of a ``COMMIT`` whose reply was lost
(reconnecting and asking) before it answers "may or may not have been saved"."""

_AUDIT_ROW = "dbmemory_commit_token_row"
"""``conn.info`` key: ``(id, identity)`` of an audit row the open transaction wrote (the id on
MariaDB/MySQL, else None; the identity when the writer gave it, else None)."""

_SERVER = "dbmemory_commit_token_server"
"""``conn.info`` key (kept for the life of the driver connection): which running MariaDB/MySQL
server it reached (:func:`_mysql_server`)."""

_ROW_COLUMNS = ("created_at", "action_name", "actor_name", "store_id", "org_id", "user_key", "item_id")
"""The columns of an audit row that identify it (:func:`note_audit_row`); all are bound by
dbmemory, the time to the microsecond."""

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
        server: which running server gave the id (address or host name, port, start time).
        row: the identity of one audit row the transaction wrote (column, value pairs), or
            None.
    """

    kind: str
    value: Any = None
    session: int | None = None
    server: str | None = None
    row: tuple[tuple[str, Any], ...] | None = None


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


def note_audit_row(
    conn: Connection, result: Any, rows: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
) -> None:
    """Remember an audit row the open transaction inserted, as its commit token: the id
    (MariaDB/MySQL: the driver's ``lastrowid``, sent with the insert's reply) and, when given,
    the identity from ``rows`` (the insert's values: one dict, a list of them, or for an
    ``INSERT ... SELECT`` the values it binds): the columns of :data:`_ROW_COLUMNS` that are set
    and equal in every row, kept only when they include the time. Any one insert of the
    transaction will do: the first one is kept until :func:`commit_token` takes it. Also marks
    the transaction as one that wrote (:data:`WROTE`)."""
    info = conn.info
    info[WROTE] = True
    if _AUDIT_ROW in info:
        return
    key = _row_key([rows] if isinstance(rows, Mapping) else list(rows or ()))
    row_id = None
    if conn.dialect.name in ("mysql", "mariadb"):
        try:
            row_id = int(result.lastrowid) or None
        except Exception:  # no id reported (a driver or statement without one)
            row_id = None
    if row_id is not None or key is not None:
        info[_AUDIT_ROW] = (row_id, key)


def _row_key(rows: list[Mapping[str, Any]]) -> tuple[tuple[str, Any], ...] | None:
    if not rows:
        return None
    first = rows[0]
    key = tuple(
        (c, first[c]) for c in _ROW_COLUMNS
        if first.get(c) is not None and all(r.get(c) == first[c] for r in rows[1:])
    )
    return key if key and key[0][0] == "created_at" else None


def forget_audit_row(conn: Connection) -> None:
    """Drop a remembered audit row and write mark (the transaction ended or begins)."""
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
        _row_id, row = conn.info.pop(_AUDIT_ROW, (None, None))
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
        return CommitToken("xid", str(xid), int(driver.info.backend_pid), str(server), row)
    try:
        if name in ("mysql", "mariadb"):
            row_id, row = conn.info.pop(_AUDIT_ROW, (None, None))
            if row_id is None:
                return None
            return CommitToken(
                "audit_row", row_id, int(driver_connection(conn).thread_id()), _mysql_server(conn), row
            )
        if name == "oracle":
            ltxid = getattr(driver_connection(conn), "ltxid", None)
            return CommitToken("ltxid", bytes(ltxid)) if ltxid else None
    except Exception:  # the driver cannot say: the outcome stays unknown
        return None
    return None


def _mysql_server(conn: Connection) -> str | None:
    """Which running MariaDB/MySQL server ``conn`` reached, as read when its driver connection
    was made (:func:`remember_server`), or None (an engine dbmemory did not set up)."""
    known = conn.info.get(_SERVER)
    return None if known is None else str(known)


def remember_server(dbapi_conn: Any, info: dict[Any, Any]) -> None:
    """On a new MariaDB/MySQL driver connection (the engine's ``connect`` event,
    :func:`~dbmemory.db.dialect.setup.configure_engine`): read which running server it reached,
    ``host port start`` (start in whole seconds since the epoch, from ``Uptime``: two readings
    may differ by a second), into the pool's ``info`` of that connection, where
    :func:`commit_token` takes it with no statement."""
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute(_MYSQL_SERVER)
        row = cursor.fetchone()
    except Exception:  # a node that answers nothing yet (Galera non-primary): not known
        return
    finally:
        cursor.close()
    if row and row[0]:
        info[_SERVER] = str(row[0])


_MYSQL_SERVER = (
    "SELECT CONCAT_WS(' ', @@hostname, @@port, UNIX_TIMESTAMP() - CAST(VARIABLE_VALUE AS SIGNED)) "
    "FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'"
)


def _same_mysql_server(a: str | None, b: str) -> bool:
    """Whether two :func:`_mysql_server` texts name one running server (a second apart at most)."""
    if a is None:
        return True  # not known: the old rule (wait for the session)
    try:
        host_a, port_a, start_a = a.rsplit(" ", 2)
        host_b, port_b, start_b = b.rsplit(" ", 2)
        return (host_a, port_a) == (host_b, port_b) and abs(int(start_a) - int(start_b)) <= 2
    except ValueError:
        return a == b


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
        here = conn.exec_driver_sql(f"SELECT {_PG_SERVER}").scalar()
        if not _same_pg_server(token.server, str(here)) and token.row is not None:
            # a restart or a promoted standby: the old server commits nothing more here
            return "saved" if _row_found(conn, token.row) else "not_saved"
        status, server = conn.exec_driver_sql(_xid_status(conn, int(token.value))).one()
        if status == "committed":
            return "saved" if _same_pg_server(token.server, str(server)) else "unknown"
        if status == "aborted":
            return "not_saved"
        return "pending" if status == "in progress" else None
    if token.kind == "audit_row":
        here = _mysql_server(conn) or str(conn.exec_driver_sql(_MYSQL_SERVER).scalar())
        if _same_mysql_server(token.server, here):
            alive = conn.exec_driver_sql(
                "SELECT count(*) FROM information_schema.processlist "
                f"WHERE id = {int(token.session or 0)}"
            ).scalar()
            if alive:
                return "pending"  # its transaction may still commit or roll back
        elif conn.exec_driver_sql("SHOW STATUS LIKE 'wsrep_incoming_addresses'").first():
            return "pending"  # another Galera node: the old node's session may still commit
        return "saved" if _row_found(conn, token.row, int(token.value)) else "not_saved"
    if token.kind == "ltxid":
        return _ltxid_outcome(conn, token.value)
    return None


def _row_found(conn: Connection, row: tuple[tuple[str, Any], ...] | None, row_id: int | None = None) -> bool:
    """Whether the audit row of a token is in ``dbm_audit_events`` (by its id and, when known,
    its identity; the time bound through the column's type)."""
    where = [f"event_id = {int(row_id)}"] if row_id is not None else []
    params: dict[str, Any] = {}
    types: list[sa.sql.elements.BindParameter[Any]] = []
    for column, value in row or ():
        where.append(f"{column} = :{column}")
        params[column] = value
        if column == "created_at":
            types.append(sa.bindparam(column, type_=UtcDateTime()))
    statement = sa.text(f"SELECT count(*) FROM dbm_audit_events WHERE {' AND '.join(where)}")
    return bool(conn.execute(statement.bindparams(*types), params).scalar())


def _xid_status(conn: Connection, xid: int) -> str:
    if driver_connection(conn).info.server_version >= 130000:
        return f"SELECT pg_xact_status(CAST('{xid}' AS xid8)), {_PG_SERVER}"
    return f"SELECT txid_status({xid}), {_PG_SERVER}"


_PG_SERVER = (
    "concat_ws(' ', inet_server_addr(), inet_server_port(), "
    "CAST(pg_postmaster_start_time() AS text))"
)
"""Which running PostgreSQL server answers (a restart or another node gives another text)."""


def _same_pg_server(a: str | None, b: str) -> bool:
    """Whether two :data:`_PG_SERVER` texts name one running server: the same port and start
    time (to the microsecond); the address is left out (one server reached by two addresses,
    or a socket, which has none)."""
    return a is not None and a.split()[-3:] == b.split()[-3:]


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
