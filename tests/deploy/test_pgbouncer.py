"""Issue 13: PgBouncer (1.18, ``pool_mode = transaction``, .ci/pgbouncer) in front of PostgreSQL.

The contract modules run through it (``pgbouncer`` backend: conftest.DEPLOY_MODULES). Here:

* psycopg 3 prepares a statement after its 5th execution on a connection; through PgBouncer
  in transaction mode the next transaction may run on another server connection, where the
  prepared statement does not exist: shown with a plain SQLAlchemy engine, and gone with
  dbmemory's engine by default (``prepare_threshold=None``) and with
  ``transaction_pooling=True``, also from the URL option and the environment variable;
* ``dbmemory doctor`` names PgBouncer and its pool mode, and warns without
  ``transaction_pooling``;
* no session state: dbmemory's ``lock_timeout`` is set with ``SET LOCAL`` in each transaction
  (also in its own transactions on AUTOCOMMIT connections and on the touch connections), so a
  server connection handed to another client keeps the server's default, and every dbmemory
  transaction still has its bound lock wait. dbmemory takes no advisory locks.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import NullPool

from backends import deploy_urls
from dbmemory import enable_for_agent
from dbmemory.db import migrate
from dbmemory.db.dialect.txn import transaction_pooling
from dbmemory.db.engine import create_engine
from dbmemory.tool import MemoryTool

pytestmark = pytest.mark.pgbouncer


@pytest.fixture
def bouncer_url(engine: Engine, backend_name: str) -> URL:
    """The session database's URL through PgBouncer (the ``pgbouncer`` backend only)."""
    if backend_name != "pgbouncer":
        pytest.skip("PgBouncer tests run on the pgbouncer backend")
    return engine.url


@pytest.fixture(params=["pgbouncer"])
def backend_name(request: pytest.FixtureRequest) -> str:  # only the pgbouncer backend here
    return request.param


def _pinned_other_server(url: URL) -> Iterator[sa.Connection]:
    """A plain client holding a server connection in an open transaction (so the next
    transaction of another client cannot get that one)."""
    holder = sa.create_engine(url, poolclass=NullPool)
    c = holder.connect()
    c.exec_driver_sql("SELECT 1")  # BEGIN ...: pinned until it ends
    return c, holder  # type: ignore[return-value]


def _six_times_then_elsewhere(eng: Engine, url: URL) -> None:
    with eng.connect() as c:
        for _ in range(6):  # prepared on the 5th execution (psycopg's prepare_threshold)
            c.execute(sa.text("SELECT count(*) FROM dbm_stores WHERE store_id = :i"), {"i": 1})
            c.commit()
        pinned, holder = _pinned_other_server(url)  # the server connection just used
        try:
            c.execute(sa.text("SELECT count(*) FROM dbm_stores WHERE store_id = :i"), {"i": 1})
            c.commit()
        finally:
            pinned.close()
            holder.dispose()


def test_psycopg_prepared_statements_break_behind_pgbouncer_without_the_setting(
    bouncer_url: URL,
) -> None:
    plain = sa.create_engine(bouncer_url, poolclass=NullPool)
    try:
        with pytest.raises(sa.exc.DBAPIError, match="prepared statement .* does not exist"):
            _six_times_then_elsewhere(plain, bouncer_url)
    finally:
        plain.dispose()


