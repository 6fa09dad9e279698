"""One home per name: every ``from dbmemory.x import name`` in the package imports ``name`` from
the module that defines it (or imports the submodule ``dbmemory.x.name``), so no module serves
as a façade for another's names (docs/architecture.md, section 4).

A name counts as defined by a module when the module's top level binds it: a ``def``, a
``class`` or an assignment, also inside a top-level ``if``/``try`` block (``if TYPE_CHECKING:``,
an optional dependency's ``try: ... except ImportError``). Imports do not count.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _file(module: str) -> Path | None:
    base = SRC / module.replace(".", "/")
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _bound(nodes: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.If):
            names |= _bound(node.body) | _bound(node.orelse)
        elif isinstance(node, ast.Try):
            names |= _bound(node.body) | _bound(node.orelse) | _bound(node.finalbody)
            for handler in node.handlers:
                names |= _bound(handler.body)
    return names


@cache
def _defined(module: str) -> frozenset[str]:
    path = _file(module)
    return (
        frozenset(_bound(ast.parse(path.read_text(encoding="utf-8")).body)) if path else frozenset()
    )


def test_every_import_names_the_module_that_defines_the_name() -> None:
    indirect = []
    for path in sorted((SRC / "dbmemory").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] == "dbmemory"
            ):
                continue
            for alias in node.names:
                if _file(f"{node.module}.{alias.name}") is None and alias.name not in _defined(
                    node.module
                ):
                    indirect.append(
                        f"{path.relative_to(SRC)}:{node.lineno}: from {node.module} import {alias.name}"
                    )
    assert indirect == [], "names imported from a module that is not their home:\n" + "\n".join(
        indirect
    )


def test_the_check_sees_an_indirect_import() -> None:
    assert "put_file" in _defined("dbmemory.store.files")
    assert "delete_file" not in _defined("dbmemory.store.files")  # its home is dbmemory.store.moves
    assert "delete_file" in _defined("dbmemory.store.moves")


def test_no_private_name_is_imported_from_another_module() -> None:
    """A ``_name`` stays in its module; a private module (``cli/_common.py``) serves only its own
    package."""
    leaks = []
    for path in sorted((SRC / "dbmemory").rglob("*.py")):
        package = ".".join(path.relative_to(SRC).with_suffix("").parts[:-1]) + "."
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] == "dbmemory"
            ):
                continue
            for alias in node.names:
                submodule = _file(f"{node.module}.{alias.name}") is not None
                module = f"{node.module}.{alias.name}" if submodule else node.module
                private_name = alias.name.startswith("_") and not submodule
                private_module = "._" in module and not package.startswith(
                    module.rsplit("._", 1)[0] + "."
                )
                if private_name or private_module:
                    leaks.append(
                        f"{path.relative_to(SRC)}:{node.lineno}: from {node.module} import {alias.name}"
                    )
    assert leaks == [], "private names imported across modules:\n" + "\n".join(leaks)


MAX_MODULE_LINES = 600
"""docs/architecture.md: a module over ~600 lines is split by concern into a package."""

REQUIRED_DEPENDENCIES = frozenset(
    {"sqlalchemy", "alembic", "pydantic", "pydantic_settings", "typer", "click", "rich", "platformdirs"}
)
"""The top-level modules of ``[project] dependencies``: always there, so imported at module top."""


def _modules() -> list[tuple[Path, list[str], ast.Module]]:
    found = []
    for path in sorted((SRC / "dbmemory").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found.append((path, text.splitlines(), ast.parse(text)))
    return found


def _imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["dbmemory" if node.level else node.module or ""]


def _function_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    inside = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside += [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return list({id(n): n for n in inside}.values())


def _says_optional(lines: list[str], node: ast.stmt) -> bool:
    """Whether the import statement (any of its lines) or the line above it has a comment
    naming it optional."""
    span = lines[max(node.lineno - 2, 0) : (node.end_lineno or node.lineno)]
    return any("#" in line and "optional" in line.split("#", 1)[1].lower() for line in span)


def test_no_module_is_over_600_lines() -> None:
    long = [
        f"{path.relative_to(SRC)}: {len(lines)} lines"
        for path, lines, _ in _modules()
        if len(lines) > MAX_MODULE_LINES
    ]
    assert long == [], f"modules over {MAX_MODULE_LINES} lines (split by concern):\n" + "\n".join(long)


def test_function_level_imports_are_few_and_each_of_an_optional_dependency_said_so() -> None:
    internal = 0
    function_level = 0
    wrong = []
    for path, lines, tree in _modules():
        internal += sum(
            1
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            and any(m.split(".")[0] == "dbmemory" for m in _imported_modules(node))
        )
        for node in _function_level_imports(tree):
            function_level += 1
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            tops = {m.split(".")[0] for m in _imported_modules(node)}
            if "dbmemory" in tops or tops & REQUIRED_DEPENDENCIES:
                wrong.append(f"{where}: {', '.join(sorted(tops))} is no optional dependency")
            elif not _says_optional(lines, node):
                wrong.append(f"{where}: no comment saying it is optional (and which extra)")
    assert wrong == [], "function-level imports that belong at module top:\n" + "\n".join(wrong)
    assert internal > 0
    assert function_level <= internal // 10, (
        f"{function_level} function-level imports for {internal} internal imports (over 10%)"
    )


def test_the_function_level_check_sees_an_import_in_a_function() -> None:
    tree = ast.parse("import os\n\ndef f():\n    import json\n    import bm25s  # optional (items)\n")
    lines = ["import os", "", "def f():", "    import json", "    import bm25s  # optional (items)"]
    found = _function_level_imports(tree)
    assert [n.lineno for n in sorted(found, key=lambda n: n.lineno)] == [4, 5]
    assert [_says_optional(lines, n) for n in sorted(found, key=lambda n: n.lineno)] == [False, True]


def test_every_source_file_is_in_a_package_the_layer_contract_sees() -> None:
    """import-linter (grimp) builds its graph from packages only: a folder of ``.py`` files
    without ``__init__.py`` (the migrations were one) is invisible to the layer contract, so a
    migration could import ``dbmemory.cli`` unnoticed."""
    package = SRC / "dbmemory"
    outside = sorted(
        str(path.relative_to(SRC))
        for path in package.rglob("*.py")
        if any(
            not (folder / "__init__.py").is_file()
            for folder in path.parents
            if folder.is_relative_to(package)
        )
    )
    assert outside == [], f"not in a package (add __init__.py): {outside}"
