"""Every statement the package actually runs compiles for Oracle 19c with no reserved word and no
CLOB comparison.

``test_oracle_compile.py`` checks the statements listed by ``statements.example_statements()``;
this module closes the gap to "every statement the package runs": it records every Core
statement executed while a representative workload (MEMORY tool commands and their errors,
admin file functions, expiry, agent configuration, stores, profiles, opt-out, import/export and
the CLI) runs on SQLite, then compiles each one for Oracle 19c and applies the same checks.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.sql.dml import UpdateBase
from typer.testing import CliRunner

import dbmemory
from dbmemory.db.engine import create_engine
from dbmemory.db.migrate import upgrade
from dbmemory.tool import MemoryTool
from oracle_checks import compiled, regex_problems, sqlglot_problems

_POSTCOMPILE = re.compile(r"__\[POSTCOMPILE_(\w+)\]")


@pytest.fixture()
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, sa.sql.Executable]]:
    """Statements executed by any engine while the test runs, keyed by their SQLite text."""
    seen: dict[str, sa.sql.Executable] = {}

    def record(conn: Any, clauseelement: Any, *args: Any) -> None:
        if isinstance(clauseelement, (sa.sql.Select, UpdateBase)):
            seen.setdefault(str(clauseelement), clauseelement)

    monkeypatch.setenv("DBMEMORY_URL", f"sqlite:///{(tmp_path / 'cli.db').as_posix()}")
    sa.event.listen(Engine, "before_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(Engine, "before_execute", record)


def _workload(engine: Engine, tmp_path: Path) -> None:
    from dbmemory.profile import config as profile_config
    from dbmemory.profile.load import load_user_memory
    from dbmemory.profile.optout import set_user_memory_enabled
    from dbmemory.profile.store import read_profile, write_profile
    from dbmemory.profile.transfer import export_profiles

    with engine.begin() as conn:
        dbmemory.enable_for_agent(conn, "A", scope="user", max_files=5, max_store_chars=10_000)
        dbmemory.enable_for_agent(conn, "S", scope="session")
        dbmemory.enable_for_agent(conn, "C", scope="context", context_key="doc")
        tool = MemoryTool(conn, "A", user_id="u1")
        for call in (
            {"command": "view", "path": "/memories"},
            {"command": "create", "path": "/memories/a/b.md", "file_text": "x\ny\n"},
            {"command": "create", "path": "/memories/a/b.md", "file_text": "again"},
            {"command": "create", "path": "/memories/a", "file_text": "dir"},
            {"command": "create", "path": "/memories/a/b.md/c", "file_text": "below a file"},
            {"command": "view", "path": "/memories/a/b.md", "view_range": [1, -1]},
            {"command": "view", "path": "/memories/a"},
            {"command": "str_replace", "path": "/memories/a/b.md", "old_str": "x", "new_str": "X"},
            {"command": "str_replace", "path": "/memories/a", "old_str": "x", "new_str": "X"},
            {"command": "insert", "path": "/memories/a/b.md", "insert_line": 0, "insert_text": "t"},
            {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/z"},
            {"command": "rename", "old_path": "/memories/z/b.md", "new_path": "/memories/q.md"},
            {"command": "delete", "path": "/memories/q.md"},
            {"command": "create", "path": "/memories/d/1.md", "file_text": "1"},
            {"command": "delete", "path": "/memories/d"},
            {"command": "view", "path": "/memories/missing.md"},
        ):
            tool.execute(call)
        fresh = MemoryTool(conn, "A", user_id="u1")
        fresh.execute({"command": "view", "path": "/memories/missing.md"})
        fresh.execute({"command": "view", "path": "/memories"})
        MemoryTool(conn, "S", session_id="s1").execute(
            {"command": "create", "path": "/memories/s.md", "file_text": "s"}
        )
        MemoryTool(conn, "C", run_context={"doc": "7"}).execute(
            {"command": "create", "path": "/memories/c.md", "file_text": "c"}
        )
        with dbmemory.use_store("TEAM"):
            MemoryTool(conn).execute({"command": "create", "path": "/memories/t.md", "file_text": "t"})
        store_id = dbmemory.resolve_store_id(conn, scope="user", agent_code="A", user_id="u1")
        dbmemory.put_file(conn, store_id, "/memories/p.md", "p", expected_version=0)
        dbmemory.put_file(conn, store_id, "/memories/p.md", "pp", expected_version=1)
        dbmemory.get_file(conn, store_id, "/memories/p.md", touch=True)
        dbmemory.list_files(conn, store_id)
        dbmemory.delete_file(conn, store_id, "/memories/p.md")
        dbmemory.count_expirable_files(conn, days=1)
        dbmemory.expire_files(conn, days=1, now=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=5))
        dbmemory.clear_store_files(conn, store_id)
        dbmemory.augment_system_prompt("base", conn, "A")
        dbmemory.list_agents(conn)
        dbmemory.end_session(conn, "s1")
        config = profile_config.UserMemoryConfig()
        write_profile(conn, "ann@example.com", "## Identity\n- Name: Ann\n", expected_version=0)
        read_profile(conn, "ann@example.com")
        load_user_memory(conn, "ann@example.com", config=config, model="gpt-4o-mini")
        set_user_memory_enabled(conn, "bob", False)
        set_user_memory_enabled(conn, "bob", True)
        dbmemory.disable_for_agent(conn, "A", drop_store=True)
    with engine.begin() as conn:
        export_profiles(conn, tmp_path / "export")


def _cli(tmp_path: Path) -> None:
    from dbmemory.cli import app

    runner = CliRunner()
    for args in (
        ["agent", "enable", "B", "--scope", "user"],
        ["agent", "list"],
        ["tool", "--agent", "B", "--user", "u", '{"command": "create", "path": "/memories/x.md", "file_text": "x"}'],
        ["files", "ls"],
        ["files", "ls", "--store", "user:B:u"],
        ["files", "cat", "/memories/x.md", "--store", "user:B:u"],
        ["files", "put", "/memories/y.md", "--store", "shared:T", "--text", "y"],
        ["files", "rm", "/memories/y.md", "--store", "shared:T"],
        ["expire", "--days", "30", "--dry-run"],
        ["expire", "--days", "30"],
        ["files", "clear", "--store", "user:B:u", "--yes"],
        ["agent", "disable", "B", "--drop-store"],
    ):
        result = runner.invoke(app, args, prog_name="dbmemory")
        assert result.exit_code == 0, (args, result.output)


def test_every_statement_the_package_runs_compiles_for_oracle_19c(
    recorded: dict[str, sa.sql.Executable], tmp_path: Path
) -> None:
    engine = create_engine(f"sqlite:///{(tmp_path / 'api.db').as_posix()}")
    upgrade(engine)
    cli_engine = create_engine(None)
    upgrade(cli_engine)
    cli_engine.dispose()
    recorded.clear()  # the migrations' own statements are checked by test_sql_scripts
    _workload(engine, tmp_path)
    _cli(tmp_path)
    engine.dispose()
    assert len(recorded) >= 30, sorted(recorded)
    failures: dict[str, list[str]] = {}
    for key, statement in recorded.items():
        try:
            sql = _POSTCOMPILE.sub(r":\1", _compiled_plain(statement))
        except Exception as exc:
            failures[key] = [f"does not compile for Oracle 19c: {type(exc).__name__}: {exc}"]
            continue
        problems = regex_problems(sql) + sqlglot_problems(sql)
        if problems:
            failures[key] = [*problems, sql]
    assert not failures, "\n\n".join(f"{k}:\n  " + "\n  ".join(p) for k, p in failures.items())


def _compiled_plain(statement: sa.sql.Executable) -> str:
    """Oracle 19c SQL; expanding IN lists stay placeholders (no values at hand)."""
    from dbmemory.db.dialect.oracle import oracle19_dialect

    try:
        return compiled(statement)
    except Exception:
        return str(statement.compile(dialect=oracle19_dialect()))
