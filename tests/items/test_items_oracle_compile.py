"""Every statement the items package runs, compiled for Oracle 19c and checked like the store
layer's (tests/db/test_oracle_compile.py): the statements are captured while a scenario runs on
SQLite, so the check covers what really runs, not a hand-made list."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.schema import CreateTable

from dbmemory import items as I
from dbmemory.db import migrate, schema
from dbmemory.db.dialect.expiry import lock_expiry_candidates
from dbmemory.db.dialect.oracle import oracle19_dialect
from dbmemory.db.engine import create_engine
from dbmemory.db.schema import items as items_table
from dbmemory.items.retention import expire_rule
from oracle_checks import compiled, regex_problems, sqlglot_problems

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _scenario(conn: sa.Connection) -> None:
    a = I.add_item(conn, "ann@example.com", "fact", now=T0)
    b = I.add_item(conn, "ann@example.com", "auto fact", kind="auto", confidence=0.9, now=T0)
    I.edit_item(conn, "ann@example.com", a.item_id, "new fact", expected_version=1)
    I.delete_item(conn, "ann@example.com", a.item_id)
    I.restore_item(conn, "ann@example.com", a.item_id)
    I.list_items(conn, "ann@example.com", include_deleted=True)
    I.count_items(conn, "ann@example.com")
    I.get_item(conn, "ann@example.com", b.item_id)
    I.mark_items_used(conn, [a.item_id, b.item_id])
    I.enforce_auto_item_limit(conn, "ann@example.com", limit=0)
    I.set_org_setting(conn, "acme", "grace_days", 3, is_admin=True)
    I.set_org_setting(conn, "default", "retention_standard_days", 10, is_admin=True)
    I.get_org_settings(conn, "acme")
    I.set_memory_switch(conn, "ann@example.com", False)
    I.get_memory_switch(conn, "ann@example.com")
    I.set_org_memory(conn, "acme", "We sell anvils.", is_admin=True, actor="boss")
    I.get_org_memory(conn, "acme")
    I.clear_items(conn, "ann@example.com")
    I.run_item_retention(conn, now=T0 + dt.timedelta(days=400))
    I.purge_items(conn, user_id="ann@example.com", include_grace=True)
    I.audit_events(conn, org_id="acme", user_id="ann@example.com", action="item_add", since=T0, until=T0, limit=5)
    I.export_user(conn, "ann@example.com")
    I.forget_user(conn, "ann@example.com")


def _captured() -> list[Any]:
    engine = create_engine("sqlite:///:memory:")
    migrate.upgrade(engine)
    seen: list[Any] = []

    def capture(conn: Any, clauseelement: Any, *args: Any) -> None:
        if isinstance(clauseelement, sa.sql.ClauseElement) and "dbm_items" in str(clauseelement) or (
            isinstance(clauseelement, sa.sql.ClauseElement)
            and any(t in str(clauseelement) for t in ("dbm_org_settings", "dbm_memory_switches", "dbm_audit_events"))
        ):
            seen.append(clauseelement)

    sa.event.listen(engine, "before_execute", capture)
    with engine.begin() as conn:
        _scenario(conn)
    engine.dispose()
    return seen


def test_every_items_statement_compiles_for_oracle_19c() -> None:
    statements = _captured()
    assert len(statements) > 40
    # the candidate selection as Oracle gets it (ROWNUM, FOR UPDATE SKIP LOCKED)
    statements.append(
        lock_expiry_candidates(
            oracle19_dialect(), sa.select(items_table.c.item_id).where(expire_rule(T0, {5: ["acme"]})), 1000
        )
    )
    failures: dict[str, list[str]] = {}
    for statement in statements:
        sql = compiled(statement)
        problems = regex_problems(sql) + sqlglot_problems(sql)
        if "FETCH" in sql and "FOR UPDATE" in sql:
            problems.append("FETCH FIRST with FOR UPDATE is ORA-02014")
        if problems:
            failures[sql] = problems
    assert not failures, "\n\n".join(f"{sql}\n  " + "\n  ".join(p) for sql, p in failures.items())


def test_the_new_tables_compile_for_oracle_19c_with_short_names() -> None:
    for name in ("dbm_items", "dbm_org_settings", "dbm_memory_switches", "dbm_audit_events"):
        ddl = str(CreateTable(schema.metadata.tables[name]).compile(dialect=oracle19_dialect()))
        assert '"' not in ddl, ddl
        assert "CLOB" not in ddl or name == "dbm_audit_events", ddl
    switch = str(CreateTable(schema.memory_switches).compile(dialect=oracle19_dialect()))
    assert "CONSTRAINT ck_dbm_memory_switches_on CHECK (memory_on IN (0, 1))" in switch
    assert "item_text VARCHAR2(1000 CHAR) NOT NULL" in str(
        CreateTable(items_table).compile(dialect=oracle19_dialect())
    )
