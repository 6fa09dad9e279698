"""Unit tests of the MEMORY tool's pure text parts: messages, rendering, edits, arguments, schema.

No database: these pin the texts a model reads and the arithmetic of str_replace, insert and
view_range (cases C2-C5 of shared/cases at the text level).
"""

from __future__ import annotations

import dataclasses
import json
import time
from types import SimpleNamespace

import pytest

from dbmemory.tool import args as args_module
from dbmemory.tool import messages, storage_messages
from dbmemory.tool.args import (
    Create,
    Delete,
    Insert,
    Rename,
    StrReplace,
    View,
    coerce_view_range,
    parse_arguments,
)
from dbmemory.tool.edits import apply_insert, apply_str_replace, line_count
from dbmemory.tool.messages import ERROR_MARKER, ToolInputError
from dbmemory.tool.render import (
    clip_output,
    format_size,
    render_file,
    render_listing,
    split_lines,
)
from dbmemory.tool.schema import tool_schema

P = "/memories/p.md"
LISTING_HEADER = (
    "Here're the files and directories up to 2 levels deep in {}, "
    "excluding hidden items and node_modules:"
)


def failure(function, *arguments) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ToolInputError) as info:
        function(*arguments)
    return str(info.value)


# ================================================================================ messages


def test_error_marker_is_error_colon_space() -> None:
    assert ERROR_MARKER == "Error: "


def test_error_text_prefixes_the_marker_once() -> None:
    assert messages.error_text("bad") == "Error: bad"
    assert messages.error_text("Error: bad") == "Error: bad"


def test_is_error_text_tells_failures_from_successes() -> None:
    assert messages.is_error_text("Error: x")
    assert not messages.is_error_text(messages.file_created(P))


def test_tool_input_error_carries_message_and_default_code() -> None:
    error = ToolInputError("m")
    assert (error.message, error.code, str(error)) == ("m", "invalid_argument", "m")


def test_path_not_found_follows_the_reference_wording_and_adds_a_remedy() -> None:
    assert messages.path_not_found("/memories/x.md") == (
        "The path /memories/x.md does not exist. Please provide a valid path: "
        "view /memories to list the existing files."
    )


def test_not_a_file_names_the_command_and_the_remedy() -> None:
    assert messages.not_a_file("/memories/a", "str_replace") == (
        "The path /memories/a is a directory, not a file: str_replace works on one file. "
        "View /memories/a to list its files."
    )


def test_file_exists_says_how_to_change_the_file() -> None:
    assert messages.file_exists(P) == (
        "File /memories/p.md already exists: use str_replace or insert to change it, "
        "or delete it first to write it anew."
    )


def test_directory_exists_counts_files_and_suggests_a_name() -> None:
    assert messages.directory_exists("/memories/a", 1) == (
        "Cannot create /memories/a: it is a directory holding 1 file. "
        "Choose a file name, e.g. /memories/a/notes.md."
    )
    assert "holding 3 files" in messages.directory_exists("/memories/a", 3)


def test_parent_is_file_names_the_blocking_file() -> None:
    assert messages.parent_is_file("/memories/a.md/b.md", "/memories/a.md") == (
        "Cannot write /memories/a.md/b.md: /memories/a.md is a file, not a directory. "
        "Choose a path that is not below an existing file."
    )


def test_root_cannot_be_deleted_or_renamed() -> None:
    assert messages.cannot_delete_root() == (
        "Cannot delete the /memories directory itself: delete the files or directories "
        "inside it instead."
    )
    assert messages.cannot_rename_root() == (
        "Cannot rename the /memories directory itself: rename the files or directories "
        "inside it instead."
    )


def test_rename_failures_have_distinct_texts() -> None:
    assert messages.rename_destination_exists("/memories/b") == (
        "The destination /memories/b already exists: choose another new_path, "
        "or delete the destination first."
    )
    assert messages.rename_into_itself("/memories/a", "/memories/a/b") == (
        "Cannot move /memories/a into itself (/memories/a/b): choose a new_path outside /memories/a."
    )
    assert messages.rename_same_path("/memories/a") == (
        "old_path and new_path are both /memories/a: pass a different new_path."
    )


def test_cap_messages_give_value_limit_and_remedy() -> None:
    assert messages.cap_exceeded("max_file_chars", P, 100_000, 100_001) == (
        "Cannot write /memories/p.md: it would hold 100,001 characters; the limit is "
        "100,000 characters per file. Write less text or split it into several files."
    )
    assert messages.cap_exceeded("max_files", P, 1000, 1001) == (
        "Cannot create /memories/p.md: the memory store already holds 1,000 files, the most it "
        "may hold. Delete or merge files you no longer need, then retry."
    )
    assert messages.cap_exceeded("max_store_chars", P, 500_000, 500_010) == (
        "Cannot write /memories/p.md: the memory store would hold 500,010 characters; the limit "
        "is 500,000 characters in all. Delete or shorten files you no longer need, then retry."
    )


def test_conflict_storage_and_internal_texts_never_mention_sql() -> None:
    assert storage_messages.conflict(P) == (
        "/memories/p.md was changed by another writer at the same time; nothing was written. "
        "View it again and retry the command."
    )
    assert storage_messages.store_contended(P) == (
        "Another writer was writing this memory store at the same time, so the command on "
        "/memories/p.md could not complete; nothing was written. View it again and retry the "
        "command."
    )
    assert storage_messages.storage_unavailable() == (
        "The memory store could not be reached; nothing was changed. Retry the command later."
    )
    assert storage_messages.internal_error() == (
        "The memory tool failed unexpectedly; nothing was changed. Retry the command, "
        "or continue without memory."
    )


def test_success_texts_follow_the_reference_wording() -> None:
    assert messages.file_created(P) == "File created successfully at: /memories/p.md"
    assert messages.deleted(P) == "Successfully deleted /memories/p.md"
    assert messages.deleted("/memories/a", 2) == "Successfully deleted /memories/a (2 files)"
    assert messages.renamed(P, "/memories/q.md") == "Successfully renamed /memories/p.md to /memories/q.md"
    assert messages.renamed("/memories/a", "/memories/b", 1) == (
        "Successfully renamed /memories/a to /memories/b (1 file)"
    )


