"""Migrations on every backend: upgrade/downgrade round trips, the migrated schema equals
``dbmemory.db.schema``, the private version table, and the engine set-up they rely on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect, Engine

from dbmemory.core.clock import utcnow
from dbmemory.db import migrate, schema
from dbmemory.db.dialect.oracle import (
    ORACLE_EXISTS,
    ORACLE_SESSION_SQL,
    ddl_commits_transaction,
    oracle19_dialect,
    oracle_object_exists,
    oracle_session_listener,
)
from dbmemory.db.dialect.setup import configure_engine
from dbmemory.db.dialect.types import UtcDateTime
from dbmemory.db.engine import create_engine, normalize_url, redact_url
from dbmemory.errors import InvalidArgumentError, MissingDependencyError

TABLES = {
    "dbm_stores",
    "dbm_files",
    "dbm_agents",
    "dbm_audit_events",
    "dbm_user_settings",
    "dbm_file_reads",
    "dbm_job_locks",
    "dbm_items",
    "dbm_org_settings",
    "dbm_memory_switches",
    "dbm_item_marks",
    "dbm_episodes",
}


def _dbm_tables(engine: Engine) -> set[str]:
    # SQLite's FTS5 table of the episodes and its shadow tables are checked on their own
    return {
        t
        for t in sa.inspect(engine).get_table_names()
        if t.startswith("dbm_") and not t.startswith(schema.EPISODE_SEARCH_TABLE)
    }


def _views(engine: Engine) -> set[str]:
    return {v.lower() for v in sa.inspect(engine).get_view_names()}


# -- round trip -------------------------------------------------------------------------------


def test_upgrade_downgrade_upgrade_round_trip_reports_head_then_none(empty_engine: Engine) -> None:
    assert migrate.current(empty_engine) is None
    assert _dbm_tables(empty_engine) == set()

    migrate.upgrade(empty_engine)
    assert migrate.current(empty_engine) == migrate.head()
    assert _dbm_tables(empty_engine) == TABLES | {schema.VERSION_TABLE}
    assert schema.FILE_LIST_VIEW in _views(empty_engine)

    migrate.downgrade(empty_engine)
    assert migrate.current(empty_engine) is None
    assert _dbm_tables(empty_engine) <= {schema.VERSION_TABLE}
    assert schema.FILE_LIST_VIEW not in _views(empty_engine)

    migrate.upgrade(empty_engine)
    assert migrate.current(empty_engine) == migrate.head()
    assert _dbm_tables(empty_engine) == TABLES | {schema.VERSION_TABLE}


def test_upgrade_twice_is_a_no_op(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)
    migrate.upgrade(empty_engine)
    assert migrate.current(empty_engine) == migrate.head()


def test_version_table_is_dbm_alembic_version(engine: Engine) -> None:
    tables = set(sa.inspect(engine).get_table_names())
    assert schema.VERSION_TABLE == "dbm_alembic_version"
    assert "dbm_alembic_version" in tables
    assert "alembic_version" not in tables
    with engine.connect() as c:
        rows = c.execute(sa.text("SELECT version_num FROM dbm_alembic_version")).scalars().all()
    assert rows == [migrate.head()]


def test_current_accepts_a_connection_without_committing(engine: Engine) -> None:
    with engine.connect() as c:
        assert migrate.current(c) == migrate.head()


# -- the migrated schema is schema.metadata ----------------------------------------------------


def _category(type_: sa.types.TypeEngine, dialect: Dialect) -> tuple[str, int | None]:
    """A coarse, backend-independent description of a column type: (kind, length)."""
    if isinstance(type_, sa.types.TypeDecorator):
        type_ = type_.load_dialect_impl(dialect)
    mapping = getattr(type_, "_variant_mapping", None) or {}
    if dialect.name in mapping:
        type_ = mapping[dialect.name]
    if isinstance(type_, sa.Boolean):
        return ("bool", None)
    if isinstance(type_, sa.Integer):
        return ("int", None)
    if isinstance(type_, sa.Numeric) and not getattr(type_, "scale", None):
        return ("int", None)  # Oracle NUMBER(19) / INTEGER
    if isinstance(type_, sa.Numeric):
        return ("fixed", type_.scale)  # NUMERIC(p, s) reflects as NUMERIC or DECIMAL
    if isinstance(type_, (sa.DateTime, sa.TIMESTAMP)):
        return ("datetime", None)
    if isinstance(type_, (sa.Text, sa.CLOB)) or (
        isinstance(type_, sa.String) and type_.length is None
    ):
        return ("text", None)
    if isinstance(type_, sa.String):
        return ("str", type_.length)
    return (type(type_).__name__.lower(), None)


def _same_kind(
    expected: tuple[str, int | None], actual: tuple[str, int | None], dialect: Dialect
) -> bool:
    if expected == actual:
        return True
    # Without a native BOOLEAN (Oracle 19c SMALLINT, MySQL TINYINT(1)) a flag reflects as int.
    return (
        expected[0] == "bool"
        and actual[0] == "int"
        and dialect.name in ("oracle", "mysql", "mariadb")
    )


# ix_dbm_files_prefix (revision 0004) is an expression index, which SQLAlchemy does not reflect
# on SQLite and PostgreSQL (tests/store/test_counters.py checks that it is there and used)
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
@pytest.mark.parametrize("table_name", sorted(TABLES))
def test_migrated_table_matches_schema_metadata(engine: Engine, table_name: str) -> None:
    inspector = sa.inspect(engine)
    table = schema.metadata.tables[table_name]
    reflected = {
        c["name"].lower(): c
        for c in inspector.get_columns(table_name)
        if (table_name, c["name"].lower()) not in schema.BACKEND_ONLY_COLUMNS.get(engine.dialect.name, ())
    }

    assert list(reflected) == [c.name for c in table.columns], "column names and order"
    for column in table.columns:
        actual = reflected[column.name]
        assert bool(actual["nullable"]) == column.nullable, (
            f"{table_name}.{column.name} nullability"
        )
        want = _category(column.type, engine.dialect)
        got = _category(actual["type"], engine.dialect)
        assert _same_kind(want, got, engine.dialect), f"{table_name}.{column.name}: {want} != {got}"

    pk = inspector.get_pk_constraint(table_name)
    rowid = schema.SQLITE_ROWID_KEYS.get(table_name) if engine.dialect.name == "sqlite" else None
    want_pk = [rowid] if rowid else [c.name for c in table.primary_key]
    assert [c.lower() for c in pk["constrained_columns"]] == want_pk

    uniques = {
        tuple(c.lower() for c in u["column_names"])
        for u in inspector.get_unique_constraints(table_name)
    }
    for constraint in table.constraints:
        if isinstance(constraint, sa.UniqueConstraint):
            assert tuple(c.name for c in constraint.columns) in uniques

    indexes = {
        i["name"].lower(): [c.lower() for c in i["column_names"] if c is not None]
        for i in inspector.get_indexes(table_name)
    }
    for index in table.indexes:
        if rowid and [c.name for c in index.columns] == [rowid]:
            assert index.name not in indexes, f"{index.name}: the rowid is that index on SQLite"
            continue
        assert indexes.get(index.name) == [c.name for c in index.columns], index.name

    fks = {
        (tuple(c.lower() for c in fk["constrained_columns"]), fk["referred_table"].lower())
        for fk in inspector.get_foreign_keys(table_name)
    }
    for fk in table.foreign_key_constraints:
        assert (tuple(c.name for c in fk.columns), fk.referred_table.name) in fks


def test_mysql_body_is_longtext_and_keys_are_case_sensitive(
    engine: Engine, backend_name: str
) -> None:
    if backend_name != "mysql":
        pytest.skip("MySQL/MariaDB specific")
    with engine.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT table_name, column_name, data_type, collation_name "
                "FROM information_schema.columns WHERE table_schema = DATABASE() "
                "AND table_name LIKE 'dbm%'"
            )
        ).all()
    info = {(r[0].lower(), r[1].lower()): (r[2].lower(), r[3]) for r in rows}
    assert info[("dbm_files", "body")][0] == "longtext"
    for key in [
        ("dbm_files", "file_path"),
        ("dbm_stores", "store_key"),
        ("dbm_agents", "agent_code"),
    ]:
        assert info[key][1] == "utf8mb4_bin", key


def test_store_keys_differing_only_in_case_are_two_stores(engine: Engine) -> None:
    ts = utcnow()
    with engine.begin() as c:
        for key in ("user:A:Bob", "user:A:bob"):
            c.execute(
                sa.insert(schema.stores).values(
                    store_key=key, scope_name="user", agent_code="A", created_at=ts, updated_at=ts
                )
            )
    with engine.connect() as c:
        count = c.execute(sa.select(sa.func.count()).select_from(schema.stores)).scalar_one()
    assert count == 2


def test_file_list_view_lists_files_without_body(engine: Engine) -> None:
    ts = utcnow()
    with engine.begin() as c:
        store_id = c.execute(
            sa.insert(schema.stores).values(
                store_key="agent:A",
                scope_name="agent",
                agent_code="A",
                created_at=ts,
                updated_at=ts,
            )
        ).inserted_primary_key[0]
        c.execute(
            sa.insert(schema.files).values(
                store_id=store_id,
                file_path="/memories/a.md",
                path_hash="0" * 64,
                body="hello",
                char_count=5,
                version_no=1,
                expiry_exempt=False,
                created_at=ts,
                updated_at=ts,
                last_accessed_at=ts,
            )
        )
    with engine.connect() as c:
        result = c.execute(sa.text(f"SELECT * FROM {schema.FILE_LIST_VIEW}"))
        columns = [k.lower() for k in result.keys()]
        rows = result.all()
    assert "body" not in columns
    assert columns == [c.name for c in schema.file_list_view_select().selected_columns]
    assert len(rows) == 1 and rows[0][columns.index("file_path")] == "/memories/a.md"


@pytest.mark.parametrize("dialect_name", ["oracle", "postgresql", "mysql", "sqlite"])
def test_frozen_view_select_of_migration_equals_schema_view(dialect_name: str) -> None:
    import importlib.util

    path = migrate.MIGRATIONS_DIR / "versions" / "0001_initial.py"
    spec = importlib.util.spec_from_file_location("dbm_migration_0001", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dialect = migrate.offline_dialect(dialect_name)
    frozen = str(module.view_select().compile(dialect=dialect))
    current = str(schema.file_list_view_select().compile(dialect=dialect))
    assert frozen == current, "the view changed in schema.py: add a migration that recreates it"


# -- transactions ------------------------------------------------------------------------------


def test_other_connection_sees_only_committed_rows(
    engine: Engine, other_connection: Callable[..., AbstractContextManager[Connection]]
) -> None:
    ts = utcnow()
    row = {
        "agent_code": "A",
        "scope_name": "agent",
        "max_file_chars": 1,
        "max_files": 1,
        "memory_enabled": True,
        "created_at": ts,
        "updated_at": ts,
    }
    count = sa.select(sa.func.count()).select_from(schema.agents)
    with engine.connect() as writer, other_connection() as reader:
        writer.begin()
        writer.execute(sa.insert(schema.agents).values(**row))
        assert reader.execute(count).scalar_one() == 0
        writer.commit()
        assert reader.execute(count).scalar_one() == 1


def test_upgrade_joins_the_callers_open_transaction(
    empty_engine: Engine, backend_name: str
) -> None:
    if backend_name in ("mysql", "oracle"):
        pytest.skip("DDL commits implicitly on MySQL/MariaDB and Oracle")
    with empty_engine.connect() as c:
        c.begin()
        migrate.upgrade(c)
        assert c.in_transaction(), "upgrade must not end a transaction it did not open"
        assert migrate.current(c) == migrate.head()
        c.rollback()
    assert migrate.current(empty_engine) is None


def test_upgrade_on_an_idle_connection_commits_its_own_transaction(empty_engine: Engine) -> None:
    with empty_engine.connect() as c:
        migrate.upgrade(c)
        assert not c.in_transaction()
    assert migrate.current(empty_engine) == migrate.head()


def test_upgrade_and_current_accept_a_url(tmp_path: Path) -> None:
    url = f"sqlite:///{(tmp_path / 'by-url.db').as_posix()}"
    assert migrate.current(url) is None
    migrate.upgrade(url)
    assert migrate.current(url) == migrate.head()
    migrate.downgrade(url)
    assert migrate.current(url) is None


def test_nothing_migrates_on_import(tmp_path: Path) -> None:
    db = tmp_path / "untouched.db"
    env = {**os.environ, "DBMEMORY_URL": f"sqlite:///{db.as_posix()}"}
    code = (
        "import dbmemory, dbmemory.settings, dbmemory.db.engine, dbmemory.db.migrate, "
        "dbmemory.db.schema, dbmemory.sqlgen"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    assert not db.exists()


ALTERED_TABLES = {
    "dbm_stores": ("max_file_chars", "max_files", "max_store_chars"),
    "dbm_audit_events": ("org_id", "user_key", "item_id", "session_user_name"),
    "dbm_file_reads": ("store_id",),
}
"""Tables that a revision after their creation changed, with the columns it added."""

REKEYED_TABLES = {"dbm_files", "dbm_file_reads"}
"""Tables whose primary key revision 0007 changed (``(store_id, file_id)``)."""


@pytest.mark.parametrize("dialect_name", ["oracle", "postgresql", "mysql", "sqlite"])
def test_migration_ddl_is_exactly_schema_ddl(dialect_name: str) -> None:
    from sqlalchemy.schema import CreateIndex, CreateTable

    def norm(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip()

    dialect = migrate.offline_dialect(dialect_name)
    rendered = norm(migrate.offline_sql(dialect_name))
    for table in schema.metadata.sorted_tables:
        if table.name in REKEYED_TABLES:
            key = ", ".join(c.name for c in table.primary_key)
            if dialect_name != "sqlite" or table.name not in schema.SQLITE_ROWID_KEYS:
                assert f"CONSTRAINT pk_{table.name} PRIMARY KEY ({key})" in rendered, table.name
        if table.name in ALTERED_TABLES:
            # created by 0001, then given columns by a later revision: its CREATE TABLE is the
            # 0001 one, and every later column must appear as an ADD
            for column in ALTERED_TABLES[table.name]:
                if dialect_name == "sqlite" and table.name in REKEYED_TABLES:
                    continue  # rebuilt by the revision, checked below
                assert f"ADD {column}" in rendered or f"ADD COLUMN {column}" in rendered, column
            continue
        if table.name in REKEYED_TABLES:
            continue
        ddl = norm(str(CreateTable(table).compile(dialect=dialect)))
        assert ddl in rendered, f"{table.name}: the migration differs from schema.py\n{ddl}"
        for index in table.indexes:
            assert norm(str(CreateIndex(index).compile(dialect=dialect))) in rendered, index.name


@pytest.mark.parametrize("dialect_name", ["oracle", "postgresql", "mysql"])
def test_offline_sql_renders_both_directions(dialect_name: str) -> None:
    up = migrate.offline_sql(dialect_name)
    down = migrate.offline_sql(dialect_name, "downgrade")
    assert "CREATE TABLE dbm_files" in up and "CREATE VIEW dbm_file_list_v" in up
    assert "DROP TABLE dbm_files" in down and "DROP VIEW dbm_file_list_v" in down
    with pytest.raises(ValueError):
        migrate.offline_sql(dialect_name, "sideways")


# -- engine set-up ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg"),
        ("postgres://u@h/db", "postgresql+psycopg"),
        ("mysql://u@h/db", "mysql+pymysql"),
        ("mariadb://u@h/db", "mariadb+pymysql"),
        ("oracle://u:p@h:1521/?service_name=FREEPDB1", "oracle+oracledb"),
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2"),
        ("sqlite:///x.db", "sqlite"),
    ],
)
def test_urls_without_a_driver_get_dbmemorys_default_driver(given: str, driver: str) -> None:
    assert normalize_url(given).drivername == driver


def test_missing_driver_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name == "pymysql" or name.startswith("pymysql."):
            raise ModuleNotFoundError("No module named 'pymysql'")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MissingDependencyError) as info:
        create_engine("mysql://root:secret@127.0.0.1/test")
    assert "[mysql]" in str(info.value)
    assert "secret" not in str(info.value)
    assert info.value.code == "missing_dependency"


def test_unparseable_url_is_an_invalid_argument_without_echoing_it() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        create_engine("not a url with password hunter2")
    assert "hunter2" not in str(info.value)


def test_redact_url_hides_passwords() -> None:
    text = redact_url("postgresql://app:s3cret@db/app?password=x2&sslmode=require")
    assert "s3cret" not in text and "x2" not in text and "sslmode=require" in text


def test_in_memory_sqlite_engine_shares_one_database_across_connections() -> None:
    eng = create_engine("sqlite://")
    with eng.begin() as c:
        c.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        c.exec_driver_sql("INSERT INTO t VALUES (1)")
    with eng.connect() as c:
        assert c.exec_driver_sql("SELECT count(*) FROM t").scalar_one() == 1
    eng.dispose()


def test_no_url_uses_dbmemory_url_then_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dbmemory.settings import Settings, default_url

    monkeypatch.setenv("DBMEMORY_URL", f"sqlite:///{(tmp_path / 'env.db').as_posix()}")
    assert create_engine().url.database == (tmp_path / "env.db").as_posix()
    monkeypatch.delenv("DBMEMORY_URL")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Settings().url is None
    url = default_url()
    assert url.startswith("sqlite:///") and url.endswith("/dbmemory/dbmemory.db")
    assert Path(url[len("sqlite:///") :]).parent.is_dir()


def test_settings_read_dbmemory_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    from dbmemory.settings import Settings

    monkeypatch.setenv("DBMEMORY_URL", "postgresql://app@db/app")
    monkeypatch.setenv("DBMEMORY_MODEL", "ollama/llama3.1")
    settings = Settings()
    assert (settings.url, settings.model) == ("postgresql://app@db/app", "ollama/llama3.1")
    assert Settings.model_fields["url"].description


def test_revision_0002_moves_keys_into_their_namespaces_and_gives_stores_their_caps(
    empty_engine: Engine,
) -> None:
    """Upgrading a 0001 database: the profile store moves to the reserved namespace, store-code
    context stores under ``context:store:``, agent-keyed context stores stay; every store gets
    its owner's (or the strictest configured) caps; downgrading moves the keys back."""
    migrate.upgrade(empty_engine, "0001")
    ts = utcnow()
    stores_t = sa.table(
        "dbm_stores",
        *(sa.column(n) for n in ("store_key", "scope_name", "agent_code", "store_code")),
        sa.column("created_at", UtcDateTime()),
        sa.column("updated_at", UtcDateTime()),
    )
    agents_t = sa.table(
        "dbm_agents",
        *(sa.column(n) for n in ("agent_code", "scope_name", "store_code", "context_key")),
        *(sa.column(n) for n in ("max_file_chars", "max_files", "max_store_chars")),
        sa.column("memory_enabled", sa.Boolean()),
        sa.column("created_at", UtcDateTime()),
        sa.column("updated_at", UtcDateTime()),
    )
    old = [
        ("context:user-memory:user_id:u-1", "context", None, "user-memory"),
        ("context:DOCS:document_id:7", "context", None, "DOCS"),
        ("context:A:document_id:7", "context", "A", None),
        ("user:A:u-1", "user", "A", None),
        ("shared:POL", "shared", None, "POL"),
        ("global", "global", None, None),
    ]
    agent_rows = [
        ("A", "user", None, None, 500, 7, 900),
        ("B", "shared", "POL", None, 800, 9, None),
        ("C", "shared", "POL", None, 600, 20, 5000),
    ]
    with empty_engine.begin() as c:
        c.execute(
            sa.insert(agents_t),
            [
                dict(zip(("agent_code", "scope_name", "store_code", "context_key",
                          "max_file_chars", "max_files", "max_store_chars"), a, strict=True),
                     memory_enabled=True, created_at=ts, updated_at=ts)
                for a in agent_rows
            ],
        )
        c.execute(
            sa.insert(stores_t),
            [
                dict(zip(("store_key", "scope_name", "agent_code", "store_code"), s, strict=True),
                     created_at=ts, updated_at=ts)
                for s in old
            ],
        )
    migrate.upgrade(empty_engine)
    with empty_engine.connect() as c:
        rows = {
            r.store_key: r
            for r in c.execute(
                sa.text(
                    "SELECT store_key, scope_name, max_file_chars, max_files, max_store_chars "
                    "FROM dbm_stores"
                )
            )
        }
    assert set(rows) == {
        "reserved:profile:user-memory:u-1",
        "context:store:DOCS:document_id:7",
        "context:A:document_id:7",
        "user:A:u-1",
        "shared:POL",
        "global",
    }
    assert rows["reserved:profile:user-memory:u-1"].scope_name == "reserved"
    assert tuple(rows["user:A:u-1"][2:]) == (500, 7, 900)
    assert tuple(rows["context:A:document_id:7"][2:]) == (500, 7, 900)
    assert tuple(rows["shared:POL"][2:]) == (600, 9, 5000)  # the strictest of B and C
    assert tuple(rows["global"][2:]) == (100_000, 1_000, None)
    migrate.downgrade(empty_engine, "0001")
    with empty_engine.connect() as c:
        keys = {r[0] for r in c.execute(sa.text("SELECT store_key FROM dbm_stores"))}
    assert keys == {s[0] for s in old}


