"""``sql/<dialect>/api.sql``: generated (drift-checked with the other scripts in
test_sql_scripts.py), pure ASCII, runnable with psql and the mysql client, installable by
``dbmemory db install-api``, with a role that may execute the API and cannot touch the tables;
the Oracle package's shape reviewed against DATABASES.md."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL
from typer.testing import CliRunner

import dbmemory
from dbmemory import sqlgen
from dbmemory.db import migrate, schema
from dbmemory.db.engine import create_engine
from dbmemory.sqlgen._common import DIALECTS
from dbmemory.sqlgen.api import derived_role_names, render_api
from dbmemory.sqlgen.api_common import API_CALLS, API_ERRORS
from dbmemory.sqlgen.oracle.api import oracle_statements
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file
from sql_clients import run_client  # the database clients, as for install.sql


@pytest.mark.parametrize("dialect", DIALECTS)
def test_api_scripts_are_ascii_and_name_every_call_and_error(dialect: str) -> None:
    text = render_api(dialect)
    assert text.isascii()
    for call in API_CALLS:
        assert re.search(rf"\bdbm_memory[._]{call}\b|(FUNCTION|PROCEDURE) {call}\b", text), call
    for error in API_ERRORS:
        assert error.name in text and (str(error.number) in text or error.sqlstate in text)


def test_oracle_package_spec_has_scope_constants_and_named_exceptions() -> None:
    spec, body = oracle_statements()
    for scope in ("agent", "user", "session", "shared", "global", "context"):
        assert f"c_scope_{scope}" in spec
    for error in API_ERRORS:
        assert f"PRAGMA EXCEPTION_INIT(e_{error.name}, -{error.number});" in spec
    assert "AUTHID DEFINER" in spec
    # DATABASES.md, Oracle: no COMMIT/ROLLBACK, no LIMIT, no FETCH FIRST with FOR UPDATE, no
    # boolean literals in SQL, no comparison of the CLOB body (DBMS_LOB.COMPARE instead)
    for text in (spec, body):
        assert not re.search(r"\b(COMMIT|ROLLBACK)\b", text)
        sql_only = text.replace("BULK COLLECT INTO v_ids LIMIT c_batch_size", "")  # PL/SQL's own
        assert not re.search(r"\bLIMIT\b|FETCH FIRST", sql_only)
        assert not re.search(r"(?<!SET )\bbody\s*(=|<>)", text)
    assert "DBMS_LOB.COMPARE(v_body, p_text)" in body
    script = render_api("oracle")
    # SQL*Plus substitutes '&' everywhere (comments too) while DEFINE is on: none before it
    before, _, after = script.partition("SET DEFINE ON")
    assert "&" not in before and "&api_role" in after
    assert script.index("SET DEFINE OFF") < script.index("CREATE OR REPLACE PACKAGE")
    assert script.count("\n/\n") >= 4 and "END dbm_memory;\n/" in script


def test_oracle_package_names_only_existing_tables_and_columns() -> None:
    _, body = oracle_statements()
    tables = set(re.findall(r"\b(dbm_[a-z_]+)\b", body)) - {"dbm_memory"}
    assert tables <= set(schema.metadata.tables), tables - set(schema.metadata.tables)
    for table, cols in re.findall(r"INSERT INTO (dbm_\w+)\s*\(([^)]*)\)", body):
        names = {c.strip() for c in cols.split(",")}
        assert names <= set(schema.metadata.tables[table].c.keys()), (table, names)


def test_oracle_plain_statements_compile_with_the_oracle_dialect() -> None:
    """The SQL statements of the package that SQLAlchemy can express, compiled for 19c."""
    from dbmemory.db.dialect.oracle import oracle19_dialect

    files, stores_t, audit = schema.files, schema.stores, schema.audit_events
    statements = [
        sa.select(stores_t.c.store_key, stores_t.c.max_file_chars, stores_t.c.max_files,
                  stores_t.c.max_store_chars).where(stores_t.c.store_id == sa.bindparam("p")).with_for_update(),
        sa.select(files.c.file_id, files.c.char_count, files.c.version_no, files.c.body)
        .where(files.c.store_id == sa.bindparam("p"), files.c.path_hash == sa.bindparam("h")).with_for_update(),
        sa.insert(audit).values({c: sa.bindparam(c) for c in (
            "store_id", "store_key", "file_path", "action_name", "actor_name", "chars_before",
            "chars_after", "detail_text", "created_at")}),
        sa.select(sa.func.lower(sa.func.rawtohex(sa.func.standard_hash(sa.bindparam("p"), "SHA256")))),
    ]
    dialect = oracle19_dialect()
    for stmt in statements:
        text = str(stmt.compile(dialect=dialect))
        assert "LIMIT" not in text and '"' not in text, text


def _folder(server_name: str) -> str:
    return "postgresql" if server_name == "postgres" else "mysql"


def test_api_script_runs_with_the_client_and_its_role_cannot_touch_the_tables(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    url = make_empty_database()
    scripts = sqlgen.render_all()
    folder = _folder(server_name)
    run_client(server_name, url, scripts[f"{folder}/install.sql"])
    run_client(server_name, url, scripts[f"{folder}/api.sql"])
    run_client(server_name, url, scripts[f"{folder}/api.sql"])  # again: replaces it
    engine = create_engine(url)
    user, admin = derived_role_names(url.database or "")
    try:
        with engine.connect() as c:
            if server_name == "postgres":
                text = c.execute(sa.text("SELECT dbm_memory.get_memory_protocol()")).scalar()
                grants = c.execute(sa.text(
                    "SELECT has_table_privilege(:u, 'dbm_files', 'SELECT'),"
                    " has_function_privilege(:u, 'dbm_memory.list_files(bigint)', 'EXECUTE'),"
                    " has_function_privilege(:u, 'dbm_memory.expire_files(numeric, bigint)', 'EXECUTE'),"
                    " has_function_privilege(:a, 'dbm_memory.expire_files(numeric, bigint)', 'EXECUTE'),"
                    " has_function_privilege(:a, 'dbm_memory.list_files(bigint)', 'EXECUTE'),"
                    " has_table_privilege(:a, 'dbm_files', 'SELECT'),"
                    " has_function_privilege('public', 'dbm_memory.list_files(bigint)', 'EXECUTE')"),
                    {"u": user, "a": admin}).one()
                assert tuple(grants) == (False, True, False, True, False, False, False)
            else:
                text = c.execute(sa.text("SELECT dbm_memory_get_memory_protocol()")).scalar()
                # the mysql client script creates no role (install-api --roles does)
                assert c.execute(sa.text(
                    "SELECT COUNT(*) FROM mysql.user WHERE user IN (:u, :a)"),
                    {"u": user, "a": admin}).scalar() == 0
        assert text == dbmemory.get_memory_protocol()
    finally:
        engine.dispose()


def test_install_api_command_installs_grants_and_uninstalls(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    from dbmemory.cli import app

    url = make_empty_database()
    engine = create_engine(url)
    try:
        migrate.upgrade(engine)
        plain = url.render_as_string(hide_password=False)
        runner = CliRunner()
        result = runner.invoke(app, ["db", "install-api", "--url", plain, "--role", "dbm_api_test"])
        assert result.exit_code == 0, result.output
        assert "Installed the memory API" in result.output
        call = ("SELECT dbm_memory.get_memory_protocol()" if server_name == "postgres"
                else "SELECT dbm_memory_get_memory_protocol()")
        with engine.connect() as c:
            assert c.execute(sa.text(call)).scalar() == dbmemory.get_memory_protocol()
        bad = runner.invoke(app, ["db", "install-api", "--url", plain, "--role", "x; DROP"])
        assert bad.exit_code != 0
        result = runner.invoke(app, ["db", "uninstall-api", "--url", plain, "--json"])
        assert result.exit_code == 0, result.output
        with engine.connect() as c, pytest.raises(sa.exc.DBAPIError):
            c.execute(sa.text(call))
    finally:
        engine.dispose()


def test_install_api_refuses_sqlite(tmp_path: object) -> None:
    from dbmemory.cli import app

    result = CliRunner().invoke(app, ["db", "install-api", "--url", f"sqlite:///{tmp_path}/x.db"])
    assert result.exit_code != 0 and "SQLite" in result.output


def test_an_installed_api_does_not_stop_a_downgrade(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    from dbmemory.sqlgen.api import api_statements

    url = make_empty_database()
    engine = create_engine(url)
    try:
        migrate.upgrade(engine)
        with engine.connect() as c:
            cursor = c.connection.dbapi_connection.cursor()
            for statement in api_statements(_folder(server_name)):
                cursor.execute(statement)
            cursor.close()
            c.connection.dbapi_connection.commit()
        migrate.downgrade(engine, "base")  # no table is held by the API's signatures
        assert migrate.current(engine) is None
    finally:
        engine.dispose()


def _api_page() -> str:
    """The documentation page of the in-database API (docs/sql.md)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "sql.md").read_text(encoding="utf-8")
    assert text.startswith("# From SQL, APEX and ORDS\n")
    return text