def test_no_message_names_a_table_or_sql() -> None:
    texts = [
        messages.path_not_found(P),
        messages.cap_exceeded("max_files", P, 1, 2),
        storage_messages.conflict(P),
        storage_messages.store_contended(P),
        storage_messages.storage_unavailable(),
        storage_messages.internal_error(),
        messages.missing_command(),
        messages.invalid_json("x"),
    ]
    for text in texts:
        for word in ("dbm_", "SELECT", "INSERT INTO", "UPDATE ", "ORA-", "sqlite", "psycopg"):
            assert word not in text


def test_show_text_clips_a_huge_value() -> None:
    assert messages.show_text("tea") == "`tea`"
    shown = messages.show_text("x" * 10_000_000)
    assert shown == "`" + "x" * 200 + "`... (10,000,000 characters)"


# ============================================================================ format_size


@pytest.mark.parametrize(
    ("chars", "text"),
    [
        (0, "0"),
        (1, "1"),
        (512, "512"),
        (1023, "1023"),
        (1024, "1.0K"),
        (1536, "1.5K"),
        (5632, "5.5K"),
        (100_000, "97.7K"),
        (1_048_575, "1.0M"),
        (1_048_576, "1.0M"),
        (1_258_291, "1.2M"),
        (5 * 1024**3, "5.0G"),
        (3 * 1024**4, "3.0T"),
    ],
)
def test_format_size_is_du_style_on_characters(chars: int, text: str) -> None:
    assert format_size(chars) == text


def test_format_size_refuses_a_negative_size() -> None:
    with pytest.raises(ValueError):
        format_size(-1)


# ========================================================================= render_listing


def test_empty_root_is_a_listing_not_an_error() -> None:
    assert render_listing("/memories", []) == LISTING_HEADER.format("/memories") + "\n0\t/memories"


def test_listing_shows_total_then_entries_two_levels_deep_sorted_by_path() -> None:
    entries = [
        ("/memories/b.md", 512),
        ("/memories/a/x.md", 1000),
        ("/memories/a/b/c/deep.md", 5000),
        ("/memories/a.md", 10),
        ("/memories/a/b/y.md", 24),
    ]
    assert render_listing("/memories", entries) == "\n".join(
        [
            LISTING_HEADER.format("/memories"),
            "6.4K\t/memories",
            "5.9K\t/memories/a/",
            "4.9K\t/memories/a/b/",
            "1000\t/memories/a/x.md",
            "10\t/memories/a.md",
            "512\t/memories/b.md",
        ]
    )


def test_listing_of_a_subdirectory_lists_paths_below_it() -> None:
    entries = [("/memories/a/x.md", 3), ("/memories/a/s/t/u.md", 4)]
    assert render_listing("/memories/a", entries) == "\n".join(
        [
            LISTING_HEADER.format("/memories/a"),
            "7\t/memories/a",
            "4\t/memories/a/s/",
            "4\t/memories/a/s/t/",
            "3\t/memories/a/x.md",
        ]
    )


def test_listing_excludes_hidden_items_and_node_modules_with_everything_below_them() -> None:
    entries = [
        ("/memories/.secret.md", 1),
        ("/memories/.cache/x.md", 2),
        ("/memories/node_modules/pkg/index.js", 4),
        ("/memories/a/.hidden.md", 8),
        ("/memories/a/node_modules", 16),
        ("/memories/notes.md", 32),
    ]
    assert render_listing("/memories", entries) == "\n".join(
        [
            LISTING_HEADER.format("/memories"),
            "63\t/memories",
            "24\t/memories/a/",
            "32\t/memories/notes.md",
        ]
    )


def test_listing_of_a_hidden_directory_itself_shows_its_entries() -> None:
    entries = [("/memories/.config/a.md", 5)]
    assert render_listing("/memories/.config", entries).splitlines()[1:] == [
        "5\t/memories/.config",
        "5\t/memories/.config/a.md",
    ]


def test_listing_shows_an_empty_file_with_size_zero() -> None:
    assert render_listing("/memories", [("/memories/empty.md", 0)]).splitlines()[1:] == [
        "0\t/memories",
        "0\t/memories/empty.md",
    ]


def test_listing_accepts_entries_in_any_order() -> None:
    entries = [("/memories/z.md", 1), ("/memories/a.md", 2), ("/memories/m/n.md", 3)]
    assert render_listing("/memories", entries) == render_listing("/memories", list(reversed(entries)))


@pytest.mark.parametrize("path", ["/memories/ab/x.md", "/memories/a", "/memories/b.md"])
def test_listing_refuses_an_entry_outside_the_directory(path: str) -> None:
    with pytest.raises(ValueError):
        render_listing("/memories/a", [(path, 1)])


def test_long_listing_is_clipped_after_a_whole_entry_with_a_note() -> None:
    entries = [(f"/memories/file-{index:04d}.md", index) for index in range(1000)]
    text = render_listing("/memories", entries, max_chars=2000)
    assert len(text) <= 2000
    lines = text.splitlines()
    shown = len(lines) - 3
    assert lines[-1] == (
        f"(listing clipped at 2,000 characters: showed {shown} entries; {1000 - shown} of 1,000 "
        "files not listed; view a subdirectory to see the rest)"
    )
    assert lines[-2] == f"{format_size(shown - 1)}\t/memories/file-{shown - 1:04d}.md"


def test_listing_without_limit_is_never_clipped() -> None:
    entries = [(f"/memories/file-{index:04d}.md", 1) for index in range(1000)]
    assert len(render_listing("/memories", entries, max_chars=None).splitlines()) == 1002


# ============================================================================ render_file


