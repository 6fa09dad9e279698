"""Stateful property tests of the MEMORY tool against a tiny reference model (issue 5).

A hypothesis ``RuleBasedStateMachine`` drives random sequences of the six commands (valid and
invalid paths in many spellings, view ranges, insert lines, texts with CRLF, tabs, multi-byte
characters and empty strings) against a dbmemory store with small caps, and against
:class:`Model`, a dictionary of path -> text written from the documented semantics (Anthropic's
memory tool plus DESIGN.md's caps and directory rules), not from dbmemory's code. After every
step, through a connection that sees only committed data:

* the store's files and texts equal the model's (so every error left the store unchanged);
* ``char_count`` equals the text's length; the caps hold;
* the audit log holds exactly one event per file changed (create, edit that changes the text,
  each file deleted or moved);
* a neighbour store with the same paths is untouched (isolation);
* the caller's transaction stays usable after every answer, error or not.

Runs on every backend of the ``engine`` fixture (SQLite always; PostgreSQL and MariaDB when
their URLs are set), bounded: ``DBMEMORY_PROPERTY_EXAMPLES`` (default 60) examples of ``DBMEMORY_PROPERTY_STEPS`` (default 40) steps.

The second half checks :func:`dbmemory.core.paths.normalize_path` on generated paths: no spelling
resolves outside ``/memories``, and every spelling of one file resolves to one key.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import posixpath
import unicodedata
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy.engine import Engine

from dbmemory.core.model import Caps
from dbmemory.core.paths import MAX_PATH_CHARS, ROOT, normalize_path
from dbmemory.db.schema import audit_events, files, stores
from dbmemory.errors import InvalidPathError
from dbmemory.store.agents import set_store_caps
from dbmemory.store.resolve import shared_store
from dbmemory.store.touches import TOUCH_INTERVAL
from dbmemory.tool import MemoryTool
from helpers import ERROR, committed_view

pytestmark = pytest.mark.slow

CAPS = Caps(max_file_chars=40, max_files=5, max_store_chars=120)
_counter = itertools.count()

AGENTLESS_WRITERS_WORK = True
"""Whether the machines drive ``MemoryTool.for_store`` and ``use_store`` (a StoreRef with
``caps=None``: the "strictest configured, else defaults" rule of dbmemory.store.caps); see
test_agentless_writers_write_a_shared_store."""


def shared_tool(conn: Any, store_code: str) -> MemoryTool:
    """``MemoryTool.for_store(conn, store_code)``; while AGENTLESS_WRITERS_WORK is False, the
    same store through a hand-made StoreRef (default creation caps: the machines set the row's
    caps with set_store_caps, which bind every writer)."""
    if AGENTLESS_WRITERS_WORK:
        return MemoryTool.for_store(conn, store_code)
    return MemoryTool(conn, store=shared_store(store_code, caps=Caps()))


# ------------------------------------------------------------------------------ the model


def split_lines(text: str) -> list[str]:
    if text == "":
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def occurrences(text: str, needle: str) -> int:
    """Occurrences of ``needle`` in ``text``, overlapping ones included."""
    count, start = 0, text.find(needle)
    while start != -1:
        count += 1
        start = text.find(needle, start + 1)
    return count


def ancestors(path: str) -> list[str]:
    parts = path[len(ROOT) + 1 :].split("/")
    return [ROOT + "/" + "/".join(parts[:d]) for d in range(1, len(parts))]


class Model:
    """The documented semantics of the six commands on a dict of canonical path -> text.

    Each command returns ``None`` for an error (and changes nothing) or the result; ``events``
    counts the audit events a correct store writes.
    """

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self.files: dict[str, str] = {}
        self.events = 0

    def total(self) -> int:
        return sum(len(t) for t in self.files.values())

    def under(self, directory: str) -> list[str]:
        if directory == ROOT:
            return sorted(self.files)
        return sorted(p for p in self.files if p.startswith(directory + "/"))

    def is_dir(self, path: str) -> bool:
        return path == ROOT or bool(self.under(path))

    def _shape_ok(self, path: str) -> bool:
        """A new file may live at ``path``: no file there, none below it, none above it."""
        return (
            path not in self.files
            and not self.under(path)
            and not any(a in self.files for a in ancestors(path))
        )

    def view(self, path: str | None, view_range: tuple[int, int] | None) -> Any:
        if path is None:
            return None
        if path in self.files:
            n = len(split_lines(self.files[path]))
            if view_range is not None:
                start, end = view_range
                if n == 0 or start < 1 or start > n or (end != -1 and end < start):
                    return None
            return ("file", self.files[path])
        if self.is_dir(path):
            return ("dir", self.under(path))
        return None

    def create(self, path: str | None, text: str) -> Any:
        caps = self.caps
        if path is None or path == ROOT or len(text) > caps.max_file_chars:
            return None
        if not self._shape_ok(path) or len(self.files) + 1 > caps.max_files:
            return None
        if caps.max_store_chars is not None and text and self.total() + len(text) > caps.max_store_chars:
            return None
        self.files[path] = text
        self.events += 1
        return True

    def _edit(self, path: str | None, new_text: str | None) -> Any:
        if path is None or new_text is None:
            return None
        old = self.files[path]
        if len(new_text) > self.caps.max_file_chars:
            return None
        if new_text == old:
            return True
        grow = len(new_text) - len(old)
        limit = self.caps.max_store_chars
        if grow > 0 and limit is not None and self.total() + grow > limit:
            return None
        self.files[path] = new_text
        self.events += 1
        return True

    def str_replace(self, path: str | None, old: str, new: str | None) -> Any:
        if path is None or path not in self.files or old == "":
            return None
        text = self.files[path]
        if occurrences(text, old) != 1:
            return None
        return self._edit(path, text.replace(old, "" if new is None else new, 1))

    def insert(self, path: str | None, line: int, insert_text: str) -> Any:
        if path is None or path not in self.files:
            return None
        text = self.files[path]
        n = len(split_lines(text))
        if line < 0 or line > n:
            return None
        nl = "\n"
        if "\r\n" in text and text.count("\r\n") == text.count("\n"):  # an all-CRLF file
            nl = "\r\n"
            insert_text = insert_text.replace("\r\n", "\n").replace("\n", "\r\n")
        if text == "":
            new = insert_text
        elif line == n and not text.endswith("\n"):
            new = text + nl + insert_text
        else:
            block = insert_text if insert_text.endswith("\n") else insert_text + nl
            offset = 0
            for _ in range(line):
                offset = text.index("\n", offset) + 1
            new = text[:offset] + block + text[offset:]
        return self._edit(path, new)

    def delete(self, path: str | None) -> Any:
        if path is None or path == ROOT:
            return None
        victims = [path] if path in self.files else self.under(path)
        if not victims:
            return None
        for v in victims:
            del self.files[v]
        self.events += len(victims)
        return True

    def rename(self, old: str | None, new: str | None) -> Any:
        if old is None or new is None or ROOT in (old, new) or old == new:
            return None
        if new.startswith(old + "/"):
            return None
        if old in self.files:
            moves = [(old, new)]
        else:
            moves = [(p, new + p[len(old) :]) for p in self.under(old)]
            if not moves:
                return None
        if any(len(target) > MAX_PATH_CHARS for _, target in moves):
            return None
        if new in self.files or self.under(new) or any(a in self.files for a in ancestors(new)):
            return None
        texts = {src: self.files.pop(src) for src, _ in moves}
        for src, target in moves:
            self.files[target] = texts[src]
        self.events += len(moves)
        return True


def expected_listing(directory: str, entries: dict[str, str]) -> str:
    """Anthropic's two-level listing with du-style sizes (all sizes here are < 1024)."""
    prefix = directory + "/"
    rows: dict[tuple[str, ...], list[int]] = {}
    total = 0
    for path, text in entries.items():
        total += len(text)
        parts = tuple(path[len(prefix) :].split("/"))
        for depth in range(1, min(len(parts), 2) + 1):
            if parts[depth - 1].startswith(".") or parts[depth - 1] == "node_modules":
                break
            row = rows.setdefault(parts[:depth], [0, int(depth < len(parts))])
            row[0] += len(text)
    lines = [
        f"Here're the files and directories up to 2 levels deep in {directory}, "
        "excluding hidden items and node_modules:",
        f"{total}\t{directory}",
    ]
    for key in sorted(rows):
        size, is_dir = rows[key]
        lines.append(f"{size}\t{prefix}{'/'.join(key)}{'/' if is_dir else ''}")
    return "\n".join(lines)


