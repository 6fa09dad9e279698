"""A COMMIT whose reply is lost is resolved: "saved" or "nothing was saved", not "may or may not".

A TCP proxy (``tests/commit_proxy.py``) between dbmemory and the real PostgreSQL or MariaDB
server cuts the connection at the ``COMMIT``: once before the server receives it (the server
rolls back: the answer says nothing was saved and to retry) and once after the server committed
but before its reply reaches dbmemory (the answer is the command's normal success text). dbmemory
finds out on a new connection (``dbmemory.store.units.resolved_commit``: PostgreSQL's
transaction id and ``pg_xact_status``; on MariaDB the id of the transaction's audit row, looked
for once the old session is gone). Only when it cannot find out within the bound does it say "may
or may not". Checked for the owners of a COMMIT: the MEMORY tool on an AUTOCOMMIT connection, a
turn's own transaction, the MCP server, the Anthropic SDK tool, the LangGraph store and the
expiry job's batch.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from tests.commit_proxy import CommitCutProxy

from _profile_fakes import FakeModel, body_with
from dbmemory.agent import run_turn
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.outcome import CommitToken, commit_token, forget_audit_row, resolve_commit
from dbmemory.db.engine import create_engine
from dbmemory.errors import ConflictError
from dbmemory.integrations.mcp_server import McpMemoryServer
from dbmemory.items.extract_prompts import purpose_of as item_purpose_of
from dbmemory.llm import Completion, ToolCall
from dbmemory.profile import (
    UserMemoryConfig,
    UserMemoryPostprocessor,
    load_user_memory,
    read_profile,
    write_profile,
)
from dbmemory.profile.prompts import purpose_of
from dbmemory.store.agents import enable_for_agent
from dbmemory.store.expiry import expire_files_committing
from dbmemory.tool import MemoryTool

AGENT = "SUPPORT"
MODEL = "gpt-4o-mini"
NOT_SAVED = "nothing was saved"
MAY_BE_SAVED = "may or may not have been saved"
MODES = ["before", "after"]


@pytest.fixture
def direct(server_engine: Engine) -> Engine:
    with server_engine.begin() as conn:
        enable_for_agent(conn, AGENT)
    return server_engine


@pytest.fixture
def proxy(direct: Engine) -> Iterator[CommitCutProxy]:
    p = CommitCutProxy(direct.url.host or "127.0.0.1", int(direct.url.port or 0))
    yield p
    p.close()


@pytest.fixture
def proxied(direct: Engine, proxy: CommitCutProxy) -> Iterator[Engine]:
    engine = create_engine(direct.url.set(host="127.0.0.1", port=proxy.port), commit_outcome_wait_s=10)
    with engine.connect():  # the pool's connection, set up (its set-up commits) before any cut
        pass
    yield engine
    engine.dispose()


def _view(engine: Engine, path: str = "/memories") -> str:
    with engine.begin() as conn:
        return MemoryTool(conn, AGENT).execute({"command": "view", "path": path})


def _check(answer: str, mode: str, success: str) -> None:
    if mode == "before":
        assert NOT_SAVED in answer and "retry" in answer, answer
    else:
        assert answer.startswith(success), answer
    assert MAY_BE_SAVED not in answer, answer


@pytest.mark.parametrize("mode", MODES)
def test_an_autocommit_callers_command(direct: Engine, proxy: CommitCutProxy, proxied: Engine, mode: str) -> None:
    with proxied.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        tool = MemoryTool(conn, AGENT)
        assert tool.execute({"command": "create", "path": "/memories/b.md", "file_text": "b\n"}).startswith("File created")
        proxy.cut_next_commit(mode)
        answer = tool.execute({"command": "insert", "path": "/memories/b.md", "insert_line": 1, "insert_text": "again"})
    assert proxy.cuts == 1
    _check(answer, mode, "The memory file /memories/b.md has been edited")
    assert ("again" in _view(direct, "/memories/b.md")) == (mode == "after")


@pytest.mark.parametrize("mode", MODES)
def test_a_turns_tool_call(direct: Engine, proxy: CommitCutProxy, proxied: Engine, mode: str) -> None:
    calls = iter(
        [
            Completion("", "tool_calls", [ToolCall("c1", "memory", {"command": "create", "path": "/memories/a.md", "file_text": "x"})]),
            Completion("done", "stop"),
        ]
    )

    def complete(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        if purpose_of(messages):
            return Completion("NOOP", "stop")
        if item_purpose_of(messages):
            return Completion("[]", "stop")
        completion = next(calls)
        if completion.tool_calls:
            proxy.cut_next_commit(mode)  # the COMMIT of this tool call's transaction
        return completion

    result = run_turn(proxied, agent_code=AGENT, user_id=None, messages=[{"role": "user", "content": "x"}],
                      model=MODEL, complete=complete)
    assert proxy.cuts == 1
    record = result.tool_calls[0]
    _check(record.result, mode, "File created")
    assert record.is_error == (mode == "before"), record.result
    assert result.answer == "done"
    assert ("a.md" in _view(direct)) == (mode == "after")


@pytest.mark.parametrize("mode", MODES)
def test_the_mcp_servers_call(direct: Engine, proxy: CommitCutProxy, proxied: Engine, mode: str) -> None:
    server = McpMemoryServer(proxied, AGENT)
    proxy.cut_next_commit(mode)
    answer = server.call_memory({"command": "create", "path": "/memories/m.md", "file_text": "m"})
    assert proxy.cuts == 1
    _check(answer.removeprefix("Error: "), mode, "File created")
    assert ("m.md" in _view(direct)) == (mode == "after")


@pytest.mark.parametrize("mode", MODES)
def test_the_anthropic_tools_command(direct: Engine, proxy: CommitCutProxy, proxied: Engine, mode: str) -> None:
    pytest.importorskip("anthropic")
    from anthropic.lib.tools import ToolError  # optional
    from anthropic.types.beta import BetaMemoryTool20250818CreateCommand as Create  # optional

    from dbmemory.integrations.anthropic_tool import DbMemoryTool  # optional (anthropic)

    tool = DbMemoryTool(proxied, AGENT)
    proxy.cut_next_commit(mode)
    try:
        answer = str(tool.create(Create(command="create", path="/memories/c.md", file_text="c")))
    except ToolError as exc:
        answer = str(exc)
    assert proxy.cuts == 1
    _check(answer, mode, "File created")
    assert ("c.md" in _view(direct)) == (mode == "after")


@pytest.mark.parametrize("mode", MODES)
def test_the_langgraph_stores_put(direct: Engine, proxy: CommitCutProxy, proxied: Engine, mode: str) -> None:
    pytest.importorskip("langgraph")
    from dbmemory.integrations.langgraph import DbMemoryStore  # optional (langgraph)

    store = DbMemoryStore(proxied)
    proxy.cut_next_commit(mode)
    try:
        store.put(("users", "u1"), "prefs", {"drink": "tea"})
        answer = "saved"
    except ConflictError as exc:
        answer = exc.message
    assert proxy.cuts == 1
    _check(answer, mode, "saved")
    item = DbMemoryStore(direct).get(("users", "u1"), "prefs")
    assert (item is not None) == (mode == "after")


@pytest.mark.parametrize("mode", MODES)
def test_a_profile_consolidations_write(direct: Engine, proxy: CommitCutProxy, proxied: Engine, mode: str) -> None:
    """The consolidation's own write transaction (given an Engine): a reply lost after the
    server committed is the written profile; one lost before is a rollback the consolidation
    answers like a compare-and-set conflict (it reloads and writes again). Updated once, either
    way: version 2 after the seed's 1."""
    with direct.begin() as conn:
        write_profile(conn, "u1", body_with({"Identity": ["Name: Dana"]}), expected_version=0)
    with direct.connect() as conn:
        state = load_user_memory(conn, "u1", config=UserMemoryConfig(), model=MODEL)
    rewrite = body_with({"Identity": ["Name: Dana"], "Skills & Expertise": ["SQL"]})
    fake = FakeModel(rewrite=rewrite)
    proxy.cut_next_commit(mode, after=b"INSERT INTO dbm_audit_events")  # the write's COMMIT
    result = UserMemoryPostprocessor(proxied, UserMemoryConfig(), MODEL, "u1", state, complete=fake).run(
        "I know SQL", "Good."
    )
    assert proxy.cuts == 1
    assert (result.outcome, result.reason) == ("updated", None if mode == "after" else "after a conflict"), result
    with direct.connect() as conn:
        record = read_profile(conn, "u1")
    assert record is not None and record.version == 2 and "- SQL" in record.text, record


