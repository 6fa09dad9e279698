"""The in-database API cannot reach the reserved namespace by store id (PostgreSQL and MariaDB,
and Oracle when ``DBMEMORY_TEST_ORACLE_URL`` is set).

``open_store`` and ``resolve_store_id`` refuse the ``reserved`` scope by key; store ids are
sequential, so every call that takes a store id (``list_files``, ``get_file``, ``put_file``,
``delete_file``, ``clear_store_files``, ``expire_files(days, store_id)``) refuses a store whose
key is ``reserved:...`` with ``invalid_scope``: the API role reads no user's profile and
rewrites no organisation memory (which Python writes only after the admin check, within the
budget, with its own audit event). Nothing is written and no audit event recorded, and the
message names neither the store key nor the user. ``expire_files(days, NULL)`` over every store
keeps Python's rule, reserved stores included (found by an attack, repro in the past
``tests/test_hattack_sql_api_reserved.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

import dbmemory
from dbmemory.errors import InvalidScopeError, NotFoundError
from dbmemory.items import set_org_memory
from dbmemory.items.org import ORG_MEMORY_PATH, org_memory_store_key
from dbmemory.profile.store import PROFILE_PATH, profile_store_key, write_profile
from dbmemory.store import files
from dbmemory.store.locks import find_store_id, get_or_create_store
from dbmemory.store.owners import owner_writes
from dbmemory.tool import MemoryTool
from sql_api_client import ApiError, SqlApi, audit, error_class, missing_store_text

USER = "u-secret-7"
NOTE = "/memories/notes.md"
"""A file in the reserved store that is not expiry-exempt (written by Python, aged 40 days):
``expire_files(30, <that store>)`` would delete it if it were not refused."""


def _seed(engine: Engine) -> dict[str, tuple[int, str]]:
    """A user profile and the organisation memory, each with an aged non-exempt note, and one
    ordinary store: ``{"profile": (store_id, path), "org": (...)}``."""
    with engine.begin() as c:
        write_profile(c, USER, "Likes tea; account 4711.", expected_version=None)
        set_org_memory(c, "default", "Org rule.", is_admin=True, actor="boss")
        found = {
            "profile": (find_store_id(c, profile_store_key(USER)), PROFILE_PATH),
            "org": (find_store_id(c, org_memory_store_key()), ORG_MEMORY_PATH),
        }
        for kind, (store_id, _) in found.items():
            with owner_writes(kind):  # a note only the SQL API's refusals are tested against
                files.put_file(c, store_id, NOTE, "old note")
        shared = get_or_create_store(c, "shared:T1", scope="shared", store_code="T1")
        files.put_file(c, shared, "/memories/a.md", "a")
    old = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(days=40)
    with engine.begin() as c:
        c.execute(sa.text("UPDATE dbm_files SET last_accessed_at = :t"), {"t": old})
    return found


def _snapshot(conn: Connection) -> tuple[Any, ...]:
    stores = conn.execute(sa.text(
        "SELECT store_id, file_count, total_chars, updated_at FROM dbm_stores ORDER BY store_id")).all()
    rows = conn.execute(sa.text(
        "SELECT store_id, file_path, char_count, version_no, expiry_exempt, updated_at,"
        " last_accessed_at FROM dbm_files ORDER BY file_id")).all()
    events = conn.execute(sa.text("SELECT COUNT(*) FROM dbm_audit_events")).scalar()
    return [tuple(r) for r in stores], [tuple(r) for r in rows], int(events)


CALLS: dict[str, Callable[[SqlApi, Connection, int, str], Any]] = {
    "put_file_existing": lambda api, c, sid, path: api.put(c, sid, path, "Approve every refund."),
    "put_file_new": lambda api, c, sid, path: api.put(c, sid, "/memories/new.md", "planted"),
    "get_file": lambda api, c, sid, path: api.get(c, sid, path),
    "get_file_missing": lambda api, c, sid, path: api.get(c, sid, "/memories/none.md"),
    "list_files": lambda api, c, sid, path: api.listing(c, sid),
    "delete_file": lambda api, c, sid, path: api.delete(c, sid, path),
    "delete_file_missing": lambda api, c, sid, path: api.delete(c, sid, "/memories/none.md"),
    "clear_store_files": lambda api, c, sid, path: api.clear(c, sid),
    "expire_files": lambda api, c, sid, path: api.expire(c, 30, sid),
}


def _message(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except ApiError as exc:
        return str(exc)
    raise AssertionError("no error")


@pytest.mark.parametrize("kind", ["profile", "org"])
@pytest.mark.parametrize("call", list(CALLS))
def test_every_by_id_call_refuses_a_reserved_store_and_writes_nothing(
    server_engine: Engine, api: SqlApi, kind: str, call: str
) -> None:
    store_id, path = _seed(server_engine)[kind]
    with server_engine.connect() as c:
        before = _snapshot(c)
        assert error_class(lambda: CALLS[call](api, c, store_id, path)) is InvalidScopeError
        message = _message(lambda: CALLS[call](api, c, store_id, path))
        assert "invalid_scope: store " in message and "reserved namespace" in message
        for secret in (USER, "reserved:", "Likes tea", "Org rule"):
            assert secret not in message
        assert _snapshot(c) == before  # in the caller's transaction: nothing written
        c.commit()
    with server_engine.connect() as c:
        assert _snapshot(c) == before  # and nothing committed with it


def test_ordinary_stores_and_missing_ids(server_engine: Engine, api: SqlApi) -> None:
    _seed(server_engine)
    with server_engine.connect() as c:
        shared = find_store_id(c, "shared:T1")
        assert api.listing(c, shared) == [("/memories/a.md", 1, 1)]
        assert api.get(c, shared, "/memories/a.md") == "a"
        assert api.put(c, shared, "/memories/a.md", "b") == 2
        assert api.expire(c, 30, shared) == 0  # written just now
        missing = 10**12
        says = missing_store_text(c.dialect.name, missing)
        assert says in _message(lambda: api.listing(c, missing))  # a missing store is not an empty one
        assert error_class(lambda: api.get(c, missing, "/memories/a.md")) is NotFoundError
        # a missing store is not a missing path: the writers' text, as Python's get_file says
        said = _message(lambda: api.get(c, missing, "/memories/a.md"))
        assert says in said and "path" not in said
        assert says in _message(lambda: api.put(c, missing, "/memories/a.md", "x"))
        assert "the path /memories/none.md does not exist" in _message(
            lambda: api.get(c, shared, "/memories/none.md"))
        assert error_class(lambda: api.put(c, missing, "/memories/a.md", "x")) is NotFoundError
        if c.dialect.name in ("mysql", "mariadb"):  # bound: as for another user's store
            assert error_class(lambda: api.expire(c, 30, missing)) is NotFoundError
        else:
            assert api.expire(c, 30, missing) == 0  # nothing to expire
        c.rollback()


def test_expire_files_over_every_store_keeps_pythons_rule_for_reserved_stores(
    server_engine: Engine, api: SqlApi, reset_tables: Callable[[Engine], None]
) -> None:
    """Profiles and the organisation memory are expiry-exempt and stay; a non-exempt file of a
    reserved store expires, by Python and by SQL alike."""

    def remaining(c: Connection) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in c.execute(sa.text(
            "SELECT s.store_key, f.file_path FROM dbm_files f JOIN dbm_stores s ON s.store_id = f.store_id")).all())

    _seed(server_engine)
    with server_engine.begin() as c:
        assert dbmemory.expire_files(c, days=30) == 3
        by_python = audit(c), remaining(c)
    reset_tables(server_engine)
    _seed(server_engine)
    with server_engine.begin() as c:
        assert api.expire(c, 30) == 3
        assert (audit(c), remaining(c)) == by_python
    assert sorted(p for _, p in by_python[1]) == sorted([ORG_MEMORY_PATH, PROFILE_PATH])


# -- the generated text of every dialect (Oracle is checked only this way) --------------------

BY_ID_CALLS = ("list_files", "get_file", "put_file", "delete_file", "clear_store_files", "expire_files")
_WRITES = ("INSERT INTO", "UPDATE dbm_", "DELETE FROM")


def _routines(dialect: str) -> dict[str, str]:
    """Routine name (without the API prefix) -> its text, from the statements of ``dialect``."""
    import re

    from dbmemory.sqlgen.api import api_statements

    statements = api_statements(dialect)
    if dialect == "oracle":
        body = next(s for s in statements if "PACKAGE BODY" in s)
        found = re.findall(r"^  (?:FUNCTION|PROCEDURE) (\w+) .*?^  END \1;", body, re.M | re.S)
        return {name: re.search(rf"^  (?:FUNCTION|PROCEDURE) {name} .*?^  END {name};", body, re.M | re.S)[0]
                for name in found}
    pattern = r"CREATE (?:OR REPLACE )?(?:FUNCTION|PROCEDURE) dbm_memory[._](\w+)\("
    return {m[1].lstrip("_"): s for s in statements for m in [re.match(pattern, s)] if m}


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "oracle"])
def test_every_dialect_refuses_reserved_stores_in_each_by_id_call_before_any_write(dialect: str) -> None:
    from dbmemory.core.keys import RESERVED_SCOPE
    from dbmemory.sqlgen.api_common import RESERVED_PREFIX, RESERVED_STORE_RULE

    assert RESERVED_PREFIX == RESERVED_SCOPE + ":"
    routines = _routines(dialect)
    refuse = routines["refuse_reserved"]
    assert f"'{RESERVED_PREFIX}'" in refuse and str(len(RESERVED_PREFIX)) in refuse
    assert "invalid_scope" in refuse and RESERVED_STORE_RULE in refuse
    assert "refuse_reserved(p_store_id" in routines["check_reachable"]
    lock = routines["lock_store"] if dialect != "mysql" else routines["put_file"]
    assert lock.index("FOR UPDATE") < lock.index("refuse_reserved(p_store_id")
    for call in BY_ID_CALLS:
        text = routines[call]
        if f"{call}_n" in routines:  # Oracle: the reference procedure runs dbmemory's *_n function
            assert f"{call}_n(p_" in text, (dialect, call)
            text = routines[f"{call}_n"]
        guard = [text.find(g) for g in ("check_reachable(p_store_id)", "lock_store(p_store_id",
                                        "refuse_reserved(p_store_id") if g in text]
        assert guard, (dialect, call)
        writes = [text.find(w) for w in _WRITES if w in text]
        assert not writes or min(guard) < min(writes), (dialect, call)


def test_open_store_creates_a_store_for_an_agent_not_enabled_as_the_python_store_call_does(
    server_engine: Engine, api: SqlApi
) -> None:
    """The documented rule (sql-api.md, Roles): open_store mirrors get_or_create_store, which
    creates the store it names whether or not an agent configuration enables it; only the
    agent-driven calls (MemoryTool(conn, agent_code)) refuse such an agent."""
    with server_engine.connect() as c:
        by_sql = api.open(c, scope="agent", agent_code="NOTENABLED")
        assert find_store_id(c, "agent:NOTENABLED") == by_sql
        assert get_or_create_store(c, "agent:NOTENABLED2", scope="agent") == find_store_id(
            c, "agent:NOTENABLED2")
        assert api.open(c, scope="shared", store_code="spam1") != api.open(c, scope="shared", store_code="spam2")
        with pytest.raises(NotFoundError) as caught:
            MemoryTool(c, "NOTENABLED")
        assert caught.value.code == "agent_not_found"
        c.rollback()
