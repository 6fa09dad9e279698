"""Galera facts: whether a MariaDB server is a Galera cluster node (:func:`is_galera`), and causal
reads there for the length of a block (:func:`causal_reads`: ``wsrep_sync_wait``), so an
expiry batch sees the commits of the other nodes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.db.dialect.txn import driver_execute

__all__ = [
    "causal_reads",
]


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
    driver_execute(conn, "SET @dbm_sync_wait = @@session.wsrep_sync_wait")
    driver_execute(conn, "SET SESSION wsrep_sync_wait = @@session.wsrep_sync_wait | 3")
    try:
        yield
    finally:
        if not conn.invalidated and not conn.closed:
            with contextlib.suppress(sa.exc.DBAPIError):
                driver_execute(conn, "SET SESSION wsrep_sync_wait = @dbm_sync_wait")
