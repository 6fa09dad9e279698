"""Shared helpers of the database contract tests (tool contract, cases, transactions, stores,
expiry). Fixtures live in ``conftest.py``; this module holds plain functions only.

* :func:`committed_view` opens a connection that sees only committed data (a second connection
  on every backend but in-memory SQLite, where the one shared connection is used once the
  caller's transaction has ended).
* :class:`StatementLog` records every statement an engine runs (``before_cursor_execute``).
* :func:`store_state` / :func:`file_text` read what a store holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool
from typing_extensions import Self

from dbmemory.db.dialect.base import is_memory_sqlite
from dbmemory.db.schema import audit_events, files, stores

__all__ = [
    "ERROR",
    "LEAK_WORDS",
    "LISTING_HEADER",
    "StatementLog",
    "assert_no_leak",
    "audit_actions",
    "committed_view",
    "counts",
    "file_text",
    "file_view",
    "has_second_connection",
    "listing",
    "store_files",
]

ERROR = "Error: "
"""The tool's error marker."""

LEAK_WORDS = (
    "dbm_",
    "SELECT",
    "INSERT",
    "UPDATE ",
    "DELETE FROM",
    "SAVEPOINT",
    "psycopg",
    "sqlite3",
    "pymysql",
    "oracledb",
    "ORA-",
    "Traceback",
    "sqlalche.me",
    "[SQL:",
)
"""Words that must never appear in a text shown to a model (SQL, table names, drivers)."""

LISTING_HEADER = (
    "Here're the files and directories up to 2 levels deep in {}, "
    "excluding hidden items and node_modules:"
)


def assert_no_leak(text: str) -> None:
    """Fail if ``text`` holds SQL, a table name or a driver name/code."""
    for word in LEAK_WORDS:
        assert word not in text, f"{word!r} leaked into {text!r}"
    assert re.search(r"\b(?:ORA|SQLSTATE|HY\d{3})\b", text) is None, text


def has_second_connection(engine: Engine) -> bool:
    """Whether a second connection can look at the data while the first one is in a transaction
    (false only for in-memory SQLite, whose single connection is shared)."""
    return not is_memory_sqlite(engine)


@contextmanager
def committed_view(engine: Engine) -> Iterator[Connection]:
    """A connection that sees only committed data.

    Server backends: a new connection of ``engine``. SQLite file: a plain engine on the same
    file (no ``BEGIN IMMEDIATE``), so reading never waits for a writer. In-memory SQLite: the
    shared connection itself -- only call this after the caller's transaction has ended.
    """
    if engine.dialect.name == "sqlite":
        if is_memory_sqlite(engine):
            with engine.connect() as c:
                yield c
            return
        reader = sa.create_engine(engine.url, poolclass=NullPool)
        try:
            with reader.connect() as c:
                yield c
        finally:
            reader.dispose()
        return
    with engine.connect() as c:
        yield c


class StatementLog:
    """Record the statements ``engine`` runs while active (``with StatementLog(engine) as log``).

    Attributes:
        statements: the SQL texts, in order (savepoint statements included).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.statements: list[str] = []

    def _listener(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    def __enter__(self) -> Self:
        sa.event.listen(self.engine, "before_cursor_execute", self._listener)
        return self

    def __exit__(self, *exc: object) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._listener)

    def of_kind(self, *verbs: str) -> list[str]:
        """Statements whose first word is one of ``verbs`` (case-insensitive)."""
        wanted = {v.upper() for v in verbs}
        return [s for s in self.statements if s.lstrip().split(None, 1)[0].upper() in wanted]

    def touching(self, table: str, *verbs: str) -> list[str]:
        """Statements of the given verbs that name ``table``."""
        return [s for s in self.of_kind(*verbs) if table in s]

    def deleting(self, table: str) -> list[str]:
        """``DELETE`` statements whose target is ``table`` (not those that only read it in a
        subquery, as the set-based expiry's pruning of its candidates does)."""
        return [s for s in self.of_kind("DELETE") if s.split(None, 3)[2].strip('"`') == table]


def counts(conn: Connection) -> tuple[int, int, int]:
    """``(stores, files, audit events)`` as ``conn`` sees them."""
    return (
        conn.execute(sa.select(sa.func.count()).select_from(stores)).scalar_one(),
        conn.execute(sa.select(sa.func.count()).select_from(files)).scalar_one(),
        conn.execute(sa.select(sa.func.count()).select_from(audit_events)).scalar_one(),
    )


def store_files(conn: Connection, store_key: str | None = None) -> dict[str, str]:
    """``{path: text}`` of every file (of one store when ``store_key`` is given)."""
    stmt = sa.select(files.c.file_path, files.c.body).select_from(
        files.join(stores, stores.c.store_id == files.c.store_id)
    )
    if store_key is not None:
        stmt = stmt.where(stores.c.store_key == store_key)
    return {path: body or "" for path, body in conn.execute(stmt)}


def file_text(conn: Connection, path: str, store_key: str | None = None) -> str | None:
    """The text of one file (``None`` if there is no such file)."""
    return store_files(conn, store_key).get(path)


def audit_actions(conn: Connection) -> list[tuple[str, str | None]]:
    """``(action, file path)`` of every audit event, in insertion order."""
    stmt = sa.select(audit_events.c.action_name, audit_events.c.file_path).order_by(
        audit_events.c.event_id
    )
    return [tuple(r) for r in conn.execute(stmt)]  # type: ignore[misc]


def listing(directory: str, *rows: str) -> str:
    """The expected text of a directory view: header, then one ``size\\tpath`` row per line."""
    return "\n".join([LISTING_HEADER.format(directory), *rows])


def file_view(path: str, *lines: str, first: int = 1) -> str:
    """The expected text of a file view: header, then the numbered lines."""
    numbered = [f"{n:>6}\t{line}" for n, line in enumerate(lines, first)]
    return "\n".join([f"Here's the content of {path} with line numbers:", *numbered])


def statement_is(statement: str, prefix: str) -> bool:
    """Whether ``statement`` is the statement ``prefix`` names: it starts with ``prefix``, or it
    is that statement behind a ``WITH`` clause (PostgreSQL's audit insert carries the store-row
    bump as a CTE: ``WITH bump AS (UPDATE dbm_stores ...) INSERT INTO dbm_audit_events ...``)."""
    text, want = statement.lstrip().upper(), prefix.upper()
    return text.startswith(want) or (text.startswith("WITH") and want in text)


def cli_commands() -> list[tuple[tuple[str, ...], Any]]:
    """Every command of the ``dbmemory`` CLI with its path (``("db", "upgrade")``,
    ``("tool",)``), lazy top-level commands loaded, in help order."""
    import typer.main

    from dbmemory.cli import app
    from dbmemory.cli._common import LazyCommand

    root = typer.main.get_command(app)
    ctx = root.make_context("dbmemory", [], resilient_parsing=True)
    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if isinstance(command, LazyCommand):
            command = command.real()
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*path, name))
        else:
            found.append((path, command))

    walk(root, ())
    return found
