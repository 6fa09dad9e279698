"""Alembic environment for dbmemory's own migrations (run through :mod:`dbmemory.db.migrate`).

Configured programmatically; no ``alembic.ini`` is needed. :mod:`dbmemory.db.migrate` passes,
in ``config.attributes``:

* ``connection``: a SQLAlchemy Connection to migrate (online mode); or
* ``offline_dialect`` (a Dialect instance) and ``output_buffer`` (a text stream) for offline
  mode (``as_sql=True``), which renders the SQL instead of running it.

For development, ``alembic -x url=<database URL> ...`` (or ``sqlalchemy.url`` in a private ini
file) also works, e.g. for ``alembic revision --autogenerate``.

The version table is ``dbm_alembic_version``, so dbmemory can live beside the host
application's own ``alembic_version``.
"""

from __future__ import annotations

from typing import Any

from alembic import context

from dbmemory.db.engine import create_engine
from dbmemory.db.schema import FILE_LIST_VIEW, VERSION_TABLE, metadata

config = context.config


def _include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Autogenerate filter: only dbmemory's own tables (prefix ``dbm_``), never the view or
    the version table, never the host application's tables."""
    if type_ == "table":
        return (
            name is not None and name.startswith("dbm_") and name not in (VERSION_TABLE, FILE_LIST_VIEW)
        )
    return True


_COMMON: dict[str, Any] = {
    "target_metadata": metadata,
    "version_table": VERSION_TABLE,
    "include_object": _include_object,
    "compare_type": True,
}


def run_migrations_offline() -> None:
    """Render the migrations as SQL for ``offline_dialect`` (no database needed)."""
    dialect = config.attributes["offline_dialect"]
    context.configure(
        dialect_name=dialect.name,
        literal_binds=True,
        output_buffer=config.attributes.get("output_buffer"),
        **_COMMON,
    )
    # Compile with the exact dialect instance given (e.g. Oracle set up as 19c: no native
    # BOOLEAN), not a default-constructed one.
    migration_context = context.get_context()
    migration_context.dialect = dialect
    migration_context.impl.dialect = dialect
    with context.begin_transaction():
        context.run_migrations()


def _run_on(connection: Any) -> None:
    context.configure(connection=connection, **_COMMON)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on ``connection`` (inside the caller's transaction when one is open)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_on(connection)
        return
    # Development use through the alembic command line.
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            _run_on(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
