"""Bad input to the MEMORY tool, on every backend (issue 5, "Bad input").

Oversized arguments, invalid UTF-8 and lone surrogates, NUL, JSON that is not an object, deeply
nested JSON, a wrong type for every parameter of every command, an unknown command and a 10 MB
``file_text``: each gets the documented error text (``dbmemory.tool.messages``), quickly (a
generous wall-time sanity bound) and with bounded memory (``tracemalloc`` peak), nothing is
written (row counts and texts through a connection that sees only committed data), and the
caller's transaction stays usable.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from dbmemory.core.paths import normalize_path
from dbmemory.errors import InvalidPathError
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import delete_path, rename_path
from dbmemory.store.reads import list_directory
from dbmemory.tool import MemoryTool, messages
from dbmemory.tool.args import MAX_ARGUMENT_CHARS, MAX_TEXT_CHARS
from helpers import ERROR, assert_no_leak, committed_view, counts, store_files

STORE = "badinput"
KEY = f"shared:{STORE}"
FILE = "/memories/keep.md"
TEXT = "keep\nthis\n"
SECONDS = 5.0
"""Sanity bound on one call's wall time (every case takes milliseconds)."""
MB = 1024 * 1024

TEN_MB = "x" * (10 * 1000 * 1000)
OVER_TEXT = "y" * (MAX_TEXT_CHARS + 1)


@pytest.fixture
def seeded(engine: Engine) -> Engine:
    """The engine with store ``shared:badinput`` holding one committed file."""
    with engine.begin() as c:
        assert MemoryTool.for_store(c, STORE).execute(
            {"command": "create", "path": FILE, "file_text": TEXT}
        ).startswith("File created")
    return engine


def snapshot(engine: Engine) -> tuple[Any, ...]:
    with committed_view(engine) as c:
        return counts(c), store_files(c)


def call(engine: Engine, arguments: object, *, peak_mb: float) -> str:
    """Run one tool call in a transaction; check time, memory, the transaction and no change."""
    before = snapshot(engine)
    with engine.connect() as c:
        with c.begin():
            tool = MemoryTool.for_store(c, STORE)
            tracemalloc.start()
            t0 = time.perf_counter()
            try:
                text = tool.execute(arguments)
            finally:
                elapsed = time.perf_counter() - t0
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            # the caller's transaction is still usable after the refusal
            assert c.exec_driver_sql("SELECT 1").scalar() == 1
    assert isinstance(text, str)
    assert text.startswith(ERROR), text[:300]
    assert_no_leak(text[:2000])
    assert len(text) < 2000, f"error text of {len(text)} characters"
    text.encode("utf-8")  # the answer goes back to a model as UTF-8: no lone surrogate in it
    assert elapsed < SECONDS, f"{elapsed:.1f}s for one refused call"
    assert peak < peak_mb * MB, f"tracemalloc peak {peak / MB:.1f} MB > {peak_mb} MB"
    assert snapshot(engine) == before
    return text


# ----------------------------------------------------------------- not an object / bad JSON


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("[]", messages.arguments_not_an_object([])),
        ('[{"command": "view", "path": "/memories"}]', messages.arguments_not_an_object([{}])),
        ("42", messages.arguments_not_an_object(42)),
        ("3.5", messages.arguments_not_an_object(3.5)),
        ("true", messages.arguments_not_an_object(True)),
        ("null", messages.arguments_not_an_object(None)),
        ('"\\"[1, 2]\\""', messages.arguments_not_an_object("")),
        ([1, 2], messages.arguments_not_an_object([1, 2])),
        (None, messages.arguments_not_an_object(None)),
        (7, messages.arguments_not_an_object(7)),
    ],
    ids=["array", "array-of-object", "int", "float", "bool", "null", "string-of-string", "list",
         "None", "python-int"],
)
def test_arguments_that_are_not_an_object_get_the_documented_text(
    seeded: Engine, raw: object, expected: str
) -> None:
    assert call(seeded, raw, peak_mb=5) == ERROR + expected


@pytest.mark.parametrize(
    "raw",
    ["{", "", "   ", '{"command": "view", "path": }', "{'command': 'view'}", "NaN garbage",
     b'{"command": "view", "path": "/memories/\xff.md"}'],
    ids=["open-brace", "empty", "blank", "missing-value", "single-quotes", "garbage", "bytes-not-utf8"],
)
def test_text_that_is_not_json_gets_the_invalid_json_text(seeded: Engine, raw: object) -> None:
    text = call(seeded, raw, peak_mb=5)
    assert text.startswith(ERROR + "The arguments are not valid JSON ("), text
    assert text.endswith(
        'send one JSON object such as {"command": "view", "path": "/memories"}.'
    ), text


@pytest.mark.parametrize("depth", [10_000, 100_000, 1_000_000])
def test_deeply_nested_json_is_refused_as_too_deep(seeded: Engine, depth: int) -> None:
    raw = "[" * depth + "]" * depth
    assert call(seeded, raw, peak_mb=64) == ERROR + messages.arguments_too_deep()


def test_deep_nesting_inside_an_object_is_refused_as_too_deep(seeded: Engine) -> None:
    depth = 200_000
    raw = '{"command": "create", "path": "/memories/n.md", "file_text": ' + "[" * depth + "]" * depth + "}"
    assert call(seeded, raw, peak_mb=64) == ERROR + messages.arguments_too_deep()


def test_deeply_nested_python_value_as_a_parameter_is_a_wrong_type(seeded: Engine) -> None:
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    text = call(seeded, {"command": "create", "path": "/memories/n.md", "file_text": nested}, peak_mb=16)
    assert text.startswith(ERROR + "Parameter `file_text` must be a string, got array"), text[:200]


def test_argument_text_over_the_hard_bound_is_refused_before_parsing(seeded: Engine) -> None:
    raw = '{"command": "create", "path": "/memories/big.md", "file_text": "' + "z" * MAX_ARGUMENT_CHARS + '"}'
    text = call(seeded, raw, peak_mb=8)
    assert text == ERROR + messages.arguments_too_long(len(raw), MAX_ARGUMENT_CHARS)


