"""The failure cases from the field that concern memory stores and the MEMORY tool
(``shared/cases/README.md``, C1-C9), each on every backend, plus more cases of the same kinds.

"Error text" means: the tool returns text starting with ``"Error: "``, raises nothing and
changes no row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from typing_extensions import Self

from dbmemory import (
    CapExceededError,
    InvalidArgumentError,
    InvalidScopeError,
    check_run_ready,
    enable_for_agent,
    get_file,
    put_file,
    resolve_store,
    resolve_store_id,
)
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.schema import files as files_table
from dbmemory.db.schema import stores as stores_table
from dbmemory.tool import MemoryTool
from helpers import (
    ERROR,
    StatementLog,
    assert_no_leak,
    committed_view,
    counts,
    file_text,
    file_view,
    listing,
    store_files,
)

AGENT = "QA"
KEY = f"agent:{AGENT}"
Run = Callable[..., str]


def text_of(conn: Connection, path: str) -> str | None:
    return file_text(conn, path, KEY)


def fails(conn: Connection, run: Run, command: str, **params: Any) -> str:
    before = (counts(conn), store_files(conn))
    text = run(command, **params)
    assert text.startswith(ERROR), text
    assert (counts(conn), store_files(conn)) == before
    assert_no_leak(text)
    return text


# ========================================================= C1: paths outside /memories (tool)

OUTSIDE = (
    "must be /memories or start with /memories/: write it as '/memories/<name>', "
    "e.g. '/memories/notes.md'"
)
DOTDOT = "must stay under /memories: remove '..' segments"


@pytest.mark.parametrize(
    ("command", "params", "expected"),
    [
        ("create", {"path": "/memories_backup/notes.md", "file_text": "x"},
         f"path '/memories_backup/notes.md' {OUTSIDE}"),
        ("view", {"path": "/memoriesX"}, f"path '/memoriesX' {OUTSIDE}"),
        ("view", {"path": "/memories/.."}, f"path '/memories/..' {DOTDOT}"),
        ("create", {"path": "/memories/foo/..", "file_text": "x"},
         f"path '/memories/foo/..' {DOTDOT}"),
        ("view", {"path": "/memories/%2e%2e/secret.md"},
         f"path '/memories/%2e%2e/secret.md' (decoded: '/memories/../secret.md') {DOTDOT}"),
        ("view", {"path": "/memories/..%2fsecret.md"},
         f"path '/memories/..%2fsecret.md' (decoded: '/memories/../secret.md') {DOTDOT}"),
        ("create", {"path": "/memories\\..\\x.md", "file_text": "x"},
         ("path '/memories\\\\..\\\\x.md' contains a backslash at position 9: separate segments "
         "with '/' (e.g. '/memories/a/b.md')")),
    ],
)
def test_c1_paths_outside_memories_are_error_text_and_change_no_row(
    conn: Connection, run: Run, command: str, params: dict[str, str], expected: str
) -> None:
    run("create", path="/memories/secret.md", file_text="keep")
    assert fails(conn, run, command, **params) == ERROR + expected


def test_c1_a_name_with_dots_inside_one_segment_is_a_legal_file(conn: Connection, run: Run) -> None:
    assert run("create", path="/memories/first..last.md", file_text="ok") == (
        "File created successfully at: /memories/first..last.md"
    )
    assert run("view", path="/memories/first..last.md") == file_view(
        "/memories/first..last.md", "ok"
    )


@pytest.mark.parametrize(
    "name", ["a..", "..a", "...", "....md", "a...b", ".hidden..", "%2e%2e.md", "x/..y/z"]
)
def test_c1_more_names_with_dots_that_are_not_dot_segments_are_legal(
    conn: Connection, run: Run, name: str
) -> None:
    assert run("create", path=f"/memories/{name}", file_text="ok").startswith(
        "File created successfully at: /memories/"
    )
    assert counts(conn)[1] == 1


ESCAPES = [
    "/memories/../etc/passwd",
    "/memories/a/../../x",
    "/memories/%252e%252e/x",
    "/memories/%25252e%25252e/x",
    "/memories/%2E%2E/x",
    "/memories/a/%2e%2e/%2e%2e/x",
    "/memories/.%2e/x",
    "/memories/%2e./x",
    "/memories/%2e%2e%2fx",
    "/memories/%2e%2e%5cx",
    "/memories/..\\x",
    "/memories\\x",
    "\\memories\\x",
    "/memories/./x",
    "/memories/%2e/x",
    "/memories/\uff0e\uff0e/x",
    "/memories/\u2025/x",
    "/memories/a\u2215..\u2215x",
    "/memories/a\uff0f..\uff0fx",
    "/memories/\u200b../x",
    "/memories/.. /x",
    "/memories/ ../x",
    "/memories/a\x00/x",
    "/memories/%00/x",
    "/memories/%c0%ae%c0%ae/x",
    "/Memories/x",
    "/MEMORIES/x",
    "memories/x",
    "memories",
    "/memories_x",
    "/memories..",
    "/memories.md",
    "/memories%2e%2e/x",
    "/etc/passwd",
    "/",
    "",
    "~/memories",
    "file:///memories/x",
    "/memories/\ud800",
    "/memories/" + "x" * 1000,
]


def _escape_attempts() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(parameter name, command, params) for every escape through every path parameter."""
    for path in ESCAPES:
        base = {"path": path, "file_text": "x", "old_str": "inside", "new_str": "y",
                "insert_line": 0, "insert_text": "y"}
        for command in ("view", "create", "str_replace", "insert", "delete"):
            yield "path", command, base
        yield "old_path", "rename", {"old_path": path, "new_path": "/memories/moved"}
        yield "new_path", "rename", {"old_path": "/memories/x", "new_path": path}


def test_c1_no_command_accepts_an_escaping_or_invalid_path_and_no_sql_runs(
    conn: Connection, engine: Engine, run: Run
) -> None:
    run("create", path="/memories/x", file_text="inside")
    before = (counts(conn), store_files(conn))
    wrong: list[str] = []
    with StatementLog(engine) as log:
        for name, command, params in _escape_attempts():
            text = run(command, **params)
            if not text.startswith(ERROR) or not (
                text.startswith(f"Error: {name} ") or f"`{name}`" in text
            ):
                wrong.append(f"{command} {params.get(name)!r}: {text[:120]!r}")
            else:
                assert_no_leak(text)
    assert wrong == []
    assert log.statements == []
    assert (counts(conn), store_files(conn)) == before


