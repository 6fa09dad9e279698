"""Schema set-up: run dbmemory's alembic migrations from Python, no ``alembic.ini`` needed.

Nothing migrates on import; schema changes are an explicit step (``dbmemory db upgrade`` or
:func:`upgrade`). The migrations live in ``dbmemory/db/migrations`` and record their state in
their own version table, ``dbm_alembic_version``, so they can share a schema with the host
application's migrations.

Transactions: :func:`upgrade` and :func:`downgrade` accept a URL, an Engine or a Connection.

* URL or Engine: the migration runs in a transaction of its own (``engine.begin()``) and is
  committed when it succeeds.
* Connection outside a transaction: a transaction is begun on it and committed (this function
  opened it).
* Connection inside a transaction: the migration joins it and nothing is committed; the caller
  commits or rolls back. (On MySQL/MariaDB and Oracle every DDL statement commits implicitly
  anyway; PostgreSQL and SQLite roll DDL back.)

Example:
    >>> from dbmemory.db import migrate
    >>> migrate.upgrade("sqlite:///memory.db")            # doctest: +SKIP
    >>> migrate.current("sqlite:///memory.db") == migrate.head()  # doctest: +SKIP
    True
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url

from dbmemory.db.schema import VERSION_TABLE

__all__ = [
    "MIGRATIONS_DIR",
    "OFFLINE_DIALECTS",
    "alembic_config",
    "current",
    "downgrade",
    "head",
    "offline_dialect",
    "offline_sql",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
"""Folder of dbmemory's alembic environment (``env.py``, ``versions/``)."""

OFFLINE_DIALECTS: tuple[str, ...] = ("oracle", "postgresql", "mysql")
"""Dialects whose reference SQL is rendered into ``sql/<dialect>/`` (see :mod:`dbmemory.sqlgen`)."""

Bind = str | URL | Engine | Connection


def alembic_config(**attributes: Any) -> Any:
    """An alembic ``Config`` pointing at dbmemory's migrations, built in memory.

    Args:
        **attributes: put into ``config.attributes`` for ``env.py`` (``connection``, or
            ``offline_dialect`` and ``output_buffer``).

    Returns:
        An :class:`alembic.config.Config` (no ini file).
    """
    from alembic.config import Config

    config = Config()
    # ConfigParser interpolation: a '%' in the install path must be doubled.
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.attributes.update(attributes)
    return config


def _check_bind(bind: object) -> None:
    """Refuse a ``bind`` that is not a URL (text or URL), an Engine or a Connection: ``None``
    would otherwise open the default database (``DBMEMORY_URL`` or the user's SQLite file)."""
    if not isinstance(bind, (str, URL, Engine, Connection)):
        from dbmemory.errors import InvalidArgumentError
        from dbmemory.validate import show

        raise InvalidArgumentError(
            f"bind must be a database URL, an Engine or a Connection, got {show(bind)}: pass "
            "e.g. 'sqlite:///memory.db' or dbmemory.create_engine(url)"
        )


@contextmanager
def _connection(bind: Bind) -> Iterator[Connection]:
    """Yield a Connection inside a transaction, committing only a transaction opened here."""
    _check_bind(bind)
    if isinstance(bind, Connection):
        if bind.in_transaction():
            yield bind
        else:
            with bind.begin():
                yield bind
        return
    if isinstance(bind, Engine):
        with bind.begin() as conn:
            yield conn
        return
    from dbmemory.db.engine import create_engine

    engine = create_engine(bind)
    try:
        with engine.begin() as conn:
            yield conn
    finally:
        engine.dispose()


def upgrade(bind: Bind, revision: str = "head") -> None:
    """Upgrade dbmemory's schema to ``revision``.

    Args:
        bind: a database URL, an Engine or a Connection (see the module docstring for who
            commits).
        revision: target revision id; ``"head"`` (default) is the newest.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database rejected a statement (the driver error is
            kept, for operators).
        alembic.util.CommandError: ``revision`` is unknown.
    """
    from alembic import command

    with _connection(bind) as conn:
        command.upgrade(alembic_config(connection=conn), revision)


