"""The generated ``dbm_expire_items`` procedure (PostgreSQL, MariaDB) against the Python rules
of :mod:`dbmemory.items.retention`: the same items expire and go, with the same audit events;
and ``dbm_expire_files`` (the daily job) runs it."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory import items as I
from dbmemory.db.schema import audit_events, item_marks, items
from dbmemory.items.retention import SUMMARY_MARK
from dbmemory.sqlgen._common import EXPIRY_ACTOR
from dbmemory.sqlgen.expiry_job import expiry_procedure_sql

pytestmark = pytest.mark.timeout(600)

DAY = dt.timedelta(days=1)


def _install(engine: Engine, dialect: str) -> None:
    with engine.connect() as c:
        dbapi = c.connection.dbapi_connection
        cursor = dbapi.cursor()
        try:
            for statement in expiry_procedure_sql(dialect):
                cursor.execute(statement)
        finally:
            cursor.close()
        dbapi.commit()


def _seed(engine: Engine, now: dt.datetime) -> None:
    """Items on both sides of every rule, in an organisation with its own grace period and in
    the default one; 1,005 expiring items, so the job needs two batches."""
    with engine.begin() as c:
        I.set_org_setting(c, "acme", "grace_days", 5, now=now, is_admin=True)
        I.set_org_setting(c, "acme", "retention_temporary_days", 2, now=now, is_admin=True)
        old = now - 31 * DAY
        c.execute(
            sa.insert(items),
            [
                {"org_id": "default", "user_key": f"bulk{n % 20}", "item_text": f"auto {n}", "char_count": len(f"auto {n}"),
                 "text_hash": I.text_hash(f"auto {n}"), "item_kind": "auto", "retention_class": "auto",
                 "created_at": old, "updated_at": old, "expires_at": old + 30 * DAY, "version_no": 1}
                for n in range(1005)
            ],
        )
        c.execute(  # the bulk users' auto items are folded into their profiles: they expire
            sa.insert(item_marks),
            [{"org_id": "default", "user_key": f"bulk{n}", "mark_key": SUMMARY_MARK, "marked_at": old}
             for n in range(20)],
        )
        I.add_item(c, "u1", "fresh auto", kind="auto", now=now - 29 * DAY)
        I.add_item(c, "u1", "unfolded auto", kind="auto", now=now - 32 * DAY)  # waits for its fold
        I.add_item(c, "u3", "unfolded auto past grace", kind="auto", now=now - 61 * DAY)
        I.add_item(c, "u1", "standard old", now=now - 181 * DAY)
        I.add_item(c, "u1", "standard young", now=now - 179 * DAY)
        I.add_item(c, "u1", "permanent", retention_class="permanent", now=now - 9999 * DAY)
        I.add_item(c, "u2", "acme temporary old", org_id="acme", retention_class="temporary", now=now - 3 * DAY)
        I.add_item(c, "u2", "acme temporary young", org_id="acme", retention_class="temporary", now=now - DAY)
        for org, user, text, deleted_ago in (
            ("default", "u1", "deleted 31 days ago", 31),
            ("default", "u1", "deleted 29 days ago", 29),
            ("acme", "u2", "acme deleted 6 days ago", 6),
            ("acme", "u2", "acme deleted 4 days ago", 4),
        ):
            item = I.add_item(c, user, text, org_id=org, retention_class="permanent", now=now - 400 * DAY)
            I.delete_item(c, user, item.item_id, org_id=org, now=now - deleted_ago * DAY)


def _snapshot(engine: Engine) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with engine.connect() as c:
        rows = c.execute(
            sa.select(items.c.item_text, items.c.deleted_at.is_not(None), items.c.version_no).order_by(items.c.item_text)
        ).all()
        events = c.execute(
            sa.select(
                audit_events.c.action_name, audit_events.c.org_id, audit_events.c.user_key,
                audit_events.c.chars_before, audit_events.c.chars_after,
            ).where(audit_events.c.action_name.in_(["item_expire", "item_purge"]))
        ).all()
    return [tuple(r) for r in rows], sorted(tuple(e) for e in events)


def test_the_sql_job_expires_and_purges_exactly_what_python_does(
    server_engine: Engine, server_name: str, reset_tables: object
) -> None:
    dialect = "postgresql" if server_name == "postgres" else "mysql"
    _install(server_engine, dialect)
    now = dt.datetime.now(dt.timezone.utc)

    _seed(server_engine, now)
    with server_engine.begin() as c:
        python_counts = I.run_item_retention(c, now=now + dt.timedelta(minutes=1))
    want = _snapshot(server_engine)
    reset_tables(server_engine)  # type: ignore[operator]

    _seed(server_engine, now)
    with server_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        if dialect == "postgresql":
            expired, purged = c.exec_driver_sql("CALL dbm_expire_items()").one()
            files = c.exec_driver_sql("CALL dbm_expire_files(30)").scalar_one()
        else:
            c.exec_driver_sql("CALL dbm_expire_items(@e, @p)")
            expired, purged = c.exec_driver_sql("SELECT @e, @p").one()
            c.exec_driver_sql("CALL dbm_expire_files(30, @n)")
            files = c.exec_driver_sql("SELECT @n").scalar_one()
    got = _snapshot(server_engine)

    assert python_counts == {"expired": 1005 + 3, "purged": 2}
    assert (int(expired), int(purged), int(files)) == (1005 + 3, 2, 0)
    assert got == want
    texts = {r[0]: r[1] for r in got[0]}
    assert texts["fresh auto"] is False and texts["standard old"] is True and texts["permanent"] is False
    assert texts["unfolded auto"] is False and texts["unfolded auto past grace"] is True
    assert "deleted 31 days ago" not in texts and texts["deleted 29 days ago"] is True
    assert "acme deleted 6 days ago" not in texts and texts["acme deleted 4 days ago"] is True


def test_the_daily_files_job_also_runs_the_items_retention(server_engine: Engine, server_name: str) -> None:
    dialect = "postgresql" if server_name == "postgres" else "mysql"
    _install(server_engine, dialect)
    now = dt.datetime.now(dt.timezone.utc)
    with server_engine.begin() as c:
        I.add_item(c, "u1", "old auto", kind="auto", now=now - 70 * DAY)  # unfolded, past grace
        gone = I.add_item(c, "u1", "deleted", now=now - 40 * DAY)
        I.delete_item(c, "u1", gone.item_id, now=now - 35 * DAY)
    with server_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        if dialect == "postgresql":
            c.exec_driver_sql("CALL dbm_expire_files(30)")
        else:
            c.exec_driver_sql("CALL dbm_expire_files(30, @n)")
    with server_engine.connect() as c:
        assert [i.text for i in I.list_items(c, "u1", include_deleted=True)] == ["old auto"]
        assert {e.action for e in I.audit_events(c, user_id="u1")} >= {"item_expire", "item_purge"}
        assert {e.actor for e in I.audit_events(c, action="item_purge")} == {EXPIRY_ACTOR}