# -- Oracle: pre-flight, re-runs, transactions, session set-up (compiled; real with a URL) -----

_GOOD = migrate.OracleFacts(
    user="DBM",
    character_set="AL32UTF8",
    privileges=frozenset(
        {"CREATE SESSION", "CREATE TABLE", "CREATE VIEW", "CREATE PROCEDURE", "CREATE JOB"}
    ),
    default_tablespace="USERS",
    quotas={"USERS": (0, -1)},
)


def _facts(**changes: object) -> migrate.OracleFacts:
    import dataclasses

    return dataclasses.replace(_GOOD, **changes)  # type: ignore[arg-type]


def test_oracle_preflight_passes_a_schema_with_every_grant() -> None:
    assert migrate.oracle_preflight(_GOOD) == ([], [])
    any_privs = frozenset({"CREATE ANY TABLE", "CREATE ANY VIEW", "CREATE ANY PROCEDURE",
                           "CREATE ANY JOB", "UNLIMITED TABLESPACE"})
    assert migrate.oracle_preflight(_facts(privileges=any_privs, quotas={})) == ([], [])
    assert migrate.oracle_preflight(_facts(quotas={"USERS": (10, 50 * 2**20)})) == ([], [])


def test_oracle_preflight_names_the_grant_connect_resource_lacks() -> None:
    # GRANT CONNECT, RESOURCE: CREATE TABLE and CREATE PROCEDURE, no CREATE VIEW, no CREATE
    # JOB and (since 12c) no tablespace quota
    resource = frozenset({"CREATE SESSION", "CREATE TABLE", "CREATE PROCEDURE", "CREATE TYPE"})
    problems, notes = migrate.oracle_preflight(_facts(privileges=resource, quotas={}))
    assert problems == [
        "CREATE VIEW is missing: run GRANT CREATE VIEW TO DBM",
        "DBM has no quota left on its default tablespace USERS (the tables would be created, "
        "and the first row would fail): run ALTER USER DBM QUOTA UNLIMITED ON USERS",
    ]
    assert len(notes) == 1 and "GRANT CREATE JOB TO DBM" in notes[0]
    assert "expiry_job.sql" in notes[0]