# ------------------------------------------------------------------------ generated input

CANONICAL = [
    "/memories/a.md",
    "/memories/b.md",
    "/memories/d",
    "/memories/d/x.md",
    "/memories/d/y.md",
    "/memories/d/e",
    "/memories/d/e/z.md",
    "/memories/a.md/sub.md",
    "/memories/caf\u00e9.md",
    "/memories/first..last.md",
    "/memories/.hidden.md",
    "/memories/A.md",
    "/memories/d_x/n.md",
]


def _pct(text: str) -> str:
    return "".join(f"%{b:02X}" for b in text.encode("utf-8"))


def spellings(path: str) -> list[str]:
    """Other spellings of one canonical path, all meaning the same file."""
    out = [path, path + "/", path.replace("/", "//"), "//" + path[1:]]
    body = path[len(ROOT) :]
    first = body[1]
    out.append(ROOT + "/" + _pct(first) + body[2:])  # one character percent-encoded
    out.append(ROOT + "/" + _pct(_pct(first)) + body[2:])  # ... twice
    out.append(ROOT + "/" + _pct(_pct(_pct(first))) + body[2:])  # ... three times
    out.append(ROOT + body.replace("/", "%2F"))  # encoded slashes
    out.append(unicodedata.normalize("NFD", path))
    return out


VALID = [(raw, path) for path in CANONICAL for raw in spellings(path)]
INVALID = [
    "/memories/../x.md", "/memories/%2e%2e/x.md", "/memories/%252e%252e/x.md", "/memoriesX/a.md",
    "/memories_backup/a.md", "/memories\\a.md", "/memories/a\x00.md", "/memories/a\tb.md", "",
    "relative.md", "/memories/ a.md", "/memories/d/./x.md", "/Memories/a.md",
    "/memories/\uff0e\uff0e/x.md", "/memories/a\u2215b.md", "/memories/" + "n" * 1001,
]
ROOTS = [ROOT, ROOT + "/", ROOT + "//", "/memories/%2F"]

CORE = ["/memories/a.md", "/memories/d/x.md", "/memories/d/e/z.md", "/memories/d", "/memories/b.md"]
_valid = st.sampled_from(VALID)
paths = st.sampled_from(
    [(p, p) for p in CORE] * 6
    + VALID
    + [(raw, None) for raw in INVALID]
    + [(raw, ROOT) for raw in ROOTS] * 3
)
"""(raw spelling, canonical path or None for an invalid path); mostly valid spellings."""

PIECES = ["a", "b", "x", " ", "\t", "\n", "\r\n", "\u20ac", "\U0001f355", "e\u0301", "\u00e9", "-"]
texts = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)  # "" included
view_ranges = st.one_of(
    st.none(),
    st.tuples(st.integers(-1, 6), st.integers(-2, 8)),
)


class MemoryMachine(RuleBasedStateMachine):
    """The MEMORY tool on a fresh shared store versus :class:`Model`."""

    engine: Engine  # set by the test

    def __init__(self) -> None:
        super().__init__()
        self.code = f"prop-{os.getpid()}-{next(_counter)}"
        self.key = f"shared:{self.code}"
        self.model = Model(CAPS)
        self.neighbour = f"{self.code}-n"
        seed = {"command": "create", "path": "/memories/a.md", "file_text": "neighbour\r\n\tkeeps\n"}
        with self.engine.begin() as c:
            assert not shared_tool(c, self.neighbour).execute(seed).startswith(ERROR)
            # caps belong to the store row (no writer brings its own)
            set_store_caps(
                c,
                shared_store(self.code),
                max_file_chars=CAPS.max_file_chars,
                max_files=CAPS.max_files,
                max_store_chars=CAPS.max_store_chars,
            )
        self.model.events += 1  # the store_caps audit event
        self.neighbour_state = self._state(f"shared:{self.neighbour}")

    # -- plumbing -------------------------------------------------------------------------------

    def run(self, arguments: dict[str, Any]) -> str:
        with self.engine.connect() as c:
            with c.begin():
                text = shared_tool(c, self.code).execute(arguments)
                assert c.exec_driver_sql("SELECT 1").scalar() == 1  # transaction still usable
        assert isinstance(text, str)
        return text

    def _state(self, key: str) -> tuple[dict[str, tuple[str, int]], int]:
        with committed_view(self.engine) as c:
            rows = c.execute(
                sa.select(files.c.file_path, files.c.body, files.c.char_count)
                .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
                .where(stores.c.store_key == key)
            ).all()
            n_events = c.execute(
                sa.select(sa.func.count()).select_from(audit_events).where(audit_events.c.store_key == key)
            ).scalar_one()
        return {p: (b or "", n) for p, b, n in rows}, n_events

    def check(self, text: str, expected: Any) -> None:
        if expected is None:
            assert text.startswith(ERROR), f"expected an error, got {text[:300]!r}"
        else:
            assert not text.startswith(ERROR), f"expected success, got {text[:300]!r}"
        text.encode("utf-8")

    # -- rules ----------------------------------------------------------------------------------

    @rule(path=paths, view_range=view_ranges)
    def view(self, path: tuple[str, str | None], view_range: tuple[int, int] | None) -> None:
        raw, canonical = path
        args: dict[str, Any] = {"command": "view", "path": raw}
        if view_range is not None:
            args["view_range"] = list(view_range)
        expected = self.model.view(canonical, view_range)
        text = self.run(args)
        self.check(text, expected)
        if expected is None:
            return
        kind, value = expected
        if kind == "file" and view_range is None:
            lines = split_lines(value)
            header = f"Here's the content of {canonical} with line numbers:"
            if lines:
                assert text == "\n".join([header, *(f"{n:>6}\t{line}" for n, line in enumerate(lines, 1))])
            else:
                assert text.startswith(header + "\n")
        elif kind == "dir":
            assert canonical is not None
            assert text == expected_listing(canonical, {p: self.model.files[p] for p in value})

    @rule(path=paths, text=texts)
    def create(self, path: tuple[str, str | None], text: str) -> None:
        raw, canonical = path
        expected = self.model.create(canonical, text)
        self.check(self.run({"command": "create", "path": raw, "file_text": text}), expected)

    @rule(path=paths, data=st.data(), new=st.one_of(st.none(), texts))
    def str_replace(self, path: tuple[str, str | None], data: st.DataObject, new: str | None) -> None:
        raw, canonical = path
        current = self.model.files.get(canonical or "", "")
        if current and data.draw(st.booleans(), label="from the file"):
            start = data.draw(st.integers(0, len(current) - 1), label="start")
            end = data.draw(st.integers(start, len(current)), label="end")
            old = current[start:end]
        else:
            old = data.draw(texts, label="old_str")
        args: dict[str, Any] = {"command": "str_replace", "path": raw, "old_str": old}
        if new is not None:
            args["new_str"] = new
        expected = self.model.str_replace(canonical, old, new)
        self.check(self.run(args), expected)

    @rule(path=paths, line=st.integers(-2, 8), text=texts)
    def insert(self, path: tuple[str, str | None], line: int, text: str) -> None:
        raw, canonical = path
        expected = self.model.insert(canonical, line, text)
        args = {"command": "insert", "path": raw, "insert_line": line, "insert_text": text}
        self.check(self.run(args), expected)

    @rule(path=paths)
    def delete(self, path: tuple[str, str | None]) -> None:
        raw, canonical = path
        expected = self.model.delete(canonical)
        self.check(self.run({"command": "delete", "path": raw}), expected)

    @rule(old=paths, new=paths)
    def rename(self, old: tuple[str, str | None], new: tuple[str, str | None]) -> None:
        expected = self.model.rename(old[1], new[1])
        self.check(self.run({"command": "rename", "old_path": old[0], "new_path": new[0]}), expected)

    @precondition(lambda self: bool(self.model.files))
    @rule(data=st.data(), view_range=view_ranges)
    def view_something_that_exists(self, data: st.DataObject, view_range: tuple[int, int] | None) -> None:
        """Steer towards successful views: a file or a directory that exists, in any spelling."""
        candidates = sorted(set(self.model.files) | {a for p in self.model.files for a in ancestors(p)})
        path = data.draw(st.sampled_from(candidates), label="path")
        self.view((data.draw(st.sampled_from(spellings(path)), label="spelling"), path), view_range)

    @precondition(lambda self: bool(self.model.files))
    @rule(data=st.data())
    def delete_something_that_exists(self, data: st.DataObject) -> None:
        candidates = sorted(set(self.model.files) | {a for p in self.model.files for a in ancestors(p)})
        path = data.draw(st.sampled_from(candidates), label="path")
        self.delete((data.draw(st.sampled_from(spellings(path)), label="spelling"), path))

    @precondition(lambda self: bool(self.model.files))
    @rule(data=st.data(), new=_valid)
    def rename_something_that_exists(self, data: st.DataObject, new: tuple[str, str]) -> None:
        """Steer towards successful renames: a file or a directory that exists."""
        candidates = sorted(set(self.model.files) | {a for p in self.model.files for a in ancestors(p)})
        old = data.draw(st.sampled_from(candidates), label="old_path")
        spelled = data.draw(st.sampled_from(spellings(old)), label="old spelling")
        expected = self.model.rename(old, new[1])
        self.check(self.run({"command": "rename", "old_path": spelled, "new_path": new[0]}), expected)

    @precondition(lambda self: bool(self.model.files))
    @rule(data=st.data())
    def edit_an_existing_file(self, data: st.DataObject) -> None:
        """Steer towards successful edits: an existing file, a unique old_str when there is one."""
        path = data.draw(st.sampled_from(sorted(self.model.files)), label="path")
        text = self.model.files[path]
        unique = [text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)
                  if occurrences(text, text[i:j]) == 1]
        if unique and data.draw(st.booleans(), label="str_replace"):
            old = data.draw(st.sampled_from(unique[:50]), label="old_str")
            new = data.draw(texts, label="new_str")
            expected = self.model.str_replace(path, old, new)
            self.check(self.run({"command": "str_replace", "path": path, "old_str": old, "new_str": new}), expected)
        else:
            line = data.draw(st.integers(0, len(split_lines(text))), label="line")
            ins = data.draw(texts, label="insert_text")
            expected = self.model.insert(path, line, ins)
            self.check(self.run({"command": "insert", "path": path, "insert_line": line, "insert_text": ins}), expected)

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def store_equals_model(self) -> None:
        state, n_events = self._state(self.key)
        assert {p: t for p, (t, _n) in state.items()} == self.model.files
        for path, (text, chars) in state.items():
            assert chars == len(text), path
        assert n_events == self.model.events, "one audit event per change"
        assert len(state) <= CAPS.max_files
        assert all(len(t) <= CAPS.max_file_chars for t, _ in state.values())
        assert CAPS.max_store_chars is None or sum(len(t) for t, _ in state.values()) <= CAPS.max_store_chars

    @invariant()
    def neighbour_is_untouched(self) -> None:
        assert self._state(f"shared:{self.neighbour}") == self.neighbour_state


