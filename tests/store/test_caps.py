"""Issue 8 section 3: caps and shape hold at every isolation level and from every writer.

* Caps belong to the store (the values on its ``dbm_stores`` row): a second agent, ``use_store``,
  ``MemoryTool.for_store``, ``dbmemory tool --shared``, ``dbmemory files put`` and the admin API
  all obey the caps the owning configuration put on the store (:mod:`dbmemory.store.caps`).
* Re-enabling an agent with a cap left out restores the default; ``set_store_caps`` sets one
  store's caps (audited ``store_caps``).
* Two writers in two threads, each creating a file that fits alone but not together (files cap,
  characters cap), and the file-vs-directory shape race, at every isolation level the backend
  offers: the committed state never exceeds the caps or breaks the shape, and the loser got a
  cap, shape or retry answer.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from typer.testing import CliRunner

from dbmemory import enable_for_agent, set_store_caps, use_store
from dbmemory.core.model import Caps, StoreRef
from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.schema import audit_events, files, stores
from dbmemory.errors import CapExceededError, ConflictError, NotFoundError
from dbmemory.store import files as files_api
from dbmemory.store.locks import SERIALIZATION_FAILURE
from dbmemory.store.resolve import resolve_store, shared_store
from dbmemory.tool import MemoryTool
from helpers import ERROR, assert_no_leak, committed_view

_CAP_FILES = (
    "Error: Cannot create /memories/{name}: the memory store already holds {n} {files}, the "
    "most it may hold. Delete or merge files you no longer need, then retry."
)


class _CapFiles:
    @staticmethod
    def format(*, name: str, n: int) -> str:
        return _CAP_FILES.format(name=name, n=n, files="file" if n == 1 else "files")


CAP_FILES = _CapFiles()


def create(tool: MemoryTool, path: str, text: str = "x") -> str:
    return tool.execute({"command": "create", "path": path, "file_text": text})


def store_caps(conn: Connection, key: str) -> Caps:
    row = conn.execute(
        sa.select(stores.c.max_file_chars, stores.c.max_files, stores.c.max_store_chars).where(
            stores.c.store_key == key
        )
    ).one()
    return Caps(max_file_chars=row[0], max_files=row[1], max_store_chars=row[2])


def file_count(conn: Connection, key: str) -> int:
    return conn.execute(
        sa.select(sa.func.count())
        .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
        .where(stores.c.store_key == key)
    ).scalar_one()


# ================================================================ every writer obeys the store


def test_a_second_agent_writing_a_shared_store_obeys_the_owners_caps(conn: Connection) -> None:
    enable_for_agent(conn, "OWNER", scope="shared", store_code="TEAM", max_files=2)
    enable_for_agent(conn, "OTHER", scope="shared", store_code="TEAM")  # default caps
    owner, other = MemoryTool(conn, "OWNER"), MemoryTool(conn, "OTHER")
    assert not create(owner, "/memories/a.md").startswith(ERROR)
    assert not create(other, "/memories/b.md").startswith(ERROR)
    assert create(other, "/memories/c.md") == CAP_FILES.format(name="c.md", n=2)
    assert store_caps(conn, "shared:TEAM").max_files == 2
    # the second agent configured later with looser caps does not loosen the store
    enable_for_agent(conn, "LATE", scope="shared", store_code="TEAM", max_files=500)
    assert store_caps(conn, "shared:TEAM").max_files == 2
    assert create(MemoryTool(conn, "LATE"), "/memories/c.md") == CAP_FILES.format(name="c.md", n=2)


def test_the_first_writer_of_a_shared_store_creates_it_with_the_owners_caps(conn: Connection) -> None:
    enable_for_agent(conn, "OWNER", scope="shared", store_code="TEAM", max_files=1, max_store_chars=9)
    enable_for_agent(conn, "OWNER2", scope="shared", store_code="TEAM", max_file_chars=5)
    tool = MemoryTool.for_store(conn, "TEAM")  # made without a configuration
    assert not create(tool, "/memories/a.md", "abc").startswith(ERROR)
    assert store_caps(conn, "shared:TEAM") == Caps(max_file_chars=5, max_files=1, max_store_chars=9)
    assert create(tool, "/memories/b.md") == CAP_FILES.format(name="b.md", n=1)


def test_an_agent_whose_run_creates_a_shared_store_never_loosens_another_configurations_caps(
    conn: Connection,
) -> None:
    """Two agents configured on one shared store: whichever agent's run creates the row, it
    gets the strictest caps of both (not the creating agent's own looser ones)."""
    enable_for_agent(conn, "STRICT", scope="shared", store_code="TEAM", max_files=2)
    enable_for_agent(conn, "LOOSE", scope="shared", store_code="TEAM", max_files=10)
    loose = MemoryTool(conn, "LOOSE")
    assert not create(loose, "/memories/a.md").startswith(ERROR)
    assert store_caps(conn, "shared:TEAM").max_files == 2
    assert not create(MemoryTool(conn, "STRICT"), "/memories/b.md").startswith(ERROR)
    assert create(loose, "/memories/c.md") == CAP_FILES.format(name="c.md", n=2)


def test_a_store_no_configuration_names_gets_the_default_caps(conn: Connection) -> None:
    create(MemoryTool.for_store(conn, "NOBODY"), "/memories/a.md")
    assert store_caps(conn, "shared:NOBODY") == Caps()


def test_use_store_obeys_the_caps_of_the_store(conn: Connection) -> None:
    enable_for_agent(conn, "OWNER", scope="shared", store_code="TEAM", max_files=1)
    with use_store("TEAM"):
        tool = MemoryTool(conn)
        assert not create(tool, "/memories/a.md").startswith(ERROR)
        assert create(tool, "/memories/b.md") == CAP_FILES.format(name="b.md", n=1)
    assert file_count(conn, "shared:TEAM") == 1


def test_a_for_store_tool_obeys_the_caps_of_the_store(conn: Connection) -> None:
    enable_for_agent(conn, "OWNER", scope="shared", store_code="TEAM", max_files=1)
    tool = MemoryTool.for_store(conn, "TEAM")
    assert not create(tool, "/memories/a.md").startswith(ERROR)
    assert create(tool, "/memories/b.md") == CAP_FILES.format(name="b.md", n=1)


def test_the_admin_api_obeys_the_store_row_and_names_its_one_bypass(conn: Connection) -> None:
    enable_for_agent(conn, "A", max_files=1, max_file_chars=5)
    create(MemoryTool(conn, "A"), "/memories/a.md")
    store_id = resolve_store(conn, "A").store_id
    assert store_id is not None
    ref = StoreRef(store_key="agent:A", scope="agent", agent_code="A")
    with pytest.raises(CapExceededError) as info:
        files_api.create_file(conn, store_id, "/memories/b.md", "x")
    assert info.value.cap == "max_files"
    with pytest.raises(CapExceededError):
        files_api.put_file(conn, ref, "/memories/b.md", "x")
    with pytest.raises(CapExceededError) as info:
        files_api.put_file(conn, store_id, "/memories/a.md", "x" * 6)
    assert (info.value.cap, info.value.limit) == ("max_file_chars", 5)
    with pytest.raises(CapExceededError):
        files_api.edit_file(conn, store_id, "/memories/a.md", lambda t: (t * 6, None))
    files_api.put_file(conn, store_id, "/memories/b.md", "x" * 6, enforce_caps=False)
    assert file_count(conn, "agent:A") == 2


def test_a_profile_style_hand_made_store_ref_gets_the_defaults(conn: Connection) -> None:
    ref = StoreRef(store_key="shared:HAND", scope="shared", store_code="HAND")
    files_api.put_file(conn, ref, "/memories/a.md", "x")
    assert store_caps(conn, "shared:HAND") == Caps()


def _cli_url(engine: Engine) -> str:
    if is_memory_sqlite(engine):
        pytest.skip("the CLI opens its own connection: in-memory SQLite cannot be shared")
    return engine.url.render_as_string(hide_password=False)


def _cli(engine: Engine, *args: str, input: str | None = None) -> Any:
    from dbmemory.cli import app

    return CliRunner().invoke(
        app, list(args), input=input, env={"DBMEMORY_URL": _cli_url(engine)}, prog_name="dbmemory"
    )


def test_dbmemory_tool_shared_obeys_the_owners_caps(engine: Engine) -> None:
    _cli_url(engine)
    with engine.begin() as c:
        enable_for_agent(c, "OWNER", scope="shared", store_code="TEAM", max_files=1)
    first = _cli(engine, "tool", "--shared", "TEAM", '{"command": "create", "path": "/memories/a.md", "file_text": "a"}')
    assert first.exit_code == 0, first.output
    second = _cli(engine, "tool", "--shared", "TEAM", '{"command": "create", "path": "/memories/b.md", "file_text": "b"}')
    assert CAP_FILES.format(name="b.md", n=1) in second.output
    with committed_view(engine) as c:
        assert file_count(c, "shared:TEAM") == 1


def test_dbmemory_files_put_obeys_the_store_caps_unless_no_caps(engine: Engine) -> None:
    _cli_url(engine)
    with engine.begin() as c:
        enable_for_agent(c, "OWNER", scope="shared", store_code="TEAM", max_files=1, max_file_chars=4)
    put = ("files", "put", "--store", "shared:TEAM")
    assert _cli(engine, *put[:2], "/memories/a.md", *put[2:], "--text", "aaaa").exit_code == 0
    refused = _cli(engine, *put[:2], "/memories/b.md", *put[2:], "--text", "b")
    assert refused.exit_code != 0 and "max_files" in refused.output or "1 files" in refused.output
    too_long = _cli(engine, *put[:2], "/memories/a.md", *put[2:], "--text", "aaaaa")
    assert too_long.exit_code != 0 and "max_file_chars" in too_long.output
    forced = _cli(engine, *put[:2], "/memories/b.md", *put[2:], "--text", "b", "--no-caps")
    assert forced.exit_code == 0, forced.output
    with committed_view(engine) as c:
        assert file_count(c, "shared:TEAM") == 2
        assert store_caps(c, "shared:TEAM").max_files == 1


def test_files_put_on_a_new_key_creates_the_store_with_the_configured_caps(engine: Engine) -> None:
    _cli_url(engine)
    with engine.begin() as c:
        enable_for_agent(c, "OWNER", scope="shared", store_code="NEW", max_files=3)
    assert _cli(engine, "files", "put", "/memories/a.md", "--store", "shared:NEW", "--text", "a").exit_code == 0
    with committed_view(engine) as c:
        assert store_caps(c, "shared:NEW").max_files == 3


# ============================================================ enable_for_agent, set_store_caps


def test_enable_for_agent_sets_the_caps_of_every_store_it_names(conn: Connection) -> None:
    enable_for_agent(conn, "A", scope="user")
    for user in ("u1", "u2"):
        create(MemoryTool(conn, "A", user_id=user), "/memories/a.md")
    enable_for_agent(conn, "A_B", scope="user")  # "_" is no wildcard: its stores stay
    enable_for_agent(conn, "AxB", scope="user")
    create(MemoryTool(conn, "AxB", user_id="u1"), "/memories/a.md")
    enable_for_agent(conn, "A_B", scope="user", max_files=7)
    assert store_caps(conn, "user:AxB:u1") == Caps()
    enable_for_agent(conn, "A", scope="user", max_files=4, max_store_chars=99)
    for user in ("u1", "u2"):
        assert store_caps(conn, f"user:A:{user}") == Caps(max_files=4, max_store_chars=99)
    assert store_caps(conn, "user:AxB:u1") == Caps()


def test_enable_for_agent_sets_caps_of_context_and_global_stores(conn: Connection) -> None:
    enable_for_agent(conn, "DOCS", scope="context", context_key="doc")
    create(MemoryTool(conn, "DOCS", run_context={"doc": "7"}), "/memories/a.md")
    enable_for_agent(conn, "G", scope="global")
    create(MemoryTool(conn, "G"), "/memories/a.md")
    enable_for_agent(conn, "DOCS", scope="context", context_key="doc", max_files=2)
    enable_for_agent(conn, "G", scope="global", max_file_chars=50)
    ctx = resolve_store(conn, "DOCS", run_context={"doc": "7"}).store_key
    assert store_caps(conn, ctx).max_files == 2
    assert store_caps(conn, "global").max_file_chars == 50


def test_re_enabling_with_a_cap_left_out_restores_the_default_on_the_store(conn: Connection) -> None:
    enable_for_agent(conn, "A", max_files=1, max_store_chars=10)
    tool = MemoryTool(conn, "A")
    create(tool, "/memories/a.md")
    assert create(tool, "/memories/b.md") == CAP_FILES.format(name="b.md", n=1)
    enable_for_agent(conn, "A")
    assert store_caps(conn, "agent:A") == Caps()
    assert not create(MemoryTool(conn, "A"), "/memories/b.md").startswith(ERROR)


def test_lowered_caps_keep_content_refuse_growth_and_allow_shrinking(conn: Connection) -> None:
    enable_for_agent(conn, "A")
    tool = MemoryTool(conn, "A")
    create(tool, "/memories/a.md", "0123456789")
    create(tool, "/memories/b.md", "b")
    enable_for_agent(conn, "A", max_file_chars=5, max_files=1)
    assert file_count(conn, "agent:A") == 2
    assert create(tool, "/memories/c.md") == CAP_FILES.format(name="c.md", n=1)
    grow = tool.execute({"command": "str_replace", "path": "/memories/a.md", "old_str": "9", "new_str": "9X"})
    assert grow.startswith("Error: Cannot write /memories/a.md: it would hold 11 characters"), grow
    shrink = tool.execute({"command": "str_replace", "path": "/memories/a.md", "old_str": "89", "new_str": ""})
    assert not shrink.startswith(ERROR), shrink
    assert not tool.execute({"command": "delete", "path": "/memories/b.md"}).startswith(ERROR)


def test_set_store_caps_sets_one_store_audited_with_none_as_default(conn: Connection) -> None:
    enable_for_agent(conn, "A", max_files=5)
    tool = MemoryTool(conn, "A")
    create(tool, "/memories/a.md")
    store_id = resolve_store(conn, "A").store_id
    assert store_id is not None
    assert set_store_caps(conn, store_id, max_files=1) == Caps(max_files=1)
    assert create(tool, "/memories/b.md") == CAP_FILES.format(name="b.md", n=1)
    assert set_store_caps(conn, shared_store("NEWONE"), max_store_chars=3) == Caps(max_store_chars=3)
    assert store_caps(conn, "shared:NEWONE") == Caps(max_store_chars=3)
    details = conn.execute(
        sa.select(audit_events.c.detail_text).where(audit_events.c.action_name == "store_caps")
    ).scalars().all()
    assert len(details) == 2 and "max_files=1" in details[0] and "was" in details[0]
    with pytest.raises(NotFoundError):
        set_store_caps(conn, 10**9)


# ======================================================================== isolation-level races

LEVELS = ("default", "READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE")
OFFERED = {
    "sqlite": ("default",),
    "postgresql": ("READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"),
    "mysql": ("READ COMMITTED", "REPEATABLE READ"),
    "mariadb": ("READ COMMITTED", "REPEATABLE READ"),
    "oracle": ("READ COMMITTED", "SERIALIZABLE"),
}
RETRY = "another writer changed this memory store after the current transaction began"


@pytest.fixture(params=LEVELS)
def level_engine(request: pytest.FixtureRequest, engine: Engine) -> Engine:
    """``engine`` at one isolation level the backend offers (others are skipped)."""
    if is_memory_sqlite(engine):
        pytest.skip("in-memory SQLite has a single shared connection: no concurrent writers")
    level = request.param
    if level not in OFFERED.get(engine.dialect.name, ()):
        pytest.skip(f"{engine.dialect.name} is tested at {OFFERED.get(engine.dialect.name)}")
    return engine if level == "default" else engine.execution_options(isolation_level=level)


def _race(engine: Engine, agent: str, first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """Two writers in two threads, each in its own transaction: both take their snapshot (a
    view) before either writes (except on SQLite, whose write lock is taken at BEGIN), then
    both write and commit. Bounded by barrier and join timeouts."""
    sqlite = engine.dialect.name == "sqlite"
    start, snapshots = threading.Barrier(2), threading.Barrier(2)
    answers: list[Any] = [None, None]

    def writer(index: int, arguments: dict[str, Any]) -> None:
        try:
            start.wait(timeout=30)
            with engine.connect() as c:
                with c.begin():
                    tool = MemoryTool(c, agent)
                    tool.execute({"command": "view", "path": "/memories"})
                    if not sqlite:
                        snapshots.wait(timeout=30)
                    answers[index] = tool.execute(arguments)
        except BaseException as exc:  # noqa: BLE001 - reported in the main thread
            answers[index] = exc

    threads = [threading.Thread(target=writer, args=(i, a), daemon=True) for i, a in enumerate((first, second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
        assert not t.is_alive(), "a writer hung"
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers


def _seed(engine: Engine, agent: str, texts: dict[str, str], **caps: int) -> None:
    with engine.begin() as c:
        enable_for_agent(c, agent, **caps)
        tool = MemoryTool(c, agent)
        for path, text in texts.items():
            assert not create(tool, path, text).startswith(ERROR)


def _committed(engine: Engine, agent: str) -> dict[str, int]:
    with committed_view(engine) as c:
        rows = c.execute(
            sa.select(files.c.file_path, files.c.char_count)
            .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
            .where(stores.c.store_key == f"agent:{agent}")
        ).all()
    return {path: chars for path, chars in rows}


def _one_winner(answers: list[str], loser_texts: tuple[str, ...]) -> str:
    winners = [a for a in answers if not a.startswith(ERROR)]
    losers = [a for a in answers if a.startswith(ERROR)]
    assert len(winners) == 1 and len(losers) == 1, answers
    assert any(text in losers[0] for text in (*loser_texts, RETRY)), losers[0]
    assert_no_leak(losers[0])
    LOSERS.append(losers[0])
    return losers[0]


LOSERS: list[str] = []
"""Every loser's answer (for a look with ``-s``)."""


def test_two_writers_never_exceed_max_files_at_any_isolation_level(level_engine: Engine) -> None:
    _seed(level_engine, "RACE", {"/memories/s1.md": "1", "/memories/s2.md": "2"}, max_files=3)
    answers = _race(
        level_engine,
        "RACE",
        {"command": "create", "path": "/memories/a.md", "file_text": "a"},
        {"command": "create", "path": "/memories/b.md", "file_text": "b"},
    )
    _one_winner(answers, ("the memory store already holds 3 files",))
    assert len(_committed(level_engine, "RACE")) == 3


def test_two_writers_never_exceed_max_store_chars_at_any_isolation_level(level_engine: Engine) -> None:
    _seed(level_engine, "RACE", {"/memories/s.md": "s" * 10}, max_store_chars=30)
    answers = _race(
        level_engine,
        "RACE",
        {"command": "create", "path": "/memories/a.md", "file_text": "a" * 15},
        {"command": "create", "path": "/memories/b.md", "file_text": "b" * 15},
    )
    _one_winner(answers, ("the memory store would hold 40 characters",))
    assert sum(_committed(level_engine, "RACE").values()) == 25


def test_a_path_never_becomes_a_file_and_a_directory_at_any_isolation_level(
    level_engine: Engine,
) -> None:
    _seed(level_engine, "RACE", {"/memories/s.md": "s"})
    answers = _race(
        level_engine,
        "RACE",
        {"command": "create", "path": "/memories/a", "file_text": "file"},
        {"command": "create", "path": "/memories/a/b.md", "file_text": "inside"},
    )
    _one_winner(answers, ("is a file, not a directory", "is a directory", "a path cannot be a file and a directory"))
    paths = set(_committed(level_engine, "RACE"))
    assert not ({"/memories/a", "/memories/a/b.md"} <= paths), paths


def test_a_retry_in_a_new_transaction_succeeds_after_a_serialization_failure(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL REPEATABLE READ: the stale-snapshot writer is refused")
    _seed(engine, "RACE", {"/memories/s.md": "s"}, max_files=5)
    rr = engine.execution_options(isolation_level="REPEATABLE READ")
    with rr.connect() as late:
        late.begin()
        tool = MemoryTool(late, "RACE")
        tool.execute({"command": "view", "path": "/memories"})  # the snapshot
        with engine.begin() as early:
            assert not create(MemoryTool(early, "RACE"), "/memories/a.md").startswith(ERROR)
        answer = create(tool, "/memories/b.md")
        assert RETRY in answer and "roll back and retry the whole turn" in answer, answer
        assert create(tool, "/memories/c.md").startswith(ERROR)  # fails again in the same one
        store_id = resolve_store(late, "RACE").store_id
        with pytest.raises(ConflictError) as info:
            files_api.put_file(late, store_id, "/memories/d.md", "x")  # type: ignore[arg-type]
        assert info.value.code == SERIALIZATION_FAILURE
        assert "retry the whole transaction" in info.value.message
        late.rollback()
    with rr.begin() as again:
        assert not create(MemoryTool(again, "RACE"), "/memories/b.md").startswith(ERROR)
    assert set(_committed(engine, "RACE")) == {"/memories/s.md", "/memories/a.md", "/memories/b.md"}