# ------------------------------------------------------------------- commands and parameters


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("format", messages.unknown_command("format")),
        ("", messages.unknown_command("")),
        ("view\x00", messages.unknown_command("view\x00")),
        ("str-replace", messages.unknown_command("str-replace")),
        ("x" * 100_000, messages.unknown_command("x" * 100_000)),
    ],
    ids=["format", "empty", "nul", "dash", "huge"],
)
def test_unknown_command_names_the_six(seeded: Engine, command: str, expected: str) -> None:
    assert call(seeded, {"command": command, "path": FILE}, peak_mb=5) == ERROR + expected


def test_missing_command_is_the_documented_text(seeded: Engine) -> None:
    assert call(seeded, {"path": FILE}, peak_mb=5) == ERROR + messages.missing_command()
    assert call(seeded, {"command": None, "path": FILE}, peak_mb=5) == ERROR + messages.missing_command()


PARAMETERS: dict[str, dict[str, object]] = {
    "view": {"path": FILE},
    "create": {"path": "/memories/new.md", "file_text": "text"},
    "str_replace": {"path": FILE, "old_str": "keep", "new_str": "KEEP"},
    "insert": {"path": FILE, "insert_line": 1, "insert_text": "more"},
    "delete": {"path": FILE},
    "rename": {"old_path": FILE, "new_path": "/memories/moved.md"},
}
"""A valid call of every command: each case below breaks exactly one parameter of one."""

WRONG_VALUES: list[object] = [7, 2.5, True, ["/memories/a.md"], {"path": "/memories/a.md"}]
TYPE_NAMES = {int: "number", float: "number", bool: "boolean", list: "array", dict: "object"}

WRONG_TYPE_CASES = [
    pytest.param(command, name, value, id=f"{command}-{name}-{type(value).__name__}")
    for command, params in PARAMETERS.items()
    for name in params
    if not (command == "insert" and name == "insert_line")
    for value in WRONG_VALUES
]


@pytest.mark.parametrize(("command", "name", "value"), WRONG_TYPE_CASES)
def test_a_wrong_type_for_any_text_parameter_names_the_parameter_and_the_type(
    seeded: Engine, command: str, name: str, value: object
) -> None:
    arguments = {"command": command, **PARAMETERS[command], name: value}
    text = call(seeded, arguments, peak_mb=5)
    assert text.startswith(f"{ERROR}Parameter `{name}` must be "), text
    assert f", got {TYPE_NAMES[type(value)]} " in text, text


@pytest.mark.parametrize("value", ["three", "1.5", 1.5, True, False, [1], {"line": 1}, "", "9" * 40])
def test_a_wrong_insert_line_names_the_parameter(seeded: Engine, value: object) -> None:
    arguments = {**PARAMETERS["insert"], "command": "insert", "insert_line": value}
    text = call(seeded, arguments, peak_mb=5)
    assert text.startswith(f"{ERROR}Parameter `insert_line` must be an integer line number"), text


@pytest.mark.parametrize(
    "value",
    ["abc", [1], [1, 2, 3], [True, 2], [1, "x"], {"start": 1}, 5, 2.5, "[" * 200, ["1.5", 2]],
    ids=["word", "one", "three", "bool", "word-item", "object", "int", "float", "long-text", "float-text"],
)
def test_a_malformed_view_range_on_a_file_is_refused_showing_the_value(
    seeded: Engine, value: object
) -> None:
    text = call(seeded, {"command": "view", "path": FILE, "view_range": value}, peak_mb=5)
    assert text == ERROR + messages.view_range_malformed(value)


@pytest.mark.parametrize(
    ("command", "name"),
    [(c, n) for c, params in PARAMETERS.items() for n in params if n != "new_str"],
)
def test_a_missing_or_null_required_parameter_is_named(seeded: Engine, command: str, name: str) -> None:
    base = {"command": command, **PARAMETERS[command]}
    if command == "rename" and name == "old_path":
        base["path"] = None  # the accepted alias is absent too
    for arguments in ({k: v for k, v in base.items() if k != name}, {**base, name: None}):
        text = call(seeded, arguments, peak_mb=5)
        assert text.startswith(f"{ERROR}Missing required parameter `{name}` for command `{command}`"), text


# --------------------------------------------------------------------- oversized arguments


@pytest.mark.parametrize("char", ["x", "\u20ac"], ids=["ascii", "euro"])
def test_ten_megabyte_file_text_is_refused_by_the_file_cap(seeded: Engine, char: str) -> None:
    big = char * (10 * 1000 * 1000)
    # bound: one UTF-8 copy of the text (the surrogate check encodes it) plus slack
    bound = len(big.encode("utf-8")) / MB + 8
    text = call(seeded, {"command": "create", "path": "/memories/big.md", "file_text": big}, peak_mb=bound)
    assert text == ERROR + messages.file_too_large("/memories/big.md", len(big), 100_000)


def test_ten_megabyte_file_text_as_json_is_refused_with_bounded_memory(seeded: Engine) -> None:
    raw = json.dumps({"command": "create", "path": "/memories/big.md", "file_text": TEN_MB})
    text = call(seeded, raw, peak_mb=48)
    assert text == ERROR + messages.file_too_large("/memories/big.md", len(TEN_MB), 100_000)


@pytest.mark.parametrize(
    ("command", "name"),
    [("create", "file_text"), ("str_replace", "old_str"), ("str_replace", "new_str"),
     ("insert", "insert_text")],
)
def test_text_over_the_tool_bound_is_refused_at_once(seeded: Engine, command: str, name: str) -> None:
    arguments = {"command": command, **PARAMETERS[command], name: OVER_TEXT}
    text = call(seeded, arguments, peak_mb=4)
    assert text == ERROR + messages.text_too_long(name, len(OVER_TEXT), MAX_TEXT_CHARS)


