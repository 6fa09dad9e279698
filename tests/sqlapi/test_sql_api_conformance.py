"""The in-database API (``sql/<dialect>/api.sql``) against the Python API: the same cases run
through both, for real, on PostgreSQL and MariaDB (and Oracle when ``DBMEMORY_TEST_ORACLE_URL``
is set and the package is installed there), with identical texts, versions, listings, audit
rows, caps and errors by code."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

import dbmemory
from dbmemory.core.model import StoreRef
from dbmemory.core.paths import normalize_path
from dbmemory.errors import (
    CapExceededError,
    InvalidArgumentError,
    InvalidPathError,
    InvalidScopeError,
    NotFoundError,
)
from dbmemory.sqlgen.api_common import sql_path_problem
from dbmemory.store import agents as stores
from dbmemory.store import files
from dbmemory.store.locks import find_store_id, get_or_create_store
from dbmemory.store.moves import clear_store_files, delete_file
from dbmemory.store.reads import get_file, list_files
from dbmemory.store.resolve import resolve_store_id
from sql_api_client import ApiError, SqlApi, audit, error_class


def _counter_drift(engine: Engine) -> list[tuple[Any, ...]]:
    """Stores whose counters (``file_count``, ``total_chars``, revision 0004) differ from
    ``COUNT(*)`` / ``SUM(char_count)`` of their files: ``(store_id, counters, actual)``."""
    with engine.connect() as c:
        rows = c.execute(sa.text(
            "SELECT s.store_id, s.file_count, s.total_chars, COUNT(f.file_id),"
            " COALESCE(SUM(f.char_count), 0) FROM dbm_stores s"
            " LEFT JOIN dbm_files f ON f.store_id = s.store_id"
            " GROUP BY s.store_id, s.file_count, s.total_chars")).all()
    return [(r[0], (int(r[1]), int(r[2])), (int(r[3]), int(r[4])))
            for r in rows if (int(r[1]), int(r[2])) != (int(r[3]), int(r[4]))]


@pytest.fixture(autouse=True)
def _counters_stay_exact(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every case that ran on a server (SQL and Python writers, races included), each
    store row's counters equal COUNT(*) / SUM(char_count) of its files."""
    if "server_engine" not in request.fixturenames:
        yield
        return
    engine = request.getfixturevalue("server_engine")  # set up first, so torn down after
    yield
    assert _counter_drift(engine) == []








def _new_store(engine: Engine, key: str = "shared:T1") -> int:
    with engine.begin() as c:
        return get_or_create_store(c, key, scope=key.split(":")[0], store_code=key.split(":")[-1])






