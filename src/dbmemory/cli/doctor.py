"""``dbmemory doctor``: the operator's health check of a dbmemory database.

Connects once, read-only, and prints one line per check (:mod:`dbmemory.db.doctor`): database and
version, schema revision against the head, isolation level, the settings dbmemory relies on,
the expiry job and its last run where the database can tell, and the number of stores, files,
characters and audit events; then what to fix, one line each. Exit code 0 when healthy (no
problem; warnings are advice), 1 otherwise.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dbmemory.cli._common import JsonOption, UrlOption, print_json
from dbmemory.cli._database import open_engine
from dbmemory.db.doctor import diagnose

__all__ = ["register", "doctor"]

HELP_EPILOG = (
    "Exit codes: 0 healthy (warnings are advice); 1 a problem was found or the database "
    "cannot be reached; 2 invalid arguments."
)


def register(app: typer.Typer) -> None:
    """Add the ``doctor`` command to ``app``."""
    app.command("doctor", epilog=HELP_EPILOG)(doctor)


def doctor(
    url: UrlOption = None,
    as_json: JsonOption = False,
    expected_cluster_size: Annotated[
        int | None,
        typer.Option(
            "--expected-cluster-size",
            min=1,
            metavar="N",
            help="Galera: the number of nodes expected; fewer is a problem "
            "(default: DBMEMORY_GALERA_CLUSTER_SIZE).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check the database: version, schema revision, settings, expiry job, contents.

    Read-only. Prints one line per check, then each problem (exit code 1) and warning (advice)
    with what to fix.

    Example:

        dbmemory doctor --url postgresql://app@db/app
        dbmemory doctor --json | jq .healthy
        dbmemory doctor --url mysql://app@galera-1/app --expected-cluster-size 3
    """
    engine = open_engine(url)
    try:
        report = diagnose(engine, expected_cluster_size=expected_cluster_size)
    finally:
        engine.dispose()
    if as_json:
        print_json(report.to_dict())
    else:
        typer.echo(f"database: {report.database} at {report.url}")
        for check in report.checks:
            mark = "ok  " if check.problem is None and check.warning is None else (
                "WARN" if check.problem is None else "FAIL")
            typer.echo(f"{mark} {check.name}: {check.value}")
        for check in report.checks:
            if check.problem:
                typer.echo(f"fix: {check.problem}")
        for check in report.checks:
            if check.warning:
                typer.echo(f"advice: {check.warning}")
        typer.echo("healthy" if report.healthy else "NOT healthy")
    if not report.healthy:
        raise typer.Exit(1)
