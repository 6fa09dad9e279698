"""The examples of docs/sql.md's "The MEMORY tool in SQL" section run as written: the PL/pgSQL
loop on PostgreSQL, the ``mysql`` client calls on MariaDB; every answer is the one
:class:`~dbmemory.tool.memory_tool.MemoryTool` gives for the same arguments on a store of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from dbmemory.tool.memory_tool import MemoryTool
from sql_api_client import SqlApi

DOC = Path(__file__).resolve().parents[2] / "docs" / "sql.md"


def _blocks() -> list[str]:
    section = DOC.read_text(encoding="utf-8").split("## The MEMORY tool in SQL", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sql\n(.*?)```", section, re.S)


def _statements(block: str) -> list[str]:
    """The statements of a block: ``;`` at a line's end ends one, except inside ``$$ ... $$``."""
    out, current, quoted = [], [], False
    for line in block.splitlines():
        current.append(line)
        quoted ^= line.count("$$") % 2 == 1
        if line.rstrip().endswith(";") and not quoted:
            out.append("\n".join(current).strip().rstrip(";"))
            current = []
    return [s for s in out if s]


def test_the_documented_examples_are_two_runnable_blocks() -> None:
    blocks = _blocks()
    assert len(blocks) == 2
    assert "DO $$" in blocks[0] and "dbm_memory.run_command(" in blocks[0]
    assert "CALL dbm_memory_run_command(" in blocks[1]


def test_the_plpgsql_loop_answers_like_the_memory_tool(
    server_name: str, server_engine: Engine, api: SqlApi
) -> None:
    if server_name != "postgres":
        pytest.skip("the PL/pgSQL example")
    with server_engine.connect() as conn:
        transaction = conn.begin()
        rows: list[tuple[int, str]] = []
        for statement in _statements(_blocks()[0]):
            result = conn.exec_driver_sql(statement)
            if statement.startswith("SELECT"):
                rows = [(int(r[0]), str(r[1])) for r in result]
        arguments = [str(a) for (a,) in conn.exec_driver_sql(
            "SELECT arguments FROM tool_calls ORDER BY call_id")]
        tool = MemoryTool.for_store(conn, "support_kb_python", actor="agent:support")
        assert [answer for _, answer in rows] == [tool.execute(a) for a in arguments]
        assert len(rows) == 5 and rows[2][1].endswith("1\tPrefers phone.")
        transaction.rollback()


def test_the_mariadb_calls_answer_like_the_memory_tool(
    server_name: str, server_engine: Engine, api: SqlApi
) -> None:
    if server_name != "mysql":
        pytest.skip("the MariaDB example")
    statements = _statements(_blocks()[1])
    answers = []
    with server_engine.connect() as conn:
        for statement in statements:
            result = conn.exec_driver_sql(statement)
            if statement.startswith("SELECT"):
                answers.append(str(result.scalar()))
        # the same arguments through the Python tool: the JSON texts as MariaDB reads the literals
        texts = [re.search(r"'(\{.*\})'", s).group(1).replace("\\\\", "\\")  # type: ignore[union-attr]
                 for s in statements if "run_command" in s]
        conn.commit()  # the block's own COMMIT ended its transaction
        transaction = conn.begin()
        tool = MemoryTool.for_store(conn, "support_kb_python", actor="agent:support")
        assert answers == [tool.execute(t) for t in texts]
        transaction.rollback()
    assert answers[1].endswith("1\tPrefers email.")
