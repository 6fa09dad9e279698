"""``dbmemory db``: install, inspect and remove dbmemory's schema (alembic migrations).

The migrations ship inside the package and keep their state in their own version table,
``dbm_alembic_version``, so they live beside the host application's migrations. Nothing
migrates on import: ``dbmemory db upgrade`` (or :func:`dbmemory.db.migrate.upgrade`) is the
explicit set-up step.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from dbmemory.cli._common import (
    EXIT_CODES_HELP,
    EXIT_FAILURE,
    JsonOption,
    UrlOption,
    engine_session,
    missing_sqlite_file,
    print_json,
)
from dbmemory.errors import InvalidArgumentError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["db_app", "register", "upgrade", "current", "downgrade", "install_api", "uninstall_api"]

db_app = typer.Typer(
    help=(
        "Install, inspect and remove dbmemory's tables (alembic migrations with their own "
        "version table, dbm_alembic_version). " + EXIT_CODES_HELP
    ),
    epilog="Example:\n\n    dbmemory db upgrade\n\n    dbmemory db current",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``db`` command group to ``app``."""
    app.add_typer(db_app, name="db", short_help="Install, inspect and remove dbmemory's tables.")


@contextmanager
def _migrating(url: str | None, action: str, *, read_only: bool = False) -> Iterator[Engine]:
    """Yield the engine for ``url``; translate alembic and database errors; dispose at the end."""
    with engine_session(url, action, schema_hint=False, read_only=read_only) as engine:
        try:
            yield engine
        except Exception as exc:
            if type(exc).__name__ == "CommandError" and type(exc).__module__.startswith("alembic"):
                raise InvalidArgumentError(
                    f"{action} failed: {exc}: use 'head', 'base' or a revision id shown by "
                    "'dbmemory db current'"
                ) from exc
            raise


def _label(revision: str | None) -> str:
    return revision if revision is not None else "none (not installed)"


