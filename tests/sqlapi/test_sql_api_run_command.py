"""The MEMORY tool in SQL (``run_command`` of the in-database API) against the Python
:class:`~dbmemory.tool.memory_tool.MemoryTool`: the same long list of commands (every success
and every error kind) on two stores of one database, byte-identical answers and identical
files afterwards."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.profile.store import profile_store_key, write_profile
from dbmemory.store.locks import find_store_id, get_or_create_store
from dbmemory.tool.memory_tool import MemoryTool
from sql_api_client import SqlApi, missing_store_text

LONG = "/memories/" + "d" * 995  # 1,005 characters: over the 1,000 limit after normalisation
BIG = "\n".join(f"line {i} " + "x" * 60 for i in range(1, 400))  # ~27,000 characters

CAPS = {"max_file_chars": 30_000, "max_files": 12, "max_store_chars": 60_000}

COMMANDS: list[Any] = [
    # views of an empty store, parsing errors
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/none.md"},
    {"path": "/memories"},
    {"command": None},
    {"command": 5},
    {"command": ["view"]},
    {"command": "list", "path": "/memories"},
    {"command": " VIEW ", "path": "/memories/"},
    {"input": {"command": "view", "path": "/memories"}},
    {"arguments": json.dumps({"command": "view", "path": "/memories"})},
    [1, 2],
    "not an object",
    {"command": "view"},
    {"command": "view", "path": 7},
    {"command": "view", "path": True},
    {"command": "view", "path": {"a": 1, "b": [1, 2.5, None]}},
    # creates
    {"command": "create", "path": "/memories/notes.md", "file_text": "alpha\nbeta\ngamma\n"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
    {"command": "create", "path": "/memories/empty.md", "file_text": ""},
    {"command": "create", "path": "/memories/dir/a.md", "file_text": "a1\na2\n"},
    {"command": "create", "path": "/memories/dir/sub/b.md", "file_text": "b" * 2000},
    {"command": "create", "path": "/memories/dir/sub/deep/c.md", "file_text": "c"},
    {"command": "create", "path": "/memories/dir/.hidden", "file_text": "h" * 100},
    {"command": "create", "path": "/memories/node_modules/x.js", "file_text": "n"},
    {"command": "create", "path": "/memories/big.md", "file_text": BIG},
    {"command": "create", "path": "/memories/crlf.md", "file_text": "one\r\ntwo\r\nthree\r\n"},
    {"command": "create", "path": "/memories/dir", "file_text": "x"},
    {"command": "create", "path": "/memories/notes.md/inner.md", "file_text": "x"},
    {"command": "create", "path": "/memories", "file_text": "x"},
    {"command": "create", "path": "/memories/x.md"},
    {"command": "create", "path": "/memories/x.md", "file_text": 12},
    {"command": "create", "path": "/memories/too-big.md", "file_text": "z" * 30_001},
    # hostile paths
    {"command": "view", "path": "/memories/../etc/passwd"},
    {"command": "view", "path": "/memories/%2e%2e/secret"},
    {"command": "view", "path": "/memories/%252e%252e/secret"},
    {"command": "view", "path": "/memories/%2E/x"},
    {"command": "view", "path": "/memories/%41.md"},
    {"command": "view", "path": "/memories/%ff.md"},
    {"command": "view", "path": "/memories/%zz.md"},
    {"command": "view", "path": "/memories/" + "%25" * 12 + "41"},
    {"command": "view", "path": "/etc/passwd"},
    {"command": "view", "path": "/memoriesX/a"},
    {"command": "view", "path": "memories/a"},
    {"command": "view", "path": ""},
    {"command": "view", "path": "/memories/a\\b"},
    {"command": "view", "path": "/memories/a\tb"},
    {"command": "view", "path": "/memories/a\nb"},
    {"command": "view", "path": "/memories/ a.md"},
    {"command": "view", "path": "/memories/a.md "},
    {"command": "view", "path": "/memories/./a.md"},
    {"command": "view", "path": "/memories//dir///a.md"},
    {"command": "view", "path": "/memories/it's.md"},
    {"command": "view", "path": LONG},
    {"command": "view", "path": "/" + "a" * 10_001},
    {"command": "rename", "old_path": "/memories/../a", "new_path": "/memories/b"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/%2e%2e"},
    # look-alike spellings (rule 5's NFKC fold, rule 11): the same key as the plain name, or refused
    {"command": "view", "path": "/memories/\uff4e\uff4f\uff54\uff45\uff53.md"},
    {"command": "view", "path": "/memories/\U0001d427otes.md"},
    {"command": "view", "path": "/memories/notes\u2024md"},
    {"command": "create", "path": "/memories/\ufb01le.md", "file_text": "ligature"},
    {"command": "view", "path": "/memories/file.md"},
    {"command": "view", "path": "/memories/a\u2100c.md"},
    {"command": "view", "path": "/memories/50\uff05.md"},
    {"command": "view", "path": "/memories/\u00bd.md"},
    {"command": "view", "path": "/memories/\u2025"},
    {"command": "view", "path": "/memories/a\u00a8.md"},
    {"command": "view", "path": "/memories/\u0440refs.md"},
    {"command": "view", "path": "/memories/\u0430\u0441\u0435.md"},
    {"command": "view", "path": "/memories/notes.\u0307md"},
    {"command": "view", "path": "/memories/s\u0308.md"},
    {"command": "create", "path": "/memories/\u0437\u0430\u043c\u0435\u0442\u043a\u0438.md", "file_text": "ru"},
    {"command": "create", "path": "/memories/\u0394\u03b5\u03bb\u03c4\u03b1/\u65e5\u672c\u8a9e\u306e\u30e1\u30e2.md",
     "file_text": "el ja"},
    {"command": "create", "path": "/memories/\uff21\u0301.md", "file_text": "A acute"},
    {"command": "rename", "old_path": "/memories/file.md", "new_path": "/memories/\u0441\u043e\u0440\u0443.md"},
    # views
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/empty.md"},
    {"command": "view", "path": "/memories/dir"},
    {"command": "view", "path": "/memories/dir/sub"},
    {"command": "view", "path": "/memories/big.md"},
    {"command": "view", "path": "/memories/crlf.md"},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, 9]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [0, 2]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [4, 5]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [3, 2]},
    {"command": "view", "path": "/memories/notes.md", "view_range": "2, 3"},
    {"command": "view", "path": "/memories/notes.md", "view_range": "[2, 3]"},
    {"command": "view", "path": "/memories/notes.md", "view_range": ["1", 2.0]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [1]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [True, 2]},
    {"command": "view", "path": "/memories/notes.md", "view_range": "a-b"},
    {"command": "view", "path": "/memories/notes.md", "view_range": 3},
    {"command": "view", "path": "/memories/notes.md", "view_range": []},
    {"command": "view", "path": "/memories/notes.md", "view_range": list(range(12))},
    {"command": "view", "path": "/memories/empty.md", "view_range": [1, 2]},
    {"command": "view", "path": "/memories/big.md", "view_range": [10, 12]},
    {"command": "view", "path": "/memories/dir", "view_range": [1, 2]},
    # str_replace
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta", "new_str": "BETA"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "missing", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "a", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "q" * 300},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "BETA"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "gamma", "new_str": 3},
    {"command": "str_replace", "path": "/memories/notes.md", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/crlf.md", "old_str": "one\ntwo"},
    {"command": "str_replace", "path": "/memories/dir", "old_str": "a"},
    {"command": "str_replace", "path": "/memories/nothing.md", "old_str": "a"},
    {"command": "str_replace", "path": "/memories", "old_str": "a"},
    {"command": "str_replace", "path": "/memories/big.md", "old_str": "x" * 60},
    {"command": "str_replace", "path": "/memories/big.md", "old_str": "line 5 ", "new_str": "y" * 5000},
    {"command": "str_replace", "path": "/memories/dir/a.md", "old_str": "a1\na2\n", "new_str": ""},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "alpha",
     "new_str": "\n".join(f"n{i}" for i in range(60))},
    # insert
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "TOP"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": "2", "insert_text": "two\nlines\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 999, "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": -1, "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 1.5, "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": True, "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": "two", "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 1},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "new_str": "via new_str"},
    {"command": "insert", "path": "/memories/empty.md", "insert_line": 1, "insert_text": "x"},
    {"command": "insert", "path": "/memories/empty.md", "insert_line": 0, "insert_text": "first"},
    {"command": "insert", "path": "/memories/empty.md", "insert_line": 1, "insert_text": "second"},
    {"command": "insert", "path": "/memories/crlf.md", "insert_line": 3, "insert_text": "four\nfive"},
    {"command": "insert", "path": "/memories/dir", "insert_line": 0, "insert_text": "x"},
    {"command": "insert", "path": "/memories/big.md", "insert_line": 1, "insert_text": "w" * 4000},
    {"command": "create", "path": "/memories/oneline.md", "file_text": "L" * 20_000},
    {"command": "view", "path": "/memories/oneline.md"},
    {"command": "create", "path": "/memories/tie.md", "file_text": "t" * 1280},
    {"command": "view", "path": "/memories"},
    # caps: files and store characters
    *({"command": "create", "path": f"/memories/many/{i}.md", "file_text": "m" * 8000} for i in range(4)),
    {"command": "create", "path": "/memories/many/last.md", "file_text": "m"},
    {"command": "create", "path": "/memories/many/over.md", "file_text": "m"},
    # rename
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/renamed.md"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/again.md"},
    {"command": "rename", "old_path": "/memories/renamed.md", "new_path": "/memories/empty.md"},
    {"command": "rename", "old_path": "/memories/renamed.md", "new_path": "/memories/dir"},
    {"command": "rename", "old_path": "/memories/renamed.md", "new_path": "/memories/renamed.md/"},
    {"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/dir/inside"},
    {"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/empty.md/x"},
    {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
    {"command": "rename", "old_path": "/memories/empty.md", "new_path": "/memories"},
    {"command": "rename", "path": "/memories/renamed.md", "new_path": "/memories/moved/r.md"},
    {"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/folder"},
    {"command": "rename", "old_path": "/memories/folder/sub", "new_path": LONG[:990]},
    {"command": "rename", "old_path": "/memories/empty.md"},
    {"command": "view", "path": "/memories"},
    # delete
    {"command": "delete", "path": "/memories/moved/r.md"},
    {"command": "delete", "path": "/memories/moved/r.md"},
    {"command": "delete", "path": "/memories/folder"},
    {"command": "delete", "path": "/memories/many/0.md"},
    {"command": "delete", "path": "/memories"},
    {"command": "delete", "path": "/memories/%2e%2e"},
    {"command": "delete"},
    # look-alike names (issue 21): NFKC folds fullwidth and mathematical letters and ligatures
    # into the plain key in both; other non-ASCII paths get the SQL path rule
    {"command": "delete", "path": "/memories/many/1.md"},
    {"command": "create", "path": "/memories/\uff50refs.md", "file_text": "fullwidth"},
    {"command": "create", "path": "/memories/\U0001d429refs.md", "file_text": "bold"},
    {"command": "view", "path": "/memories/\uff50\uff52\uff45\uff46\uff53.md"},
    {"command": "str_replace", "path": "/memories/pr\U0001d41e\U0001d41fs.md",
     "old_str": "fullwidth", "new_str": "plain"},
    {"command": "create", "path": "/memories/pro\ufb01le.md", "file_text": "ligature"},
    {"command": "view", "path": "/memories/profile.md"},
    {"command": "view", "path": "/memories"},
]


def _files(conn: Connection, store_id: int) -> list[tuple[str, str, int]]:
    rows = conn.execute(sa.text(
        "SELECT file_path, body, char_count FROM dbm_files WHERE store_id = :s"), {"s": store_id}).all()
    return sorted((r[0], r[1] or "", int(r[2])) for r in rows)


def _audit(conn: Connection, store_id: int) -> list[tuple[Any, ...]]:
    rows = conn.execute(sa.text(
        "SELECT file_path, action_name, actor_name, chars_before, chars_after, detail_text"
        " FROM dbm_audit_events WHERE store_id = :s ORDER BY event_id"), {"s": store_id}).all()
    return [tuple(r) for r in rows]


def _run_sql(conn: Connection, store_id: int, command: Any, *, raw: bool = False) -> str:
    """``run_command`` on ``store_id``: ``command`` as JSON (``raw``: a text sent as it is)."""
    text = command if raw else json.dumps(command)
    with conn.begin_nested():
        if conn.dialect.name == "postgresql":
            kind = "text" if raw else "json"  # the text form reads what is not JSON too
            return str(conn.execute(
                sa.text(f"SELECT dbm_memory.run_command(:s, CAST(:c AS {kind}))"), {"s": store_id, "c": text},
            ).scalar())
        conn.execute(sa.text("CALL dbm_memory_run_command(:s, :c, NULL, @dbm_result)"),
                     {"s": store_id, "c": text})
        return str(conn.execute(sa.text("SELECT @dbm_result")).scalar())


@pytest.fixture
def tool_server(server_name: str) -> str:
    if server_name == "oracle":
        pytest.skip("run_command on Oracle is generated and reviewed, not run")
    return server_name


def test_run_command_answers_like_the_memory_tool(
    tool_server: str, server_engine: Engine, api: SqlApi
) -> None:
    with server_engine.begin() as conn:
        ids = [get_or_create_store(conn, f"shared:{code}", scope="shared", store_code=code)
               for code in ("tool_py", "tool_sql")]
        conn.execute(sa.text(
            "UPDATE dbm_stores SET max_file_chars = :max_file_chars, max_files = :max_files,"
            " max_store_chars = :max_store_chars"), CAPS)
    py_id, sql_id = ids
    differences = []
    with server_engine.begin() as conn:
        tool = MemoryTool.for_store(conn, "tool_py")
        for number, command in enumerate(COMMANDS):
            expected = tool.execute(json.dumps(command))  # the same JSON text for both
            actual = _run_sql(conn, sql_id, command)
            if actual != expected:
                differences.append((number, command if len(str(command)) < 300 else str(command)[:300],
                                    expected, actual))
            if _files(conn, py_id) != _files(conn, sql_id):
                differences.append((number, "files differ"))
        # the same events; a directory rename's per-file events may come in another file order
        assert sorted(_audit(conn, py_id), key=repr) == sorted(_audit(conn, sql_id), key=repr)
    assert differences == []


def test_run_command_refuses_a_missing_or_reserved_store(
    tool_server: str, server_engine: Engine, api: SqlApi
) -> None:
    with server_engine.begin() as conn:
        write_profile(conn, "u1", "Likes tea.", expected_version=None)
        reserved = find_store_id(conn, profile_store_key("u1"))
        assert reserved is not None
        for store_id, code, errno in ((reserved, "MD707", 20707), (2**62, "MD701", 20701)):
            with pytest.raises(sa.exc.DBAPIError) as info:
                _run_sql(conn, store_id, {"command": "view", "path": "/memories"})
            if tool_server == "postgres":
                assert getattr(info.value.orig, "sqlstate", None) == code
            else:
                assert info.value.orig.args[0] == errno
        # a fractional store id never lands on a neighbouring store (MariaDB would round 5.6 to 6)
        with pytest.raises(sa.exc.DBAPIError) as info:
            _run_sql(conn, 5.6, {"command": "create", "path": "/memories/x.md", "file_text": "lost"})
        if tool_server == "mysql":
            assert info.value.orig.args[0] == 20703 and "must be a whole number" in str(info.value.orig)
        else:  # a bigint parameter: PostgreSQL finds no run_command(numeric, ...)
            assert getattr(info.value.orig, "sqlstate", None) == "42883"


def test_a_clipped_listing_answers_like_the_memory_tool(
    tool_server: str, server_engine: Engine, api: SqlApi
) -> None:
    """A directory whose listing passes 16,000 characters: the same lines kept and the same
    note (entries shown, files not listed of all files, hidden ones included) as Python's."""
    from dbmemory.store.files import put_file

    paths = [f"/memories/top-{i:03d}-{'n' * 40}.md" for i in range(150)]
    paths += [f"/memories/dir-{d}/sub-{i:02d}-{'s' * 30}/leaf.md" for d in range(4) for i in range(40)]
    paths += [f"/memories/dir-{d}/file-{i:02d}.md" for d in range(4) for i in range(5)]
    paths += ["/memories/.hidden/a.md", "/memories/node_modules/b.md"]
    with server_engine.begin() as conn:
        store_id = get_or_create_store(conn, "shared:tool_big", scope="shared", store_code="tool_big")
        for path in paths:
            put_file(conn, store_id, path, "x" * (len(path) % 7 + 1), enforce_caps=False)
        tool = MemoryTool.for_store(conn, "tool_big")
        for directory in ("/memories", "/memories/dir-0"):
            command = {"command": "view", "path": directory}
            expected = tool.execute(json.dumps(command))
            if directory == "/memories":
                assert "files not listed" in expected.splitlines()[-1]
            assert _run_sql(conn, store_id, command) == expected


@pytest.mark.parametrize("text", ['{"command": "view", "path": "/memories/a\\u0000"}', "not json", ""])
def test_run_command_on_a_missing_store_says_the_store_does_not_exist_whatever_the_text(
    tool_server: str, server_engine: Engine, api: SqlApi, text: str
) -> None:
    """A missing store is not a missing path, nor a bad command: every form of the text gets
    the store's not_found, as a JSON command does."""
    missing = 2**62
    with server_engine.connect() as conn:
        for raw in (True, False):
            with pytest.raises(sa.exc.DBAPIError) as info:
                _run_sql(conn, missing, text if raw else {"command": "view", "path": "/memories"}, raw=raw)
            assert missing_store_text(conn.dialect.name, missing) in str(info.value.orig)
        conn.rollback()