@pytest.mark.parametrize("how", ["argument", "url", "environment"])
def test_transaction_pooling_turns_prepared_statements_off(
    bouncer_url: URL, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if how == "argument":
        eng = create_engine(bouncer_url, transaction_pooling=True, poolclass=NullPool)
    elif how == "url":
        eng = create_engine(
            bouncer_url.update_query_dict({"dbmemory_transaction_pooling": "true"}),
            poolclass=NullPool,
        )
    else:
        monkeypatch.setenv("DBMEMORY_TRANSACTION_POOLING", "true")
        eng = create_engine(bouncer_url, poolclass=NullPool)
    try:
        assert transaction_pooling(eng)
        assert "dbmemory_transaction_pooling" not in eng.url.query
        _six_times_then_elsewhere(eng, bouncer_url)
    finally:
        eng.dispose()


def _lock_timeout(c: sa.Connection) -> str:
    return str(c.exec_driver_sql("SHOW lock_timeout").scalar())


@pytest.fixture
def fresh_bouncer_url(bouncer_url: URL) -> Iterator[URL]:
    """A new database through PgBouncer: a pool of its own, whose server connections no other
    test's client (an engine made from the URL without ``transaction_pooling``, which sets
    ``lock_timeout`` per session) has used. Dropped afterwards."""
    import secrets

    base = deploy_urls("pgbouncer")[0]
    name = f"dbmt_pgb_{secrets.token_hex(4)}"
    admin = sa.create_engine(base, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield base.set(database=name)
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def test_lock_timeout_is_per_transaction_and_leaves_no_session_state(fresh_bouncer_url: URL) -> None:
    bouncer_url = fresh_bouncer_url
    eng = create_engine(bouncer_url, transaction_pooling=True, lock_timeout_ms=1234)
    raw = sa.create_engine(bouncer_url, poolclass=NullPool)
    try:
        migrate.upgrade(eng)
        with eng.begin() as c:  # SQLAlchemy's transaction
            assert _lock_timeout(c) == "1234ms"
            enable_for_agent(c, "PGB")
        with eng.connect().execution_options(isolation_level="AUTOCOMMIT") as c:  # own ones
            seen: list[str] = []

            def record(conn: sa.Connection, cursor: object, statement: str, *a: object) -> None:
                if statement.lstrip().upper().startswith("INSERT INTO DBM_FILES"):
                    seen.append(_lock_timeout_raw(conn))

            sa.event.listen(c, "after_cursor_execute", record)
            answer = MemoryTool(c, "PGB").execute(
                {"command": "create", "path": "/memories/a.md", "file_text": "a"}
            )
            assert not answer.startswith("Error"), answer
            assert seen == ["1234ms"], seen
            answer = MemoryTool(c, "PGB").execute({"command": "view", "path": "/memories/a.md"})
            assert "a" in answer
        # the server connections dbmemory used went back to PgBouncer without the setting
        with raw.connect() as c:
            assert _lock_timeout(c) == "0"
    finally:
        eng.dispose()
        raw.dispose()


def _lock_timeout_raw(conn: sa.Connection) -> str:
    cursor = conn.connection.driver_connection.cursor()
    try:
        cursor.execute("SHOW lock_timeout")
        return str(cursor.fetchone()[0])
    finally:
        cursor.close()


def test_a_plain_session_setting_would_leak_to_other_clients(fresh_bouncer_url: URL) -> None:
    """Why per-transaction settings matter: the session SET dbmemory makes on a direct
    connection stays on PgBouncer's server connection for the next client."""
    bouncer_url = fresh_bouncer_url
    eng = create_engine(bouncer_url, transaction_pooling=False, lock_timeout_ms=4321, poolclass=NullPool)
    raw = sa.create_engine(bouncer_url, poolclass=NullPool)
    try:
        with eng.connect() as c:
            c.exec_driver_sql("SELECT 1")
            c.commit()
        with raw.connect() as c:
            assert _lock_timeout(c) == "4321ms"  # LIFO: the same server connection
            c.exec_driver_sql("RESET lock_timeout")
            c.commit()
    finally:
        eng.dispose()
        raw.dispose()


def test_no_advisory_locks_in_the_package() -> None:
    from pathlib import Path

    import dbmemory

    root = Path(dbmemory.__file__).parent
    hits = [p for p in root.rglob("*.py") if "advisory" in p.read_text().lower()]
    assert hits == [], hits


def test_the_pgbouncer_url_is_transaction_mode() -> None:
    import psycopg

    url = deploy_urls("pgbouncer")[0]
    with psycopg.connect(
        host=url.host, port=url.port, user=url.username, dbname="pgbouncer", autocommit=True,
        prepare_threshold=None,
    ) as c:
        rows = {r[0]: r[1] for r in c.execute("SHOW CONFIG").fetchall()}
    assert rows["pool_mode"] == "transaction"


def test_a_dbmemory_engine_works_behind_a_transaction_pooler_without_the_setting(
    bouncer_url: URL,
) -> None:
    """The default engine (no ``transaction_pooling``) prepares no server-side statement that
    would outlive its transaction: the same sequence that breaks a plain engine passes, and
    the MEMORY tool's answers through PgBouncer are never "could not be reached"."""
    eng = create_engine(bouncer_url, poolclass=NullPool)
    try:
        assert not transaction_pooling(eng)
        _six_times_then_elsewhere(eng, bouncer_url)
        with eng.begin() as c:
            enable_for_agent(c, "BOUNCE")
        answers = []
        with eng.connect() as c:
            for i in range(12):
                tool = MemoryTool(c, "BOUNCE", user_id="u1")
                answers.append(
                    tool.execute({"command": "create", "path": f"/memories/{i}.md", "file_text": "x"})
                )
                answers.append(tool.execute({"command": "view", "path": "/memories"}))
                c.commit()
        assert not [a for a in answers if a.startswith("Error: ")], answers
    finally:
        eng.dispose()


@pytest.mark.parametrize("declared", [False, True], ids=["undeclared", "declared"])
def test_doctor_names_pgbouncer_and_its_pool_mode(bouncer_url: URL, declared: bool) -> None:
    from dbmemory.db.doctor import diagnose

    eng = create_engine(bouncer_url, transaction_pooling=declared, poolclass=NullPool)
    try:
        check = next(c for c in diagnose(eng).checks if c.name == "pooler")
    finally:
        eng.dispose()
    assert "PgBouncer, pool_mode=transaction" in check.value, check
    if declared:
        assert check.warning is None and "declared" in check.value, check
    else:
        assert check.warning is not None and "transaction_pooling" in check.warning, check
