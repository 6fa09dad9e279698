"""The ``dbmemory`` command line: every command, its help, its errors and its exit codes.

Runs through typer's ``CliRunner`` on a temporary SQLite file (each command opens its own
engine, so an in-memory database cannot be shared between commands), plus a few subprocess
checks of start-up cost and the console script. ``DBMEMORY_URL`` and the user data directory
are redirected to the test's temporary folder, so no test touches a real database.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner, Result

from dbmemory.cli import app
from helpers import cli_commands

REPO = Path(__file__).resolve().parents[2]

ARGS_VIEW_ROOT = '{"command": "view", "path": "/memories"}'


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No DBMEMORY_URL from the developer's shell; the user data dir inside tmp_path."""
    monkeypatch.delenv("DBMEMORY_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def bare_url(tmp_path: Path) -> str:
    """A SQLite file URL without dbmemory's schema."""
    return f"sqlite:///{(tmp_path / 'cli.db').as_posix()}"


@pytest.fixture
def url(runner: CliRunner, bare_url: str) -> str:
    """A SQLite file URL with dbmemory's schema installed by ``dbmemory db upgrade``."""
    result = runner.invoke(app, ["db", "upgrade", "--url", bare_url], prog_name="dbmemory")
    assert result.exit_code == 0, result.output
    return bare_url


def run(runner: CliRunner, url: str, *args: str, input: str | None = None) -> Result:
    """Invoke ``dbmemory ARGS`` with ``DBMEMORY_URL`` set to ``url``."""
    return runner.invoke(
        app, list(args), input=input, env={"DBMEMORY_URL": url}, prog_name="dbmemory"
    )


def ok(result: Result) -> Result:
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}"
    return result


def assert_one_error_line(result: Result, code: int) -> str:
    """The command failed with ``code`` and printed exactly one ``Error: ...`` line."""
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    assert "Traceback" not in result.output
    return lines[0]


def leaf_commands() -> list[tuple[str, ...]]:
    """Every command path, e.g. ``("db", "upgrade")``, ``("tool",)``."""
    return [path for path, _ in cli_commands()]


def group_commands() -> list[tuple[str, ...]]:
    return sorted({path[:-1] for path in leaf_commands() if len(path) > 1})


@pytest.fixture
def support_store(runner: CliRunner, url: str) -> str:
    """Agent SUPPORT enabled (max 3 files) with two files written through the CLI."""
    ok(run(runner, url, "agent", "enable", "SUPPORT", "--max-files", "3"))
    ok(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/a.md",
            "--store",
            "agent:SUPPORT",
            "--text",
            "alpha",
        )
    )
    ok(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/dir/b.md",
            "--store",
            "agent:SUPPORT",
            "--text",
            "beta",
        )
    )
    return "agent:SUPPORT"


def age_files(url: str, days: float, *, store_key: str | None = None) -> None:
    """Move the last touch of files (of one store, or all) ``days`` days into the past."""
    import sqlalchemy as sa

    from dbmemory.db.engine import create_engine
    from dbmemory.db.schema import files, stores

    engine = create_engine(url)
    try:
        when = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
        stmt = sa.update(files).values(last_accessed_at=when, updated_at=when)
        if store_key is not None:
            ids = sa.select(stores.c.store_id).where(stores.c.store_key == store_key)
            stmt = stmt.where(files.c.store_id.in_(ids.scalar_subquery()))
        with engine.begin() as conn:
            conn.execute(stmt)
    finally:
        engine.dispose()


# -- db ---------------------------------------------------------------------------------------


def test_db_upgrade_then_db_current_shows_the_head_revision(
    runner: CliRunner, bare_url: str
) -> None:
    from dbmemory.db.migrate import head

    before = ok(run(runner, bare_url, "db", "current", "--json"))
    assert json.loads(before.stdout)["current"] is None

    upgraded = ok(run(runner, bare_url, "db", "upgrade"))
    assert f"to {head()}" in upgraded.stdout

    text = ok(run(runner, bare_url, "db", "current"))
    assert head() in text.stdout and "up to date" in text.stdout
    data = json.loads(ok(run(runner, bare_url, "db", "current", "--json")).stdout)
    assert data == {"url": bare_url, "current": head(), "head": head(), "up_to_date": True}


