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

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect, Engine

from dbmemory.db import migrate, schema
from dbmemory.db.dialect import UtcDateTime, utcnow
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
}


def _dbm_tables(engine: Engine) -> set[str]:
    return {t for t in sa.inspect(engine).get_table_names() if t.startswith("dbm_")}


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


@pytest.mark.parametrize("table_name", sorted(TABLES))
def test_migrated_table_matches_schema_metadata(engine: Engine, table_name: str) -> None:
    inspector = sa.inspect(engine)
    table = schema.metadata.tables[table_name]
    reflected = {c["name"].lower(): c for c in inspector.get_columns(table_name)}

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
    assert [c.lower() for c in pk["constrained_columns"]] == [c.name for c in table.primary_key]

    uniques = {
        tuple(c.lower() for c in u["column_names"])
        for u in inspector.get_unique_constraints(table_name)
    }
    for constraint in table.constraints:
        if isinstance(constraint, sa.UniqueConstraint):
            assert tuple(c.name for c in constraint.columns) in uniques

    indexes = {
        i["name"].lower(): [c.lower() for c in i["column_names"]]
        for i in inspector.get_indexes(table_name)
    }
    for index in table.indexes:
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


ALTERED_TABLES = {"dbm_stores": ("max_file_chars", "max_files", "max_store_chars")}
"""Tables that a revision after their creation changed, with the columns it added."""


@pytest.mark.parametrize("dialect_name", ["oracle", "postgresql", "mysql", "sqlite"])
def test_migration_ddl_is_exactly_schema_ddl(dialect_name: str) -> None:
    from sqlalchemy.schema import CreateIndex, CreateTable

    def norm(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip()

    dialect = migrate.offline_dialect(dialect_name)
    rendered = norm(migrate.offline_sql(dialect_name))
    for table in schema.metadata.sorted_tables:
        if table.name in ALTERED_TABLES:
            # created by 0001, then given columns by a later revision: its CREATE TABLE is the
            # 0001 one, and every later column must appear as an ADD
            for column in ALTERED_TABLES[table.name]:
                assert f"ADD {column}" in rendered or f"ADD COLUMN {column}" in rendered, column
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
    assert "dbmemory[mysql]" in str(info.value)
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
                          "max_file_chars", "max_files", "max_store_chars"), a),
                     memory_enabled=True, created_at=ts, updated_at=ts)
                for a in agent_rows
            ],
        )
        c.execute(
            sa.insert(stores_t),
            [
                dict(zip(("store_key", "scope_name", "agent_code", "store_code"), s),
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