def _strip_key(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted((r[1:] for r in rows), key=repr)


# -- texts, versions, listings, audit ---------------------------------------------------------

TEXTS = ["", "a\r\n\tb\r\nc\r\n", "a" * 4001, "a" * 32768, "\u20ac" * 100_000, "tab\tand  spaces  "]


@pytest.mark.parametrize("text", TEXTS, ids=["empty", "whitespace", "4001", "32768", "euro100k", "spaces"])
def test_a_text_written_by_sql_reads_back_identically_everywhere(
    server_engine: Engine, api: SqlApi, text: str
) -> None:
    sid_py, sid_sql = _new_store(server_engine, "shared:PY"), _new_store(server_engine, "shared:SQL")
    with server_engine.begin() as c:
        assert files.put_file(c, sid_py, "/memories/t.md", text).version == 1
        assert api.put(c, sid_sql, "/memories/t.md", text) == 1
    with server_engine.begin() as c:
        assert api.get(c, sid_sql, "/memories/t.md") == text
        assert get_file(c, sid_sql, "/memories/t.md").text == text
        assert api.get(c, sid_py, "/memories/t.md") == text
        assert api.listing(c, sid_sql) == [("/memories/t.md", len(text), 1)]
        assert [(f.path, f.chars, f.version) for f in list_files(c, sid_sql)] == [
            ("/memories/t.md", len(text), 1)
        ]
        # the same text again writes nothing; a new one bumps the version, as in Python
        assert api.put(c, sid_sql, "/memories/t.md", text) == 1
        assert files.put_file(c, sid_py, "/memories/t.md", text).version == 1
        changed = text[:-1] + "y" if text else "y"
        assert api.put(c, sid_sql, "/memories/t.md", changed) == 2
        assert files.put_file(c, sid_py, "/memories/t.md", changed).version == 2
        assert _strip_key(audit(c, sid_sql)) == _strip_key(audit(c, sid_py))


def test_a_sequence_of_writes_gives_the_same_listing_and_audit_rows(server_engine: Engine, api: SqlApi) -> None:
    sid_py, sid_sql = _new_store(server_engine, "shared:PY"), _new_store(server_engine, "shared:SQL")
    steps = [
        ("put", "/memories/b.md", "bee"),
        ("put", "/memories/a/x.md", "ex"),
        ("put", "/memories/a/y.md", ""),
        ("put", "/memories/b.md", "bee2"),
        ("put", "/memories/first..last.md", "legal"),
        ("put", "/memories/Z.md", "upper"),
        ("delete", "/memories/a/x.md", None),
        ("delete", "/memories/nothing.md", None),
    ]
    with server_engine.begin() as c:
        for op, path, text in steps:
            if op == "put":
                assert api.put(c, sid_sql, path, text) == files.put_file(c, sid_py, path, text).version
            else:
                assert api.delete(c, sid_sql, path) == delete_file(c, sid_py, path)
        assert api.listing(c, sid_sql) == [(f.path, f.chars, f.version) for f in list_files(c, sid_py)]
        assert api.listing(c, sid_sql) == api.listing(c, sid_py)
        assert api.clear(c, sid_sql) == clear_store_files(c, sid_py) == 4
        assert api.listing(c, sid_sql) == []
        assert _strip_key(audit(c, sid_sql)) == _strip_key(audit(c, sid_py))


# -- errors by code ---------------------------------------------------------------------------

C1_PATHS = [
    "/memories_backup/notes.md", "/memoriesX", "/memories/..", "/memories/foo/..",
    "/memories/%2e%2e/secret.md", "/memories/..%2fsecret.md", "/memories\\..\\x.md", "",
    "/memories/a\u200b.md", "/Memories/x.md", "/memories/ a.md",
]


@pytest.mark.parametrize("path", C1_PATHS)
def test_paths_python_refuses_are_refused_by_sql_with_invalid_path(
    server_engine: Engine, api: SqlApi, path: str
) -> None:
    sid = _new_store(server_engine)
    with server_engine.begin() as c:
        assert error_class(lambda: files.put_file(c, sid, path, "x")) is InvalidPathError
        assert error_class(lambda: api.put(c, sid, path, "x")) is InvalidPathError
        assert error_class(lambda: api.get(c, sid, path)) is InvalidPathError
        assert error_class(lambda: api.delete(c, sid, path)) is InvalidPathError
        assert api.listing(c, sid) == []


NORMALISED = ["/memories//a.md", "/memories/a.md/", "/memories/%61.md", "/memories/cafe\u0301.md",
              "/memories/caf\u00e9.md", "/memories/./a.md"]


@pytest.mark.parametrize("path", NORMALISED)
def test_paths_python_would_normalise_or_that_are_not_ascii_are_refused_by_sql(
    server_engine: Engine, api: SqlApi, path: str
) -> None:
    sid = _new_store(server_engine)
    with server_engine.begin() as c:
        exc = None
        try:
            api.put(c, sid, path, "x")
        except ApiError as e:
            exc = e
        assert exc is not None and exc.code == "invalid_path"
        assert "path" in str(exc)
        assert api.listing(c, sid) == []


LOOK_ALIKES = [
    "/memories/\uff50refs.md", "/memories/\U0001d429refs.md", "/memories/pro\ufb01le.md",
    "/memories/prefs\u2024md", "/memories/\u0440refs.md", "/memories/pr\u0435fs.md",
    "/memories/pref\u0455.md", "/memories/prefs.\u0307md", "/memories/\u0430\u0441\u0435.md",
    "/memories/\u2100.md",
]


@pytest.mark.parametrize("path", LOOK_ALIKES)
def test_look_alike_names_python_folds_or_refuses_are_refused_by_sql(
    server_engine: Engine, api: SqlApi, path: str
) -> None:
    """Issue 21: the SQL API never stores a key the Python rule would not produce: what NFKC
    folds (fullwidth, bold, ligature, one-dot leader) and what the look-alike rule refuses
    are all refused there (printable ASCII only); the plain key is accepted by both."""
    sid = _new_store(server_engine)
    with server_engine.begin() as c:
        try:
            key: str | None = normalize_path(path)
        except InvalidPathError:
            key = None
        assert key is None or key.isascii()
        exc = None
        try:
            api.put(c, sid, path, "x")
        except ApiError as e:
            exc = e
        assert exc is not None and exc.code == "invalid_path", path
        assert api.listing(c, sid) == []
        if key is not None:
            api.put(c, sid, key, "x")
            assert [row[0] for row in api.listing(c, sid)] == [key]


def test_the_sql_path_subset_is_canonical() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    alphabet = hs.sampled_from(list("/ab.% \\-_~") + ["memories", "/memories/", "\u00e9", "\u200b"])

    @settings(max_examples=2000, deadline=None)
    @given(hs.lists(alphabet, max_size=12).map("".join))
    def check(raw: str) -> None:
        if sql_path_problem(raw) is None:
            assert normalize_path(raw) == raw

    check()


ERROR_CASES: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("root", lambda c, s: files.put_file(c, s, "/memories", "x"), lambda a, c, s: a.put(c, s, "/memories", "x")),
    ("delete root", lambda c, s: delete_file(c, s, "/memories"), lambda a, c, s: a.delete(c, s, "/memories")),
    ("cap", lambda c, s: files.put_file(c, s, "/memories/big.md", "\u20ac" * 100_001),
     lambda a, c, s: a.put(c, s, "/memories/big.md", "\u20ac" * 100_001)),
    ("no store", lambda c, s: delete_file(c, s + 10_000, "/memories/a.md"),
     lambda a, c, s: a.delete(c, s + 10_000, "/memories/a.md")),
    ("no file", lambda c, s: get_file(c, s, "/memories/none.md"), lambda a, c, s: a.get(c, s, "/memories/none.md")),
    ("directory", lambda c, s: files.put_file(c, s, "/memories/d", "x"), lambda a, c, s: a.put(c, s, "/memories/d", "x")),
    ("delete directory", lambda c, s: delete_file(c, s, "/memories/d"), lambda a, c, s: a.delete(c, s, "/memories/d")),
    ("parent is a file", lambda c, s: files.put_file(c, s, "/memories/f.md/x", "x"),
     lambda a, c, s: a.put(c, s, "/memories/f.md/x", "x")),
    ("bad store id", lambda c, s: files.put_file(c, 0, "/memories/a.md", "x"), lambda a, c, s: a.put(c, 0, "/memories/a.md", "x")),
]