def test_file_view_matches_the_reference_format() -> None:
    assert render_file("/memories/view_test.txt", "Line 1\nLine 2\nLine 3") == (
        "Here's the content of /memories/view_test.txt with line numbers:\n"
        "     1\tLine 1\n     2\tLine 2\n     3\tLine 3"
    )


def test_file_ending_in_newline_shows_no_empty_last_line() -> None:
    assert render_file(P, "a\nb\n") == (
        "Here's the content of /memories/p.md with line numbers:\n     1\ta\n     2\tb"
    )


def test_file_of_one_newline_shows_one_empty_line() -> None:
    assert render_file(P, "\n").splitlines()[1:] == ["     1\t"]


def test_view_range_matches_the_reference_example() -> None:
    text = "Line 1\nLine 2\nLine 3\nLine 4\nLine 5"
    assert render_file("/memories/range_test.txt", text, (2, 4)) == (
        "Here's the content of /memories/range_test.txt with line numbers:\n"
        "     2\tLine 2\n     3\tLine 3\n     4\tLine 4"
    )


FIVE = "l1\nl2\nl3\nl4\nl5"


def test_c3_view_range_one_to_minus_one_shows_five_numbered_lines() -> None:
    assert render_file(P, FIVE, (1, -1)) == render_file(P, FIVE) == (
        "Here's the content of /memories/p.md with line numbers:\n"
        "     1\tl1\n     2\tl2\n     3\tl3\n     4\tl4\n     5\tl5"
    )


def test_c3_view_range_three_to_minus_one_numbers_from_three() -> None:
    assert render_file(P, FIVE, (3, -1)) == (
        "Here's the content of /memories/p.md with line numbers:\n"
        "     3\tl3\n     4\tl4\n     5\tl5"
    )


def test_c3_view_range_past_the_end_is_clamped_with_a_note() -> None:
    assert render_file(P, FIVE, (4, 99)) == (
        "Here's the content of /memories/p.md with line numbers:\n"
        "     4\tl4\n     5\tl5\n"
        "(note: view_range end 99 is past the last line, 5; showed lines 4-5)"
    )


def test_view_range_of_one_line_shows_that_line() -> None:
    assert render_file(P, FIVE, (5, 5)).splitlines()[1:] == ["     5\tl5"]


def test_c3_view_range_ending_before_its_start_is_an_error_stating_the_valid_range() -> None:
    assert failure(render_file, P, FIVE, (4, 2)) == (
        "Invalid `view_range` parameter: [4, 2]. /memories/p.md has 5 lines: use [start, end] "
        "with 1 <= start <= 5 and start <= end, or end = -1 to read to the last line."
    )


def test_c3_view_range_starting_past_the_last_line_is_an_error() -> None:
    assert failure(render_file, P, FIVE, (6, -1)) == (
        "Invalid `view_range` parameter: [6, -1]. /memories/p.md has 5 lines: use [start, end] "
        "with 1 <= start <= 5 and start <= end, or end = -1 to read to the last line."
    )


@pytest.mark.parametrize("view_range", [(0, 0), (0, 3), (-1, -1), (2, -2), (3, 0)])
def test_view_range_with_start_below_one_or_bad_end_is_an_error(view_range: tuple[int, int]) -> None:
    assert failure(render_file, P, FIVE, view_range).startswith(
        f"Invalid `view_range` parameter: [{view_range[0]}, {view_range[1]}]. /memories/p.md has 5 lines"
    )


def test_view_range_message_says_line_in_the_singular_for_one_line() -> None:
    assert "/memories/p.md has 1 line: use [start, end] with 1 <= start <= 1" in failure(
        render_file, P, "only", (2, 2)
    )


def test_c4_crlf_file_shows_three_lines_with_carriage_returns_kept() -> None:
    assert render_file("/memories/w.md", "a\r\n\tb\r\nc\r\n") == (
        "Here's the content of /memories/w.md with line numbers:\n"
        "     1\ta\r\n     2\t\tb\r\n     3\tc\r"
    )
    assert len(split_lines("a\r\n\tb\r\nc\r\n")) == 3


def test_c5_empty_file_renders_as_an_existing_empty_file() -> None:
    assert render_file("/memories/empty.md", "") == (
        "Here's the content of /memories/empty.md with line numbers:\n"
        "(the file /memories/empty.md exists and is empty: 0 lines, 0 characters)"
    )


def test_view_range_on_an_empty_file_is_an_error_saying_it_is_empty() -> None:
    assert failure(render_file, "/memories/empty.md", "", (1, -1)) == (
        "Invalid `view_range` parameter: [1, -1]. /memories/empty.md is empty (0 lines): "
        "view it without view_range."
    )


def test_line_numbers_past_six_digits_stay_aligned_by_a_tab() -> None:
    text = "x\n" * 1_000_000 + "last"
    assert render_file(P, text, (1_000_001, -1), max_chars=None).splitlines()[1] == "1000001\tlast"


def test_long_file_view_is_clipped_at_a_line_end_with_the_next_view_range() -> None:
    text = "\n".join(f"line {index} " + "x" * 40 for index in range(1, 3001))
    view = render_file(P, text)
    assert len(view) <= 16_000
    lines = view.splitlines()
    last_shown = int(lines[-2].split("\t")[0])
    assert lines[-2] == f"{last_shown:>6}\tline {last_shown} " + "x" * 40
    assert lines[-1] == (
        f"(output clipped at 16,000 characters: showed lines 1-{last_shown} of 3,000; "
        f"view the rest with view_range [{last_shown + 1}, -1])"
    )


def test_clipped_view_range_names_the_lines_it_showed() -> None:
    text = "\n".join("y" * 50 for _ in range(100))
    lines = render_file(P, text, (10, -1), max_chars=600).splitlines()
    assert lines[1].startswith("    10\t")
    assert lines[-1].startswith("(output clipped at 600 characters: showed lines 10-")


