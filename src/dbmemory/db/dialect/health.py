"""The probes of ``dbmemory doctor`` per backend: the server settings dbmemory relies on
(:func:`health_probes`, a list of :class:`Probe`: SQLite WAL, MySQL/MariaDB path collation and
``max_allowed_packet``, PostgreSQL ``lock_timeout``, Oracle NLS and character set), the
in-database expiry job and its last run (:func:`expiry_job_probe`, :func:`pg_cron_installed`)
and the server version (:func:`server_version`). :mod:`dbmemory.db.doctor` runs them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.db.dialect.base import backend

__all__ = [
    "health_probes",
    "expiry_job_probe",
    "pg_cron_installed",
    "server_version",
]

# -- health checks (dbmemory doctor) ------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One fact ``dbmemory doctor`` reads from the database (:mod:`dbmemory.db.doctor`).

    ``statement`` returns one row (or none); ``judge(row)`` turns it into
    ``(shown value, problem or None, warning or None)``. Problems make the database unhealthy;
    warnings are advice.
    """

    name: str
    statement: sa.TextClause
    judge: Callable[[Any], tuple[str, str | None, str | None]]


def _value(row: Any, i: int = 0) -> Any:
    return None if row is None else row[i]


def _mb(n: Any) -> str:
    return f"{int(n) / 1048576:g} MiB"


_PATH_COLLATIONS = ("utf8mb4_bin", "utf8mb4_nopad_bin")


def health_probes(bind: Connection | Engine, *, memory: bool = False) -> list[Probe]:
    """The settings dbmemory relies on, per backend, for ``dbmemory doctor``.

    SQLite: WAL (file databases), foreign keys, busy timeout. MySQL/MariaDB: the path column's
    binary collation, ``max_allowed_packet`` (a file's statement must fit), the lock wait
    timeout, the event scheduler (the expiry EVENT), and on a Galera node ``binlog_format`` =
    ROW and ``wsrep_sync_wait``. PostgreSQL: ``lock_timeout`` (set by dbmemory's engine).
    Oracle: the session's ``NLS_COMP``/``NLS_SORT`` (BINARY) and the database character set
    (AL32UTF8).
    """
    name = backend(bind)
    t = sa.text
    if name == "sqlite":
        probes = [
            Probe("foreign_keys", t("PRAGMA foreign_keys"), lambda r: (
                "on" if _value(r) else "off", None if _value(r) else
                "foreign keys are off: use dbmemory.create_engine (or configure_engine)", None)),
            Probe("busy_timeout", t("PRAGMA busy_timeout"), lambda r: (
                f"{_value(r)} ms", None if (_value(r) or 0) > 0 else
                "no busy timeout: writers fail at once; use dbmemory.create_engine", None)),
        ]
        if not memory:
            probes.insert(0, Probe("journal_mode", t("PRAGMA journal_mode"), lambda r: (
                str(_value(r)), None if str(_value(r)).lower() == "wal" else
                "journal_mode is not WAL: readers block the writer; use dbmemory.create_engine "
                "(PRAGMA journal_mode = WAL)", None)))
        return probes
    if name in ("mysql", "mariadb"):
        return [
            Probe("path_collation", t(
                "SELECT collation_name FROM information_schema.columns WHERE table_schema = "
                "DATABASE() AND table_name = 'dbm_files' AND column_name = 'file_path'"),
                lambda r: (str(_value(r)), None if _value(r) in (None, *_PATH_COLLATIONS) else
                    "dbm_files.file_path is not binary (utf8mb4_bin): paths that differ in case "
                    "or trailing spaces collide; run 'dbmemory db upgrade' on a fresh database",
                    None)),
            Probe("max_allowed_packet", t("SELECT @@max_allowed_packet"), lambda r: (
                _mb(_value(r)), None, None if int(_value(r)) >= 16 * 1048576 else
                "max_allowed_packet is below 16 MiB: a large file's write fails; raise it "
                "(SET GLOBAL max_allowed_packet = 67108864)")),
            Probe("innodb_lock_wait_timeout", t("SELECT @@session.innodb_lock_wait_timeout"),
                lambda r: (f"{_value(r)} s", None, None if int(_value(r)) <= 60 else
                    "lock waits last more than a minute: use dbmemory.create_engine "
                    "(DBMEMORY_LOCK_TIMEOUT_MS)")),
            Probe("event_scheduler", t("SELECT @@GLOBAL.event_scheduler"), lambda r: (
                str(_value(r)), None, None if str(_value(r)).upper() == "ON" else
                "the event scheduler is off: the expiry EVENT never runs (SET GLOBAL "
                "event_scheduler = ON, or schedule 'dbmemory expire')")),
            Probe("galera", t(
                "SELECT variable_value FROM information_schema.global_variables "
                "WHERE variable_name = 'WSREP_ON'"),
                lambda r: ("on" if str(_value(r)).upper() == "ON" else "off", None, None)),
        ]
    if name == "postgresql":
        return [
            Probe("lock_timeout", t("SELECT current_setting('lock_timeout')"), lambda r: (
                str(_value(r)), None if str(_value(r)) not in ("0", "None") else
                "lock_timeout is 0 (lock waits never end): use dbmemory.create_engine, or "
                "transaction_pooling=True behind PgBouncer in transaction mode", None)),
            Probe("default_transaction_isolation",
                t("SELECT current_setting('default_transaction_isolation')"),
                lambda r: (str(_value(r)), None, None)),
        ]
    if name == "oracle":
        return [
            Probe("nls_comp", t(
                "SELECT value FROM nls_session_parameters WHERE parameter = 'NLS_COMP'"),
                lambda r: (str(_value(r)), None if str(_value(r)).upper() == "BINARY" else
                    "NLS_COMP is not BINARY: = and LIKE may ignore case; use "
                    "dbmemory.create_engine", None)),
            Probe("nls_sort", t(
                "SELECT value FROM nls_session_parameters WHERE parameter = 'NLS_SORT'"),
                lambda r: (str(_value(r)), None if str(_value(r)).upper() == "BINARY" else
                    "NLS_SORT is not BINARY: use dbmemory.create_engine", None)),
            Probe("character_set", t(
                "SELECT value FROM nls_database_parameters WHERE parameter = 'NLS_CHARACTERSET'"),
                lambda r: (str(_value(r)), None if str(_value(r)).upper() == "AL32UTF8" else
                    "the database character set is not AL32UTF8: characters may be replaced "
                    "silently (see 'dbmemory db upgrade')", None)),
        ]
    return []