def test_db_upgrade_on_an_up_to_date_database_changes_nothing(runner: CliRunner, url: str) -> None:
    result = ok(run(runner, url, "db", "upgrade", "--json"))
    data = json.loads(result.stdout)
    assert data["from"] == data["to"] == data["head"]
    assert "nothing to do" in ok(run(runner, url, "db", "upgrade")).stdout


def test_db_current_check_exits_1_until_the_database_is_upgraded(
    runner: CliRunner, bare_url: str
) -> None:
    result = run(runner, bare_url, "db", "current", "--check")
    assert result.exit_code == 1
    assert "dbmemory db upgrade" in result.stdout
    ok(run(runner, bare_url, "db", "upgrade"))
    ok(run(runner, bare_url, "db", "current", "--check"))


def test_db_downgrade_asks_first_then_removes_the_schema(runner: CliRunner, url: str) -> None:
    refused = run(runner, url, "db", "downgrade", "base", input="n\n")
    assert refused.exit_code == 1
    assert json.loads(ok(run(runner, url, "db", "current", "--json")).stdout)["up_to_date"]

    ok(run(runner, url, "db", "downgrade", "base", "--yes"))
    assert json.loads(ok(run(runner, url, "db", "current", "--json")).stdout)["current"] is None


def test_db_upgrade_to_an_unknown_revision_is_an_invalid_argument(
    runner: CliRunner, bare_url: str
) -> None:
    line = assert_one_error_line(run(runner, bare_url, "db", "upgrade", "nosuchrev"), 2)
    assert "nosuchrev" in line


def test_url_option_wins_over_the_environment(runner: CliRunner, url: str, tmp_path: Path) -> None:
    other = f"sqlite:///{(tmp_path / 'other.db').as_posix()}"
    result = runner.invoke(
        app, ["db", "current", "--json", "--url", url], env={"DBMEMORY_URL": other}
    )
    assert json.loads(ok(result).stdout)["url"] == url