def test_single_line_longer_than_the_limit_is_cut_inside_with_a_note() -> None:
    view = render_file(P, "z" * 50_000 + "\nnext", max_chars=1000)
    lines = view.splitlines()
    assert len(view) <= 1000
    assert lines[1].startswith("     1\tzzz")
    assert lines[-1] == (
        "(output clipped at 1,000 characters inside line 1, which holds 50,000 characters; "
        "the rest of that line cannot be shown; view the following lines with view_range [2, -1])"
    )


def test_file_view_without_limit_is_never_clipped() -> None:
    text = "x" * 100_000
    assert render_file(P, text, max_chars=None).endswith("x" * 100_000)


# ============================================================================ clip_output


def test_clip_output_leaves_short_text_unchanged() -> None:
    assert clip_output("a\nb", 16_000) == "a\nb"


def test_clip_output_cuts_at_a_line_end_and_appends_the_view_range_hint() -> None:
    text = "\n".join(f"{index:04d}" + "-" * 95 for index in range(1000))
    clipped = clip_output(text, 1000)
    assert len(clipped) <= 1000
    body, note = clipped.rsplit("\n", 1)
    assert note == (
        "(output clipped at 1,000 characters; view a file in parts with view_range "
        "[start, end], or view a subdirectory)"
    )
    assert all(len(line) == 99 for line in body.splitlines())
    assert text.startswith(body + "\n")


def test_clip_output_uses_a_given_note() -> None:
    assert clip_output("aaaa\nbbbb\ncccc", 12, note="(more)") == "aaaa\n(more)"


def test_clip_output_cuts_inside_a_single_long_line() -> None:
    assert clip_output("a" * 100, 20, note="(more)") == "a" * 13 + "\n(more)"


# ============================================================================ str_replace

PROFILE = "## Notes\n- (none yet)\n"


def test_c2a_multi_line_old_str_is_replaced() -> None:
    new_text, message = apply_str_replace(
        "/memories/profile.md", PROFILE, "## Notes\n- (none yet)", "## Notes\n- prefers tea"
    )
    assert new_text == "## Notes\n- prefers tea\n"
    assert message == (
        "The memory file /memories/profile.md has been edited. Here is the snippet showing the "
        "change (with line numbers):\n     1\t## Notes\n     2\t- prefers tea"
    )


def test_c2b_omitted_new_str_deletes_the_match_and_never_writes_none() -> None:
    new_text, _ = apply_str_replace("/memories/profile.md", PROFILE, "- (none yet)", None)
    assert new_text == "## Notes\n\n"
    assert "None" not in new_text


def test_c2b_omitted_new_str_on_the_whole_match_leaves_the_final_newline() -> None:
    new_text, _ = apply_str_replace("/memories/profile.md", PROFILE, "## Notes\n- (none yet)", None)
    assert new_text == "\n"


def test_c2c_two_matches_is_an_error_naming_the_line() -> None:
    assert failure(apply_str_replace, P, "tea, tea\n", "tea", "x") == (
        "No replacement was performed. Multiple occurrences of old_str `tea` in lines: 1 "
        "(2 occurrences in /memories/p.md). Please ensure it is unique: include more of the "
        "surrounding text in old_str so that it matches exactly once."
    )


def test_c2c_empty_old_str_is_its_own_error() -> None:
    assert failure(apply_str_replace, P, "tea, tea\n", "", "x") == (
        "No replacement was performed: old_str is empty. Pass the exact text to replace; it "
        "must appear exactly once in /memories/p.md. To add text without replacing any, use insert."
    )


def test_c2c_absent_old_str_is_its_own_error() -> None:
    assert failure(apply_str_replace, P, "tea, tea\n", "milk", "x") == (
        "No replacement was performed, old_str `milk` did not appear verbatim in /memories/p.md. "
        "View the file and copy the text exactly, including spaces, tabs and line breaks."
    )


def test_c2c_three_failures_are_three_different_texts() -> None:
    texts = {failure(apply_str_replace, P, "tea, tea\n", old, "x") for old in ("tea", "", "milk")}
    assert len(texts) == 3


def test_several_matches_on_several_lines_are_listed_like_the_reference() -> None:
    assert "in lines: 1, 3 (2 occurrences" in failure(
        apply_str_replace, P, "Hello\nMiddle\nHello", "Hello", "Hi"
    )


def test_overlapping_matches_count_as_several() -> None:
    assert "in lines: 1 (2 occurrences" in failure(apply_str_replace, P, "aaa", "aa", "b")


def test_more_than_a_hundred_matches_are_reported_without_counting_all() -> None:
    message = failure(apply_str_replace, P, "x\n" * 5000, "x", "y")
    assert "(more than 100 occurrences in /memories/p.md)" in message
    assert "in lines: 1, 2, 3," in message and ", 100, ... (" in message


def test_reference_example_snippet_shows_two_lines_of_context() -> None:
    new_text, message = apply_str_replace(
        "/memories/replace_test.txt", "Line 1\nOld Text\nLine 3", "Old Text", "New Text"
    )
    assert new_text == "Line 1\nNew Text\nLine 3"
    assert message == (
        "The memory file /memories/replace_test.txt has been edited. Here is the snippet showing "
        "the change (with line numbers):\n     1\tLine 1\n     2\tNew Text\n     3\tLine 3"
    )


def test_snippet_covers_every_line_of_a_multi_line_new_str_plus_context() -> None:
    text = "\n".join(f"l{index}" for index in range(1, 11)) + "\n"
    _, message = apply_str_replace(P, text, "l5\n", "A\nB\nC\n")
    assert message.splitlines()[1:] == [
        "     3\tl3",
        "     4\tl4",
        "     5\tA",
        "     6\tB",
        "     7\tC",
        "     8\tl6",
        "     9\tl7",
    ]


def test_snippet_of_a_very_long_new_str_is_clipped_with_a_view_range() -> None:
    new_text, message = apply_str_replace(P, "a\nb\n", "b", "\n".join(["n"] * 100))
    lines = message.splitlines()
    assert len(lines) == 42
    assert lines[-1] == "(snippet clipped; view /memories/p.md with view_range [41, 101] to see the rest)"
    assert line_count(new_text) == 101