def test_oracle_preflight_quota_rules() -> None:
    def quota_problem(**changes: object) -> list[str]:
        return [p for p in migrate.oracle_preflight(_facts(**changes))[0] if "QUOTA" in p]

    assert quota_problem(quotas={"USERS": (5 * 2**20, 5 * 2**20)})  # used up
    assert quota_problem(quotas={"OTHER": (0, -1)})  # quota elsewhere only
    assert not quota_problem(quotas={"USERS": (5 * 2**20, -1)})
    assert quota_problem(default_tablespace=None, quotas={})[0].startswith(
        "DBM has no default tablespace"
    )


@pytest.mark.parametrize(
    ("charset", "refused"),
    [("AL32UTF8", False), ("al32utf8", False), ("UTF8", True), ("WE8MSWIN1252", True),
     ("US7ASCII", True), ("WE8ISO8859P15", True), (None, True)],
)
def test_oracle_character_set_other_than_al32utf8_is_refused(
    charset: str | None, refused: bool
) -> None:
    problem = migrate.oracle_character_set_problem(charset)
    assert (problem is not None) == refused
    if refused:
        shown = charset.upper() if charset else "unknown"
        assert problem is not None and "AL32UTF8" in problem and f" is {shown}," in problem
        problems, _ = migrate.oracle_preflight(_facts(character_set=charset))
        assert problems[0] == problem  # first, before any grant


