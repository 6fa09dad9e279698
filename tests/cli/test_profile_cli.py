"""``dbmemory profile ...``: every command on a temporary SQLite file, with help and examples."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from _profile_fakes import FakeModel, body_with
from dbmemory.cli._common import DbMemoryGroup
from dbmemory.cli.profile import register
from dbmemory.profile.format import parse_profile


def _app() -> typer.Typer:
    app = typer.Typer(cls=DbMemoryGroup, no_args_is_help=True)

    @app.callback()
    def _root() -> None:
        return None

    register(app)
    return app


APP = _app()
SRC = Path(__file__).resolve().parents[2] / "src"
FULL = body_with({"Identity": ["Name: Dana"], "Skills & Expertise": ["SQL"]})


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    from dbmemory.db import migrate
    from dbmemory.db.engine import create_engine
    from dbmemory.profile import optout

    monkeypatch.delenv("DBMEMORY_URL", raising=False)
    address = f"sqlite:///{(tmp_path / 'cli.db').as_posix()}"
    engine = create_engine(address)
    migrate.upgrade(engine)
    optout.user_settings.create(engine, checkfirst=True)
    engine.dispose()
    return address


def run(url: str, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(APP, list(args), input=input, env={"DBMEMORY_URL": url}, prog_name="dbmemory")


def ok(result: Result) -> Result:
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}"
    return result


@pytest.mark.parametrize(
    "path",
    [("profile",), *[("profile", c) for c in ("show", "edit", "delete", "import", "export", "consolidate")]],
    ids=" ".join,
)
def test_every_profile_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = ok(CliRunner().invoke(APP, [*path, "--help"], prog_name="dbmemory"))
    assert "Example" in result.stdout and "dbmemory profile" in result.stdout


def test_edit_show_and_delete_round_trip(url: str) -> None:
    ok(run(url, "profile", "edit", "ann@example.com", "--text", FULL))
    shown = ok(run(url, "profile", "show", "ann@example.com")).stdout
    profile = parse_profile(shown)
    assert profile.user_id == "ann@example.com" and profile.sections["Identity"] == "- Name: Dana"
    data = json.loads(ok(run(url, "profile", "show", "ann@example.com", "--json")).stdout)
    assert data["store_key"] == "reserved:profile:user-memory:ann_40example.com"
    assert data["version"] == 1 and data["tokens"] > 0
    ok(run(url, "profile", "edit", "ann@example.com", input=FULL.replace("SQL", "SQL, PL/SQL")))
    assert "PL/SQL" in ok(run(url, "profile", "show", "ann@example.com")).stdout
    ok(run(url, "profile", "delete", "ann@example.com", "--yes"))
    missing = run(url, "profile", "show", "ann@example.com")
    assert missing.exit_code == 1 and missing.stderr.startswith("Error: ")
    assert run(url, "profile", "delete", "ann@example.com", "--yes").exit_code == 1


def test_import_prefers_the_canonical_layout_and_export_writes_it(url: str, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    canonical = tree / "home-u-1" / "user-memory" / "memory.md"
    legacy = tree / "user-memory" / "u-1" / "memory.md"
    legacy_only = tree / "user-memory" / "u-2" / "memory.md"
    wrong = tree / "home-u-3" / "user-memory" / "memory.md"
    for path, text in [
        (canonical, body_with({"Identity": ["canonical"]})),
        (legacy, body_with({"Identity": ["legacy"]})),
        (legacy_only, '---\nuser_id: "u-2"\nturn_count: 4\n---\n' + body_with({"Identity": ["two"]})),
        (wrong, '---\nuser_id: "someone-else"\n---\n' + FULL),
    ]:
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
    report = json.loads(ok(run(url, "profile", "import", str(tree), "--json")).stdout)
    assert report["done"] == ["u-1", "u-2"]
    assert [s["item"] for s in report["skipped"]] == [str(wrong)]
    assert "canonical" in ok(run(url, "profile", "show", "u-1")).stdout
    assert parse_profile(ok(run(url, "profile", "show", "u-2")).stdout).turn_count == 4
    out = tmp_path / "out"
    ok(run(url, "profile", "export", str(out)))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("memory.md")) == [
        "home-u-1/user-memory/memory.md",
        "home-u-2/user-memory/memory.md",
    ]
    assert (out / "home-u-2/user-memory/memory.md").read_text(encoding="utf-8") == ok(
        run(url, "profile", "show", "u-2")
    ).stdout


def test_consolidate_runs_one_post_turn_step(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeModel(rewrite=FULL)
    import dbmemory.llm

    monkeypatch.setattr(dbmemory.llm, "complete", fake)
    result = ok(
        run(
            url, "profile", "consolidate", "u-9", "--user-text", "I am Dana",
            "--assistant-text", "Hi Dana", "--model", "gpt-4o-mini", "--json",
        )
    )
    data: dict[str, Any] = json.loads(result.stdout)
    assert data["outcome"] == "updated" and data["version"] == 1
    assert [c["purpose"] for c in data["calls"]] == ["gate", "rewrite", "scrub"]
    assert fake.models == ["gpt-4o-mini"] * 3


@pytest.mark.parametrize(
    "text",
    ["oops", "", "intro line\n## Identity\n- Name: Ann\n"],
    ids=["no-sections", "empty", "text-before-the-first-section"],
)
def test_edit_refuses_text_that_would_lose_content_and_keeps_the_profile(url: str, text: str) -> None:
    ok(run(url, "profile", "edit", "u-77", "--text", "## Identity\n- Name: Ann\n"))
    before = ok(run(url, "profile", "show", "u-77")).stdout
    result = run(url, "profile", "edit", "u-77", "--text", text)
    assert result.exit_code == 2, result.output
    assert "nothing was saved" in result.output
    assert ok(run(url, "profile", "show", "u-77")).stdout == before


def test_edit_with_the_same_text_writes_nothing(url: str) -> None:
    ok(run(url, "profile", "edit", "u-78", "--text", "## Identity\n- Name: Bo\n"))
    shown = ok(run(url, "profile", "show", "u-78")).stdout
    result = ok(run(url, "profile", "edit", "u-78", "--text", shown))
    assert "No change" in result.stdout and "version 1" in result.stdout


def test_import_and_export_say_why_a_file_or_a_user_was_refused(url: str, tmp_path: Path) -> None:
    ok(run(url, "profile", "edit", "u-1", "--text", FULL))
    before = ok(run(url, "profile", "show", "u-1")).stdout
    tree = tmp_path / "tree"
    for folder, text in [("u-1", "notes without any section\n"), ("victim", "---\nuser_id: [x\n---\n" + FULL)]:
        path = tree / f"home-{folder}" / "user-memory" / "memory.md"
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
    shown = ok(run(url, "profile", "import", str(tree))).stdout
    assert "Imported 0 profiles" in shown
    assert "none of the profile sections" in shown and "never taken from the folder name" in shown
    assert ok(run(url, "profile", "show", "u-1")).stdout == before
    assert run(url, "profile", "show", "victim").exit_code == 1
    ok(run(url, "profile", "edit", "Ann", "--text", FULL))
    ok(run(url, "profile", "edit", "ann", "--text", FULL))
    exported = json.loads(ok(run(url, "profile", "export", str(tmp_path / "out"), "--json")).stdout)
    assert len(exported["done"]) == 1  # u-1
    assert {s["item"] for s in exported["skipped"]} == {"Ann", "ann"}
    refused = run(url, "profile", "edit", "u-1", "--text", "no sections here")
    assert refused.exit_code != 0 and "none of the profile sections" in refused.stderr


def _edit_on_a_terminal(url: str, editor: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    """``dbmemory profile edit u-90`` in a child process whose stdin is a terminal (a pty), so
    the command opens ``editor`` instead of reading stdin."""
    primary, secondary = os.openpty()
    try:
        env = {**os.environ, "DBMEMORY_URL": url, "EDITOR": editor, "VISUAL": editor}
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
        return subprocess.run(
            [sys.executable, "-m", "dbmemory", "profile", "edit", "u-90"],
            stdin=secondary, capture_output=True, env=env, cwd=tmp_path, timeout=120, check=False,
        )
    finally:
        os.close(primary)
        os.close(secondary)


def test_edit_without_text_on_a_terminal_saves_what_the_editor_wrote(url: str, tmp_path: Path) -> None:
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys, pathlib\n"
        "path = pathlib.Path(sys.argv[-1])\n"
        "path.write_text(path.read_text() + '\\n## Identity\\n- Name: Edited in the editor\\n')\n",
        encoding="utf-8",
    )
    done = _edit_on_a_terminal(url, f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}", tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert "Name: Edited in the editor" in ok(run(url, "profile", "show", "u-90")).stdout


def test_edit_without_text_and_no_editor_that_runs_says_how_to_give_the_text(url: str, tmp_path: Path) -> None:
    done = _edit_on_a_terminal(url, str(tmp_path / "no-such-editor"), tmp_path)
    assert done.returncode == 2, done.stderr.decode()
    err = done.stderr.decode()
    assert "Traceback" not in err and "set $EDITOR" in err and "--text" in err
    assert run(url, "profile", "show", "u-90").exit_code == 1  # nothing was written