def _budget(engine: Engine) -> tuple[int, int]:
    examples = int(os.environ.get("DBMEMORY_PROPERTY_EXAMPLES", "60"))
    steps = int(os.environ.get("DBMEMORY_PROPERTY_STEPS", "40"))
    return examples, steps


def test_memory_tool_agrees_with_the_reference_model(engine: Engine) -> None:
    examples, steps = _budget(engine)
    machine = type("Machine", (MemoryMachine,), {"engine": engine})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_model_examples_from_the_cases() -> None:
    """The model itself follows cases C2-C5 (so a disagreement points at the store)."""
    m = Model(Caps())
    assert m.create("/memories/p.md", "## Notes\n- (none yet)\n")
    assert m.str_replace("/memories/p.md", "## Notes\n- (none yet)", "## Notes\n- prefers tea")
    assert m.files["/memories/p.md"] == "## Notes\n- prefers tea\n"
    m.files["/memories/t.md"] = "a\nb\nc\n"
    assert m.insert("/memories/t.md", 0, "TOP") and m.files["/memories/t.md"] == "TOP\na\nb\nc\n"
    m.files["/memories/t.md"] = "a\nb\nc\n"
    assert m.insert("/memories/t.md", 3, "END\n") and m.files["/memories/t.md"] == "a\nb\nc\nEND\n"
    assert m.insert("/memories/t.md", 5, "x") is None
    m.files["/memories/tea.md"] = "tea, tea\n"
    assert m.str_replace("/memories/tea.md", "tea", "x") is None
    assert m.view("/memories/t.md", (0, 0)) is None
    assert expected_listing("/memories", {"/memories/d/e/z.md": "abc", "/memories/.h": "x"}) == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items and node_modules:\n4\t/memories\n3\t/memories/d/\n3\t/memories/d/e/"
    )


# ------------------------------------------------------------------ path validation property

SEGMENT_PIECES = [
    "a", "b", "Z", "0", ".", "..", "-", "_", " ", "é", "e\u0301", "\u00c5", "A\u030a", "%",
    "%2e", "%2E", "%252e", "%25252e", "%2f", "%2F", "%252f", "%5c", "%5C", "%00", "%0a", "%ff",
    "%c0%af", "%e2%88%95", "/", "//", "\\", "\u2215", "\u2044", "\uff0f", "\uff3c", "\u29f8",
    "\uff0e", "\u2024", "\u2025", "\u2026", "\x00", "\x1f", "\x7f", "\u0085", "\u200b", "\u202e",
    "\ufeff", "\u2028", "\ud800", "\U0001f355", "\u0130", "\u212a", "~", ":", "*", "?", "\t",
]
raw_paths = st.builds(
    lambda prefix, pieces, suffix: prefix + "".join(pieces) + suffix,
    st.sampled_from(["/memories/", "/memories", "/memories//", "//memories/", "/memories%2f",
                     "/memories%252f", "/Memories/", "memories/", "/memories/../memories/",
                     "/memories/.", "/memories\\", "", "/", "%2fmemories%2f"]),
    st.lists(st.sampled_from(SEGMENT_PIECES), max_size=12),
    st.sampled_from(["", "/", ".md", "/..", "/.", "%2f..", "//", "/x" * 600]),
)


def _nfkc_dots(segment: str) -> bool:
    return unicodedata.normalize("NFKC", segment) in (".", "..")


@settings(max_examples=3000, deadline=None, database=None)
@given(raw=raw_paths)
def test_no_generated_path_resolves_outside_memories(raw: str) -> None:
    try:
        path = normalize_path(raw)
    except InvalidPathError:
        return
    assert path == ROOT or path.startswith(ROOT + "/"), (raw, path)
    assert posixpath.normpath(path) == path, (raw, path)  # no '.', '..', '//' or trailing '/'
    assert len(path) <= MAX_PATH_CHARS
    assert unicodedata.is_normalized("NFC", path)
    assert "\\" not in path
    assert not any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") for ch in path), (raw, path)
    assert not any(ch in "\u2215\u2044\uff0f\uff3c\u29f8" for ch in path), (raw, path)
    assert not any(_nfkc_dots(s) for s in path.split("/")[2:]), (raw, path)
    assert normalize_path(path) == path, "canonical paths are fixed points"
    # the decoded text, read as a file-system path, stays inside /memories
    assert posixpath.normpath(posixpath.join("/", path)).startswith(ROOT)


