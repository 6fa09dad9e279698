"""The operator's health check of a dbmemory database (``dbmemory doctor``).

:func:`diagnose` connects once and reads, each as one :class:`Check`: the database and its
version, the schema revision against the package's head, the isolation level of dbmemory's
connections, the settings dbmemory relies on (:func:`dbmemory.db.dialect.health.health_probes`: SQLite
WAL, MySQL/MariaDB path collation and ``max_allowed_packet``, PostgreSQL ``lock_timeout``,
Oracle NLS and character set), the in-database expiry job and its last run where the database
can tell (pg_cron ``cron.job``/``cron.job_run_details``, MySQL ``information_schema.EVENTS``,
Oracle ``user_scheduler_jobs``), and the number of stores, files, characters and audit events.

A check with a ``problem`` makes the report unhealthy (``dbmemory doctor`` exits 1); a
``warning`` is advice (exit 0). Each problem and warning is one line that says what to fix.
Read-only: nothing is written, every query runs in one transaction that is rolled back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.db import migrate
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.health import (
    expiry_job_probe,
    health_probes,
    pg_cron_installed,
    server_version,
)
from dbmemory.db.dialect.txn import transaction_pooling
from dbmemory.db.engine import redact_url
from dbmemory.db.schema import audit_events, files, stores
from dbmemory.settings import Settings

__all__ = ["Check", "Report", "diagnose", "galera_cluster_checks", "pooler_check"]


@dataclass(frozen=True)
class Check:
    """One line of the report: ``name``, the ``value`` found, and what to fix if anything."""

    name: str
    value: str
    problem: str | None = None
    warning: str | None = None

    @property
    def ok(self) -> bool:
        """No problem (a warning is still ok)."""
        return self.problem is None


@dataclass
class Report:
    """What :func:`diagnose` found.

    Attributes:
        url: the database URL, password hidden.
        database: the backend (``sqlite``, ``postgresql``, ``mysql``, ``oracle``).
        version: the server's version text.
        checks: every check, in order.
        counts: ``stores``, ``files``, ``characters`` (sum of file lengths in characters) and
            ``audit_events``; empty when the schema is missing.
    """

    url: str
    database: str
    version: str = ""
    checks: list[Check] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        """No check found a problem."""
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (``dbmemory doctor --json``)."""
        return {
            "healthy": self.healthy,
            "url": self.url,
            "database": self.database,
            "version": self.version,
            "checks": [
                {"name": c.name, "value": c.value, "ok": c.ok, "problem": c.problem, "warning": c.warning}
                for c in self.checks
            ],
            "counts": dict(self.counts),
        }


def diagnose(engine: Engine, *, expected_cluster_size: int | None = None) -> Report:
    """Check the database of ``engine`` (see the module docstring).

    Args:
        engine: an engine made by :func:`dbmemory.create_engine` (the settings checked are the
            ones its connections get).
        expected_cluster_size: on a Galera node, the number of nodes the operator expects
            (default: the ``galera_cluster_size`` setting, ``DBMEMORY_GALERA_CLUSTER_SIZE``);
            a smaller ``wsrep_cluster_size`` is a problem (:func:`galera_cluster_checks`).

    Returns:
        The :class:`Report`. A database that cannot be reached gives a report with one failed
        ``connect`` check (the translated error as its problem) instead of raising.
    """
    report = Report(url=redact_url(engine.url), database=engine.dialect.name)
    try:
        conn = engine.connect()
    except sa.exc.SQLAlchemyError as exc:
        error = translate_db_error(exc, "connecting", target=engine)
        report.checks.append(Check("connect", "failed", problem=error.message))
        return report
    with conn:
        conn.begin()
        try:
            _diagnose(conn, engine, report, expected_cluster_size)
        finally:
            conn.rollback()
    return report


def _diagnose(
    conn: sa.Connection, engine: Engine, report: Report, expected_cluster_size: int | None
) -> None:
    report.version = server_version(conn)
    report.checks.append(Check("connect", "ok"))
    report.checks.append(Check("version", report.version))
    current, head = migrate.current(conn), migrate.head()
    if current is None:
        revision = Check("schema_revision", "none", problem=(
            f"dbmemory's tables are missing: run 'dbmemory db upgrade' (head {head})"))
    elif current != head:
        revision = Check("schema_revision", f"{current} (head {head})", problem=(
            f"the schema is at revision {current}, the package needs {head}: run "
            "'dbmemory db upgrade'"))
    else:
        revision = Check("schema_revision", f"{current} (head)")
    report.checks.append(revision)
    level = conn.get_isolation_level()
    report.checks.append(Check("isolation_level", str(level), warning=None if str(level).upper()
        in ("READ COMMITTED", "SERIALIZABLE", "READ_COMMITTED") else (
            f"dbmemory's connections run at {level}: writes whose snapshot is older than another "
            "writer's commit are refused with a retry text; READ COMMITTED avoids that")))
    for probe in health_probes(conn, memory=is_memory_sqlite(engine)):
        try:
            with conn.begin_nested():
                row = conn.execute(probe.statement).first()
            value, problem, warning = probe.judge(row)
        except sa.exc.SQLAlchemyError as exc:
            value, problem, warning = "unknown", None, (
                f"could not read {probe.name}: {translate_db_error(exc, 'reading it').message}")
        report.checks.append(Check(probe.name, value, problem, warning))
    if any(c.name == "galera" and c.value == "on" for c in report.checks):
        report.checks.extend(_galera_checks(conn))
        if expected_cluster_size is None:
            expected_cluster_size = Settings().galera_cluster_size
        report.checks.extend(galera_cluster_checks(conn, expected_cluster_size))
    if engine.dialect.name == "postgresql":
        report.checks.append(pooler_check(conn, engine))
    report.checks.append(_expiry_job(conn))
    if current is not None:
        report.counts = _counts(conn)
        report.checks.append(Check("contents", ", ".join(f"{v} {k}" for k, v in report.counts.items())))


