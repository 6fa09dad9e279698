"""The MEMORY tool's contract on every backend: one test per command and per failure, with the
whole text asserted (STYLE.md points 12 and 14; issue 2, "The MEMORY tool").

Every failure must start with ``"Error: "``, raise nothing, change no row (checked on the
tool's own connection, which sees its uncommitted writes), and never show SQL, a table name or
a driver name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import enable_for_agent, put_file, resolve_store
from dbmemory.db.schema import files as files_table
from dbmemory.tool import MemoryTool
from helpers import (
    ERROR,
    assert_no_leak,
    counts,
    file_text,
    file_view,
    listing,
    store_files,
)

AGENT = "QA"
KEY = f"agent:{AGENT}"

Run = Callable[..., str]


def state(conn: Connection) -> tuple[Any, ...]:
    """Everything a failing command must leave alone: row counts and every file's text."""
    return counts(conn), store_files(conn)


def fails(conn: Connection, run: Run, command: str, **params: Any) -> str:
    """Run a command that must fail; check the marker, no change, no leak; return the text."""
    before = state(conn)
    text = run(command, **params)
    assert text.startswith(ERROR), text
    assert state(conn) == before
    assert_no_leak(text)
    return text


def text_of(conn: Connection, path: str) -> str | None:
    return file_text(conn, path, KEY)


# ===================================================================================== view


def test_view_of_the_empty_root_is_a_listing_with_total_zero(conn: Connection, run: Run) -> None:
    assert run("view", path="/memories") == listing("/memories", "0\t/memories")


def test_view_of_the_root_before_any_write_creates_no_store(conn: Connection, run: Run) -> None:
    run("view", path="/memories")
    assert counts(conn)[:2] == (0, 0)


def test_view_of_a_file_numbers_lines_from_1_right_aligned_in_six_columns(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/a.md", file_text="alpha\n\tbeta\n\ngamma")
    assert run("view", path="/memories/a.md") == (
        "Here's the content of /memories/a.md with line numbers:\n"
        "     1\talpha\n"
        "     2\t\tbeta\n"
        "     3\t\n"
        "     4\tgamma"
    )


def test_view_of_a_file_with_a_trailing_newline_shows_no_phantom_line(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/a.md", file_text="one\ntwo\n")
    assert run("view", path="/memories/a.md") == file_view("/memories/a.md", "one", "two")


def test_view_of_a_file_of_only_a_newline_shows_one_empty_line(conn: Connection, run: Run) -> None:
    run("create", path="/memories/n.md", file_text="\n")
    assert run("view", path="/memories/n.md") == file_view("/memories/n.md", "")


def test_view_of_an_empty_file_says_it_exists_and_is_empty(conn: Connection, run: Run) -> None:
    run("create", path="/memories/e.md", file_text="")
    assert run("view", path="/memories/e.md") == (
        "Here's the content of /memories/e.md with line numbers:\n"
        "(the file /memories/e.md exists and is empty: 0 lines, 0 characters)"
    )


def test_view_of_two_digit_line_numbers_keeps_them_right_aligned(conn: Connection, run: Run) -> None:
    run("create", path="/memories/w.md", file_text="x\n" * 12)
    assert run("view", path="/memories/w.md", view_range=[10, 12]) == file_view(
        "/memories/w.md", "x", "x", "x", first=10
    )


def test_view_of_a_missing_path_is_an_error(conn: Connection, run: Run) -> None:
    assert fails(conn, run, "view", path="/memories/missing.md") == (
        "Error: The path /memories/missing.md does not exist. Please provide a valid path: "
        "view /memories to list the existing files."
    )


def test_view_below_a_file_is_not_found(conn: Connection, run: Run) -> None:
    run("create", path="/memories/f.md", file_text="x")
    assert fails(conn, run, "view", path="/memories/f.md/inner") == (
        "Error: The path /memories/f.md/inner does not exist. Please provide a valid path: "
        "view /memories to list the existing files."
    )


# ------------------------------------------------------------------------------- view_range

FIVE = "l1\nl2\nl3\nl4\nl5"
P = "/memories/five.md"


@pytest.fixture
def five(run: Run) -> None:
    assert run("create", path=P, file_text=FIVE) == f"File created successfully at: {P}"


@pytest.mark.parametrize(
    ("view_range", "first", "lines"),
    [
        ([1, -1], 1, ["l1", "l2", "l3", "l4", "l5"]),
        ([3, -1], 3, ["l3", "l4", "l5"]),
        ([2, 3], 2, ["l2", "l3"]),
        ([5, 5], 5, ["l5"]),
        ([1, 5], 1, ["l1", "l2", "l3", "l4", "l5"]),
        ("[2, 4]", 2, ["l2", "l3", "l4"]),
        (["2", "4"], 2, ["l2", "l3", "l4"]),
        ([2.0, 3.0], 2, ["l2", "l3"]),
        ([], 1, ["l1", "l2", "l3", "l4", "l5"]),
        (None, 1, ["l1", "l2", "l3", "l4", "l5"]),
    ],
)
def test_view_range_selects_lines_numbered_from_their_place_in_the_file(
    five: None, run: Run, view_range: Any, first: int, lines: list[str]
) -> None:
    assert run("view", path=P, view_range=view_range) == file_view(P, *lines, first=first)


def test_view_range_end_past_the_file_is_clamped_with_a_note(five: None, run: Run) -> None:
    assert run("view", path=P, view_range=[4, 99]) == (
        file_view(P, "l4", "l5", first=4)
        + "\n(note: view_range end 99 is past the last line, 5; showed lines 4-5)"
    )


@pytest.mark.parametrize("view_range", [[4, 2], [6, -1], [0, 2], [-1, -1], [0, 0], [6, 9]])
def test_view_range_selecting_no_line_is_an_error_naming_the_valid_range(
    conn: Connection, five: None, run: Run, view_range: list[int]
) -> None:
    start, end = view_range
    assert fails(conn, run, "view", path=P, view_range=view_range) == (
        f"Error: Invalid `view_range` parameter: [{start}, {end}]. {P} has 5 lines: use "
        "[start, end] with 1 <= start <= 5 and start <= end, or end = -1 to read to the last line."
    )


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("abc", "'abc'"), ([1], "[1]"), ([1, 2, 3], "[1, 2, 3]"), ([True, 2], "[True, 2]"),
     ({"start": 1}, "{'start': 1}"), (7, "7")],
)
def test_malformed_view_range_on_a_file_is_an_error_showing_the_value(
    conn: Connection, five: None, run: Run, raw: Any, shown: str
) -> None:
    assert fails(conn, run, "view", path=P, view_range=raw) == (
        f"Error: Invalid `view_range` parameter: {shown}. It must be a list of two integers "
        "[start, end], e.g. [1, 20], or [5, -1] to read from line 5 to the end."
    )