def test_c4_str_replace_keeps_crlf_and_tabs_outside_the_match() -> None:
    new_text, message = apply_str_replace("/memories/w.md", "a\r\n\tb\r\nc\r\n", "\tb", "\tB")
    assert new_text == "a\r\n\tB\r\nc\r\n"
    assert message.split("\n")[1:] == ["     1\ta\r", "     2\t\tB\r", "     3\tc\r"]


def test_old_str_with_lf_in_a_crlf_file_gets_a_line_end_hint() -> None:
    assert failure(apply_str_replace, "/memories/w.md", "a\r\n\tb\r\nc\r\n", "a\n\tb", "x") == (
        "No replacement was performed, old_str `a\n\tb` did not appear verbatim in /memories/w.md. "
        "The file ends its lines with \\r\\n (Windows style): write every line break in old_str "
        "as \\r\\n."
    )


def test_file_without_final_newline_keeps_it_missing() -> None:
    assert apply_str_replace(P, "a\nb", "b", "c")[0] == "a\nc"


def test_empty_new_str_deletes_like_an_omitted_one() -> None:
    assert apply_str_replace(P, "a b c", " b", "")[0] == apply_str_replace(P, "a b c", " b", None)[0] == "a c"


def test_c5_replacing_all_text_with_nothing_leaves_an_existing_empty_file() -> None:
    new_text, message = apply_str_replace("/memories/empty.md", "x", "x", "")
    assert new_text == ""
    assert message == (
        "The memory file /memories/empty.md has been edited. It is now empty (0 characters) "
        "and still exists."
    )


def test_str_replace_on_an_empty_file_is_a_not_found_error() -> None:
    assert "did not appear verbatim in /memories/empty.md" in failure(
        apply_str_replace, "/memories/empty.md", "", "x", "y"
    )


def test_str_replace_with_multi_byte_text_is_exact() -> None:
    assert apply_str_replace(P, "€🍕\ncafé\n", "🍕", "🍣")[0] == "€🍣\ncafé\n"


def test_deleting_the_last_line_shows_a_snippet_of_remaining_lines() -> None:
    new_text, message = apply_str_replace(P, "a\nb\nc", "\nc", None)
    assert new_text == "a\nb"
    assert message.splitlines()[1:] == ["     1\ta", "     2\tb"]


def test_a_huge_absent_old_str_makes_a_short_message() -> None:
    assert len(failure(apply_str_replace, P, "abc", "q" * 1_000_000, "x")) < 500


# ================================================================================= insert

ABC = "a\nb\nc\n"


def test_c3_insert_at_zero_puts_text_at_the_top() -> None:
    assert apply_insert(P, ABC, 0, "TOP")[0] == "TOP\na\nb\nc\n"


def test_insert_at_line_count_appends_without_blank_line() -> None:
    assert apply_insert(P, ABC, 3, "END")[0] == "a\nb\nc\nEND\n"


def test_insert_text_ending_in_newline_is_not_doubled() -> None:
    assert apply_insert(P, ABC, 3, "END\n")[0] == "a\nb\nc\nEND\n"


@pytest.mark.parametrize("line", [4, -1, 100])
def test_c3_insert_outside_zero_to_line_count_is_an_error_giving_the_range(line: int) -> None:
    assert failure(apply_insert, P, ABC, line, "x") == (
        f"Invalid `insert_line` parameter: {line}. It should be within the range [0, 3]: "
        "0 inserts before the first line, 3 after the last line of /memories/p.md (3 lines)."
    )


def test_c5_insert_into_an_empty_file_gives_exactly_the_text() -> None:
    assert apply_insert("/memories/empty.md", "", 0, "x")[0] == "x"


def test_c3_insert_at_one_into_an_empty_file_is_an_error() -> None:
    assert failure(apply_insert, "/memories/empty.md", "", 1, "x") == (
        "Invalid `insert_line` parameter: 1. It should be within the range [0, 0]: "
        "/memories/empty.md is empty, so insert at line 0."
    )


def test_insert_after_a_last_line_without_newline_adds_one_separator() -> None:
    assert apply_insert(P, "l1\nl2", 2, "x")[0] == "l1\nl2\nx"


def test_insert_in_the_middle_of_a_file_without_final_newline_keeps_it_missing() -> None:
    assert apply_insert(P, "Line 1\nLine 2", 1, "Inserted Line")[0] == "Line 1\nInserted Line\nLine 2"


def test_insert_at_the_top_of_a_file_without_final_newline() -> None:
    assert apply_insert(P, "Line 1\nLine 2", 0, "First Line")[0] == "First Line\nLine 1\nLine 2"


def test_insert_into_a_crlf_file_ends_the_new_line_with_crlf_unlike_the_reference() -> None:
    assert apply_insert(P, "line1\r\nline2\r\nline3\r\n", 1, "Inserted")[0] == (
        "line1\r\nInserted\r\nline2\r\nline3\r\n"
    )


def test_insert_text_ending_in_crlf_is_not_doubled() -> None:
    assert apply_insert(P, "a\r\nb\r\n", 1, "x\r\n")[0] == "a\r\nx\r\nb\r\n"


def test_insert_of_several_lines_keeps_them_in_order() -> None:
    assert apply_insert(P, ABC, 1, "X\nY")[0] == "a\nX\nY\nb\nc\n"


def test_insert_of_empty_text_adds_one_empty_line() -> None:
    assert apply_insert(P, ABC, 1, "")[0] == "a\n\nb\nc\n"


def test_insert_keeps_a_deliberate_blank_line_at_the_end_of_the_text() -> None:
    assert apply_insert(P, ABC, 1, "X\n\n")[0] == "a\nX\n\nb\nc\n"