def _galera_checks(conn: sa.Connection) -> list[Check]:
    fmt = str(conn.execute(sa.text("SELECT @@binlog_format")).scalar())
    sync = int(conn.execute(sa.text("SELECT @@session.wsrep_sync_wait")).scalar() or 0)
    return [
        Check("binlog_format", fmt, problem=None if fmt.upper() == "ROW" else (
            "a Galera cluster needs binlog_format = ROW: set it in the server configuration")),
        Check("wsrep_sync_wait", str(sync), warning=None if sync & 1 else (
            "reads on this node may miss a write just committed on another node: set "
            "wsrep_sync_wait = 1 for readers that need it (see docs/deployments.md, Galera)")),
    ]


def _expiry_job(conn: sa.Connection) -> Check:
    statement, where = expiry_job_probe(conn)
    if statement is None:
        return Check("expiry_job", "not in the database", warning=(
            "schedule 'dbmemory expire --days N' with cron or a timer (SQLite has no scheduler)"))
    try:
        with conn.begin_nested():
            if not pg_cron_installed(conn):
                return Check("expiry_job", "pg_cron not installed in this database", warning=(
                    "install sql/postgresql/expiry_job.sql where pg_cron runs (or schedule "
                    "'dbmemory expire'); if pg_cron lives in another database, check cron.job "
                    "there"))
            rows = conn.execute(statement).all()
    except sa.exc.SQLAlchemyError:
        return Check("expiry_job", f"cannot tell ({where} not readable)", warning=(
            "grant read access to the scheduler's catalogue, or check the job by hand"))
    if not rows:
        return Check("expiry_job", f"none in {where}", warning=(
            "no expiry job: install sql/<database>/expiry_job.sql or schedule 'dbmemory expire'"))
    name, enabled, last_run, status = rows[0]
    shown = f"{name}, {'enabled' if enabled in (True, 1, 'TRUE') else 'disabled'}, last run " + (
        f"{last_run}" + (f" ({status})" if status else "") if last_run else "never")
    warning = None
    if enabled not in (True, 1, "TRUE"):
        warning = "the expiry job is disabled: enable it, or files are never expired"
    elif status is not None and str(status).lower() in ("failed", "broken"):
        warning = "the expiry job's last run failed: see the scheduler's log"
    return Check("expiry_job", shown, warning=warning)


def _counts(conn: sa.Connection) -> dict[str, int]:
    row = conn.execute(
        sa.select(
            sa.select(sa.func.count()).select_from(stores).scalar_subquery(),
            sa.select(sa.func.count()).select_from(files).scalar_subquery(),
            sa.select(sa.func.coalesce(sa.func.sum(files.c.char_count), 0)).scalar_subquery(),
            sa.select(sa.func.count()).select_from(audit_events).scalar_subquery(),
        )
    ).one()
    return {
        "stores": int(row[0]),
        "files": int(row[1]),
        "characters": int(row[2]),
        "audit_events": int(row[3]),
    }


