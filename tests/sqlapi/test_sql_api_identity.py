"""Callers bound to their stores on MariaDB/MySQL: a login holding only the user role reaches a
user-scope store only when the session's ``@dbm_memory_user_id`` names its user (PostgreSQL's
walk is in test_sql_api_privileges.py)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.db import migrate
from dbmemory.db.engine import create_engine
from dbmemory.sqlgen.api_common import derived_role_base
from dbmemory.sqlgen.deploy import mysql_definer_account
from dbmemory.sqlgen.mysql.api import RETIRED, mysql_uninstall
from dbmemory.sqlgen.oracle.api import oracle_statements
from sql_api_client import code_of, create_login

_OPEN = "CALL dbm_memory_open_store('user', 'SUPPORT', %s, NULL, NULL, NULL, NULL, @s)"


def _walk(cursor: object, identity: str | None) -> set[str]:
    """Every store id 1..50 read, listed, written and run a MEMORY command on; both users'
    stores resolved and opened by key. What it reached, as texts."""
    run = cursor.execute  # type: ignore[attr-defined]
    rows = cursor.fetchall  # type: ignore[attr-defined]
    run("SET @dbm_memory_user_id = %s", (identity,))
    seen: set[str] = set()

    def attempt(label: str, sql: str, args: tuple[object, ...], read: bool = False) -> None:
        run("SAVEPOINT walk")
        try:
            run(sql, args)
            if read:
                seen.update(str(r[0]) for r in rows() if r[0] is not None)
            else:
                seen.add(label)
        except Exception as exc:  # noqa: BLE001 - refusals are what is expected
            assert "not_found" in str(exc) or "invalid_scope" in str(exc), exc
            run("ROLLBACK TO SAVEPOINT walk")

    for store_id in range(1, 51):
        attempt("get", "SELECT dbm_memory_get_file(%s, '/memories/secret.md')", (store_id,), read=True)
        attempt("list", "CALL dbm_memory_list_files(%s)", (store_id,), read=True)
        attempt(f"wrote {store_id}",
                "CALL dbm_memory_put_file(%s, '/memories/planted.md', 'x', 'walker', @v)", (store_id,))
        attempt(f"deleted {store_id}", "CALL dbm_memory_delete_file(%s, '/memories/none.md', 'w', @d)",
                (store_id,))
        attempt(f"cleared {store_id}", "CALL dbm_memory_clear_store_files(%s, 'walker', @c)", (store_id,))
        attempt(f"ran {store_id}", "CALL dbm_memory_run_command(%s, "
                "'{\"command\": \"view\", \"path\": \"/memories\"}', 'walker', @r)", (store_id,))
    for other in ("bob", "alice"):
        attempt(f"resolved {other}",
                "SELECT dbm_memory_resolve_store_id('user', 'SUPPORT', %s, NULL, NULL, NULL, NULL)",
                (other,))
        attempt(f"opened {other}", _OPEN, (other,))
    attempt("opened dave", _OPEN, ("dave",))  # a store that does not exist yet: not created either
    return seen


def _installed_with_three_users(url: URL) -> sa.engine.Engine:
    """Migrate ``url``, install the API with its roles, and write one secret into the stores of
    alice, bob and carol (stores 1, 2, 3) as the installer, each user named first."""
    engine = create_engine(url)
    migrate.upgrade(engine)
    plain = url.render_as_string(hide_password=False)
    result = CliRunner().invoke(app, ["db", "install-api", "--url", plain, "--roles"])
    assert result.exit_code == 0, result.output
    with engine.connect() as c:  # the installer is bound too: it names each user
        c.exec_driver_sql("START TRANSACTION")
        for user in ("alice", "bob", "carol"):
            c.exec_driver_sql(f"SET @dbm_memory_user_id = '{user}'")
            c.exec_driver_sql(_OPEN.replace("%s", f"'{user}'"))
            c.exec_driver_sql(
                f"CALL dbm_memory_put_file(@s, '/memories/secret.md', '{user} secret', NULL, @v)")
        c.exec_driver_sql("COMMIT")
    return engine


_ALICE = {"alice secret", "/memories/secret.md", "wrote 1", "deleted 1", "cleared 1", "ran 1",
          "resolved alice", "opened alice"}  # alice's store is the first one created


def _walks(connect: Callable[[], object]) -> dict[str | None, set[str]]:
    """The walk on a fresh connection per identity (alice, unset, empty), rolled back."""
    seen: dict[str | None, set[str]] = {}
    for identity in ("alice", None, ""):
        raw = connect()
        try:
            cursor = raw.cursor()  # type: ignore[attr-defined]
            cursor.execute("START TRANSACTION")
            seen[identity] = _walk(cursor, identity)
            raw.rollback()  # type: ignore[attr-defined]
        finally:
            raw.close()  # type: ignore[attr-defined]
    return seen


def _raw(url: URL, **extra: object) -> Callable[[], object]:
    import pymysql

    def connect() -> object:
        return pymysql.connect(host=url.host, port=url.port or 3306, user=url.username,
                               password=url.password or "", database=url.database, **extra)

    return connect


def test_the_user_role_reaches_only_the_stores_of_its_session_identity(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    if server_name != "mysql":
        pytest.skip("MariaDB/MySQL's user variable (PostgreSQL's walk: test_sql_api_privileges)")
    url = make_empty_database()
    base = derived_role_base(url.database or "")
    login = f"{base}_lu"
    engine = _installed_with_three_users(url)
    try:
        create_login(engine, "mysql", login, f"{base}_user")
        seen = _walks(_raw(url.set(username=login, password=None)))
        assert seen["alice"] == _ALICE, seen["alice"]
        assert seen[None] == set() and seen[""] == set()
        # the installer is bound as well: no login is recognised by a name
        installer = _walks(_raw(url))
        assert installer["alice"] == _ALICE and installer[None] == set() and installer[""] == set()
        probe = create_engine(url.set(username=login, password=None))
        try:
            with probe.connect() as c, pytest.raises(sa.exc.DBAPIError) as caught:
                c.exec_driver_sql("SET @dbm_memory_user_id = 'bob'")
                c.exec_driver_sql("SELECT dbm_memory_get_file(1, '/memories/secret.md')")
            error = code_of(caught.value)
            assert error is not None and error.code == "not_found"
            assert ("store 1 does not exist or belongs to another user than this session's "
                    "@dbm_memory_user_id (bob): set @dbm_memory_user_id to the user the request serves"
                    ) in str(caught.value)
        finally:
            probe.dispose()
        _expire_one_store_is_bound(engine, url, base)
    finally:
        engine.dispose()


def test_a_login_that_sends_the_installers_or_the_owners_name_is_bound(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    """USER() is the name the client sent: an anonymous account (``''@host``, the user role
    only) logs in with any name, the installer's or the definer's included. It reaches alice's
    store only with alice named, and its audit rows record the name it sent."""
    if server_name != "mysql":
        pytest.skip("MariaDB/MySQL's accounts")
    url = make_empty_database()
    base = derived_role_base(url.database or "")
    host = f"127.0.{random.randint(1, 250)}.{random.randint(2, 250)}"  # loopback, this test's own
    engine = _installed_with_three_users(url)
    try:
        with engine.begin() as c:
            c.exec_driver_sql(f"CREATE USER ''@'{host}' IDENTIFIED BY 'anon-pw'")
            c.exec_driver_sql(f"GRANT {base}_user TO ''@'{host}'")
            c.exec_driver_sql(f"SET DEFAULT ROLE {base}_user FOR ''@'{host}'")
        try:
            written: set[str] = set()
            for n, claimed in enumerate((url.username or "root", f"{base}_owner")):
                connect = _raw(url.set(username=claimed, password="anon-pw"), bind_address=host)
                raw = connect()
                try:
                    cursor = raw.cursor()  # type: ignore[attr-defined]
                    cursor.execute("SELECT USER(), CURRENT_USER()")
                    assert cursor.fetchone() == (f"{claimed}@{host}", f"@{host}")  # anonymous
                    cursor.execute("START TRANSACTION")
                    cursor.execute("SET @dbm_memory_user_id = 'alice'")
                    cursor.execute(f"CALL dbm_memory_put_file(1, '/memories/a{n}.md', 'x', 'anon', @v)")
                    raw.commit()  # type: ignore[attr-defined]
                finally:
                    raw.close()  # type: ignore[attr-defined]
                written.add(f"/memories/a{n}.md")
                seen = _walks(connect)
                assert seen["alice"] == _ALICE | written, (claimed, seen["alice"])
                assert seen[None] == set() and seen[""] == set(), claimed
                with engine.connect() as c:
                    who = c.exec_driver_sql(
                        "SELECT session_user_name FROM dbm_audit_events WHERE actor_name = 'anon'"
                        " ORDER BY event_id DESC LIMIT 1").scalar()
                assert who == f"{claimed}@{host}"  # the name sent, not the account authenticated
        finally:
            with engine.begin() as c:
                c.exec_driver_sql(f"DROP USER IF EXISTS ''@'{host}'")
    finally:
        engine.dispose()


def test_installing_again_drops_the_retired_name_exemption_and_its_grant(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    """An install made before every caller was bound has ``dbm_memory__unbound`` (granted to
    the definer): install-api drops it (routine and grant), and uninstall-api would too."""
    if server_name != "mysql":
        pytest.skip("MariaDB/MySQL's routines")
    url = make_empty_database()
    engine = _installed_with_three_users(url)
    owner = mysql_definer_account(url.database or "")
    plain = url.render_as_string(hide_password=False)
    try:
        with engine.begin() as c:  # what an earlier install left behind
            c.exec_driver_sql(f"CREATE DEFINER = {owner} FUNCTION dbm_memory__unbound() RETURNS BOOLEAN"
                              " NO SQL SQL SECURITY DEFINER RETURN TRUE")
            c.exec_driver_sql(f"GRANT EXECUTE ON FUNCTION dbm_memory__unbound TO {owner}")

        def left() -> tuple[int, list[str]]:
            with engine.connect() as c:
                n = c.exec_driver_sql(
                    "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA ="
                    " DATABASE() AND ROUTINE_NAME = 'dbm_memory__unbound'").scalar()
                grants = [str(r[0]) for r in c.exec_driver_sql(f"SHOW GRANTS FOR {owner}")]
            return int(n or 0), [g for g in grants if "dbm_memory__unbound" in g]

        assert left()[0] == 1 and left()[1]
        result = CliRunner().invoke(app, ["db", "install-api", "--url", plain, "--roles"])
        assert result.exit_code == 0, result.output
        assert left() == (0, [])
        assert ("FUNCTION", "dbm_memory__unbound") in RETIRED
        assert "DROP FUNCTION IF EXISTS dbm_memory__unbound" in mysql_uninstall()
    finally:
        engine.dispose()


def _expire_one_store_is_bound(engine: sa.engine.Engine, url: URL, base: str) -> None:
    """expire_files for one store (an admin call): alice's store only with alice named."""
    admin = f"{base}_la"
    create_login(engine, "mysql", admin, f"{base}_admin")
    caller = create_engine(url.set(username=admin, password=None))
    outcome: dict[str | None, str] = {}
    try:
        for identity in ("alice", "bob", None):
            with caller.connect() as c:
                c.exec_driver_sql("START TRANSACTION")
                c.exec_driver_sql("SET @dbm_memory_user_id = %s", (identity,))
                try:
                    c.exec_driver_sql("CALL dbm_memory_expire_files(30, 1, @x)")
                    outcome[identity] = "expired"
                except sa.exc.DBAPIError as exc:
                    error = code_of(exc)
                    outcome[identity] = error.code if error else str(exc)
                c.rollback()
    finally:
        caller.dispose()
    assert outcome == {"alice": "expired", "bob": "not_found", None: "not_found"}