names = st.text(
    alphabet=st.sampled_from(list("abcXYZ019-_.~ é€🍕") + ["\u00c5", "\u0130"]), min_size=1, max_size=8
).filter(lambda s: s.strip() == s and s not in (".", "..") and not _nfkc_dots(s))
canonical_paths = st.lists(names, min_size=1, max_size=4).map(lambda parts: ROOT + "/" + "/".join(parts))


def _encode_some(text: str, data: st.DataObject) -> str:
    """Percent-encode some characters, some of them several times over."""
    out = []
    for ch in text:
        level = data.draw(st.sampled_from([0, 0, 0, 1, 2, 3]))
        piece = ch
        for _ in range(level):
            piece = quote(piece, safe="")
        out.append(piece)
    return "".join(out)


@settings(max_examples=1500, deadline=None, database=None)
@given(path=canonical_paths, data=st.data())
def test_every_spelling_of_one_file_resolves_to_one_key(path: str, data: st.DataObject) -> None:
    try:
        key = normalize_path(path)
    except InvalidPathError:
        return  # e.g. over-long after joining: nothing to compare
    assert key == unicodedata.normalize("NFC", path)
    body = key[len(ROOT) :]
    spelled = data.draw(st.sampled_from(["nfd", "slashes", "trailing", "encoded", "all"]), label="how")
    raw = key
    if spelled in ("nfd", "all"):
        raw = unicodedata.normalize("NFD", raw)
    if spelled in ("encoded", "all"):
        raw = ROOT + _encode_some(raw[len(ROOT) :], data)
    if spelled in ("slashes", "all"):
        raw = raw.replace("/", "//", data.draw(st.integers(1, 3)))
    if spelled in ("trailing", "all"):
        raw += "/"
    assert normalize_path(raw) == key, (raw, key, body)


# ------------------------------------------------------------------------------- isolation

SCOPE_PAIRS: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    # scope: (enable_for_agent kwargs, tool kwargs of A, tool kwargs of B)
    "user": ({"scope": "user"}, {"user_id": "alice"}, {"user_id": "bob"}),
    "session": ({"scope": "session"}, {"session_id": "s-1"}, {"session_id": "s-2"}),
    "context": ({"scope": "context", "context_key": "doc"}, {"run_context": {"doc": "7"}},
                {"run_context": {"doc": "8"}}),
    "agent": ({"scope": "agent"}, {}, {}),
}

commands = st.one_of(
    st.builds(lambda p, t: {"command": "create", "path": p[0], "file_text": t}, paths, texts),
    st.builds(lambda p, t: {"command": "str_replace", "path": p[0], "old_str": "a", "new_str": t}, paths, texts),
    st.builds(lambda p, n, t: {"command": "insert", "path": p[0], "insert_line": n, "insert_text": t},
              paths, st.integers(0, 3), texts),
    st.builds(lambda p: {"command": "delete", "path": p[0]}, paths),
    st.builds(lambda p, q: {"command": "rename", "old_path": p[0], "new_path": q[0]}, paths, paths),
    st.builds(lambda p: {"command": "view", "path": p[0]}, paths),
)


@pytest.mark.parametrize("scope", sorted(SCOPE_PAIRS))
def test_no_sequence_of_calls_for_a_reads_or_changes_anything_of_b(engine: Engine, scope: str) -> None:
    """Agent/user A's calls never show or change B's store, whatever the scope (B is another
    user, session or context value of the same agent, or another agent for agent scope)."""
    from dbmemory import enable_for_agent

    enable, a_kwargs, b_kwargs = SCOPE_PAIRS[scope]
    agent_a = f"ISO-{scope}"
    agent_b = agent_a if scope != "agent" else f"ISO-{scope}-B"
    with engine.begin() as c:
        enable_for_agent(c, agent_a, **enable)
        if agent_b != agent_a:
            enable_for_agent(c, agent_b, **enable)
        tool_b = MemoryTool(c, agent_b, **b_kwargs)
        for path in ("/memories/a.md", "/memories/d/x.md", "/memories/b.md"):
            assert tool_b.execute({"command": "create", "path": path, "file_text": f"B secret {path}\n"}).startswith("File")
        key_b = tool_b.store.store_key

    def state_b() -> dict[str, str]:
        with committed_view(engine) as c:
            return {p: b or "" for p, b in c.execute(
                sa.select(files.c.file_path, files.c.body)
                .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
                .where(stores.c.store_key == key_b)
            ).all()}

    before = state_b()

    @settings(max_examples=15, stateful_step_count=10, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(calls=st.lists(commands, min_size=1, max_size=12))
    def run(calls: list[dict[str, Any]]) -> None:
        for arguments in calls:
            with engine.begin() as c:
                tool_a = MemoryTool(c, agent_a, **a_kwargs)
                assert tool_a.store.store_key != key_b
                text = tool_a.execute(arguments)
            assert "B secret" not in text, text
        assert state_b() == before

    run()


# ------------------------------------------------------- expiry and touches under a clock

# Issue 8 section 1: the same machine also reads, advances a controlled clock and runs the
# expiry. The model records, per file, its last write and its last *recorded* read (a read
# records a touch only when the file's last touch is older than TOUCH_INTERVAL), and every real
# use; after each expiry the store must equal the model's prediction exactly, and no file used
# (created, edited, renamed or read) less than ``days`` before the expiry may be gone.

CLOCK_STEPS = [
    dt.timedelta(minutes=1), dt.timedelta(minutes=30), dt.timedelta(minutes=59),
    dt.timedelta(hours=1), dt.timedelta(minutes=61), dt.timedelta(hours=5),
    dt.timedelta(hours=23), dt.timedelta(hours=24), dt.timedelta(hours=25),
    dt.timedelta(days=2), dt.timedelta(days=10),
]
EXPIRY_DAYS = [1 / 24, 0.5, 1, 2, 7]


class TimedModel(Model):
    """:class:`Model` plus the times the expiry depends on (``clock`` is the machine's)."""

    def __init__(self, caps: Caps, clock: Any) -> None:
        super().__init__(caps)
        self.clock = clock
        self.written: dict[str, dt.datetime] = {}  # dbm_files.last_accessed_at
        self.read_at: dict[str, dt.datetime] = {}  # dbm_file_reads.read_at
        self.used: dict[str, dt.datetime] = {}  # last real use, recorded or not

    def _sync(self, before: dict[str, str], events_before: int, moved: dict[str, str] | None = None) -> None:
        now = self.clock()
        for path in list(self.written):
            if path not in self.files:
                target = (moved or {}).get(path)
                for table in (self.written, self.read_at, self.used):
                    if path in table:
                        value = table.pop(path)
                        if target is not None:
                            table[target] = value
        if self.events != events_before:  # something was written
            for path, text in self.files.items():
                if path not in before or before[path] != text or (moved and path in moved.values()):
                    self.written[path] = self.used[path] = now

    def create(self, path: str | None, text: str) -> Any:
        before, events = dict(self.files), self.events
        result = super().create(path, text)
        self._sync(before, events)
        return result

    def _edit(self, path: str | None, new_text: str | None) -> Any:
        before, events = dict(self.files), self.events
        result = super()._edit(path, new_text)
        self._sync(before, events)
        return result

    def delete(self, path: str | None) -> Any:
        before, events = dict(self.files), self.events
        result = super().delete(path)
        self._sync(before, events)
        return result

    def rename(self, old: str | None, new: str | None) -> Any:
        before, events = dict(self.files), self.events
        result = super().rename(old, new)
        moved: dict[str, str] = {}
        if result and old is not None and new is not None:
            sources = [old] if old in before else [p for p in before if p.startswith(old + "/")]
            moved = {src: new + src[len(old):] for src in sources}
        self._sync(before, events, moved)
        return result

    def view(self, path: str | None, view_range: tuple[int, int] | None) -> Any:
        result = super().view(path, view_range)
        # a view that finds the file reads it (and records the touch) before it checks the
        # range: a refused view_range still counts as a read
        if path is not None and path in self.files:
            now = self.clock()
            last = max(self.written[path], self.read_at.get(path, self.written[path]))
            if last < now - TOUCH_INTERVAL:
                self.read_at[path] = now
            self.used[path] = now
        return result

    def expire(self, days: float) -> list[str]:
        """The files a correct expiry deletes now; removes them from the model."""
        cutoff = self.clock() - dt.timedelta(days=days) - TOUCH_INTERVAL
        gone = sorted(
            p for p in self.files
            if self.written[p] < cutoff and (p not in self.read_at or self.read_at[p] < cutoff)
        )
        for path in gone:
            del self.files[path]
            for table in (self.written, self.read_at, self.used):
                table.pop(path, None)
        self.events += len(gone)
        return gone


def _latest_recorded(engine: Engine) -> dt.datetime:
    """One second after the latest write or read time the database holds (or the epoch)."""
    from dbmemory.db.schema import file_reads

    with engine.connect() as c:
        times = [
            c.execute(sa.select(sa.func.max(files.c.last_accessed_at))).scalar(),
            c.execute(sa.select(sa.func.max(file_reads.c.read_at))).scalar(),
        ]
    known = [t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc) for t in times if t is not None]
    latest = max(known, default=dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))
    return latest.replace(microsecond=0) + dt.timedelta(seconds=1)