def test_oracle_preflight_queries_compile_for_19c() -> None:
    dialect = oracle19_dialect()
    sql = {
        name: " ".join(str(stmt.compile(dialect=dialect)).split())
        for name, stmt in migrate.oracle_preflight_statements().items()
    }
    assert sql == {
        "character_set": "SELECT nls_database_parameters.value FROM nls_database_parameters "
        "WHERE nls_database_parameters.parameter = :p_parameter",
        "privileges": "SELECT session_privs.privilege FROM session_privs",
        "user": "SELECT user_users.username, user_users.default_tablespace FROM user_users",
        "quotas": "SELECT user_ts_quotas.tablespace_name, user_ts_quotas.bytes, "
        "user_ts_quotas.max_bytes FROM user_ts_quotas",
    }
    compiled = migrate.oracle_preflight_statements()["character_set"].compile(dialect=dialect)
    assert compiled.params == {"p_parameter": "NLS_CHARACTERSET"}


def test_ddl_commits_the_transaction_only_on_oracle() -> None:
    assert ddl_commits_transaction(oracle19_dialect())
    for name in ("postgresql", "mysql", "sqlite"):
        assert not ddl_commits_transaction(migrate.offline_dialect(name))


def test_existence_checks_never_run_off_oracle_or_offline(empty_engine: Engine) -> None:
    with empty_engine.connect() as c:
        statements: list[str] = []
        sa.event.listen(c, "before_cursor_execute", lambda *a: statements.append(a[2]))
        assert not oracle_object_exists(c, "table", "dbm_alembic_version")
        assert not oracle_object_exists(None, "column", "x", table="dbm_stores")
        assert statements == []
    with pytest.raises(ValueError):
        oracle_object_exists(None, "column", "max_files")
    with pytest.raises(ValueError):
        oracle_object_exists(None, "sequence", "s")