def test_without_url_the_default_is_a_sqlite_file_in_the_user_data_directory(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = ok(runner.invoke(app, ["db", "upgrade", "--json"], prog_name="dbmemory"))
    expected = tmp_path / "xdg-data" / "dbmemory" / "dbmemory.db"
    assert json.loads(result.stdout)["url"] == f"sqlite:///{expected.as_posix()}"
    assert expected.is_file()


# -- agent ------------------------------------------------------------------------------------


def test_agent_enable_list_and_disable_round_trip(runner: CliRunner, url: str) -> None:
    text = ok(run(runner, url, "agent", "enable", "SUPPORT", "--scope", "user", "--max-files", "7"))
    assert "Memory enabled for agent SUPPORT" in text.stdout and "scope user" in text.stdout
    ok(
        run(
            runner,
            url,
            "agent",
            "enable",
            "DOCS",
            "--scope",
            "context",
            "--context-key",
            "document_id",
        )
    )
    ok(run(runner, url, "agent", "enable", "TEAM", "--scope", "shared", "--store-code", "POLICIES"))

    listed = json.loads(ok(run(runner, url, "agent", "list", "--json")).stdout)
    by_code = {a["agent_code"]: a for a in listed}
    assert sorted(by_code) == ["DOCS", "SUPPORT", "TEAM"]
    assert by_code["SUPPORT"] == {
        "agent_code": "SUPPORT",
        "scope": "user",
        "store_code": None,
        "context_key": None,
        "memory_enabled": True,
        "max_file_chars": 100_000,
        "max_files": 7,
        "max_store_chars": None,
    }
    assert by_code["DOCS"]["context_key"] == "document_id"
    assert by_code["TEAM"]["store_code"] == "POLICIES"
    table = ok(run(runner, url, "agent", "list")).stdout
    assert "SUPPORT" in table and "document_id" in table and "POLICIES" in table

    disabled = ok(run(runner, url, "agent", "disable", "SUPPORT"))
    assert "disabled" in disabled.stdout
    listed = json.loads(ok(run(runner, url, "agent", "list", "--json")).stdout)
    assert {a["agent_code"]: a["memory_enabled"] for a in listed}["SUPPORT"] is False


def test_agent_list_on_an_empty_database_says_how_to_enable_one(
    runner: CliRunner, url: str
) -> None:
    assert "dbmemory agent enable" in ok(run(runner, url, "agent", "list")).stdout
    assert json.loads(ok(run(runner, url, "agent", "list", "--json")).stdout) == []


def test_agent_enable_shared_without_store_code_is_one_line_exit_2(
    runner: CliRunner, url: str
) -> None:
    line = assert_one_error_line(
        run(runner, url, "agent", "enable", "TEAM", "--scope", "shared"), 2
    )
    assert "store_code" in line or "store code" in line


def test_agent_enable_with_an_unknown_scope_is_a_usage_error(runner: CliRunner, url: str) -> None:
    assert_one_error_line(run(runner, url, "agent", "enable", "X", "--scope", "planet"), 2)


def test_agent_disable_of_an_unknown_agent_exits_1(runner: CliRunner, url: str) -> None:
    assert_one_error_line(run(runner, url, "agent", "disable", "NOBODY"), 1)


def test_agent_disable_drop_store_removes_the_agents_store(
    runner: CliRunner, url: str, support_store: str
) -> None:
    result = ok(run(runner, url, "agent", "disable", "SUPPORT", "--drop-store", "--json"))
    assert json.loads(result.stdout) == {
        "agent_code": "SUPPORT",
        "memory_enabled": False,
        "stores_dropped": 1,
    }
    assert json.loads(ok(run(runner, url, "files", "ls", "--json")).stdout) == []


# -- files ------------------------------------------------------------------------------------


def test_files_put_ls_cat_rm_and_clear(runner: CliRunner, url: str, support_store: str) -> None:
    listed = json.loads(
        ok(run(runner, url, "files", "ls", "--store", support_store, "--json")).stdout
    )
    assert [(f["path"], f["chars"], f["version"]) for f in listed] == [
        ("/memories/a.md", 5, 1),
        ("/memories/dir/b.md", 4, 1),
    ]
    table = ok(run(runner, url, "files", "ls", "--store", support_store)).stdout
    assert "/memories/a.md" in table and "/memories/dir/b.md" in table

    assert (
        ok(run(runner, url, "files", "cat", "/memories/a.md", "--store", support_store)).stdout
        == "alpha"
    )
    replaced = ok(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/a.md",
            "--store",
            support_store,
            "--text",
            "alpha 2",
            "--json",
        )
    )
    assert json.loads(replaced.stdout)["version"] == 2
    record = json.loads(
        ok(
            run(runner, url, "files", "cat", "/memories/a.md", "--store", support_store, "--json")
        ).stdout
    )
    assert record["text"] == "alpha 2" and record["store_key"] == support_store

    removed = ok(run(runner, url, "files", "rm", "/memories/a.md", "--store", support_store))
    assert "Deleted 1 file" in removed.stdout
    assert_one_error_line(
        run(runner, url, "files", "rm", "/memories/a.md", "--store", support_store), 1
    )

    cleared = ok(run(runner, url, "files", "clear", "--store", support_store, "--yes", "--json"))
    assert json.loads(cleared.stdout) == {"store_key": support_store, "deleted": 1}
    assert "has no files" in ok(run(runner, url, "files", "ls", "--store", support_store)).stdout


def test_files_commands_accept_a_store_id_instead_of_a_key(
    runner: CliRunner, url: str, support_store: str
) -> None:
    stores = json.loads(ok(run(runner, url, "files", "ls", "--json")).stdout)
    assert [(s["store_key"], s["files"], s["chars"]) for s in stores] == [(support_store, 2, 9)]
    store_id = str(stores[0]["store_id"])
    assert (
        ok(run(runner, url, "files", "cat", "/memories/dir/b.md", "--store-id", store_id)).stdout
        == "beta"
    )
    assert_one_error_line(run(runner, url, "files", "ls", "--store-id", "999"), 1)


def test_files_need_exactly_one_of_store_and_store_id(
    runner: CliRunner, url: str, support_store: str
) -> None:
    assert_one_error_line(run(runner, url, "files", "cat", "/memories/a.md"), 2)
    assert_one_error_line(
        run(
            runner,
            url,
            "files",
            "cat",
            "/memories/a.md",
            "--store",
            support_store,
            "--store-id",
            "1",
        ),
        2,
    )


def test_files_on_a_store_never_written_exit_1(runner: CliRunner, url: str) -> None:
    line = assert_one_error_line(run(runner, url, "files", "ls", "--store", "agent:GHOST"), 1)
    assert "agent:GHOST" in line