def _oracle_subprograms(body: str) -> dict[str, str]:
    """Each subprogram body of the package, by name (a name declared twice: the texts joined)."""
    found: dict[str, str] = {}
    for m in re.finditer(r"^  (?:PROCEDURE|FUNCTION) (\w+)\b(.*?)^  END \1;", body, re.M | re.S):
        found[m.group(1)] = found.get(m.group(1), "") + m.group(2)
    return found


def test_oracle_binds_the_same_calls_to_the_user_set_by_set_user() -> None:
    """Oracle (read, never run here): the package keeps the session's user (set_user, package
    state) and every call that takes a store id or builds a key checks it, as on PostgreSQL and
    MariaDB; the package's owner is not bound."""
    spec, body = oracle_statements()
    for decl in ("PROCEDURE set_user (p_user_id IN VARCHAR2);", "PROCEDURE clear_user;",
                 "FUNCTION current_user_id RETURN VARCHAR2;"):
        assert decl in spec, decl
    subs = _oracle_subprograms(body)
    check = subs["check_identity"]
    assert "g_user_id IS NULL" in check and "fail('not_found'" in check
    assert "SYS_CONTEXT('USERENV', 'SESSION_USER') = SYS_CONTEXT('USERENV', 'CURRENT_USER')" in check
    assert "does not exist or belongs to another user than this session" in check
    for helper in ("check_reachable", "lock_store", "resolve_store_id_n", "open_store"):
        assert "check_identity(" in subs[helper], helper
    # every call that takes a store id reaches the check through check_reachable or lock_store
    for call in ("list_files", "get_file", "put_file_n", "delete_file_n", "clear_store_files_n",
                 "expire_files_n"):
        assert re.search(r"\b(check_reachable|lock_store)\(p_store_id", subs[call]), call
    assert "component(p_user_id, 'a user id', c_scope_user)" in subs["set_user"]


