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

from dbmemory.errors import InvalidPathError
from dbmemory.paths import normalize_path
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