def test_c1_two_spellings_of_one_path_are_one_file(conn: Connection, run: Run) -> None:
    run("create", path="/memories//notes/%61.md/", file_text="1")
    for spelling in ("/memories/notes/a.md", "/memories/notes//a.md", "/memories/%6eotes/a.md",
                     "/memories/notes/a.md/", "/memories/notes/%2561.md"):
        assert run("view", path=spelling) == file_view("/memories/notes/a.md", "1")
    assert store_files(conn, KEY) == {"/memories/notes/a.md": "1"}


def test_c1_composed_and_decomposed_accents_are_one_file(conn: Connection, run: Run) -> None:
    run("create", path="/memories/caf\u00e9.md", file_text="1")
    assert run("create", path="/memories/cafe\u0301.md", file_text="2") == (
        "Error: File /memories/caf\u00e9.md already exists: use str_replace or insert to change "
        "it, or delete it first to write it anew."
    )


def test_c1_letter_case_makes_different_files_on_every_backend(conn: Connection, run: Run) -> None:
    run("create", path="/memories/Notes.md", file_text="upper")
    run("create", path="/memories/notes.md", file_text="lower")
    assert store_files(conn, KEY) == {"/memories/Notes.md": "upper", "/memories/notes.md": "lower"}
    assert run("view", path="/memories/notes.md") == file_view("/memories/notes.md", "lower")


def test_c1_a_path_of_1000_characters_is_legal_and_1001_is_not(conn: Connection, run: Run) -> None:
    ok = "/memories/" + "é" * 990
    assert len(ok) == 1000
    assert run("create", path=ok, file_text="x") == f"File created successfully at: {ok}"
    assert text_of(conn, ok) == "x"
    too_long = ok + "x"
    assert fails(conn, run, "create", path=too_long, file_text="x") == (
        f"Error: path {too_long[:100]!r}... (1,001 characters) is 1,001 characters long after "
        "normalisation; the limit is 1,000 characters: use shorter names"
    )


# ===================================================================== C2: str_replace edges

PROFILE = "## Notes\n- (none yet)\n"


def test_c2a_multi_line_old_str_is_replaced(conn: Connection, run: Run) -> None:
    run("create", path="/memories/profile.md", file_text=PROFILE)
    assert run(
        "str_replace", path="/memories/profile.md", old_str="## Notes\n- (none yet)",
        new_str="## Notes\n- prefers tea",
    ) == (
        "The memory file /memories/profile.md has been edited. Here is the snippet showing "
        "the change (with line numbers):\n     1\t## Notes\n     2\t- prefers tea"
    )
    assert text_of(conn, "/memories/profile.md") == "## Notes\n- prefers tea\n"


@pytest.mark.parametrize("extra", [{}, {"new_str": None}])
def test_c2b_omitted_new_str_deletes_the_match_and_never_writes_none(
    conn: Connection, run: Run, extra: dict[str, Any]
) -> None:
    run("create", path="/memories/profile.md", file_text=PROFILE)
    run("str_replace", path="/memories/profile.md", old_str="## Notes\n- (none yet)", **extra)
    assert text_of(conn, "/memories/profile.md") == "\n"
    assert "None" not in (text_of(conn, "/memories/profile.md") or "None")


