"""What every ``dbmemory`` command shares: options, one-line errors, transactions, output.

Import cost matters here: ``dbmemory --help`` imports this module, so it imports only typer and
dbmemory's light modules (:mod:`dbmemory.errors`). SQLAlchemy, alembic, pydantic-settings and
rich are imported inside the functions that need them.

Exit codes (also in ``dbmemory --help``):

* ``0``: success.
* ``1``: the operation failed (not found, cap exceeded, conflict, database unreachable, a MEMORY
  tool call that answered with an error).
* ``2``: invalid arguments (usage errors, invalid paths, scopes, store keys or URLs).

Errors print exactly one line on stderr, ``Error: <message>``: never a stack trace, never the
password of a database URL. With ``--json``, the error is also printed on stdout as
``{"error": {"code": "<stable code>", "message": "...", "exit_code": N}}`` (see
:func:`describe_error` for the codes). The global ``--debug`` option (``dbmemory --debug <command>``) adds
the full traceback with the driver's own error after that line, for operators.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from dbmemory.errors import DbMemoryError, InvalidArgumentError

if TYPE_CHECKING:
    from rich.console import Console
    from sqlalchemy.engine import Connection, Engine

__all__ = [
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "EXIT_CODES_HELP",
    "TRANSACTION_HELP",
    "UrlOption",
    "JsonOption",
    "StoreKeyOption",
    "StoreIdOption",
    "DbMemoryGroup",
    "exit_code_for",
    "describe_error",
    "plural",
    "error_line",
    "open_engine",
    "missing_sqlite_file",
    "engine_session",
    "transaction",
    "print_json",
    "console",
    "print_table",
    "to_jsonable",
    "fail",
    "set_debug",
]

EXIT_OK = 0
"""The command did what it was asked."""

EXIT_FAILURE = 1
"""The operation failed: not found, cap exceeded, conflict, storage error, tool error text."""

EXIT_USAGE = 2
"""Invalid arguments: a usage error or an invalid path, scope, store key or URL."""

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 the operation failed (not found, cap exceeded, conflict, "
    "database unreachable, a MEMORY tool error); 2 invalid arguments."
)

TRANSACTION_HELP = "Runs in a transaction of its own and commits it."

URL_HELP = (
    "SQLAlchemy database URL, e.g. postgresql://app@db/app. Default: DBMEMORY_URL, else a "
    "SQLite file in the user data directory."
)

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="DBMEMORY_URL",
        show_envvar=True,
        help=URL_HELP,
        metavar="URL",
        show_default=False,
    ),
]
"""``--url URL`` (env ``DBMEMORY_URL``); None means the embedded SQLite default."""

JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print plain JSON instead of text for humans."),
]
"""``--json``: machine-readable output."""

StoreKeyOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help=(
            "Store key, exactly (no spaces), e.g. agent:SUPPORT, user:SUPPORT:u42, "
            "shared:POLICIES, global, context:DOCS:doc:7, context:store:CODE:doc:7."
        ),
        metavar="KEY",
        show_default=False,
    ),
]
"""``--store KEY``: a store addressed by its key."""

StoreIdOption = Annotated[
    int | None,
    typer.Option(
        "--store-id",
        help="Store id (a number), instead of --store.",
        metavar="N",
        min=1,
        show_default=False,
    ),
]
"""``--store-id N``: a store addressed by its id."""


# -- errors -----------------------------------------------------------------------------------

_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)(?P<secret>[^@\s/]+)@")
_secrets: set[str] = set()


def _remember_secret(url: Any) -> None:
    """Remember the password of ``url`` so no error line can ever print it."""
    password = getattr(url, "password", None)
    if password:
        _secrets.add(str(password))


def _scrub(text: str) -> str:
    """Remove URL passwords (known ones and any ``scheme://user:secret@``) and line breaks."""
    text = _URL_PASSWORD.sub(r"\g<head>***@", text)
    for secret in _secrets:
        if len(secret) >= 3:
            text = text.replace(secret, "***")
    return " ".join(text.split())


def exit_code_for(exc: BaseException) -> int:
    """The exit code for an exception: 2 for invalid arguments, 1 for anything else."""
    return EXIT_USAGE if isinstance(exc, InvalidArgumentError) else EXIT_FAILURE


def error_line(message: str) -> None:
    """Print ``Error: <message>`` as one line on stderr (passwords scrubbed)."""
    typer.secho(f"Error: {_scrub(message)}", err=True, fg="red")


def fail(message: str, *, code: int = EXIT_FAILURE) -> typer.Exit:
    """Print one error line and return the :class:`typer.Exit` to raise.

    Example:
        ``raise fail("pass --store or --store-id", code=EXIT_USAGE)``
    """
    error_line(message)
    return typer.Exit(code)


_debug = False


def set_debug(enabled: bool) -> None:
    """Turn the global ``--debug`` mode on or off: after the one-line error, the full
    traceback with the driver's own error is printed on stderr (passwords still scrubbed),
    and dbmemory's debug log lines are shown."""
    global _debug
    if bool(enabled) == _debug:
        return
    _debug = bool(enabled)
    logger = logging.getLogger("dbmemory")
    logger.setLevel(logging.DEBUG if _debug else logging.NOTSET)
    for handler in logger.handlers:
        if isinstance(handler, _OneLineLogHandler):
            handler.setLevel(logging.DEBUG if _debug else logging.WARNING)


def _scrub_lines(text: str) -> str:
    """:func:`_scrub` line by line (keeps the traceback's shape)."""
    out = []
    for line in text.splitlines():
        line = _URL_PASSWORD.sub(r"\g<head>***@", line)
        for secret in _secrets:
            if len(secret) >= 3:
                line = line.replace(secret, "***")
        out.append(line)
    return "\n".join(out)


def _print_debug(exc: BaseException) -> None:
    """In ``--debug`` mode, print ``exc``'s traceback (causes included) on stderr."""
    if not _debug:
        return
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    typer.echo("-- debug: the error in full (never show this to end users) --", err=True)
    typer.echo(_scrub_lines(text), err=True)


def _handle(exc: Exception, *, as_json: bool = False) -> int:
    """Report ``exc`` (one line on stderr; with ``--json`` also a JSON object on stdout, and
    the traceback with ``--debug``); return the exit code."""
    code, error_code, message = describe_error(exc)
    if message is not None:
        error_line(message)
        if as_json:
            print_json({"error": {"code": error_code, "message": _scrub(message), "exit_code": code}})
    if not isinstance(exc, (typer.TyperException, typer.Abort)):
        _print_debug(exc)
    return code


def describe_error(exc: Exception) -> tuple[int, str, str | None]:
    """The exit code, the stable error code and the one-line message for ``exc``.

    The stable codes are :attr:`dbmemory.errors.DbMemoryError.code` (``not_found``,
    ``invalid_argument``, ``cap_exceeded``, ``model_missing_key``, ...), ``usage_error`` for
    invalid options and arguments, ``aborted``, and ``unexpected_error``. The message is None
    when nothing is to be printed (help already shown). Command-line wording
    (:attr:`~dbmemory.errors.DbMemoryError.cli_message`) is preferred.
    """
    if isinstance(exc, typer.TyperException):  # click's exceptions in typer's vendored click
        if type(exc).__name__ == "NoArgsIsHelpError":  # help was already printed
            text = exc.format_message()
            if text.strip():
                typer.echo(text, err=True)
            return int(getattr(exc, "exit_code", EXIT_USAGE)), "usage_error", None
        ctx = getattr(exc, "ctx", None)
        hint = f"; see '{ctx.command_path} --help'" if ctx is not None else ""
        if type(exc).__name__ == "NoSuchOption" and ctx is not None and ctx.parent is None:
            # `dbmemory --url U files ls`: only --debug and --version come before the command
            hint = (
                f": only --debug and --version go before the command; put "
                f"{getattr(exc, 'option_name', 'the option')} after it (for example "
                f"'{ctx.command_path} files ls {getattr(exc, 'option_name', '--url')} ...')"
            )
        return int(getattr(exc, "exit_code", EXIT_FAILURE)), "usage_error", f"{exc.format_message().rstrip('.')}{hint}"
    if isinstance(exc, typer.Abort):
        return EXIT_FAILURE, "aborted", "aborted"
    if isinstance(exc, DbMemoryError):
        return exit_code_for(exc), exc.code, exc.cli_message or exc.message
    if type(exc).__module__.startswith("sqlalchemy"):
        from dbmemory.db.dialect import translate_db_error

        translated = translate_db_error(exc, "running the command")
        return exit_code_for(translated), translated.code, translated.message
    return EXIT_FAILURE, "unexpected_error", f"unexpected {type(exc).__name__}: {exc}"


def _wants_json(args: Sequence[str] | None) -> bool:
    """Whether the command line asks for ``--json`` (before a ``--`` that ends the options)."""
    argv = list(sys.argv[1:] if args is None else args)
    if "--" in argv:
        argv = argv[: argv.index("--")]
    return "--json" in argv


class _OneLineLogHandler(logging.Handler):
    """Show dbmemory's warnings and errors as one scrubbed line each, without tracebacks."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            typer.echo(f"{record.levelname.lower()}: {_scrub(record.getMessage())}", err=True)
            if _debug and record.exc_info:
                import traceback

                text = "".join(traceback.format_exception(*record.exc_info))
                typer.echo(_scrub_lines(text), err=True)
        except Exception:  # pragma: no cover - logging must never break the command
            pass


def _install_log_handler() -> None:
    """Attach :class:`_OneLineLogHandler` to the ``dbmemory`` logger once (WARNING and up).

    Without a handler, Python's last-resort handler would print a logged traceback.
    """
    logger = logging.getLogger("dbmemory")
    if not any(isinstance(h, _OneLineLogHandler) for h in logger.handlers):
        handler = _OneLineLogHandler(logging.WARNING)
        logger.addHandler(handler)


class DbMemoryGroup(TyperGroup):
    """The root command group: every error ends as one ``Error: ...`` line and an exit code.

    Typer's standalone mode would print usage errors in a multi-line panel and unexpected
    exceptions as a traceback (which may show a URL with its password); this group runs the
    command in non-standalone mode and reports both itself.
    """

    command_order: list[str] = []
    """Command names in help order (filled by :func:`dbmemory.cli.register_commands`);
    commands not listed follow in typer's order."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Subcommand names in :attr:`command_order` (typer lists single commands first)."""
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(self.command_order)}
        return sorted(names, key=lambda name: rank.get(name, len(rank)))

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the CLI; in standalone mode (the default) always end with ``sys.exit(code)``."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        _install_log_handler()
        try:
            result = super().main(
                args, prog_name, complete_var, False, windows_expand_args, **extra
            )
        except Exception as exc:  # the one place that turns errors into exit codes
            code = _handle(exc, as_json=_wants_json(args))
        else:
            code = result if isinstance(result, int) else EXIT_OK
        sys.exit(code)