def test_oracle_existence_queries_compile_for_19c() -> None:
    dialect = oracle19_dialect()
    for kind, sql in ORACLE_EXISTS.items():
        text = str(sa.text(sql).compile(dialect=dialect))
        assert text.startswith("SELECT COUNT(*) FROM user_") and ":name" in text, kind


def test_oracle_offline_ddl_is_unconditional_and_drops_purge() -> None:
    up = migrate.offline_sql("oracle")
    down = migrate.offline_sql("oracle", "downgrade")
    assert "user_tables" not in up.lower() and "user_tab_columns" not in up.lower()
    for table in TABLES:
        assert f"CREATE TABLE {table} (" in up
        assert f"DROP TABLE {table} PURGE" in down


def test_oracle_engines_compare_binary_from_their_first_connection() -> None:
    pytest.importorskip("oracledb")
    engine = create_engine("oracle://dbm:secret@127.0.0.1:1/?service_name=nowhere")
    try:
        assert sa.event.contains(engine, "connect", oracle_session_listener)
        before = len(engine.pool.dispatch.connect)
        configure_engine(engine)  # idempotent: one listener
        assert len(engine.pool.dispatch.connect) == before
    finally:
        engine.dispose()
    assert ORACLE_SESSION_SQL == (
        "ALTER SESSION SET NLS_COMP = 'BINARY' NLS_SORT = 'BINARY'"
    )
    sqlite_engine = create_engine("sqlite://")
    assert not sa.event.contains(sqlite_engine, "connect", oracle_session_listener)


