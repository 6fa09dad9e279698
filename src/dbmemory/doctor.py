"""The operator's health check of a dbmemory database (``dbmemory doctor``).

:func:`diagnose` connects once and reads, each as one :class:`Check`: the database and its
version, the schema revision against the package's head, the isolation level of dbmemory's
connections, the settings dbmemory relies on (:func:`dbmemory.db.dialect.health_probes`: SQLite
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

from dbmemory.db import dialect, migrate
from dbmemory.db.engine import redact_url
from dbmemory.db.schema import audit_events, files, stores

__all__ = ["Check", "Report", "diagnose"]


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


def diagnose(engine: Engine) -> Report:
    """Check the database of ``engine`` (see the module docstring).

    Args:
        engine: an engine made by :func:`dbmemory.create_engine` (the settings checked are the
            ones its connections get).

    Returns:
        The :class:`Report`. A database that cannot be reached gives a report with one failed
        ``connect`` check (the translated error as its problem) instead of raising.
    """
    report = Report(url=redact_url(engine.url), database=engine.dialect.name)
    try:
        conn = engine.connect()
    except sa.exc.SQLAlchemyError as exc:
        error = dialect.translate_db_error(exc, "connecting")
        report.checks.append(Check("connect", "failed", problem=error.message))
        return report
    with conn:
        conn.begin()
        try:
            _diagnose(conn, engine, report)
        finally:
            conn.rollback()
    return report


def _diagnose(conn: sa.Connection, engine: Engine, report: Report) -> None:
    report.version = dialect.server_version(conn)
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
    for probe in dialect.health_probes(conn, memory=dialect.is_memory_sqlite(engine)):
        try:
            with conn.begin_nested():
                row = conn.execute(probe.statement).first()
            value, problem, warning = probe.judge(row)
        except sa.exc.SQLAlchemyError as exc:
            value, problem, warning = "unknown", None, (
                f"could not read {probe.name}: {dialect.translate_db_error(exc, 'reading it').message}")
        report.checks.append(Check(probe.name, value, problem, warning))
    if any(c.name == "galera" and c.value == "on" for c in report.checks):
        report.checks.extend(_galera_checks(conn))
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
            "wsrep_sync_wait = 1 for readers that need it (see README, Galera)")),
    ]


def _expiry_job(conn: sa.Connection) -> Check:
    statement, where = dialect.expiry_job_probe(conn)
    if statement is None:
        return Check("expiry_job", "not in the database", warning=(
            "schedule 'dbmemory expire --days N' with cron or a timer (SQLite has no scheduler)"))
    try:
        with conn.begin_nested():
            if not dialect.pg_cron_installed(conn):
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
