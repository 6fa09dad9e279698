"""The CLI's database access: the engine a command opens (``--url``, ``DBMEMORY_URL`` or the default
SQLite file), and the transaction each command runs in and commits."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from dbmemory.cli._common import remember_secret, remember_secret_in
from dbmemory.db.dialect.base import is_sqlite
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.engine import create_engine
from dbmemory.db.schema import VERSION_TABLE
from dbmemory.errors import DbMemoryError, NotFoundError, StorageError

__all__ = [
    "open_engine",
    "missing_sqlite_file",
    "engine_session",
    "transaction",
]


def open_engine(url: str | None) -> Engine:
    """Create dbmemory's configured engine for ``url`` (None: ``DBMEMORY_URL`` or the default).

    Raises:
        InvalidArgumentError: the URL cannot be parsed or names an unknown database.
        MissingDependencyError: the URL's driver is not installed.
    """
    if url is not None:
        remember_secret_in(url)
    engine = create_engine(url)
    remember_secret(engine.url)

    @event.listens_for(engine, "connect")
    def _connected(_dbapi_conn: Any, _record: Any) -> None:
        engine._dbmemory_cli_connected = True  # type: ignore[attr-defined]

    return engine


def _close_engine(engine: Engine) -> None:
    """Dispose of the engine (its pooled connections close)."""
    engine.dispose()


def _schema_missing(engine: Engine) -> bool:
    """Whether the database has no dbmemory schema (best effort, False when unsure).

    Asked only when the engine did connect once (an unreachable server is not asked twice, so
    a connect timeout is not waited for again).
    """
    if not getattr(engine, "_dbmemory_cli_connected", False):
        return False
    try:  # a look at the catalogue, not alembic: a CLI command's start stays light
        with engine.connect() as conn:
            return not sa.inspect(conn).has_table(VERSION_TABLE)
    except Exception:
        return False


def missing_sqlite_file(engine: Engine) -> str | None:
    """The path of ``engine``'s SQLite database file when that file does not exist, else None
    (also None for other databases and in-memory SQLite)."""
    url = engine.url
    if not is_sqlite(engine):
        return None
    database = url.database or ""
    if database in ("", ":memory:") or url.query.get("mode") == "memory" or database.startswith("file:"):
        return None
    return None if os.path.exists(database) else database


def _refuse_missing_sqlite_file(engine: Engine) -> None:
    """Raise when ``engine`` is a SQLite file database whose file does not exist.

    A read-only command must not create an empty database file (SQLite creates one on the
    first connection) and then report "no tables": it says the file is missing.

    Raises:
        NotFoundError: the file does not exist (code ``not_found``).
    """
    database = missing_sqlite_file(engine)
    # a missing folder: SQLite cannot create the file there, and the driver's own error is
    # translated with its remedy ("check that its folder exists")
    if database is not None and os.path.isdir(os.path.dirname(database) or "."):
        raise NotFoundError(
            f"there is no SQLite database at {database}: check --url (or DBMEMORY_URL); "
            "'dbmemory db upgrade' creates one (this command only reads, so it created nothing)"
        )


@contextmanager
def engine_session(
    url: str | None, action: str, *, schema_hint: bool = True, read_only: bool = False
) -> Iterator[Engine]:
    """Open the engine for ``url``, translate database errors, and dispose of it at the end.

    Args:
        url: the ``--url`` value (None: ``DBMEMORY_URL`` or the embedded SQLite default).
        action: what the command does, for error messages, e.g. ``"listing files"``.
        schema_hint: when a database error happens on a database without dbmemory's tables,
            say to run ``dbmemory db upgrade`` (off for the ``db`` commands themselves).
        read_only: the command only reads: a SQLite file that does not exist is refused
            (:class:`~dbmemory.errors.NotFoundError`) instead of being created empty.

    Yields:
        A configured :class:`~sqlalchemy.engine.Engine`.

    Raises:
        DbMemoryError: every database error translated (no SQL, DSN or driver code in the
            message); a database without dbmemory's tables gets a hint to run ``db upgrade``.
    """
    engine = open_engine(url)
    if read_only:
        try:
            _refuse_missing_sqlite_file(engine)
        except DbMemoryError:
            engine.dispose()
            raise
    try:
        yield engine
    except SQLAlchemyError as exc:
        translated = translate_db_error(exc, action, target=engine)
        if schema_hint and isinstance(translated, StorageError) and _schema_missing(engine):
            raise StorageError(
                "this database has no dbmemory tables: run 'dbmemory db upgrade' "
                "(with the same --url) first"
            ) from exc
        raise translated from exc
    except StorageError as exc:
        if schema_hint and _schema_missing(engine):
            raise StorageError(
                "this database has no dbmemory tables: run 'dbmemory db upgrade' "
                "(with the same --url) first"
            ) from exc
        raise
    finally:
        _close_engine(engine)


@contextmanager
def transaction(url: str | None, action: str, *, read_only: bool = False) -> Iterator[Connection]:
    """Yield a connection inside a transaction of its own, committed when the block succeeds.

    The CLI is a convenience that commits, unlike the Python API, which joins the caller's
    transaction. The transaction rolls back when the block raises.

    Args:
        url: the ``--url`` value (None: ``DBMEMORY_URL`` or the embedded SQLite default).
        action: what the command does, for error messages, e.g. ``"listing files"``.
        read_only: as :func:`engine_session` (a missing SQLite file is refused, not created).

    Yields:
        A :class:`~sqlalchemy.engine.Connection` inside ``engine.begin()``.

    Raises:
        DbMemoryError: as :func:`engine_session`.
    """
    with engine_session(url, action, read_only=read_only) as engine, engine.begin() as conn:
        yield conn


