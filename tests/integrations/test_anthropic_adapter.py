"""The Anthropic SDK memory-tool adapter: the SDK's own memory-tool behaviours that apply to a
database (anthropic-sdk-python ``tests/lib/tools/memory_tools/test_filesystem.py``: create,
view, str_replace, insert, delete, rename and their errors), on every backend.

Symlink and file-system permission cases do not apply (there is no file system); path escapes
are refused by dbmemory's path rules. Texts keep the SDK's wording where dbmemory has it (a
remedy may follow), so the assertions match the SDK's text as a prefix.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from sqlalchemy.engine import Engine

pytest.importorskip("anthropic")

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError  # noqa: E402
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818CreateCommand as Create,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818DeleteCommand as Delete,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818InsertCommand as Insert,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818RenameCommand as Rename,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818StrReplaceCommand as StrReplace,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818ViewCommand as View,
)

from dbmemory.integrations.anthropic_tool import AsyncDbMemoryTool, DbMemoryTool  # noqa: E402
from dbmemory.store.agents import enable_for_agent  # noqa: E402
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file, list_files  # noqa: E402

AGENT = "CLAUDE"


@pytest.fixture
def tool(engine: Engine) -> DbMemoryTool:
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT, scope="user")
    return DbMemoryTool(engine, AGENT, user_id="u-1")


def snapshot(engine: Engine) -> dict[str, str]:
    """Every file of the agent's store for u-1: path -> text (the SDK tests' directory snapshot)."""
    with engine.connect() as conn:
        store_id = find_store_id(conn, f"user:{AGENT}:u-1")
        if store_id is None:
            return {}
        return {f.path: get_file(conn, store_id, f.path).text for f in list_files(conn, store_id)}


def raises(text: str) -> Any:
    return pytest.raises(ToolError, match="^" + re.escape(text))


def test_the_adapter_is_the_sdks_abstract_memory_tool_with_the_native_type(tool: DbMemoryTool) -> None:
    assert isinstance(tool, BetaAbstractMemoryTool)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    assert tool.name == "memory"


def test_create(tool: DbMemoryTool, engine: Engine) -> None:
    result = tool.create(Create(command="create", file_text="Hello, World!", path="/memories/test_file.txt"))
    assert result == "File created successfully at: /memories/test_file.txt"
    assert snapshot(engine) == {"/memories/test_file.txt": "Hello, World!"}


def test_create_nested_directories(tool: DbMemoryTool, engine: Engine) -> None:
    result = tool.create(Create(command="create", file_text="Nested file", path="/memories/deep/nested/file.txt"))
    assert result == "File created successfully at: /memories/deep/nested/file.txt"
    assert snapshot(engine) == {"/memories/deep/nested/file.txt": "Nested file"}


def test_create_error_if_file_already_exists(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="Original", path="/memories/existing.txt"))
    with raises("File /memories/existing.txt already exists"):
        tool.create(Create(command="create", file_text="New", path="/memories/existing.txt"))
    assert snapshot(engine) == {"/memories/existing.txt": "Original"}


def test_view_file(tool: DbMemoryTool) -> None:
    tool.create(Create(command="create", file_text="Line 1\nLine 2\nLine 3", path="/memories/view_test.txt"))
    result = tool.view(View(command="view", path="/memories/view_test.txt"))
    assert result == (
        "Here's the content of /memories/view_test.txt with line numbers:\n"
        "     1\tLine 1\n     2\tLine 2\n     3\tLine 3"
    )


def test_view_directory(tool: DbMemoryTool) -> None:
    tool.create(Create(command="create", file_text="File 1", path="/memories/dir/file1.txt"))
    tool.create(Create(command="create", file_text="File 2", path="/memories/dir/file2.txt"))
    result = tool.view(View(command="view", path="/memories/dir"))
    assert result.startswith("Here're the files and directories up to 2 levels deep in /memories/dir")
    assert "/memories/dir/file1.txt" in result and "/memories/dir/file2.txt" in result


def test_view_file_with_range(tool: DbMemoryTool) -> None:
    tool.create(Create(command="create", file_text="Line 1\nLine 2\nLine 3\nLine 4\nLine 5", path="/memories/range_test.txt"))
    result = tool.view(View(command="view", path="/memories/range_test.txt", view_range=[2, 4]))
    assert result == (
        "Here's the content of /memories/range_test.txt with line numbers:\n"
        "     2\tLine 2\n     3\tLine 3\n     4\tLine 4"
    )


def test_view_error_for_non_existent_file(tool: DbMemoryTool) -> None:
    with raises("The path /memories/nonexistent.txt does not exist. Please provide a valid path"):
        tool.view(View(command="view", path="/memories/nonexistent.txt"))


def test_str_replace(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="Line 1\nOld Text\nLine 3", path="/memories/replace_test.txt"))
    result = tool.str_replace(
        StrReplace(command="str_replace", path="/memories/replace_test.txt", old_str="Old Text", new_str="New Text")
    )
    # the SDK's snippet, with the path named in the header line
    assert result.endswith("(with line numbers):\n     1\tLine 1\n     2\tNew Text\n     3\tLine 3")
    assert snapshot(engine) == {"/memories/replace_test.txt": "Line 1\nNew Text\nLine 3"}


def test_str_replace_error_when_string_not_found(tool: DbMemoryTool) -> None:
    tool.create(Create(command="create", file_text="Hello, World!", path="/memories/replace_test.txt"))
    with raises("No replacement was performed, old_str `NotFound` did not appear verbatim in /memories/replace_test.txt"):
        tool.str_replace(StrReplace(command="str_replace", path="/memories/replace_test.txt", old_str="NotFound", new_str="Python"))


def test_str_replace_error_when_string_appears_multiple_times(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="Hello\nMiddle\nHello", path="/memories/replace_test.txt"))
    with raises("No replacement was performed. Multiple occurrences of old_str `Hello` in lines: 1, 3"):
        tool.str_replace(StrReplace(command="str_replace", path="/memories/replace_test.txt", old_str="Hello", new_str="Hi"))
    assert snapshot(engine) == {"/memories/replace_test.txt": "Hello\nMiddle\nHello"}


def test_str_replace_error_for_non_existent_file(tool: DbMemoryTool) -> None:
    with raises("The path /memories/nonexistent.txt does not exist. Please provide a valid path"):
        tool.str_replace(StrReplace(command="str_replace", path="/memories/nonexistent.txt", old_str="old", new_str="new"))


@pytest.mark.parametrize(
    ("line", "text", "expected"),
    [
        (1, "Inserted Line", ["Line 1", "Inserted Line", "Line 2"]),
        (0, "First Line", ["First Line", "Line 1", "Line 2"]),
        (2, "Last Line", ["Line 1", "Line 2", "Last Line"]),
    ],
    ids=["middle", "beginning", "end"],
)
def test_insert(tool: DbMemoryTool, engine: Engine, line: int, text: str, expected: list[str]) -> None:
    tool.create(Create(command="create", file_text="Line 1\nLine 2", path="/memories/insert_test.txt"))
    result = tool.insert(Insert(command="insert", path="/memories/insert_test.txt", insert_line=line, insert_text=text))
    assert "/memories/insert_test.txt has been edited" in result
    assert snapshot(engine)["/memories/insert_test.txt"].splitlines() == expected


def test_insert_error_for_non_existent_file(tool: DbMemoryTool) -> None:
    with raises("The path /memories/nonexistent.txt does not exist. Please provide a valid path"):
        tool.insert(Insert(command="insert", path="/memories/nonexistent.txt", insert_line=0, insert_text="text"))


def test_insert_error_for_invalid_insert_line(tool: DbMemoryTool) -> None:
    tool.create(Create(command="create", file_text="Line 1\nLine 2", path="/memories/insert_test.txt"))
    with raises("Invalid `insert_line` parameter: 10. It should be within the range [0, 2]"):
        tool.insert(Insert(command="insert", path="/memories/insert_test.txt", insert_line=10, insert_text="text"))


def test_delete(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="To be deleted", path="/memories/delete_me.txt"))
    assert tool.delete(Delete(command="delete", path="/memories/delete_me.txt")) == "Successfully deleted /memories/delete_me.txt"
    assert snapshot(engine) == {}


def test_delete_directory(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="Content", path="/memories/subdir/file.txt"))
    assert tool.delete(Delete(command="delete", path="/memories/subdir")).startswith("Successfully deleted /memories/subdir")
    assert snapshot(engine) == {}


def test_delete_error_when_file_not_found(tool: DbMemoryTool) -> None:
    with raises("The path /memories/nonexistent.txt does not exist"):
        tool.delete(Delete(command="delete", path="/memories/nonexistent.txt"))


def test_delete_does_not_allow_deleting_the_memories_directory(tool: DbMemoryTool) -> None:
    with raises("Cannot delete the /memories directory itself"):
        tool.delete(Delete(command="delete", path="/memories"))


def test_rename(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="Original content", path="/memories/old_name.txt"))
    result = tool.rename(Rename(command="rename", old_path="/memories/old_name.txt", new_path="/memories/new_name.txt"))
    assert result == "Successfully renamed /memories/old_name.txt to /memories/new_name.txt"
    assert snapshot(engine) == {"/memories/new_name.txt": "Original content"}


def test_rename_to_nested_path(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="Content", path="/memories/file.txt"))
    result = tool.rename(Rename(command="rename", old_path="/memories/file.txt", new_path="/memories/nested/dir/file.txt"))
    assert result == "Successfully renamed /memories/file.txt to /memories/nested/dir/file.txt"
    assert snapshot(engine) == {"/memories/nested/dir/file.txt": "Content"}


def test_rename_error_when_source_not_found(tool: DbMemoryTool) -> None:
    with raises("The path /memories/nonexistent.txt does not exist"):
        tool.rename(Rename(command="rename", old_path="/memories/nonexistent.txt", new_path="/memories/new.txt"))


def test_rename_error_when_destination_exists(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="File 1", path="/memories/file1.txt"))
    tool.create(Create(command="create", file_text="File 2", path="/memories/file2.txt"))
    with raises("The destination /memories/file2.txt already exists"):
        tool.rename(Rename(command="rename", old_path="/memories/file1.txt", new_path="/memories/file2.txt"))
    assert snapshot(engine) == {"/memories/file1.txt": "File 1", "/memories/file2.txt": "File 2"}


@pytest.mark.parametrize("path", ["/invalid/path.txt", "/memories/../../../etc/passwd"])
def test_paths_outside_memories_are_refused(tool: DbMemoryTool, engine: Engine, path: str) -> None:
    with pytest.raises(ToolError, match="/memories"):
        tool.create(Create(command="create", file_text="Escape attempt", path=path))
    assert snapshot(engine) == {}


def test_the_sdks_call_entry_point_dispatches_raw_input(tool: DbMemoryTool, engine: Engine) -> None:
    # what the SDK's tool runner does with a tool_use block's input
    assert tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x"}).startswith("File created")
    assert "1\tx" in tool.call({"command": "view", "path": "/memories/a.md"})
    assert snapshot(engine) == {"/memories/a.md": "x"}


def test_clear_all_memory_deletes_every_file(tool: DbMemoryTool, engine: Engine) -> None:
    tool.create(Create(command="create", file_text="1", path="/memories/a.md"))
    tool.create(Create(command="create", file_text="2", path="/memories/b/c.md"))
    assert tool.clear_all_memory() == "All memory cleared"  # the SDK tool's text
    assert snapshot(engine) == {}


def test_with_a_connection_commands_join_the_callers_transaction(engine: Engine) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT, scope="user")
    with engine.connect() as conn:
        conn.begin()
        tool = DbMemoryTool(conn, AGENT, user_id="u-1")
        tool.create(Create(command="create", file_text="x", path="/memories/a.md"))
        conn.rollback()
    assert snapshot(engine) == {}


def test_the_async_adapter_runs_the_same_commands(engine: Engine) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT, scope="user")
    tool = AsyncDbMemoryTool(engine, AGENT, user_id="u-1")

    async def main() -> str:
        await tool.create(Create(command="create", file_text="Line 1", path="/memories/a.md"))
        with pytest.raises(ToolError, match="^File /memories/a.md already exists"):
            await tool.create(Create(command="create", file_text="again", path="/memories/a.md"))
        return await tool.view(View(command="view", path="/memories/a.md"))

    assert asyncio.run(main()).endswith("     1\tLine 1")
    assert snapshot(engine) == {"/memories/a.md": "Line 1"}