def test_view_range_on_an_empty_file_is_an_error(conn: Connection, run: Run) -> None:
    run("create", path="/memories/e.md", file_text="")
    assert fails(conn, run, "view", path="/memories/e.md", view_range=[1, 1]) == (
        "Error: Invalid `view_range` parameter: [1, 1]. /memories/e.md is empty (0 lines): "
        "view it without view_range."
    )


@pytest.mark.parametrize("view_range", [[0, 0], [5, 3], [-7, 99], "junk", [1], {"a": 1}, True])
def test_view_range_on_a_directory_is_ignored_whatever_it_holds(
    run: Run, view_range: Any
) -> None:
    run("create", path="/memories/d/a.md", file_text="abc")
    expected = listing("/memories/d", "3\t/memories/d", "3\t/memories/d/a.md")
    assert run("view", path="/memories/d", view_range=view_range) == expected
    assert run("view", path="/memories", view_range=view_range) == listing(
        "/memories", "3\t/memories", "3\t/memories/d/", "3\t/memories/d/a.md"
    )


def test_view_output_over_16000_characters_is_cut_with_a_view_range_hint(
    conn: Connection, run: Run
) -> None:
    line = "x" * 99
    run("create", path="/memories/big.md", file_text=(line + "\n") * 400)
    text = run("view", path="/memories/big.md")
    assert len(text) <= 16_000
    kept = text.split("\n")[1:-1]
    assert kept == [f"{n:>6}\t{line}" for n in range(1, len(kept) + 1)]
    assert text.split("\n")[-1] == (
        f"(output clipped at 16,000 characters: showed lines 1-{len(kept)} of 400; "
        f"view the rest with view_range [{len(kept) + 1}, -1])"
    )
    rest = run("view", path="/memories/big.md", view_range=[len(kept) + 1, -1])
    assert rest.split("\n")[1] == f"{len(kept) + 1:>6}\t{line}"


# ================================================================================ listings


def test_listing_sizes_are_characters_in_du_style(conn: Connection, run: Run) -> None:
    run("create", path="/memories/s/small.md", file_text="é" * 512)
    run("create", path="/memories/s/k.md", file_text="a" * 5632)
    run("create", path="/memories/s/edge.md", file_text="b" * 1023)
    assert run("view", path="/memories/s") == listing(
        "/memories/s",
        "7.0K\t/memories/s",
        "1023\t/memories/s/edge.md",
        "5.5K\t/memories/s/k.md",
        "512\t/memories/s/small.md",
    )


def test_listing_of_a_million_characters_shows_megacharacters(
    conn: Connection, tool: MemoryTool, run: Run
) -> None:
    run("create", path="/memories/m/seed.md", file_text="")
    store_id = resolve_store(conn, AGENT).store_id
    assert store_id is not None
    put_file(conn, store_id, "/memories/m/huge.md", "z" * 1_258_291, enforce_caps=False)
    assert run("view", path="/memories/m") == listing(
        "/memories/m", "1.2M\t/memories/m", "1.2M\t/memories/m/huge.md", "0\t/memories/m/seed.md"
    )


def test_listing_goes_two_levels_deep_with_the_total_first_and_each_directory_before_its_entries(
    conn: Connection, run: Run
) -> None:
    for path, text in [
        ("/memories/a/b/c/d.md", "xx"),
        ("/memories/a/b/e.md", "yyy"),
        ("/memories/a/f.md", "z"),
        ("/memories/B.md", "1234"),
        ("/memories/a-b.md", "1"),
        ("/memories/top.md", ""),
    ]:
        run("create", path=path, file_text=text)
    assert run("view", path="/memories") == listing(
        "/memories",
        "11\t/memories",
        "4\t/memories/B.md",
        "6\t/memories/a/",
        "5\t/memories/a/b/",
        "1\t/memories/a/f.md",
        "1\t/memories/a-b.md",
        "0\t/memories/top.md",
    )
    assert run("view", path="/memories/a/") == listing(
        "/memories/a",
        "6\t/memories/a",
        "5\t/memories/a/b/",
        "2\t/memories/a/b/c/",
        "3\t/memories/a/b/e.md",
        "1\t/memories/a/f.md",
    )


