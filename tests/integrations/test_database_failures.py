"""Every entry point answers a database failure in its own convention, never with a raw driver
exception or text: the MEMORY tool and MCP with tool text, the Anthropic adapter with the SDK's
``ToolError``, ``DbMemoryStore`` and ``run_turn`` with a :class:`~dbmemory.errors.DbMemoryError`
(the driver's exception chained), the CLI with exit code 1 and one ``Error:`` line. A failure to
connect names the database (host:port/database or the SQLite file), never the password.

The failures are real: a closed port (server backends) or a SQLite file in a folder that does
not exist, and an engine whose one pooled connection is held (pool exhausted)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from dbmemory.agent import run_turn
from dbmemory.cli import app
from dbmemory.db.engine import create_engine
from dbmemory.errors import DbMemoryError, StorageError
from dbmemory.integrations.langgraph import DbMemoryStore
from dbmemory.integrations.mcp_server import McpMemoryServer
from dbmemory.store.agents import enable_for_agent

AGENT = "SUPPORT"
SECRET = "s3cret-Pw-42"
RAW_MARKERS = (
    "OperationalError",
    "TimeoutError",
    "psycopg",
    "pymysql",
    "sqlite3",
    "sqlalche.me",
    "Background on this error",
    "QueuePool",
    SECRET,
)


def _unreachable_url(engine: Engine, tmp_path: Path) -> tuple[str, str]:
    """(a URL nothing answers at, with a password; the target its message must name)."""
    if engine.dialect.name == "sqlite":
        path = tmp_path / "no-such-folder" / "memory.db"
        return f"sqlite:///{path.as_posix()}", f"the SQLite file {path.as_posix()}"
    url = engine.url.set(port=1, password=SECRET)
    return url.render_as_string(hide_password=False), f"{url.host}:1/{url.database}"


@pytest.fixture
def unreachable(engine: Engine, tmp_path: Path) -> Iterator[tuple[Engine, str, str]]:
    raw, target = _unreachable_url(engine, tmp_path)
    eng = create_engine(raw)
    try:
        yield eng, raw, target
    finally:
        eng.dispose()


@contextmanager
def exhausted_pool(engine: Engine) -> Iterator[Engine]:
    """An engine on the test's database whose only connection is held by the test."""
    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pytest.skip("an in-memory SQLite engine shares one connection: it has no pool to exhaust")
    url = engine.url.render_as_string(hide_password=False)
    eng = create_engine(url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    held = eng.connect()
    try:
        yield eng
    finally:
        held.close()
        eng.dispose()


def assert_truthful(text: str) -> None:
    for marker in RAW_MARKERS:
        assert marker not in text, text


def assert_dbmemory_error(exc: BaseException, *, code: str | None = None, names: str | None = None) -> None:
    assert isinstance(exc, DbMemoryError), repr(exc)
    assert isinstance(exc.__cause__, sa.exc.SQLAlchemyError), repr(exc.__cause__)
    assert_truthful(exc.message)
    if code is not None:
        assert exc.code == code, exc.message
    if names is not None:
        assert names in exc.message, exc.message


# ----------------------------------------------------------------- the Anthropic adapter


def _view() -> Any:
    anthropic_beta = pytest.importorskip("anthropic.types.beta")
    return anthropic_beta.BetaMemoryTool20250818ViewCommand(command="view", path="/memories")


def test_anthropic_adapter_given_an_unreachable_engine_raises_a_tool_error_naming_the_database(
    unreachable: tuple[Engine, str, str],
) -> None:
    from anthropic.lib.tools import ToolError  # optional dependency, skipped without it

    from dbmemory.integrations.anthropic_tool import DbMemoryTool

    eng, _raw, target = unreachable
    with pytest.raises(ToolError) as info:
        DbMemoryTool(eng, AGENT, user_id="u1").execute(_view())
    text = str(info.value)
    assert_truthful(text)
    assert target in text


def test_anthropic_adapter_on_an_exhausted_pool_says_no_connection_came_free(engine: Engine) -> None:
    from anthropic.lib.tools import ToolError  # optional dependency, skipped without it

    from dbmemory.integrations.anthropic_tool import DbMemoryTool

    view = _view()
    with exhausted_pool(engine) as eng, pytest.raises(ToolError) as info:
        DbMemoryTool(eng, AGENT, user_id="u1").execute(view)
    text = str(info.value)
    assert_truthful(text)
    assert "no database connection came free" in text
    assert "pool_size=1, max_overflow=0" in text


# ----------------------------------------------------------------------------------- MCP


def test_mcp_memory_call_on_an_unreachable_database_answers_error_text(
    unreachable: tuple[Engine, str, str],
) -> None:
    eng, _raw, target = unreachable
    server = McpMemoryServer(eng, AGENT, user_id="u1")
    text = server.call_memory({"command": "view", "path": "/memories"})
    assert text.startswith("Error: ")
    assert_truthful(text)
    with pytest.raises(StorageError) as info:
        server.check()
    assert_dbmemory_error(info.value, code="connect_failed", names=target)


def test_mcp_memory_call_on_an_exhausted_pool_answers_error_text(engine: Engine) -> None:
    with exhausted_pool(engine) as eng:
        text = McpMemoryServer(eng, AGENT, user_id="u1").call_memory(
            {"command": "view", "path": "/memories"}
        )
    assert text.startswith("Error: ")
    assert_truthful(text)
    assert "no database connection came free" in text


# ------------------------------------------------------------------- the LangGraph store


def test_langgraph_store_on_an_unreachable_database_raises_a_dbmemory_error(
    unreachable: tuple[Engine, str, str],
) -> None:
    eng, _raw, target = unreachable
    store = DbMemoryStore(eng)
    with pytest.raises(DbMemoryError) as info:
        store.get(("users", "u1"), "prefs")
    assert_dbmemory_error(info.value, code="connect_failed", names=target)
    with pytest.raises(DbMemoryError) as info:
        store.put(("users", "u1"), "prefs", {"tea": True})
    assert_dbmemory_error(info.value, code="connect_failed", names=target)


def test_langgraph_store_on_an_exhausted_pool_raises_a_dbmemory_error(engine: Engine) -> None:
    with exhausted_pool(engine) as eng, pytest.raises(DbMemoryError) as info:
        DbMemoryStore(eng).get(("users", "u1"), "prefs")
    assert_dbmemory_error(info.value, code="pool_exhausted")


# ------------------------------------------------------------------------------ run_turn


def _never_called(**_: Any) -> Any:
    raise AssertionError("the model must not be called when the database cannot be reached")


def test_run_turn_on_an_unreachable_database_raises_a_dbmemory_error(
    unreachable: tuple[Engine, str, str],
) -> None:
    eng, _raw, target = unreachable
    with pytest.raises(DbMemoryError) as info:
        run_turn(
            eng,
            agent_code=AGENT,
            user_id="u1",
            messages=[{"role": "user", "content": "hi"}],
            model="gpt-4o-mini",
            complete=_never_called,
        )
    assert_dbmemory_error(info.value, code="connect_failed", names=target)


def test_run_turn_on_an_exhausted_pool_raises_a_dbmemory_error(engine: Engine) -> None:
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT)
    with exhausted_pool(engine) as eng, pytest.raises(DbMemoryError) as info:
        run_turn(
            eng,
            agent_code=AGENT,
            user_id="u1",
            messages=[{"role": "user", "content": "hi"}],
            model="gpt-4o-mini",
            complete=_never_called,
        )
    assert_dbmemory_error(info.value, code="pool_exhausted")


