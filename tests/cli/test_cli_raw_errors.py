"""The CLI never prints a raw Python exception: an integer outside what its option allows (or
outside the 64-bit range any database column holds) is a usage error naming the option and
the range; a file or folder that cannot be written names the path and the reason; a negative
number that reads as an option says to put ``--`` before it. Each on every backend."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner, Result

from dbmemory.cli import app

HUGE = "99999999999999999999"


@pytest.fixture
def cli_url(engine: Engine) -> str:
    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pytest.skip("an in-memory SQLite database cannot be shared with a CLI command")
    return engine.url.render_as_string(hide_password=False)


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"DBMEMORY_URL": url}, prog_name="dbmemory")


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "unexpected" not in lines[0] and "Traceback" not in result.output, lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "command",
    [
        ("files", "ls", "--store-id", HUGE),
        ("files", "cat", "/memories/a.md", "--store-id", HUGE),
        ("expire", "--days", "30", "--store-id", HUGE),
    ],
    ids=["files-ls", "files-cat", "expire"],
)
def test_an_integer_option_past_the_64_bit_range_is_a_usage_error_naming_the_option(
    cli_url: str, command: tuple[str, ...]
) -> None:
    line = one_error_line(run(cli_url, *command), 2)
    assert "--store-id" in line and "out of range" in line, line
    assert "9223372036854775807" in line and "OverflowError" not in line, line


def test_profile_export_into_a_folder_that_cannot_be_made_names_the_path(
    cli_url: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    target = blocker / "profiles"
    line = one_error_line(run(cli_url, "profile", "export", str(target)), 1)
    assert str(blocker) in line and "not a directory" in line, line
    assert "NotADirectoryError" not in line and "FileNotFoundError" not in line


def test_a_negative_setting_value_says_to_put_double_dash_before_it(cli_url: str) -> None:
    line = one_error_line(run(cli_url, "settings", "set", "--admin", "grace_days", "-1"), 2)
    assert "No such option" not in line, line
    assert "negative number" in line and "--" in line, line
    line = one_error_line(run(cli_url, "settings", "set", "--admin", "--", "grace_days", "-1"), 2)
    assert "grace_days" in line and "out of range" in line, line


@pytest.mark.parametrize(
    ("args", "example"),
    [
        (["settings", "set", "--admin", "grace_days", "-1"], "dbmemory settings set --admin -- grace_days -1"),
        (
            ["settings", "set", "grace_days", "-1", "--admin", "--org", "default"],
            "dbmemory settings set --admin --org default -- grace_days -1",
        ),
        (["items", "edit", "u1", "-5", "a text"], "dbmemory items edit -- u1 -5 'a text'"),
    ],
)
def test_the_negative_number_hint_is_the_users_own_command_that_works(
    cli_url: str, args: list[str], example: str
) -> None:
    line = one_error_line(run(cli_url, *args), 2)
    assert f"(here: {example})" in line, line
    again = run(cli_url, *shlex.split(example)[1:])  # what the hint says to run
    assert "reads as an option" not in again.output and "No such option" not in again.output
