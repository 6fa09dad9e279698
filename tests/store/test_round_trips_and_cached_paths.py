"""The performance fixes keep their promises: round trips, cached paths, early cap checks."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Connection, Engine

from dbmemory import enable_for_agent
from dbmemory.core.model import StoreRef
from dbmemory.core.paths import normalize_path
from dbmemory.errors import CapExceededError, InvalidPathError, NotFoundError
from dbmemory.store import files
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import clear_store_files
from dbmemory.store.reads import get_file, list_files, read_path, view_path
from dbmemory.tool import MemoryTool
from dbmemory.tool.edits import apply_insert, apply_str_replace
from helpers import StatementLog


@pytest.fixture
def seeded(engine: Engine) -> None:
    """Committed: agent QA with /memories/f1.md, /memories/d/f2.md."""
    with engine.begin() as c:
        enable_for_agent(c, "QA")
        tool = MemoryTool(c, "QA")
        for path in ("/memories/f1.md", "/memories/d/f2.md"):
            assert not tool.execute({"command": "create", "path": path, "file_text": "a\nb\n"}).startswith("Error")


def _work(log: StatementLog) -> list[str]:
    return [s for s in log.statements if not s.lstrip().upper().startswith(("BEGIN", "COMMIT"))]


@pytest.mark.parametrize("path", ["/memories", "/memories/f1.md"])
def test_a_fresh_tools_view_is_one_statement(
    conn: Connection, engine: Engine, seeded: None, path: str
) -> None:
    tool = MemoryTool(conn, "QA")
    assert tool.store.store_id is None
    with StatementLog(engine) as log:
        out = tool.execute({"command": "view", "path": path})
    assert not out.startswith("Error"), out
    assert len(_work(log)) == 1, log.statements
    assert "JOIN" not in log.statements[0].upper()  # the store id as a scalar subquery


def test_a_fresh_tools_view_of_a_directory_and_of_nothing(
    conn: Connection, seeded: None
) -> None:
    tool = MemoryTool(conn, "QA")
    assert "/memories/d/f2.md" in tool.execute({"command": "view", "path": "/memories/d"})
    assert tool.execute({"command": "view", "path": "/memories/nope.md"}).startswith("Error")
    never = StoreRef(store_key="agent:NEVER", scope="agent", agent_code="NEVER")
    assert read_path(conn, never, "/memories") == []
    with pytest.raises(NotFoundError):
        read_path(conn, never, "/memories/a.md")


def test_the_tool_listing_reads_only_path_and_size(
    conn: Connection, engine: Engine, seeded: None
) -> None:
    tool = MemoryTool(conn, "QA")
    with StatementLog(engine) as log:
        text = tool.execute({"command": "view", "path": "/memories"})
    assert "/memories/d/f2.md" in text
    (select,) = [s for s in log.statements if s.lstrip().upper().startswith("SELECT")]
    head = select.split("FROM", 1)[0].lower()
    assert "created_at" not in head and "updated_at" not in head and "last_accessed_at" not in head
    listed = list_files(conn, tool.store.store_id or find_store_id(conn, "agent:QA"))
    assert [f.path for f in listed] == ["/memories/d/f2.md", "/memories/f1.md"]
    assert all(f.created_at is not None and f.version == 1 for f in listed)


def test_writes_return_what_a_read_back_would(conn: Connection, seeded: None) -> None:
    sid = find_store_id(conn, "agent:QA")
    assert sid is not None
    created = files.create_file(conn, sid, "/memories/new.md", "x\n")
    assert created == get_file(conn, sid, "/memories/new.md")
    put = files.put_file(conn, sid, "/memories/new.md", "y\n", expiry_exempt=True)
    assert put == get_file(conn, sid, "/memories/new.md")
    assert put.version == 2 and put.expiry_exempt
    fresh = files.put_file(conn, sid, "/memories/other.md", "")
    assert fresh == get_file(conn, sid, "/memories/other.md")
    edited, _ = files.edit_file(conn, sid, "/memories/new.md", lambda t: (t + "z", None))
    assert edited == get_file(conn, sid, "/memories/new.md")


def test_a_huge_edit_is_refused_before_the_new_text_is_built() -> None:
    text = "a\nb\n"
    with pytest.raises(CapExceededError) as caught:
        apply_str_replace("/memories/a.md", text, "a", "x" * 101, max_chars=100)
    assert (caught.value.cap, caught.value.limit, caught.value.actual) == ("max_file_chars", 100, 104)
    with pytest.raises(CapExceededError) as caught:
        apply_insert("/memories/a.md", text, 1, "x" * 100, max_chars=100)
    assert caught.value.actual == len(text) + 101
    # lengths agree with what the edit produces
    for line, insert in ((0, "q"), (2, "q\n"), (1, "")):
        new_text, _ = apply_insert("/memories/a.md", text, line, insert, max_chars=10_000)
        with pytest.raises(CapExceededError) as caught:
            apply_insert("/memories/a.md", text, line, insert, max_chars=len(new_text) - 1)
        assert caught.value.actual == len(new_text)
    new_text, _ = apply_insert("/memories/a.md", "l1", 1, "x", max_chars=5)
    assert new_text == "l1\nx"


def test_the_tool_reports_a_huge_new_str_as_the_cap(conn: Connection, seeded: None) -> None:
    tool = MemoryTool(conn, "QA")
    out = tool.execute(
        {"command": "str_replace", "path": "/memories/f1.md", "old_str": "a", "new_str": "x" * 200_000}
    )
    assert out.startswith("Error") and "200,003" in out and "100,000" in out, out
    assert "x" * 1000 not in out


def test_cached_path_normalisation_still_refuses_every_time() -> None:
    for _ in range(3):
        with pytest.raises(InvalidPathError):
            normalize_path("/memories/../etc")
        with pytest.raises(InvalidPathError, match="must be a string"):
            normalize_path(b"/memories/a")
        with pytest.raises(InvalidPathError, match="must be a string"):
            normalize_path(None)
    assert normalize_path("/memories//a/") == "/memories/a" == normalize_path("/memories//a/")

    class Odd(str):
        pass

    assert normalize_path(Odd("/memories/%61")) == "/memories/a"
    long_raw = "/memories/" + "%61" * 400
    assert normalize_path(long_raw) == "/memories/" + "a" * 400


def test_an_edit_that_waited_for_the_store_lock_sees_the_committed_text(
    engine: Engine, seeded: None
) -> None:
    """The one-statement lock must read the file as the writer it waited for left it."""
    import threading
    import time

    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pytest.skip("in-memory SQLite: one connection")
    with engine.connect() as first, engine.connect() as second:
        sid = find_store_id(first, "agent:QA")
        assert sid is not None
        first.commit()
        files.edit_file(first, sid, "/memories/f1.md", lambda t: (t + "one\n", None))
        outcome: dict[str, object] = {}

        def later() -> None:
            try:
                with second.begin():
                    rec, _ = files.edit_file(second, sid, "/memories/f1.md", lambda t: (t + "two\n", None))
                    outcome["text"] = rec.text
            except Exception as exc:  # noqa: BLE001 - reported below
                outcome["error"] = exc

        thread = threading.Thread(target=later)
        thread.start()
        time.sleep(0.5)  # the second writer now waits for the store lock
        first.commit()
        thread.join(30)
    assert "error" not in outcome, outcome
    assert outcome["text"] == "a\nb\none\ntwo\n"


def test_reading_from_a_store_id_that_does_not_exist_says_the_store_is_missing(
    conn: Connection, seeded: None
) -> None:
    """A missing store is not a missing path: get_file names the store, as the writers do;
    a missing file of an existing store still names the path."""
    store_id = find_store_id(conn, "agent:QA")
    assert store_id is not None
    missing = store_id + 10**9
    for touch in (False, True):
        with pytest.raises(NotFoundError) as caught:
            get_file(conn, missing, "/memories/s.md", touch=touch)
        assert caught.value.code == "not_found"
        assert caught.value.message == f"store {missing} does not exist: check the store id"
        with pytest.raises(NotFoundError) as caught:
            get_file(conn, store_id, "/memories/none.md", touch=touch)
        assert caught.value.message == "the path /memories/none.md does not exist"
    with pytest.raises(NotFoundError) as caught:
        files.put_file(conn, missing, "/memories/s.md", "x")
    assert caught.value.message == f"store {missing} does not exist: check the store id"
    for read in (read_path, view_path):
        with pytest.raises(NotFoundError) as caught:
            read(conn, missing, "/memories/s.md")
        assert caught.value.message == f"store {missing} does not exist: check the store id"
        with pytest.raises(NotFoundError) as caught:
            read(conn, store_id, "/memories/none.md")
        assert caught.value.message == "the path /memories/none.md does not exist"
    assert len(read_path(conn, store_id, "/memories/d")) == 1  # a directory of an existing store
    with pytest.raises(NotFoundError) as caught:
        list_files(conn, missing)  # a missing store is not an empty one
    assert caught.value.message == f"store {missing} does not exist: check the store id"
    with conn.begin_nested():
        clear_store_files(conn, store_id)
    assert list_files(conn, store_id) == []