def downgrade(bind: Bind, revision: str = "base") -> None:
    """Downgrade dbmemory's schema to ``revision``.

    ``"base"`` (default) drops the view and every dbmemory table with their data; the empty
    version table ``dbm_alembic_version`` is left behind (alembic's online behaviour), and
    :func:`current` then returns None.

    Args:
        bind: a database URL, an Engine or a Connection (see the module docstring).
        revision: target revision id, or ``"base"``.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database rejected a statement.
        alembic.util.CommandError: ``revision`` is unknown.
    """
    from alembic import command

    with _connection(bind) as conn:
        command.downgrade(alembic_config(connection=conn), revision)


def current(bind: Bind) -> str | None:
    """The revision the database is at.

    Args:
        bind: a database URL, an Engine or a Connection. A Connection is used as is: no
            transaction is begun or ended on it beyond SQLAlchemy's autobegin.

    Returns:
        The revision id (e.g. ``"0001"``), or None when dbmemory's schema is not installed
        (no version table, or an empty one).
    """
    from alembic.runtime.migration import MigrationContext

    _check_bind(bind)

    def read(conn: Connection) -> str | None:
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()

    if isinstance(bind, Connection):
        return read(bind)
    if isinstance(bind, Engine):
        with bind.connect() as conn:
            return read(conn)
    from dbmemory.db.engine import create_engine

    engine = create_engine(bind)
    try:
        with engine.connect() as conn:
            return read(conn)
    finally:
        engine.dispose()


def head() -> str:
    """The newest revision id shipped with this version of dbmemory (e.g. ``"0001"``)."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:  # pragma: no cover - a packaging error
        raise RuntimeError(f"dbmemory's migrations must have one head, found {heads}")
    return heads[0]


def offline_dialect(dialect_name: str) -> Dialect:
    """The unconnected dialect used to render offline SQL for ``dialect_name``.

    Oracle is compiled as 19c (:func:`dbmemory.db.dialect.oracle19_dialect`: no native
    BOOLEAN, no JSON); other names get SQLAlchemy's default dialect for that database.

    Args:
        dialect_name: ``"oracle"``, ``"postgresql"``, ``"mysql"``, ``"mariadb"`` or ``"sqlite"``.

    Raises:
        sqlalchemy.exc.NoSuchModuleError: the name is not a SQLAlchemy dialect.
    """
    from dbmemory.db.dialect import oracle19_dialect

    factories: dict[str, Callable[[], Dialect]] = {"oracle": oracle19_dialect}
    factory = factories.get(dialect_name)
    if factory is not None:
        return factory()
    return make_url(f"{dialect_name}://").get_dialect()()


def offline_sql(dialect_name: str, direction: str = "upgrade") -> str:
    """Render the migrations as a SQL script with alembic's offline mode (``as_sql=True``).

    Args:
        dialect_name: ``"oracle"``, ``"postgresql"`` or ``"mysql"`` (any SQLAlchemy dialect
            name works).
        direction: ``"upgrade"`` (base -> head: the install script) or ``"downgrade"``
            (head -> base: the uninstall script).

    Returns:
        The SQL text exactly as alembic renders it (statements end with ``;``; on Oracle each
        is followed by a ``/`` line). :mod:`dbmemory.sqlgen` post-processes it into the
        ``sql/`` scripts.

    Raises:
        ValueError: ``direction`` is neither ``"upgrade"`` nor ``"downgrade"``.
    """
    from alembic import command

    buffer = io.StringIO()
    config = alembic_config(offline_dialect=offline_dialect(dialect_name), output_buffer=buffer)
    if direction == "upgrade":
        command.upgrade(config, "base:head", sql=True)
    elif direction == "downgrade":
        command.downgrade(config, "head:base", sql=True)
    else:
        raise ValueError(f"direction {direction!r} must be 'upgrade' or 'downgrade'")
    return buffer.getvalue()