def test_files_rm_recursive_deletes_a_directory(
    runner: CliRunner, url: str, support_store: str
) -> None:
    assert_one_error_line(
        run(runner, url, "files", "rm", "/memories/dir", "--store", support_store), 1
    )
    result = ok(
        run(runner, url, "files", "rm", "/memories/dir", "-r", "--store", support_store, "--json")
    )
    assert json.loads(result.stdout)["deleted"] == 1


def test_files_clear_without_yes_asks_and_keeps_the_files_on_no(
    runner: CliRunner, url: str, support_store: str
) -> None:
    result = run(runner, url, "files", "clear", "--store", support_store, input="n\n")
    assert result.exit_code == 1
    assert (
        len(
            json.loads(
                ok(run(runner, url, "files", "ls", "--store", support_store, "--json")).stdout
            )
        )
        == 2
    )


def test_files_put_reads_stdin_or_a_file_and_keeps_line_endings(
    runner: CliRunner, url: str, support_store: str, tmp_path: Path
) -> None:
    ok(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/stdin.md",
            "--store",
            support_store,
            input="line 1\r\nline 2\n",
        )
    )
    got = ok(run(runner, url, "files", "cat", "/memories/stdin.md", "--store", support_store))
    assert got.stdout_bytes == b"line 1\r\nline 2\n"  # .stdout would turn CRLF into LF

    source = tmp_path / "note.md"
    source.write_bytes("café\r\n\ttab\n".encode())
    ok(run(runner, url, "files", "rm", "/memories/stdin.md", "--store", support_store))
    ok(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/file.md",
            "--store",
            support_store,
            "--from-file",
            str(source),
        )
    )
    record = json.loads(
        ok(
            run(
                runner, url, "files", "cat", "/memories/file.md", "--store", support_store, "--json"
            )
        ).stdout
    )
    assert record["text"] == "café\r\n\ttab\n" and record["chars"] == 11


def test_files_put_refuses_non_utf8_input_and_both_text_sources(
    runner: CliRunner, url: str, support_store: str, tmp_path: Path
) -> None:
    source = tmp_path / "latin1.txt"
    source.write_bytes("caf\xe9".encode("latin-1"))
    assert_one_error_line(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/x.md",
            "--store",
            support_store,
            "--from-file",
            str(source),
        ),
        2,
    )
    assert_one_error_line(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/x.md",
            "--store",
            support_store,
            "--from-file",
            str(source),
            "--text",
            "t",
        ),
        2,
    )
    assert_one_error_line(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/x.md",
            "--store",
            support_store,
            "--from-file",
            str(tmp_path / "missing.txt"),
        ),
        2,
    )


def test_files_put_respects_the_agents_caps_unless_no_caps(
    runner: CliRunner, url: str, support_store: str
) -> None:
    ok(
        run(
            runner, url, "files", "put", "/memories/c.md", "--store", support_store, "--text", "3rd"
        )
    )
    line = assert_one_error_line(
        run(
            runner, url, "files", "put", "/memories/d.md", "--store", support_store, "--text", "4th"
        ),
        1,
    )
    assert "max_files" in line or "3 files" in line
    ok(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/d.md",
            "--store",
            support_store,
            "--text",
            "4th",
            "--no-caps",
        )
    )
    assert (
        len(
            json.loads(
                ok(run(runner, url, "files", "ls", "--store", support_store, "--json")).stdout
            )
        )
        == 4
    )


def test_files_put_creates_a_store_named_by_a_new_key(runner: CliRunner, url: str) -> None:
    ok(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/policy.md",
            "--store",
            "shared:POLICIES",
            "--text",
            "Refunds within 30 days",
        )
    )
    stores = json.loads(ok(run(runner, url, "files", "ls", "--json")).stdout)
    assert [(s["store_key"], s["scope"], s["files"]) for s in stores] == [
        ("shared:POLICIES", "shared", 1)
    ]
    assert_one_error_line(
        run(
            runner, url, "files", "put", "/memories/x.md", "--store", "nonsense:key", "--text", "x"
        ),
        2,
    )


def test_files_put_with_an_invalid_path_is_exit_2(
    runner: CliRunner, url: str, support_store: str
) -> None:
    line = assert_one_error_line(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/../etc/passwd",
            "--store",
            support_store,
            "--text",
            "x",
        ),
        2,
    )
    assert ".." in line


# -- tool -------------------------------------------------------------------------------------