# -- database ---------------------------------------------------------------------------------


def open_engine(url: str | None) -> Engine:
    """Create dbmemory's configured engine for ``url`` (None: ``DBMEMORY_URL`` or the default).

    Raises:
        InvalidArgumentError: the URL cannot be parsed or names an unknown database.
        MissingDependencyError: the URL's driver is not installed.
    """
    from dbmemory.db.engine import create_engine

    if url is not None:
        _secrets_from_text(url)
    engine = create_engine(url)
    _remember_secret(engine.url)

    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _connected(_dbapi_conn: Any, _record: Any) -> None:
        engine._dbmemory_cli_connected = True  # type: ignore[attr-defined]

    return engine


def _secrets_from_text(url: str) -> None:
    match = _URL_PASSWORD.search(url)
    if match:
        _secrets.add(match.group("secret"))


def _close_engine(engine: Engine) -> None:
    """Apply queued best-effort touches (non-SQLite reads), then dispose of the engine."""
    touch = sys.modules.get("dbmemory.touch")
    if touch is not None:
        try:
            touch.flush_touches()
        except Exception:  # pragma: no cover - touches are best effort
            pass
    engine.dispose()


def _schema_missing(engine: Engine) -> bool:
    """Whether the database has no dbmemory schema (best effort, False when unsure).

    Asked only when the engine did connect once (an unreachable server is not asked twice, so
    a connect timeout is not waited for again).
    """
    if not getattr(engine, "_dbmemory_cli_connected", False):
        return False
    try:
        from dbmemory.db.migrate import current

        return current(engine) is None
    except Exception:
        return False


