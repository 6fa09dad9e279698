"""Every Python home the docs name exists: a dotted ``dbmemory.`` name resolves by import + getattr.

Where the names are read:

- the docstrings and comments of ``src/dbmemory``, ``bench`` and ``examples`` (every ``:mod:``,
  ``:func:``, ``:class:``, ``:data:``, ``:meth:``, ``:attr:``, ``:exc:``, ``:obj:`` target written
  as a full ``dbmemory.`` path, and every other such path written in the text);
- the README, ``docs/*.md``, ``bench/README.md`` and ``examples/*.md`` (every dotted path, and the
  names of each ``from dbmemory.x import a, b`` line);
- the generated ``sql/<dialect>/*.sql`` scripts, whose comments name the Python function each
  procedure mirrors (the names come from the templates in ``src/dbmemory/sqlgen``).

A name resolves when its longest importable prefix is a module and the rest are attributes of it
(a dataclass or pydantic field, or an annotated name, counts as an attribute). Importing a module
that fails for any other reason than the name not being a module fails the test: an optional
dependency the docs need must be installed with the ``all`` extra.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

NAME = re.compile(r"(?<![\w./])dbmemory(?:\.[A-Za-z_]\w*)+")
"""A dotted path that starts at the package: ``dbmemory.store.moves.delete_file``."""

ROLE = re.compile(
    r":(?:mod|func|class|data|meth|attr|exc|obj|const):`(?:[^`<]*<)?~?([\w.]+)(?:\(\))?>?`"
)
"""A Sphinx role and its target, plain (``:func:`x.y```) or titled (``:func:`title <x.y>```)."""

FROM_IMPORT = re.compile(r"^\s*from\s+(dbmemory(?:\.\w+)*)\s+import\s+\(?([\w\s,]+)\)?\s*$")
"""``from dbmemory.x import a, b`` on one line, as the README's code blocks write it."""

PYTHON_SOURCES = [
    *sorted((ROOT / "src" / "dbmemory").rglob("*.py")),
    *sorted((ROOT / "bench").glob("*.py")),
    *sorted((ROOT / "examples").glob("*.py")),
]
MARKDOWN = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "bench" / "README.md",
    *sorted((ROOT / "examples").glob("*.md")),
]
SQL = sorted((ROOT / "sql").rglob("*.sql"))


@dataclass(frozen=True)
class Reference:
    where: str
    """``path:line`` of the text that writes the name."""
    name: str
    """The dotted name as written (a role's target, without ``~`` or ``()``)."""


def _python_texts(path: Path) -> list[tuple[int, str]]:
    """The docstrings (any string statement: module, class, function, attribute docstrings) and
    comments of one Python file, each with the line it starts on."""
    source = path.read_text(encoding="utf-8")
    texts = [
        (node.lineno, node.value.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    texts += [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    return texts


def _names_in(text: str) -> list[str]:
    """The ``dbmemory.`` names of a text: role targets and the other dotted paths, once each per
    place written."""
    names = [m.group(1) for m in ROLE.finditer(text) if m.group(1).startswith("dbmemory.")]
    names += [m.group(0) for m in NAME.finditer(ROLE.sub("", text))]
    return names


def _references() -> list[Reference]:
    found: list[Reference] = []
    for path in PYTHON_SOURCES:
        rel = path.relative_to(ROOT)
        for line, text in _python_texts(path):
            for offset, chunk in enumerate(text.splitlines() or [text]):
                found += [Reference(f"{rel}:{line + offset}", name) for name in _names_in(chunk)]
    for path in [*MARKDOWN, *SQL]:
        rel = path.relative_to(ROOT)
        for line, chunk in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [Reference(f"{rel}:{line}", name) for name in _names_in(chunk)]
            match = FROM_IMPORT.match(chunk) if path.suffix == ".md" else None
            if match:
                module, imported = match.groups()
                found += [
                    Reference(f"{rel}:{line}", f"{module}.{name.strip()}")
                    for name in imported.split(",")
                    if name.strip() and name.strip() != "as"
                ]
    return found


@cache
def _module(name: str) -> object | None:
    """The module called ``name``, or None when no such module exists."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            return None
        raise


def _problem(name: str) -> str | None:
    """Why ``name`` does not resolve, or None when it does."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        obj = _module(".".join(parts[:cut]))
        if obj is None:
            continue
        for i, attr in enumerate(parts[cut:], cut):
            fields = (
                getattr(obj, "__dataclass_fields__", None)
                or getattr(obj, "model_fields", None)
                or {}
            )
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif attr in fields or attr in getattr(obj, "__annotations__", {}):
                obj = None
            else:
                return f"{'.'.join(parts[:i])} has no {attr!r}"
        return None
    return "no such module"


def test_the_checker_reads_names_from_every_kind_of_source() -> None:
    """The scan sees roles, plain paths and import lines (a scan that found nothing would pass)."""
    where = {ref.where.split(":")[0].split("/")[0] for ref in _references()}
    assert {"src", "README.md", "docs", "sql"} <= where
    assert _names_in(":func:`~dbmemory.store.moves.delete_file` and dbmemory.db.engine.") == [
        "dbmemory.store.moves.delete_file",
        "dbmemory.db.engine",
    ]
    assert _problem("dbmemory.store.moves.delete_file") is None
    assert (
        _problem("dbmemory.store.files.delete_file") == "dbmemory.store.files has no 'delete_file'"
    )


def test_every_dotted_dbmemory_name_in_the_docs_resolves() -> None:
    broken = sorted(
        {
            f"{ref.where}: {ref.name} ({problem})"
            for ref in _references()
            if (problem := _problem(ref.name))
        }
    )
    assert broken == [], f"{len(broken)} names that do not resolve:\n" + "\n".join(broken)


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_names_no_module_file_that_is_gone(path: Path) -> None:
    """A module written as a file (``src/dbmemory/store/files.py``, ``db/dialect.py``) exists."""
    text = path.read_text(encoding="utf-8")
    missing = sorted(
        {
            m.group(0)
            for m in re.finditer(r"(?<![\w/.-])(?:src/)?dbmemory/[\w/]+\.py\b", text)
            if not (ROOT / "src" / m.group(0).removeprefix("src/")).is_file()
        }
    )
    assert missing == [], f"{path.relative_to(ROOT)} names files that do not exist: {missing}"


PROJECT_FILE = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*([A-Z][A-Z0-9_]+\.md)\b")
"""A project document named by its file name: ``DESIGN.md``, ``docs/README.md``."""


def test_docs_and_docstrings_cite_only_documents_in_the_repository() -> None:
    """``DESIGN.md §3`` in a page or docstring points at nothing when that file is not in the
    repository: cite a page of ``docs/`` or a module instead."""
    present = {p.name for p in ROOT.rglob("*.md") if ".git" not in p.parts}
    missing = sorted(
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in [*PYTHON_SOURCES, *MARKDOWN]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in PROJECT_FILE.finditer(line)
        if match.group(1) not in present
    )
    assert missing == [], "documents that are not in the repository:\n" + "\n".join(missing)