def test_tool_create_then_view_round_trip(runner: CliRunner, url: str) -> None:
    ok(run(runner, url, "agent", "enable", "SUPPORT"))
    create = json.dumps(
        {"command": "create", "path": "/memories/notes.md", "file_text": "one\ntwo\n"}
    )
    created = ok(run(runner, url, "tool", "--agent", "SUPPORT", create))
    assert "/memories/notes.md" in created.stdout

    view = json.dumps({"command": "view", "path": "/memories/notes.md"})
    viewed = ok(run(runner, url, "tool", "--agent", "SUPPORT", view))
    assert viewed.stdout.endswith("\n     1\tone\n     2\ttwo\n")

    listing = ok(run(runner, url, "tool", "--agent", "SUPPORT", ARGS_VIEW_ROOT))
    assert "/memories/notes.md" in listing.stdout
    # the write was committed: an admin read in a new process-like invocation sees it
    assert (
        ok(
            run(runner, url, "files", "cat", "/memories/notes.md", "--store", "agent:SUPPORT")
        ).stdout
        == "one\ntwo\n"
    )


def test_tool_error_text_exits_1_and_json_says_not_ok(runner: CliRunner, url: str) -> None:
    ok(run(runner, url, "agent", "enable", "SUPPORT"))
    view = json.dumps({"command": "view", "path": "/memories/missing.md"})
    failed = run(runner, url, "tool", "--agent", "SUPPORT", view)
    assert failed.exit_code == 1
    assert failed.stdout.startswith("Error: ")
    data = json.loads(run(runner, url, "tool", "--agent", "SUPPORT", view, "--json").stdout)
    assert data["ok"] is False and data["text"].startswith("Error: ")
    bad_json = run(runner, url, "tool", "--agent", "SUPPORT", "{not json")
    assert bad_json.exit_code == 1 and bad_json.stdout.startswith("Error: ")


def test_tool_for_an_agent_without_memory_says_how_to_enable_it(
    runner: CliRunner, url: str
) -> None:
    line = assert_one_error_line(run(runner, url, "tool", "--agent", "NOBODY", ARGS_VIEW_ROOT), 1)
    assert "dbmemory agent enable NOBODY" in line


def test_tool_for_a_context_scoped_agent_needs_its_context_key(runner: CliRunner, url: str) -> None:
    ok(
        run(
            runner,
            url,
            "agent",
            "enable",
            "DOCS",
            "--scope",
            "context",
            "--context-key",
            "document_id",
        )
    )
    line = assert_one_error_line(run(runner, url, "tool", "--agent", "DOCS", ARGS_VIEW_ROOT), 2)
    assert "--context document_id=" in line
    create = json.dumps({"command": "create", "path": "/memories/d.md", "file_text": "doc 7"})
    ok(run(runner, url, "tool", "--agent", "DOCS", "--context", "document_id=7", create))
    stores = json.loads(ok(run(runner, url, "files", "ls", "--json")).stdout)
    assert [s["store_key"] for s in stores] == ["context:DOCS:document_id:7"]
    assert_one_error_line(
        run(runner, url, "tool", "--agent", "DOCS", "--context", "document_id", create), 2
    )


def test_tool_on_a_shared_store_reads_arguments_from_stdin(runner: CliRunner, url: str) -> None:
    create = json.dumps({"command": "create", "path": "/memories/p.md", "file_text": "policy"})
    ok(run(runner, url, "tool", "--shared", "POLICIES", "-", input=create))
    assert (
        "/memories/p.md"
        in ok(run(runner, url, "tool", "--shared", "POLICIES", ARGS_VIEW_ROOT)).stdout
    )
    assert_one_error_line(run(runner, url, "tool", ARGS_VIEW_ROOT), 2)
    assert_one_error_line(
        run(runner, url, "tool", "--shared", "P", "--agent", "A", ARGS_VIEW_ROOT), 2
    )


# -- expire -----------------------------------------------------------------------------------