@db_app.command("upgrade")
def upgrade(
    revision: Annotated[
        str, typer.Argument(help="Target revision: head (the newest) or a revision id.")
    ] = "head",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create dbmemory's tables, or upgrade them to the newest revision.

    Safe to run again: an up-to-date database is left as it is. Runs in a transaction of its
    own and commits it (MySQL/MariaDB and Oracle commit each DDL statement anyway).

    Example:

        dbmemory db upgrade
        dbmemory db upgrade --url postgresql://app@db/app
    """
    from dbmemory.db import migrate
    from dbmemory.db.engine import redact_url

    with _migrating(url, "upgrading the schema") as engine:
        before = migrate.current(engine)
        migrate.upgrade(engine, revision)
        after = migrate.current(engine)
        head = migrate.head()
    where = redact_url(engine.url)
    if as_json:
        print_json({"url": where, "from": before, "to": after, "head": head})
    elif before == after:
        typer.echo(f"{where} is already at revision {_label(after)}; nothing to do")
    else:
        typer.echo(f"Upgraded {where} from revision {_label(before)} to {_label(after)}")


@db_app.command("current")
def current(
    check: Annotated[
        bool,
        typer.Option("--check", help="Exit with code 1 unless the database is at the head."),
    ] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the revision the database is at and the newest revision this dbmemory ships.

    Reads only. With --check the exit code says whether an upgrade is due (0 up to date,
    1 not), for deployment scripts.

    Example:

        dbmemory db current
        dbmemory db current --check --json
    """
    from dbmemory.db import migrate
    from dbmemory.db.engine import redact_url

    with _migrating(url, "reading the schema revision") as engine:
        missing = missing_sqlite_file(engine)  # reads only: never creates the file
        at = None if missing is not None else migrate.current(engine)
        head = migrate.head()
    where = redact_url(engine.url)
    up_to_date = at == head
    if as_json:
        print_json({"url": where, "current": at, "head": head, "up_to_date": up_to_date})
    elif missing is not None:
        typer.echo(f"{where}: no such SQLite file, not installed (head {head}); 'dbmemory db upgrade' creates it")
    elif at is None:
        typer.echo(f"{where}: not installed (head {head}); run 'dbmemory db upgrade'")
    elif up_to_date:
        typer.echo(f"{where}: {at} (head, up to date)")
    else:
        typer.echo(f"{where}: {at} (head is {head}; run 'dbmemory db upgrade')")
    if check and not up_to_date:
        raise typer.Exit(EXIT_FAILURE)


@db_app.command("downgrade")
def downgrade(
    revision: Annotated[
        str,
        typer.Argument(help="Target revision: base (remove everything) or a revision id."),
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Downgrade dbmemory's schema; 'base' drops every dbmemory table WITH ITS DATA.

    Asks for confirmation unless --yes is given. The host application's tables are never
    touched. Runs in a transaction of its own and commits it.

    Example:

        dbmemory db downgrade base --yes
    """
    from dbmemory.db import migrate
    from dbmemory.db.engine import redact_url

    with _migrating(url, "downgrading the schema") as engine:
        where = redact_url(engine.url)
        if not yes:
            typer.confirm(
                f"Downgrade {where} to {revision}? Dropped tables lose their data", abort=True
            )
        before = migrate.current(engine)
        migrate.downgrade(engine, revision)
        after = migrate.current(engine)
    if as_json:
        print_json({"url": where, "from": before, "to": after})
    else:
        typer.echo(f"Downgraded {where} from revision {_label(before)} to {_label(after)}")


def _api_dialect(engine: Engine) -> str:
    name = engine.dialect.name
    folder = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql", "oracle": "oracle"}.get(name)
    if folder is None:
        raise InvalidArgumentError(
            f"the in-database API exists for Oracle, PostgreSQL and MySQL/MariaDB, not {name}: "
            "on SQLite use the Python API"
        )
    return folder


def _run_raw(engine: Engine, statements: list[tuple[str, dict[str, str]]]) -> None:
    """Run statements on the raw driver (no SQLAlchemy parsing of ':' or '%' in bodies)."""
    with engine.connect() as conn:
        dbapi = conn.connection.dbapi_connection
        cursor = dbapi.cursor()
        try:
            for statement, params in statements:
                if params:
                    cursor.execute(statement, params)
                else:
                    cursor.execute(statement)
        finally:
            cursor.close()
        dbapi.commit()


@db_app.command("install-api")
def install_api(
    role: Annotated[
        str | None,
        typer.Option(
            "--role",
            help="Also create this role (when missing) and let it execute the API, with no "
            "right on the tables.",
        ),
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Install the memory API inside the database (sql/<dialect>/api.sql).

    Oracle: package dbm_memory; PostgreSQL: schema dbm_memory; MySQL/MariaDB: routines
    dbm_memory_<call>. Run 'dbmemory db upgrade' first. Safe to run again (it replaces the
    API). The calls join their caller's transaction and never commit.

    Example:

        dbmemory db install-api --url postgresql://app@db/app --role dbm_memory_user
    """
    from dbmemory.db.engine import redact_url
    from dbmemory.sqlgen.api import api_grant_statements, api_statements, check_role_name

    if role is not None:
        check_role_name(role)
    with engine_session(url, "installing the memory API") as engine:
        dialect = _api_dialect(engine)
        _run_raw(engine, [(s, {}) for s in api_statements(dialect)])
        if role is not None:
            _run_raw(engine, api_grant_statements(dialect, role))
    where = redact_url(engine.url)
    if as_json:
        print_json({"url": where, "dialect": dialect, "role": role})
    else:
        granted = f"; role {role} may execute it" if role else ""
        typer.echo(f"Installed the memory API on {where} ({dialect}){granted}")


@db_app.command("uninstall-api")
def uninstall_api(url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Remove the memory API from the database (the tables and any role stay).

    Example:

        dbmemory db uninstall-api --url mysql://app@db/app
    """
    from dbmemory.db.engine import redact_url
    from dbmemory.sqlgen.api import api_uninstall_statements

    with engine_session(url, "removing the memory API") as engine:
        dialect = _api_dialect(engine)
        _run_raw(engine, [(s, {}) for s in api_uninstall_statements(dialect)])
    where = redact_url(engine.url)
    if as_json:
        print_json({"url": where, "dialect": dialect})
    else:
        typer.echo(f"Removed the memory API from {where} ({dialect})")