def test_upgrade_of_a_connection_in_a_transaction_still_joins_it_off_oracle(
    empty_engine: Engine, backend_name: str
) -> None:
    if backend_name in ("mysql", "oracle"):
        pytest.skip("DDL commits implicitly on MySQL/MariaDB and Oracle")
    with empty_engine.connect() as c:
        c.execute(sa.text("SELECT 1"))  # autobegun, as after any read
        migrate.upgrade(c)
        assert c.in_transaction()
        c.rollback()


# real Oracle (DBMEMORY_TEST_ORACLE_URL)


@pytest.fixture
def oracle_engine(_backends: Any) -> Engine:
    return _backends.engine("oracle")


@pytest.mark.oracle
def test_oracle_sessions_compare_binary_even_after_linguistic_settings(
    oracle_engine: Engine,
) -> None:
    with oracle_engine.connect() as c:
        values = dict(
            c.execute(
                sa.text(
                    "SELECT parameter, value FROM nls_session_parameters "
                    "WHERE parameter IN ('NLS_COMP', 'NLS_SORT')"
                )
            ).all()
        )
        assert values == {"NLS_COMP": "BINARY", "NLS_SORT": "BINARY"}
        # what an APEX-style session would do to the keys without dbmemory's set-up
        c.exec_driver_sql("ALTER SESSION SET NLS_COMP = 'LINGUISTIC' NLS_SORT = 'BINARY_CI'")
        assert c.execute(sa.text("SELECT COUNT(*) FROM dual WHERE 'user:A:Bob' = 'user:A:bob'")).scalar() == 1
        c.invalidate()  # never hand this session back to the pool


