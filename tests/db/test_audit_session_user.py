"""The audit events record the database session's login next to the actor: a column the
database fills itself (its default), NULL on SQLite and for the rows written before the
revision that added it; upgrade and downgrade on every backend, Oracle's DDL read for 19c.

The revision is found by the column it adds (its module's ``COLUMN``), never by its number."""

from __future__ import annotations

import re
from types import ModuleType

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from dbmemory.db import migrate
from dbmemory.db.schema import audit_events
from dbmemory.items.audit import audit_events as read_events
from dbmemory.store.audit import audit
from oracle_checks import regex_problems, sqlglot_problems

COLUMN = "session_user_name"


def _revision() -> tuple[str, str, ModuleType]:
    """``(revision, the revision before it, its module)`` of the revision adding :data:`COLUMN`."""
    script = ScriptDirectory.from_config(migrate.alembic_config())
    for rev in script.walk_revisions():
        if getattr(rev.module, "COLUMN", None) == COLUMN:
            return rev.revision, str(rev.down_revision), rev.module
    raise AssertionError(f"no revision adds {COLUMN}")


def _write(engine: Engine, actor: str) -> None:
    with engine.begin() as c:
        audit(c, [{"store_id": None, "store_key": "agent:A", "file_path": "/memories/a.md",
                   "action_name": "create", "actor_name": actor, "chars_after": 1}])


def _sessions(engine: Engine) -> dict[str, str | None]:
    with engine.connect() as c:
        rows = c.execute(sa.text(f"SELECT actor_name, {COLUMN} FROM dbm_audit_events")).all()
    return {str(actor): who for actor, who in rows}


def _login(engine: Engine) -> str | None:
    """What the database records for this engine's sessions."""
    name = engine.dialect.name
    if name == "sqlite":
        return None
    query = {"postgresql": "SELECT session_user", "oracle": "SELECT SYS_CONTEXT('USERENV', 'SESSION_USER') FROM dual"}
    with engine.connect() as c:
        return str(c.execute(sa.text(query.get(name, "SELECT USER()"))).scalar())


def test_the_database_fills_the_session_login_and_old_rows_stay_null(empty_engine: Engine) -> None:
    revision, before, _ = _revision()
    migrate.upgrade(empty_engine, before)
    _write(empty_engine, "written before")
    migrate.upgrade(empty_engine, revision)
    _write(empty_engine, "written after")
    login = _login(empty_engine)
    assert _sessions(empty_engine) == {"written before": None, "written after": login}
    if empty_engine.dialect.name != "sqlite":
        assert login  # the database's own value, never the actor the caller passed
    with empty_engine.connect() as c:  # the Python reader returns it
        events = {e.actor: e for e in read_events(c)}
    assert events["written after"].session_user == login
    assert events["written after"].to_dict()["session_user"] == login
    assert events["written before"].session_user is None
    migrate.downgrade(empty_engine, before)
    assert COLUMN not in {c["name"].lower() for c in sa.inspect(empty_engine).get_columns("dbm_audit_events")}
    with empty_engine.connect() as c:  # the rows stay, without the column
        assert c.execute(sa.select(sa.func.count()).select_from(sa.table("dbm_audit_events"))).scalar() == 2
    migrate.upgrade(empty_engine)
    assert migrate.current(empty_engine) == migrate.head()


def test_a_writer_that_names_no_session_column_still_gets_it(engine: Engine) -> None:
    """The Python writers never name the column: the database fills it."""
    assert COLUMN in audit_events.c
    with engine.begin() as c:
        c.execute(sa.insert(audit_events).values(
            action_name="create", actor_name="raw insert", created_at=sa.func.current_timestamp()))
    assert _sessions(engine)["raw insert"] == _login(engine)


def test_oracle_ddl_of_the_revision_is_valid_for_19c() -> None:
    """Oracle (read, never run here): the revision's statements in the offline script, each an
    ``ALTER TABLE`` of 19c's grammar, the default an expression sqlglot reads as Oracle SQL."""
    revision, before, module = _revision()
    up = migrate.offline_sql("oracle")
    part = up.split(f"-- Running upgrade {before} -> {revision}", 1)[1].split("-- Running upgrade", 1)[0]
    statements = [s.strip() for s in re.split(r";|\n/\n", part) if s.strip().startswith(("ALTER", "COMMENT"))]
    assert statements[0] == f"ALTER TABLE dbm_audit_events ADD {COLUMN} VARCHAR2(400 CHAR)"
    assert statements[-1] == module.DEFAULTS["oracle"]
    default = re.fullmatch(rf"ALTER TABLE dbm_audit_events MODIFY \({COLUMN} DEFAULT (.+)\)", statements[-1])
    assert default is not None
    for sql in (statements[0], f"SELECT {default.group(1)} FROM dual"):
        assert regex_problems(sql) + sqlglot_problems(sql) == [], sql
    down = migrate.offline_sql("oracle", "downgrade")
    assert f"ALTER TABLE dbm_audit_events DROP COLUMN {COLUMN}" in down


@pytest.mark.parametrize("dialect_name", ["postgresql", "mysql"])
def test_the_default_is_set_after_the_column_is_added(dialect_name: str) -> None:
    """Existing rows stay NULL: the column is added without a default, then given it."""
    revision, before, module = _revision()
    up = migrate.offline_sql(dialect_name)
    part = up.split(f"-- Running upgrade {before} -> {revision}", 1)[1]
    added = part.index(f"ADD COLUMN {COLUMN} VARCHAR(400)")
    assert "DEFAULT" not in part[added:part.index(";", added)]
    assert part.index(module.DEFAULTS[dialect_name]) > added
