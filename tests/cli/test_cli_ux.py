"""The command line as a new user meets it: help that keeps its placeholders and shows one
example a line, ``--json`` on every command (errors included, with a stable code), shell
completion, plurals, read-only commands that create no file, missing extras named with the
pip command, and the MCP server's fixes (version, unknown resource, schema, remedies)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.db.engine import create_engine
from dbmemory.db.migrate import upgrade
from dbmemory.store.agents import enable_for_agent
from helpers import cli_commands

NO_JSON = {"chat": "interactive", "mcp": "its stdout is the MCP protocol"}
"""Commands without --json, as docs/cli.md says."""

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> Iterator[tuple[list[str], Any]]:
    for path, command in cli_commands():
        yield list(path), command


COMMANDS = list(_commands())
IDS = [" ".join(path) for path, _ in COMMANDS]


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=input, env=env, prog_name="dbmemory")


def _flat(text: str) -> str:
    """Rendered help without box characters, whitespace collapsed (wrapped lines rejoined)."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def _source_texts(cmd: Any) -> list[str]:
    texts = [cmd.help or "", cmd.epilog or ""]
    texts += [getattr(p, "help", None) or "" for p in cmd.params]
    return texts


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{(tmp_path / 'ux.db').as_posix()}"
    engine = create_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        enable_for_agent(conn, "SUPPORT", scope="user")
    engine.dispose()
    return url