@pytest.mark.parametrize(
    ("command", "name"), [("str_replace", "new_str"), ("insert", "insert_text")]
)
def test_an_edit_that_would_grow_a_file_to_ten_megabytes_is_refused_by_the_cap(
    seeded: Engine, command: str, name: str
) -> None:
    arguments = {"command": command, **PARAMETERS[command], name: TEN_MB}
    text = call(seeded, arguments, peak_mb=80)
    assert text.startswith(f"{ERROR}Cannot write {FILE}: it would hold "), text[:300]
    assert text.endswith("the limit is 100,000 characters per file. Write less text or split it into several files."), text[-300:]


@pytest.mark.parametrize(
    "path",
    ["/memories/" + "a" * 10_000, "/memories/" + "a" * 991, "/memories/" + "%61" * 3000,
     "/memories/" + "d/" * 600 + "f.md"],
    ids=["raw-10k", "1001-chars", "encoded-3000", "deep-1200"],
)
def test_oversized_paths_are_refused_for_every_path_parameter(seeded: Engine, path: str) -> None:
    with pytest.raises(InvalidPathError):
        normalize_path(path)
    for command, name in (("view", "path"), ("create", "path"), ("str_replace", "path"),
                          ("insert", "path"), ("delete", "path"), ("rename", "old_path"),
                          ("rename", "new_path")):
        text = call(seeded, {"command": command, **PARAMETERS[command], name: path}, peak_mb=5)
        assert "characters long" in text and "limit is 1,000 characters" in text, text[:300]


# ------------------------------------------------------------------------ NUL and surrogates


@pytest.mark.parametrize(
    ("command", "name", "value", "index"),
    [("create", "file_text", "a\x00b", 1), ("str_replace", "new_str", "\x00", 0),
     ("insert", "insert_text", "ok\n\x00", 3)],
)
def test_nul_in_text_to_be_written_is_refused_naming_its_position(
    seeded: Engine, command: str, name: str, value: str, index: int
) -> None:
    text = call(seeded, {"command": command, **PARAMETERS[command], name: value}, peak_mb=5)
    assert text == ERROR + messages.nul_in_text(name, index)


def test_nul_in_old_str_matches_nothing_and_writes_nothing(seeded: Engine) -> None:
    text = call(seeded, {**PARAMETERS["str_replace"], "command": "str_replace", "old_str": "ke\x00ep"}, peak_mb=5)
    assert text.startswith(ERROR + "No replacement was performed"), text


def test_ten_megabyte_nul_text_is_refused_quickly(seeded: Engine) -> None:
    value = "\x00" * (10 * 1000 * 1000)
    text = call(seeded, {"command": "create", "path": "/memories/n.md", "file_text": value}, peak_mb=4)
    assert text == ERROR + messages.nul_in_text("file_text", 0)


@pytest.mark.parametrize("name", ["path", "old_path", "new_path"])
def test_nul_and_control_characters_in_paths_are_refused(seeded: Engine, name: str) -> None:
    command = "rename" if name != "path" else "create"
    for bad in ("/memories/a\x00.md", "/memories/a%00.md", "/memories/a\x1b.md", "/memories/a\u202e.md"):
        text = call(seeded, {"command": command, **PARAMETERS[command], name: bad}, peak_mb=5)
        assert "use only visible characters in memory paths" in text, text


SURROGATE_CASES = [
    ("create", "file_text"), ("str_replace", "old_str"), ("str_replace", "new_str"),
    ("insert", "insert_text"), ("create", "path"), ("rename", "new_path"), ("view", "path"),
]


@pytest.mark.parametrize(("command", "name"), SURROGATE_CASES)
@pytest.mark.parametrize("surrogate", ["\ud800", "\udfff", "\udc80"])
def test_lone_surrogates_are_refused_as_python_strings(
    seeded: Engine, command: str, name: str, surrogate: str
) -> None:
    params = dict(PARAMETERS[command])
    value = params[name]
    assert isinstance(value, str)
    arguments = {"command": command, **params, name: value[:2] + surrogate + value[2:]}
    text = call(seeded, arguments, peak_mb=5)  # also checks that the answer is valid UTF-8
    if name != "old_str":  # old_str may also be answered with "not found" (it cannot occur)
        assert "surrogate" in text, text


@pytest.mark.parametrize(("command", "name"), SURROGATE_CASES)
def test_lone_surrogates_sent_as_json_escapes_are_refused(seeded: Engine, command: str, name: str) -> None:
    params = dict(PARAMETERS[command])
    value = params[name]
    assert isinstance(value, str)
    raw = json.dumps({"command": command, **params, name: value[:2] + "@@" + value[2:]})
    raw = raw.replace("@@", "\\ud83d")  # a high surrogate with no low one after it
    text = call(seeded, raw, peak_mb=5)  # also checks that the answer is valid UTF-8
    if name != "old_str":
        assert "surrogate" in text, text


def test_a_surrogate_pair_sent_as_json_escapes_is_one_character(seeded: Engine) -> None:
    raw = '{"command": "create", "path": "/memories/pizza.md", "file_text": "\\ud83c\\udf55"}'
    with seeded.begin() as c:
        assert MemoryTool.for_store(c, STORE).execute(raw) == "File created successfully at: /memories/pizza.md"
    with committed_view(seeded) as c:
        assert store_files(c, KEY)["/memories/pizza.md"] == "\U0001f355"


# ------------------------------------------------------------------------------- odd objects


class Exploding:
    """An argument object whose attributes blow up when read."""

    def model_dump(self) -> dict[str, object]:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    "raw",
    [Exploding(), {"command": "view", "path": FILE, "view_range": object()},
     {"input": {"input": {"command": "view", "path": FILE}}}, {"command": ["view"]},
     {"command": {"name": "view"}}, b"\xff\xfe", bytearray(b"[1]")],
    ids=["exploding-model", "object-range", "double-wrapped", "command-list", "command-object",
         "bad-bytes", "bytearray-array"],
)
def test_odd_argument_objects_never_raise(seeded: Engine, raw: object) -> None:
    call(seeded, raw, peak_mb=5)