def test_the_docs_error_table_is_the_api_errors() -> None:
    section = _api_page()
    for e in API_ERRORS:
        row = (f"| `{e.name}` | `-{e.number}` `dbm_memory.e_{e.name}` | `{e.sqlstate}` | "
               f"`45000`, errno `{e.number}` | `{e.python.__name__}` |")
        assert row in section, row
    assert "has not been run on a live Oracle server" in section
    assert "dbmemory db install-api" in section and "dbmemory db uninstall-api" in section


def test_the_docs_plpgsql_and_mysql_examples_run(server_engine: sa.engine.Engine, server_name: str) -> None:
    from dbmemory.sqlgen.api import api_statements

    blocks = re.findall(r"```sql\n(.*?)```", _api_page(), re.S)
    block = blocks[1] if server_name == "postgres" else blocks[2]
    with server_engine.connect() as c:
        raw = c.connection.dbapi_connection
        cursor = raw.cursor()
        for statement in api_statements(_folder(server_name)):
            cursor.execute(statement)
        raw.commit()
    with server_engine.connect() as c:  # a new user: the example opens the store itself
        raw = c.connection.dbapi_connection
        cursor = raw.cursor()
        statements = [block] if server_name == "postgres" else [
            s.strip() for s in block.split(";\n") if s.strip()
        ]
        for statement in statements:
            cursor.execute(statement)
        raw.commit()
    with server_engine.connect() as c:
        sid = find_store_id(c, "user:SUPPORT:c-42")
        assert get_file(c, sid, "/memories/tickets/T-7.md").text == "Refund sent"