def missing_sqlite_file(engine: Engine) -> str | None:
    """The path of ``engine``'s SQLite database file when that file does not exist, else None
    (also None for other databases and in-memory SQLite)."""
    import os

    url = engine.url
    if engine.dialect.name != "sqlite":
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
    from dbmemory.errors import NotFoundError

    import os

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
    from sqlalchemy.exc import SQLAlchemyError

    from dbmemory.db.dialect import translate_db_error
    from dbmemory.errors import StorageError

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
        translated = translate_db_error(exc, action)
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


# -- output -----------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    """Convert dataclasses, pydantic models, datetimes, enums and tuples to JSON values."""
    if is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(asdict(value))
    if hasattr(value, "model_dump"):
        return to_jsonable(value.model_dump())
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, Enum):
        return to_jsonable(value.value)
    return value


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout (UTF-8, no ASCII escaping)."""
    typer.echo(json.dumps(to_jsonable(data), indent=2, ensure_ascii=False, default=str))


def console() -> Console:
    """A rich console on stdout that never interprets markup or highlights user data.

    On a terminal it uses the terminal's width; piped output gets 160 columns, so tables are
    not folded to 80.
    """
    from rich.console import Console

    out = Console(markup=False, highlight=False)
    if not out.is_terminal:
        out = Console(markup=False, highlight=False, width=160)
    return out


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    right: Sequence[str] = (),
) -> None:
    """Print a rich table for humans.

    Args:
        columns: column headers.
        rows: cell values (datetimes as ``YYYY-MM-DD HH:MM:SS`` UTC; None shows as ``-``).
        title: an optional caption above the table.
        right: headers of right-aligned (numeric) columns.
    """
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*("-" if cell is None else _cell(cell) for cell in row))
    console().print(table)


def _cell(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``"1 session"``, ``"2 sessions"``, ``"0 files"``: a count with its noun agreeing.

    Args:
        count: the number.
        singular: the noun for one, e.g. ``"file"``.
        plural_form: the noun for other counts; default ``singular + "s"``.
    """
    return f"{count} {singular if count == 1 else (plural_form or singular + 's')}"