def test_refusals_are_fast_in_bulk(seeded: Engine) -> None:
    """A thousand refused calls in one transaction: no slow path, no growth, nothing written."""
    before = snapshot(seeded)
    bad: list[Callable[[], object]] = [
        lambda: "[]",
        lambda: {"command": "nope"},
        lambda: {"command": "create", "path": "/memories/../x", "file_text": "a"},
        lambda: {"command": "insert", "path": FILE, "insert_line": 99, "insert_text": "x"},
        lambda: {"command": "str_replace", "path": FILE, "old_str": "absent", "new_str": "x"},
    ]
    with seeded.connect() as c, c.begin():
        tool = MemoryTool.for_store(c, STORE)
        t0 = time.perf_counter()
        for k in range(1000):
            assert tool.execute(bad[k % len(bad)]()).startswith(ERROR)
        elapsed = time.perf_counter() - t0
    assert elapsed < 10 * SECONDS
    assert snapshot(seeded) == before


# ============================================================================================
# Issue 8 section 6: bad input to the Python API, for every public function of dbmemory.__all__
# ============================================================================================

import asyncio  # noqa: E402
import datetime as dt  # noqa: E402
import math  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import sqlalchemy as sa  # noqa: E402

import dbmemory  # noqa: E402
from dbmemory.core.model import StoreRef  # noqa: E402
from dbmemory.errors import (  # noqa: E402
    DbMemoryError,
    InvalidArgumentError,
    InvalidScopeError,
    NotFoundError,
    StorageError,
)
from dbmemory.store import files as files_module  # noqa: E402
from dbmemory.store.reads import read_path, view_path  # noqa: E402
from helpers import StatementLog  # noqa: E402

AGENT = "BADARGS"
API_FILE = "/memories/a.md"
API_DIR_FILE = "/memories/dir/b.md"


class _Unset:
    def __repr__(self) -> str:
        return "<engine>"


ENGINE = _Unset()
"""Placeholder for the test's Engine in a parameter list (filled in at call time)."""
CONN = _Unset()
"""Placeholder for the test's Connection."""
SID = _Unset()
"""Placeholder for the id of the seeded store."""
REF = _Unset()
"""Placeholder for the StoreRef of the seeded store."""
TOOL = _Unset()
"""Placeholder for a MemoryTool on the seeded store."""


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def _ref(**overrides: Any) -> StoreRef:
    values: dict[str, Any] = {"store_key": f"agent:{AGENT}", "scope": "agent", "agent_code": AGENT}
    values.update(overrides)
    return StoreRef(**values)


BAD_CONN = ["conn", None, 7, ENGINE]
BAD_ENGINE = ["sqlite://", None, 7, CONN]
BAD_ID = [None, True, False, "1", 1.0, 0, -1, 2**63, 2**70, -(2**70), [1]]
BAD_OPTIONAL_ID = [True, "1", 1.5, 0, 2**63, 2**70, [1]]
BAD_STORE = [None, True, "agent:BADARGS", 1.0, 0, 2**63, 2**70, [1],
             _ref(store_id=2**70), _ref(store_id=True), _ref(caps={})]
BAD_PATH = [None, 7, b"/memories/a.md", ["/memories/a.md"], "/memories/a\ufe0f.md", "/memories/\u3164",
            "/memories/" + "\u0307" * 20 + ".."]
BAD_TEXT = [None, 7, b"text", ["text"], "a\x00b", "a\ud800b"]
BAD_ACTOR = [None, 7, b"admin", "ad\x00min", "ad\udc80min"]
BAD_BOOL = [None, 1, 0, "yes", "false", 1.0]
BAD_OPTIONAL_BOOL = [1, 0, "yes", 1.0]
BAD_CAPS = [None, {}, {"max_files": 1}, "caps", 7]
BAD_DAYS = [None, True, "30", 0, -1, math.nan, math.inf, -math.inf, [30]]
BAD_NOW = ["2020-01-01", 0, 1.5e9, dt.date(2020, 1, 1), True]
BAD_BATCH = [True, 0, -1, 1001, "10", 2.0, 2**70, None]
BAD_RUN_CONTEXT = [[("doc", "7")], "doc=7", 7, {1: "x"}, BrokenRepr()]
BAD_COMPONENT = [None, 7, True, b"A", "a b", "A" * 201, "A\n"]
BAD_OPTIONAL_COMPONENT = [7, True, b"u1", ["u1"]]
BAD_CAP_VALUE = [True, False, 0, -1, "10", 2.5, 2**31, 2**63, 2**70]
BAD_STORE_CHARS = [True, 0, -1, "10", 2.5, 2**63, 2**70]
BAD_VERSION = [True, -1, "1", 1.0, 2**31, 2**70]
BAD_CALLABLE = [7, "f", [print]]
BAD_KEY_TEXT = [None, 7, b"agent:X", "agent:\x00"]


@dataclass
class Param:
    """One parameter of a public function: its valid value and the values it must refuse."""

    name: str
    valid: Any
    bad: list[Any]
    error: type[Exception] = InvalidArgumentError
    positional: bool = False


@dataclass
class Api:
    """A public function, how to call it validly, and every parameter's bad values."""

    name: str
    function: Callable[..., Any]
    params: list[Param]
    db: bool = True
    kind: str = "call"  # "call", "context" (a context manager), "async"
    extra: dict[str, Any] = field(default_factory=dict)


def _transform(text: str) -> tuple[str, None]:
    return text + "!", None