def test_expire_dry_run_counts_without_deleting_then_expire_deletes(
    runner: CliRunner, url: str, support_store: str
) -> None:
    assert (
        "0 files would expire" in ok(run(runner, url, "expire", "--days", "30", "--dry-run")).stdout
    )
    age_files(url, 40)
    dry = json.loads(ok(run(runner, url, "expire", "--days", "30", "--dry-run", "--json")).stdout)
    assert dry == {
        "days": 30, "store_key": None, "dry_run": True, "expired": 2,
        "items_expired": None, "items_purged": None,  # a dry run leaves memory items alone
        "episodes_expired": None,
    }
    assert (
        len(
            json.loads(
                ok(run(runner, url, "files", "ls", "--store", support_store, "--json")).stdout
            )
        )
        == 2
    )

    done = ok(run(runner, url, "expire", "--days", "30"))
    assert "Expired 2 files" in done.stdout
    assert (
        json.loads(ok(run(runner, url, "files", "ls", "--store", support_store, "--json")).stdout)
        == []
    )
    assert (
        json.loads(ok(run(runner, url, "expire", "--days", "30", "--json")).stdout)["expired"] == 0
    )


def test_expire_with_a_store_touches_only_that_store(
    runner: CliRunner, url: str, support_store: str
) -> None:
    ok(
        run(
            runner,
            url,
            "files",
            "put",
            "/memories/p.md",
            "--store",
            "shared:POLICIES",
            "--text",
            "p",
        )
    )
    age_files(url, 100)
    result = ok(run(runner, url, "expire", "--days", "30", "--store", "shared:POLICIES", "--json"))
    assert json.loads(result.stdout)["expired"] == 1
    assert (
        len(
            json.loads(
                ok(run(runner, url, "files", "ls", "--store", support_store, "--json")).stdout
            )
        )
        == 2
    )


def test_expire_needs_a_positive_number_of_days(runner: CliRunner, url: str) -> None:
    assert_one_error_line(run(runner, url, "expire", "--days", "0"), 2)
    assert_one_error_line(run(runner, url, "expire", "--days", "-3", "--dry-run"), 2)
    assert_one_error_line(run(runner, url, "expire", "--dry-run"), 2)  # --days is required


# -- every backend ----------------------------------------------------------------------------


def test_the_cli_round_trip_works_on_every_backend(runner: CliRunner, engine: Engine) -> None:
    from dbmemory.db.migrate import head

    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pytest.skip("each CLI command opens its own engine: an in-memory database is not shared")
    url = engine.url.render_as_string(hide_password=False)

    assert json.loads(ok(run(runner, url, "db", "current", "--json")).stdout)["current"] == head()
    ok(run(runner, url, "agent", "enable", "SUPPORT", "--max-files", "5"))
    create = json.dumps({"command": "create", "path": "/memories/n.md", "file_text": "héllo\n"})
    ok(run(runner, url, "tool", "--agent", "SUPPORT", create))
    again = run(runner, url, "tool", "--agent", "SUPPORT", create)
    assert again.exit_code == 1 and again.stdout.startswith("Error: ")
    ok(
        run(
            runner, url, "files", "put", "/memories/p.md", "--store", "agent:SUPPORT", "--text", "x"
        )
    )
    listed = json.loads(
        ok(run(runner, url, "files", "ls", "--store", "agent:SUPPORT", "--json")).stdout
    )
    assert [(f["path"], f["chars"]) for f in listed] == [
        ("/memories/n.md", 6),
        ("/memories/p.md", 1),
    ]
    assert (
        ok(run(runner, url, "files", "cat", "/memories/n.md", "--store", "agent:SUPPORT")).stdout
        == "héllo\n"
    )
    age_files(url, 10)
    dry = json.loads(ok(run(runner, url, "expire", "--days", "5", "--dry-run", "--json")).stdout)
    assert dry["expired"] == 2
    assert (
        json.loads(ok(run(runner, url, "expire", "--days", "5", "--json")).stdout)["expired"] == 2
    )
    assert (
        json.loads(
            ok(run(runner, url, "agent", "disable", "SUPPORT", "--drop-store", "--json")).stdout
        )["stores_dropped"]
        == 1
    )


# -- errors -----------------------------------------------------------------------------------


def test_an_unreachable_database_is_one_line_without_traceback_or_password(
    runner: CliRunner,
) -> None:
    secret = "s3cr3t-pw"
    result = runner.invoke(
        app, ["agent", "list", "--url", f"postgresql://bob:{secret}@127.0.0.1:1/nodb"]
    )
    line = assert_one_error_line(result, 1)
    assert secret not in result.output
    assert "nothing accepts connections at the host and port" in line


def test_an_unparseable_url_is_exit_2_and_is_not_echoed(runner: CliRunner) -> None:
    result = runner.invoke(app, ["db", "current", "--url", "::not a url with pw hunter2::"])
    assert_one_error_line(result, 2)
    assert "hunter2" not in result.output