class ExpiryMachine(MemoryMachine):
    """:class:`MemoryMachine` with a controlled clock, touches and expiry runs."""

    def __init__(self) -> None:
        # The clock never goes back past a time the database already holds: an earlier example
        # moved its own clock weeks ahead, and on SQLite a new file can reuse the rowid of a
        # deleted one whose read row (dbm_file_reads keeps no foreign key) then looks like a
        # read of the new file in the future. A real clock only moves forward; so does this one.
        self.now = max(
            dt.datetime.now(dt.timezone.utc).replace(microsecond=0), _latest_recorded(self.engine)
        )
        super().__init__()
        events = self.model.events  # the store_caps event of MemoryMachine.__init__
        self.model = TimedModel(CAPS, lambda: self.now)
        self.model.events = events

    @rule(step=st.sampled_from(CLOCK_STEPS))
    def advance_clock(self, step: dt.timedelta) -> None:
        self.now += step

    @rule(path=st.sampled_from(CORE[:3] + CORE[4:]), text=texts)
    def create_a_file(self, path: str, text: str) -> None:
        """Steer towards stores with files to expire."""
        self.create((path, path), text)

    @rule(step=st.sampled_from(CLOCK_STEPS[5:]), days=st.sampled_from(EXPIRY_DAYS))
    def later_expire(self, step: dt.timedelta, days: float) -> None:
        """Steer towards expiries that have something to delete."""
        self.now += step
        self.expire(days)

    @precondition(lambda self: bool(self.model.files))
    @rule(data=st.data(), days=st.sampled_from(EXPIRY_DAYS))
    def read_later_then_expire(self, data: st.DataObject, days: float) -> None:
        """Steer towards the case of issue 8: a read long after the last write, then an expiry
        at about ``days`` after the read."""
        self.now += data.draw(st.sampled_from(CLOCK_STEPS[4:]), label="before the read")
        self.read_a_file(data)
        self.now += data.draw(
            st.sampled_from([dt.timedelta(days=days) - dt.timedelta(minutes=1), dt.timedelta(days=days),
                             dt.timedelta(days=days) + TOUCH_INTERVAL + dt.timedelta(minutes=1)]),
            label="after the read",
        )
        self.expire(days)

    @precondition(lambda self: bool(self.model.files))
    @rule(data=st.data())
    def read_a_file(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(sorted(self.model.files)), label="path")
        self.view((path, path), None)

    @rule(days=st.sampled_from(EXPIRY_DAYS))
    def expire(self, days: float) -> None:
        from dbmemory import expire_files

        used_before = dict(self.model.used)
        with self.engine.connect() as c:
            store_id = c.execute(sa.select(stores.c.store_id).where(stores.c.store_key == self.key)).scalar()
        if store_id is None:
            return
        expected = self.model.expire(days)
        with self.engine.begin() as c:
            deleted = expire_files(c, days=days, store_id=store_id, now=self.now)
        assert deleted == len(expected), (expected, deleted)
        live = [p for p in expected if used_before[p] >= self.now - dt.timedelta(days=days)]
        assert live == [], f"the model itself would delete live files: {live}"

    @invariant()
    def no_live_file_is_missing(self) -> None:
        state, _ = self._state(self.key)
        assert set(self.model.files) == set(state)