def test_insert_snippet_shows_the_new_lines_with_context() -> None:
    _, message = apply_insert(P, ABC, 1, "X\nY")
    assert message == (
        "The memory file /memories/p.md has been edited. Here is the snippet showing the change "
        "(with line numbers):\n     1\ta\n     2\tX\n     3\tY\n     4\tb\n     5\tc"
    )


def test_c5_insert_snippet_into_an_empty_file() -> None:
    assert apply_insert("/memories/empty.md", "", 0, "x")[1].splitlines()[1:] == ["     1\tx"]


@pytest.mark.parametrize(
    ("text", "count"),
    [("", 0), ("a", 1), ("a\n", 1), ("\n", 1), ("\n\n", 2), ("a\nb", 2), (ABC, 3), ("a\r\nb\r\n", 2)],
)
def test_line_count_agrees_with_view(text: str, count: int) -> None:
    assert line_count(text) == count == len(split_lines(text))


# ============================================================================== arguments


def test_dict_arguments_are_parsed_with_a_canonical_path() -> None:
    assert parse_arguments({"command": "view", "path": "/memories//a/"}) == View("/memories/a")


def test_json_string_arguments_are_parsed() -> None:
    raw = json.dumps({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    assert parse_arguments(raw) == Create("/memories/a.md", "x")


def test_bytes_and_double_encoded_json_are_parsed() -> None:
    raw = json.dumps({"command": "delete", "path": "/memories/a.md"})
    assert parse_arguments(raw.encode()) == Delete("/memories/a.md")
    assert parse_arguments(json.dumps(raw)) == Delete("/memories/a.md")


@pytest.mark.parametrize(
    "wrapped",
    [
        {"input": {"command": "delete", "path": "/memories/a.md"}},
        {"arguments": '{"command": "delete", "path": "/memories/a.md"}'},
        {"args": {"command": "delete", "path": "/memories/a.md"}},
        {"parameters": {"command": "delete", "path": "/memories/a.md"}},
        {"name": "memory", "arguments": '{"command": "delete", "path": "/memories/a.md"}'},
        {"memory": {"command": "delete", "path": "/memories/a.md"}},
        json.dumps({"input": {"command": "delete", "path": "/memories/a.md"}}),
    ],
)
def test_arguments_wrapped_one_level_deep_are_unwrapped(wrapped: object) -> None:
    assert parse_arguments(wrapped) == Delete("/memories/a.md")


def test_wrapper_with_invalid_json_reports_the_json_error() -> None:
    assert failure(parse_arguments, {"arguments": "{oops"}).startswith("The arguments are not valid JSON")


def test_objects_with_model_dump_or_dict_are_parsed() -> None:
    class Model:
        def model_dump(self) -> dict[str, object]:
            return {"command": "delete", "path": "/memories/a.md"}

    @dataclasses.dataclass
    class Plain:
        command: str
        path: str

    assert parse_arguments(Model()) == Delete("/memories/a.md")
    assert parse_arguments(SimpleNamespace(command="delete", path="/memories/a.md")) == Delete("/memories/a.md")
    assert parse_arguments(Plain("delete", "/memories/a.md")) == Delete("/memories/a.md")


def test_model_dump_that_fails_is_an_input_error() -> None:
    class Broken:
        def model_dump(self) -> dict[str, object]:
            raise RuntimeError("boom")

    assert failure(parse_arguments, Broken()).startswith("The arguments must be a JSON object")


def test_openai_strict_mode_nulls_and_invented_values_are_ignored() -> None:
    everything = {
        "command": "view",
        "path": "/memories",
        "view_range": [0, 0],
        "file_text": None,
        "old_str": "",
        "new_str": None,
        "insert_line": -5,
        "insert_text": None,
        "old_path": None,
        "new_path": "",
    }
    assert parse_arguments(everything) == View("/memories", [0, 0])
    assert parse_arguments({**everything, "command": "create", "file_text": "x"}) == Create("/memories", "x")
    assert parse_arguments({**everything, "command": "delete"}) == Delete("/memories")


def test_view_range_is_passed_through_raw_even_when_malformed() -> None:
    assert parse_arguments({"command": "view", "path": "/memories", "view_range": "nonsense"}) == View(
        "/memories", "nonsense"
    )


def test_command_name_is_matched_case_insensitively_without_spaces() -> None:
    assert parse_arguments({"command": " View ", "path": "/memories"}) == View("/memories")


def test_commands_carry_their_name() -> None:
    assert [cls.command for cls in (View, Create, StrReplace, Insert, Delete, Rename)] == list(
        messages.COMMANDS
    )


def test_commands_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        View("/memories").path = "/memories/x"  # type: ignore[misc]


def test_str_replace_with_omitted_or_null_new_str_has_none() -> None:
    expected = StrReplace("/memories/a.md", "x", None)
    assert parse_arguments({"command": "str_replace", "path": "/memories/a.md", "old_str": "x"}) == expected
    assert (
        parse_arguments({"command": "str_replace", "path": "/memories/a.md", "old_str": "x", "new_str": None})
        == expected
    )


def test_str_replace_passes_an_empty_old_str_on_for_the_edit_to_report() -> None:
    assert parse_arguments({"command": "str_replace", "path": P, "old_str": "", "new_str": "y"}) == StrReplace(
        P, "", "y"
    )


@pytest.mark.parametrize(("value", "number"), [(3, 3), ("3", 3), (" 3 ", 3), (3.0, 3), ("-1", -1), (0, 0)])
def test_insert_line_accepts_integers_digit_strings_and_integral_floats(value: object, number: int) -> None:
    parsed = parse_arguments({"command": "insert", "path": P, "insert_line": value, "insert_text": "x"})
    assert parsed == Insert(P, number, "x")


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "boolean True"), (3.5, "number 3.5"), ("three", "string 'three'"), ([1], "array [1]")],
)
def test_insert_line_that_is_not_an_integer_is_refused(value: object, shown: str) -> None:
    assert failure(parse_arguments, {"command": "insert", "path": P, "insert_line": value, "insert_text": "x"}) == (
        f"Parameter `insert_line` must be an integer line number (0 inserts at the top of the file), "
        f"got {shown}."
    )