def test_the_api_audit_rows_record_the_callers_login_not_the_definer(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    """A login holding only the user role writes through the definer routines: its audit rows
    name the actor it passed and, filled by the database, its own login (never the owner)."""
    if server_name not in ("postgres", "mysql"):
        pytest.skip("PostgreSQL and MariaDB (Oracle: the column's DDL is read in tests/db)")
    url = make_empty_database()
    engine = create_engine(url)
    base = derived_role_base(url.database or "")
    login = f"{base}_la"
    try:
        migrate.upgrade(engine)
        plain = url.render_as_string(hide_password=False)
        assert CliRunner().invoke(app, ["db", "install-api", "--url", plain, "--roles"]).exit_code == 0
        create_login(engine, server_name, login, f"{base}_user")
        caller = create_engine(url.set(username=login, password=None))
        try:
            with caller.begin() as c:
                if server_name == "postgres":
                    c.exec_driver_sql("SELECT set_config('dbm_memory.user_id', 'alice', true)")
                    c.exec_driver_sql(
                        "SELECT dbm_memory.put_file(dbm_memory.open_store('user', p_agent_code => 'S',"
                        " p_user_id => 'alice'), '/memories/a.md', 'x', 'agent:support')")
                else:
                    c.exec_driver_sql("SET @dbm_memory_user_id = 'alice'")
                    c.exec_driver_sql(_OPEN.replace("'SUPPORT', %s", "'S', 'alice'"))
                    c.exec_driver_sql("CALL dbm_memory_put_file(@s, '/memories/a.md', 'x', 'agent:support', @v)")
        finally:
            caller.dispose()
        with engine.connect() as c:
            rows = c.execute(sa.text("SELECT actor_name, session_user_name FROM dbm_audit_events")).all()
        assert len(rows) == 1 and rows[0][0] == "agent:support"
        who = str(rows[0][1])
        if server_name == "postgres":
            assert who == login
        else:
            assert who.startswith(f"{login}@") and "_owner" not in who, who
    finally:
        engine.dispose()