def _no_model(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the model must not be called for refused arguments")


USER_MESSAGES = [{"role": "user", "content": "hi"}]

APIS: list[Api] = [
    # -- stores and agents
    Api("enable_for_agent", dbmemory.enable_for_agent, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("agent_code", "NEWAGENT", BAD_COMPONENT, InvalidScopeError, positional=True),
        Param("scope", "agent", [None, 7, "AGENT", "bogus", ["agent"]], InvalidScopeError),
        Param("store_code", None, [7, True, "a:b"], InvalidScopeError),
        Param("context_key", None, [7, True, "doc id"], InvalidScopeError),
        Param("max_file_chars", None, BAD_CAP_VALUE),
        Param("max_files", None, BAD_CAP_VALUE),
        Param("max_store_chars", None, BAD_STORE_CHARS),
    ]),
    Api("set_store_caps", dbmemory.set_store_caps, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store", SID, BAD_STORE, positional=True),
        Param("max_file_chars", None, BAD_CAP_VALUE),
        Param("max_files", None, BAD_CAP_VALUE),
        Param("max_store_chars", None, BAD_STORE_CHARS),
        Param("actor", "admin", BAD_ACTOR),
    ]),
    Api("disable_for_agent", dbmemory.disable_for_agent, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("agent_code", AGENT, BAD_COMPONENT, InvalidScopeError, positional=True),
        Param("drop_store", False, BAD_BOOL),
    ]),
    Api("get_agent_config", dbmemory.get_agent_config, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("agent_code", AGENT, BAD_COMPONENT, InvalidScopeError, positional=True),
    ]),
    Api("list_agents", dbmemory.list_agents, [Param("conn", CONN, BAD_CONN, positional=True)]),
    *[
        Api(name, function, [
            Param("conn", CONN, BAD_CONN, positional=True),
            Param("agent_code", AGENT, BAD_COMPONENT, InvalidScopeError, positional=True),
            Param("user_id", None, BAD_OPTIONAL_COMPONENT, InvalidScopeError),
            Param("session_id", None, BAD_OPTIONAL_COMPONENT, InvalidScopeError),
            Param("run_context", None, BAD_RUN_CONTEXT, InvalidScopeError),
        ])
        for name, function in (("resolve_store", dbmemory.resolve_store),
                               ("check_run_ready", dbmemory.check_run_ready))
    ],
    Api("resolve_store_id", dbmemory.resolve_store_id, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("scope", "agent", [None, 7, "bogus"], InvalidScopeError),
        Param("agent_code", AGENT, [7, True, "a b"], InvalidScopeError),
    ]),
    Api("end_session", dbmemory.end_session, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("session_id", "s1", BAD_COMPONENT, InvalidScopeError, positional=True),
    ]),
    Api("use_store", dbmemory.use_store, [
        Param("store_code", "x", BAD_COMPONENT, InvalidScopeError, positional=True),
    ], db=False, kind="context"),
    Api("build_store_key", dbmemory.build_store_key, [
        Param("scope", "agent", [None, 7, "bogus", ["agent"]], InvalidScopeError, positional=True),
        Param("agent_code", "A", BAD_COMPONENT, InvalidScopeError),
    ], db=False),
    Api("augment_system_prompt", dbmemory.augment_system_prompt, [
        Param("system_prompt", "You help.", [7, b"x", ["x"], "a\x00"], positional=True),
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("agent_code", AGENT, BAD_COMPONENT, InvalidScopeError, positional=True),
    ]),
    # -- values
    Api("Caps", dbmemory.Caps, [
        Param("max_file_chars", 100, BAD_CAP_VALUE + [None]),
        Param("max_files", 10, BAD_CAP_VALUE + [None]),
        Param("max_store_chars", None, BAD_STORE_CHARS),
    ], db=False),
    # -- files (admin)
    Api("list_files", dbmemory.list_files, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store_id", SID, BAD_ID, positional=True),
    ]),
    Api("get_file", dbmemory.get_file, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store_id", SID, BAD_ID, positional=True),
        Param("path", API_FILE, BAD_PATH, positional=True),
        Param("touch", False, BAD_BOOL),
    ]),
    Api("put_file", dbmemory.put_file, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store", SID, BAD_STORE, positional=True),
        Param("path", "/memories/new.md", BAD_PATH, positional=True),
        Param("text", "new", BAD_TEXT, positional=True),
        Param("enforce_caps", True, BAD_BOOL),
        Param("expected_version", None, BAD_VERSION),
        Param("expiry_exempt", None, BAD_OPTIONAL_BOOL),
        Param("actor", "admin", BAD_ACTOR),
    ]),
    Api("delete_file", dbmemory.delete_file, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store_id", SID, BAD_ID, positional=True),
        Param("path", API_FILE, BAD_PATH, positional=True),
        Param("actor", "admin", BAD_ACTOR),
    ]),
    Api("clear_store_files", dbmemory.clear_store_files, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store_id", SID, BAD_ID, positional=True),
        Param("actor", "admin", BAD_ACTOR),
    ]),
    *[
        Api(name, function, [
            Param("conn", CONN, BAD_CONN, positional=True),
            Param("days", 30, BAD_DAYS),
            Param("store_id", None, BAD_OPTIONAL_ID),
            Param("now", None, BAD_NOW),
            *([Param("batch_size", 1000, BAD_BATCH)] if name == "expire_files" else []),
        ])
        for name, function in (("expire_files", dbmemory.expire_files),
                               ("count_expirable_files", dbmemory.count_expirable_files))
    ],
    Api("expire_files_committing", dbmemory.expire_files_committing, [
        Param("engine", ENGINE, BAD_ENGINE, positional=True),
        Param("days", 30, BAD_DAYS),
        Param("store_id", None, BAD_OPTIONAL_ID),
        Param("batch_size", 1000, BAD_BATCH),
        Param("on_batch", None, BAD_CALLABLE),
    ]),
    # -- files module functions used by the tool, profiles and the CLI
    Api("files.create_file", files_module.create_file, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store", REF, BAD_STORE, positional=True),
        Param("path", "/memories/new.md", BAD_PATH, positional=True),
        Param("text", "new", BAD_TEXT, positional=True),
        Param("actor", "admin", BAD_ACTOR),
        Param("expiry_exempt", False, BAD_BOOL),
    ]),
    Api("files.edit_file", files_module.edit_file, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store", SID, BAD_STORE, positional=True),
        Param("path", API_FILE, BAD_PATH, positional=True),
        Param("transform", _transform, [None, 7, "upper"], positional=True),
        Param("actor", "admin", BAD_ACTOR),
        Param("action", "edit", [None, 7, "", "x" * 31]),
    ]),
    Api("files.delete_path", delete_path, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store", SID, BAD_STORE, positional=True),
        Param("path", API_FILE, BAD_PATH, positional=True),
        Param("actor", "admin", BAD_ACTOR),
    ]),
    Api("files.rename_path", rename_path, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store", SID, BAD_STORE, positional=True),
        Param("old_path", API_FILE, BAD_PATH, positional=True),
        Param("new_path", "/memories/moved.md", BAD_PATH, positional=True),
        Param("actor", "admin", BAD_ACTOR),
    ]),
    *[
        Api(f"reads.{name}", function, [
            Param("conn", CONN, BAD_CONN, positional=True),
            Param("store", SID, [b for b in BAD_STORE if b is not None], positional=True),
            Param("path", API_FILE, BAD_PATH, positional=True),
        ])
        for name, function in (("read_path", read_path), ("view_path", view_path))
    ],
    Api("files.list_directory", list_directory, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store_id", SID, BAD_OPTIONAL_ID, positional=True),
        Param("directory", "/memories", BAD_PATH, positional=True),
    ]),
    Api("files.find_store_id", find_store_id, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store_key", f"agent:{AGENT}", BAD_KEY_TEXT + [""], positional=True),
    ]),
    # -- the tool
    Api("MemoryTool", dbmemory.MemoryTool, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("agent_code", AGENT, [7, True, b"A", "a b"], InvalidScopeError, positional=True),
        Param("user_id", None, BAD_OPTIONAL_COMPONENT, InvalidScopeError),
        Param("session_id", None, BAD_OPTIONAL_COMPONENT, InvalidScopeError),
        Param("run_context", None, BAD_RUN_CONTEXT, InvalidScopeError),
        Param("actor", None, [7, b"x", "a\x00"]),
    ]),
    Api("MemoryTool(store=...)", dbmemory.MemoryTool, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store", REF, [7, "shared:x", SID, _ref(store_id=2**70), _ref(caps={})]),
    ]),
    Api("MemoryTool.for_store", dbmemory.MemoryTool.for_store, [
        Param("conn", CONN, BAD_CONN, positional=True),
        Param("store_code", "x", BAD_COMPONENT, InvalidScopeError, positional=True),
        Param("actor", None, [7, b"x"]),
    ]),
    # -- agent turns
    Api("memory_tools", dbmemory.memory_tools, [
        Param("extra_tools", (), [None, 7, "tool", {"type": "function"}, [7], ["x"]], positional=True),
        Param("native_anthropic", False, BAD_BOOL),
    ], db=False),
    Api("handle_tool_calls", dbmemory.handle_tool_calls, [
        Param("tool_calls", [], [None, 7, "call", {"id": "1"}], positional=True),
        Param("memory_tool", TOOL, [7, "tool", object()], positional=True),
        Param("tool_handler", None, BAD_CALLABLE),
        Param("max_result_chars", 2000, [None, True, "2000", 2.5, 0, 2**70]),
    ]),
    Api("TurnConfig", dbmemory.TurnConfig, [
        Param("max_tool_calls", 4, [None, True, "4", -1, 2.5]),
        Param("max_tool_result_chars", 2000, [None, True, "2000", 0, 2.5]),
        Param("user_memory_enabled", True, BAD_BOOL),
        Param("native_anthropic_memory_tool", False, BAD_BOOL),
        Param("post_process", "off", [None, 7, "later"]),
        Param("timeout_s", None, [True, "5", 0, -1, math.nan, math.inf]),
        Param("model_kwargs", {}, [None, [("a", 1)], "t=1", {1: 2}]),
        Param("now", None, BAD_NOW),
    ], db=False),
    *[
        Api(name, function, [
            Param("engine_or_conn", CONN, ["sqlite://", None, 7], positional=True),
            Param("agent_code", AGENT, BAD_COMPONENT, InvalidScopeError),
            Param("user_id", None, BAD_OPTIONAL_COMPONENT, InvalidScopeError),
            Param("messages", USER_MESSAGES, [None, 7, "hi", {"role": "user"}, ["hi"], []]),
            Param("model", "scripted", [None, 7, "", b"gpt"]),
            Param("session_id", None, BAD_OPTIONAL_COMPONENT, InvalidScopeError),
            Param("run_context", None, BAD_RUN_CONTEXT, InvalidScopeError),
            Param("tools", (), [None, 7, "tool", {"type": "function"}, [7]]),
            Param("tool_handler", None, BAD_CALLABLE),
            Param("config", dbmemory.TurnConfig(post_process="off"), [7, {}, "off"]),
            Param("complete", _no_model, BAD_CALLABLE),
            Param("on_event", None, BAD_CALLABLE),
        ], kind="async" if name == "arun_turn" else "call")
        for name, function in (("run_turn", dbmemory.run_turn), ("arun_turn", dbmemory.arun_turn))
    ],
    # -- schema set-up
    Api("create_engine", dbmemory.create_engine, [
        Param("url", "sqlite://", [7, b"sqlite://", ["sqlite://"], "not a url"], positional=True),
    ], db=False),
    *[
        Api(name, function, [Param("bind", ENGINE, [None, 7, b"sqlite://", ["x"]], positional=True)])
        for name, function in (("upgrade", dbmemory.upgrade), ("current", dbmemory.current))
    ],
]