def test_insert_accepts_new_str_when_insert_text_is_absent() -> None:
    parsed = parse_arguments({"command": "insert", "path": P, "insert_line": 0, "insert_text": None, "new_str": "x"})
    assert parsed == Insert(P, 0, "x")


def test_rename_accepts_path_instead_of_old_path() -> None:
    parsed = parse_arguments({"command": "rename", "path": "/memories/a", "new_path": "/memories/b"})
    assert parsed == Rename("/memories/a", "/memories/b")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"command": "view"},
            "Missing required parameter `path` for command `view`: pass a path string under "
            "/memories, e.g. '/memories/notes.md'.",
        ),
        (
            {"command": "create", "path": P},
            "Missing required parameter `file_text` for command `create`: pass the file's full "
            "text as a string ('' for empty).",
        ),
        (
            {"command": "str_replace", "path": P, "new_str": "x"},
            "Missing required parameter `old_str` for command `str_replace`: pass the exact text "
            "to replace (it must occur once).",
        ),
        (
            {"command": "insert", "path": P, "insert_text": "x"},
            "Missing required parameter `insert_line` for command `insert`: pass an integer line "
            "number (0 inserts at the top of the file).",
        ),
        (
            {"command": "insert", "path": P, "insert_line": 0},
            "Missing required parameter `insert_text` for command `insert`: pass the text to "
            "insert as a string.",
        ),
        (
            {"command": "rename", "old_path": P},
            "Missing required parameter `new_path` for command `rename`: pass a path string under "
            "/memories, e.g. '/memories/notes.md'.",
        ),
        (
            {"command": "rename", "new_path": P},
            "Missing required parameter `old_path` for command `rename`: pass a path string under "
            "/memories, e.g. '/memories/notes.md'.",
        ),
    ],
)
def test_missing_required_parameter_is_named_with_its_type(arguments: dict[str, object], message: str) -> None:
    assert failure(parse_arguments, arguments) == message


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"command": "view", "path": 5}, "Parameter `path` must be a string, got number 5."),
        ({"command": "create", "path": P, "file_text": ["a"]}, "Parameter `file_text` must be a string, got array ['a']."),
        (
            {"command": "str_replace", "path": P, "old_str": "a", "new_str": 1},
            "Parameter `new_str` must be a string or null, got number 1.",
        ),
        (
            {"command": 7},
            "Parameter `command` must be one of view, create, str_replace, insert, delete, rename, got number 7.",
        ),
    ],
)
def test_parameter_of_the_wrong_type_is_refused_with_the_expected_type(
    arguments: dict[str, object], message: str
) -> None:
    assert failure(parse_arguments, arguments) == message


def test_unknown_command_lists_the_six_commands() -> None:
    assert failure(parse_arguments, {"command": "edit", "path": P}) == (
        "Unknown command 'edit': use one of view, create, str_replace, insert, delete, rename."
    )


def test_missing_command_gives_an_example() -> None:
    assert failure(parse_arguments, {"path": P}) == (
        "Missing required parameter `command`: pass one of view, create, str_replace, insert, "
        'delete, rename, e.g. {"command": "view", "path": "/memories"}.'
    )


def test_invalid_json_says_where() -> None:
    assert failure(parse_arguments, '{"command": "view",}') == (
        "The arguments are not valid JSON (Expecting property name enclosed in double quotes at "
        'line 1 column 20): send one JSON object such as {"command": "view", "path": "/memories"}.'
    )


def test_empty_argument_text_is_invalid_json() -> None:
    assert failure(parse_arguments, "  ") == (
        'The arguments are not valid JSON (the text is empty): send one JSON object such as '
        '{"command": "view", "path": "/memories"}.'
    )


@pytest.mark.parametrize(("raw", "kind"), [("[1, 2]", "array"), ('"view"', "string"), ("7", "number"), ("null", "null")])
def test_json_that_is_not_an_object_is_refused(raw: str, kind: str) -> None:
    assert failure(parse_arguments, raw) == (
        f'The arguments must be a JSON object such as {{"command": "view", "path": "/memories"}}, got {kind}.'
    )


@pytest.mark.parametrize("value", [None, 5, [1], ("a",)])
def test_non_object_python_values_are_refused(value: object) -> None:
    assert failure(parse_arguments, value).startswith("The arguments must be a JSON object")


def test_deeply_nested_json_is_refused_without_recursion_error() -> None:
    assert failure(parse_arguments, "[" * 100_000 + "]" * 100_000) == (
        'The arguments are nested too deeply to read: send one flat JSON object such as '
        '{"command": "view", "path": "/memories"}.'
    )


def test_deeply_nested_object_inside_valid_arguments_is_refused() -> None:
    raw = '{"command": "view", "path": "/memories", "x": ' + "{\"a\": " * 50_000 + "1" + "}" * 50_001
    assert "nested too deeply" in failure(parse_arguments, raw)


def test_argument_text_over_the_bound_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(args_module, "MAX_ARGUMENT_CHARS", 100)
    assert failure(parse_arguments, "{" + " " * 200 + "}") == (
        "The arguments are 202 characters long; this tool refuses more than 100: write less "
        "text, or split it into several files."
    )


def test_file_text_over_ten_million_characters_is_refused_quickly() -> None:
    text = "a" * 10_000_001
    started = time.perf_counter()
    message = failure(parse_arguments, {"command": "create", "path": P, "file_text": text})
    assert time.perf_counter() - started < 1.0
    assert message == (
        "Parameter `file_text` is 10,000,001 characters long; this tool refuses more than "
        "10,000,000 characters (the per-file cap is lower). Write less text, or split it into "
        "several files."
    )


