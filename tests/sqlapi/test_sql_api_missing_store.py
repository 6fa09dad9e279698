"""Callers bound to their stores cannot tell a missing store id from another user's: every call
that takes a store id answers both with the same error code and text (PostgreSQL: a login that
cannot act as the API's owner; MariaDB/MySQL: every login). PostgreSQL's owner-capable logins are
not bound and keep the precise "store N does not exist" text."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.db import migrate
from dbmemory.db.engine import create_engine
from dbmemory.sqlgen.api_common import derived_role_base
from sql_api_client import code_of, create_login

_MISSING = 999999
_VIEW = '{"command": "view", "path": "/memories"}'

_PG_CALLS = {
    "get_file": "SELECT dbm_memory.get_file({id}, '/memories/secret.md')",
    "list_files": "SELECT * FROM dbm_memory.list_files({id})",
    "put_file": "SELECT dbm_memory.put_file({id}, '/memories/planted.md', 'x')",
    "delete_file": "SELECT dbm_memory.delete_file({id}, '/memories/secret.md')",
    "clear_store_files": "SELECT dbm_memory.clear_store_files({id})",
    "run_command json": "SELECT dbm_memory.run_command({id}, '" + _VIEW + "'::json)",
    "run_command text": "SELECT dbm_memory.run_command({id}, '" + _VIEW + "'::text)",
    "run_command not json": "SELECT dbm_memory.run_command({id}, 'not json'::text)",
}
_PG_ADMIN_CALLS = {"expire_files": "SELECT dbm_memory.expire_files(30, {id})"}

_MY_CALLS = {
    "get_file": "SELECT dbm_memory_get_file({id}, '/memories/secret.md')",
    "list_files": "CALL dbm_memory_list_files({id})",
    "put_file": "CALL dbm_memory_put_file({id}, '/memories/planted.md', 'x', 'walker', @v)",
    "delete_file": "CALL dbm_memory_delete_file({id}, '/memories/secret.md', 'walker', @d)",
    "clear_store_files": "CALL dbm_memory_clear_store_files({id}, 'walker', @c)",
    "run_command": "CALL dbm_memory_run_command({id}, '" + _VIEW + "', 'walker', @r)",
    "run_command not json": "CALL dbm_memory_run_command({id}, 'not json', 'walker', @r)",
}
_MY_ADMIN_CALLS = {"expire_files": "CALL dbm_memory_expire_files(30, {id}, @e)"}


def _answer(engine: sa.engine.Engine, set_identity: str | None, sql: str, store_id: int) -> tuple[str, str]:
    """(error code, message with the store id written as N) of ``sql`` for ``store_id``, rolled
    back; ('ok', '') when it succeeds."""
    with engine.connect() as c:
        if set_identity is not None:
            c.exec_driver_sql(set_identity)
        try:
            result = c.exec_driver_sql(sql.replace("{id}", str(store_id)))
            if result.returns_rows:
                result.fetchall()
        except sa.exc.DBAPIError as exc:
            error = code_of(exc)
            assert error is not None, exc
            orig = exc.orig
            diag = getattr(orig, "diag", None)
            text = diag.message_primary if diag is not None else str(orig.args[1])
            return error.code, text.replace(f"store {store_id} ", "store N ")
        finally:
            c.rollback()
    return "ok", ""


def _install(url: URL, server_name: str) -> tuple[sa.engine.Engine, int]:
    """Migrate, install with roles, give alice and bob a store (the installer naming each user on
    MariaDB/MySQL); bob's store id."""
    engine = create_engine(url)
    migrate.upgrade(engine)
    plain = url.render_as_string(hide_password=False)
    result = CliRunner().invoke(app, ["db", "install-api", "--url", plain, "--roles"])
    assert result.exit_code == 0, result.output
    ids: dict[str, int] = {}
    with engine.begin() as c:
        for user in ("alice", "bob"):
            if server_name == "postgres":
                ids[user] = c.exec_driver_sql(
                    "SELECT dbm_memory.open_store('user', p_agent_code => 'SUPPORT',"
                    f" p_user_id => '{user}')").scalar_one()
            else:
                c.exec_driver_sql(f"SET @dbm_memory_user_id = '{user}'")
                c.exec_driver_sql(
                    f"CALL dbm_memory_open_store('user', 'SUPPORT', '{user}', NULL, NULL, NULL, NULL, @s)")
                ids[user] = c.exec_driver_sql("SELECT @s").scalar_one()
    assert _MISSING not in ids.values()
    return engine, ids["bob"]


def test_a_bound_caller_gets_the_same_answer_for_a_missing_store_as_for_another_users(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    if server_name not in ("postgres", "mysql"):
        pytest.skip("Oracle is compiled only")
    url = make_empty_database()
    engine, bob = _install(url, server_name)
    base = derived_role_base(url.database or "")
    pg = server_name == "postgres"
    engines: list[sa.engine.Engine] = []
    try:
        for suffix, role, calls in (("_mu", "_user", _PG_CALLS if pg else _MY_CALLS),
                                    ("_ma", "_admin", _PG_ADMIN_CALLS if pg else _MY_ADMIN_CALLS)):
            create_login(engine, server_name, f"{base}{suffix}", f"{base}{role}")
            caller = create_engine(url.set(username=f"{base}{suffix}", password=None))
            engines.append(caller)
            for identity in ("alice", None):
                if identity is None:
                    set_identity = None
                elif pg:
                    set_identity = f"SELECT set_config('dbm_memory.user_id', '{identity}', false)"
                else:
                    set_identity = f"SET @dbm_memory_user_id = '{identity}'"
                for name, sql in calls.items():
                    other = _answer(caller, set_identity, sql, bob)
                    missing = _answer(caller, set_identity, sql, _MISSING)
                    assert other[0] == "not_found", (name, identity, other)
                    assert "belongs to another user" in other[1], (name, identity, other)
                    assert missing == other, (name, identity, missing, other)
        if pg:  # an owner-capable login is not bound: the precise answer
            code, text = _answer(engine, None, _PG_CALLS["get_file"], _MISSING)
            assert code == "not_found" and text.endswith("store N does not exist: check the store id")
    finally:
        for caller in engines:
            caller.dispose()
        engine.dispose()
