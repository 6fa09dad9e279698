"""DbMemoryTool as a drop-in for the Anthropic SDK's BetaLocalFilesystemMemoryTool: a
differential test.

The same call sequences run against the SDK's own tool (in a temporary directory) and against
the adapter (on each backend); after every call the answers must be identical byte for byte
(the text returned, or the ``ToolError`` text) and the two stores must hold the same files
with the same texts. The scripted sequences cover every command and every error text the SDK
has; hypothesis adds random sequences.

Documented differences (``dbmemory.integrations.anthropic_tool``'s docstring), handled here:

* after each SDK call, empty directories are removed from the SDK's tree (a store has no empty
  directories);
* where the SDK's tool crashes (an exception other than ``ToolError``), the adapter must
  answer with a ``ToolError`` instead (counted apart, as "SDK crashes");
* paths and texts stay inside dbmemory's rules, except in the tests of those differences.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from dbmemory.db.dialect.expiry import utf8_length
from dbmemory.db.dialect.oracle import oracle19_dialect

pytest.importorskip("anthropic")

from anthropic.lib.tools import ToolError  # noqa: E402
from anthropic.tools.memory import (  # noqa: E402
    BetaAsyncLocalFilesystemMemoryTool,
    BetaLocalFilesystemMemoryTool,
)
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as hs  # noqa: E402

from dbmemory.integrations.anthropic_texts import format_size  # noqa: E402
from dbmemory.integrations.anthropic_tool import AsyncDbMemoryTool, DbMemoryTool  # noqa: E402
from dbmemory.store.agents import enable_for_agent, set_store_caps  # noqa: E402
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file, list_files  # noqa: E402

AGENT = "DROPIN"
_users = itertools.count(1)
TALLY: dict[str, dict[str, int]] = {}
"""Per backend: calls compared, identical answers, calls where the SDK's tool crashed."""


def _tally(engine: Engine) -> dict[str, int]:
    name = engine.dialect.name
    if name == "sqlite":
        name += "-memory" if engine.url.database in (None, "", ":memory:") else "-file"
    return TALLY.setdefault(name, {"calls": 0, "identical": 0, "sdk_crashes": 0})


def _outcome(call: Any) -> tuple[str, str]:
    try:
        return ("ok", call())
    except ToolError as exc:
        return ("error", str(exc))
    except Exception as exc:  # the SDK's tool crashing (its bug)
        return ("crash", type(exc).__name__)


class Sdk:
    """The SDK's tool in a directory of its own; empty directories pruned after each call."""

    def __init__(self, base: Path) -> None:
        self.tool = BetaLocalFilesystemMemoryTool(str(base))
        self.root = base / "memories"

    def prune(self) -> None:
        for dirpath, _dirs, _files in sorted(os.walk(self.root), key=lambda w: -len(w[0])):
            if Path(dirpath) != self.root and not os.listdir(dirpath):
                os.rmdir(dirpath)

    def call(self, command: dict[str, Any]) -> tuple[str, str]:
        try:
            return _outcome(lambda: self.tool.call(command))
        finally:
            self.prune()

    def snapshot(self) -> dict[str, str]:
        found = {}
        for dirpath, _dirs, names in os.walk(self.root):
            for name in names:
                full = Path(dirpath) / name
                found["/memories/" + full.relative_to(self.root).as_posix()] = full.read_bytes().decode("utf-8")
        return found


class Ours:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.user = f"u-{next(_users)}"
        self.tool = DbMemoryTool(engine, AGENT, user_id=self.user)

    def call(self, command: dict[str, Any]) -> tuple[str, str]:
        return _outcome(lambda: self.tool.call(command))

    def snapshot(self) -> dict[str, str]:
        with self.engine.connect() as conn:
            store_id = find_store_id(conn, f"user:{AGENT}:{self.user}")
            if store_id is None:
                return {}
            return {f.path: get_file(conn, store_id, f.path).text for f in list_files(conn, store_id)}


@pytest.fixture
def agent(engine: Engine) -> Engine:
    with engine.begin() as conn:
        enable_for_agent(conn, AGENT, scope="user")
    return engine


@pytest.fixture
def pair(agent: Engine, tmp_path: Path) -> tuple[Sdk, Ours]:
    return Sdk(tmp_path), Ours(agent)


