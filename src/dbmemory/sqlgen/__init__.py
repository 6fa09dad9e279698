"""Render the reference SQL scripts in ``sql/<dialect>/`` from the alembic migrations.

For each of ``oracle``, ``postgresql`` and ``mysql`` (MySQL and MariaDB):

* ``install.sql``: alembic's offline upgrade (base -> head), tidied for the database's own
  client (SQL*Plus/SQLcl, psql, mysql);
* ``uninstall.sql``: alembic's offline downgrade (head -> base), which also removes the expiry
  job and procedure and the version table ``dbm_alembic_version``;
* ``expiry_job.sql``: the procedure ``dbm_expire_files`` implementing the same expiry rule as
  :func:`dbmemory.store.expiry.expire_files`, and a daily schedule for it (Oracle ``DBMS_SCHEDULER``,
  PostgreSQL ``pg_cron``, MySQL/MariaDB ``EVENT``);
* ``api.sql``: the memory API inside the database (:mod:`dbmemory.sqlgen.api`: Oracle package
  ``dbm_memory``, PostgreSQL schema ``dbm_memory``, MySQL/MariaDB ``dbm_memory_<call>``).

The expiry rule (identical to the Python API, :mod:`dbmemory.store.expiry`; rendered from its
constants): delete every row of ``dbm_files`` whose ``expiry_exempt`` is false, whose
``last_accessed_at`` (last write, UTC) is older than the cutoff and that has no read recorded in
``dbm_file_reads`` at or after it; the cutoff is *now (UTC) - days - the touch interval*
(24-hour days, no daylight-saving shifts; the interval is one hour). ``days`` must be at least
1/24 (one hour) and at most 100,000 (fractions allowed). Each batch locks the ``expiry`` row of
``dbm_job_locks`` (Oracle: the table) and deletes with the rule again; audit events come from
what was really deleted. Each deleted file gets one ``dbm_audit_events`` row:
``action_name='expire'``, ``actor_name='expiry-job'``, its store id and key, its path,
``chars_before`` = its size in characters, ``chars_after`` NULL, ``created_at`` = the run's
UTC time. The procedures delete in batches of 1,000 files and commit after each batch, so run
them on their own (autocommit), as a scheduler does. (The Python API signs its events with its
own actor name; everything else is identical, and a test compares the two.)

Output is deterministic (no dates, no host names), so ``python -m dbmemory.sqlgen --check``
and ``tests/sqlapi/test_sql_scripts.py`` can fail when the committed files drift.

Usage::

    python -m dbmemory.sqlgen            # (re)write sql/ in the source checkout
    python -m dbmemory.sqlgen --check    # exit 1 and show a diff when sql/ is stale
    python -m dbmemory.sqlgen --out DIR  # write somewhere else
"""


from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from dbmemory.sqlgen._common import (
    DIALECTS,
    EXPIRY_ACTOR,
    EXPIRY_BATCH_SIZE,
    EXPIRY_DEFAULT_DAYS,
    SCRIPT_NAMES,
    default_sql_dir,
)
from dbmemory.sqlgen.api import render_api
from dbmemory.sqlgen.expiry_job import expiry_procedure_sql, render_expiry_job
from dbmemory.sqlgen.install import render_install, render_uninstall
from dbmemory.sqlgen.unicode_tables import CONFUSABLES_VERSION, UNICODE_VERSION

__all__ = [
    "DIALECTS",
    "EXPIRY_ACTOR",
    "EXPIRY_BATCH_SIZE",
    "EXPIRY_DEFAULT_DAYS",
    "SCRIPT_NAMES",
    "check_scripts",
    "default_sql_dir",
    "expiry_procedure_sql",
    "main",
    "render_all",
    "render_api",
    "render_expiry_job",
    "render_install",
    "render_uninstall",
    "write_scripts",
]


def render_all() -> dict[str, str]:
    """Every script, in memory.

    Returns:
        Mapping of relative path (``"oracle/install.sql"``, ...) to its text.
    """
    scripts: dict[str, str] = {}
    for dialect in DIALECTS:
        scripts[f"{dialect}/install.sql"] = render_install(dialect)
        scripts[f"{dialect}/uninstall.sql"] = render_uninstall(dialect)
        scripts[f"{dialect}/expiry_job.sql"] = render_expiry_job(dialect)
        scripts[f"{dialect}/api.sql"] = render_api(dialect)
    return scripts


def write_scripts(out_dir: Path | str | None = None) -> list[Path]:
    """Write every script under ``out_dir`` (default :func:`default_sql_dir`).

    Returns:
        The paths written, in order.
    """
    root = Path(out_dir) if out_dir is not None else default_sql_dir()
    written: list[Path] = []
    for relative, text in render_all().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
        written.append(path)
    return written


def _unicode_versions(text: str) -> set[str]:
    """The Unicode versions a rendered script names (``(Unicode 14.0.0)`` in its comments)."""
    return set(re.findall(r"\(Unicode (\d+\.\d+\.\d+)", text))


def _data_versions(text: str) -> set[str]:
    """The look-alike data a rendered script names (``data: confusable-homoglyphs 3.3.1``)."""
    return set(re.findall(r"data: (confusable-homoglyphs [0-9][0-9.]*[0-9])", text))


def check_scripts(out_dir: Path | str | None = None) -> list[str]:
    """Compare the scripts on disk with freshly rendered ones.

    Returns:
        One unified diff per stale or missing file (empty list: all up to date).
    """
    root = Path(out_dir) if out_dir is not None else default_sql_dir()
    problems: list[str] = []
    for relative, expected in render_all().items():
        path = root / relative
        actual = path.read_text(encoding="utf-8") if path.is_file() else ""
        if actual != expected:
            rendered = _unicode_versions(actual) - {UNICODE_VERSION}
            hint = (
                f"sql/{relative} holds Unicode tables of version {', '.join(sorted(rendered))}; this "
                f"Python's unicodedata is {UNICODE_VERSION}: render and check the scripts with the "
                "Python version that wrote them (dbmemory.sqlgen.unicode_tables)\n"
            ) if rendered else ""
            data = _data_versions(actual) - {CONFUSABLES_VERSION}
            hint += (
                f"sql/{relative} holds look-alike tables of {', '.join(sorted(data))}; this Python has "
                f"{CONFUSABLES_VERSION}: render and check the scripts with the package version that "
                "wrote them (dbmemory.sqlgen.unicode_tables)\n"
            ) if data else ""
            diff = difflib.unified_diff(
                actual.splitlines(keepends=True),
                expected.splitlines(keepends=True),
                fromfile=f"sql/{relative} (on disk{'' if path.is_file() else ', missing'})",
                tofile=f"sql/{relative} (generated)",
            )
            problems.append(hint + "".join(diff))
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write the scripts, or ``--check`` them (exit 1 when stale)."""
    parser = argparse.ArgumentParser(
        prog="python -m dbmemory.sqlgen",
        description="Render sql/<dialect>/{install,uninstall,expiry_job,api}.sql from the migrations and the API templates.",
    )
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when stale")
    parser.add_argument("--out", type=Path, default=None, help="folder to write (default: sql/)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check_scripts(args.out)
        for problem in problems:
            sys.stdout.write(problem)
        if problems:
            sys.stderr.write(
                f"{len(problems)} SQL script(s) are stale: run `python -m dbmemory.sqlgen`\n"
            )
            return 1
        sys.stdout.write("sql/ scripts are up to date\n")
        return 0
    for path in write_scripts(args.out):
        sys.stdout.write(f"wrote {path}\n")
    return 0