def _plsql_sql_statements(body: str) -> list[str]:
    """The static SQL statements of a PL/SQL body (SELECT/INSERT/UPDATE/DELETE up to the ';'
    outside quotes), with the PL/SQL-only clauses (INTO variables, BULK COLLECT, RETURNING ...
    INTO) removed, so they read as plain Oracle SQL."""
    found = []
    for match in re.finditer(r"^\s*(SELECT|INSERT INTO|UPDATE|DELETE FROM)\b", body, re.M):
        start, quoted, i = match.start(1), False, match.start(1)
        while i < len(body):
            if body[i] == "'":
                quoted = not quoted
            elif body[i] == ";" and not quoted:
                break
            i += 1
        sql = body[start:i]
        sql = re.sub(r"\bBULK COLLECT INTO\b.*?(?=\bFROM\b|$)", "", sql, flags=re.S)
        sql = re.sub(r"\bRETURNING\b.*$", "", sql, flags=re.S)
        sql = re.sub(r"\bINTO\s+(?!dbm_)[\w.]+(\s*,\s*[\w.]+)*\s+(?=FROM)", "", sql, flags=re.S)
        found.append(sql)
    return found


def test_oracle_package_sql_statements_parse_as_oracle_and_never_compare_the_clob() -> None:
    from oracle_checks import sqlglot_problems

    _, body = oracle_statements()
    statements = _plsql_sql_statements(body)
    assert len(statements) > 30
    problems = {sql[:80]: p for sql in statements if (p := sqlglot_problems(sql))}
    assert not problems, problems