def _profile_apis() -> list[Api]:
    from dbmemory.profile import (
        UserMemoryConfig,
        delete_profile,
        is_user_memory_enabled,
        load_user_memory,
        read_profile,
        set_user_memory_enabled,
        write_profile,
    )

    user = [Param("user_id", "u1", [None, 7, b"u1", ""], InvalidScopeError, positional=True)]
    conn = [Param("conn", CONN, BAD_CONN, positional=True)]
    return [
        Api("profile.read_profile", read_profile, [*conn, *user,
            Param("unless_opted_out", False, BAD_BOOL)]),
        Api("profile.write_profile", write_profile, [*conn, *user,
            Param("text", "profile", BAD_TEXT, positional=True),
            Param("expected_version", None, BAD_VERSION), Param("actor", "profile", BAD_ACTOR)]),
        Api("profile.delete_profile", delete_profile, [*conn, *user, Param("actor", "profile", BAD_ACTOR)]),
        Api("profile.is_user_memory_enabled", is_user_memory_enabled, [*conn, *user]),
        Api("profile.set_user_memory_enabled", set_user_memory_enabled, [*conn, *user,
            Param("enabled", True, BAD_BOOL, positional=True),
            Param("root_folders", ("user-memory",), [None, 7, "user-memory", [7]]),
            Param("actor", "user", BAD_ACTOR)]),
        Api("profile.load_user_memory", load_user_memory, [*conn, *user,
            Param("config", UserMemoryConfig(), [None, {}, "config"]),
            Param("model", "gpt-4o-mini", [7, b"gpt", ["gpt"]])]),
    ]