def expiry_job_probe(bind: Connection | Engine) -> tuple[sa.TextClause | None, str]:
    """The query that finds the in-database expiry job and its last run, and where it looks.

    Returns ``(statement, where)``; the statement returns ``(name, enabled, last_run,
    last_status)`` rows for the job of ``sql/<dialect>/expiry_job.sql``: pg_cron's ``cron.job``
    and ``cron.job_run_details`` in this database (``None`` statement when pg_cron is not
    installed here: :func:`pg_cron_installed`), MySQL/MariaDB ``information_schema.EVENTS``,
    Oracle ``user_scheduler_jobs``. SQLite has no scheduler: ``(None, ...)``.
    """
    name = backend(bind)
    t = sa.text
    if name == "postgresql":
        return t(
            "SELECT j.jobname, j.active, d.start_time, d.status FROM cron.job j "
            "LEFT JOIN LATERAL (SELECT start_time, status FROM cron.job_run_details x "
            "WHERE x.jobid = j.jobid ORDER BY x.start_time DESC NULLS LAST LIMIT 1) d ON true "
            "WHERE j.command LIKE 'CALL dbm\\_expire\\_files(%' "
            "AND j.database = current_database() ORDER BY d.start_time DESC NULLS LAST"
        ), "pg_cron (cron.job)"
    if name in ("mysql", "mariadb"):
        return t(
            "SELECT event_name, status = 'ENABLED', last_executed, NULL FROM "
            "information_schema.EVENTS WHERE event_schema = DATABASE() "
            "AND event_name = 'dbm_expire_files_job'"
        ), "information_schema.EVENTS"
    if name == "oracle":
        return t(
            "SELECT job_name, enabled, last_start_date, state FROM user_scheduler_jobs "
            "WHERE job_name = 'DBM_EXPIRE_FILES_JOB'"
        ), "user_scheduler_jobs"
    return None, "SQLite has no scheduler"


def pg_cron_installed(conn: Connection) -> bool:
    """PostgreSQL: whether pg_cron's ``cron.job`` table exists in this database."""
    if backend(conn) != "postgresql":
        return True
    return conn.execute(sa.text("SELECT to_regclass('cron.job') IS NOT NULL")).scalar() is True


def server_version(conn: Connection) -> str:
    """The server's version text (``SELECT version()``; SQLite ``sqlite_version()``; Oracle
    ``v$version`` may be hidden, so the dialect's version tuple)."""
    name = backend(conn)
    if name == "sqlite":
        return "SQLite " + str(conn.execute(sa.text("SELECT sqlite_version()")).scalar())
    if name == "oracle":
        info = conn.dialect.server_version_info or ()
        return "Oracle " + ".".join(str(p) for p in info)
    text = str(conn.execute(sa.text("SELECT version()")).scalar())
    if name == "postgresql":
        return text.split(" on ")[0].split(",")[0]
    return ("MariaDB " if "mariadb" in text.lower() else "MySQL ") + text
