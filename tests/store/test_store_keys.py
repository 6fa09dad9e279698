"""Stores of different owners never share a key (issue 8, section 2; DESIGN.md section 4), and
``drop_stores`` never deadlocks with a writer nor builds an IN list over 1,000 ids (section 8),
on every backend.

* The package's own stores (the user profile) live under ``reserved:``: no agent configuration,
  store code or MEMORY tool call reaches them.
* Store-code context keys (``context:store:<C>:...``, 5 parts) never equal agent-keyed ones
  (``context:<A>:...``, 4 parts).
* ``disable_for_agent(drop_store=True)`` drops the agent's own stores only, chosen by exact key.
* Every key is checked exactly before SQL: MariaDB's PAD SPACE never lets ``'user:A:u1 '``
  reach ``user:A:u1``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from typer.testing import CliRunner, Result

from dbmemory import (
    InvalidArgumentError,
    InvalidScopeError,
    disable_for_agent,
    enable_for_agent,
    get_agent_config,
    resolve_store_id,
    use_store,
)
from dbmemory.cli import app
from dbmemory.core.keys import (
    RESERVED_KINDS,
    SCOPES,
    build_store_key,
    parse_store_key,
    reserved_store_key,
)
from dbmemory.core.model import StoreRef
from dbmemory.db.schema import files, stores
from dbmemory.store.drop import drop_stores
from dbmemory.store.locks import find_store_id
from dbmemory.store.statements.bulk import (
    MAX_IN_LIST,
    delete_stores_by_id,
    id_chunks,
    lock_stores_by_id,
    select_store_keys,
    select_store_totals,
)
from dbmemory.tool import MemoryTool
from helpers import ERROR, committed_view, has_second_connection, store_files

PROFILE_TEXT = "# User Memory\n\nsecret profile of u1\n"
MEMORY_MD = "/memories/memory.md"


def create(tool: MemoryTool, path: str, text: str) -> str:
    return tool.execute({"command": "create", "path": path, "file_text": text})


def view(tool: MemoryTool, path: str) -> str:
    return tool.execute({"command": "view", "path": path})


def store_keys(conn: Connection) -> set[str]:
    return set(conn.execute(sa.select(stores.c.store_key)).scalars())


def write_profile(conn: Connection, user_id: str = "u1", text: str = PROFILE_TEXT) -> None:
    from dbmemory.profile.store import write_profile as write

    write(conn, user_id, text, expected_version=None)


def read_profile_text(conn: Connection, user_id: str = "u1") -> str | None:
    from dbmemory.profile.store import read_profile

    record = read_profile(conn, user_id)
    return None if record is None else record.text


# ================================================================================ key design


@pytest.mark.parametrize(
    "key",
    [
        "agent:A",
        "user:A:u1",
        "session:S-1",
        "shared:TEAM",
        "global",
        "context:A:doc:7",
        "context:store:DOCS:doc:7",
        "context:store:doc:7",  # agent 'store', agent-keyed (4 parts)
        "reserved:profile:user-memory:ann_40example.com",
        "reserved:items:default:u1",
        "reserved:org:default",
    ],
)
def test_parse_store_key_accepts_every_key_the_package_builds(key: str) -> None:
    parts = parse_store_key(key)
    assert ":".join((parts.scope, *parts.components)) == key
    if parts.scope in SCOPES:
        kwargs: dict[str, Any] = {}
        if parts.scope == "user":
            kwargs["user_id"] = parts.components[1]
        if parts.scope == "session":
            kwargs["session_id"] = parts.components[0]
        if parts.scope == "context":
            kwargs.update(context_key=parts.components[-2], context_value=parts.components[-1])
        rebuilt = build_store_key(
            parts.scope, agent_code=parts.agent_code, store_code=parts.store_code, **kwargs
        )
        assert rebuilt == key


@pytest.mark.parametrize(
    "key",
    [
        "user:A:u1 ",
        " user:A:u1",
        "agent:A\n",
        "agent:A ",
        "agent:",
        "agent",
        "agent:A:B",
        "user:A",
        "global:",
        "global ",
        "context:A:doc",
        "context:X:DOCS:doc:7",  # 5 parts without the 'store' marker
        "context:store:DOCS:doc:7:8",
        "shared:TE AM",
        "shared:é",
        "reserved:profile:user-memory",
        "reserved:profile:user-memory:u1:x",
        "reserved:secrets:x",
        "reserved",
        "RESERVED:profile:user-memory:u1",
        "bogus:x",
        "",
        "store:A:k:v",
    ],
)
def test_parse_store_key_refuses_anything_but_an_exact_key(key: str) -> None:
    with pytest.raises(InvalidScopeError):
        parse_store_key(key)
    with pytest.raises(InvalidScopeError):
        StoreRef(store_key=key, scope=key.split(":")[0])


def test_a_trailing_space_is_refused_with_a_message_naming_the_component() -> None:
    with pytest.raises(InvalidScopeError) as info:
        parse_store_key("user:A:u1 ")
    assert str(info.value) == (
        "store key 'user:A:u1 ': its user id 'u1 ' may contain only ASCII letters, digits, "
        "'_', '.' and '-': map other characters (spaces, ':', '/', '@', newlines, accents) "
        "before passing it"
    )


@pytest.mark.parametrize("name", ["reserved", "store", "profile", "user-memory", "user_id", "A"])
def test_build_store_key_never_builds_a_reserved_key(name: str) -> None:
    built = [
        build_store_key("agent", agent_code=name),
        build_store_key("user", agent_code=name, user_id=name),
        build_store_key("session", session_id=name),
        build_store_key("shared", store_code=name),
        build_store_key("context", agent_code=name, context_key=name, context_value=name),
        build_store_key("context", store_code=name, context_key=name, context_value=name),
    ]
    for key in built:
        assert not key.startswith("reserved:"), key
        assert parse_store_key(key).scope != "reserved"
    with pytest.raises(InvalidScopeError) as info:
        build_store_key("reserved", agent_code=name)
    assert info.value.code == "reserved_store"


def test_store_code_and_agent_keyed_context_keys_never_meet() -> None:
    by_agent = build_store_key("context", agent_code="DOCS", context_key="doc", context_value="7")
    by_code = build_store_key("context", store_code="DOCS", context_key="doc", context_value="7")
    assert (by_agent, by_code) == ("context:DOCS:doc:7", "context:store:DOCS:doc:7")
    agent_store = build_store_key("context", agent_code="store", context_key="DOCS", context_value="doc")
    assert agent_store == "context:store:DOCS:doc" != by_code
    assert parse_store_key(agent_store).agent_code == "store"
    assert parse_store_key(by_code).store_code == "DOCS"


def test_reserved_store_key_has_a_closed_set_of_kinds() -> None:
    assert set(RESERVED_KINDS) == {"profile", "items", "org"}
    assert reserved_store_key("profile", "user-memory", "u1") == "reserved:profile:user-memory:u1"
    for bad in (("secrets", "x"), ("profile", "user-memory"), ("profile", "a", "b c")):
        with pytest.raises(InvalidScopeError):
            reserved_store_key(*bad)


def test_store_ref_checks_scope_and_codes_against_its_key() -> None:
    with pytest.raises(InvalidScopeError):
        StoreRef(store_key="reserved:profile:user-memory:u1", scope="context")
    with pytest.raises(InvalidScopeError):
        StoreRef(store_key="user:A:u1", scope="user", agent_code="B")
    with pytest.raises(InvalidScopeError):
        StoreRef(store_key="context:store:DOCS:doc:7", scope="context", store_code="OTHER")
    with pytest.raises(InvalidScopeError):
        StoreRef(store_key="session:S", scope="session", agent_code="A ")
    assert StoreRef(store_key="session:S", scope="session", agent_code="A").agent_code == "A"


# ============================================================= the profile is out of reach

SPIES = {
    "SPY": {"scope": "context", "store_code": "user-memory", "context_key": "user_id"},
    "user-memory": {"scope": "context", "context_key": "user_id"},
}


@pytest.mark.parametrize("spy", sorted(SPIES))
def test_an_agent_named_after_the_profile_namespace_never_reaches_a_profile(
    conn: Connection, engine: Engine, spy: str
) -> None:
    write_profile(conn)
    enable_for_agent(conn, spy, **SPIES[spy])
    tool = MemoryTool(conn, spy, run_context={"user_id": "u1"})
    assert not tool.store.store_key.startswith("reserved:")
    assert view(tool, MEMORY_MD).startswith(f"{ERROR}The path {MEMORY_MD} does not exist")
    assert create(tool, MEMORY_MD, "overwritten by an agent") == (
        f"File created successfully at: {MEMORY_MD}"
    )
    assert tool.execute(
        {"command": "str_replace", "path": MEMORY_MD, "old_str": "overwritten", "new_str": "x"}
    ).startswith("The memory file /memories/")
    conn.commit()
    assert read_profile_text(conn) == PROFILE_TEXT

    from dbmemory.profile.transfer import list_profile_user_ids

    assert list_profile_user_ids(conn) == ["u1"]
    assert disable_for_agent(conn, spy, drop_store=True) == (1 if spy == "user-memory" else 0)
    conn.commit()
    with committed_view(engine) as c2:
        assert read_profile_text(c2) == PROFILE_TEXT
        assert list_profile_user_ids(c2) == ["u1"]


def test_profile_export_still_sees_a_profile_next_to_a_spying_agent(
    conn: Connection, tmp_path: Path
) -> None:
    from dbmemory.profile.transfer import export_profiles

    write_profile(conn)
    for spy, config in SPIES.items():
        enable_for_agent(conn, spy, **config)
        create(MemoryTool(conn, spy, run_context={"user_id": "u1"}), MEMORY_MD, "fake")
    report = export_profiles(conn, tmp_path / "out")
    assert len(report.done) == 1
    assert Path(report.done[0]).read_text(encoding="utf-8") == PROFILE_TEXT


def test_the_memory_tool_refuses_a_reserved_store_however_it_is_named(conn: Connection) -> None:
    write_profile(conn)
    key = "reserved:profile:user-memory:u1"
    with pytest.raises(InvalidScopeError) as info:
        MemoryTool(conn, store=StoreRef(store_key=key, scope="reserved"))
    assert info.value.code == "reserved_store"
    assert str(info.value) == (
        "store 'reserved:profile:user-memory:u1' is in the reserved namespace dbmemory keeps for "
        "its own stores (user profiles, memory items, organisation memory); the MEMORY tool "
        "cannot open it: manage profiles with dbmemory.profile or 'dbmemory profile'"
    )
    for code in (key, "reserved", "RESERVED"):
        with pytest.raises(InvalidScopeError):
            MemoryTool.for_store(conn, code)
        with pytest.raises(InvalidScopeError), use_store(code):
            pass
    with pytest.raises(InvalidScopeError) as info:
        enable_for_agent(conn, "X", scope="reserved")
    assert info.value.code == "reserved_store"
    for kwargs in ({"scope": "shared", "store_code": "reserved"},
                   {"scope": "context", "store_code": "Reserved", "context_key": "k"}):
        with pytest.raises(InvalidScopeError):
            enable_for_agent(conn, "X", **kwargs)
    with pytest.raises(InvalidScopeError):
        enable_for_agent(conn, "reserved")
    with pytest.raises(InvalidScopeError):
        resolve_store_id(conn, scope="reserved")
    assert read_profile_text(conn) == PROFILE_TEXT


def test_a_store_code_equal_to_an_agent_code_never_reaches_that_agent_context_stores(
    conn: Connection,
) -> None:
    enable_for_agent(conn, "A", scope="context", context_key="doc")
    enable_for_agent(conn, "X", scope="context", store_code="A", context_key="doc")
    owner = MemoryTool(conn, "A", run_context={"doc": "7"})
    stranger = MemoryTool(conn, "X", run_context={"doc": "7"})
    assert (owner.store.store_key, stranger.store.store_key) == (
        "context:A:doc:7", "context:store:A:doc:7"
    )
    create(owner, "/memories/secret.md", "A's secret")
    assert view(stranger, "/memories/secret.md").startswith(ERROR)
    create(stranger, "/memories/secret.md", "X's own")
    assert view(owner, "/memories/secret.md").endswith("\tA's secret")
    disable_for_agent(conn, "A", drop_store=True)
    assert view(stranger, "/memories/secret.md").endswith("\tX's own")


# ================================================================== disable drops own stores


def test_disable_with_drop_store_chooses_stores_by_exact_key(conn: Connection, engine: Engine) -> None:
    """Agent codes with '_' (a LIKE wildcard), prefixes of other codes, an agent named 'store'
    next to store-code context stores, and a session store two agents write."""
    for agent in ("A_B", "AxB", "A", "AB", "store"):
        enable_for_agent(conn, agent, scope="user")
        create(MemoryTool(conn, agent, user_id="u1"), "/memories/u.md", agent)
        enable_for_agent(conn, agent)
        create(MemoryTool(conn, agent), "/memories/a.md", agent)
    enable_for_agent(conn, "store", scope="context", context_key="doc")
    create(MemoryTool(conn, "store", run_context={"doc": "1"}), "/memories/c.md", "own")
    enable_for_agent(conn, "CODE", scope="context", store_code="doc", context_key="k")
    create(MemoryTool(conn, "CODE", run_context={"k": "1"}), "/memories/c.md", "by code")
    for agent in ("A_B", "AxB"):
        enable_for_agent(conn, agent, scope="session")
        create(MemoryTool(conn, agent, session_id="S1"), f"/memories/{agent}.md", agent)
    conn.commit()
    before = store_keys(conn)
    assert {"context:store:doc:1", "context:store:doc:k:1", "session:S1"} <= before
    assert disable_for_agent(conn, "A_B", drop_store=True) == 2
    assert disable_for_agent(conn, "A", drop_store=True) == 2
    assert disable_for_agent(conn, "store", drop_store=True) == 3
    conn.commit()
    with committed_view(engine) as c2:
        assert store_keys(c2) == before - {
            "agent:A_B", "user:A_B:u1", "agent:A", "user:A:u1",
            "agent:store", "user:store:u1", "context:store:doc:1",
        }
        assert store_files(c2, "session:S1") == {"/memories/A_B.md": "A_B", "/memories/AxB.md": "AxB"}
        assert store_files(c2, "context:store:doc:k:1") == {"/memories/c.md": "by code"}


# ========================================================================= exact keys (PAD)


def test_keys_with_a_trailing_space_are_refused_before_sql(conn: Connection) -> None:
    enable_for_agent(conn, "A", scope="user")
    create(MemoryTool(conn, "A", user_id="u1"), "/memories/x.md", "u1's")
    write_profile(conn)
    conn.commit()
    with pytest.raises(InvalidScopeError):
        StoreRef(store_key="user:A:u1 ", scope="user", agent_code="A")
    with pytest.raises(InvalidScopeError):
        find_store_id(conn, "user:A:u1 ")
    with pytest.raises(InvalidScopeError):
        resolve_store_id(conn, scope="user", agent_code="A", user_id="u1 ")
    with pytest.raises(InvalidScopeError):
        resolve_store_id(conn, scope="user", agent_code="A ", user_id="u1")
    with pytest.raises(InvalidScopeError):
        MemoryTool(conn, "A", user_id="u1 ")
    with pytest.raises(InvalidScopeError):
        MemoryTool(conn, "A ", user_id="u1")
    with pytest.raises(InvalidScopeError):
        get_agent_config(conn, "A ")
    with pytest.raises(InvalidScopeError):
        disable_for_agent(conn, "A ", drop_store=True)
    with pytest.raises(InvalidScopeError):
        MemoryTool(conn, store=StoreRef(store_key="user:A:u1", scope="user", agent_code="A "))
    # a user id with a trailing space is another user (encoded '_20'), never u1
    assert read_profile_text(conn, "u1 ") is None
    assert read_profile_text(conn) == PROFILE_TEXT
    assert get_agent_config(conn, "A").memory_enabled is True
    assert store_files(conn, "user:A:u1") == {"/memories/x.md": "u1's"}


def _cli(engine: Engine, *args: str) -> Result:
    url = engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(app, list(args), env={"DBMEMORY_URL": url}, prog_name="dbmemory")


def test_cli_store_keys_with_a_trailing_space_are_refused_and_change_nothing(
    conn: Connection, engine: Engine
) -> None:
    if not has_second_connection(engine):
        pytest.skip("each CLI command opens its own engine: an in-memory database is not shared")
    enable_for_agent(conn, "A", scope="user")
    create(MemoryTool(conn, "A", user_id="u1"), "/memories/x.md", "u1's")
    conn.commit()
    for args in (
        ("files", "cat", "/memories/x.md", "--store", "user:A:u1 "),
        ("files", "clear", "--store", "user:A:u1 ", "--yes"),
        ("files", "rm", "/memories/x.md", "--store", "user:A:u1 "),
        ("files", "put", "/memories/x.md", "--store", "user:A:u1 ", "--text", "replaced"),
        ("files", "ls", "--store", "user:A:u1 "),
        ("tool", "--shared", "reserved:profile:user-memory:u1", '{"command": "view", "path": "/memories"}'),
        ("tool", "--agent", "A ", "--user", "u1", '{"command": "view", "path": "/memories"}'),
        ("agent", "disable", "A ", "--drop-store"),
        ("agent", "enable", "X", "--scope", "reserved"),
    ):
        result = _cli(engine, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
        assert result.stderr.startswith("Error: "), result.stderr
    assert "user id 'u1 '" in _cli(engine, "files", "cat", "/memories/x.md", "--store", "user:A:u1 ").stderr
    with committed_view(engine) as c2:
        assert store_files(c2, "user:A:u1") == {"/memories/x.md": "u1's"}
        assert store_keys(c2) == {"user:A:u1"}
        assert get_agent_config(c2, "A").memory_enabled is True
    listed = json.loads(_cli(engine, "files", "ls", "--json").stdout)
    assert [s["store_key"] for s in listed] == ["user:A:u1"]


def test_admin_files_commands_still_read_a_profile_store(conn: Connection, engine: Engine) -> None:
    if not has_second_connection(engine):
        pytest.skip("each CLI command opens its own engine: an in-memory database is not shared")
    write_profile(conn)
    conn.commit()
    result = _cli(engine, "files", "cat", MEMORY_MD, "--store", "reserved:profile:user-memory:u1")
    assert result.exit_code == 0, result.output
    assert result.stdout == PROFILE_TEXT


# ================================================================= drop_stores: IN and locks


def in_list_sizes(statement: str) -> list[int]:
    """The number of values in each ``IN (...)`` list of a statement (any paramstyle)."""
    sizes = []
    for match in re.finditer(r"\bIN \(", statement):
        depth, position, commas = 1, match.end(), 0
        while depth:
            char = statement[position]
            depth += {"(": 1, ")": -1}.get(char, 0)
            commas += char == "," and depth == 1
            position += 1
        sizes.append(commas + 1)
    return sizes


def test_drop_stores_never_sends_an_in_list_over_1000_ids(conn: Connection, engine: Engine) -> None:
    enable_for_agent(conn, "A", scope="user")
    for user in ("u1", "u2", "u3"):
        create(MemoryTool(conn, "A", user_id=user), "/memories/x.md", user)
    ids = sorted(conn.execute(sa.select(stores.c.store_id)).scalars())
    conn.commit()
    sizes: list[int] = []

    def count(conn_: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        sizes.extend(in_list_sizes(statement))

    wanted = list(range(ids[-1] + 1, ids[-1] + 2_500)) + ids
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        assert drop_stores(conn, wanted) == 3
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    conn.commit()
    assert sizes and max(sizes) <= MAX_IN_LIST
    assert store_keys(conn) == set()


def test_drop_stores_refuses_what_is_not_a_list_of_ids(conn: Connection) -> None:
    for bad in ([True], ["1"], [0], [2**70], 7, "12"):
        with pytest.raises(InvalidArgumentError):
            drop_stores(conn, bad)  # type: ignore[arg-type]


def test_statement_builders_refuse_an_in_list_over_1000() -> None:
    for builder in (lock_stores_by_id, select_store_keys, select_store_totals,
                    delete_stores_by_id):
        builder(range(1, 1_001))
        with pytest.raises(ValueError):
            builder(range(1, 1_002))
    assert [len(c) for c in id_chunks(range(2_001))] == [1_000, 1_000, 1]


def test_drop_locks_store_rows_first_so_a_writer_in_the_middle_never_deadlocks(
    engine: Engine,
) -> None:
    """A writer holds the store row and file ``last`` (the last one in both index and heap
    order); the drop starts and waits; the writer then edits the other files. Were files deleted
    before the store rows are locked, the drop would hold the others and wait for ``last``
    while the writer waits for them: a deadlock. Store rows first: none."""
    if not has_second_connection(engine):
        pytest.skip("in-memory SQLite has one connection: no concurrency")
    from dbmemory.core.paths import path_hash

    names = sorted((f"/memories/f{i}.md" for i in range(8)), key=path_hash)
    last = names[-1]
    with engine.begin() as c:
        enable_for_agent(c, "A")
        for name in names:  # created in index order: ``last`` is last in the heap too
            create(MemoryTool(c, "A"), name, "x")
        store_id = find_store_id(c, "agent:A")
    outcome: dict[str, Any] = {}

    def dropper() -> None:
        try:
            with engine.begin() as c:
                outcome["dropped"] = drop_stores(c, [store_id])
        except Exception as exc:  # recorded and asserted below
            outcome["drop_error"] = exc

    def edit(tool: MemoryTool, path: str) -> str:
        return tool.execute({"command": "str_replace", "old_str": "x", "new_str": "y", "path": path})

    with engine.connect() as writer:
        writer.begin()
        tool = MemoryTool(writer, "A")
        assert edit(tool, last).startswith("The memory file /memories/")
        thread = threading.Thread(target=dropper, daemon=True)
        thread.start()
        time.sleep(1.0)  # the drop waits on the store row (before the fix: on file ``last``)
        answers = [edit(tool, name) for name in names[:-1]]
        assert all(a.startswith("The memory file /memories/") for a in answers), answers
        writer.commit()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the drop never finished"
    assert "drop_error" not in outcome, outcome
    assert outcome["dropped"] == 1
    with engine.connect() as c:
        assert store_keys(c) == set()


def test_writers_racing_a_drop_finish_first_or_start_afresh_without_deadlock(
    engine: Engine,
) -> None:
    """Writer threads edit and create files in one store while another thread drops it again
    and again (bounded: about 3 seconds). No deadlock or storage error; every answer is a
    success or a clear not-found/already-exists/conflict text."""
    if not has_second_connection(engine):
        pytest.skip("in-memory SQLite has one connection: no concurrency")
    with engine.begin() as c:
        enable_for_agent(c, "A")
    stop = time.monotonic() + 3.0
    problems: list[str] = []
    drops = [0]

    def writer(n: int) -> None:
        i = 0
        while time.monotonic() < stop:
            i += 1
            try:
                with engine.begin() as c:
                    tool = MemoryTool(c, "A")
                    for command in (
                        {"command": "create", "path": f"/memories/w{n}-{i % 20}.md", "file_text": "x"},
                        {"command": "create", "path": "/memories/common.md", "file_text": "x"},
                        {"command": "str_replace", "path": "/memories/common.md",
                         "old_str": "x", "new_str": "x"},
                    ):
                        answer = tool.execute(command)
                        if answer.startswith(ERROR) and not any(
                            word in answer for word in ("does not exist", "already exists",
                                                        "changed meanwhile", "No replacement", "by another writer",
                                                        "did not appear")
                        ):
                            problems.append(answer)
            except Exception as exc:  # recorded and asserted below
                problems.append(repr(exc))

    def dropper() -> None:
        while time.monotonic() < stop:
            try:
                with engine.begin() as c:
                    store_id = find_store_id(c, "agent:A")
                    if store_id is not None:
                        drops[0] += drop_stores(c, [store_id])
            except Exception as exc:  # recorded and asserted below
                problems.append(repr(exc))
            time.sleep(0.01)

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(2)]
    threads.append(threading.Thread(target=dropper, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert problems == [], problems[:5]
    assert drops[0] >= 1


# ============================================================================= migration 0002


def test_revision_0002_moves_profiles_of_every_root_folder_into_the_reserved_namespace(
    empty_engine: Engine,
) -> None:
    """A profile under a non-default root folder (``context:<R>:user_id:<id>``, no agent, an
    expiry-exempt memory.md) moves to ``reserved:profile:<R>:<id>``; an agent's store-code
    context store with the same shape but no exempt profile file moves to ``context:store:``."""
    from dbmemory.core.clock import utcnow
    from dbmemory.core.paths import path_hash
    from dbmemory.db import migrate

    migrate.upgrade(empty_engine, "0001")
    ts = utcnow()
    stores_t = sa.table(
        "dbm_stores",
        *(sa.column(n) for n in ("store_id", "store_key", "scope_name", "agent_code", "store_code")),
        sa.column("created_at"), sa.column("updated_at"),
    )
    old = [
        ("context:my-profiles:user_id:ann_40x.org", "context", None, "my-profiles", True),
        ("context:NOTES:user_id:u-3", "context", None, "NOTES", False),
        ("context:user-memory:user_id:u-1", "context", None, "user-memory", True),
    ]
    with empty_engine.begin() as c:
        for key, scope, agent, code, exempt in old:
            c.execute(sa.insert(stores_t).values(
                store_key=key, scope_name=scope, agent_code=agent, store_code=code,
                created_at=ts, updated_at=ts,
            ))
            sid = c.execute(sa.select(stores_t.c.store_id).where(stores_t.c.store_key == key)).scalar_one()
            c.execute(sa.insert(files).values(
                store_id=sid, file_path=MEMORY_MD, path_hash=path_hash(MEMORY_MD), body="p",
                char_count=1, version_no=1, expiry_exempt=exempt, created_at=ts, updated_at=ts,
                last_accessed_at=ts,
            ))
    migrate.upgrade(empty_engine)
    from dbmemory.profile.store import read_profile
    from dbmemory.profile.transfer import list_profile_user_ids

    with empty_engine.connect() as c:
        rows = {r.store_key: r for r in c.execute(sa.select(stores.c.store_key, stores.c.scope_name))}
        assert set(rows) == {
            "reserved:profile:my-profiles:ann_40x.org",
            "context:store:NOTES:user_id:u-3",
            "reserved:profile:user-memory:u-1",
        }
        assert rows["reserved:profile:my-profiles:ann_40x.org"].scope_name == "reserved"
        assert list_profile_user_ids(c, root_folder="my-profiles") == ["ann@x.org"]
        record = read_profile(c, "ann@x.org", root_folder="my-profiles")
        assert record is not None and record.text == "p"
    migrate.downgrade(empty_engine, "0001")
    with empty_engine.connect() as c:
        keys = {r[0] for r in c.execute(sa.text("SELECT store_key FROM dbm_stores"))}
    assert keys == {o[0] for o in old}
    migrate.upgrade(empty_engine)