@pytest.mark.parametrize("name,py,sql", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_have_the_same_class(server_engine: Engine, api: SqlApi, name: str, py: Any, sql: Any) -> None:
    sid = _new_store(server_engine)
    with server_engine.begin() as c:
        files.put_file(c, sid, "/memories/d/inner.md", "in")
        files.put_file(c, sid, "/memories/f.md", "file")
    with server_engine.begin() as c:
        before = api.listing(c, sid), audit(c)
        expected = error_class(lambda: py(c, sid))
        assert expected is not None
        assert error_class(lambda: sql(api, c, sid)) is expected
        assert (api.listing(c, sid), audit(c)) == before


def test_max_files_and_max_store_chars_are_the_store_rows(server_engine: Engine, api: SqlApi) -> None:
    sid = _new_store(server_engine)
    with server_engine.begin() as c:
        stores.set_store_caps(c, sid, max_files=2, max_store_chars=10, max_file_chars=8)
        api.put(c, sid, "/memories/a.md", "12345")
        assert error_class(lambda: api.put(c, sid, "/memories/b.md", "123456")) is CapExceededError
        assert error_class(lambda: files.put_file(c, sid, "/memories/b.md", "123456")) is CapExceededError
        assert error_class(lambda: api.put(c, sid, "/memories/a.md", "123456789")) is CapExceededError
        api.put(c, sid, "/memories/b.md", "12345")
        assert error_class(lambda: api.put(c, sid, "/memories/c.md", "")) is CapExceededError
        assert error_class(lambda: files.put_file(c, sid, "/memories/c.md", "")) is CapExceededError
        assert api.put(c, sid, "/memories/a.md", "1") == 2  # shrinking is always allowed


def test_nul_is_refused_and_the_callers_transaction_goes_on(server_engine: Engine, api: SqlApi) -> None:
    sid = _new_store(server_engine)
    with server_engine.connect() as c:
        c.begin()
        api.put(c, sid, "/memories/mine.md", "before")
        assert error_class(lambda: files.put_file(c, sid, "/memories/n.md", "a\x00b")) is InvalidArgumentError
        if api.pg:  # PostgreSQL text cannot hold NUL: the driver refuses to send it
            with pytest.raises((ValueError, sa.exc.DataError)), c.begin_nested():
                api.put(c, sid, "/memories/n.md", "a\x00b")
        else:
            assert error_class(lambda: api.put(c, sid, "/memories/n.md", "a\x00b")) is InvalidArgumentError
        api.put(c, sid, "/memories/after.md", "after")
        c.commit()
    with server_engine.connect() as c:
        assert [r[0] for r in api.listing(c, sid)] == ["/memories/after.md", "/memories/mine.md"]


# -- store keys (C9) --------------------------------------------------------------------------

ACCEPTED = ["a" * 200, "v1.2_x-y"]
REFUSED = ["ctx-1\n", "a" * 200 + "\n", "a" * 201, "", "k\u00e4se", "\u0663", "ctx 1", "ctx/1", "a:b"]


def test_resolve_store_id_builds_the_keys_of_build_store_key(server_engine: Engine, api: SqlApi) -> None:
    with server_engine.begin() as c:
        for value in ACCEPTED:
            ref = StoreRef(store_key=f"context:A:doc:{value}", scope="context", agent_code="A")
            files.put_file(c, ref, "/memories/x.md", "x")
            assert api.resolve(c, scope="context", agent_code="A", context_key="doc", context_value=value) == \
                resolve_store_id(c, scope="context", agent_code="A", context_key="doc", context_value=value)
        files.put_file(c, StoreRef(store_key="context:store:D:doc:1", scope="context", store_code="D"),
                       "/memories/x.md", "x")
        assert api.resolve(c, scope="context", store_code="D", context_key="doc", context_value="1") == \
            resolve_store_id(c, scope="context", store_code="D", context_key="doc", context_value="1")
        for value in REFUSED:
            kw = dict(scope="context", agent_code="A", context_key="doc", context_value=value)
            assert error_class(lambda kw=kw: resolve_store_id(c, **kw)) is InvalidScopeError
            assert error_class(lambda kw=kw: api.resolve(c, **kw)) is InvalidScopeError
        for kw in (dict(scope="context", agent_code="A", context_value="1"), dict(scope="reserved"),
                   dict(scope="user", agent_code="A"), dict(scope="nope"), dict(scope="agent", agent_code="A:b")):
            assert error_class(lambda kw=kw: resolve_store_id(c, **kw)) is InvalidScopeError, kw
            assert error_class(lambda kw=kw: api.resolve(c, **kw)) is InvalidScopeError, kw
        kw = dict(scope="user", agent_code="A", user_id="never")
        assert error_class(lambda: resolve_store_id(c, **kw)) is NotFoundError
        assert error_class(lambda: api.resolve(c, **kw)) is NotFoundError


# -- agents, expiry, protocol -----------------------------------------------------------------

def _agents_snapshot(engine: Engine) -> tuple[Any, ...]:
    with engine.connect() as c:
        agents = c.execute(sa.text(
            "SELECT agent_code, scope_name, store_code, context_key, max_file_chars, max_files,"
            " max_store_chars, memory_enabled FROM dbm_agents ORDER BY agent_code")).all()
        st = c.execute(sa.text(
            "SELECT store_key, max_file_chars, max_files, max_store_chars FROM dbm_stores ORDER BY store_key")).all()
        return [tuple(a[:-1]) + (bool(a[-1]),) for a in agents], [tuple(s) for s in st], audit(c)


AGENT_STEPS: list[tuple[str, dict[str, Any]]] = [
    ("enable", dict(agent="A", scope="user", max_files=5)),
    ("enable", dict(agent="B", scope="shared", store_code="S", max_file_chars=50)),
    ("enable", dict(agent="C", scope="shared", store_code="S", max_file_chars=70, max_store_chars=900)),
    ("enable", dict(agent="D", scope="context", store_code="DOCS", context_key="doc", max_files=3)),
    ("enable", dict(agent="A", scope="agent")),
    ("enable", dict(agent="G", scope="global", max_files=9)),
    ("disable", dict(agent="B")),
    ("disable", dict(agent="A", drop_store=True)),
]


def _seed_stores(engine: Engine) -> None:
    with engine.begin() as c:
        for key in ("agent:A", "user:A:u1", "user:A:u2", "context:A:k:1", "shared:S", "global",
                    "context:store:DOCS:doc:7", "user:AB:u1", "agent:B"):
            parts = key.split(":")
            ref = StoreRef(store_key=key, scope=parts[0],
                           agent_code=parts[1] if parts[0] in ("agent", "user") or (parts[0] == "context" and parts[1] != "store") else None,
                           store_code=parts[-1] if parts[0] == "shared" else (parts[2] if parts[1:2] == ["store"] else None))
            files.put_file(c, ref, "/memories/seed.md", key)


def test_enable_and_disable_for_agent_write_the_same_rows(
    server_engine: Engine, api: SqlApi, reset_tables: Callable[[Engine], None]
) -> None:
    _seed_stores(server_engine)
    with server_engine.begin() as c:
        for op, kw in AGENT_STEPS:
            kw = dict(kw)
            agent = kw.pop("agent")
            if op == "enable":
                dbmemory.enable_for_agent(c, agent, **kw)
            else:
                dbmemory.disable_for_agent(c, agent, **kw)
    by_python = _agents_snapshot(server_engine)
    reset_tables(server_engine)
    _seed_stores(server_engine)
    with server_engine.begin() as c:
        for op, kw in AGENT_STEPS:
            kw = dict(kw)
            agent = kw.pop("agent")
            (api.enable if op == "enable" else api.disable)(c, agent, **kw)
    assert _agents_snapshot(server_engine) == by_python


def test_agent_configuration_errors_have_the_same_class(server_engine: Engine, api: SqlApi) -> None:
    cases = [
        dict(agent="reserved"), dict(agent="A", scope="reserved"), dict(agent="A", scope="shared"),
        dict(agent="A", scope="context"), dict(agent="A b"), dict(agent="A", scope="nope"),
        dict(agent="A", max_files=0), dict(agent="A", store_code="Reserved", scope="shared"),
    ]
    with server_engine.begin() as c:
        for kw in cases:
            kw = dict(kw)
            agent = kw.pop("agent")
            expected = error_class(lambda agent=agent, kw=kw: dbmemory.enable_for_agent(c, agent, **kw))
            assert expected is not None
            assert error_class(lambda agent=agent, kw=kw: api.enable(c, agent, **kw)) is expected, kw
        assert error_class(lambda: dbmemory.disable_for_agent(c, "nobody")) is NotFoundError
        assert error_class(lambda: api.disable(c, "nobody")) is NotFoundError


def _age_files(engine: Engine, days: float) -> None:
    old = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(days=days)
    with engine.begin() as c:
        c.execute(sa.text("UPDATE dbm_files SET last_accessed_at = :t WHERE file_path <> '/memories/new.md'"),
                  {"t": old})


def test_expire_files_deletes_and_audits_like_python(
    server_engine: Engine, api: SqlApi, reset_tables: Callable[[Engine], None]
) -> None:
    def seed() -> int:
        sid = _new_store(server_engine)
        with server_engine.begin() as c:
            for name in ("old1.md", "old2.md", "new.md"):
                files.put_file(c, sid, f"/memories/{name}", name)
        _age_files(server_engine, 40)
        return sid

    seed()
    with server_engine.begin() as c:
        assert dbmemory.expire_files(c, days=30) == 2
        by_python = audit(c), api.listing(c, find_store_id(c, "shared:T1"))
    reset_tables(server_engine)
    seed()
    with server_engine.begin() as c:
        assert api.expire(c, 30) == 2
        assert (audit(c), api.listing(c, find_store_id(c, "shared:T1"))) == by_python
        for days in (0.01, 100_001):
            assert error_class(lambda days=days: dbmemory.expire_files(c, days=days)) is InvalidArgumentError
            assert error_class(lambda days=days: api.expire(c, days)) is InvalidArgumentError


def test_get_memory_protocol_is_the_python_text(server_engine: Engine, api: SqlApi) -> None:
    with server_engine.connect() as c:
        assert api.protocol(c) == dbmemory.get_memory_protocol()


# -- the MEMORY tool, rollback, races ---------------------------------------------------------

def test_a_file_written_by_sql_is_edited_by_the_memory_tool_and_back(server_engine: Engine, api: SqlApi) -> None:
    from dbmemory.tool import MemoryTool

    with server_engine.begin() as c:
        dbmemory.enable_for_agent(c, "QA")
        files.put_file(c, StoreRef(store_key="agent:QA", scope="agent", agent_code="QA"), "/memories/seed.md", "s")
        sid = api.resolve(c, scope="agent", agent_code="QA")
        assert api.put(c, sid, "/memories/notes.md", "## Notes\n- (none yet)\n") == 1
    with server_engine.begin() as c:
        tool = MemoryTool(c, agent_code="QA")
        out = tool.execute({"command": "str_replace", "path": "/memories/notes.md",
                            "old_str": "- (none yet)", "new_str": "- prefers tea"})
        assert "error" not in str(out).lower()[:20], out
    with server_engine.begin() as c:
        assert api.get(c, sid, "/memories/notes.md") == "## Notes\n- prefers tea\n"
        assert api.put(c, sid, "/memories/notes.md", "## Notes\n- prefers coffee\n") == 3
    with server_engine.begin() as c:
        out = MemoryTool(c, agent_code="QA").execute({"command": "view", "path": "/memories/notes.md"})
        assert "prefers coffee" in str(out)


def test_a_callers_rollback_removes_the_sql_writes(server_engine: Engine, api: SqlApi) -> None:
    sid = _new_store(server_engine)
    with server_engine.connect() as c:
        c.begin()
        api.put(c, sid, "/memories/gone.md", "x")
        c.rollback()
    with server_engine.connect() as c:
        assert api.listing(c, sid) == [] and audit(c, sid) == []


@pytest.mark.parametrize("cap_name", ["max_files", "max_store_chars"])
def test_caps_hold_between_one_sql_writer_and_one_python_writer(
    server_engine: Engine, api: SqlApi, cap_name: str
) -> None:
    # both writers check the cap from the store row's counters: each one-character file
    # counts one file and one character, so either cap admits exactly `cap` files
    sid = _new_store(server_engine)
    cap = 20
    with server_engine.begin() as c:
        stores.set_store_caps(c, sid, **{cap_name: cap})
    refused = {"sql": 0, "python": 0}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def writer(kind: str) -> None:
        try:
            barrier.wait()
            for i in range(cap):
                with server_engine.begin() as c:
                    try:
                        if kind == "sql":
                            api.put(c, sid, f"/memories/sql{i}.md", "x")
                        else:
                            files.put_file(c, sid, f"/memories/py{i}.md", "x")
                    except (ApiError, CapExceededError) as exc:
                        assert getattr(exc, "python", type(exc)) is CapExceededError
                        refused[kind] += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in ("sql", "python")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with server_engine.connect() as c:
        assert len(api.listing(c, sid)) == cap
        counters = c.execute(sa.text("SELECT file_count, total_chars FROM dbm_stores WHERE store_id = :s"),
                             {"s": sid}).one()
    assert tuple(counters) == (cap, cap)
    assert refused["sql"] + refused["python"] == cap


@pytest.mark.parametrize("expirer", ["sql", "python"])
def test_expiry_skips_a_store_a_writer_holds_and_keeps_the_counters(
    server_engine: Engine, api: SqlApi, expirer: str
) -> None:
    def expire(c: Connection) -> int:
        return api.expire(c, 30) if expirer == "sql" else dbmemory.expire_files(c, days=30)

    held, free = _new_store(server_engine, "shared:HELD"), _new_store(server_engine, "shared:FREE")
    with server_engine.begin() as c:
        for sid in (held, free):
            for name in ("a.md", "b.md"):
                files.put_file(c, sid, f"/memories/{name}", "xyz")
    _age_files(server_engine, 40)
    writer = server_engine.connect()
    try:
        writer.begin()
        files.put_file(writer, held, "/memories/c.md", "12345")  # holds the store row
        with server_engine.begin() as c:
            assert expire(c) == 2  # the free store's two files; the held one skipped
            assert api.listing(c, free) == []
        writer.commit()
    finally:
        writer.close()
    assert _counter_drift(server_engine) == []
    with server_engine.begin() as c:
        assert expire(c) == 2  # the held store's old files, now that it is free
        assert [r[0] for r in api.listing(c, held)] == ["/memories/c.md"]


@pytest.mark.parametrize("expirer", ["sql", "python"])
def test_expiry_and_a_writer_of_the_other_kind_race_and_the_counters_stay_exact(
    server_engine: Engine, api: SqlApi, expirer: str
) -> None:
    sid = _new_store(server_engine)
    with server_engine.begin() as c:
        for i in range(30):
            files.put_file(c, sid, f"/memories/old{i}.md", "x" * i)
    _age_files(server_engine, 40)
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def expire() -> None:
        try:
            barrier.wait()
            for _ in range(10):
                with server_engine.begin() as c:
                    if expirer == "sql":
                        api.expire(c, 30)
                    else:
                        dbmemory.expire_files(c, days=30)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def write() -> None:
        try:
            barrier.wait()
            for i in range(30):
                with server_engine.begin() as c:
                    if expirer == "sql":
                        files.put_file(c, sid, f"/memories/new{i}.md", "y" * i)
                        delete_file(c, sid, f"/memories/old{i}.md")
                    else:
                        api.put(c, sid, f"/memories/new{i}.md", "y" * i)
                        api.delete(c, sid, f"/memories/old{i}.md")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=expire), threading.Thread(target=write)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert _counter_drift(server_engine) == []
    with server_engine.connect() as c:
        names = sorted(r[0] for r in api.listing(c, sid))
    assert names == sorted(f"/memories/new{i}.md" for i in range(30))


