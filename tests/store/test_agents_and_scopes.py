"""Agent configuration, store resolution and scopes (issue 2, "Stores, scopes and agent
config"; DESIGN.md section 4), on every backend.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import (
    Caps,
    InvalidArgumentError,
    InvalidScopeError,
    NotFoundError,
    augment_system_prompt,
    check_run_ready,
    disable_for_agent,
    enable_for_agent,
    end_session,
    get_agent_config,
    get_memory_protocol,
    list_agents,
    resolve_store,
    resolve_store_id,
    use_store,
)
from dbmemory.db.schema import agents, stores
from dbmemory.tool import MemoryTool
from dbmemory.tool.protocol import MEMORY_PROTOCOL
from helpers import ERROR, StatementLog, committed_view, counts, listing, store_files

NOT_FOUND = (
    "Error: The path {} does not exist. Please provide a valid path: view /memories to list "
    "the existing files."
)


def create(tool: MemoryTool, path: str, text: str) -> None:
    answer = tool.execute({"command": "create", "path": path, "file_text": text})
    assert answer == f"File created successfully at: {path}", answer


def store_keys(conn: Connection) -> set[str]:
    return set(conn.execute(sa.select(stores.c.store_key)).scalars())


# ========================================================================= enable_for_agent


def test_a_new_agent_gets_the_default_caps(conn: Connection) -> None:
    config = enable_for_agent(conn, "A")
    assert (config.agent_code, config.scope, config.store_code, config.context_key,
            config.memory_enabled) == ("A", "agent", None, None, True)
    assert config.caps == Caps(max_file_chars=100_000, max_files=1_000, max_store_chars=None)


def test_enable_for_agent_is_an_upsert_and_caps_left_out_are_the_defaults(conn: Connection) -> None:
    enable_for_agent(conn, "A", max_file_chars=10, max_files=5, max_store_chars=50)
    config = enable_for_agent(conn, "A", scope="user")
    assert config.scope == "user"
    assert config.caps == Caps()  # UC AI: null = default, never the old value
    config = enable_for_agent(conn, "A", scope="user", max_files=7)
    assert config.caps == Caps(max_file_chars=100_000, max_files=7, max_store_chars=None)
    assert [a.agent_code for a in list_agents(conn)] == ["A"]
    assert conn.execute(sa.select(sa.func.count()).select_from(agents)).scalar_one() == 1


def test_enable_for_agent_turns_a_disabled_agent_back_on_with_the_caps_given(conn: Connection) -> None:
    enable_for_agent(conn, "A", max_files=3)
    disable_for_agent(conn, "A")
    assert get_agent_config(conn, "A").memory_enabled is False
    config = enable_for_agent(conn, "A")
    assert (config.memory_enabled, config.caps.max_files) == (True, 1_000)
    config = enable_for_agent(conn, "A", max_files=3)
    assert (config.memory_enabled, config.caps.max_files) == (True, 3)


def test_enable_for_agent_stores_scope_details(conn: Connection) -> None:
    shared = enable_for_agent(conn, "S", scope="shared", store_code="TEAM")
    context = enable_for_agent(conn, "C", scope="context", context_key="document_id")
    named = enable_for_agent(conn, "N", scope="context", store_code="DOCS", context_key="doc")
    assert (shared.scope, shared.store_code, shared.context_key) == ("shared", "TEAM", None)
    assert (context.scope, context.store_code, context.context_key) == ("context", None, "document_id")
    assert (named.scope, named.store_code, named.context_key) == ("context", "DOCS", "doc")
    assert get_agent_config(conn, "N") == named


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"scope": "shared"}, InvalidScopeError,
         "scope 'shared' needs store_code: pass the shared store's code"),
        ({"scope": "context"}, InvalidScopeError,
         "scope 'context' needs context_key: pass the run-context key that names the store"),
        ({"scope": "context", "store_code": "DOCS"}, InvalidScopeError,
         "scope 'context' needs context_key: pass the run-context key that names the store"),
        ({"scope": "bogus"}, InvalidScopeError,
         "scope 'bogus' is not one of agent, user, session, shared, global, context: pick one of them"),
        ({"scope": "shared", "store_code": "a:b"}, InvalidScopeError, None),
        ({"scope": "context", "context_key": "doc id"}, InvalidScopeError, None),
        ({"max_files": 0}, InvalidArgumentError, "max_files must be a positive whole number, got 0: pass e.g. max_files=1_000"),
        ({"max_file_chars": -1}, InvalidArgumentError,
         "max_file_chars must be a positive whole number, got -1: pass e.g. max_file_chars=100_000"),
        ({"max_store_chars": 0}, InvalidArgumentError,
         "max_store_chars must be a positive whole number, got 0 (or None for no cap): pass e.g. max_store_chars=1_000_000"),
        ({"max_files": True}, InvalidArgumentError,
         "max_files must be a positive whole number, got True: pass e.g. max_files=1_000"),
        ({"max_files": 2.5}, InvalidArgumentError,
         "max_files must be a positive whole number, got 2.5: pass e.g. max_files=1_000"),
    ],
)
def test_enable_for_agent_refuses_bad_configuration_before_writing(
    conn: Connection, engine: Engine, kwargs: dict[str, Any], error: type, message: str | None
) -> None:
    with StatementLog(engine) as log, pytest.raises(error) as info:
        enable_for_agent(conn, "A", **kwargs)
    if message is not None:
        assert str(info.value) == message
    assert log.statements == []
    assert counts(conn) == (0, 0, 0)


@pytest.mark.parametrize("code", ["", "a b", "é", "a:b", "x" * 201, "a\n"])
def test_enable_for_agent_refuses_an_invalid_agent_code(conn: Connection, code: str) -> None:
    with pytest.raises(InvalidScopeError):
        enable_for_agent(conn, code)
    assert counts(conn) == (0, 0, 0)


def test_caps_set_on_the_agent_apply_to_its_tool(conn: Connection) -> None:
    enable_for_agent(conn, "A", max_files=1)
    tool = MemoryTool(conn, "A")
    create(tool, "/memories/one.md", "1")
    assert tool.execute({"command": "create", "path": "/memories/two.md", "file_text": "2"}) == (
        "Error: Cannot create /memories/two.md: the memory store already holds 1 file, the most "
        "it may hold. Delete or merge files you no longer need, then retry."
    )
    assert counts(conn)[1] == 1


# ======================================================================== disable_for_agent


def _write_everywhere(conn: Connection) -> None:
    """Agent A writes in each scope in turn; agent B writes its own agent store."""
    enable_for_agent(conn, "A")
    create(MemoryTool(conn, "A"), "/memories/agent.md", "a")
    enable_for_agent(conn, "A", scope="user")
    create(MemoryTool(conn, "A", user_id="u1"), "/memories/u1.md", "u1")
    create(MemoryTool(conn, "A", user_id="u2"), "/memories/u2.md", "u2")
    enable_for_agent(conn, "A", scope="session")
    create(MemoryTool(conn, "A", session_id="S1"), "/memories/s.md", "s")
    enable_for_agent(conn, "A", scope="context", context_key="doc")
    create(MemoryTool(conn, "A", run_context={"doc": "7"}), "/memories/c.md", "c")
    enable_for_agent(conn, "A", scope="context", store_code="DOCS", context_key="doc")
    create(MemoryTool(conn, "A", run_context={"doc": "7"}), "/memories/named.md", "n")
    enable_for_agent(conn, "A", scope="shared", store_code="TEAM")
    create(MemoryTool(conn, "A"), "/memories/team.md", "t")
    enable_for_agent(conn, "A", scope="global")
    create(MemoryTool(conn, "A"), "/memories/global.md", "g")
    enable_for_agent(conn, "B")
    create(MemoryTool(conn, "B"), "/memories/b.md", "b")


ALL_KEYS = {
    "agent:A", "user:A:u1", "user:A:u2", "session:S1", "context:A:doc:7",
    "context:store:DOCS:doc:7", "shared:TEAM", "global", "agent:B",
}


def test_disable_with_drop_store_drops_the_agent_own_stores_only(
    conn: Connection, engine: Engine
) -> None:
    """Agent, user and agent-keyed context stores go; a session store (another agent may write
    it: UC AI contract), shared, global and store-code context stores stay."""
    _write_everywhere(conn)
    assert store_keys(conn) == ALL_KEYS
    conn.commit()
    assert disable_for_agent(conn, "A", drop_store=True) == 4
    conn.commit()
    with committed_view(engine) as c2:
        assert store_keys(c2) == {
            "session:S1", "context:store:DOCS:doc:7", "shared:TEAM", "global", "agent:B",
        }
        assert store_files(c2) == {
            "/memories/s.md": "s", "/memories/named.md": "n", "/memories/team.md": "t",
            "/memories/global.md": "g", "/memories/b.md": "b",
        }
        assert get_agent_config(c2, "A").memory_enabled is False


def test_disable_without_drop_store_keeps_every_store_and_refuses_new_runs(
    conn: Connection,
) -> None:
    _write_everywhere(conn)
    assert disable_for_agent(conn, "A") == 0
    assert store_keys(conn) == ALL_KEYS
    with pytest.raises(InvalidScopeError) as info:
        MemoryTool(conn, "A")
    assert info.value.code == "memory_disabled"
    assert str(info.value) == (
        "memory is disabled for agent 'A': call enable_for_agent to turn it on"
    )


def test_re_enabling_an_agent_shows_its_old_files_again(conn: Connection) -> None:
    enable_for_agent(conn, "A")
    create(MemoryTool(conn, "A"), "/memories/kept.md", "k")
    disable_for_agent(conn, "A")
    enable_for_agent(conn, "A")
    assert MemoryTool(conn, "A").execute({"command": "view", "path": "/memories"}) == listing(
        "/memories", "1\t/memories", "1\t/memories/kept.md"
    )


def test_disable_of_an_unknown_agent_is_not_found(conn: Connection) -> None:
    with pytest.raises(NotFoundError) as info:
        disable_for_agent(conn, "NOPE", drop_store=True)
    assert str(info.value) == (
        "agent 'NOPE' has no memory configuration: call enable_for_agent first"
    )


# ================================================================ resolve_store and friends


@pytest.mark.parametrize(
    ("config", "run", "lookup"),
    [
        ({}, {}, {"scope": "agent", "agent_code": "A"}),
        ({"scope": "user"}, {"user_id": "u1"}, {"scope": "user", "agent_code": "A", "user_id": "u1"}),
        ({"scope": "session"}, {"session_id": "S1"}, {"scope": "session", "session_id": "S1"}),
        ({"scope": "shared", "store_code": "TEAM"}, {}, {"scope": "shared", "store_code": "TEAM"}),
        ({"scope": "global"}, {}, {"scope": "global"}),
        ({"scope": "context", "context_key": "doc"}, {"run_context": {"doc": "7"}},
         {"scope": "context", "agent_code": "A", "context_key": "doc", "context_value": "7"}),
        ({"scope": "context", "store_code": "DOCS", "context_key": "doc"},
         {"run_context": {"doc": "7"}},
         {"scope": "context", "store_code": "DOCS", "context_key": "doc", "context_value": "7"}),
    ],
)
def test_a_store_is_not_found_until_its_first_write(
    conn: Connection, config: dict[str, Any], run: dict[str, Any], lookup: dict[str, Any]
) -> None:
    enable_for_agent(conn, "A", **config)
    with pytest.raises(NotFoundError) as info:
        resolve_store_id(conn, **lookup)
    assert str(info.value).endswith("does not exist (it is created on its first write)")
    ref = resolve_store(conn, "A", **run)
    assert ref.store_id is None
    tool = MemoryTool(conn, "A", **run)
    assert tool.execute({"command": "view", "path": "/memories"}) == listing("/memories", "0\t/memories")
    assert counts(conn)[0] == 0
    create(tool, "/memories/x.md", "x")
    store_id = resolve_store_id(conn, **lookup)
    assert resolve_store(conn, "A", **run).store_id == store_id
    assert resolve_store(conn, "A", **run).store_key == ref.store_key


@pytest.mark.parametrize(
    ("config", "run", "code"),
    [
        ({"scope": "user"}, {}, "missing_user_id"),
        ({"scope": "session"}, {}, "missing_session_id"),
        ({"scope": "context", "context_key": "doc"}, {}, "missing_context_key"),
        ({"scope": "context", "context_key": "doc"}, {"run_context": {"doc": "a b"}}, "invalid_scope"),
        ({"scope": "user"}, {"user_id": "bob@example.com"}, "invalid_scope"),
    ],
)
def test_check_run_ready_raises_before_anything_is_created(
    conn: Connection, engine: Engine, config: dict[str, Any], run: dict[str, Any], code: str
) -> None:
    enable_for_agent(conn, "A", **config)
    conn.commit()
    with StatementLog(engine) as log:
        with pytest.raises(InvalidScopeError) as info:
            check_run_ready(conn, "A", **run)
        with pytest.raises(InvalidScopeError):
            MemoryTool(conn, "A", **run)
    assert info.value.code == code
    assert log.of_kind("INSERT", "UPDATE", "DELETE") == []
    conn.commit()
    with committed_view(engine) as c2:
        assert counts(c2)[:2] == (0, 0)


def test_check_run_ready_of_an_unknown_agent_is_not_found(conn: Connection) -> None:
    with pytest.raises(NotFoundError):
        check_run_ready(conn, "NOPE")
    with pytest.raises(NotFoundError):
        MemoryTool(conn, "NOPE")


def test_check_run_ready_names_the_store_without_looking_it_up(
    conn: Connection, engine: Engine
) -> None:
    enable_for_agent(conn, "A", scope="user")
    with StatementLog(engine) as log:
        ref = check_run_ready(conn, "A", user_id="u-7")
    assert (ref.store_key, ref.scope, ref.agent_code, ref.store_id) == ("user:A:u-7", "user", "A", None)
    assert not any("dbm_stores" in s for s in log.statements)


# ============================================================================= end_session


def test_end_session_drops_the_session_store_with_its_files(conn: Connection, engine: Engine) -> None:
    enable_for_agent(conn, "A", scope="session")
    create(MemoryTool(conn, "A", session_id="S1"), "/memories/a.md", "a")
    create(MemoryTool(conn, "A", session_id="S1"), "/memories/b.md", "b")
    create(MemoryTool(conn, "A", session_id="S2"), "/memories/c.md", "c")
    conn.commit()
    assert end_session(conn, "S1") == 1
    assert end_session(conn, "S1") == 0
    conn.commit()
    with committed_view(engine) as c2:
        assert store_keys(c2) == {"session:S2"}
        assert store_files(c2) == {"/memories/c.md": "c"}
    tool = MemoryTool(conn, "A", session_id="S1")
    assert tool.execute({"command": "view", "path": "/memories"}) == listing("/memories", "0\t/memories")


def test_end_session_of_a_session_never_written_is_zero(conn: Connection) -> None:
    assert end_session(conn, "never") == 0


def test_end_session_refuses_an_invalid_session_id(conn: Connection) -> None:
    with pytest.raises(InvalidScopeError):
        end_session(conn, "a/b")


# =============================================================================== use_store


def test_a_plain_tool_inside_use_store_writes_to_the_shared_store(
    conn: Connection, engine: Engine
) -> None:
    with use_store("TEAM") as ref:
        assert (ref.store_key, ref.scope, ref.store_code) == ("shared:TEAM", "shared", "TEAM")
        tool = MemoryTool(conn)
        create(tool, "/memories/t.md", "team")
    conn.commit()
    with committed_view(engine) as c2:
        assert store_files(c2, "shared:TEAM") == {"/memories/t.md": "team"}
        assert store_keys(c2) == {"shared:TEAM"}


def test_a_plain_tool_outside_use_store_raises(conn: Connection) -> None:
    with pytest.raises(InvalidScopeError) as info:
        MemoryTool(conn)
    assert info.value.code == "no_store"
    with use_store("TEAM"):
        pass
    with pytest.raises(InvalidScopeError):
        MemoryTool(conn)


def test_use_store_blocks_nest_and_restore(conn: Connection) -> None:
    with use_store("OUTER"):
        with use_store("INNER"):
            create(MemoryTool(conn), "/memories/i.md", "i")
        create(MemoryTool(conn), "/memories/o.md", "o")
    assert store_files(conn, "shared:INNER") == {"/memories/i.md": "i"}
    assert store_files(conn, "shared:OUTER") == {"/memories/o.md": "o"}


def test_use_store_does_not_leak_into_another_thread(conn: Connection) -> None:
    seen: list[Any] = []

    def other() -> None:
        try:
            MemoryTool(conn)
            seen.append("tool made")
        except InvalidScopeError as exc:
            seen.append(exc.code)

    with use_store("TEAM"):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen == ["no_store"]


@pytest.mark.parametrize("code", ["", "a b", "a:b", "é", "x" * 201])
def test_use_store_refuses_an_invalid_store_code(code: str) -> None:
    with pytest.raises(InvalidScopeError), use_store(code):
        pass


def test_use_store_and_a_shared_agent_see_the_same_files(conn: Connection) -> None:
    enable_for_agent(conn, "A", scope="shared", store_code="TEAM")
    create(MemoryTool(conn, "A"), "/memories/from-agent.md", "a")
    with use_store("TEAM"):
        assert MemoryTool(conn).execute({"command": "view", "path": "/memories/from-agent.md"}) == (
            "Here's the content of /memories/from-agent.md with line numbers:\n     1\ta"
        )


def test_for_store_applies_the_caps_of_the_store(conn: Connection) -> None:
    enable_for_agent(conn, "OWNER", scope="shared", store_code="TEAM", max_files=1)
    tool = MemoryTool.for_store(conn, "TEAM")
    create(tool, "/memories/a.md", "a")
    assert tool.execute({"command": "create", "path": "/memories/b.md", "file_text": "b"}).startswith(
        "Error: Cannot create /memories/b.md: the memory store already holds 1 "
    )
    assert counts(conn)[1] == 1


# ===================================================================== augment_system_prompt


def test_the_memory_protocol_says_what_an_agent_must_do() -> None:
    protocol = get_memory_protocol()
    assert protocol == MEMORY_PROTOCOL
    assert protocol.startswith("MEMORY PROTOCOL\n")
    for phrase in ("view /memories first", "decisions", "preferences", "learnings", "progress",
                   "interrupted", "small", "NOT an empty memory"):
        assert phrase in protocol, phrase
    assert not protocol.endswith("\n")


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [("You are X.", "You are X.\n\n{p}"), ("You are X.\n\n", "You are X.\n\n{p}"),
     (None, "{p}"), ("", "{p}"), ("   ", "{p}")],
)
def test_augment_system_prompt_appends_the_protocol_for_an_enabled_agent(
    conn: Connection, prompt: str | None, expected: str
) -> None:
    enable_for_agent(conn, "A")
    assert augment_system_prompt(prompt, conn, "A") == expected.format(p=MEMORY_PROTOCOL)


def test_augment_system_prompt_leaves_the_prompt_alone_without_memory(conn: Connection) -> None:
    assert augment_system_prompt("You are X.", conn, "UNKNOWN") == "You are X."
    assert augment_system_prompt(None, conn, "UNKNOWN") == ""
    enable_for_agent(conn, "A")
    disable_for_agent(conn, "A")
    assert augment_system_prompt("You are X.", conn, "A") == "You are X."


def test_augment_system_prompt_refuses_an_invalid_agent_code(conn: Connection) -> None:
    with pytest.raises(InvalidScopeError):
        augment_system_prompt("p", conn, "a b")


# =============================================================================== isolation

SECRET = "/memories/secret.md"


def _assert_isolated(owner: MemoryTool, stranger: MemoryTool, conn: Connection) -> None:
    create(owner, SECRET, "owner's secret")
    create(owner, "/memories/dir/inner.md", "inner")
    assert stranger.execute({"command": "view", "path": "/memories"}) == listing(
        "/memories", "0\t/memories"
    )
    for command in (
        {"command": "view", "path": SECRET},
        {"command": "str_replace", "path": SECRET, "old_str": "owner", "new_str": "x"},
        {"command": "insert", "path": SECRET, "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": SECRET},
        {"command": "rename", "old_path": SECRET, "new_path": "/memories/mine.md"},
    ):
        assert stranger.execute(command) == NOT_FOUND.format(SECRET), command
    for command in (
        {"command": "view", "path": "/memories/dir"},
        {"command": "delete", "path": "/memories/dir"},
    ):
        assert stranger.execute(command) == NOT_FOUND.format("/memories/dir"), command
    create(stranger, SECRET, "stranger's own")
    assert owner.execute({"command": "view", "path": SECRET}) == (
        f"Here's the content of {SECRET} with line numbers:\n     1\towner's secret"
    )
    assert stranger.execute({"command": "view", "path": SECRET}) == (
        f"Here's the content of {SECRET} with line numbers:\n     1\tstranger's own"
    )
    assert stranger.execute({"command": "view", "path": "/memories"}) == listing(
        "/memories", "14\t/memories", f"14\t{SECRET}"
    )


@pytest.mark.parametrize(
    ("setup", "owner", "stranger"),
    [
        ({"A": {}, "B": {}}, ("A", {}), ("B", {})),
        ({"A": {}, "a": {}}, ("A", {}), ("a", {})),
        ({"U": {"scope": "user"}}, ("U", {"user_id": "alice"}), ("U", {"user_id": "bob"})),
        ({"U": {"scope": "user"}}, ("U", {"user_id": "bob"}), ("U", {"user_id": "Bob"})),
        ({"U": {"scope": "user"}, "V": {"scope": "user"}},
         ("U", {"user_id": "alice"}), ("V", {"user_id": "alice"})),
        ({"S": {"scope": "session"}}, ("S", {"session_id": "s1"}), ("S", {"session_id": "s2"})),
        ({"C": {"scope": "context", "context_key": "doc"}},
         ("C", {"run_context": {"doc": "1"}}), ("C", {"run_context": {"doc": "2"}})),
        ({"C": {"scope": "context", "context_key": "doc"}, "D": {"scope": "context", "context_key": "doc"}},
         ("C", {"run_context": {"doc": "1"}}), ("D", {"run_context": {"doc": "1"}})),
        ({"T": {"scope": "shared", "store_code": "TEAM1"}, "X": {"scope": "shared", "store_code": "TEAM2"}},
         ("T", {}), ("X", {})),
        ({"T": {"scope": "shared", "store_code": "team"}, "X": {"scope": "shared", "store_code": "TEAM"}},
         ("T", {}), ("X", {})),
        ({"A": {}, "G": {"scope": "global"}}, ("A", {}), ("G", {})),
        ({"U": {"scope": "user"}, "A": {}}, ("U", {"user_id": "A"}), ("A", {})),
    ],
)
def test_one_store_never_sees_another_store_files(
    conn: Connection, setup: dict[str, dict[str, Any]], owner: tuple[str, dict[str, Any]],
    stranger: tuple[str, dict[str, Any]],
) -> None:
    for agent, config in setup.items():
        enable_for_agent(conn, agent, **config)
    _assert_isolated(MemoryTool(conn, owner[0], **owner[1]), MemoryTool(conn, stranger[0], **stranger[1]), conn)


@pytest.mark.parametrize(
    "setup",
    [
        {"A": {"scope": "global"}, "B": {"scope": "global"}},
        {"A": {"scope": "shared", "store_code": "TEAM"}, "B": {"scope": "shared", "store_code": "TEAM"}},
        {"A": {"scope": "context", "store_code": "DOCS", "context_key": "doc"},
         "B": {"scope": "context", "store_code": "DOCS", "context_key": "doc"}},
    ],
)
def test_agents_of_a_shared_scope_see_the_same_files(conn: Connection, setup: dict[str, Any]) -> None:
    for agent, config in setup.items():
        enable_for_agent(conn, agent, **config)
    run = {"run_context": {"doc": "1"}}
    a = MemoryTool(conn, "A", **run) if "context_key" in setup["A"] else MemoryTool(conn, "A")
    b = MemoryTool(conn, "B", **run) if "context_key" in setup["B"] else MemoryTool(conn, "B")
    create(a, "/memories/common.md", "from A")
    assert b.execute({"command": "view", "path": "/memories/common.md"}) == (
        "Here's the content of /memories/common.md with line numbers:\n     1\tfrom A"
    )
    assert counts(conn)[0] == 1


def test_user_ids_are_never_taken_from_the_database_login(conn: Connection) -> None:
    enable_for_agent(conn, "U", scope="user")
    with pytest.raises(InvalidScopeError) as info:
        MemoryTool(conn, "U")
    assert info.value.code == "missing_user_id"
    assert ERROR == "Error: "