def test_no_answer_within_the_bound_says_may_or_may_not(direct: Engine, proxy: CommitCutProxy) -> None:
    engine = create_engine(direct.url.set(host="127.0.0.1", port=proxy.port), commit_outcome_wait_s=0)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            tool = MemoryTool(conn, AGENT)
            proxy.cut_next_commit("after")
            proxy.refuse_new_connections()
            answer = tool.execute({"command": "create", "path": "/memories/u.md", "file_text": "u"})
    finally:
        engine.dispose()
    assert proxy.cuts == 1
    assert MAY_BE_SAVED in answer and "could not find out in time" in answer, answer
    assert "u.md" in _view(direct)  # it was saved: "nothing was saved" would have been wrong


def test_the_proxy_cuts_only_the_commit(direct: Engine, proxy: CommitCutProxy, proxied: Engine) -> None:
    proxy.cut_next_commit("before")
    with proxied.connect() as conn:
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1
        with pytest.raises(sa.exc.DBAPIError) as raised:
            conn.commit()
    assert raised.value.connection_invalidated and proxy.cuts == 1


@pytest.mark.parametrize("mode", MODES)
def test_the_expiry_jobs_batch(direct: Engine, proxy: CommitCutProxy, proxied: Engine, mode: str) -> None:
    assert _view(direct).count("old.md") == 0
    with direct.begin() as conn:
        MemoryTool(conn, AGENT).execute({"command": "create", "path": "/memories/old.md", "file_text": "o"})
    later = utcnow() + dt.timedelta(days=30)
    proxy.cut_next_commit(mode, after=b"dbm_audit_events")  # the batch's COMMIT
    try:
        answer = f"deleted {expire_files_committing(proxied, days=1, now=later)}"
    except ConflictError as exc:
        answer = exc.message
    assert proxy.cuts == 1
    if mode == "before":
        assert NOT_SAVED in answer and "retry" in answer, answer
    else:
        assert answer == "deleted 1", answer
    assert ("old.md" in _view(direct)) == (mode == "before")