def test_mysql_writers_refuse_to_run_without_a_transaction(server_engine: Engine, api: SqlApi) -> None:
    if api.pg or api.ora:
        pytest.skip("only MySQL/MariaDB routines can run outside a transaction")
    sid = _new_store(server_engine)
    with server_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        exc = None
        try:
            api.put(c, sid, "/memories/a.md", "x")
        except ApiError as e:
            exc = e
        assert exc is not None and exc.code == "invalid_argument" and "transaction" in str(exc)
        c.exec_driver_sql("START TRANSACTION")
        assert api.put(c, sid, "/memories/a.md", "x") == 1
        c.exec_driver_sql("COMMIT")
    with server_engine.connect() as c:
        assert api.listing(c, sid) == [("/memories/a.md", 1, 1)]


OPENED = [
    dict(scope="agent", agent_code="A"), dict(scope="user", agent_code="A", user_id="u1"),
    dict(scope="shared", store_code="S"), dict(scope="global"),
    dict(scope="context", store_code="DOCS", context_key="doc", context_value="7"),
    dict(scope="context", agent_code="A", context_key="k", context_value="1"),
    dict(scope="session", agent_code="A", session_id="s-1"), dict(scope="shared", store_code="FREE"),
]


def _open_in_python(conn: Connection, parts: dict[str, Any]) -> int:
    from dbmemory.core.keys import build_store_key, parse_store_key

    key = build_store_key(**parts)
    parsed = parse_store_key(key)
    agent = parts.get("agent_code") if parsed.scope == "session" else parsed.agent_code
    return get_or_create_store(conn, key, scope=parsed.scope, agent_code=agent,
                                     store_code=parsed.store_code)


