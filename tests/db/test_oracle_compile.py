"""Oracle 19c readiness without an Oracle server: compile the schema's DDL and every statement
the package runs with the oracle dialect (set up as 19c) and check identifiers and CLOB use.

Rules (DESIGN.md section 5, DATABASES.md "Oracle"): no identifier is an Oracle reserved word,
quoted or not; none is longer than 30 characters; nothing is quoted (a quoted name is
case-sensitive on Oracle); the CLOB column ``body`` is never compared, sorted, grouped or
DISTINCTed; no ``IS 0``/``IS 1`` (``col.is_(False)``), no boolean literals and no ``LIMIT``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.schema import CreateIndex, CreateTable

from dbmemory.db import schema
from dbmemory.db.dialect.base import lock_wait_seconds
from dbmemory.db.dialect.oracle import oracle19_dialect
from dbmemory.sqlgen.install import render_install
from dbmemory.store.statements.examples import example_statements
from oracle_checks import (
    CLOB_COLUMNS,
    FORBIDDEN,
    MAX_IDENTIFIER,
    compiled,
    regex_problems,
    sqlglot_problems,
    strip_literals,
)


def test_the_reserved_word_list_covers_what_designers_trip_on() -> None:
    for word in (
        "USER",
        "SESSION",
        "FILE",
        "SIZE",
        "LEVEL",
        "MODE",
        "COMMENT",
        "ACCESS",
        "COLUMN",
        "ROWID",
        "UID",
        "ROWNUM",
        "ROWS",
        "ROW",
        "SYSDATE",
        "TYPE",
    ):
        assert word in FORBIDDEN
    assert {"body", "episode_text"} == CLOB_COLUMNS


def _schema_identifiers() -> Iterator[tuple[str, str]]:
    """(kind, name) of every name the schema, the view, the version table and the expiry
    scripts put into the database."""
    yield "view", schema.FILE_LIST_VIEW
    yield "view", schema.AUDIT_REPORT_VIEW
    yield "procedure", "dbm_expire_items"
    yield "table", schema.VERSION_TABLE
    yield "constraint", f"{schema.VERSION_TABLE}_pkc"
    yield "procedure", "dbm_expire_files"
    yield "job", "DBM_EXPIRE_FILES_JOB"
    for table in schema.metadata.tables.values():
        yield "table", table.name
        for column in table.columns:
            yield "column", f"{table.name}.{column.name}"
        for constraint in table.constraints:
            yield "constraint", str(constraint.name)
        for index in table.indexes:
            yield "index", str(index.name)


@pytest.mark.parametrize(("kind", "name"), list(_schema_identifiers()), ids=lambda v: str(v))
def test_schema_identifier_is_not_reserved_and_fits_30_chars(kind: str, name: str) -> None:
    bare = name.split(".")[-1]
    assert bare.upper() not in FORBIDDEN, f"{kind} {name} is an Oracle reserved word or keyword"
    assert len(bare) <= MAX_IDENTIFIER, f"{kind} {name} is longer than {MAX_IDENTIFIER} characters"
    assert re.fullmatch(r"[a-z][a-z0-9_]*|[A-Z][A-Z0-9_]*", bare), f"{kind} {name} needs quoting"


def _ddl() -> list[tuple[str, str]]:
    dialect = oracle19_dialect()
    out = []
    for table in schema.metadata.sorted_tables:
        out.append((table.name, str(CreateTable(table).compile(dialect=dialect))))
        for index in table.indexes:
            out.append((str(index.name), str(CreateIndex(index).compile(dialect=dialect))))
    return out


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$#]*")
_DDL_WORDS = frozenset(
    [
        "CREATE",
        "TABLE",
        "INDEX",
        "ON",
        "NOT",
        "NULL",
        "CONSTRAINT",
        "PRIMARY",
        "KEY",
        "UNIQUE",
        "FOREIGN",
        "REFERENCES",
        "DELETE",
        "CASCADE",
        "GENERATED",
        "BY",
        "DEFAULT",
        "AS",
        "IDENTITY",
        "NUMBER",
        "VARCHAR2",
        "CHAR",
        "CLOB",
        "INTEGER",
        "SMALLINT",
        "TIMESTAMP",
        "CHECK",
        "IN",
    ]
)


@pytest.mark.parametrize(("name", "ddl"), _ddl(), ids=[n for n, _ in _ddl()])
def test_oracle_ddl_has_no_reserved_or_quoted_identifier(name: str, ddl: str) -> None:
    assert '"' not in ddl, f"quoted identifier in {ddl}"
    identifiers = {w for w in _IDENT.findall(ddl) if w.upper() not in _DDL_WORDS}
    for word in identifiers:
        assert word.upper() not in FORBIDDEN, f"{word!r} in {ddl}"
        assert len(word) <= MAX_IDENTIFIER, word
    assert "DATE " not in ddl.replace("UPDATE", ""), "DATE loses fractions: use TIMESTAMP"
    assert "BOOLEAN" not in ddl, "19c has no BOOLEAN column type"
    assert not re.search(r"VARCHAR2(?!\(\d+ CHAR\))", ddl), "VARCHAR2 needs a length in CHAR"
    for column in CLOB_COLUMNS:
        if ddl.startswith("CREATE INDEX") or ddl.startswith("CREATE UNIQUE INDEX"):
            assert not re.search(rf"\b{column}\b", ddl), "no index on a CLOB"
        assert not re.search(rf"UNIQUE \([^)]*\b{column}\b", ddl), "no unique key on a CLOB"


def test_oracle_ddl_keeps_varchar2_within_4000_bytes() -> None:
    for _, ddl in _ddl():
        for length in re.findall(r"VARCHAR2\((\d+) CHAR\)", ddl):
            # AL32UTF8 needs up to 4 bytes a character; without MAX_STRING_SIZE=EXTENDED a
            # VARCHAR2 holds 4,000 bytes, so 1,000 characters is the most that always fits.
            assert int(length) <= 1000, ddl


def test_oracle_install_script_uses_only_checked_identifiers() -> None:
    text = render_install("oracle")
    assert '"' not in text
    created = re.findall(r"^CREATE (?:TABLE|VIEW|INDEX) (\w+)", text, flags=re.MULTILINE)
    for name in created:
        assert name.upper() not in FORBIDDEN and len(name) <= MAX_IDENTIFIER, name


# -- every statement the package runs ----------------------------------------------------------











def _statements() -> dict[str, sa.sql.expression.Executable]:
    return example_statements()


def test_every_statement_compiles_for_oracle_19c() -> None:
    examples = _statements()
    assert examples, "example_statements() returned nothing"
    failures: dict[str, list[str]] = {}
    for name, statement in examples.items():
        try:
            sql = compiled(statement)
        except Exception as exc:
            failures[name] = [f"does not compile for Oracle 19c: {type(exc).__name__}: {exc}"]
            continue
        problems = regex_problems(sql) + sqlglot_problems(sql)
        if problems:
            failures[name] = [*problems, sql]
    assert not failures, "\n\n".join(f"{n}:\n  " + "\n  ".join(p) for n, p in failures.items())


def test_the_checks_catch_what_they_are_meant_to_catch() -> None:
    files = schema.files
    bad = {
        "clob_compared": sa.select(files.c.file_id).where(files.c.body == "x"),
        "clob_sorted": sa.select(files.c.file_id).order_by(files.c.body),
        "clob_distinct": sa.select(files.c.body).distinct(),
        "clob_grouped": sa.select(sa.func.count()).select_from(files).group_by(files.c.body),
        "is_false": sa.select(files.c.file_id).where(files.c.expiry_exempt.is_(False)),
        "is_not_false": sa.select(files.c.file_id).where(files.c.expiry_exempt.is_not(False)),
        "reserved_alias": sa.select(files.c.char_count.label("size")),
        "reserved_bind": sa.select(files.c.file_id).where(
            files.c.char_count == sa.bindparam("level")
        ),
    }
    for name, statement in bad.items():
        sql = compiled(statement)
        assert regex_problems(sql) or sqlglot_problems(sql), f"{name} slipped through: {sql}"
    fine = sa.update(files).where(files.c.file_id == 1).values(body="new")
    sql = compiled(fine)
    assert not regex_problems(sql) and not sqlglot_problems(sql), sql
    not_null = sa.select(files.c.file_id).where(files.c.path_hash.is_not(None))
    assert not regex_problems(compiled(not_null)), compiled(not_null)


# -- flags: one type on 19c and 23ai -----------------------------------------------------------

FLAG_COLUMNS = {
    ("dbm_files", "expiry_exempt", "ck_dbm_files_exempt"),
    ("dbm_agents", "memory_enabled", "ck_dbm_agents_enabled"),
    ("dbm_user_settings", "memory_enabled", "ck_dbm_user_settings_enabled"),
    ("dbm_memory_switches", "memory_on", "ck_dbm_memory_switches_on"),
}


def _oracle23_dialect() -> sa.engine.Dialect:
    """An unconnected Oracle dialect as SQLAlchemy assumes it: 23ai, native BOOLEAN."""
    from sqlalchemy.dialects import oracle

    dialect = oracle.dialect()
    assert dialect.supports_native_boolean
    return dialect


@pytest.mark.parametrize("version", ["19c", "23ai"])
def test_flag_columns_are_number_1_with_a_check_on_19c_and_23ai(version: str) -> None:
    dialect = oracle19_dialect() if version == "19c" else _oracle23_dialect()
    for table_name, column, check in FLAG_COLUMNS:
        ddl = str(CreateTable(schema.metadata.tables[table_name]).compile(dialect=dialect))
        assert re.search(rf"^\s*{column} NUMBER\(1\) NOT NULL, ?$", ddl, flags=re.M), ddl
        assert f"CONSTRAINT {check} CHECK ({column} IN (0, 1))" in ddl, ddl
        assert "BOOLEAN" not in ddl and "SMALLINT" not in ddl, ddl


def test_install_script_declares_every_flag_as_number_1_with_its_check() -> None:
    text = render_install("oracle")
    for _, column, check in FLAG_COLUMNS:
        assert f"CONSTRAINT {check} CHECK ({column} IN (0, 1))" in text
    assert text.count(" NUMBER(1) NOT NULL,") == len(FLAG_COLUMNS)
    assert "BOOLEAN" not in text and "SMALLINT" not in text


@pytest.mark.parametrize("dialect_name", ["postgresql", "mysql", "sqlite"])
def test_flag_columns_keep_their_boolean_ddl_and_no_check_elsewhere(dialect_name: str) -> None:
    from dbmemory.db import migrate

    dialect = migrate.offline_dialect(dialect_name)
    expected = {"postgresql": "BOOLEAN", "mysql": "BOOL", "sqlite": "BOOLEAN"}[dialect_name]
    for table_name, column, check in FLAG_COLUMNS:
        ddl = str(CreateTable(schema.metadata.tables[table_name]).compile(dialect=dialect))
        assert re.search(rf"^\s*{column} {expected} NOT NULL, ?$", ddl, flags=re.M), ddl
        assert check not in ddl and "CHECK" not in ddl, ddl


def test_flags_bind_as_0_and_1_and_read_back_as_bool_on_oracle_19c_and_23ai() -> None:
    for dialect in (oracle19_dialect(), _oracle23_dialect()):
        flag = schema.files.c.expiry_exempt.type
        bind = flag._cached_bind_processor(dialect)  # what execution uses
        sent = [bind(v) if bind else v for v in (True, False, None)]
        assert sent == [1, 0, None] and all(type(v) is int for v in sent[:2])
        result = flag._cached_result_processor(dialect, None)
        assert result is not None
        assert [result(1), result(0), result(None)] == [True, False, None]


@pytest.mark.parametrize("version", ["19c", "23ai"])
def test_flag_comparisons_render_0_and_1_never_a_boolean_or_is(version: str) -> None:
    dialect = oracle19_dialect() if version == "19c" else _oracle23_dialect()
    files, agents = schema.files, schema.agents
    cases = {
        files.c.expiry_exempt == sa.false(): "dbm_files.expiry_exempt = 0",
        files.c.expiry_exempt != sa.true(): "dbm_files.expiry_exempt != 1",
        agents.c.memory_enabled == sa.true(): "dbm_agents.memory_enabled = 1",
    }
    for expr, sql in cases.items():
        assert str(expr.compile(dialect=dialect)) == sql
    for name, statement in _statements().items():
        compiled = statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        text = strip_literals(str(compiled))
        assert not re.search(r"\b(true|false)\b", text, flags=re.IGNORECASE), (name, text)
        assert not re.search(r"\bIS\s+(NOT\s+)?(?!NULL\b)[\w:]", text), (name, text)
        for bind in compiled.binds.values():
            if isinstance(bind.type, type(files.c.expiry_exempt.type)):
                processor = bind.type._cached_bind_processor(dialect)
                assert processor is not None and processor(True) == 1, (name, bind.key)


# -- python-oracledb's error classes: the opt-out check ----------------------------------------


def _oracle_error(code: int, message: str) -> Exception:
    """The exception python-oracledb raises for ``ORA-<code>``: ``oracledb.DatabaseError`` for
    ORA-00942/ORA-00904 (only a few codes map to IntegrityError/OperationalError)."""
    oracledb = pytest.importorskip("oracledb")
    from oracledb import errors as oracle_errors

    error = oracle_errors._Error(f"ORA-{code:05d}: {message}", code=code)
    exc = error.exc_type(error)
    assert type(exc) is oracledb.DatabaseError
    return exc


@pytest.fixture
def settings_engine(tmp_path: Path) -> Iterator[sa.engine.Engine]:
    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import upgrade

    engine = create_engine(f"sqlite:///{(tmp_path / 'optout.db').as_posix()}")
    upgrade(engine)
    yield engine
    engine.dispose()


def _raise_on_settings_read(engine: sa.engine.Engine, code: int, message: str) -> None:
    """Make every read of dbm_user_settings fail the way SQLAlchemy reports a python-oracledb
    error: ``sqlalchemy.exc.DatabaseError`` (not ProgrammingError/OperationalError) with the
    SQL text in its message."""

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _fail(conn: Any, cursor: Any, statement: str, params: Any, *args: Any) -> None:
        if "FROM dbm_user_settings" in statement:
            raise sa.exc.DatabaseError(statement, params, _oracle_error(code, message))


def test_opt_out_check_takes_an_oracle_missing_table_as_nobody_opted_out(
    settings_engine: sa.engine.Engine,
) -> None:
    from dbmemory.profile.optout import is_user_memory_enabled

    with settings_engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE dbm_user_settings")
    _raise_on_settings_read(settings_engine, 942, "table or view does not exist")
    with settings_engine.connect() as conn:
        assert is_user_memory_enabled(conn, "u1") is True
        conn.execute(sa.select(schema.stores.c.store_id)).all()  # the transaction is usable


def test_opt_out_check_reports_other_oracle_errors_without_sql_text(
    settings_engine: sa.engine.Engine,
) -> None:
    from dbmemory.errors import StorageError
    from dbmemory.profile.optout import is_user_memory_enabled
    from helpers import assert_no_leak

    _raise_on_settings_read(settings_engine, 904, '"MEMORY_ENABLED": invalid identifier')
    with settings_engine.connect() as conn, pytest.raises(StorageError) as raised:
        is_user_memory_enabled(conn, "u1")
    assert_no_leak(str(raised.value))
    assert "dbm_user_settings" not in str(raised.value) and "SELECT" not in str(raised.value)
    assert isinstance(raised.value.__cause__, sa.exc.DatabaseError)


def test_locking_reads_wait_at_most_the_lock_timeout_on_oracle() -> None:
    """Oracle has no session lock timeout: dbmemory's FOR UPDATE statements compile with
    ``WAIT n`` (the engine's lock timeout in seconds, default 5), SKIP LOCKED and NOWAIT
    stay as they are, and statements on other tables are untouched."""
    from dbmemory.store.statements import reads as st

    d = oracle19_dialect()
    for stmt in (st.LOCK_STORE_BY_ID, st.LOCK_STORE_BY_KEY, st.SELECT_FILE_FOR_UPDATE, st.LOCK_STORE_WITH_FILE):
        sql = str(stmt.compile(dialect=d))
        assert sql.rstrip().endswith("FOR UPDATE WAIT 5"), sql
    configured = oracle19_dialect()
    configured._dbmemory_lock_wait_s = lock_wait_seconds(1500)  # type: ignore[attr-defined]
    assert str(st.LOCK_STORE_BY_ID.compile(dialect=configured)).endswith("FOR UPDATE WAIT 2")
    skip = str(sa.select(schema.files.c.file_id).with_for_update(skip_locked=True).compile(dialect=d))
    assert skip.endswith("FOR UPDATE SKIP LOCKED"), skip
    nowait = str(sa.select(schema.files.c.file_id).with_for_update(nowait=True).compile(dialect=d))
    assert nowait.endswith("FOR UPDATE NOWAIT"), nowait
    other = sa.Table("app_orders", sa.MetaData(), sa.Column("order_id", sa.Integer))
    assert str(sa.select(other).with_for_update().compile(dialect=d)).endswith("FOR UPDATE")
    plain = str(sa.select(schema.files.c.file_id).compile(dialect=d))
    assert "WAIT" not in plain and "FOR UPDATE" not in plain