def test_listing_hides_dot_names_and_node_modules_but_counts_them_in_totals(run: Run) -> None:
    run("create", path="/memories/.secret/x.md", file_text="1234")
    run("create", path="/memories/node_modules/y.md", file_text="1")
    run("create", path="/memories/.z.md", file_text="12")
    run("create", path="/memories/v.md", file_text="123")
    assert run("view", path="/memories") == listing(
        "/memories", "10\t/memories", "3\t/memories/v.md"
    )


@pytest.mark.parametrize(
    ("directory", "inside", "outside"),
    [
        ("/memories/a_b", "/memories/a_b/in.md", "/memories/axb/out.md"),
        ("/memories/50%", "/memories/50%/in.md", "/memories/50abc/out.md"),
        ("/memories/a%_", "/memories/a%_/in.md", "/memories/a%_x/out.md"),
        ("/memories/Dir", "/memories/Dir/in.md", "/memories/dir/out.md"),
        ("/memories/dir", "/memories/dir/in.md", "/memories/dir.md"),
        ("/memories/é", "/memories/é/in.md", "/memories/e/out.md"),
    ],
)
def test_directory_operations_match_exactly_the_prefix_and_a_slash(
    conn: Connection, run: Run, directory: str, inside: str, outside: str
) -> None:
    run("create", path=inside, file_text="in")
    run("create", path=outside, file_text="out")
    assert run("view", path=directory) == listing(
        directory, f"2\t{directory}", f"2\t{inside}"
    )
    assert run("delete", path=directory) == f"Successfully deleted {directory}"
    assert store_files(conn, KEY) == {outside: "out"}


# ================================================================================== create


def test_create_writes_a_new_file(conn: Connection, run: Run) -> None:
    assert run("create", path="/memories/notes.md", file_text="hello\n") == (
        "File created successfully at: /memories/notes.md"
    )
    assert text_of(conn, "/memories/notes.md") == "hello\n"


def test_create_answers_with_the_canonical_path(conn: Connection, run: Run) -> None:
    assert run("create", path="/memories//x/%79.md/", file_text="a") == (
        "File created successfully at: /memories/x/y.md"
    )
    assert store_files(conn, KEY) == {"/memories/x/y.md": "a"}