# -- the look-up after the server changed: a restart, a promoted standby -------------------------


def _token_of_a_committed_create(engine: Engine, path: str) -> CommitToken:
    """The commit token of a transaction that created ``path`` (taken as dbmemory takes it, just
    before its COMMIT), then committed."""
    with engine.connect() as conn:
        with conn.begin():
            forget_audit_row(conn)  # as dbmemory's own transactions begin (a row of an earlier one)
            assert MemoryTool(conn, AGENT).execute(
                {"command": "create", "path": path, "file_text": "x"}
            ).startswith("File created")
            token = commit_token(conn)
    assert token is not None and token.row is not None, token
    return token


def _another_server(token: CommitToken) -> str:
    """``token.server`` as a server that started an hour earlier (the same address and port:
    the server before a restart, or the old primary of a failover)."""
    assert token.server is not None
    if token.kind == "audit_row":
        host, port, start = token.server.rsplit(" ", 2)
        return f"{host} {port} {int(start) - 3600}"
    return token.server.replace(token.server.split()[-2], "2001-01-01", 1)


def test_a_token_of_another_server_run_is_answered_from_its_audit_row(direct: Engine) -> None:
    """After a restart or a failover the old session is gone and its id may name another
    (MariaDB: a new session with the same id, alive; PostgreSQL: a transaction id the promoted
    server gave to another transaction): the audit row the transaction wrote answers."""
    token = _token_of_a_committed_create(direct, "/memories/r.md")
    with direct.connect() as other:  # a live session: the id a restarted server may reuse
        live = int(other.exec_driver_sql(
            "SELECT pg_backend_pid()" if token.kind == "xid" else "SELECT CONNECTION_ID()"
        ).scalar())
        moved = replace(token, session=live, server=_another_server(token))
        if token.kind == "xid":  # an id the promoted server never gave: pg_xact_status errs
            moved = replace(moved, value=str(int(token.value) + 10_000_000))
        assert resolve_commit(direct, moved, wait_s=2) == "saved"
        gone = replace(moved, row=tuple(
            (c, v + dt.timedelta(microseconds=1) if c == "created_at" else v) for c, v in token.row or ()
        ))
        assert resolve_commit(direct, gone, wait_s=2) == "not_saved"  # its row is not there
        if token.kind == "audit_row":  # the same server run: the live session is waited for
            assert resolve_commit(direct, replace(token, session=live), wait_s=0.5) is None


def test_an_audit_id_given_again_is_not_taken_for_the_lost_transaction(direct: Engine) -> None:
    """The id in the token is there, but its row is another transaction's (an id handed out
    again after a crash): nothing was saved, not "saved"."""
    token = _token_of_a_committed_create(direct, "/memories/i.md")
    token = replace(token, session=2**31 - 1)  # its session is gone (in the test: still pooled)
    other = replace(token, row=tuple(
        (c, "someone else" if c == "actor_name" else v) for c, v in token.row or ()
    ))
    assert resolve_commit(direct, token, wait_s=2) == "saved"
    assert resolve_commit(direct, other, wait_s=2) == ("not_saved" if token.kind == "audit_row" else "saved")