def test_c2c_several_empty_and_absent_old_str_are_three_different_errors(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/t.md", file_text="tea, tea\n")
    several = fails(conn, run, "str_replace", path="/memories/t.md", old_str="tea", new_str="x")
    empty = fails(conn, run, "str_replace", path="/memories/t.md", old_str="", new_str="x")
    absent = fails(conn, run, "str_replace", path="/memories/t.md", old_str="milk", new_str="x")
    assert several == (
        "Error: No replacement was performed. Multiple occurrences of old_str `tea` in lines: 1 "
        "(2 occurrences in /memories/t.md). Please ensure it is unique: include more of the "
        "surrounding text in old_str so that it matches exactly once."
    )
    assert empty == (
        "Error: No replacement was performed: old_str is empty. Pass the exact text to replace; "
        "it must appear exactly once in /memories/t.md. To add text without replacing any, use "
        "insert."
    )
    assert absent == (
        "Error: No replacement was performed, old_str `milk` did not appear verbatim in "
        "/memories/t.md. View the file and copy the text exactly, including spaces, tabs and "
        "line breaks."
    )
    assert text_of(conn, "/memories/t.md") == "tea, tea\n"


@pytest.mark.parametrize(
    ("text", "old", "new", "result"),
    [
        ("abc", "a", "", "bc"),
        ("abc", "c", "C\n", "abC\n"),
        ("a\r\nb\r\n", "a\r\nb", "x\r\ny", "x\r\ny\r\n"),
        ("\ttab\t\n", "\ttab\t", "\tTAB\t", "\tTAB\t\n"),
        ("€😀é", "😀", "🍕🍕", "€🍕🍕é"),
        ("x  \n", "x  ", "y   ", "y   \n"),
        ("line\n", "line\n", "", ""),
    ],
)
def test_c2_more_replacements_change_exactly_the_matched_span(
    conn: Connection, run: Run, text: str, old: str, new: str, result: str
) -> None:
    run("create", path="/memories/r.md", file_text=text)
    assert not run("str_replace", path="/memories/r.md", old_str=old, new_str=new).startswith(ERROR)
    assert text_of(conn, "/memories/r.md") == result


@pytest.mark.parametrize(
    ("text", "old", "lines", "count"),
    [("aaa", "aa", "1", 2), ("x\ny x\nz\nx", "x", "1, 2, 4", 3), ("ab\nab\n", "ab\n", "1, 2", 2)],
)
def test_c2_overlapping_and_repeated_matches_are_ambiguous(
    conn: Connection, run: Run, text: str, old: str, lines: str, count: int
) -> None:
    run("create", path="/memories/r.md", file_text=text)
    shown = f"`{old}`"
    assert fails(conn, run, "str_replace", path="/memories/r.md", old_str=old, new_str="Q") == (
        f"Error: No replacement was performed. Multiple occurrences of old_str {shown} in lines: "
        f"{lines} ({count} occurrences in /memories/r.md). Please ensure it is unique: include "
        "more of the surrounding text in old_str so that it matches exactly once."
    )


def test_c2_a_match_that_differs_only_in_trailing_space_is_absent(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/r.md", file_text="tea\n")
    assert fails(conn, run, "str_replace", path="/memories/r.md", old_str="tea ", new_str="x") == (
        "Error: No replacement was performed, old_str `tea ` did not appear verbatim in "
        "/memories/r.md. View the file and copy the text exactly, including spaces, tabs and "
        "line breaks."
    )


def test_c2_an_lf_old_str_in_a_crlf_file_gets_a_line_end_hint(conn: Connection, run: Run) -> None:
    run("create", path="/memories/r.md", file_text="a\r\nb\r\n")
    assert fails(conn, run, "str_replace", path="/memories/r.md", old_str="a\nb", new_str="x") == (
        "Error: No replacement was performed, old_str `a\nb` did not appear verbatim in "
        "/memories/r.md. The file ends its lines with \\r\\n (Windows style): write every line "
        "break in old_str as \\r\\n."
    )


# ============================================================ C3: insert and view_range math


@pytest.mark.parametrize(
    ("line", "insert_text", "result"),
    [(0, "TOP", "TOP\na\nb\nc\n"), (3, "END", "a\nb\nc\nEND\n"), (3, "END\n", "a\nb\nc\nEND\n"),
     (1, "X\n", "a\nX\nb\nc\n"), (2, "X\nY", "a\nb\nX\nY\nc\n"), (0, "", "\na\nb\nc\n")],
)
def test_c3_insert_at_each_line(
    conn: Connection, run: Run, line: int, insert_text: str, result: str
) -> None:
    run("create", path="/memories/c.md", file_text="a\nb\nc\n")
    assert not run("insert", path="/memories/c.md", insert_line=line, insert_text=insert_text).startswith(ERROR)
    assert text_of(conn, "/memories/c.md") == result


@pytest.mark.parametrize("line", [4, -1, 99, "-1", "4"])
def test_c3_insert_out_of_range_states_the_valid_range(
    conn: Connection, run: Run, line: Any
) -> None:
    run("create", path="/memories/c.md", file_text="a\nb\nc\n")
    assert fails(conn, run, "insert", path="/memories/c.md", insert_line=line, insert_text="x") == (
        f"Error: Invalid `insert_line` parameter: {int(line)}. It should be within the range "
        "[0, 3]: 0 inserts before the first line, 3 after the last line of /memories/c.md "
        "(3 lines)."
    )


def test_c3_insert_into_an_empty_file(conn: Connection, run: Run) -> None:
    run("create", path="/memories/e.md", file_text="")
    assert fails(conn, run, "insert", path="/memories/e.md", insert_line=1, insert_text="x") == (
        "Error: Invalid `insert_line` parameter: 1. It should be within the range [0, 0]: "
        "/memories/e.md is empty, so insert at line 0."
    )
    run("insert", path="/memories/e.md", insert_line=0, insert_text="x")
    assert text_of(conn, "/memories/e.md") == "x"


def test_c3_insert_after_a_last_line_without_newline_ends_that_line(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/c.md", file_text="l1\nl2")
    run("insert", path="/memories/c.md", insert_line=2, insert_text="x")
    assert text_of(conn, "/memories/c.md") == "l1\nl2\nx"


L5 = "l1\nl2\nl3\nl4\nl5"


@pytest.mark.parametrize(
    ("view_range", "expected"),
    [
        ([1, -1], file_view("/memories/l.md", "l1", "l2", "l3", "l4", "l5")),
        ([3, -1], file_view("/memories/l.md", "l3", "l4", "l5", first=3)),
        ([4, 99], file_view("/memories/l.md", "l4", "l5", first=4)
         + "\n(note: view_range end 99 is past the last line, 5; showed lines 4-5)"),
        ([4, 2], ("Error: Invalid `view_range` parameter: [4, 2]. /memories/l.md has 5 lines: "
         "use [start, end] with 1 <= start <= 5 and start <= end, or end = -1 to read to the "
         "last line.")),
        ([6, -1], ("Error: Invalid `view_range` parameter: [6, -1]. /memories/l.md has 5 lines: "
         "use [start, end] with 1 <= start <= 5 and start <= end, or end = -1 to read to the "
         "last line.")),
    ],
)
def test_c3_view_range_arithmetic(run: Run, view_range: list[int], expected: str) -> None:
    run("create", path="/memories/l.md", file_text=L5)
    assert run("view", path="/memories/l.md", view_range=view_range) == expected


def test_c3_a_file_ending_in_newline_shows_no_empty_last_line(run: Run) -> None:
    run("create", path="/memories/l.md", file_text=L5 + "\n")
    assert run("view", path="/memories/l.md") == file_view(
        "/memories/l.md", "l1", "l2", "l3", "l4", "l5"
    )
    assert run("view", path="/memories/l.md", view_range=[5, -1]) == file_view(
        "/memories/l.md", "l5", first=5
    )
    assert run("view", path="/memories/l.md", view_range=[6, -1]).startswith(ERROR)


@pytest.mark.parametrize("view_range", [[0, 0], [5, 3], [1, -1], [-3, 0], ["a", "b"], "x"])
def test_c3_a_directory_view_with_any_view_range_is_an_ordinary_listing(
    run: Run, view_range: Any
) -> None:
    run("create", path="/memories/l.md", file_text=L5)
    assert run("view", path="/memories", view_range=view_range) == listing(
        "/memories", "14\t/memories", "14\t/memories/l.md"
    )


# ========================================================================= C4: whitespace


def test_c4_crlf_and_tabs_survive_a_str_replace(conn: Connection, engine: Engine, run: Run) -> None:
    run("create", path="/memories/w.md", file_text="a\r\n\tb\r\nc\r\n")
    run("str_replace", path="/memories/w.md", old_str="\tb", new_str="\tB")
    assert text_of(conn, "/memories/w.md") == "a\r\n\tB\r\nc\r\n"
    assert run("view", path="/memories/w.md") == file_view("/memories/w.md", "a\r", "\tB\r", "c\r")
    conn.commit()
    with committed_view(engine) as c2:
        assert file_text(c2, "/memories/w.md", KEY) == "a\r\n\tB\r\nc\r\n"


WHITESPACE_TEXTS = [
    "trailing spaces   \nand tabs\t\t\n",
    "   leading spaces\n",
    "no final newline",
    "\n\n\n",
    "\r\n",
    "lone\rcarriage\rreturns",
    "mixed\r\nline\nends\r\n",
    "\t\t\t",
    " ",
    "nbsp\u00a0and\u2003em space\u3000ideographic",
    "line\u2028separator\u2029paragraph",
    "\ufeffbom at start",
    "zero\u200bwidth",
    "form\x0cfeed\x0bvtab",
    "ends with spaces   ",
    "x\n" + " " * 4000 + "\n",
]


@pytest.mark.parametrize("text", WHITESPACE_TEXTS)
def test_c4_whitespace_round_trips_exactly(
    conn: Connection, engine: Engine, run: Run, text: str
) -> None:
    assert run("create", path="/memories/w.md", file_text=text) == (
        "File created successfully at: /memories/w.md"
    )
    conn.commit()
    with committed_view(engine) as c2:
        assert file_text(c2, "/memories/w.md", KEY) == text
        assert c2.execute(sa.select(files_table.c.char_count)).scalar_one() == len(text)


@pytest.mark.parametrize("text", WHITESPACE_TEXTS)
def test_c4_an_insert_elsewhere_leaves_every_whitespace_character_alone(
    conn: Connection, run: Run, text: str
) -> None:
    run("create", path="/memories/w.md", file_text="HEAD\n" + text)
    run("insert", path="/memories/w.md", insert_line=0, insert_text="TOP")
    assert text_of(conn, "/memories/w.md") == "TOP\nHEAD\n" + text


def test_c4_insert_into_a_crlf_file_keeps_its_line_ends(conn: Connection, run: Run) -> None:
    run("create", path="/memories/w.md", file_text="a\r\nb\r\n")
    run("insert", path="/memories/w.md", insert_line=1, insert_text="x")
    assert text_of(conn, "/memories/w.md") == "a\r\nx\r\nb\r\n"  # no mixed line ends


# ======================================================================= C5: empty files


def test_c5_an_empty_file_is_a_real_file(conn: Connection, engine: Engine, run: Run) -> None:
    assert run("create", path="/memories/empty.md", file_text="") == (
        "File created successfully at: /memories/empty.md"
    )
    assert run("view", path="/memories/empty.md") == (
        "Here's the content of /memories/empty.md with line numbers:\n"
        "(the file /memories/empty.md exists and is empty: 0 lines, 0 characters)"
    )
    assert run("view", path="/memories") == listing(
        "/memories", "0\t/memories", "0\t/memories/empty.md"
    )
    run("insert", path="/memories/empty.md", insert_line=0, insert_text="x")
    assert text_of(conn, "/memories/empty.md") == "x"
    assert run("str_replace", path="/memories/empty.md", old_str="x", new_str="") == (
        "The memory file /memories/empty.md has been edited. It is now empty (0 characters) "
        "and still exists."
    )
    conn.commit()
    with committed_view(engine) as c2:
        assert file_text(c2, "/memories/empty.md", KEY) == ""
        assert c2.execute(sa.select(files_table.c.char_count)).scalar_one() == 0


def test_c5_empty_files_count_toward_max_files(conn: Connection) -> None:
    enable_for_agent(conn, "TWO", max_files=2)
    conn.commit()
    tool = MemoryTool(conn, "TWO")
    for name in ("a", "b"):
        tool.execute({"command": "create", "path": f"/memories/{name}.md", "file_text": ""})
    assert tool.execute({"command": "create", "path": "/memories/c.md", "file_text": ""}) == (
        "Error: Cannot create /memories/c.md: the memory store already holds 2 files, the most "
        "it may hold. Delete or merge files you no longer need, then retry."
    )


def test_c5_an_empty_file_can_be_renamed_deleted_and_read_by_the_admin_api(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/e.md", file_text="")
    assert run("rename", old_path="/memories/e.md", new_path="/memories/d/e.md") == (
        "Successfully renamed /memories/e.md to /memories/d/e.md"
    )
    store_id = resolve_store(conn, AGENT).store_id
    assert store_id is not None
    record = get_file(conn, store_id, "/memories/d/e.md")
    assert (record.text, record.chars) == ("", 0)
    assert run("view", path="/memories/d") == listing("/memories/d", "0\t/memories/d", "0\t/memories/d/e.md")
    assert run("delete", path="/memories/d/e.md") == "Successfully deleted /memories/d/e.md"
    assert counts(conn)[1] == 0


def test_c5_put_file_of_an_empty_text_makes_and_keeps_an_empty_file(conn: Connection, run: Run) -> None:
    run("create", path="/memories/seed.md", file_text="s")
    store_id = resolve_store(conn, AGENT).store_id
    assert store_id is not None
    record = put_file(conn, store_id, "/memories/p.md", "")
    assert (record.text, record.chars, record.version) == ("", 0, 1)
    record = put_file(conn, store_id, "/memories/p.md", "now text")
    record = put_file(conn, store_id, "/memories/p.md", "")
    assert (record.text, record.chars, record.version) == ("", 0, 3)
    assert text_of(conn, "/memories/p.md") == ""


def test_c5_str_replace_in_an_empty_file_finds_nothing(conn: Connection, run: Run) -> None:
    run("create", path="/memories/e.md", file_text="")
    assert fails(conn, run, "str_replace", path="/memories/e.md", old_str="x", new_str="y") == (
        "Error: No replacement was performed, old_str `x` did not appear verbatim in "
        "/memories/e.md. View the file and copy the text exactly, including spaces, tabs and "
        "line breaks."
    )


# ================================================================= C6: large and multi-byte

ROUND_TRIPS = {
    "a*4001": "a" * 4001,
    "a*32768": "a" * 32768,
    "euro*100000": "€" * 100_000,
    "pizza*100000": "🍕" * 100_000,
    "euro*1334 (4002 bytes)": "€" * 1334,
    "mixed*25000": "aé€🍕" * 25_000,
    "combining*50000": "e\u0301" * 50_000,
    "cjk*100000": "漢" * 100_000,
}


@pytest.mark.parametrize("text", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_c6_large_and_multi_byte_text_round_trips_exactly(
    conn: Connection, engine: Engine, run: Run, text: str
) -> None:
    assert run("create", path="/memories/big.md", file_text=text) == (
        "File created successfully at: /memories/big.md"
    )
    conn.commit()
    with committed_view(engine) as c2:
        stored = file_text(c2, "/memories/big.md", KEY)
        assert stored is not None and len(stored) == len(text)
        assert stored == text
        assert c2.execute(sa.select(files_table.c.char_count)).scalar_one() == len(text)
        store_id = resolve_store_id(c2, scope="agent", agent_code=AGENT)
        assert get_file(c2, store_id, "/memories/big.md").text == text


def test_c6_the_listing_shows_100000_euro_signs_as_characters(run: Run) -> None:
    run("create", path="/memories/big.md", file_text="€" * 100_000)
    assert run("view", path="/memories") == listing(
        "/memories", "97.7K\t/memories", "97.7K\t/memories/big.md"
    )


@pytest.mark.parametrize("text", ["€" * 100_001, "a" * 100_001, "🍕" * 100_001, "x" * 1_000_000])
def test_c6_a_file_over_100000_characters_is_refused_before_any_write(
    conn: Connection, engine: Engine, tool: MemoryTool, text: str
) -> None:
    # the cap is the store row's (read under its lock), so the refusal comes after the lock
    before = counts(conn)
    with StatementLog(engine) as log:
        answer = tool.execute({"command": "create", "path": "/memories/big.md", "file_text": text})
    assert not [s for s in log.statements if "dbm_files" in s and s.lstrip().startswith("INSERT")]
    assert answer == (
        f"Error: Cannot write /memories/big.md: it would hold {len(text):,} characters; the "
        "limit is 100,000 characters per file. Write less text or split it into several files."
    )
    assert counts(conn) == before


def test_c6_put_file_over_the_cap_raises_before_any_write(
    conn: Connection, engine: Engine, run: Run
) -> None:
    run("create", path="/memories/seed.md", file_text="s")
    store_id = resolve_store(conn, AGENT).store_id
    assert store_id is not None
    with StatementLog(engine) as log, pytest.raises(CapExceededError) as info:
        put_file(conn, store_id, "/memories/big.md", "€" * 100_001)
    assert not [s for s in log.statements if s.lstrip().startswith("INSERT")]
    assert (info.value.cap, info.value.limit, info.value.actual) == ("max_file_chars", 100_000, 100_001)


@pytest.mark.parametrize(
    "edit",
    [
        {"command": "insert", "path": "/memories/big.md", "insert_line": 0, "insert_text": "€"},
        {"command": "str_replace", "path": "/memories/big.md", "old_str": "€€€€€€€€€x",
         "new_str": "€€€€€€€€€€€"},
    ],
)
def test_c6_an_edit_that_grows_a_file_past_100000_characters_is_refused_unwritten(
    conn: Connection, engine: Engine, tool: MemoryTool, edit: dict[str, Any]
) -> None:
    original = "€" * 99_999 + "x"
    tool.execute({"command": "create", "path": "/memories/big.md", "file_text": original})
    conn.commit()
    with StatementLog(engine) as log:
        answer = tool.execute(edit)
    assert answer.startswith("Error: Cannot write /memories/big.md: it would hold 100,00")
    assert answer.endswith(
        "characters; the limit is 100,000 characters per file. Write less text or split it into "
        "several files."
    )
    assert log.touching("dbm_files", "UPDATE", "INSERT", "DELETE") == []
    assert log.touching("dbm_audit_events", "INSERT") == []
    assert text_of(conn, "/memories/big.md") == original


# =========================================== C7: a failure inside the caller's transaction

caller_metadata = sa.MetaData()
caller_rows = sa.Table(
    "qa_caller_rows",
    caller_metadata,
    sa.Column("row_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("note", sa.String(100)),
)


@pytest.fixture
def caller_table(engine: Engine, conn: Connection) -> Iterator[sa.Table]:
    """The caller's own table (not dbmemory's), empty; dropped after the test."""
    caller_metadata.create_all(engine, checkfirst=True)
    with engine.begin() as c:
        c.execute(sa.delete(caller_rows))
    yield caller_rows
    conn.rollback()
    caller_metadata.drop_all(engine, checkfirst=True)


def _caller_rows(engine: Engine) -> list[tuple[int, str]]:
    with committed_view(engine) as c2:
        return [tuple(r) for r in c2.execute(sa.select(caller_rows).order_by(caller_rows.c.row_id))]  # type: ignore[misc]


def test_c7_a_nul_character_fails_as_text_and_the_caller_commits_its_rows(
    conn: Connection, engine: Engine, caller_table: sa.Table
) -> None:
    enable_for_agent(conn, AGENT)
    conn.commit()
    trans = conn.begin()
    conn.execute(sa.insert(caller_table).values(row_id=1, note="before the tool"))
    tool = MemoryTool(conn, AGENT)
    answer = tool.execute({"command": "create", "path": "/memories/n.md", "file_text": "a\u0000b"})
    assert answer == (
        "Error: Parameter `file_text` contains a NUL character ('\\x00') at position 1: memory "
        "files hold text only. Remove the NUL characters."
    )
    conn.execute(sa.insert(caller_table).values(row_id=2, note="after the tool"))
    trans.commit()
    assert _caller_rows(engine) == [(1, "before the tool"), (2, "after the tool")]
    with committed_view(engine) as c2:
        assert counts(c2)[:2] == (0, 0)


FAILING_CALLS = {
    "nul in insert_text": {"command": "insert", "path": "/memories/a.md", "insert_line": 0,
                           "insert_text": "\x00"},
    "nul in new_str": {"command": "str_replace", "path": "/memories/a.md", "old_str": "a",
                       "new_str": "b\x00"},
    "nul in old_str": {"command": "str_replace", "path": "/memories/a.md", "old_str": "a\x00",
                       "new_str": "b"},
    "nul in path": {"command": "create", "path": "/memories/n\x00.md", "file_text": "x"},
    "nul escaped in path": {"command": "view", "path": "/memories/%00"},
    "lone surrogate": {"command": "create", "path": "/memories/s.md", "file_text": "a\ud800"},
    "already exists": {"command": "create", "path": "/memories/a.md", "file_text": "x"},
    "file over the cap": {"command": "create", "path": "/memories/big.md", "file_text": "x" * 100_001},
    "missing file": {"command": "str_replace", "path": "/memories/zz.md", "old_str": "a",
                     "new_str": "b"},
    "directory edited": {"command": "insert", "path": "/memories/d", "insert_line": 0,
                         "insert_text": "x"},
    "below a file": {"command": "create", "path": "/memories/a.md/x", "file_text": "x"},
    "rename onto existing": {"command": "rename", "old_path": "/memories/a.md",
                             "new_path": "/memories/d/b.md"},
    "root delete": {"command": "delete", "path": "/memories"},
    "bad json": "{oops",
}


@pytest.mark.parametrize("arguments", FAILING_CALLS.values(), ids=FAILING_CALLS.keys())
def test_c7_any_failing_call_leaves_the_caller_transaction_usable(
    conn: Connection, engine: Engine, caller_table: sa.Table, arguments: Any
) -> None:
    enable_for_agent(conn, AGENT)
    seed = MemoryTool(conn, AGENT)
    seed.execute({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    seed.execute({"command": "create", "path": "/memories/d/b.md", "file_text": "b"})
    conn.commit()
    trans = conn.begin()
    conn.execute(sa.insert(caller_table).values(row_id=1, note="mine"))
    answer = MemoryTool(conn, AGENT).execute(arguments)
    assert answer.startswith(ERROR), answer
    assert_no_leak(answer)
    conn.execute(sa.insert(caller_table).values(row_id=2, note="still mine"))
    conn.execute(sa.update(caller_table).where(caller_table.c.row_id == 1).values(note="changed"))
    trans.commit()
    assert _caller_rows(engine) == [(1, "changed"), (2, "still mine")]
    with committed_view(engine) as c2:
        assert store_files(c2, KEY) == {"/memories/a.md": "a", "/memories/d/b.md": "b"}


def test_c7_put_file_with_nul_raises_before_sql_and_the_transaction_goes_on(
    conn: Connection, engine: Engine, caller_table: sa.Table
) -> None:
    enable_for_agent(conn, AGENT)
    MemoryTool(conn, AGENT).execute({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    conn.commit()
    store_id = resolve_store(conn, AGENT).store_id
    assert store_id is not None
    conn.commit()
    trans = conn.begin()
    conn.execute(sa.insert(caller_table).values(row_id=1, note="mine"))
    with StatementLog(engine) as log, pytest.raises(InvalidArgumentError):
        put_file(conn, store_id, "/memories/a.md", "a\x00b")
    assert log.statements == []
    conn.execute(sa.insert(caller_table).values(row_id=2, note="mine too"))
    trans.commit()
    assert _caller_rows(engine) == [(1, "mine"), (2, "mine too")]


# ===================================================================== C8: concurrent edits


def _server_or_sqlite_file(engine: Engine) -> None:
    if is_memory_sqlite(engine):
        pytest.skip("in-memory SQLite has a single shared connection: no concurrent writers")


def _together(*calls: Callable[[], str]) -> list[str]:
    """Run the calls in threads released at the same moment; return their answers."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def worker(index: int, call: Callable[[], str]) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            results[index] = exc

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a writer hung"
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def _tool_call(engine: Engine, agent: str, arguments: dict[str, Any]) -> Callable[[], str]:
    def call() -> str:
        with engine.begin() as c:
            return MemoryTool(c, agent).execute(arguments)

    return call


CONFLICT = (
    "Error: /memories/todo.md was changed by another writer at the same time; nothing was "
    "written. View it again and retry the command."
)


def test_c8_two_writers_never_lose_an_edit_in_50_rounds(engine: Engine) -> None:
    _server_or_sqlite_file(engine)
    with engine.begin() as c:
        enable_for_agent(c, AGENT)
        MemoryTool(c, AGENT).execute({"command": "create", "path": "/memories/todo.md", "file_text": ""})
        store_id = resolve_store(c, AGENT).store_id
    assert store_id is not None
    insert_b = _tool_call(engine, AGENT, {"command": "insert", "path": "/memories/todo.md",
                                          "insert_line": 1, "insert_text": "- b"})
    upper_a = _tool_call(engine, AGENT, {"command": "str_replace", "path": "/memories/todo.md",
                                         "old_str": "- a", "new_str": "- A"})
    retries = 0
    for _round in range(50):
        with engine.begin() as c:
            put_file(c, store_id, "/memories/todo.md", "- a\n")
        answer_a, answer_b = _together(insert_b, upper_a)
        for answer in (answer_a, answer_b):
            assert "locked" not in answer, answer
            assert not answer.startswith(ERROR) or answer == CONFLICT, answer
        with committed_view(engine) as c2:
            final = file_text(c2, "/memories/todo.md", KEY)
        if answer_a == CONFLICT:
            retries += 1
            assert final == "- A\n"
        elif answer_b == CONFLICT:
            retries += 1
            assert final == "- a\n- b\n"
        else:
            assert final == "- A\n- b\n"
    assert retries <= 5, f"{retries} of 50 rounds needed a retry"


def test_c8_two_identical_replacements_never_both_succeed(engine: Engine) -> None:
    _server_or_sqlite_file(engine)
    with engine.begin() as c:
        enable_for_agent(c, AGENT)
        MemoryTool(c, AGENT).execute({"command": "create", "path": "/memories/todo.md", "file_text": ""})
        store_id = resolve_store(c, AGENT).store_id
    assert store_id is not None
    to_x = _tool_call(engine, AGENT, {"command": "str_replace", "path": "/memories/todo.md",
                                      "old_str": "- a", "new_str": "- X"})
    to_y = _tool_call(engine, AGENT, {"command": "str_replace", "path": "/memories/todo.md",
                                      "old_str": "- a", "new_str": "- Y"})
    for _round in range(10):
        with engine.begin() as c:
            put_file(c, store_id, "/memories/todo.md", "- a\n")
        answers = _together(to_x, to_y)
        winners = [a for a in answers if not a.startswith(ERROR)]
        assert len(winners) == 1, answers
        with committed_view(engine) as c2:
            final = file_text(c2, "/memories/todo.md", KEY)
        assert final == ("- X\n" if winners[0] == answers[0] else "- Y\n")


CAP_TEXT = (
    "Error: Cannot create /memories/{name}.md: the memory store already holds 10 files, the "
    "most it may hold. Delete or merge files you no longer need, then retry."
)


def _race_store(engine: Engine, **caps: int) -> int:
    with engine.begin() as c:
        enable_for_agent(c, "RACE", **caps)
        tool = MemoryTool(c, "RACE")
        for i in range(9):
            tool.execute({"command": "create", "path": f"/memories/f{i}.md", "file_text": "x"})
        store_id = resolve_store(c, "RACE").store_id
    assert store_id is not None
    return store_id


def _file_count(engine: Engine) -> int:
    with committed_view(engine) as c2:
        return c2.execute(sa.select(sa.func.count()).select_from(files_table)).scalar_one()


def test_c8_at_the_file_cap_two_concurrent_creates_let_exactly_one_through(engine: Engine) -> None:
    _server_or_sqlite_file(engine)
    _race_store(engine, max_files=10)
    for round_no in range(10):
        answers = _together(
            _tool_call(engine, "RACE", {"command": "create", "path": f"/memories/x{round_no}.md", "file_text": "x"}),
            _tool_call(engine, "RACE", {"command": "create", "path": f"/memories/y{round_no}.md", "file_text": "y"}),
        )
        winners = [a for a in answers if not a.startswith(ERROR)]
        assert len(winners) == 1, answers
        loser = next(a for a in answers if a.startswith(ERROR))
        assert loser in (CAP_TEXT.format(name=f"x{round_no}"), CAP_TEXT.format(name=f"y{round_no}"))
        assert _file_count(engine) == 10
        with engine.begin() as c:
            MemoryTool(c, "RACE").execute({"command": "delete", "path": winners[0].rsplit(" ", 1)[1]})


def _interleaved(engine: Engine, first: dict[str, Any], second: dict[str, Any], agent: str = "RACE") -> tuple[str, str]:
    """The second writer reads (takes its snapshot) before the first commits, writes after."""
    with engine.connect() as late:
        late.begin()
        late_tool = MemoryTool(late, agent)
        late_tool.execute({"command": "view", "path": "/memories"})
        with engine.begin() as early:
            first_answer = MemoryTool(early, agent).execute(first)
        second_answer = late_tool.execute(second)
        late.commit()
    return first_answer, second_answer


def _server_only(engine: Engine) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite takes its single write lock at BEGIN: writers cannot interleave")


def test_c8_a_writer_whose_snapshot_predates_a_create_still_respects_max_files(
    engine: Engine,
) -> None:
    _server_only(engine)
    _race_store(engine, max_files=10)
    first, second = _interleaved(
        engine,
        {"command": "create", "path": "/memories/a.md", "file_text": "x"},
        {"command": "create", "path": "/memories/b.md", "file_text": "x"},
    )
    assert first == "File created successfully at: /memories/a.md"
    assert second == CAP_TEXT.format(name="b")
    assert _file_count(engine) == 10


def test_c8_a_writer_whose_snapshot_predates_a_create_still_respects_max_store_chars(
    engine: Engine,
) -> None:
    _server_only(engine)
    _race_store(engine, max_store_chars=12)  # 9 characters already
    first, second = _interleaved(
        engine,
        {"command": "create", "path": "/memories/a.md", "file_text": "xx"},
        {"command": "create", "path": "/memories/b.md", "file_text": "yy"},
    )
    assert first == "File created successfully at: /memories/a.md"
    assert second == (
        "Error: Cannot write /memories/b.md: the memory store would hold 13 characters; the "
        "limit is 12 characters in all. Delete or shorten files you no longer need, then retry."
    )


def test_c8_a_writer_whose_snapshot_predates_a_create_of_the_same_path_is_told_it_exists(
    engine: Engine,
) -> None:
    _server_only(engine)
    _race_store(engine)
    first, second = _interleaved(
        engine,
        {"command": "create", "path": "/memories/same.md", "file_text": "first"},
        {"command": "create", "path": "/memories/same.md", "file_text": "second"},
    )
    assert first == "File created successfully at: /memories/same.md"
    assert second == (
        "Error: File /memories/same.md already exists: use str_replace or insert to change it, "
        "or delete it first to write it anew."
    )
    with committed_view(engine) as c2:
        assert file_text(c2, "/memories/same.md", "agent:RACE") == "first"


def test_c8_a_writer_whose_snapshot_predates_a_file_cannot_make_it_a_directory(
    engine: Engine,
) -> None:
    _server_only(engine)
    _race_store(engine)
    first, second = _interleaved(
        engine,
        {"command": "create", "path": "/memories/p", "file_text": "a file"},
        {"command": "create", "path": "/memories/p/child.md", "file_text": "x"},
    )
    assert first == "File created successfully at: /memories/p"
    assert second.startswith(ERROR), second
    with committed_view(engine) as c2:
        paths = set(store_files(c2, "agent:RACE"))
    assert not ({"/memories/p", "/memories/p/child.md"} <= paths)


class Rendezvous:
    """Hold each thread that runs a statement starting with ``prefix`` until ``parties``
    threads got there (or ``timeout`` seconds passed: SQLite lets only one writer in)."""

    def __init__(self, engine: Engine, prefix: str, parties: int = 2, timeout: float = 1.0) -> None:
        self.engine, self.prefix, self.parties, self.timeout = engine, prefix, parties, timeout
        self.arrived = 0
        self.condition = threading.Condition()

    def _hook(self, _conn: Any, _cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith(self.prefix):
            with self.condition:
                self.arrived += 1
                self.condition.notify_all()
                self.condition.wait_for(lambda: self.arrived >= self.parties, timeout=self.timeout)

    def __enter__(self) -> Self:
        sa.event.listen(self.engine, "before_cursor_execute", self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._hook)


def test_c8_two_first_writes_to_a_new_store_both_land_in_one_store(engine: Engine) -> None:
    _server_or_sqlite_file(engine)
    with engine.begin() as c:
        enable_for_agent(c, "FRESH")
    with Rendezvous(engine, "INSERT INTO dbm_stores"):
        answers = _together(
            _tool_call(engine, "FRESH", {"command": "create", "path": "/memories/a.md", "file_text": "a"}),
            _tool_call(engine, "FRESH", {"command": "create", "path": "/memories/b.md", "file_text": "b"}),
        )
    assert answers == [
        "File created successfully at: /memories/a.md",
        "File created successfully at: /memories/b.md",
    ]
    with committed_view(engine) as c2:
        assert c2.execute(sa.select(sa.func.count()).select_from(stores_table)).scalar_one() == 1
        assert store_files(c2, "agent:FRESH") == {"/memories/a.md": "a", "/memories/b.md": "b"}


# ===================================================================== C9: context values

ACCEPTED = ["a" * 200, "v1.2_x-y", "A", "0", "-", "_", "...", "doc-7", "Z9.z9_-"]
REFUSED = [
    "ctx-1\n", "a" * 200 + "\n", "a" * 201, "", "käse", "٣", "ctx 1", "ctx/1", "a:b",
    "\nctx", "ctx\r", "ctx\t1", " ctx", "ctx ", "a\x00b", "ｃｔｘ", "ctx\u200b", "é", "a@b",
    "a#b", "a%b", "a*b", "a\\b", "😀", "ǅ", "1²", "x" * 10_000, None,
]


@pytest.fixture
def context_agent(conn: Connection) -> str:
    enable_for_agent(conn, "DOCS", scope="context", context_key="document_id")
    conn.commit()
    return "DOCS"


@pytest.mark.parametrize("value", ACCEPTED, ids=lambda v: repr(v)[:20])
def test_c9_accepted_context_values_name_their_own_store(
    conn: Connection, engine: Engine, context_agent: str, value: str
) -> None:
    ref = check_run_ready(conn, context_agent, run_context={"document_id": value})
    assert ref.store_key == f"context:DOCS:document_id:{value}"
    tool = MemoryTool(conn, context_agent, run_context={"document_id": value})
    assert tool.execute({"command": "create", "path": "/memories/c.md", "file_text": value}) == (
        "File created successfully at: /memories/c.md"
    )
    conn.commit()
    with committed_view(engine) as c2:
        assert store_files(c2, ref.store_key) == {"/memories/c.md": value}
        assert resolve_store_id(
            c2, scope="context", agent_code="DOCS", context_key="document_id", context_value=value
        ) == resolve_store(c2, "DOCS", run_context={"document_id": value}).store_id


def _store_rows(engine: Engine) -> int:
    with committed_view(engine) as c2:
        return c2.execute(sa.select(sa.func.count()).select_from(stores_table)).scalar_one()


@pytest.mark.parametrize("value", REFUSED, ids=lambda v: repr(v)[:20])
def test_c9_refused_context_values_raise_before_any_store_exists(
    conn: Connection, engine: Engine, context_agent: str, value: Any
) -> None:
    run_context = {"document_id": value}
    with StatementLog(engine) as log:
        with pytest.raises(InvalidScopeError):
            check_run_ready(conn, context_agent, run_context=run_context)
        with pytest.raises(InvalidScopeError):
            MemoryTool(conn, context_agent, run_context=run_context)
        with pytest.raises(InvalidScopeError):
            resolve_store(conn, context_agent, run_context=run_context)
        with pytest.raises(InvalidScopeError):
            resolve_store_id(conn, scope="context", agent_code="DOCS", context_key="document_id",
                             context_value=value)
    assert log.of_kind("INSERT", "UPDATE", "DELETE") == []
    assert counts(conn)[0] == 0
    conn.commit()
    assert _store_rows(engine) == 0


@pytest.mark.parametrize("run_context", [None, {}, {"other": "7"}, {"Document_ID": "7"}])
def test_c9_a_missing_context_key_raises_before_the_run(
    conn: Connection, engine: Engine, context_agent: str, run_context: Any
) -> None:
    with pytest.raises(InvalidScopeError) as info:
        MemoryTool(conn, context_agent, run_context=run_context)
    assert info.value.code == "missing_context_key"
    assert str(info.value) == (
        "agent 'DOCS' keeps memory per 'document_id', but the run context has no 'document_id': "
        "pass run_context={'document_id': ...} (refused before the run starts)"
    )
    conn.commit()
    assert _store_rows(engine) == 0


def test_c9_two_context_values_never_share_files(conn: Connection, context_agent: str) -> None:
    one = MemoryTool(conn, context_agent, run_context={"document_id": "1"})
    two = MemoryTool(conn, context_agent, run_context={"document_id": "2"})
    one.execute({"command": "create", "path": "/memories/n.md", "file_text": "one"})
    assert two.execute({"command": "view", "path": "/memories"}) == listing("/memories", "0\t/memories")
    assert two.execute({"command": "view", "path": "/memories/n.md"}).startswith(ERROR)


def test_c9_context_values_differing_only_in_case_are_different_stores(
    conn: Connection, context_agent: str
) -> None:
    lower = MemoryTool(conn, context_agent, run_context={"document_id": "doc"})
    upper = MemoryTool(conn, context_agent, run_context={"document_id": "DOC"})
    lower.execute({"command": "create", "path": "/memories/n.md", "file_text": "lower"})
    upper.execute({"command": "create", "path": "/memories/n.md", "file_text": "upper"})
    assert store_files(conn, "context:DOCS:document_id:doc") == {"/memories/n.md": "lower"}
    assert store_files(conn, "context:DOCS:document_id:DOC") == {"/memories/n.md": "upper"}


@pytest.mark.parametrize("value", ["käse", "ctx-1\n", "a:b", "a" * 201])
def test_c9_the_same_rule_holds_for_user_and_session_ids(
    conn: Connection, engine: Engine, value: str
) -> None:
    enable_for_agent(conn, "U", scope="user")
    enable_for_agent(conn, "S", scope="session")
    conn.commit()
    with pytest.raises(InvalidScopeError):
        MemoryTool(conn, "U", user_id=value)
    with pytest.raises(InvalidScopeError):
        MemoryTool(conn, "S", session_id=value)
    conn.commit()
    assert _store_rows(engine) == 0