def pooler_check(conn: sa.Connection, engine: Engine) -> Check:
    """PostgreSQL: whether a connection pooler sits between dbmemory and the server, and its
    pool mode (check ``pooler``).

    A pooler is seen when the server's own port (``inet_server_port()``) differs from the
    URL's; its mode is read with ``SHOW CONFIG`` on PgBouncer's admin console (database
    ``pgbouncer`` at the URL's host and port, with the URL's user: one of PgBouncer's
    ``admin_users`` or ``stats_users``). The value names the pooler and ``pool_mode``, or
    says the mode is unknown. A transaction- or statement-mode pooler without
    ``transaction_pooling`` declared is a warning (prepared statements are off by default
    with psycopg 3, but ``lock_timeout`` is then set per session: it may stay behind on a
    server connection other clients get, and be missing from the one a transaction runs
    on); declared, the value says so."""
    declared = transaction_pooling(engine)
    try:
        with conn.begin_nested():
            server_port = conn.execute(sa.text("SELECT inet_server_port()")).scalar()
    except sa.exc.SQLAlchemyError:
        server_port = None
    url_port = engine.url.port or 5432
    if server_port is None or int(server_port) == int(url_port):
        if declared:
            return Check("pooler", "transaction pooling declared (transaction_pooling)")
        return Check("pooler", "none seen (the server answers on the URL's port)")
    mode = _pgbouncer_pool_mode(engine)
    where = f"the server listens on {server_port}, the URL names {url_port}"
    if mode is None:
        value = f"a pooler or proxy ({where}); pool mode unknown"
        warning = None if declared else (
            "cannot read the pooler's pool_mode (PgBouncer: give this user admin_users or "
            "stats_users); if it pools transactions, set transaction_pooling=True (or "
            "?dbmemory_transaction_pooling=true, DBMEMORY_TRANSACTION_POOLING=true)"
        )
        return Check("pooler", value + (", transaction pooling declared" if declared else ""), warning=warning)
    value = f"PgBouncer, pool_mode={mode} ({where})"
    if declared:
        return Check("pooler", value + ", transaction pooling declared")
    if mode in ("transaction", "statement"):
        return Check("pooler", value, warning=(
            f"PgBouncer pools by {mode} but transaction_pooling is not set: lock_timeout is set "
            "per session and may be missing where a transaction runs; set "
            "transaction_pooling=True (or ?dbmemory_transaction_pooling=true, "
            "DBMEMORY_TRANSACTION_POOLING=true)"))
    return Check("pooler", value)


def _pgbouncer_pool_mode(engine: Engine) -> str | None:
    """``pool_mode`` from PgBouncer's admin console at the URL's host and port, or None when
    it cannot be read (not PgBouncer, or a user that may not use the console)."""
    url = engine.url.set(database="pgbouncer")
    try:
        cargs, cparams = engine.dialect.create_connect_args(url)
        cparams.pop("prepare_threshold", None)
        driver = engine.dialect.connect(*cargs, **cparams)  # the console speaks no SQL
    except Exception:  # not a PgBouncer, or not allowed: the mode stays unknown
        return None
    try:
        driver.autocommit = True
        cursor = driver.cursor()
        cursor.execute("SHOW CONFIG")
        names = [d[0] for d in cursor.description or ()]
        for row in cursor.fetchall():
            record = dict(zip(names, row, strict=False))
            if record.get("key") == "pool_mode":
                return str(record.get("value"))
        return None
    except Exception:
        return None
    finally:
        try:
            driver.close()
        except Exception:
            pass


_SYNCED = 4
"""``wsrep_local_state`` of a node that is in sync with the cluster (2 donor/desynced, 1
joining, 3 joined)."""


def galera_cluster_checks(conn: sa.Connection, expected_size: int | None) -> list[Check]:
    """The Galera node's view of its cluster: checks ``wsrep_cluster_size`` (a problem when
    smaller than ``expected_size``; a warning when no size is expected, since a missing node
    cannot be told then), ``wsrep_cluster_status`` (a problem unless ``Primary``: the node is
    in a minority partition and refuses writes) and ``wsrep_local_state`` (a problem unless 4,
    Synced; 2, Donor/Desynced, is a warning)."""
    rows = conn.exec_driver_sql(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', "
        "'wsrep_cluster_status', 'wsrep_local_state', 'wsrep_local_state_comment')"
    ).all()
    status = {str(name).lower(): str(value) for name, value in rows}
    size = int(status.get("wsrep_cluster_size", "0") or 0)
    checks: list[Check] = []
    if expected_size is None:
        checks.append(Check("wsrep_cluster_size", f"{size} nodes", warning=(
            "no expected cluster size: a node that is down cannot be told; pass "
            "--expected-cluster-size N or set DBMEMORY_GALERA_CLUSTER_SIZE")))
    elif size < expected_size:
        checks.append(Check("wsrep_cluster_size", f"{size} of {expected_size} nodes", problem=(
            f"the cluster has {size} of the {expected_size} nodes expected: "
            f"{expected_size - size} node(s) are down or split off; bring them back (they "
            "rejoin by state transfer) or fix the expected size")))
    else:
        checks.append(Check("wsrep_cluster_size", f"{size} of {expected_size} nodes"))
    cluster_status = status.get("wsrep_cluster_status", "unknown")
    checks.append(Check("wsrep_cluster_status", cluster_status, problem=None
        if cluster_status.lower() == "primary" else (
            f"this node's component is {cluster_status}, not Primary: it lost quorum and "
            "refuses writes; connect to a node of the primary component or restore quorum")))
    state = int(status.get("wsrep_local_state", "0") or 0)
    shown = f"{state} ({status.get('wsrep_local_state_comment', 'unknown')})"
    if state == _SYNCED:
        checks.append(Check("wsrep_local_state", shown))
    elif state == 2:
        checks.append(Check("wsrep_local_state", shown, warning=(
            "this node is a state-transfer donor or desynced: it may lag the cluster")))
    else:
        checks.append(Check("wsrep_local_state", shown, problem=(
            "this node is not in sync with the cluster (joining or joined): wait until "
            "wsrep_local_state is 4 (Synced) before sending it traffic")))
    return checks