# -- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=IDS)
def test_every_help_keeps_its_placeholders_and_shows_one_example_a_line(path: list[str], cmd: Any) -> None:
    result = invoke(*path, "--help", env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    flat = _flat(out)
    assert not re.search(r"<\s*>", out), "an empty <> placeholder: rich markup ate its text"
    assert "<bool>" not in out, "a flag shown with a value"
    for text in _source_texts(cmd):
        for token in re.findall(r"<[^<>\n]+>|\[[^\[\]\n]+\]", text):
            assert " ".join(token.split()) in flat, f"{token!r} of the help source is not shown"
    assert "Example" in out, "every command's help has an example"
    examples = [line.strip(" │") for line in out.splitlines()]
    for line in examples:
        if line.startswith("dbmemory ") or "Example: dbmemory" in line:
            assert "&&" not in line and line.count("dbmemory ") == 1, f"a joined example: {line!r}"


def test_the_root_help_shows_each_example_on_its_own_line() -> None:
    out = invoke("--help", env={"COLUMNS": "200"}).stdout
    lines = [line.strip() for line in out.splitlines()]
    assert "dbmemory db upgrade" in lines and "dbmemory agent enable SUPPORT" in lines


def test_a_placeholder_in_an_option_help_survives_the_rendering() -> None:
    out = _flat(invoke("replay", "--help", env={"COLUMNS": "200"}).stdout)
    assert "replay.<conversation>[.<speaker>]" in out
    out = _flat(invoke("chat", "--help", env={"COLUMNS": "200"}).stdout)
    assert "chat-<UTC timestamp>" in out


# -- --json ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=IDS)
def test_every_command_has_json_or_the_cli_page_says_it_does_not(path: list[str], cmd: Any) -> None:
    options = {opt for p in cmd.params for opt in getattr(p, "opts", [])}
    name = " ".join(path)
    if name in NO_JSON:
        assert "--json" not in options
        page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
        assert re.search(rf"`{name}`[^\n]*no `--json`|no `--json`[^\n]*`{name}`", page), name
    else:
        assert "--json" in options, f"{name} has no --json"


def test_with_json_an_error_is_json_on_stdout_with_a_stable_code(tmp_path: Path) -> None:
    missing = f"sqlite:///{(tmp_path / 'none.db').as_posix()}"
    result = invoke("files", "ls", "--store", "global", "--json", "--url", missing)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["error"]["code"] == "not_found" and data["error"]["exit_code"] == 1
    assert "none.db" in data["error"]["message"]
    usage = invoke("files", "ls", "--json", "--bogus")
    assert usage.exit_code == 2
    assert json.loads(usage.stdout)["error"]["code"] == "usage_error"


def test_a_command_option_given_before_the_command_says_where_it_goes() -> None:
    result = invoke("--url", "sqlite:///x.db", "files", "ls")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "No such option: --url" in line and "put --url after it" in line, line
    assert "only --debug and --version go before the command" in line


def test_without_json_an_error_stays_one_line_on_stderr(tmp_path: Path) -> None:
    missing = f"sqlite:///{(tmp_path / 'none.db').as_posix()}"
    result = invoke("files", "ls", "--store", "global", "--url", missing)
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: there is no SQLite database at ")


# -- completion -------------------------------------------------------------------------------------


def test_shell_completion_is_offered_and_prints_a_script() -> None:
    assert "--install-completion" in invoke("--help").stdout
    # --show-completion detects the user's shell from the process tree; the script for a named
    # shell comes from the completion variable, whatever shell runs the tests
    result = invoke(env={"_DBMEMORY_COMPLETE": "source_bash"})
    assert "_DBMEMORY_COMPLETE" in result.stdout and "complete" in result.stdout


def test_completion_completes_command_names() -> None:
    result = invoke(env={"_DBMEMORY_COMPLETE": "complete_bash", "COMP_WORDS": "dbmemory re", "COMP_CWORD": "1"})
    assert "replay" in result.stdout.split()


# -- read-only commands on a SQLite path that does not exist ----------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["agent", "list"],
        ["files", "ls", "--store", "global"],
        ["files", "cat", "/memories/a.md", "--store", "global"],
        ["profile", "show", "u-1"],
        ["expire", "--days", "30", "--dry-run"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_read_only_command_on_a_missing_sqlite_file_says_so_and_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    target = tmp_path / "typo.db"
    result = invoke(*args, "--url", f"sqlite:///{target.as_posix()}")
    assert result.exit_code == 1, result.output
    assert "there is no SQLite database at" in result.stderr and str(target) in result.stderr
    assert not target.exists()


def test_profile_export_and_db_current_create_no_file(tmp_path: Path) -> None:
    target = tmp_path / "typo.db"
    url = f"sqlite:///{target.as_posix()}"
    assert invoke("profile", "export", str(tmp_path / "out"), "--url", url).exit_code == 1
    current = invoke("db", "current", "--json", "--url", url)
    assert current.exit_code == 0 and json.loads(current.stdout)["current"] is None
    assert not target.exists()


# -- wording ------------------------------------------------------------------------------------------


def test_plural_agrees_with_the_count() -> None:
    from dbmemory.cli._common import plural

    assert [plural(n, "session") for n in (0, 1, 2)] == ["0 sessions", "1 session", "2 sessions"]
    assert plural(1, "file") + " deleted" == "1 file deleted"


def test_cli_output_says_1_file_and_1_session(url: str, tmp_path: Path) -> None:
    assert invoke("files", "put", "/memories/a.md", "--store", "global", "--text", "x", "--url", url).exit_code == 0
    out = invoke("files", "rm", "/memories/a.md", "--store", "global", "--url", url).stdout
    assert "Deleted 1 file " in out
    out = invoke("expire", "--days", "30", "--dry-run", "--url", url).stdout
    assert out.startswith("0 files would expire")
    convo = tmp_path / "one.jsonl"
    convo.write_text(
        '{"session": 1, "time": "2024-01-01T10:00:00Z", "role": "user", "text": "I live in Oslo."}\n'
        '{"session": 1, "time": "2024-01-01T10:00:05Z", "role": "assistant", "text": "Noted."}\n',
        encoding="utf-8",
    )
    result = invoke("replay", str(convo), "--url", url, env={"DBMEMORY_MODEL": ""})
    assert result.exit_code == 0, result.output
    assert "1 session, 1 user turn," in _flat(result.stdout)


def test_demo_says_that_the_url_is_ignored_without_keep(tmp_path: Path) -> None:
    url = f"sqlite:///{(tmp_path / 'mine.db').as_posix()}"
    result = invoke("demo", "--url", url)
    assert result.exit_code == 0, result.output
    assert "--url is ignored without --keep" in result.stderr
    assert not (tmp_path / "mine.db").exists()
    kept = invoke("demo", "--keep", "--url", url)
    assert kept.exit_code == 0 and "ignored" not in kept.stderr


def test_chat_prints_each_step_once(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBMEMORY_MODEL", raising=False)
    result = invoke("chat", "--agent", "SUPPORT", "--user", "u-3", "--url", url, input="I live in Oslo.\n/quit\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for step in ("Loading context memory", "Updating your memory"):
        assert sum(step in line for line in lines) == 1, (step, result.stdout)


# -- extras named at start-up with the pip command --------------------------------------------------


def test_mcp_without_the_mcp_extra_names_the_pip_command(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp_types", None)  # import mcp_types -> ImportError
    result = invoke("mcp", "--agent", "SUPPORT", "--user", "u-1", "--url", url)
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "pip install -e '.[mcp]'" in line and "unexpected" not in line


def test_chat_without_the_profile_extra_says_so_before_the_first_turn(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)
    for name in [m for m in sys.modules if m == "dbmemory.profile" or m.startswith("dbmemory.profile.")]:
        monkeypatch.delitem(sys.modules, name)
    result = invoke("chat", "--agent", "SUPPORT", "--user", "u-1", "--url", url, input="hello\n/quit\n")
    assert result.exit_code == 1
    assert "pip install -e '.[profile]'" in result.stderr
    assert "you>" not in result.stdout


# -- MCP --------------------------------------------------------------------------------------------


def test_mcp_remedies_name_the_command_line_options(url: str) -> None:
    result = invoke("mcp", "--agent", "SUPPORT", "--url", url)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "pass --user USER" in line and "user_id" not in line
    result = invoke("mcp", "--agent", "NOPE", "--url", url)
    (line,) = result.stderr.strip().splitlines()
    assert "dbmemory agent enable NOPE" in line and "enable_for_agent" not in line


def test_mcp_on_a_sqlite_file_without_the_schema_installs_it_like_chat(tmp_path: Path) -> None:
    url = f"sqlite:///{(tmp_path / 'fresh.db').as_posix()}"
    result = invoke("mcp", "--agent", "SUPPORT", "--user", "u-1", "--url", url)
    assert result.stdout == ""
    assert "Installed dbmemory's schema" in result.stderr
    assert "dbmemory agent enable SUPPORT" in result.stderr  # then: the agent is not enabled


def test_mcp_on_a_server_database_without_the_schema_says_to_upgrade(empty_engine: Any) -> None:
    from dbmemory.integrations.mcp_server import run

    if empty_engine.dialect.name == "sqlite":
        pytest.skip("SQLite gets the schema (previous test)")
    from dbmemory.errors import StorageError

    with pytest.raises(StorageError, match="dbmemory db upgrade"):
        run(url=empty_engine.url.render_as_string(hide_password=False), agent_code="SUPPORT", user_id="u-1")


def test_mcp_server_version_and_an_unknown_resource_is_a_clean_error(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("mcp")
    from importlib.metadata import version

    from mcp.client import Client
    from mcp.shared.exceptions import MCPError

    from dbmemory.integrations.mcp_server import McpMemoryServer, build_server

    engine = create_engine(url)
    state = McpMemoryServer(engine, "SUPPORT", user_id="u-1")

    async def main() -> tuple[Any, Any]:
        async with Client(build_server(state)) as client:  # in-process: the handshake runs
            info = client.server_info
            with pytest.raises(MCPError) as caught:
                await client.read_resource("dbmemory://profile/someone-else")
            return info, caught.value

    try:
        with caplog.at_level("DEBUG"):
            info, err = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        engine.dispose()
    assert info.name == "dbmemory" and info.version == version("dbmemory")
    assert "unknown resource" in str(err) and "dbmemory://profile/u-1" in str(err)
    assert not [r for r in caplog.records if r.exc_info], "a server-side traceback was logged"


# -- the repository: license, and docs that point to nothing outside it ------------------------------


def test_the_license_file_matches_pyproject() -> None:
    import tomllib

    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license"]
    assert declared == {"text": "Apache-2.0"}
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text


def _doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return files + sorted((ROOT / "src" / "dbmemory").rglob("*.py"))


@pytest.mark.parametrize(
    "pattern",
    [r"\.\./shared", r"(^|[\s`'\"(])/work/", r"\b[Ii]ssues? \d+\b", r"\bcases? C\d+"],
    ids=["../shared", "/work", "issue N", "case CN"],
)
def test_docs_and_docstrings_point_to_nothing_outside_the_repository(pattern: str) -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _doc_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(pattern, line)
    ]
    assert hits == [], "\n".join(hits)


def test_the_readme_installs_from_a_clone_or_a_wheel_until_published() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"pip install \"?dbmemory(\[|\"|\s|$)", text), f"{page.name}: dbmemory is not on PyPI yet"
    assert "not published on PyPI yet" in readme
    assert readme.count('pip install -e ".[all,test]" && python -m pytest') == 1
    assert "github.com/snap-research/locomo" in readme