# ---------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize(
    "command",
    [("files", "ls"), ("expire", "--days", "30"), ("items", "list", "u1"), ("db", "upgrade")],
    ids=lambda c: " ".join(c),
)
def test_cli_on_an_unreachable_database_exits_1_naming_the_database_without_the_password(
    unreachable: tuple[Engine, str, str], command: tuple[str, ...]
) -> None:
    _eng, raw, target = unreachable
    result = CliRunner().invoke(app, [*command, "--url", raw], prog_name="dbmemory")
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert_truthful(result.output)
    assert "unexpected" not in lines[0]
    assert target in lines[0]


# ------------------------------------------------------------ a statement timeout


def _limit_statements(conn: sa.Connection) -> str:
    """Give ``conn``'s session a 300 ms statement time limit; return the limit's name."""
    name = conn.dialect.name
    if name == "postgresql":
        conn.exec_driver_sql("SET statement_timeout = 300")
        return "statement_timeout"
    if name in ("mysql", "mariadb"):
        if "mariadb" in conn.exec_driver_sql("SELECT VERSION()").scalar_one().lower():
            conn.exec_driver_sql("SET SESSION max_statement_time = 0.3")
            return "max_statement_time"
        conn.exec_driver_sql("SET SESSION max_execution_time = 300")
        return "max_execution_time"
    pytest.skip(f"{name} has no statement time limit (SQLite's busy timeout says 'busy')")


