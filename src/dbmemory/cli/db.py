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

from dbmemory.cli._common import EXIT_CODES_HELP, EXIT_FAILURE, JsonOption, UrlOption, print_json
from dbmemory.cli._database import engine_session, missing_sqlite_file
from dbmemory.db import migrate
from dbmemory.db.dialect.base import backend, script_family
from dbmemory.db.engine import redact_url
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.episodes import purge_search_index_committing
from dbmemory.sqlgen.api import check_role_name
from dbmemory.sqlgen.api_common import DERIVED
from dbmemory.sqlgen.deploy import install_api as install_api_on
from dbmemory.sqlgen.deploy import uninstall_api as uninstall_api_on

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = [
    "db_app", "register", "upgrade", "current", "downgrade", "install_api", "uninstall_api", "optimize_search",
]

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
    folder = script_family(engine)
    if folder is None:
        raise InvalidArgumentError(
            f"the in-database API exists for Oracle, PostgreSQL and MySQL/MariaDB, not "
            f"{backend(engine)}: "
            "on SQLite use the Python API"
        )
    return folder


@db_app.command("install-api")
def install_api(
    roles: Annotated[
        bool,
        typer.Option(
            "--roles",
            help="Also create the user role <base>_user (file calls) and the admin role "
            "<base>_admin (enable/disable, caps, drop, expiry), named after the database "
            "(Oracle: the schema), when missing; neither gets any right on the tables.",
        ),
    ] = False,
    role: Annotated[
        str | None,
        typer.Option("--role", help="The user role's name (created when missing)."),
    ] = None,
    admin_role: Annotated[
        str | None,
        typer.Option("--admin-role", help="The admin role's name (created when missing)."),
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Install the memory API inside the database (sql/<dialect>/api.sql).

    Oracle: package dbm_memory; PostgreSQL: schema dbm_memory owned by a NOLOGIN role with DML
    only; MySQL/MariaDB: routines dbm_memory_<call> run by a locked DML-only account. Run
    'dbmemory db upgrade' first. Safe to run again (it replaces the API). The calls join their
    caller's transaction and never commit. No role is created without --roles, --role or
    --admin-role.

    Example:

        dbmemory db install-api --url postgresql://app@db/app --roles
    """
    for name in (role, admin_role):
        if name is not None:
            check_role_name(name)
    if roles:
        role = role or DERIVED
        admin_role = admin_role or DERIVED
    with engine_session(url, "installing the memory API") as engine:
        dialect = _api_dialect(engine)
        report = install_api_on(engine, dialect, role, admin_role)
    where = redact_url(engine.url)
    if as_json:
        print_json({"url": where, "dialect": dialect, "role": report.role,
                    "admin_role": report.admin_role, "owner": report.owner, "notes": report.notes})
    else:
        granted = f"; role {report.role} may execute the file calls" if report.role else ""
        if report.admin_role:
            granted += f"; role {report.admin_role} the configuration calls"
        owner = f"; it runs as {report.owner}" if report.owner else ""
        typer.echo(f"Installed the memory API on {where} ({dialect}){owner}{granted}")
        for note in report.notes:
            typer.echo(f"Note: {note}")


@db_app.command("uninstall-api")
def uninstall_api(
    role: Annotated[
        str | None,
        typer.Option("--role", help="Also drop this user role (the name given at install)."),
    ] = None,
    admin_role: Annotated[
        str | None,
        typer.Option("--admin-role", help="Also drop this admin role (the name given at install)."),
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove the memory API from the database with everything its install created: the owner
    role or definer account, the roles named after the database (--roles), and the roles named
    by --role / --admin-role. The tables stay. A role that can log in is never dropped.

    Example:

        dbmemory db uninstall-api --url mysql://app@db/app
    """
    named = tuple(n for n in (role, admin_role) if n is not None)
    for name in named:
        check_role_name(name)
    with engine_session(url, "removing the memory API") as engine:
        dialect = _api_dialect(engine)
        uninstall_api_on(engine, dialect, named)
    where = redact_url(engine.url)
    if as_json:
        print_json({"url": where, "dialect": dialect})
    else:
        typer.echo(f"Removed the memory API from {where} ({dialect})")


@db_app.command("optimize-search")
def optimize_search(url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Remove the words of deleted episodes from the full-text index now (commits).

    MySQL/MariaDB: runs 'OPTIMIZE TABLE dbm_episodes' (InnoDB keeps a deleted row's words in its
    FULLTEXT index until the table is optimised; the rebuild makes new episode writes wait
    while it runs). SQLite: the FTS5 optimize command. PostgreSQL and Oracle keep no words of
    deleted rows: nothing runs. 'users forget' runs it itself after its commit.

    Example:

        dbmemory db optimize-search
    """
    with engine_session(url, "optimising the episodes' full-text index") as engine:
        ran = purge_search_index_committing(engine)
    if as_json:
        print_json({"statement": ran})
    else:
        typer.echo(f"Ran {ran}" if ran else "Nothing to do: this database keeps no words of deleted episodes")