def test_expiry_never_deletes_a_file_used_within_days_under_a_controlled_clock(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, set_clock: Callable[[Any], None]
) -> None:

    examples, steps = _budget(engine)
    holder: dict[str, Any] = {}
    machine = type("Machine", (ExpiryMachine,), {"engine": engine})
    original_init = machine.__init__

    def init(self: Any) -> None:
        holder["machine"] = self
        original_init(self)

    machine.__init__ = init  # type: ignore[method-assign]
    set_clock(lambda: holder["machine"].now if "machine" in holder else dt.datetime.now(dt.timezone.utc)
    )
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=max(10, examples // 2),
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


# ------------------------------------------- two agents, a session store and the caps rule

# Issue 8 sections 1-3 together: two agents (re)configured on every scope with different caps,
# plus the agent-less writers ``MemoryTool.for_store`` and ``use_store`` on the shared store,
# a session store both agents write, ``disable_for_agent(drop_store=...)``, ``set_store_caps``,
# reads, a controlled clock and expiry over every store. The model predicts, from the rule of
# dbmemory.store.caps (written again here from its documentation, not from its code):
#
# * the caps on each store row: a row created by an agent's write gets that agent's caps, by
#   ``for_store``/``use_store`` the strictest among the enabled configurations naming it (else
#   the defaults); ``enable_for_agent`` sets its own stores (agent, user, agent-keyed context)
#   to its caps and the stores several configurations name (shared, global, store-code
#   context) to the strictest among the enabled configurations naming them; session stores
#   keep their creation caps; ``set_store_caps`` overrides; disabling changes no caps;
# * every writer's refusals (the caps of the row, whoever writes; lowered caps keep content, a
#   write that does not grow still works);
# * which stores exist: ``disable_for_agent(A, drop_store=True)`` drops A's agent, user and
#   agent-keyed context stores, never the session, shared, global or store-code context store;
# * which files each expiry deletes (TimedModel: ``now - days - TOUCH_INTERVAL``).
#
# After every step the database itself (a committed view, no dbmemory code) must show exactly
# the model's stores, caps, files and audit counts; no path is both a file and a directory; and
# no step grew a file, a file count or a store's characters past the row's cap.

AGENTS = ("PA", "PB")
SHARED_CODE = "PC"
CTX_STORE_CODE = "PD"
SESSION = "PS-1"
USERS = ("u1", "u2")
CTX_KEY, CTX_VALUE = "doc", "7"
CONFIGS: dict[str, dict[str, str]] = {
    "agent": {"scope": "agent"},
    "user": {"scope": "user"},
    "session": {"scope": "session"},
    "shared": {"scope": "shared", "store_code": SHARED_CODE},
    "global": {"scope": "global"},
    "context": {"scope": "context", "context_key": CTX_KEY},
    "context-store": {"scope": "context", "store_code": CTX_STORE_CODE, "context_key": CTX_KEY},
}
OWNED = ("agent", "user", "context")  # the agent's own stores
MULTI = ("shared", "global", "context-store")  # stores several configurations can name
CAP_CHOICES: list[dict[str, int]] = [
    {},  # every cap left out: the defaults
    {"max_file_chars": 40, "max_files": 5, "max_store_chars": 120},
    {"max_file_chars": 12, "max_files": 3},
    {"max_file_chars": 40, "max_files": 2, "max_store_chars": 30},
    {"max_file_chars": 25, "max_files": 4, "max_store_chars": 60},
]
HAND_MADE_CAPS = Caps(max_file_chars=1000, max_files=100)
"""The loose creation-time caps of the hand-made StoreRef writer (``MemoryTool(store=...)``):
they apply only to a row it creates; an existing row's caps bind it like any writer."""
WRITERS = (*AGENTS, "store_ref", *(("for_store", "use_store") if AGENTLESS_WRITERS_WORK else ()))
SHAPE_PATHS = [*CORE, "/memories/a.md/sub.md", "/memories/d/e"]
cap_texts = st.one_of(texts, st.sampled_from(["x" * 11, "y" * 13, "z" * 26, "w" * 41]))
"""Texts of every size around the caps of CAP_CHOICES."""


def store_key_of(agent: str, kind: str, user: str) -> str:
    """The key of the store agent ``agent`` configured as ``kind`` writes (DESIGN.md §4)."""
    return {
        "agent": f"agent:{agent}",
        "user": f"user:{agent}:{user}",
        "session": f"session:{SESSION}",
        "shared": f"shared:{SHARED_CODE}",
        "global": "global",
        "context": f"context:{agent}:{CTX_KEY}:{CTX_VALUE}",
        "context-store": f"context:store:{CTX_STORE_CODE}:{CTX_KEY}:{CTX_VALUE}",
    }[kind]


def names(agent: str, kind: str, key: str) -> bool:
    """Whether the configuration (agent, kind) names store ``key`` (any user for user scope)."""
    if kind == "user":
        return key.startswith(f"user:{agent}:")
    if kind == "session":
        return False  # session stores are named by whoever runs the session, not configured
    return key == store_key_of(agent, kind, USERS[0])


def own_keys(agent: str, key: str) -> bool:
    """The stores ``disable_for_agent(agent, drop_store=True)`` drops."""
    return (
        key == f"agent:{agent}"
        or key.startswith(f"user:{agent}:")
        or key.startswith(f"context:{agent}:")
    )


def caps_of(choice: dict[str, int]) -> Caps:
    return Caps(**choice)


def strictest(all_caps: list[Caps]) -> Caps:
    if not all_caps:
        return Caps()
    limits = [c.max_store_chars for c in all_caps if c.max_store_chars is not None]
    return Caps(
        max_file_chars=min(c.max_file_chars for c in all_caps),
        max_files=min(c.max_files for c in all_caps),
        max_store_chars=min(limits) if limits else None,
    )


class StoreModel(TimedModel):
    """One store of :class:`TwoAgentMachine`: files, times and the caps of its row. Lowered
    caps keep the content: an edit over ``max_file_chars`` is refused only when it grows the
    file (DESIGN.md §6, dbmemory.store.caps)."""

    def _edit(self, path: str | None, new_text: str | None) -> Any:
        if path is not None and new_text is not None and path in self.files:
            old = self.files[path]
            if len(new_text) > self.caps.max_file_chars and len(new_text) > len(old):
                return None
            if len(new_text) > self.caps.max_file_chars:  # not growing: allowed over the cap
                saved, self.caps = self.caps, Caps(
                    max_file_chars=len(new_text),
                    max_files=self.caps.max_files,
                    max_store_chars=self.caps.max_store_chars,
                )
                try:
                    return super()._edit(path, new_text)
                finally:
                    self.caps = saved
        return super()._edit(path, new_text)


Snapshot = dict[str, tuple[Caps, dict[str, tuple[str, int]]]]


class TwoAgentMachine(RuleBasedStateMachine):
    """Two agents, the agent-less writers, a session store, caps, drops, reads and expiry."""

    engine: Engine  # set by the test
    agent_creation_takes_strictest = True
    """Whether an agent's write that creates a store several configurations name gives it the
    strictest configured caps (see test_a_store_created_by_a_looser_agent_takes_the_strictest_caps);
    False makes the machine skip those writes when the two differ."""

    def __init__(self) -> None:
        super().__init__()
        from backends import clean_tables

        clean_tables(self.engine)  # every example starts from empty tables: fixed keys
        self.now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        self.configs: dict[str, tuple[str, Caps, bool]] = {}  # agent -> (kind, caps, enabled)
        self.stores: dict[str, StoreModel] = {}  # store key -> model, for every row
        self.past_events: dict[str, int] = {}  # audit events of dropped incarnations
        self.last: Snapshot = {}

    # -- the model's rule -----------------------------------------------------------------------

    def _clock(self) -> dt.datetime:
        return self.now

    def _configured(self, kind: str) -> list[Caps]:
        """Caps of the enabled configurations of ``kind`` (all of them name the same store)."""
        return [caps for k, caps, on in self.configs.values() if on and k == kind]

    def _target(self, writer: str, user: str) -> tuple[str | None, Caps | None]:
        """``(store key, caps a row created by this writer gets)``; key ``None``: the tool
        cannot be built (agent never enabled or disabled); caps ``None``: skip (known bug)."""
        if writer in ("for_store", "use_store"):
            return f"shared:{SHARED_CODE}", strictest(self._configured("shared"))
        if writer == "store_ref":  # brought caps only ever tighten a store others configure
            return f"shared:{SHARED_CODE}", strictest([*self._configured("shared"), HAND_MADE_CAPS])
        if writer not in self.configs or not self.configs[writer][2]:
            return None, None
        kind, caps, _on = self.configs[writer]
        key = store_key_of(writer, kind, user)
        if kind in MULTI and key not in self.stores:
            best = strictest(self._configured(kind))
            if best != caps and not self.agent_creation_takes_strictest:
                return key, None
            return key, best
        return key, caps

    def _store(self, key: str, caps: Caps) -> StoreModel:
        """The model of ``key``: the existing one, or a new (not yet kept) one with ``caps``."""
        return self.stores.get(key) or StoreModel(caps, self._clock)

    # -- plumbing -------------------------------------------------------------------------------

    def _tool(self, c: Any, writer: str, user: str) -> MemoryTool:
        if writer == "store_ref":
            return MemoryTool(c, store=shared_store(SHARED_CODE, caps=HAND_MADE_CAPS))
        if writer == "for_store":
            return MemoryTool.for_store(c, SHARED_CODE)
        if writer == "use_store":
            from dbmemory import use_store

            with use_store(SHARED_CODE):
                return MemoryTool(c)
        return MemoryTool(c, writer, user_id=user, session_id=SESSION, run_context={CTX_KEY: CTX_VALUE})

    def _run(self, writer: str, user: str, arguments: dict[str, Any]) -> str | None:
        """The tool's answer; ``None`` when the tool refused to be built (disabled agent)."""
        from dbmemory.errors import DbMemoryError

        with self.engine.connect() as c:
            with c.begin():
                try:
                    tool = self._tool(c, writer, user)
                except DbMemoryError:
                    return None
                text = tool.execute(arguments)
                assert c.exec_driver_sql("SELECT 1").scalar() == 1
        assert isinstance(text, str)
        return text

    def _command(self, writer: str, user: str, arguments: dict[str, Any], apply: Any) -> None:
        """Run one command; ``apply(model)`` is the model's prediction (None = an error)."""
        key, caps = self._target(writer, user)
        if key is not None and caps is None:
            return  # the known creation bug: see agent_creation_takes_strictest
        text = self._run(writer, user, arguments)
        if key is None:
            assert text is None, f"{writer} is not enabled, yet its tool answered {text!r}"
            return
        assert text is not None, f"{writer} is enabled ({self.configs.get(writer)}), no tool"
        assert caps is not None
        model = self._store(key, caps)
        expected = apply(model)
        if expected is None:
            assert text.startswith(ERROR), f"{writer} on {key}: expected an error, got {text[:300]!r}"
        else:
            assert not text.startswith(ERROR), f"{writer} on {key}: expected success, got {text[:300]!r}"
        if key not in self.stores and model.files:
            self.stores[key] = model  # its first write created the row
        if expected is not None and arguments["command"] == "view" and expected[0] == "file":
            path = expected[1]
            if "view_range" not in arguments and split_lines(path):
                lines = split_lines(path)
                assert text.endswith("\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, 1)))

    def _snapshot(self) -> tuple[Snapshot, dict[str, int]]:
        with committed_view(self.engine) as c:
            rows = c.execute(
                sa.select(stores.c.store_key, stores.c.max_file_chars, stores.c.max_files,
                          stores.c.max_store_chars)
            ).all()
            found: Snapshot = {
                k: (Caps(max_file_chars=fc, max_files=nf, max_store_chars=sc), {}) for k, fc, nf, sc in rows
            }
            for key, path, body, chars in c.execute(
                sa.select(stores.c.store_key, files.c.file_path, files.c.body, files.c.char_count)
                .select_from(files.join(stores, stores.c.store_id == files.c.store_id))
            ):
                found[key][1][path] = (body or "", chars)
            events = dict(
                c.execute(
                    sa.select(audit_events.c.store_key, sa.func.count())
                    .where(audit_events.c.store_key.is_not(None))
                    .group_by(audit_events.c.store_key)
                ).all()
            )
        return found, {k: int(n) for k, n in events.items()}

    # -- rules ----------------------------------------------------------------------------------

    @initialize(kinds=st.lists(st.sampled_from(["session"] * 4 + ["shared"] * 2 + sorted(CONFIGS)),
                               min_size=2, max_size=2),
                caps=st.lists(st.sampled_from(CAP_CHOICES), min_size=2, max_size=2))
    def enable_both(self, kinds: list[str], caps: list[dict[str, int]]) -> None:
        """Start with both agents enabled, most often on the one session store or the shared
        store (so two agents write one store)."""
        for agent, kind, choice in zip(AGENTS, kinds, caps, strict=True):
            self.enable(agent, kind, choice)

    @rule(agent=st.sampled_from(AGENTS), kind=st.sampled_from(sorted(CONFIGS)),
          caps=st.sampled_from(CAP_CHOICES))
    def enable(self, agent: str, kind: str, caps: dict[str, int]) -> None:
        from dbmemory import enable_for_agent

        with self.engine.begin() as c:
            enable_for_agent(c, agent, **CONFIGS[kind], **caps)
        self.configs[agent] = (kind, caps_of(caps), True)
        for key, model in self.stores.items():
            if not names(agent, kind, key):
                continue
            if kind in OWNED:
                model.caps = caps_of(caps)
            elif kind in MULTI:
                model.caps = strictest(self._configured(kind))

    @precondition(lambda self: bool(self.configs))
    @rule(data=st.data(), drop=st.booleans())
    def disable(self, data: st.DataObject, drop: bool) -> None:

        self._disable(data.draw(st.sampled_from(sorted(self.configs)), label="agent"), drop)

    def _disable(self, agent: str, drop: bool) -> None:
        from dbmemory import disable_for_agent

        with self.engine.begin() as c:
            dropped = disable_for_agent(c, agent, drop_store=drop)
        kind, caps, _on = self.configs[agent]
        self.configs[agent] = (kind, caps, False)
        gone = sorted(k for k in self.stores if drop and own_keys(agent, k))
        for key in gone:
            self.past_events[key] = self.past_events.get(key, 0) + self.stores.pop(key).events + 1
        assert dropped == len(gone), (gone, dropped)
        found, _ = self._snapshot()
        kept = [k for k in self.stores if k not in found]
        assert kept == [], f"disable_for_agent({agent!r}, drop_store={drop}) dropped {kept}"

    @rule(caps=st.lists(st.sampled_from(CAP_CHOICES), min_size=2, max_size=2),
          texts_=st.lists(cap_texts, min_size=2, max_size=2), agent=st.sampled_from(AGENTS),
          drop=st.booleans())
    def both_write_the_session_then_disable(
        self, caps: list[dict[str, int]], texts_: list[str], agent: str, drop: bool
    ) -> None:
        """Steer towards issue 8 §2: both agents on the session store, each writes a file (the
        store's agent_code column names the first), then one is disabled, with or without
        drop_store: the session store must stay."""
        for other, choice in zip(AGENTS, caps, strict=True):
            self.enable(other, "session", choice)
        for other, path, text in zip(AGENTS, ("/memories/a.md", "/memories/b.md"), texts_, strict=True):
            self.create(other, USERS[0], path, text)
        self._disable(agent, drop)

    @rule(writer=st.sampled_from(WRITERS), user=st.sampled_from(USERS),
          text=st.sampled_from(["", "ab", "x" * 11, "y" * 13, "z" * 26]))
    def fill_a_store(self, writer: str, user: str, text: str) -> None:
        """Steer towards the caps: five files of one size that fit together by shape."""
        for path in ("/memories/a.md", "/memories/b.md", "/memories/d/x.md", "/memories/d/y.md",
                     "/memories/d/e/z.md"):
            self.create(writer, user, path, text)

    @precondition(lambda self: any(m.files for m in self.stores.values()))
    @rule(data=st.data(), days=st.sampled_from(EXPIRY_DAYS))
    def read_later_then_expire(self, data: st.DataObject, days: float) -> None:
        """Steer towards issue 8 §1: a read long after the last write, then an expiry at about
        ``days`` after the read (a read within TOUCH_INTERVAL of the last touch is not
        recorded: the cutoff's TOUCH_INTERVAL must still keep it)."""
        readers = [(w, u) for w in WRITERS for u in USERS
                   if (t := self._target(w, u))[1] is not None and self.stores.get(t[0] or "")
                   and self.stores[t[0] or ""].files]
        if readers:
            writer, user = data.draw(st.sampled_from(readers), label="reader")
            key = self._target(writer, user)[0] or ""
            path = data.draw(st.sampled_from(sorted(self.stores[key].files)), label="path")
            self.now += data.draw(st.sampled_from(CLOCK_STEPS[:1] + CLOCK_STEPS[4:]), label="before the read")
            self._command(writer, user, {"command": "view", "path": path}, lambda m: m.view(path, None))
        self.now += data.draw(
            st.sampled_from([dt.timedelta(days=days) - dt.timedelta(minutes=1), dt.timedelta(days=days),
                             dt.timedelta(days=days) + TOUCH_INTERVAL + dt.timedelta(minutes=1)]),
            label="after the read",
        )
        self.expire(dt.timedelta(0), days)

    @rule(caps=st.sampled_from(CAP_CHOICES))
    def set_shared_caps(self, caps: dict[str, int]) -> None:
        """The admin override on the shared store (its row is created when missing)."""
        key = f"shared:{SHARED_CODE}"
        with self.engine.begin() as c:
            set_store_caps(c, shared_store(SHARED_CODE), **caps)
        model = self._store(key, strictest(self._configured("shared")))
        model.caps = caps_of(caps)
        model.events += 1
        self.stores[key] = model

    @rule(writer=st.sampled_from(WRITERS), user=st.sampled_from(USERS),
          path=st.sampled_from(SHAPE_PATHS), text=cap_texts)
    def create(self, writer: str, user: str, path: str, text: str) -> None:
        self._command(writer, user, {"command": "create", "path": path, "file_text": text},
                      lambda m: m.create(path, text))

    @rule(writer=st.sampled_from(WRITERS), user=st.sampled_from(USERS), data=st.data())
    def edit(self, writer: str, user: str, data: st.DataObject) -> None:
        key, caps = self._target(writer, user)
        model = self.stores.get(key or "")
        existing = sorted(model.files) if model is not None else []
        path = data.draw(st.sampled_from(existing or SHAPE_PATHS), label="path")
        text = model.files.get(path, "") if model is not None else ""
        if data.draw(st.booleans(), label="str_replace"):
            unique = [text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)
                      if occurrences(text, text[i:j]) == 1][:30]
            old = data.draw(st.sampled_from(unique) if unique else texts, label="old_str")
            new = data.draw(cap_texts, label="new_str")
            args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            self._command(writer, user, args, lambda m: m.str_replace(path, old, new))
        else:
            line = data.draw(st.integers(0, len(split_lines(text)) + 1), label="line")
            ins = data.draw(cap_texts, label="insert_text")
            args = {"command": "insert", "path": path, "insert_line": line, "insert_text": ins}
            self._command(writer, user, args, lambda m: m.insert(path, line, ins))

    def _existing(self, writer: str, user: str, data: st.DataObject, label: str) -> str:
        """A path of the writer's store (a file or a directory above one), or any path."""
        key, _caps = self._target(writer, user)
        model = self.stores.get(key or "")
        existing = sorted({q for p in model.files for q in (p, *ancestors(p))}) if model else []
        if existing and data.draw(st.integers(0, 3), label=f"{label} exists") > 0:
            return data.draw(st.sampled_from(existing), label=label)
        return data.draw(st.sampled_from(SHAPE_PATHS), label=label)

    @rule(writer=st.sampled_from(WRITERS), user=st.sampled_from(USERS), data=st.data())
    def delete(self, writer: str, user: str, data: st.DataObject) -> None:
        path = self._existing(writer, user, data, "path")
        self._command(writer, user, {"command": "delete", "path": path}, lambda m: m.delete(path))

    @rule(writer=st.sampled_from(WRITERS), user=st.sampled_from(USERS), data=st.data(),
          new=st.sampled_from(SHAPE_PATHS))
    def rename(self, writer: str, user: str, data: st.DataObject, new: str) -> None:
        old = self._existing(writer, user, data, "old_path")
        self._command(writer, user, {"command": "rename", "old_path": old, "new_path": new},
                      lambda m: m.rename(old, new))

    @rule(writer=st.sampled_from(WRITERS), user=st.sampled_from(USERS), data=st.data())
    def read(self, writer: str, user: str, data: st.DataObject) -> None:
        key, _caps = self._target(writer, user)
        model = self.stores.get(key or "")
        existing = sorted(model.files) if model is not None else []
        path = data.draw(st.sampled_from(existing or SHAPE_PATHS), label="path")
        self._command(writer, user, {"command": "view", "path": path}, lambda m: m.view(path, None))

    @rule(step=st.sampled_from(CLOCK_STEPS))
    def advance_clock(self, step: dt.timedelta) -> None:
        self.now += step

    @rule(step=st.sampled_from([dt.timedelta(0), *CLOCK_STEPS[5:]]), days=st.sampled_from(EXPIRY_DAYS))
    def expire(self, step: dt.timedelta, days: float) -> None:
        from dbmemory import expire_files

        self.now += step
        used = {k: dict(m.used) for k, m in self.stores.items()}
        expected = {k: m.expire(days) for k, m in self.stores.items()}
        with self.engine.begin() as c:
            deleted = expire_files(c, days=days, now=self.now)
        assert deleted == sum(len(v) for v in expected.values()), (expected, deleted)
        since = self.now - dt.timedelta(days=days)
        live = [(k, p) for k, ps in expected.items() for p in ps if used[k][p] >= since]
        assert live == [], f"the model itself would delete live files: {live}"

    # -- invariants, read from the database ------------------------------------------------------

    @invariant()
    def database_equals_model(self) -> None:
        found, events = self._snapshot()
        assert sorted(found) == sorted(self.stores), "store rows"
        for key, (caps, rows) in found.items():
            model = self.stores[key]
            assert caps == model.caps, f"caps of {key}"
            assert {p: t for p, (t, _n) in rows.items()} == model.files, f"files of {key}"
            assert all(n == len(t) for t, n in rows.values()), key
            paths = sorted(rows)
            assert all(p.startswith(ROOT + "/") for p in paths), paths
            both = [(p, q) for p in paths for q in paths if q.startswith(p + "/")]
            assert both == [], f"{key}: a path is both a file and a directory: {both}"
            # no step grew anything past the row's caps (content over lowered caps may stay)
            before = self.last.get(key, (caps, {}))[1]
            n_before, chars_before = len(before), sum(len(t) for t, _ in before.values())
            longest_before = max((len(t) for t, _ in before.values()), default=0)
            assert len(rows) <= max(caps.max_files, n_before), f"{key}: max_files"
            longest = max((len(t) for t, _ in rows.values()), default=0)
            assert longest <= max(caps.max_file_chars, longest_before), f"{key}: max_file_chars"
            if caps.max_store_chars is not None:
                assert sum(len(t) for t, _ in rows.values()) <= max(caps.max_store_chars, chars_before)
        for key in set(events) | set(self.stores) | set(self.past_events):
            model = self.stores.get(key)
            expected = self.past_events.get(key, 0) + (model.events if model else 0)
            assert events.get(key, 0) == expected, f"audit events of {key}"
        self.last = found


def test_two_agents_session_store_caps_drops_and_expiry_agree_with_the_model(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, set_clock: Callable[[Any], None]
) -> None:
    """Sections 1-3 of issue 8 on every backend: ``DBMEMORY_PROPERTY_EXAMPLES`` examples of
    ``DBMEMORY_PROPERTY_STEPS`` steps (about 10 s per server backend on a loaded 2-core box)."""

    examples, steps = _budget(engine)
    holder: dict[str, Any] = {}

    class Machine(TwoAgentMachine):
        def __init__(self) -> None:
            holder["machine"] = self
            super().__init__()

    Machine.engine = engine
    def real_now() -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)

    def now() -> dt.datetime:
        machine = holder.get("machine")
        return machine.now if machine is not None and "now" in vars(machine) else real_now()

    set_clock(now)
    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


