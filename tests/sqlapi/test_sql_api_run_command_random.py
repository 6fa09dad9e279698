"""The MEMORY tool in SQL against the Python :class:`~dbmemory.tool.memory_tool.MemoryTool` over
random command sequences (fixed seeds): every command sent as the same text to both, on two
stores of one database; byte-identical answers, identical files after every command and the
same audit events at the end.

The generator draws the kinds a model sends: the six commands with good and bad parameters,
wrappers, texts that are not JSON, non-ASCII paths (letters, invisible and look-alike
characters, percent-encoded ones, look-alike spellings: fullwidth, mathematical and
ligature letters, the one-dot leader, mixed-script and whole-script Cyrillic words), numbers as floats (``1e15``, ``2.5e-7``) and texts with
line breaks, tabs and non-ASCII characters; ``old_str`` is cut from a file's current text so
that replacements succeed as often as they fail."""

from __future__ import annotations

import json
import os
import random
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from test_sql_api_run_command import _audit, _files, _run_sql

from dbmemory.sqlgen.postgresql.tool_json import NUL_REFUSED
from dbmemory.store.locks import get_or_create_store
from dbmemory.tool.memory_tool import MemoryTool
from dbmemory.tool.messages import ERROR_MARKER
from sql_api_client import SqlApi

SEEDS = tuple(range(1, 1 + int(os.environ.get("DBMEMORY_TEST_RUN_COMMAND_SEEDS", "3"))))
"""Seeds 1..3; ``DBMEMORY_TEST_RUN_COMMAND_SEEDS=N`` runs 1..N."""
COMMANDS_PER_SEED = 150
CAPS = {"max_file_chars": 4_000, "max_files": 9, "max_store_chars": 12_000}

_NAMES = ["a.md", "b.txt", "notes.md", "dir", "dir/x.md", "dir/sub/y.md", "dir/sub", ".hidden",
          "node_modules/m.js", "caf\u00e9.md", "\u65e5\u672c.md", "\u00fcber/\u00e4.md",
          "na\u00efve", "%C3%A9t\u00e9.md", "Stra\u00dfe.md", "e\u0301.md", "\u0394\u03b5\u03bb\u03c4\u03b1.md"]
_BAD_NAMES = ["a\u200bb.md", "a\u00a0b.md", "x\u2215y.md", "\u3002\u3002", "%E2%80%8B.md", "a\ufe0f.md",
              "\u0301\u0301", "tab\there", "..", ".", " lead.md", "%2e%2e", "back\\slash", "%ff.md",
              "\u2028line", "\ud7ff.md", "\U0001f600.md", "\u00ad.md", "trail.md\u3000"]
_LOOKALIKE_NAMES = [  # rule 5's NFKC fold and rule 11 (dbmemory.core.lookalikes)
    "\uff41.md", "\U0001d41a.md", "\ufb01.md", "a\u2024md", "\u2025", "x\u2100y.md", "\uff05.md", "\u00bd.md",
    "a\u00a8.md", "\u00a8a.md", "\uff21\u0301.md", "\u0440refs.md", "\u0430.md", "\u0430\u0441\u0435.md",
    "\u0437\u0430\u043c\u0435\u0442\u043a\u0438.md", "\u0394\u03b5\u03bb\u03c4\u03b1.md",
    "\u65e5\u672c\u8a9e\u306e\u30e1\u30e2.md", "a\u0307.md", ".\u0307md", "\u0430\u0301.md", "\u1e9b\u0323.md",
    "dir/\uff58.md", "\uff44\uff49\uff52/x.md", "k\u0131rm\u0131z\u0131.md", "\u0456\u0455.md", "\u00fcber/\u0430.md",
]
_TEXTS = ["", "one line", "alpha\nbeta\ngamma\n", "r\u00e9sum\u00e9\n\u65e5\u672c\u8a9e\n", "tab\tsep\n",
          "crlf\r\nlines\r\n", "x" * 300, "\n".join(f"row {i}" for i in range(40)), "a\u0000b",
          "quote ' and \" and \\ back", "emoji \U0001f600 end\n"]
_NUMBERS: list[Any] = [0, 1, 2, -1, 3.0, 1.5, 1e15, 1e16, 2.5e-7, 123456789012345.6, 1e300, -0.0,
                       10**20, True, False, None, "2", " 3 ", "x", [1, 2], {"n": 1}]
_LINES = [n for n in _NUMBERS if n != 1e300]  # line numbers: a float past 1e65 has no exact SQL integer
_NOT_JSON = ["", "   ", "{", "[1,]", '{"command": "view", "path": "/memories"', "{'command': 'view'}",
             '{"command": "view"} trailing', "nul", '"unterminated', '{"a" 1}', '{"a":1 "b":2}',
             '\n\n  {"a":}', '"\\q"', '"\\u12"', "[1 2]", '{"command": "view", "path": "/memories/\\x"}',
             # JSON that json.dumps never writes: numbers past the double range, exponents, -0
             '{"command": 1e400}', '{"command": -1E+400}', '{"command": 1e-400}', '{"command": -0}',
             '{"command": "insert", "path": "/memories/a.md", "insert_line": 1e400, "insert_text": "x"}',
             '{"command": "insert", "path": "/memories/a.md", "insert_line": 2E0, "insert_text": "x"}',
             '{"command": "view", "path": "/memories/a.md", "view_range": [1e0, 1.0e1]}',
             '{"command": [1.50, 2.5e-7, 1e22, 1e16, 123456789012345678]}',
             # json's scan of a text with characters past U+FFFF (MariaDB: a backslash sends it there)
             '{"command": "create", "path": "/memories/back\\\\slash", "file_text": "emoji \U0001f600"}',
             '{"command": "view", "path": "/memories/\U0001f600\\q"}']