@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ({"command": "create", "path": P, "file_text": "a\x00b"}, "file_text"),
        ({"command": "str_replace", "path": P, "old_str": "a", "new_str": "\x00"}, "new_str"),
        ({"command": "insert", "path": P, "insert_line": 0, "insert_text": "ab\x00"}, "insert_text"),
    ],
)
def test_nul_in_text_to_be_written_is_refused_before_any_sql(arguments: dict[str, object], name: str) -> None:
    position = {"file_text": 1, "new_str": 0, "insert_text": 2}[name]
    assert failure(parse_arguments, arguments) == (
        f"Parameter `{name}` contains a NUL character ('\\x00') at position {position}: memory "
        "files hold text only. Remove the NUL characters."
    )


def test_lone_surrogate_in_text_to_be_written_is_refused() -> None:
    raw = '{"command": "create", "path": "/memories/a.md", "file_text": "ab\\ud800"}'
    assert failure(parse_arguments, raw) == (
        "Parameter `file_text` contains a lone surrogate (an unpaired '\\ud800'-'\\udfff' escape) "
        "at position 2, which is not valid Unicode text. Send the characters themselves, or a "
        "complete surrogate pair."
    )


def test_escaped_surrogate_pair_in_json_is_one_character() -> None:
    raw = '{"command": "create", "path": "/memories/a.md", "file_text": "\\ud83c\\udf55"}'
    assert parse_arguments(raw) == Create("/memories/a.md", "🍕")


def test_invalid_path_is_an_input_error_with_the_path_code() -> None:
    with pytest.raises(ToolInputError) as info:
        parse_arguments({"command": "view", "path": "/memories/%2e%2e/secret.md"})
    assert info.value.code == "invalid_path"
    assert str(info.value) == (
        "path '/memories/%2e%2e/secret.md' (decoded: '/memories/../secret.md') must stay under "
        "/memories: remove '..' segments"
    )


def test_invalid_rename_path_names_the_parameter() -> None:
    assert failure(parse_arguments, {"command": "rename", "old_path": P, "new_path": "/tmp/x"}) == (
        "new_path '/tmp/x' must be /memories or start with /memories/: write it as "
        "'/memories/<name>', e.g. '/memories/notes.md'"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/memories_backup/notes.md",
        "/memoriesX",
        "/memories/..",
        "/memories/foo/..",
        "/memories/%2e%2e/secret.md",
        "/memories/..%2fsecret.md",
        "/memories\\..\\x.md",
    ],
)
def test_c1_paths_are_refused_by_every_command(path: str) -> None:
    for arguments in (
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "str_replace", "path": path, "old_str": "a"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/ok"},
        {"command": "rename", "old_path": "/memories/ok", "new_path": path},
    ):
        with pytest.raises(ToolInputError) as info:
            parse_arguments(arguments)
        assert info.value.code == "invalid_path"


# ===================================================================== coerce_view_range


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, None),
        ([], None),
        ("", None),
        ([1, 5], (1, 5)),
        ((3, -1), (3, -1)),
        (["2", "-1"], (2, -1)),
        ([1.0, 2.0], (1, 2)),
        ("[3, -1]", (3, -1)),
        ("3, -1", (3, -1)),
        ([0, 0], (0, 0)),
        ([5, 3], (5, 3)),
    ],
)
def test_coerce_view_range_reads_two_integers(raw: object, expected: tuple[int, int] | None) -> None:
    assert coerce_view_range(raw) == expected


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ([1], "[1]"),
        ([1, 2, 3], "[1, 2, 3]"),
        ([True, 2], "[True, 2]"),
        ([1.5, 2], "[1.5, 2]"),
        ("abc", "'abc'"),
        ({"start": 1}, "{'start': 1}"),
        (5, "5"),
    ],
)
def test_coerce_view_range_refuses_other_shapes(raw: object, shown: str) -> None:
    assert failure(coerce_view_range, raw) == (
        f"Invalid `view_range` parameter: {shown}. It must be a list of two integers "
        "[start, end], e.g. [1, 20], or [5, -1] to read from line 5 to the end."
    )


# ================================================================================= schema


def test_tool_schema_is_an_openai_function_named_memory() -> None:
    schema = tool_schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "memory"
    parameters = schema["function"]["parameters"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["command"]
    assert parameters["properties"]["command"]["enum"] == [
        "view",
        "create",
        "str_replace",
        "insert",
        "delete",
        "rename",
    ]


def test_tool_schema_describes_every_parameter_of_the_reference() -> None:
    properties = tool_schema()["function"]["parameters"]["properties"]
    assert set(properties) == {
        "command",
        "path",
        "view_range",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "insert_text",
        "old_path",
        "new_path",
    }
    assert all(prop.get("description") for prop in properties.values())


def test_tool_schema_description_explains_commands_and_the_memories_root() -> None:
    description = tool_schema()["function"]["description"]
    assert "/memories" in description
    for command in messages.COMMANDS:
        assert f"- {command}:" in description


def test_tool_schema_is_a_fresh_deep_copy_each_call() -> None:
    first = tool_schema()
    first["function"]["parameters"]["properties"]["command"]["enum"].append("hack")
    first["function"]["name"] = "x"
    second = tool_schema()
    assert second["function"]["name"] == "memory"
    assert "hack" not in second["function"]["parameters"]["properties"]["command"]["enum"]


def test_tool_schema_is_json_serialisable() -> None:
    assert json.loads(json.dumps(tool_schema())) == tool_schema()


def test_insert_into_a_crlf_file_keeps_crlf_line_ends() -> None:
    from dbmemory.tool.edits import apply_insert

    assert apply_insert("/memories/w.md", "a\r\nb\r\n", 1, "X")[0] == "a\r\nX\r\nb\r\n"
    assert apply_insert("/memories/w.md", "a\r\nb\r\n", 2, "X\nY")[0] == "a\r\nb\r\nX\r\nY\r\n"
    assert apply_insert("/memories/w.md", "a\nb\r\n", 1, "X")[0] == "a\nX\nb\r\n"  # mixed: LF
