"""The reference SQL in ``sql/``: generated from the migrations, free of drift, shaped for each
database's client, and (PostgreSQL, MariaDB) really runnable, with an expiry procedure that
deletes exactly what the Python rule deletes."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine
from typer.testing import CliRunner

from dbmemory import sqlgen
from dbmemory.cli import app
from dbmemory.db import migrate, schema
from dbmemory.db.engine import create_engine
from dbmemory.sqlgen._common import DIALECTS, EXPIRY_ACTOR, EXPIRY_BATCH_SIZE, SCRIPT_NAMES
from dbmemory.sqlgen.api_common import derived_role_base
from dbmemory.sqlgen.expiry_job import expiry_procedure_sql, render_expiry_job
from dbmemory.sqlgen.install import render_install, render_uninstall
from dbmemory.store.touches import TOUCH_INTERVAL
from sql_clients import (
    DAYS,
    call_procedure,
    expected,
    install_procedure,
    run_client,
    seed,
    seed_rows,
    snapshot,
)

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"


# -- drift and shape --------------------------------------------------------------------------


def test_committed_sql_scripts_match_the_migrations() -> None:
    problems = sqlgen.check_scripts(SQL_DIR)
    if problems:
        pytest.fail(
            "sql/ is stale: regenerate it with `python -m dbmemory.sqlgen` and commit it.\n\n"
            + "\n".join(problems),
            pytrace=False,
        )


def test_a_check_under_another_unicode_version_says_so(tmp_path: Path) -> None:
    """The API scripts hold Unicode tables of the rendering Python: a check under another
    version names both versions instead of leaving a reader with a 100 kB diff."""
    import shutil

    from dbmemory.sqlgen.unicode_tables import UNICODE_VERSION

    copy = tmp_path / "sql"
    shutil.copytree(SQL_DIR, copy)
    script = copy / "mysql" / "api.sql"
    script.write_text(script.read_text(encoding="utf-8").replace(
        f"(Unicode {UNICODE_VERSION}", "(Unicode 1.0.0"), encoding="utf-8")
    problems = sqlgen.check_scripts(copy)
    assert len(problems) == 1
    assert problems[0].startswith(
        f"sql/mysql/api.sql holds Unicode tables of version 1.0.0; this Python's unicodedata is {UNICODE_VERSION}")


def test_a_check_under_other_look_alike_data_says_so(tmp_path: Path) -> None:
    """The API scripts hold rule 11's tables from the installed confusable-homoglyphs: a check
    with another version of the package names both."""
    import shutil

    from dbmemory.sqlgen.unicode_tables import CONFUSABLES_VERSION

    copy = tmp_path / "sql"
    shutil.copytree(SQL_DIR, copy)
    script = copy / "postgresql" / "api.sql"
    script.write_text(script.read_text(encoding="utf-8").replace(
        f"data: {CONFUSABLES_VERSION}", "data: confusable-homoglyphs 0.1"), encoding="utf-8")
    problems = sqlgen.check_scripts(copy)
    assert len(problems) == 1
    assert problems[0].startswith(
        "sql/postgresql/api.sql holds look-alike tables of confusable-homoglyphs 0.1; this Python has "
        f"{CONFUSABLES_VERSION}")


def test_rendering_is_deterministic() -> None:
    first, second = sqlgen.render_all(), sqlgen.render_all()
    assert first == second
    assert set(first) == {f"{d}/{n}" for d in DIALECTS for n in SCRIPT_NAMES}
    for name, text in first.items():
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), f"{name} contains a date"
        assert text.endswith("\n") and not text.endswith("\n\n"), name


@pytest.mark.parametrize("dialect", DIALECTS)
def test_install_scripts_insert_the_version_row_without_returning(dialect: str) -> None:
    text = render_install(dialect)
    assert ":ret_0" not in text
    assert "RETURNING" not in text.upper()
    # the first revision inserts the version row, each later one moves it on: the script
    # leaves the database at head
    assert "INSERT INTO dbm_alembic_version (version_num) VALUES ('0001');" in text
    stamps = re.findall(r"dbm_alembic_version (?:\(version_num\) VALUES \(|SET version_num=)'(\w+)'", text)
    assert stamps and stamps[-1] == migrate.head(), stamps


@pytest.mark.parametrize("dialect", DIALECTS)
def test_uninstall_scripts_drop_everything_install_creates(dialect: str) -> None:
    install, uninstall = render_install(dialect), render_uninstall(dialect)
    created = set(re.findall(r"^CREATE (?:TABLE|VIEW) (\w+)", install, flags=re.MULTILINE))
    dropped = set(re.findall(r"^DROP (?:TABLE|VIEW) (\w+)", uninstall, flags=re.MULTILINE))
    assert (
        created
        == dropped
        == {*schema.metadata.tables, schema.FILE_LIST_VIEW, schema.AUDIT_REPORT_VIEW, schema.VERSION_TABLE}
    )
    assert "dbm_expire_files" in uninstall and "dbm_expire_items" in uninstall


@dataclass
class _Unit:
    kind: str  # "sql" | "plsql"
    lines: list[str]
    terminated_by_slash: bool


_SQLPLUS_COMMANDS = re.compile(r"^(WHENEVER|SET|DEFINE|PROMPT|SHOW|SPOOL)\b", re.IGNORECASE)
_PLSQL = re.compile(
    r"^(DECLARE|BEGIN|CREATE\s+(OR\s+REPLACE\s+)?(PROCEDURE|FUNCTION|PACKAGE|TRIGGER|TYPE))\b",
    re.IGNORECASE,
)


def _sqlplus_units(text: str) -> list[_Unit]:
    """Split a script the way SQL*Plus reads it (blank lines end a SQL statement; a PL/SQL
    block ends only at a ``/`` line)."""
    units: list[_Unit] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("--") or _SQLPLUS_COMMANDS.match(line):
            assert line.strip() != "/", (
                f"stray '/' at line {i + 1}: would re-run the previous statement"
            )
            i += 1
            continue
        body: list[str] = []
        if _PLSQL.match(line):
            while lines[i].strip() != "/":
                assert lines[i].strip(), f"blank line inside a PL/SQL block at line {i + 1}"
                body.append(lines[i])
                i += 1
            units.append(_Unit("plsql", body, True))
            i += 1
            continue
        while True:
            assert lines[i].strip(), f"blank line inside a SQL statement at line {i + 1}"
            body.append(lines[i])
            if lines[i].rstrip().endswith(";"):
                break
            i += 1
        units.append(_Unit("sql", body, False))
        i += 1
    return units


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_oracle_scripts_end_statements_with_semicolons_and_blocks_with_slash(name: str) -> None:
    text = sqlgen.render_all()[f"oracle/{name}"]
    units = _sqlplus_units(text)
    assert units
    for unit in units:
        if unit.kind == "plsql":
            assert unit.lines[-1].rstrip().endswith(";"), unit.lines[0]
        else:
            assert not unit.lines[-1].rstrip().endswith("/;"), unit.lines[0]
    if name == "install.sql":
        # one PL/SQL block, the pre-flight, before the first DDL; then plain SQL and the
        # episode audit trigger of revision 0008
        assert units[0].kind == "plsql"
        assert all(
            u.kind == "sql" or u.lines[0].startswith("CREATE OR REPLACE TRIGGER dbm_episodes_audit_ai")
            for u in units[1:]
        )
        assert ":ret_0" not in text and "RETURNING" not in text
    if name == "expiry_job.sql":
        # dbm_expire_items, dbm_expire_files, the validity check, the job
        assert sum(u.kind == "plsql" for u in units) == 4


def test_oracle_install_checks_before_the_first_ddl_and_ends_with_commit() -> None:
    text = render_install("oracle")
    units = _sqlplus_units(text)
    preflight = "\n".join(units[0].lines)
    first_ddl = re.search(r"^CREATE ", text, flags=re.MULTILINE)
    assert first_ddl and text.index(preflight) < first_ddl.start()
    for needed in (*migrate.ORACLE_SCHEMA_PRIVILEGES, "UNLIMITED TABLESPACE"):
        assert f"'{needed}'" in preflight, needed
    for word in ("session_privs", "user_ts_quotas", "user_users", "NLS_CHARACTERSET"):
        assert word in preflight, word
    assert f"v_charset <> '{migrate.ORACLE_CHARACTER_SET}'" in preflight
    assert "' GRANT ' || p_privilege || ' TO ' || v_user" in preflight
    assert "' ALTER USER ' || v_user || ' QUOTA UNLIMITED ON ' || v_space" in preflight
    assert "RAISE_APPLICATION_ERROR" in preflight
    # the data changes after the last DDL are committed by the script itself ...
    assert units[-1].lines == ["COMMIT;"]
    assert units[-2].lines[0].startswith("UPDATE dbm_alembic_version SET version_num=")
    # ... and rolled back when a statement fails (SQL*Plus would commit them on EXIT)
    assert "WHENEVER SQLERROR EXIT SQL.SQLCODE ROLLBACK\n" in text


def test_oracle_uninstall_purges_every_table_and_rolls_back_on_error() -> None:
    text = render_uninstall("oracle")
    drops = re.findall(r"^DROP TABLE (\w+)( PURGE)?;$", text, flags=re.MULTILINE)
    assert {t for t, _ in drops} == {*schema.metadata.tables, schema.VERSION_TABLE}
    assert all(purge for _, purge in drops), drops
    assert "WHENEVER SQLERROR EXIT SQL.SQLCODE ROLLBACK\n" in text


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_other_uninstall_scripts_drop_without_purge(dialect: str) -> None:
    text = render_uninstall(dialect)
    assert "PURGE" not in text
    assert re.search(r"^DROP TABLE dbm_files;$", text, flags=re.MULTILINE)


def test_expiry_scripts_document_the_default_days_at_the_top() -> None:
    scripts = sqlgen.render_all()
    top = {d: "\n".join(scripts[f"{d}/expiry_job.sql"].splitlines()[:25]) for d in DIALECTS}
    assert "DEFINE expiry_days = 30" in top["oracle"]
    assert "\\set expiry_days 30" in top["postgresql"]
    assert "RETURN 30" in top["mysql"]
    assert "DBMS_SCHEDULER.CREATE_JOB" in scripts["oracle/expiry_job.sql"]
    assert "&expiry_days" in scripts["oracle/expiry_job.sql"]
    assert "cron.schedule(" in scripts["postgresql/expiry_job.sql"]
    assert "pg_cron must be installed" in scripts["postgresql/expiry_job.sql"]
    mysql = scripts["mysql/expiry_job.sql"]
    assert "ON SCHEDULE EVERY 1 DAY" in mysql
    assert (
        mysql.index("DELIMITER //") < mysql.index("CREATE PROCEDURE") < mysql.index("DELIMITER ;")
    )


@pytest.mark.parametrize("dialect", DIALECTS)
def test_expiry_procedure_text_is_in_the_script(dialect: str) -> None:
    script = render_expiry_job(dialect)
    for statement in expiry_procedure_sql(dialect):
        assert statement in script


def test_oracle_expiry_procedure_mirrors_the_python_rule() -> None:
    text = expiry_procedure_sql("oracle")[-1]
    for needle in (
        "SYS_EXTRACT_UTC(SYSTIMESTAMP)",
        "v_cutoff := v_now - NUMTODSINTERVAL(p_days, 'DAY') - c_touch_interval;",
        "c_touch_interval CONSTANT INTERVAL DAY TO SECOND := NUMTODSINTERVAL(3600, 'SECOND');",
        "-- dbmemory.store.touches.TOUCH_INTERVAL",
        "IF p_days IS NULL OR p_days * 86400 < 3600 OR p_days > 100000 THEN",
        "f.expiry_exempt = 0",
        "f.last_accessed_at < v_cutoff",
        "r.file_id = f.file_id AND r.read_at >= v_cutoff",
        "LOCK TABLE dbm_job_locks IN EXCLUSIVE MODE;",
        "FOR UPDATE SKIP LOCKED;",
        "FETCH c_stores BULK COLLECT INTO v_ids LIMIT c_batch_size;",
        "BULK COLLECT INTO v_file_ids, v_store_ids, v_paths, v_sizes;",
        "'expire', 'expiry-job'",
        "RAISE_APPLICATION_ERROR",
        "COMMIT;",
    ):
        assert needle in text, needle
    assert "body" not in text.lower(), "the job never reads the CLOB"
    assert "FETCH FIRST" not in text, "ORA-02014 with FOR UPDATE"


def test_the_oracle_job_starts_in_a_named_time_zone_region() -> None:
    script = render_expiry_job("oracle")
    assert "start_date      => SYSTIMESTAMP AT TIME ZONE 'UTC'," in script


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_expiry_procedure_carries_the_python_rule(dialect: str) -> None:
    """Days check, cutoff with the touch interval, the job lock, NOT EXISTS a recorded read,
    the rule again in the delete, the orphan purge: rendered from the Python constants."""
    text = "\n".join(expiry_procedure_sql(dialect))
    assert f"p_days * 86400 < {int(TOUCH_INTERVAL.total_seconds())}" in text
    assert "days must be a number of at least 0.0416667" in text
    assert "dbmemory.store.touches.TOUCH_INTERVAL" in text
    assert "dbm_job_locks" in text
    assert text.count("NOT EXISTS (SELECT 1 FROM dbm_file_reads r") == 2, "select and delete"
    assert "r.read_at < v_cutoff" in text, "old orphaned reads are purged"


# -- live: run the scripts with the database's own client --------------------------------------






_PG_CRON_STUB = """
CREATE SCHEMA cron;
CREATE TABLE cron.calls (job_name text, schedule text, command text);
CREATE FUNCTION cron.schedule(job_name text, schedule text, command text) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO cron.calls VALUES (job_name, schedule, command) RETURNING 1::bigint
$$;
"""


def test_scripts_install_schedule_and_uninstall_with_the_database_client(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    url = make_empty_database()
    scripts = sqlgen.render_all()
    folder = "postgresql" if server_name == "postgres" else "mysql"

    run_client(server_name, url, scripts[f"{folder}/install.sql"])
    engine = create_engine(url)
    try:
        assert migrate.current(engine) == migrate.head()
        inspector = sa.inspect(engine)
        for table in schema.metadata.sorted_tables:
            only_here = schema.BACKEND_ONLY_COLUMNS.get(engine.dialect.name, frozenset())
            columns = [
                c["name"] for c in inspector.get_columns(table.name) if (table.name, c["name"]) not in only_here
            ]
            assert columns == [c.name for c in table.columns], table.name

        if server_name == "postgres":  # pg_cron is not installed here: record the call instead
            run_client(server_name, url, _PG_CRON_STUB)
        run_client(server_name, url, scripts[f"{folder}/expiry_job.sql"])
        with engine.connect() as c:
            if server_name == "postgres":
                calls = c.exec_driver_sql(
                    "SELECT job_name, schedule, command FROM cron.calls"
                ).all()
                assert [tuple(r) for r in calls] == [
                    ("dbm-expire-files", "15 3 * * *", "CALL dbm_expire_files(30)")
                ]
            else:
                assert c.exec_driver_sql("SELECT dbm_expiry_days()").scalar() == 30
                events = c.exec_driver_sql(
                    "SELECT event_name, interval_value, interval_field, event_definition "
                    "FROM information_schema.events WHERE event_schema = DATABASE()"
                ).all()
                assert len(events) == 1
                assert events[0][0] == "dbm_expire_files_job"
                assert (str(events[0][1]), events[0][2]) == ("1", "DAY")
                assert "dbm_expire_files(dbm_expiry_days()" in events[0][3]

        # The scheduled command itself runs (autocommit, as the scheduler runs it).
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            if server_name == "postgres":
                assert c.exec_driver_sql("CALL dbm_expire_files(30)").scalar_one() == 0
            else:
                c.exec_driver_sql("CALL dbm_expire_files(dbm_expiry_days(), @dbm_expired)")
                assert c.exec_driver_sql("SELECT @dbm_expired").scalar_one() == 0

        # the memory API with its owner, definer and roles: uninstall.sql removes them too
        result = CliRunner().invoke(app, ["db", "install-api", "--roles", "--url",
                                          url.render_as_string(hide_password=False)])
        assert result.exit_code == 0, result.output
        run_client(server_name, url, scripts[f"{folder}/uninstall.sql"])
        base = derived_role_base(url.database or "")
        with engine.connect() as c:
            if server_name == "postgres":
                left = c.execute(sa.text(
                    "SELECT nspname FROM pg_namespace WHERE nspname = 'dbm_memory'"
                    " UNION ALL SELECT rolname FROM pg_roles WHERE rolname LIKE :b"),
                    {"b": base + "%"}).scalars().all()
            else:
                left = c.execute(sa.text("SELECT user FROM mysql.user WHERE user LIKE :b"),
                                 {"b": base + "%"}).scalars().all()
            assert left == []
        inspector = sa.inspect(engine)
        assert [t for t in inspector.get_table_names() if t.startswith("dbm")] == []
        assert [v for v in inspector.get_view_names() if v.startswith("dbm")] == []
        with engine.connect() as c:
            if server_name == "postgres":
                sql = "SELECT count(*) FROM pg_proc WHERE proname = 'dbm_expire_files'"
            else:
                sql = (
                    "SELECT count(*) FROM information_schema.routines "
                    "WHERE routine_schema = DATABASE() AND LEFT(routine_name, 4) = 'dbm_'"
                )
            assert c.exec_driver_sql(sql).scalar() == 0
    finally:
        engine.dispose()


# -- live: the expiry procedure deletes exactly what the Python rule deletes --------------------











def _audit_store_ids_match(engine: Engine) -> bool:
    a, s = schema.audit_events, schema.stores
    with engine.connect() as c:
        bad = c.execute(
            sa.select(sa.func.count())
            .select_from(a.outerjoin(s, s.c.store_key == a.c.store_key))
            .where(sa.or_(s.c.store_id.is_(None), s.c.store_id != a.c.store_id))
        ).scalar_one()
        times = c.execute(sa.select(a.c.created_at)).scalars().all()
    now = dt.datetime.now(dt.timezone.utc)
    return bad == 0 and all(abs(now - t) < dt.timedelta(minutes=10) for t in times)








def _dialect_folder(server_name: str) -> str:
    return "postgresql" if server_name == "postgres" else "mysql"


@pytest.mark.parametrize("days", [DAYS, DAYS + 0.5])
def test_expiry_procedure_deletes_exactly_what_the_python_rule_deletes(
    server_engine: Engine, server_name: str, days: float
) -> None:
    install_procedure(server_engine, _dialect_folder(server_name))
    rows = seed_rows()
    seed(server_engine, rows, dt.datetime.now(dt.timezone.utc))

    expired = call_procedure(server_engine, server_name, days)

    remaining, events = snapshot(server_engine)
    want_remaining, want_events = expected(rows, days)
    assert expired == len(want_events) > EXPIRY_BATCH_SIZE * 2
    assert remaining == want_remaining
    assert events == want_events
    assert _audit_store_ids_match(server_engine)
    assert call_procedure(server_engine, server_name, days) == 0


@pytest.mark.parametrize("days", [0, -3, 0.001, 0.04])
def test_expiry_procedure_rejects_days_below_the_touch_interval(
    server_engine: Engine, server_name: str, days: float
) -> None:
    install_procedure(server_engine, _dialect_folder(server_name))
    seed(server_engine, seed_rows()[:4], dt.datetime.now(dt.timezone.utc))
    with pytest.raises(sa.exc.DBAPIError, match="days must be a number of at least 0.0416667"):
        call_procedure(server_engine, server_name, days)
    assert len(snapshot(server_engine)[0]) == 4


def test_expiry_procedure_keeps_a_file_read_through_dbmemory_and_forgets_reads_of_gone_files(
    server_engine: Engine, server_name: str
) -> None:
    """A file read through the MEMORY tool (its read recorded in dbm_file_reads) survives the
    SQL job; old recorded reads of files that no longer exist are purged."""
    from dbmemory import enable_for_agent
    from dbmemory.tool import MemoryTool

    install_procedure(server_engine, _dialect_folder(server_name))
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=90)
    with server_engine.begin() as c:
        enable_for_agent(c, "JOB")
        tool = MemoryTool(c, "JOB")
        for name in ("read", "unread"):
            tool.execute({"command": "create", "path": f"/memories/{name}.md", "file_text": name})
        c.execute(sa.update(schema.files).values(last_accessed_at=old))
        c.execute(sa.insert(schema.file_reads).values(store_id=1, file_id=10**9, read_at=old))
    with server_engine.connect() as c:
        assert "read" in MemoryTool(c, "JOB").execute({"command": "view", "path": "/memories/read.md"})
        c.commit()
    assert call_procedure(server_engine, server_name, 1) == 1
    remaining, events = snapshot(server_engine)
    assert remaining == {("agent:JOB", "/memories/read.md")}
    assert [e[3] for e in events if e[0] == "expire"] == ["/memories/unread.md"]
    with server_engine.connect() as c:
        assert 10**9 not in set(c.execute(sa.select(schema.file_reads.c.file_id)).scalars())


def test_expiry_procedure_and_files_expire_files_delete_and_audit_the_same(
    server_engine: Engine, server_name: str, reset_tables: Callable[[Engine], None]
) -> None:
    try:
        from dbmemory.store.expiry import expire_files
    except ImportError as exc:
        pytest.skip(
            f"dbmemory.store.files is not importable yet ({exc}): cannot compare with the Python API"
        )

    rows = seed_rows()
    seed(server_engine, rows, dt.datetime.now(dt.timezone.utc))
    with server_engine.connect() as c:
        python_count = expire_files(c, days=DAYS)
        c.commit()
    by_python = snapshot(server_engine)

    reset_tables(server_engine)
    install_procedure(server_engine, _dialect_folder(server_name))
    seed(server_engine, rows, dt.datetime.now(dt.timezone.utc))
    sql_count = call_procedure(server_engine, server_name, DAYS)
    by_sql = snapshot(server_engine)

    assert sql_count == python_count
    assert by_sql[0] == by_python[0], "the same files remain"
    # Same events except the actor: the database job signs as 'expiry-job', so an auditor
    # can tell it from the Python API / CLI (which sign their own actor name).
    assert {e[1] for e in by_sql[1]} == {EXPIRY_ACTOR}
    without_actor = [(e[0], *e[2:]) for e in by_sql[1]]
    assert without_actor == [(e[0], *e[2:]) for e in by_python[1]], "the same audit events"