@pytest.mark.oracle
def test_oracle_upgrade_refuses_a_connection_inside_a_transaction(oracle_engine: Engine) -> None:
    with oracle_engine.connect() as c:
        c.execute(sa.text("SELECT 1 FROM dual"))
        with pytest.raises(InvalidArgumentError, match="commits it"):
            migrate.upgrade(c, "head")
        c.rollback()


@pytest.mark.oracle
def test_oracle_preflight_reads_a_usable_schema(oracle_engine: Engine) -> None:
    with oracle_engine.connect() as c:
        facts = migrate.read_oracle_facts(c)
    problems, _ = migrate.oracle_preflight(facts)
    assert problems == [] and facts.user


@pytest.mark.oracle
def test_oracle_upgrade_rerun_after_a_half_way_failure_creates_only_what_is_missing(
    empty_engine: Engine, backend_name: str
) -> None:
    if backend_name != "oracle":
        pytest.skip("Oracle only")
    with empty_engine.begin() as c:  # what a failed first run leaves: some tables, no stamp
        c.exec_driver_sql(
            "CREATE TABLE dbm_alembic_version (version_num VARCHAR2(32 CHAR) NOT NULL, "
            "CONSTRAINT dbm_alembic_version_pkc PRIMARY KEY (version_num))"
        )
    migrate.upgrade(empty_engine, "0001")
    with empty_engine.begin() as c:  # 0002 failed after its first column
        c.exec_driver_sql("ALTER TABLE dbm_stores ADD max_file_chars INTEGER DEFAULT 100000 NOT NULL")
        c.exec_driver_sql(
            "CREATE TABLE dbm_file_reads (file_id NUMBER(19) NOT NULL, read_at TIMESTAMP NOT NULL,"
            " CONSTRAINT pk_dbm_file_reads PRIMARY KEY (file_id))"
        )
    migrate.upgrade(empty_engine)
    assert migrate.current(empty_engine) == migrate.head()
    assert _dbm_tables(empty_engine) == TABLES | {schema.VERSION_TABLE}