APIS.extend(_profile_apis())

NOT_FUNCTIONS = {
    "__version__": "a string",
    "ERROR_MARKER": "a string",
    "StoreRef": "a plain value; its fields are checked by every function that takes a store",
    "FileInfo": "a result type, never an input",
    "FileRecord": "a result type, never an input",
    "AgentConfig": "a result type, never an input",
    "TurnResult": "a result type, never an input",
    "get_memory_protocol": "takes no argument",
    "tool_schema": "takes no argument",
}


def test_every_public_name_has_bad_input_cases() -> None:
    """A new public function cannot be added without its bad-input cases here."""
    covered = {api.name.split("(")[0].split(".")[0] for api in APIS}
    errors = {name for name in dbmemory.__all__ if name.endswith("Error")}
    missing = set(dbmemory.__all__) - covered - errors - set(NOT_FUNCTIONS)
    assert not missing, f"no bad-input cases for {sorted(missing)}"


def _cases(db: bool) -> list[Any]:
    return [
        pytest.param(api, param, id=f"{api.name}-{param.name}")
        for api in APIS
        if api.db is db
        for param in api.params
    ]


def _resolve(value: Any, env: dict[_Unset, Any]) -> Any:
    if isinstance(value, _Unset):
        return env[value]
    return value


def _invoke(api: Api, param: Param, bad: Any, env: dict[_Unset, Any]) -> Any:
    args: list[Any] = []
    kwargs: dict[str, Any] = dict(api.extra)
    for p in api.params:
        value = _resolve(bad if p is param else p.valid, env)
        if p.positional:
            args.append(value)
        else:
            kwargs[p.name] = value
    if api.kind == "context":
        with api.function(*args, **kwargs):
            return None
    if api.kind == "async":
        return asyncio.run(api.function(*args, **kwargs))
    return api.function(*args, **kwargs)


def _shown(value: Any) -> str:
    try:
        return repr(value)[:60]
    except Exception:  # noqa: BLE001 - BrokenRepr
        return f"<{type(value).__name__}>"


def _check_refusal(api: Api, param: Param, bad: Any, exc: BaseException) -> None:
    where = f"{api.name}({param.name}={_shown(bad)})"
    assert isinstance(exc, InvalidArgumentError), f"{where} raised {type(exc).__name__}: {exc}"
    assert isinstance(exc, param.error), f"{where} raised {type(exc).__name__}, not {param.error.__name__}: {exc}"
    assert not isinstance(exc, StorageError), where
    message = str(exc)
    assert message and ":" in message, f"{where}: no rule and remedy in {message!r}"
    assert len(message) < 1000, f"{where}: a message of {len(message)} characters"
    assert_no_leak(message.replace("SELECTOR", "selector"))  # a Unicode name, not SQL


@pytest.mark.parametrize(("api", "param"), _cases(db=False))
def test_pure_functions_refuse_every_bad_argument(api: Api, param: Param) -> None:
    _invoke(api, param, param.valid, {})  # the valid call works
    for bad in param.bad:
        with pytest.raises(Exception) as info:
            _invoke(api, param, bad, {})
        _check_refusal(api, param, bad, info.value)


@pytest.fixture
def api_env(engine: Engine) -> tuple[Engine, int]:
    """Agent BADARGS enabled, its store holding /memories/a.md and /memories/dir/b.md."""
    with engine.begin() as c:
        dbmemory.enable_for_agent(c, AGENT)
        tool = dbmemory.MemoryTool(c, AGENT)
        for path in (API_FILE, API_DIR_FILE):
            assert tool.execute({"command": "create", "path": path, "file_text": "x"}).startswith("File")
        store_id = dbmemory.resolve_store(c, AGENT).store_id
    assert store_id is not None
    return engine, store_id


def _everything(engine: Engine) -> tuple[Any, ...]:
    with committed_view(engine) as c:
        return (
            counts(c),
            store_files(c),
            sorted(tuple(r) for r in c.execute(sa.text(
                "SELECT agent_code, scope_name, max_file_chars, max_files, max_store_chars, "
                "memory_enabled FROM dbm_agents"))),
        )


