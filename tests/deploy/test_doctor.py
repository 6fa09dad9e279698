"""Issue 13: ``dbmemory doctor`` on every backend (and through PgBouncer and on a Galera node:
conftest.DEPLOY_MODULES).

A migrated database is healthy (exit code 0) and the report names the database, its version,
the revision at head, the isolation level, the backend's settings and the contents; a missing
or outdated schema and a connection without dbmemory's settings are problems (exit code 1)
whose line says what to fix; an unreachable database is a failed ``connect`` check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool
from typer.testing import CliRunner

from dbmemory import enable_for_agent
from dbmemory.cli import app
from dbmemory.db import migrate
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.dialect.health import expiry_job_probe, health_probes
from dbmemory.db.dialect.oracle import oracle19_dialect
from dbmemory.db.dialect.txn import transaction_pooling
from dbmemory.db.doctor import diagnose
from dbmemory.db.schema import audit_events
from dbmemory.tool import MemoryTool

SETTINGS = {
    "sqlite": {"foreign_keys", "busy_timeout"},
    "postgresql": {"lock_timeout"},
    "mysql": {"path_collation", "max_allowed_packet", "innodb_lock_wait_timeout", "event_scheduler"},
    "oracle": {"nls_comp", "nls_sort", "character_set"},
}


def _seed(engine: Engine) -> int:
    """Two files of 3 and 5 characters in one store; returns the number of audit events."""
    with engine.begin() as c:
        enable_for_agent(c, "DOC")
        tool = MemoryTool(c, "DOC")
        for path, text in (("/memories/a.md", "abc"), ("/memories/b.md", "defgh")):
            assert not tool.execute({"command": "create", "path": path, "file_text": text}).startswith("Error")
    with engine.connect() as c:
        return int(c.execute(sa.select(sa.func.count()).select_from(audit_events)).scalar_one())


def test_a_migrated_database_is_healthy_and_the_report_names_everything(engine: Engine) -> None:
    events = _seed(engine)
    report = diagnose(engine)
    assert report.healthy, [c for c in report.checks if not c.ok]
    names = {c.name: c for c in report.checks}
    assert names["schema_revision"].value == f"{migrate.head()} (head)"
    assert report.version and names["version"].value == report.version
    assert names["isolation_level"].value
    assert SETTINGS[engine.dialect.name] <= set(names), sorted(names)
    if engine.dialect.name == "sqlite" and not is_memory_sqlite(engine):
        assert names["journal_mode"].value == "wal"
    assert "expiry_job" in names
    assert report.counts == {"stores": 1, "files": 2, "characters": 8, "audit_events": events}
    data = report.to_dict()
    assert data["healthy"] is True and data["counts"]["files"] == 2
    json.dumps(data)


def test_an_outdated_or_missing_schema_is_a_problem_that_says_upgrade(empty_engine: Engine) -> None:
    report = diagnose(empty_engine)
    assert not report.healthy
    (bad,) = [c for c in report.checks if not c.ok]
    assert bad.name == "schema_revision" and "dbmemory db upgrade" in (bad.problem or "")
    migrate.upgrade(empty_engine, "0001")
    report = diagnose(empty_engine)
    (bad,) = [c for c in report.checks if not c.ok]
    assert bad.problem == (
        f"the schema is at revision 0001, the package needs {migrate.head()}: run "
        "'dbmemory db upgrade'"
    )


def test_a_connection_without_dbmemorys_settings_is_a_problem(engine: Engine) -> None:
    name = engine.dialect.name
    if name not in ("sqlite", "postgresql") or is_memory_sqlite(engine):
        pytest.skip("SQLite file (WAL) and PostgreSQL (lock_timeout) settings")
    if transaction_pooling(engine):
        pytest.skip("through PgBouncer a plain engine's lock_timeout depends on the server connection")
    plain = sa.create_engine(engine.url, poolclass=NullPool)
    if name == "sqlite":  # a fresh file in rollback-journal mode
        path = Path(str(engine.url.database)).with_name("plain.db")
        plain = sa.create_engine(f"sqlite:///{path}", poolclass=NullPool)
        migrate.upgrade(plain)
        with plain.connect() as c:
            c.exec_driver_sql("PRAGMA journal_mode = DELETE")
    try:
        report = diagnose(plain)
    finally:
        plain.dispose()
    problems = {c.name: c.problem for c in report.checks if not c.ok}
    if name == "sqlite":
        assert set(problems) == {"journal_mode", "foreign_keys"}, problems
        assert "WAL" in problems["journal_mode"]
    else:
        assert set(problems) == {"lock_timeout"}, problems
        assert "dbmemory.create_engine" in problems["lock_timeout"]


def test_an_unreachable_database_is_a_failed_connect_check() -> None:
    from dbmemory.db.engine import create_engine

    eng = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", connect_args={"connect_timeout": 2})
    try:
        report = diagnose(eng)
    finally:
        eng.dispose()
    assert not report.healthy
    assert [c.name for c in report.checks] == ["connect"]
    assert "nothing accepts connections" in (report.checks[0].problem or "")


def _cli_url(engine: Engine) -> str:
    url = engine.url.render_as_string(hide_password=False)
    if transaction_pooling(engine):
        url += ("&" if "?" in url else "?") + "dbmemory_transaction_pooling=true"
    return url


def test_the_doctor_command_prints_one_line_per_check_and_exits_by_health(
    engine: Engine, backend_name: str
) -> None:
    if backend_name == "sqlite-memory":
        pytest.skip("the command opens its own connection: a new in-memory database")
    events = _seed(engine)
    runner = CliRunner()
    result = runner.invoke(app, ["doctor", "--url", _cli_url(engine)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"database: {engine.dialect.name} at ")
    assert f"ok   schema_revision: {migrate.head()} (head)" in lines
    assert f"ok   contents: 1 stores, 2 files, 8 characters, {events} audit_events" in lines
    assert lines[-1] == "healthy"
    result = runner.invoke(app, ["doctor", "--url", _cli_url(engine), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["healthy"] is True and data["counts"]["audit_events"] == events


def test_the_doctor_command_exits_1_on_a_database_without_the_schema(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["doctor", "--url", f"sqlite:///{tmp_path / 'none.db'}"])
    assert result.exit_code == 1, result.output
    assert "fix: dbmemory's tables are missing: run 'dbmemory db upgrade'" in result.output
    assert result.output.splitlines()[-1] == "NOT healthy"


def test_the_doctor_statements_compile_for_oracle() -> None:
    oracle = oracle19_dialect()

    class _Bind:
        dialect = oracle

    probes = health_probes(_Bind())  # type: ignore[arg-type]
    assert {p.name for p in probes} == SETTINGS["oracle"]
    statement, where = expiry_job_probe(_Bind())  # type: ignore[arg-type]
    assert statement is not None and "user_scheduler_jobs" in where
    for stmt in [*(p.statement for p in probes), statement]:
        sql = str(stmt.compile(dialect=oracle))
        assert "dbm_" in sql.lower() or "nls_" in sql.lower()
    from dbmemory.db.schema import audit_events, files, stores  # the counts query

    counts = sa.select(
        sa.select(sa.func.count()).select_from(stores).scalar_subquery(),
        sa.select(sa.func.coalesce(sa.func.sum(files.c.char_count), 0)).scalar_subquery(),
        sa.select(sa.func.count()).select_from(audit_events).scalar_subquery(),
    )
    assert "FROM DUAL" in str(counts.compile(dialect=oracle)).upper()