@pytest.mark.parametrize("kind", MULTI)
def test_a_store_created_by_a_looser_agent_takes_the_strictest_caps(engine: Engine, kind: str) -> None:
    from dbmemory import enable_for_agent

    with engine.begin() as c:
        enable_for_agent(c, "STRICT", **CONFIGS[kind], max_files=2)
        enable_for_agent(c, "LOOSE", **CONFIGS[kind])
        tool = MemoryTool(c, "LOOSE", run_context={CTX_KEY: CTX_VALUE})
        answers = [
            tool.execute({"command": "create", "path": f"/memories/f{i}.md", "file_text": "x"}) for i in range(3)
        ]
        key = tool.store.store_key
    with committed_view(engine) as c:
        max_files = c.execute(sa.select(stores.c.max_files).where(stores.c.store_key == key)).scalar_one()
    assert (max_files, answers[2].startswith(ERROR)) == (2, True), (max_files, answers)


@pytest.mark.parametrize("writer", ["for_store", "use_store"])
def test_agentless_writers_write_a_shared_store(engine: Engine, writer: str) -> None:
    from dbmemory import enable_for_agent, use_store

    create = {"command": "create", "path": "/memories/a.md", "file_text": "hello"}
    with engine.begin() as c:
        enable_for_agent(c, "OWNER", scope="shared", store_code="AL", max_files=3)
        if writer == "for_store":
            answer = MemoryTool.for_store(c, "AL").execute(create)
        else:
            with use_store("AL"):
                answer = MemoryTool(c).execute(create)
    assert answer.startswith("File created"), answer
    with committed_view(engine) as c:
        assert c.execute(sa.select(stores.c.max_files).where(stores.c.store_key == "shared:AL")).scalar_one() == 3
