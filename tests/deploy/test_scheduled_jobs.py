"""Issue 13: the generated expiry jobs run by the real schedulers.

* pg_cron (``.ci/pgcron``: a PostgreSQL cluster with ``shared_preload_libraries = 'pg_cron'``):
  ``sql/postgresql/expiry_job.sql`` installed with psql as the README says, the daily job is in
  ``cron.job``; then pg_cron itself runs the job's command (a one-minute schedule, waited for
  in ``cron.job_run_details``) and it deletes exactly what the Python rule deletes, with one
  ``expire`` audit event per file.
* MariaDB EVENT (the test MariaDB server): ``sql/mysql/expiry_job.sql`` installed with the
  mysql client, the event is in ``information_schema.EVENTS``; it is re-timed to run in a
  second, the event scheduler is switched on (and restored afterwards), and the event deletes
  exactly what the Python rule deletes.

The data set and the rule written out come from tests/sqlapi/test_sql_scripts.py.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import URL, Engine

from dbmemory.db.doctor import diagnose
from sql_clients import DAYS, client_command, expected, seed, seed_rows, snapshot

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 150
"""Upper bound on waiting for a scheduler (pg_cron starts jobs on the minute)."""


def _client_file(server_name: str, url: URL, path: Path) -> None:
    """``psql -v ON_ERROR_STOP=1 -d <db> -f <file>`` / ``mysql <db> < <file>``, as the README."""
    cmd = client_command(server_name, url)
    if server_name == "postgres":
        result = subprocess.run([*cmd, "-f", str(path)], capture_output=True, text=True, timeout=120)
    else:
        with path.open() as f:
            result = subprocess.run(cmd, stdin=f, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{cmd[0]} failed:\n{result.stderr}\n{result.stdout}"


def _wait(what: str, check: object) -> object:
    deadline = time.monotonic() + WAIT_S
    while True:
        value = check()  # type: ignore[operator]
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {WAIT_S}s")
        time.sleep(1)


@pytest.mark.pgcron
def test_pg_cron_schedules_and_runs_the_expiry_job_with_the_python_rule(pgcron_engine: Engine) -> None:
    engine = pgcron_engine
    now = dt.datetime.now(dt.timezone.utc)
    rows = seed_rows()
    seed(engine, rows, now)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.exec_driver_sql(
            "SELECT cron.unschedule(jobid) FROM cron.job WHERE left(jobname, 11) = 'dbm-expire-'"
        )
    _client_file("postgres", engine.url, ROOT / "sql/postgresql/expiry_job.sql")
    with engine.connect() as c:
        jobs = c.exec_driver_sql(
            "SELECT jobname, schedule, command, database, active FROM cron.job "
            "WHERE left(jobname, 11) = 'dbm-expire-'"
        ).all()
    assert [tuple(j) for j in jobs] == [
        ("dbm-expire-files", "15 3 * * *", f"CALL dbm_expire_files({DAYS})", engine.url.database, True)
    ]
    # pg_cron runs the same command now (1.4 schedules by the minute)
    command = jobs[0][2]
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        job_id = c.exec_driver_sql(
            f"SELECT cron.schedule('dbm-expire-now', '* * * * *', '{command}')"
        ).scalar_one()
    try:

        def finished() -> object:
            with engine.connect() as c:
                return c.exec_driver_sql(
                    "SELECT status, return_message FROM cron.job_run_details "
                    f"WHERE jobid = {int(job_id)} AND status IN ('succeeded', 'failed') "
                    "ORDER BY runid LIMIT 1"
                ).first()

        status, message = _wait("pg_cron's run of the expiry job", finished)  # type: ignore[misc]
        job = {c.name: c for c in diagnose(engine).checks}["expiry_job"]
        assert job.value.startswith("dbm-expire-now, enabled, last run "), job
        assert job.value.endswith(f"({status})") and job.warning is None, job
    finally:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql("SELECT cron.unschedule('dbm-expire-now')")
            c.exec_driver_sql("SELECT cron.unschedule('dbm-expire-files')")
    assert status == "succeeded", message
    remaining, events = snapshot(engine)
    expected_remaining, expected_events = expected(rows, DAYS)
    assert remaining == expected_remaining
    assert events == expected_events
    assert len(events) > 2000  # several batches of 1,000, each committed by the procedure


@pytest.mark.mysql
def test_the_mariadb_event_runs_the_expiry_job_with_the_python_rule(
    server_engine: Engine, server_name: str
) -> None:
    if server_name != "mysql":
        pytest.skip("the MariaDB event scheduler (pg_cron is the PostgreSQL test above)")
    engine = server_engine
    now = dt.datetime.now(dt.timezone.utc)
    rows = seed_rows()
    seed(engine, rows, now)
    _client_file("mysql", engine.url, ROOT / "sql/mysql/expiry_job.sql")
    with engine.connect() as c:
        event = c.exec_driver_sql(
            "SELECT event_name, status, interval_value, interval_field, event_definition "
            "FROM information_schema.EVENTS WHERE event_schema = DATABASE()"
        ).one()
    assert tuple(event[:4]) == ("dbm_expire_files_job", "ENABLED", "1", "DAY")
    assert "dbm_expire_files(dbm_expiry_days()" in event[4]
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        before = c.exec_driver_sql("SELECT @@GLOBAL.event_scheduler").scalar_one()
        c.exec_driver_sql(
            "ALTER EVENT dbm_expire_files_job ON SCHEDULE AT CURRENT_TIMESTAMP + INTERVAL 1 SECOND "
            "ON COMPLETION PRESERVE ENABLE"
        )
        try:
            if str(before).upper() != "ON":
                c.exec_driver_sql("SET GLOBAL event_scheduler = ON")

            def ran() -> object:
                with engine.connect() as r:
                    # a one-time event is DISABLED (PRESERVE) once its run has completed
                    last, status = r.exec_driver_sql(
                        "SELECT last_executed, status FROM information_schema.EVENTS "
                        "WHERE event_schema = DATABASE()"
                    ).one()
                    left = r.exec_driver_sql(
                        "SELECT count(*) FROM dbm_audit_events WHERE action_name = 'expire'"
                    ).scalar_one()
                return (
                    last is not None
                    and status == "DISABLED"
                    and left == len(expected(rows, DAYS)[1])
                )

            _wait("the MariaDB event's run of the expiry job", ran)
        finally:
            if str(before).upper() != "ON":
                c.exec_driver_sql(f"SET GLOBAL event_scheduler = {str(before).upper()}")
    remaining, events = snapshot(engine)
    expected_remaining, expected_events = expected(rows, DAYS)
    assert remaining == expected_remaining
    assert events == expected_events
    # a one-time (AT) event is disabled once it ran: doctor says so; the daily schedule again
    job = {c.name: c for c in diagnose(engine).checks}["expiry_job"]
    assert job.value.startswith("dbm_expire_files_job, disabled, last run 20"), job
    assert job.warning == "the expiry job is disabled: enable it, or files are never expired"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.exec_driver_sql(
            "ALTER EVENT dbm_expire_files_job ON SCHEDULE EVERY 1 DAY "
            "STARTS CURRENT_DATE + INTERVAL 1 DAY + INTERVAL 195 MINUTE ENABLE"
        )
    job = {c.name: c for c in diagnose(engine).checks}["expiry_job"]
    assert job.value.startswith("dbm_expire_files_job, enabled, last run 20"), job