def run(sdk: Sdk, ours: Ours, commands: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Run each command on both; assert identical answers and stores after each."""
    answers = []
    tally = _tally(ours.engine)
    for command in commands:
        expected, got = sdk.call(command), ours.call(command)
        tally["calls"] += 1
        if expected[0] == "crash":
            tally["sdk_crashes"] += 1
            assert got[0] == "error", (command, expected, got)
        else:
            assert got == expected, command
            tally["identical"] += 1
        assert ours.snapshot() == sdk.snapshot(), command
        answers.append(got)
    return answers


def V(path: str, view_range: list[int] | None = None) -> dict[str, Any]:
    return {"command": "view", "path": path} | ({} if view_range is None else {"view_range": view_range})


def C(path: str, text: str) -> dict[str, Any]:
    return {"command": "create", "path": path, "file_text": text}


def S(path: str, old: str, new: str) -> dict[str, Any]:
    return {"command": "str_replace", "path": path, "old_str": old, "new_str": new}


def I(path: str, line: int, text: str) -> dict[str, Any]:  # noqa: E743
    return {"command": "insert", "path": path, "insert_line": line, "insert_text": text}


def D(path: str) -> dict[str, Any]:
    return {"command": "delete", "path": path}


def R(old: str, new: str) -> dict[str, Any]:
    return {"command": "rename", "old_path": old, "new_path": new}


TREE = [
    C("/memories/notes.md", "Line 1\nLine 2\nLine 3\n"),
    C("/memories/prefs/tea.md", "I prefer tea — not coffee.\n"),
    C("/memories/prefs/deep/deeper/x.md", "deep"),
    C("/memories/prefs/deep/y.md", "€" * 700),
    C("/memories/.hidden.md", "hidden"),
    C("/memories/.secret/a.md", "hidden dir"),
    C("/memories/big.md", "x" * 1536),
    C("/memories/kb.md", "y" * 4096),
    C("/memories/odd.md", "z" * 1025),
    C("/memories/empty.md", ""),
    C("/memories/Zeta.md", "capital first"),
    C("/memories/é.md", "accent"),
]

SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "view root of an empty store": [V("/memories"), V("/memories/")],
    "view directories": TREE
    + [V("/memories"), V("/memories/"), V("/memories//prefs"), V("/memories/prefs"), V("/memories/prefs/"),
       V("/memories/prefs/deep"), V("/memories/.secret"), V("/memories/prefs/../prefs")],
    # the SDK's tool ignores a view_range on a directory (valid, reversed, huge): so does this one
    "view_range on a directory": TREE
    + [V("/memories", [1, 2]), V("/memories/prefs", [2, -1]), V("/memories", [5, 1]), V("/memories", [1e308, 2]),
       V("/memories/prefs/", [0, 0])],
    "view files": TREE
    + [V("/memories/notes.md"), V("/memories/empty.md"), V("/memories/.hidden.md"), V("/memories/prefs/tea.md"),
       V("/memories/prefs/../notes.md"), V("/memories/./notes.md")],
    "view ranges": [C("/memories/r.md", "1\n2\n3\n4\n5")]
    + [V("/memories/r.md", r) for r in ([2, 4], [2, -1], [0, 2], [-3, 2], [10, 20], [3, 1], [1], [], [1, 2, 3],
                                        [5, 5], [1, -2], [4, 0])],
    "view errors": [C("/memories/f.md", "x"), V("/memories", ["a", 2]), V("/memories", 5), V("/memories/missing.md"), V("/memories/f.md/x"), V("/notes.md"),
                    V("memories/x"), V("/memories/../x"), V("/memories/a/../../x"), V(""), V("/Memories/x")],
    "texts with CR, CRLF, trailing newlines": [
        C("/memories/crlf.md", "a\r\nb\r\n"), V("/memories/crlf.md"), V("/memories"),
        C("/memories/cr.md", "a\rb"), V("/memories/cr.md"), C("/memories/nl.md", "\n\n"), V("/memories/nl.md"),
        I("/memories/crlf.md", 1, "mid\r"), V("/memories/crlf.md"), S("/memories/crlf.md", "b\r", "B"),
        V("/memories/crlf.md"),
    ],
    "create": [C("/memories/a.md", "Hello, World!"), C("/memories/deep/nested/file.txt", "Nested"),
               C("/memories/a.md", "again"), C("/memories/deep", "a directory"), C("/memories", "root"),
               C("/memories/", "root"), C("/etc/passwd", "x"), C("/memories/../../etc/passwd", "x"),
               C("/memories/x/../b.md", "lexical"), C("/memories/ünï.md", "ü" * 30), V("/memories")],
    "str_replace": [
        C("/memories/s.md", "l1\nl2\nl3\nl4\nl5\nl6\nl7\n"), S("/memories/s.md", "l1", "L1"),
        S("/memories/s.md", "l4", "L4\nextra"), S("/memories/s.md", "l7\n", "end"), V("/memories/s.md"),
        S("/memories/s.md", "nope", "x"), S("/memories/s.md", "l", "x"), C("/memories/o.md", "aaa"),
        S("/memories/o.md", "aa", "b"), V("/memories/o.md"), C("/memories/e.md", ""), S("/memories/e.md", "", "new"),
        V("/memories/e.md"), S("/memories/o.md", "", "x"), C("/memories/m.md", "a\nb a\na"),
        S("/memories/m.md", "a", "c"), S("/memories/missing.md", "a", "b"), C("/memories/d/f.md", "x"),
        S("/memories/d", "x", "y"), S("/memories", "x", "y"), S("/memories/", "x", "y"), S("/other", "x", "y"),
        S("/memories/s.md", "L1", ""), V("/memories"),
    ],
    "insert": [
        C("/memories/i.md", "Line 1\nLine 2"), I("/memories/i.md", 1, "Inserted"), I("/memories/i.md", 0, "First"),
        I("/memories/i.md", 4, "Last\n\n"), V("/memories/i.md"), I("/memories/i.md", 6, "x"),
        I("/memories/i.md", -1, "x"), C("/memories/t.md", "a\n"), I("/memories/t.md", 1, "b"),
        V("/memories/t.md"), C("/memories/z.md", ""), I("/memories/z.md", 0, ""), V("/memories/z.md"),
        I("/memories/z.md", 2, "x"), C("/memories/w.md", "a\n\n"), I("/memories/w.md", 2, "c"),
        V("/memories/w.md"), I("/memories/missing.md", 0, "x"), C("/memories/d/f.md", "x"),
        I("/memories/d", 0, "x"), I("/memories", 0, "x"), I("/x", 0, "y"), V("/memories"),
    ],
    "delete": [
        C("/memories/a.md", "x"), C("/memories/d/b.md", "y"), C("/memories/d/e/c.md", "z"), C("/memories/.h", "h"),
        D("/memories/a.md"), D("/memories/a.md"), D("/memories/d/e"), V("/memories/d"), D("/memories/d"),
        D("/memories/d"), D("/memories"), D("/memories/"), D("/memories/x/.."), D("/memories/.h"), D("/elsewhere"),
        D("/memories/../x"), V("/memories"),
    ],
    "rename": [
        C("/memories/a.md", "A"), C("/memories/b.md", "B"), C("/memories/d/c.md", "C"), C("/memories/d/e/f.md", "F"),
        R("/memories/a.md", "/memories/a2.md"), R("/memories/a2.md", "/memories/new/deep/a.md"),
        R("/memories/missing.md", "/memories/z.md"), R("/memories/b.md", "/memories/d/c.md"),
        R("/memories/b.md", "/memories/d"), R("/memories/b.md", "/memories"), R("/memories", "/memories/x"),
        R("/memories/", "/memories/x"), R("/memories/b.md", "/memories/b.md"), R("/memories/q.md", "/memories/q.md"),
        R("/memories/d", "/memories/d2"), V("/memories"), R("/x", "/memories/y"), R("/memories/b.md", "/y"),
        R("/memories/../b.md", "/memories/y"), R("/memories/missing", "/memories/d2/c.md"), V("/memories/d2"),
    ],
    "sdk crashes": [
        C("/memories/f.md", "file"), C("/memories/f.md/x.md", "under a file"), C("/memories/f.md/a/b.md", "deeper"),
        C("/memories/d/g.md", "g"), R("/memories/d", "/memories/d/inner"), R("/memories/d/g.md", "/memories/f.md/g.md"),
        V("/memories"),
    ],
}


@pytest.mark.parametrize("script", list(SCRIPTS), ids=list(SCRIPTS))
def test_every_command_and_error_answers_as_the_sdk(pair: tuple[Sdk, Ours], script: str) -> None:
    run(*pair, SCRIPTS[script])


def test_clear_all_memory_answers_as_the_sdk(pair: tuple[Sdk, Ours]) -> None:
    sdk, ours = pair
    run(sdk, ours, [C("/memories/a.md", "x"), C("/memories/b/c.md", "y")])
    assert ours.tool.clear_all_memory() == sdk.tool.clear_all_memory() == "All memory cleared"
    assert ours.snapshot() == sdk.snapshot() == {}
    run(sdk, ours, [V("/memories")])


def test_the_sdk_command_models_and_the_call_entry_point_give_the_same_texts(pair: tuple[Sdk, Ours]) -> None:
    from anthropic.types.beta import (
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818ViewCommand,
    )

    sdk, ours = pair
    create = BetaMemoryTool20250818CreateCommand(command="create", path="/memories/m.md", file_text="m\n")
    view = BetaMemoryTool20250818ViewCommand(command="view", path="/memories/m.md", view_range=[1, 1])
    assert ours.tool.create(create) == sdk.tool.create(create)
    assert ours.tool.view(view) == sdk.tool.view(view)
    assert ours.tool.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories")) == sdk.tool.view(
        BetaMemoryTool20250818ViewCommand(command="view", path="/memories")
    )


def test_the_async_tools_answer_alike(agent: Engine, tmp_path: Path) -> None:
    sdk = BetaAsyncLocalFilesystemMemoryTool(str(tmp_path))
    ours = AsyncDbMemoryTool(agent, AGENT, user_id=f"u-{next(_users)}")
    commands = [C("/memories/a.md", "x\ny"), V("/memories"), V("/memories/a.md"), S("/memories/a.md", "y", "z"),
                I("/memories/a.md", 0, "top"), C("/memories/a.md", "again"), R("/memories/a.md", "/memories/b.md"),
                D("/memories/b.md"), D("/memories/b.md")]

    async def answers(tool: Any) -> list[tuple[str, str]]:
        out = []
        for command in commands:
            try:
                out.append(("ok", await tool.call(command)))
            except ToolError as exc:
                out.append(("error", str(exc)))
        return out

    assert asyncio.run(answers(ours)) == asyncio.run(answers(sdk))


# -- the documented differences ----------------------------------------------------------------


def test_a_directory_exists_while_it_holds_a_file(agent: Engine, tmp_path: Path) -> None:
    raw = BetaLocalFilesystemMemoryTool(str(tmp_path))  # not pruned: the SDK keeps empty directories
    ours = Ours(agent)
    for tool in (raw, ours.tool):
        tool.call(C("/memories/d/a.md", "x"))
        tool.call(D("/memories/d/a.md"))
    assert raw.call(V("/memories/d")).startswith("Here're the files")
    with pytest.raises(ToolError, match=r"^The path /memories/d does not exist\. Please provide a valid path\.$"):
        ours.tool.call(V("/memories/d"))


def test_memories_followed_by_letters_is_refused_not_mapped_into_memories(pair: tuple[Sdk, Ours]) -> None:
    sdk, ours = pair
    assert sdk.call(C("/memoriesX/a.md", "x"))[0] == "ok" and "/memories/X/a.md" in sdk.snapshot()  # the SDK's bug
    kind, text = ours.call(C("/memoriesX/a.md", "x"))
    assert kind == "error" and text.startswith("Path must be /memories or start with /memories/, got: /memoriesX/a.md")
    assert ours.snapshot() == {}


@pytest.mark.parametrize(
    ("path", "rule"),
    [("/memories/a\u200b.md", "U+200B"), ("/memories/a\x00.md", "U+0000"), ("/memories/ a.md", "whitespace")],
)
def test_paths_outside_dbmemorys_rules_get_its_text(pair: tuple[Sdk, Ours], path: str, rule: str) -> None:
    kind, text = pair[1].call(C(path, "x"))
    assert kind == "error" and rule in text


def test_a_write_past_a_cap_is_refused_with_dbmemorys_text(agent: Engine, tmp_path: Path) -> None:
    ours = Ours(agent)
    ours.call(C("/memories/a.md", "x"))
    with agent.begin() as conn:
        set_store_caps(conn, find_store_id(conn, f"user:{AGENT}:{ours.user}"), max_file_chars=10)
    kind, text = ours.call(S("/memories/a.md", "x", "y" * 11))
    assert kind == "error" and "the limit is 10 characters per file" in text
    assert ours.snapshot() == {"/memories/a.md": "x"}


def test_sizes_are_utf8_bytes_as_the_sdk_shows_them(pair: tuple[Sdk, Ours]) -> None:
    sdk, ours = pair
    texts = {"a.md": "é" * 18, "b.md": "😀" * 9, "c.md": "x" * 1023, "d.md": "x" * 1024, "e.md": "€" * 512}
    answers = run(sdk, ours, [C(f"/memories/{name}", text) for name, text in texts.items()] + [V("/memories")])
    assert "36B\t/memories/a.md" in answers[-1][1] and "36B\t/memories/b.md" in answers[-1][1]
    assert "1.5K\t/memories/e.md" in answers[-1][1] and "4K\t/memories\n" in answers[-1][1]
    assert [format_size(n) for n in (0, 1, 1023, 1024, 1025, 1536, 4096, 1048576, 3 * 2**30, 5 * 2**40)] == [
        "0B", "1B", "1023B", "1K", "1.0K", "1.5K", "4K", "1M", "3G", "5120G"]


MALFORMED = [
    {"command": "frobnicate", "path": "/memories"},
    {"path": "/memories"},
    {"command": "view"},
    {"command": "view", "path": "/memories/f.md", "view_range": ["a", 2]},
    {"command": "create", "path": "/memories/new.md"},
    {"command": "str_replace", "path": "/memories/f.md", "old_str": "x"},
    {"command": "insert", "path": "/memories/f.md", "insert_text": "x"},
    {"command": "rename", "old_path": "/memories/f.md"},
]


@pytest.mark.parametrize("command", MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
def test_malformed_inputs_that_crash_the_sdk_are_error_texts_that_write_nothing(
    pair: tuple[Sdk, Ours], command: dict[str, Any]
) -> None:
    sdk, ours = pair
    run(sdk, ours, [C("/memories/f.md", "x\n")])
    assert sdk.call(command)[0] == "crash"
    kind, text = ours.call(command)
    assert kind == "error" and text, text
    assert ours.snapshot() == {"/memories/f.md": "x\n"}


def test_the_line_limit_answers_as_the_sdk(pair: tuple[Sdk, Ours]) -> None:
    sdk, ours = pair
    with ours.engine.begin() as conn:
        set_store_caps(conn, ours.tool._backend._tool(conn).store, max_file_chars=2_000_000)
    answers = run(sdk, ours, [C("/memories/long.md", "\n" * 999_998), V("/memories/long.md", [999_999, -1]),
                              C("/memories/longer.md", "\n" * 999_999), V("/memories/longer.md")])
    assert answers[1] == ("ok", "Here's the content of /memories/long.md with line numbers:\n999999\t")
    assert answers[3] == ("error", "File /memories/longer.md exceeds maximum line limit of 999,999 lines.")


def test_sizes_measured_in_python_where_the_database_cannot_equal_the_databases(
    agent: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dbmemory.store import reads as store_reads
    from dbmemory.store.reads import file_bytes

    ours = Ours(agent)
    for name, text in {"a.md": "é" * 18, "b/c.md": "😀€x", "e.md": ""}.items():
        ours.call(C(f"/memories/{name}", text))
    key = f"user:{AGENT}:{ours.user}"
    with agent.connect() as conn:
        measured = file_bytes(conn, key, "/memories")
        monkeypatch.setattr(store_reads, "utf8_length", lambda bind, column: None)  # Oracle's answer
        assert file_bytes(conn, key, "/memories") == measured == [
            ("/memories/a.md", 36), ("/memories/b/c.md", 8), ("/memories/e.md", 0)]
        assert file_bytes(conn, key, "/memories/b") == [("/memories/b/c.md", 8)]
    assert utf8_length(oracle19_dialect(), None) is None


# -- random sequences --------------------------------------------------------------------------

_paths = hs.sampled_from(
    ["/memories", "/memories/", "/memories/a", "/memories/a/b", "/memories/a/b/c", "/memories/é", "/memories/.h",
     "/memories/a/.h", "/memories/Z.md", "/memories/a/../Z.md"]
)
_texts = hs.text(alphabet="ab\n\ré€ ", max_size=12)
_commands = hs.one_of(
    hs.builds(V, _paths, hs.one_of(hs.none(), hs.lists(hs.integers(-2, 6), min_size=2, max_size=2))),
    hs.builds(C, _paths, _texts),
    hs.builds(C, _paths, _texts),
    hs.builds(S, _paths, _texts, _texts),
    hs.builds(S, _paths, hs.sampled_from(["a", "b", "\n", "é"]), _texts),
    hs.builds(I, _paths, hs.integers(-1, 5), _texts),
    hs.builds(D, _paths),
    hs.builds(R, _paths, _paths),
)




@pytest.fixture
def examples(backend_name: str) -> int:
    return 150 if backend_name.startswith("sqlite") else 40


def test_random_sequences_answer_as_the_sdk(agent: Engine, examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(hs.lists(_commands, min_size=1, max_size=14))
    def check(commands: list[dict[str, Any]]) -> None:
        base = tempfile.mkdtemp()
        try:
            run(Sdk(Path(base)), Ours(agent), commands)
        finally:
            shutil.rmtree(base)

    check()


def test_zz_report_the_tally(capsys: pytest.CaptureFixture[str]) -> None:
    """Not a check: prints how many calls matched (run with -s to see it)."""
    with capsys.disabled():
        for backend, t in sorted(TALLY.items()):
            print(
                f"\nanthropic drop-in on {backend}: {t['identical']} of {t['calls'] - t['sdk_crashes']} answers "
                f"identical (plus {t['sdk_crashes']} calls where the SDK's tool crashes and the adapter answers "
                "with an error)"
            )
