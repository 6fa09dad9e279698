"""A mistyped option is answered with the options it is close to, or with none: never a
far-off guess such as ``--bogus`` -> ``--user``."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.cli._usage import close_options
from helpers import cli_commands

LEAVES = [(list(path), command) for path, command in cli_commands()]
IDS = [" ".join(path) for path, _ in LEAVES]


def _long_options(command: Any) -> list[str]:
    return [o for p in command.params for o in p.opts if o.startswith("--") and o != "--help"]


def _error(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), prog_name="dbmemory")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=IDS)
def test_a_far_off_option_gets_no_suggestion(path: list[str], command: Any) -> None:
    line = _error(*path, "--bogus")
    assert "No such option: --bogus" in line
    assert "did you mean" not in line and "Possible options" not in line, line


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=IDS)
def test_an_option_missing_one_letter_is_suggested(path: list[str], command: Any) -> None:
    options = [o for o in _long_options(command) if len(o) >= 6]
    if not options:
        pytest.skip("no long option")
    option = options[0]
    typo = option[:-2] + option[-1]  # one letter left out
    line = _error(*path, typo)
    assert f"did you mean {option}" in line or f" or {option}" in line, line


def test_close_options_keeps_close_names_only() -> None:
    options = ["--user", "--url", "--org", "--store", "--store-id", "--json"]
    assert close_options("--bogus", options) == []
    assert close_options("--usr", options) == ["--user"]
    assert close_options("--jsn", options) == ["--json"]
    assert close_options("--stor", options) == ["--store", "--store-id"]
    assert close_options("--o", options) == []


def test_python_dash_m_dbmemory_cli_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dbmemory.cli", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() and "Traceback" not in done.stderr