@pytest.mark.parametrize(("api", "param"), _cases(db=True))
def test_public_functions_refuse_every_bad_argument_before_any_sql(
    api_env: tuple[Engine, int], api: Api, param: Param
) -> None:
    """Each bad value: an InvalidArgumentError (or its subclass named by the case) with a rule
    and a remedy, no SQL statement run, nothing changed, the caller's transaction usable."""
    engine, store_id = api_env
    before = _everything(engine)
    with engine.connect() as c:
        c.begin()
        env = {ENGINE: engine, CONN: c, SID: store_id,
               REF: _ref(), TOOL: dbmemory.MemoryTool(c, AGENT)}
        for bad in param.bad:
            with StatementLog(engine) as log, pytest.raises(Exception) as info:
                _invoke(api, param, _resolve(bad, env), env)
            _check_refusal(api, param, bad, info.value)
            assert log.statements == [], f"{api.name}({param.name}={_shown(bad)}) ran SQL first"
        assert c.exec_driver_sql("SELECT 1").scalar() == 1
        c.commit()
    assert _everything(engine) == before


def test_the_valid_calls_of_the_table_work(api_env: tuple[Engine, int]) -> None:
    """The baseline of every case is a valid call (so each case breaks exactly one thing)."""
    engine, store_id = api_env
    for api in APIS:
        if not api.db or api.name in ("upgrade",):
            continue
        if any(p.valid is ENGINE for p in api.params):
            env = {ENGINE: engine}
            _invoke(api, api.params[0], engine, env)
            continue
        with engine.connect() as c:
            c.begin()
            env = {ENGINE: engine, CONN: c, SID: store_id, REF: _ref(),
                   TOOL: dbmemory.MemoryTool(c, AGENT)}
            try:
                _invoke(api, api.params[0], _resolve(api.params[0].valid, env), env)
            except (NotFoundError, DbMemoryError) as exc:
                # a valid call may still find nothing (e.g. end_session of an unknown session)
                assert not isinstance(exc, (InvalidArgumentError, StorageError)), (api.name, exc)
            except AssertionError as exc:
                assert "model must not be called" in str(exc), (api.name, exc)
            c.rollback()


# ------------------------------------------------------------- delete_file on a directory


def test_delete_file_on_a_directory_raises_and_deletes_nothing(api_env: tuple[Engine, int]) -> None:
    engine, store_id = api_env
    before = _everything(engine)
    with engine.connect() as c:
        c.begin()
        with pytest.raises(InvalidPathError) as info:
            dbmemory.delete_file(c, store_id, "/memories/dir")
        assert info.value.code == "is_directory"
        assert "use delete_path" in str(info.value)
        assert dbmemory.delete_file(c, store_id, "/memories/absent.md") is False
        assert c.exec_driver_sql("SELECT 1").scalar() == 1
        c.commit()
    assert _everything(engine) == before


# ------------------------------------------------------ tool arguments: only ASCII digits


@pytest.mark.parametrize(
    "value",
    ["\u0663", "\uff13", "\u0969", "\u09e9", "\U0001d7d1", "1\u0663", " \uff11 ", "\u00b3", "\u2463"],
    ids=["arabic-indic", "fullwidth", "devanagari", "bengali", "math-bold", "mixed", "fullwidth-spaced",
         "superscript", "circled"],
)
def test_insert_line_counts_only_ascii_digits(seeded: Engine, value: str) -> None:
    arguments = {**PARAMETERS["insert"], "command": "insert", "insert_line": value}
    text = call(seeded, arguments, peak_mb=5)
    assert text.startswith(f"{ERROR}Parameter `insert_line` must be an integer line number"), text


@pytest.mark.parametrize(
    "value",
    [["\u0661", "2"], ["1", "\uff12"], "[\u0661, 2]", "\uff11, 2", ["1", "\u0662\u0663"]],
    ids=["arabic-start", "fullwidth-end", "json-arabic", "text-fullwidth", "arabic-two-digits"],
)
def test_view_range_counts_only_ascii_digits(seeded: Engine, value: object) -> None:
    text = call(seeded, {"command": "view", "path": FILE, "view_range": value}, peak_mb=5)
    assert text == ERROR + messages.view_range_malformed(value)


def test_ascii_digit_strings_still_count(seeded: Engine) -> None:
    with seeded.begin() as c:
        tool = MemoryTool.for_store(c, STORE)
        assert tool.execute({"command": "view", "path": FILE, "view_range": ["1", " 1 "]}).endswith("keep")
        assert tool.execute(
            {"command": "insert", "path": FILE, "insert_line": " 0 ", "insert_text": "top"}
        ).startswith("The memory file /memories/keep.md has been edited")


# --------------------------------------------------------------------- now: aware or naive


def test_expiry_takes_an_aware_or_a_naive_now_alike(api_env: tuple[Engine, int]) -> None:
    engine, _ = api_env
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=40)
    in_paris = later.astimezone(dt.timezone(dt.timedelta(hours=2)))
    naive = later.replace(tzinfo=None)
    with engine.connect() as c:
        c.begin()
        counted = [dbmemory.count_expirable_files(c, days=30, now=now) for now in (later, in_paris, naive)]
        assert counted == [2, 2, 2]
        assert dbmemory.count_expirable_files(c, days=30) == 0
        c.rollback()


@pytest.mark.parametrize(
    "values",
    [
        {"store_key": 7, "scope": "agent"},
        {"store_key": "agent:A ", "scope": "agent"},
        {"store_key": "agent:A", "scope": "user"},
        {"store_key": "reserved:profile:user-memory:u1", "scope": "agent"},
        {"store_key": "nonsense", "scope": "agent"},
    ],
)
def test_a_hand_made_store_ref_is_validated_like_any_key(values: dict[str, Any]) -> None:
    with pytest.raises(InvalidScopeError):
        StoreRef(**values)


def test_an_expiry_cutoff_before_the_year_1_is_an_invalid_argument() -> None:
    from dbmemory.store.expiry import expiry_cutoff

    with pytest.raises(InvalidArgumentError, match="year 1"):
        expiry_cutoff(1, dt.datetime(1, 1, 2))