def test_a_database_without_the_schema_says_to_run_db_upgrade(
    runner: CliRunner, bare_url: str
) -> None:
    line = assert_one_error_line(run(runner, bare_url, "agent", "list"), 1)
    assert "dbmemory db upgrade" in line


def test_a_usage_error_is_one_line_with_exit_2(runner: CliRunner, url: str) -> None:
    line = assert_one_error_line(run(runner, url, "files", "ls", "--no-such-option"), 2)
    assert "--no-such-option" in line and "dbmemory files ls --help" in line
    assert_one_error_line(run(runner, url, "no-such-command"), 2)


# -- help, docs, start-up ---------------------------------------------------------------------


def test_the_cli_has_the_commands_of_the_issue() -> None:
    names = {" ".join(path) for path in leaf_commands()}
    assert {
        "db upgrade",
        "db current",
        "db downgrade",
        "agent enable",
        "agent disable",
        "agent list",
        "files ls",
        "files cat",
        "files put",
        "files rm",
        "files clear",
        "tool",
        "expire",
    } <= names


@pytest.mark.parametrize(
    "path", [(), *group_commands(), *leaf_commands()], ids=lambda p: " ".join(p) or "dbmemory"
)
def test_every_command_help_has_an_example(runner: CliRunner, path: tuple[str, ...]) -> None:
    result = ok(runner.invoke(app, [*path, "--help"], prog_name="dbmemory"))
    assert "Example" in result.stdout
    assert "dbmemory" in result.stdout


def test_every_command_appears_in_the_documentation() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert (REPO / "docs" / "cli.md").is_file(), "docs/cli.md is missing: it must list every CLI command"
    text = " ".join(" ".join(page.read_text(encoding="utf-8").split()) for page in pages)
    missing = [
        f"dbmemory {' '.join(path)}"
        for path in leaf_commands()
        if not re.search(rf"dbmemory {re.escape(' '.join(path))}\b", text)
    ]
    assert not missing, f"neither README.md nor docs/*.md shows: {missing}"


def test_version_option_prints_the_version(runner: CliRunner) -> None:
    assert ok(runner.invoke(app, ["--version"])).stdout.startswith("dbmemory ")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DBMEMORY_URL"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_importing_the_cli_does_not_import_litellm() -> None:
    done = _python("import dbmemory.cli, sys; assert 'litellm' not in sys.modules")
    assert done.returncode == 0, done.stderr


def test_the_cli_modules_import_no_database_or_output_library_beyond_the_package() -> None:
    # ``import dbmemory`` may load SQLAlchemy for its re-exports; the CLI modules add nothing
    # heavy on top: engines, alembic, pydantic-settings and rich load inside the commands.
    done = _python(
        "import sys, dbmemory; before = set(sys.modules); import dbmemory.cli; "
        "new = set(sys.modules) - before; "
        "heavy = sorted(m for m in new if m.split('.')[0] in "
        "('sqlalchemy', 'alembic', 'pydantic_settings', 'rich', 'litellm')); "
        "assert not heavy, heavy"
    )
    assert done.returncode == 0, done.stderr


def test_python_dash_m_dbmemory_help_works_without_litellm() -> None:
    done = _python(
        "import runpy, sys; sys.argv = ['dbmemory', '--help']\n"
        "try:\n    runpy.run_module('dbmemory', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "assert 'litellm' not in sys.modules"
    )
    assert done.returncode == 0, done.stderr


def test_each_lazy_command_line_matches_what_its_module_registers() -> None:
    """``dbmemory --help`` lists commands from :data:`dbmemory.cli.COMMANDS` without importing
    their modules: each line must be the command's own one-line help."""
    from dbmemory.cli import COMMANDS
    from dbmemory.cli._common import LazyCommand

    for name, (modules, line) in COMMANDS.items():
        real = LazyCommand(name, modules, line).real()
        assert real.get_short_help_str(limit=1000) == line, name


def test_the_top_level_help_imports_no_command_module_and_no_sqlalchemy() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from dbmemory.cli import app\n"
        "result = CliRunner().invoke(app, ['--help'])\n"
        "assert result.exit_code == 0, result.output\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('sqlalchemy', 'dbmemory.store',"
        " 'dbmemory.db', 'dbmemory.cli.files', 'litellm')))\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