def test_a_write_stopped_by_the_statement_time_limit_says_it_timed_out_and_nothing_was_written(
    engine: Engine,
) -> None:
    from dbmemory.store.files import put_file
    from dbmemory.store.resolve import run_store
    from dbmemory.tool import MemoryTool

    with engine.begin() as conn:
        enable_for_agent(conn, AGENT)
        put_file(conn, run_store(conn, AGENT, user_id="u1", session_id=None, run_context=None), "/memories/a.md", "first")
    with engine.connect() as holder, engine.connect() as waiter:
        limit = _limit_statements(waiter)
        waiter.commit()
        holder.begin()
        put_file(holder, run_store(holder, AGENT, user_id="u1", session_id=None, run_context=None), "/memories/a.md", "held")
        waiter.begin()
        text = MemoryTool(waiter, AGENT, user_id="u1").execute(
            {"command": "create", "path": "/memories/b.md", "file_text": "waiting"}
        )
        assert text.startswith("Error: The memory store timed out"), text
        assert limit in text and "nothing was written" in text, text
        assert "could not be reached" not in text
        assert "write lock of store" in text, text
        with pytest.raises(StorageError) as info:
            put_file(waiter, run_store(waiter, AGENT, user_id="u1", session_id=None, run_context=None), "/memories/c.md", "x")
        assert_dbmemory_error(info.value, code="statement_timeout", names=limit)
        waiter.rollback()
        holder.rollback()
        # the 300 ms limit is session state: the waiter's DB-API connection must not go back to
        # the shared pool, where later tests' lock waits would time out on it
        waiter.invalidate()
    with engine.connect() as conn:
        assert MemoryTool(conn, AGENT, user_id="u1").execute(
            {"command": "view", "path": "/memories/b.md"}
        ).startswith("Error: ")



# ------------------------------------------------------- the Python admin entry points


@pytest.mark.parametrize("call", ["upgrade", "current", "expire_files_committing", "item_retention"])
def test_python_admin_calls_on_an_unreachable_database_raise_dbmemory_errors_naming_it(
    unreachable: tuple[Engine, str, str], call: str
) -> None:
    from dbmemory.db import migrate
    from dbmemory.items.retention import run_item_retention_committing
    from dbmemory.store.expiry import expire_files_committing

    eng, _raw, target = unreachable
    calls = {
        "upgrade": lambda: migrate.upgrade(eng),
        "current": lambda: migrate.current(eng),
        "expire_files_committing": lambda: expire_files_committing(eng, days=30),
        "item_retention": lambda: run_item_retention_committing(eng),
    }
    with pytest.raises(DbMemoryError) as info:
        calls[call]()
    assert_dbmemory_error(info.value, code="connect_failed", names=target)