def test_open_store_creates_the_row_python_would_with_the_configured_caps(
    server_engine: Engine, api: SqlApi, reset_tables: Callable[[Engine], None]
) -> None:
    def configure() -> None:
        with server_engine.begin() as c:
            dbmemory.enable_for_agent(c, "A", scope="user", max_files=5)
            dbmemory.enable_for_agent(c, "B", scope="shared", store_code="S", max_file_chars=50)
            dbmemory.enable_for_agent(c, "C", scope="shared", store_code="S", max_file_chars=70, max_store_chars=900)
            dbmemory.enable_for_agent(c, "D", scope="context", store_code="DOCS", context_key="doc", max_files=3)
            dbmemory.enable_for_agent(c, "G", scope="global", max_files=9)

    def rows() -> list[tuple[Any, ...]]:
        with server_engine.connect() as c:
            return [tuple(r) for r in c.execute(sa.text(
                "SELECT store_key, scope_name, agent_code, store_code, max_file_chars, max_files,"
                " max_store_chars FROM dbm_stores ORDER BY store_key"))]

    configure()
    with server_engine.begin() as c:
        ids_py = [_open_in_python(c, p) for p in OPENED]
        assert ids_py == [_open_in_python(c, p) for p in OPENED]  # found again
    by_python = rows()
    reset_tables(server_engine)
    configure()
    with server_engine.begin() as c:
        api.serve(c, "u1")  # the one user-scope store of OPENED
        ids_sql = [api.open(c, **p) for p in OPENED]
        assert ids_sql == [api.open(c, **p) for p in OPENED]
        assert ids_sql == [resolve_store_id(c, **p) for p in OPENED]
        assert error_class(lambda: api.open(c, scope="reserved")) is InvalidScopeError
        assert error_class(lambda: api.open(c, scope="context", agent_code="A", context_key="k")) is InvalidScopeError
    assert rows() == by_python


def test_one_file_written_by_a_sql_and_a_python_writer_at_once_loses_no_write(
    server_engine: Engine, api: SqlApi
) -> None:
    sid = _new_store(server_engine)
    rounds = 15
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def writer(kind: str) -> None:
        try:
            barrier.wait()
            for i in range(rounds):
                text = f"{kind}-{i}" + "x" * (i if kind == "sql" else 2 * i)
                with server_engine.begin() as c:
                    if kind == "sql":
                        api.put(c, sid, "/memories/todo.md", text)
                    else:
                        files.put_file(c, sid, "/memories/todo.md", text)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in ("sql", "python")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with server_engine.connect() as c:
        assert api.listing(c, sid)[0][2] == 2 * rounds  # every write bumped the version once
        events = c.execute(sa.text(
            "SELECT chars_before, chars_after FROM dbm_audit_events WHERE store_id = :s"
            " ORDER BY event_id"), {"s": sid}).all()
    assert len(events) == 2 * rounds
    for before, after in zip(events, events[1:], strict=False):  # each write saw the one before it
        assert after[0] == before[1]