def test_create_of_an_existing_file_says_to_use_str_replace_or_delete(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/a.md", file_text="old")
    assert fails(conn, run, "create", path="/memories/a.md", file_text="new") == (
        "Error: File /memories/a.md already exists: use str_replace or insert to change it, "
        "or delete it first to write it anew."
    )


def test_create_of_an_existing_file_under_another_spelling_is_refused(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/a.md", file_text="old")
    for spelling in ("/memories//a.md", "/memories/a.md/", "/memories/%61.md", "/memories/%2561.md"):
        assert fails(conn, run, "create", path=spelling, file_text="new") == (
            "Error: File /memories/a.md already exists: use str_replace or insert to change it, "
            "or delete it first to write it anew."
        )


def test_create_of_an_empty_file_makes_a_real_file(conn: Connection, run: Run) -> None:
    assert run("create", path="/memories/e.md", file_text="") == (
        "File created successfully at: /memories/e.md"
    )
    assert text_of(conn, "/memories/e.md") == ""


def test_create_on_the_root_is_refused(conn: Connection, run: Run) -> None:
    assert fails(conn, run, "create", path="/memories/", file_text="x") == (
        "Error: cannot create the memory root /memories: name a file or directory inside it"
    )


# ------------------------------------------------------------ a path is a file or a directory


def test_create_on_a_directory_path_is_refused_naming_its_files(conn: Connection, run: Run) -> None:
    run("create", path="/memories/d/one.md", file_text="1")
    run("create", path="/memories/d/sub/two.md", file_text="2")
    assert fails(conn, run, "create", path="/memories/d", file_text="x") == (
        "Error: Cannot create /memories/d: it is a directory holding 2 files. "
        "Choose a file name, e.g. /memories/d/notes.md."
    )


def test_create_below_an_existing_file_is_refused_naming_the_file(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/f.md", file_text="x")
    assert fails(conn, run, "create", path="/memories/f.md/deeper/g.md", file_text="y") == (
        "Error: Cannot write /memories/f.md/deeper/g.md: /memories/f.md is a file, not a "
        "directory. Choose a path that is not below an existing file."
    )


def test_rename_below_an_existing_file_is_refused_naming_the_file(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/f.md", file_text="x")
    run("create", path="/memories/g.md", file_text="y")
    assert fails(conn, run, "rename", old_path="/memories/g.md", new_path="/memories/f.md/g.md") == (
        "Error: Cannot write /memories/f.md/g.md: /memories/f.md is a file, not a "
        "directory. Choose a path that is not below an existing file."
    )


# ============================================================================= str_replace


def test_str_replace_replaces_the_one_match_and_shows_a_numbered_snippet(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/s.md", file_text="1\n2\n3\nold\n5\n6\n7\n")
    assert run("str_replace", path="/memories/s.md", old_str="old", new_str="new\nlines") == (
        "The memory file /memories/s.md has been edited. Here is the snippet showing the "
        "change (with line numbers):\n"
        "     2\t2\n     3\t3\n     4\tnew\n     5\tlines\n     6\t5\n     7\t6"
    )
    assert text_of(conn, "/memories/s.md") == "1\n2\n3\nnew\nlines\n5\n6\n7\n"


def test_str_replace_with_no_match_is_an_error(conn: Connection, run: Run) -> None:
    run("create", path="/memories/s.md", file_text="tea\n")
    assert fails(conn, run, "str_replace", path="/memories/s.md", old_str="milk", new_str="x") == (
        "Error: No replacement was performed, old_str `milk` did not appear verbatim in "
        "/memories/s.md. View the file and copy the text exactly, including spaces, tabs and "
        "line breaks."
    )


def test_str_replace_with_several_matches_is_an_error_naming_the_lines(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/s.md", file_text="tea\nmilk\ntea, tea\n")
    assert fails(conn, run, "str_replace", path="/memories/s.md", old_str="tea", new_str="x") == (
        "Error: No replacement was performed. Multiple occurrences of old_str `tea` in lines: "
        "1, 3 (3 occurrences in /memories/s.md). Please ensure it is unique: include more of "
        "the surrounding text in old_str so that it matches exactly once."
    )


def test_str_replace_with_an_empty_old_str_is_an_error(conn: Connection, run: Run) -> None:
    run("create", path="/memories/s.md", file_text="tea\n")
    assert fails(conn, run, "str_replace", path="/memories/s.md", old_str="", new_str="x") == (
        "Error: No replacement was performed: old_str is empty. Pass the exact text to "
        "replace; it must appear exactly once in /memories/s.md. To add text without replacing "
        "any, use insert."
    )


def test_str_replace_on_a_missing_file_is_not_found(conn: Connection, run: Run) -> None:
    assert fails(conn, run, "str_replace", path="/memories/no.md", old_str="a", new_str="b") == (
        "Error: The path /memories/no.md does not exist. Please provide a valid path: "
        "view /memories to list the existing files."
    )


def test_str_replace_on_a_directory_is_refused(conn: Connection, run: Run) -> None:
    run("create", path="/memories/d/a.md", file_text="a")
    assert fails(conn, run, "str_replace", path="/memories/d", old_str="a", new_str="b") == (
        "Error: The path /memories/d is a directory, not a file: str_replace works on one "
        "file. View /memories/d to list its files."
    )


def test_str_replace_that_empties_a_file_keeps_it(conn: Connection, run: Run) -> None:
    run("create", path="/memories/s.md", file_text="all")
    assert run("str_replace", path="/memories/s.md", old_str="all") == (
        "The memory file /memories/s.md has been edited. It is now empty (0 characters) and "
        "still exists."
    )
    assert text_of(conn, "/memories/s.md") == ""


def test_str_replace_with_the_same_text_changes_nothing(conn: Connection, run: Run) -> None:
    run("create", path="/memories/s.md", file_text="a\nb\n")
    before = state(conn)
    assert run("str_replace", path="/memories/s.md", old_str="b", new_str="b") == (
        "The memory file /memories/s.md has been edited. Here is the snippet showing the "
        "change (with line numbers):\n     1\ta\n     2\tb"
    )
    assert state(conn) == before


# ================================================================================== insert


@pytest.mark.parametrize(
    ("line", "expected"),
    [(0, "NEW\na\nb\n"), (1, "a\nNEW\nb\n"), (2, "a\nb\nNEW\n"), ("1", "a\nNEW\nb\n"),
     (2.0, "a\nb\nNEW\n")],
)
def test_insert_puts_the_text_after_the_given_line(
    conn: Connection, run: Run, line: Any, expected: str
) -> None:
    run("create", path="/memories/i.md", file_text="a\nb\n")
    text = run("insert", path="/memories/i.md", insert_line=line, insert_text="NEW")
    assert text.startswith(
        "The memory file /memories/i.md has been edited. Here is the snippet showing the "
        "change (with line numbers):\n"
    )
    assert text_of(conn, "/memories/i.md") == expected


def test_insert_shows_the_inserted_lines_with_context(run: Run) -> None:
    run("create", path="/memories/i.md", file_text="1\n2\n3\n4\n5\n")
    assert run("insert", path="/memories/i.md", insert_line=2, insert_text="x\ny\n") == (
        "The memory file /memories/i.md has been edited. Here is the snippet showing the "
        "change (with line numbers):\n"
        "     1\t1\n     2\t2\n     3\tx\n     4\ty\n     5\t3\n     6\t4"
    )


@pytest.mark.parametrize("line", [3, -1, 100])
def test_insert_out_of_range_is_an_error_stating_the_valid_range(
    conn: Connection, run: Run, line: int
) -> None:
    run("create", path="/memories/i.md", file_text="a\nb\n")
    assert fails(conn, run, "insert", path="/memories/i.md", insert_line=line, insert_text="x") == (
        f"Error: Invalid `insert_line` parameter: {line}. It should be within the range [0, 2]: "
        "0 inserts before the first line, 2 after the last line of /memories/i.md (2 lines)."
    )


def test_insert_on_a_missing_file_is_not_found(conn: Connection, run: Run) -> None:
    assert fails(conn, run, "insert", path="/memories/no.md", insert_line=0, insert_text="x") == (
        "Error: The path /memories/no.md does not exist. Please provide a valid path: "
        "view /memories to list the existing files."
    )


def test_insert_on_a_directory_is_refused(conn: Connection, run: Run) -> None:
    run("create", path="/memories/d/a.md", file_text="a")
    assert fails(conn, run, "insert", path="/memories/d", insert_line=0, insert_text="x") == (
        "Error: The path /memories/d is a directory, not a file: insert works on one file. "
        "View /memories/d to list its files."
    )


def test_insert_accepts_new_str_as_the_text_editor_tool_names_it(
    conn: Connection, run: Run
) -> None:
    run("create", path="/memories/i.md", file_text="a\n")
    run("insert", path="/memories/i.md", insert_line=1, new_str="b")
    assert text_of(conn, "/memories/i.md") == "a\nb\n"


# ================================================================================== delete


def test_delete_removes_a_file(conn: Connection, run: Run) -> None:
    run("create", path="/memories/a.md", file_text="x")
    run("create", path="/memories/b.md", file_text="y")
    assert run("delete", path="/memories/a.md") == "Successfully deleted /memories/a.md"
    assert store_files(conn, KEY) == {"/memories/b.md": "y"}


def test_delete_removes_a_directory_with_everything_under_it(conn: Connection, run: Run) -> None:
    for path in ("/memories/d/a.md", "/memories/d/e/b.md", "/memories/d/e/f/c.md", "/memories/dd.md"):
        run("create", path=path, file_text="x")
    assert run("delete", path="/memories/d/") == "Successfully deleted /memories/d (3 files)"
    assert store_files(conn, KEY) == {"/memories/dd.md": "x"}


def test_delete_of_a_missing_path_is_not_found(conn: Connection, run: Run) -> None:
    run("create", path="/memories/a.md", file_text="x")
    assert fails(conn, run, "delete", path="/memories/b.md") == (
        "Error: The path /memories/b.md does not exist. Please provide a valid path: "
        "view /memories to list the existing files."
    )


ROOT_DELETE = (
    "Error: Cannot delete the /memories directory itself: delete the files or directories "
    "inside it instead."
)


@pytest.mark.parametrize(
    "spelling",
    ["/memories", "/memories/", "/memories//", "//memories", "/memories///", "/%6demories",
     "%2Fmemories", "/memories%2F", "/memories%252F"],
)
def test_delete_of_the_root_in_any_spelling_is_refused(
    conn: Connection, run: Run, spelling: str
) -> None:
    run("create", path="/memories/a.md", file_text="x")
    assert fails(conn, run, "delete", path=spelling) == ROOT_DELETE


@pytest.mark.parametrize(
    ("spelling", "decoded"),
    [("/memories/%2e", "/memories/."), ("/memories/.", None), ("/memories/./", "/memories/."),
     ("/memories/%252e", "/memories/.")],
)
def test_delete_of_the_root_through_a_dot_segment_is_refused(
    conn: Connection, run: Run, spelling: str, decoded: str | None
) -> None:
    run("create", path="/memories/a.md", file_text="x")
    shown = repr(spelling) + (f" (decoded: {decoded!r})" if decoded else "")
    assert fails(conn, run, "delete", path=spelling) == (
        f"Error: path {shown} contains a '.' segment: remove it ('/memories/./a' is "
        "'/memories/a')"
    )


# ================================================================================== rename


def test_rename_moves_a_file(conn: Connection, run: Run) -> None:
    run("create", path="/memories/a.md", file_text="x")
    assert run("rename", old_path="/memories/a.md", new_path="/memories/n/b.md") == (
        "Successfully renamed /memories/a.md to /memories/n/b.md"
    )
    assert store_files(conn, KEY) == {"/memories/n/b.md": "x"}


def test_rename_moves_a_whole_directory(conn: Connection, run: Run) -> None:
    run("create", path="/memories/d/a.md", file_text="1")
    run("create", path="/memories/d/e/b.md", file_text="2")
    run("create", path="/memories/d2/c.md", file_text="3")
    assert run("rename", old_path="/memories/d", new_path="/memories/x/y") == (
        "Successfully renamed /memories/d to /memories/x/y (2 files)"
    )
    assert store_files(conn, KEY) == {
        "/memories/x/y/a.md": "1",
        "/memories/x/y/e/b.md": "2",
        "/memories/d2/c.md": "3",
    }


def test_rename_accepts_path_for_old_path(conn: Connection, run: Run) -> None:
    run("create", path="/memories/a.md", file_text="x")
    assert run("rename", path="/memories/a.md", new_path="/memories/b.md") == (
        "Successfully renamed /memories/a.md to /memories/b.md"
    )


def test_rename_of_a_missing_source_is_not_found(conn: Connection, run: Run) -> None:
    assert fails(conn, run, "rename", old_path="/memories/a.md", new_path="/memories/b.md") == (
        "Error: The path /memories/a.md does not exist. Please provide a valid path: "
        "view /memories to list the existing files."
    )


@pytest.mark.parametrize("destination", ["/memories/b.md", "/memories/d", "/memories/d/"])
def test_rename_onto_an_existing_file_or_directory_is_refused(
    conn: Connection, run: Run, destination: str
) -> None:
    run("create", path="/memories/a.md", file_text="x")
    run("create", path="/memories/b.md", file_text="y")
    run("create", path="/memories/d/c.md", file_text="z")
    shown = destination.rstrip("/")
    assert fails(conn, run, "rename", old_path="/memories/a.md", new_path=destination) == (
        f"Error: The destination {shown} already exists: choose another new_path, or delete "
        "the destination first."
    )


def test_rename_onto_the_same_path_is_refused(conn: Connection, run: Run) -> None:
    run("create", path="/memories/a.md", file_text="x")
    assert fails(conn, run, "rename", old_path="/memories/a.md", new_path="/memories//a.md/") == (
        "Error: old_path and new_path are both /memories/a.md: pass a different new_path."
    )


@pytest.mark.parametrize("destination", ["/memories/d/e", "/memories/d/x/y", "/memories/d//z/"])
def test_rename_of_a_directory_into_itself_is_refused(
    conn: Connection, run: Run, destination: str
) -> None:
    run("create", path="/memories/d/a.md", file_text="x")
    canonical = "/" + "/".join(p for p in destination.split("/") if p)
    assert fails(conn, run, "rename", old_path="/memories/d", new_path=destination) == (
        f"Error: Cannot move /memories/d into itself ({canonical}): choose a new_path outside "
        "/memories/d."
    )


def test_rename_to_a_sibling_sharing_the_prefix_is_allowed(conn: Connection, run: Run) -> None:
    run("create", path="/memories/d/a.md", file_text="x")
    assert run("rename", old_path="/memories/d", new_path="/memories/d2") == (
        "Successfully renamed /memories/d to /memories/d2"
    )
    assert store_files(conn, KEY) == {"/memories/d2/a.md": "x"}


@pytest.mark.parametrize(
    ("old_path", "new_path"),
    [("/memories", "/memories/x"), ("/memories/", "/memories/x"), ("/memories/a.md", "/memories"),
     ("/memories/a.md", "/memories//")],
)
def test_rename_of_or_onto_the_root_is_refused(
    conn: Connection, run: Run, old_path: str, new_path: str
) -> None:
    run("create", path="/memories/a.md", file_text="x")
    assert fails(conn, run, "rename", old_path=old_path, new_path=new_path) == (
        "Error: Cannot rename the /memories directory itself: rename the files or directories "
        "inside it instead."
    )


# ==================================================================================== caps


@pytest.fixture
def capped(conn: Connection) -> Run:
    """A tool of agent CAPPED: 10 characters per file, 3 files, 20 characters in all."""
    enable_for_agent(conn, "CAPPED", max_file_chars=10, max_files=3, max_store_chars=20)
    conn.commit()
    tool = MemoryTool(conn, "CAPPED")

    def call(command: str, **params: Any) -> str:
        return tool.execute({"command": command, **params})

    return call


def test_create_over_max_file_chars_is_refused_naming_the_cap(conn: Connection, capped: Run) -> None:
    assert fails(conn, capped, "create", path="/memories/a.md", file_text="x" * 11) == (
        "Error: Cannot write /memories/a.md: it would hold 11 characters; the limit is 10 "
        "characters per file. Write less text or split it into several files."
    )
    assert counts(conn)[:2] == (0, 0)


def test_create_at_exactly_max_file_chars_is_allowed(conn: Connection, capped: Run) -> None:
    assert capped("create", path="/memories/a.md", file_text="€" * 10) == (
        "File created successfully at: /memories/a.md"
    )


def test_create_over_max_files_is_refused_naming_the_cap(conn: Connection, capped: Run) -> None:
    for name in "abc":
        capped("create", path=f"/memories/{name}.md", file_text="")
    assert fails(conn, capped, "create", path="/memories/d.md", file_text="") == (
        "Error: Cannot create /memories/d.md: the memory store already holds 3 files, the most "
        "it may hold. Delete or merge files you no longer need, then retry."
    )


def test_create_over_max_store_chars_is_refused_naming_the_cap(
    conn: Connection, capped: Run
) -> None:
    capped("create", path="/memories/a.md", file_text="x" * 10)
    capped("create", path="/memories/b.md", file_text="x" * 8)
    assert fails(conn, capped, "create", path="/memories/c.md", file_text="xyz") == (
        "Error: Cannot write /memories/c.md: the memory store would hold 21 characters; the "
        "limit is 20 characters in all. Delete or shorten files you no longer need, then retry."
    )


def test_str_replace_that_grows_a_file_past_max_file_chars_is_refused(
    conn: Connection, capped: Run
) -> None:
    capped("create", path="/memories/a.md", file_text="abcdefgh")
    assert fails(conn, capped, "str_replace", path="/memories/a.md", old_str="h", new_str="hijk") == (
        "Error: Cannot write /memories/a.md: it would hold 11 characters; the limit is 10 "
        "characters per file. Write less text or split it into several files."
    )
    assert file_text(conn, "/memories/a.md", "agent:CAPPED") == "abcdefgh"


def test_insert_that_grows_the_store_past_max_store_chars_is_refused(
    conn: Connection, capped: Run
) -> None:
    capped("create", path="/memories/a.md", file_text="x" * 10)
    capped("create", path="/memories/b.md", file_text="y\n")
    capped("create", path="/memories/c.md", file_text="z" * 5)
    assert fails(conn, capped, "insert", path="/memories/b.md", insert_line=1, insert_text="1234") == (
        "Error: Cannot write /memories/b.md: the memory store would hold 22 characters; the "
        "limit is 20 characters in all. Delete or shorten files you no longer need, then retry."
    )


def test_an_edit_that_shrinks_a_store_over_its_cap_is_allowed(conn: Connection, capped: Run) -> None:
    capped("create", path="/memories/a.md", file_text="x" * 10)
    capped("create", path="/memories/b.md", file_text="y" * 8 + "zz")
    enable_for_agent(conn, "CAPPED", max_store_chars=15)  # the store (20) is now over its cap
    conn.commit()
    lowered = MemoryTool(conn, "CAPPED")
    assert lowered.execute({"command": "str_replace", "path": "/memories/b.md", "old_str": "zz"}) == (
        "The memory file /memories/b.md has been edited. Here is the snippet showing the "
        "change (with line numbers):\n     1\tyyyyyyyy"
    )
    assert lowered.execute(
        {"command": "str_replace", "path": "/memories/b.md", "old_str": "yyyyyyyy", "new_str": "yyyyyyyyy"}
    ) == (
        "Error: Cannot write /memories/b.md: the memory store would hold 19 characters; the "
        "limit is 15 characters in all. Delete or shorten files you no longer need, then retry."
    )


def test_rename_within_the_caps_is_allowed_at_the_cap(conn: Connection, capped: Run) -> None:
    for name in "abc":
        capped("create", path=f"/memories/{name}.md", file_text="x")
    assert capped("rename", old_path="/memories/a.md", new_path="/memories/z/a.md") == (
        "Successfully renamed /memories/a.md to /memories/z/a.md"
    )


def test_caps_belong_to_the_agent_configuration(conn: Connection, capped: Run, run: Run) -> None:
    assert run("create", path="/memories/a.md", file_text="x" * 11) == (
        "File created successfully at: /memories/a.md"
    )


# ============================================================================== arguments


def test_arguments_as_a_json_string_are_read(conn: Connection, tool: MemoryTool) -> None:
    assert tool.execute('{"command": "create", "path": "/memories/j.md", "file_text": "a\\nb"}') == (
        "File created successfully at: /memories/j.md"
    )
    assert text_of(conn, "/memories/j.md") == "a\nb"


def test_arguments_as_a_dict_are_read(tool: MemoryTool) -> None:
    assert tool.execute({"command": "view", "path": "/memories"}) == listing(
        "/memories", "0\t/memories"
    )


@pytest.mark.parametrize("wrapper", ["input", "arguments", "args", "parameters", "tool_input"])
def test_arguments_wrapped_one_level_deep_are_read(tool: MemoryTool, wrapper: str) -> None:
    inner = {"command": "view", "path": "/memories"}
    expected = listing("/memories", "0\t/memories")
    assert tool.execute({wrapper: inner}) == expected
    assert tool.execute({wrapper: json.dumps(inner)}) == expected
    assert tool.execute(json.dumps({wrapper: inner})) == expected


def test_a_json_string_of_a_json_string_is_read(tool: MemoryTool) -> None:
    assert tool.execute(json.dumps(json.dumps({"command": "view", "path": "/memories"}))) == (
        listing("/memories", "0\t/memories")
    )


def test_command_in_another_case_with_spaces_is_read(tool: MemoryTool) -> None:
    assert tool.execute({"command": "  VIEW ", "path": "/memories"}) == listing(
        "/memories", "0\t/memories"
    )


def test_unused_null_parameters_of_strict_mode_are_ignored(conn: Connection, tool: MemoryTool) -> None:
    strict = {
        "command": "create", "path": "/memories/s.md", "file_text": "x", "view_range": None,
        "old_str": None, "new_str": None, "insert_line": None, "insert_text": None,
        "old_path": None, "new_path": None,
    }
    assert tool.execute(strict) == "File created successfully at: /memories/s.md"


EXAMPLE = '{"command": "view", "path": "/memories"}'
PATH_HINT = "a path string under /memories, e.g. '/memories/notes.md'"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "/memories"},
         ("Missing required parameter `command`: pass one of view, create, str_replace, insert, "
         f"delete, rename, e.g. {EXAMPLE}.")),
        ({"command": None, "path": "/memories"},
         ("Missing required parameter `command`: pass one of view, create, str_replace, insert, "
         f"delete, rename, e.g. {EXAMPLE}.")),
        ({"command": 5},
         ("Parameter `command` must be one of view, create, str_replace, insert, delete, rename, "
         "got number 5.")),
        ({"command": "frobnicate"},
         ("Unknown command 'frobnicate': use one of view, create, str_replace, insert, delete, "
         "rename.")),
        ({"command": "view"},
         f"Missing required parameter `path` for command `view`: pass {PATH_HINT}."),
        ({"command": "view", "path": None},
         f"Missing required parameter `path` for command `view`: pass {PATH_HINT}."),
        ({"command": "view", "path": 5}, "Parameter `path` must be a string, got number 5."),
        ({"command": "view", "path": ["/memories"]},
         "Parameter `path` must be a string, got array ['/memories']."),
        ({"command": "create", "path": "/memories/q.md"},
         ("Missing required parameter `file_text` for command `create`: pass the file's full "
         "text as a string ('' for empty).")),
        ({"command": "create", "path": "/memories/q.md", "file_text": 5},
         "Parameter `file_text` must be a string, got number 5."),
        ({"command": "create", "path": "/memories/q.md", "file_text": {"a": 1}},
         "Parameter `file_text` must be a string, got object {'a': 1}."),
        ({"command": "str_replace", "path": "/memories/q.md", "new_str": "x"},
         ("Missing required parameter `old_str` for command `str_replace`: pass the exact text "
         "to replace (it must occur once).")),
        ({"command": "str_replace", "path": "/memories/q.md", "old_str": "a", "new_str": 3},
         "Parameter `new_str` must be a string or null, got number 3."),
        ({"command": "insert", "path": "/memories/q.md", "insert_text": "x"},
         ("Missing required parameter `insert_line` for command `insert`: pass an integer line "
         "number (0 inserts at the top of the file).")),
        ({"command": "insert", "path": "/memories/q.md", "insert_line": "abc", "insert_text": "x"},
         ("Parameter `insert_line` must be an integer line number (0 inserts at the top of the "
         "file), got string 'abc'.")),
        ({"command": "insert", "path": "/memories/q.md", "insert_line": True, "insert_text": "x"},
         ("Parameter `insert_line` must be an integer line number (0 inserts at the top of the "
         "file), got boolean True.")),
        ({"command": "insert", "path": "/memories/q.md", "insert_line": 1.5, "insert_text": "x"},
         ("Parameter `insert_line` must be an integer line number (0 inserts at the top of the "
         "file), got number 1.5.")),
        ({"command": "insert", "path": "/memories/q.md", "insert_line": 0},
         ("Missing required parameter `insert_text` for command `insert`: pass the text to "
         "insert as a string.")),
        ({"command": "delete"},
         f"Missing required parameter `path` for command `delete`: pass {PATH_HINT}."),
        ({"command": "rename", "old_path": "/memories/q.md"},
         f"Missing required parameter `new_path` for command `rename`: pass {PATH_HINT}."),
        ({"command": "rename", "new_path": "/memories/q.md"},
         f"Missing required parameter `old_path` for command `rename`: pass {PATH_HINT}."),
        ("{not json",
         ("The arguments are not valid JSON (Expecting property name enclosed in double quotes "
         f"at line 1 column 2): send one JSON object such as {EXAMPLE}.")),
        ("", (f"The arguments are not valid JSON (the text is empty): send one JSON object such "
             f"as {EXAMPLE}.")),
        ("[1, 2]", f"The arguments must be a JSON object such as {EXAMPLE}, got array."),
        ("42", f"The arguments must be a JSON object such as {EXAMPLE}, got number."),
        ("null", f"The arguments must be a JSON object such as {EXAMPLE}, got null."),
        (None, f"The arguments must be a JSON object such as {EXAMPLE}, got null."),
        (["view"], f"The arguments must be a JSON object such as {EXAMPLE}, got array."),
    ],
)
def test_bad_arguments_get_a_clear_error_and_change_nothing(
    conn: Connection, tool: MemoryTool, arguments: Any, expected: str
) -> None:
    before = state(conn)
    text = tool.execute(arguments)
    assert text == ERROR + expected
    assert state(conn) == before
    assert_no_leak(text)


# ======================================================================= no SQL in any text


def _error_battery(run: Run) -> list[str]:
    run("create", path="/memories/a.md", file_text="tea, tea\n")
    run("create", path="/memories/d/b.md", file_text="x")
    calls: list[dict[str, Any]] = [
        {"command": "view", "path": "/memories/none"},
        {"command": "view", "path": "/memories/a.md", "view_range": [9, 9]},
        {"command": "create", "path": "/memories/a.md", "file_text": "x"},
        {"command": "create", "path": "/memories/d", "file_text": "x"},
        {"command": "create", "path": "/memories/a.md/x", "file_text": "x"},
        {"command": "create", "path": "/memories/n.md", "file_text": "a\x00b"},
        {"command": "create", "path": "/memories/s.md", "file_text": "a\ud800b"},
        {"command": "create", "path": "/memories/../x", "file_text": "x"},
        {"command": "create", "path": "/memories/" + "x" * 1001, "file_text": "x"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "tea", "new_str": "x"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "milk", "new_str": "x"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "", "new_str": "x"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 7, "insert_text": "x"},
        {"command": "delete", "path": "/memories"},
        {"command": "delete", "path": "/memories/zz"},
        {"command": "rename", "old_path": "/memories/zz", "new_path": "/memories/y"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/d"},
        {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/d/e"},
    ]
    return [run(**c) for c in calls]


def test_no_error_text_contains_sql_table_or_driver_words(conn: Connection, run: Run) -> None:
    texts = _error_battery(run)
    assert all(t.startswith(ERROR) for t in texts), texts
    for text in texts:
        assert_no_leak(text)


@pytest.mark.parametrize(
    ("driver_text", "expected"),
    [
        ("server closed the connection unexpectedly: SELECT dbm_files.body FROM dbm_files",
         "The memory store could not be reached; nothing was changed. Retry the command later."),
        ("deadlock detected ORA-00060 while INSERT INTO dbm_files",
         ("Another writer was writing this memory store at the same time, so the command on "
          "{path} could not complete; nothing was written. View it again and retry the command.")),
    ],
)
@pytest.mark.parametrize(
    "arguments",
    [
        {"command": "view", "path": "/memories/a.md"},
        {"command": "create", "path": "/memories/new.md", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"},
        {"command": "delete", "path": "/memories/a.md"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"},
    ],
)
def test_a_driver_failure_becomes_text_without_sql_or_driver_words(
    conn: Connection, engine: Engine, run: Run, driver_text: str, expected: str,
    arguments: dict[str, Any],
) -> None:
    run("create", path="/memories/a.md", file_text="a")
    conn.commit()
    dbapi_error = engine.dialect.loaded_dbapi.OperationalError

    def explode(_conn: Any, _cursor: Any, statement: str, *args: Any) -> None:
        if "dbm_files" in statement:
            raise dbapi_error(driver_text)

    before = state(conn)
    sa.event.listen(engine, "before_cursor_execute", explode)
    try:
        text = MemoryTool(conn, AGENT).execute(arguments)
    finally:
        sa.event.remove(engine, "before_cursor_execute", explode)
    path = arguments.get("path") or arguments["old_path"]
    assert text == ERROR + expected.format(path=path)
    assert_no_leak(text)
    assert state(conn) == before
    conn.commit()
    assert text_of(conn, "/memories/a.md") == "a"


def test_a_closed_connection_becomes_storage_text(engine: Engine) -> None:
    with engine.connect() as c:
        enable_for_agent(c, AGENT)
        c.commit()
        tool = MemoryTool(c, AGENT)
    text = tool.execute({"command": "view", "path": "/memories"})
    assert text == (
        "Error: The memory store could not be reached; nothing was changed. Retry the command "
        "later."
    )


def test_the_tool_never_raises_on_unexpected_input_objects(tool: MemoryTool) -> None:
    class Hostile:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError("boom SELECT dbm_files")

    text = tool.execute(Hostile())
    assert text.startswith(ERROR)
    assert_no_leak(text)


def test_file_rows_keep_sizes_in_characters(conn: Connection, run: Run) -> None:
    run("create", path="/memories/u.md", file_text="€😀é")
    size = conn.execute(sa.select(files_table.c.char_count)).scalar_one()
    assert size == 3