def _path(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.65:
        return "/memories/" + rng.choice(_NAMES)
    if roll < 0.77:
        return "/memories/" + rng.choice(_LOOKALIKE_NAMES)
    if roll < 0.9:
        return "/memories/" + rng.choice(_BAD_NAMES)
    return rng.choice(["/memories", "/memories/", "/other/a.md", "", 7, None, 1e15, ["/memories"]])


def _old_str(rng: random.Random, texts: list[str]) -> Any:
    if texts and rng.random() < 0.7:
        text = rng.choice(texts)
        if text:
            start = rng.randrange(len(text))
            return text[start : start + rng.randint(1, 12)]
    return rng.choice(["", "zzz", "\n", "a", 5, None])


def _command(rng: random.Random, texts: list[str]) -> tuple[str, Any]:
    """One command as the text both sides receive, and the command for the report."""
    kind = rng.choice(["view", "view", "create", "create", "str_replace", "insert", "delete",
                       "rename", "wrapped", "not_json", "odd"])
    command: dict[str, Any]
    if kind == "view":
        command = {"command": "view", "path": _path(rng)}
        if rng.random() < 0.5:
            command["view_range"] = rng.choice([[1, 3], [2, -1], [rng.choice(_LINES), rng.choice(_LINES)],
                                                "1, 2", "[3, 4]", [], rng.choice(_LINES)])
    elif kind == "create":
        command = {"command": "create", "path": _path(rng), "file_text": rng.choice(_TEXTS)}
        if rng.random() < 0.1:
            command["file_text"] = rng.choice(_NUMBERS)
    elif kind == "str_replace":
        command = {"command": "str_replace", "path": _path(rng), "old_str": _old_str(rng, texts),
                   "new_str": rng.choice([*_TEXTS[:6], None, 3])}
    elif kind == "insert":
        command = {"command": "insert", "path": _path(rng), "insert_line": rng.choice(_LINES),
                   "insert_text": rng.choice(_TEXTS[:8])}
    elif kind == "delete":
        command = {"command": "delete", "path": _path(rng)}
    elif kind == "rename":
        command = {"command": "rename", "old_path": _path(rng), "new_path": _path(rng)}
    elif kind == "wrapped":
        inner = {"command": "view", "path": _path(rng)}
        command = rng.choice([{"input": inner}, {"arguments": json.dumps(inner)}, {"params": "{bad"},
                              {"anything": inner}, {"x": 1, "y": inner}])
    elif kind == "not_json":
        text = rng.choice(_NOT_JSON)
        return text, text
    else:
        command = rng.choice([{"command": rng.choice(_NUMBERS)}, {"command": " Create ", "path": _path(rng),
                              "file_text": "odd"}, {"command": "move", "path": "/memories"},
                              {"command": "view", "path": _path(rng), "extra": [1.5, 1e15, "\u00e9"]}])
    return json.dumps(command, ensure_ascii=rng.random() < 0.5), command


@pytest.fixture
def tool_server(server_name: str) -> str:
    if server_name == "oracle":
        pytest.skip("run_command on Oracle is generated and reviewed, not run")
    return server_name


@pytest.mark.parametrize("seed", SEEDS)
def test_run_command_matches_the_memory_tool_on_random_sequences(
    tool_server: str, server_engine: Engine, api: SqlApi, seed: int
) -> None:
    rng = random.Random(seed)
    with server_engine.begin() as conn:
        ids = [get_or_create_store(conn, f"shared:{code}{seed}", scope="shared", store_code=f"{code}{seed}")
               for code in ("rnd_py", "rnd_sql")]
        conn.execute(sa.text(
            "UPDATE dbm_stores SET max_file_chars = :max_file_chars, max_files = :max_files,"
            " max_store_chars = :max_store_chars WHERE store_id IN (:a, :b)"), {**CAPS, "a": ids[0], "b": ids[1]})
    py_id, sql_id = ids
    differences: list[tuple[Any, ...]] = []
    with server_engine.begin() as conn:
        tool = MemoryTool.for_store(conn, f"rnd_py{seed}")
        for number in range(COMMANDS_PER_SEED):
            texts = [body for _, body, _ in _files(conn, py_id)]
            text, command = _command(rng, texts)
            expected = tool.execute(text)
            if tool_server == "postgres" and "\\u0000" in text:
                expected = ERROR_MARKER + NUL_REFUSED  # PostgreSQL's text holds no NUL (documented)
            actual = _run_sql(conn, sql_id, text, raw=True)
            if actual != expected:
                differences.append((number, command, expected, actual))
            if _files(conn, py_id) != _files(conn, sql_id):
                differences.append((number, command, "files differ"))
                break
        audit_py, audit_sql = (sorted(_audit(conn, i), key=repr) for i in (py_id, sql_id))
    for difference in differences:
        print(*(repr(part) for part in difference), sep="\n  ")
    assert differences == []
    assert audit_py == audit_sql



def test_run_command_reads_every_odd_text_like_the_memory_tool(
    tool_server: str, server_engine: Engine, api: SqlApi
) -> None:
    """Each text of the generator's list that is not JSON, or is JSON json.dumps never writes,
    once (the random sequences draw only some of them)."""
    with server_engine.begin() as conn:
        ids = [get_or_create_store(conn, f"shared:{code}", scope="shared", store_code=code)
               for code in ("odd_py", "odd_sql")]
        tool = MemoryTool.for_store(conn, "odd_py")
        tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"})
        _run_sql(conn, ids[1], {"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"})
        differences = [(text, tool.execute(text), _run_sql(conn, ids[1], text, raw=True))
                       for text in _NOT_JSON]
        assert _files(conn, ids[0]) == _files(conn, ids[1])
    assert [d for d in differences if d[1] != d[2]] == []
