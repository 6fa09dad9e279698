"""What every ``dbmemory`` command shares: options, one-line errors, transactions, output.

Import cost matters here: ``dbmemory --help`` imports this module, so it imports only typer and
dbmemory's light modules (:mod:`dbmemory.errors`). SQLAlchemy, alembic, pydantic-settings and
rich come with the command modules, which :class:`LazyCommand` imports when their command runs;
the translation of a SQLAlchemy error (:mod:`dbmemory.db.dialect.errors`) is imported by name
only once SQLAlchemy raised one.

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
import functools
import importlib
import json
import logging
import re
import sys
import traceback
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core
import typer.main
from typer.core import TyperCommand, TyperGroup

from dbmemory.cli._help import reflow_help
from dbmemory.cli._usage import NEGATIVE_NUMBER, close_options, last_args, negative_example
from dbmemory.errors import DbMemoryError, InvalidArgumentError
from dbmemory.llm import default_call_is_litellm, missing_key_error

if TYPE_CHECKING:
    pass

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
    "print_json",
    "to_jsonable",
    "fail",
    "set_debug",
    "remember_secret",
    "LazyCommand",
    "remember_secret_in",
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


def remember_secret(url: Any) -> None:
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
    invalid options and arguments, ``aborted``, ``file_error`` (a file or folder could not be
    read or written: the message names the path and the reason), and ``unexpected_error``. The message is None
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
        option = getattr(exc, "option_name", None) or ""
        if type(exc).__name__ == "NoSuchOption" and NEGATIVE_NUMBER.match(option) and ctx is not None:
            # `settings set grace_days -1`: click reads -1 as an option
            return (
                int(getattr(exc, "exit_code", EXIT_USAGE)),
                "usage_error",
                f"{option} reads as an option: to pass a negative number, put -- before the "
                f"values (here: {negative_example(ctx, last_args)}){hint}",
            )
        message = exc.format_message().rstrip(".")
        if type(exc).__name__ == "NoSuchOption":
            known = [
                name
                for param in getattr(getattr(ctx, "command", None), "params", ())
                for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
                if name.startswith("-")
            ]
            close = close_options(option, known or getattr(exc, "possibilities", None) or ())
            message = f"No such option: {option}" + (f" (did you mean {' or '.join(close)}?)" if close else "")
        return int(getattr(exc, "exit_code", EXIT_FAILURE)), "usage_error", f"{message}{hint}"
    if isinstance(exc, typer.Abort):
        return EXIT_FAILURE, "aborted", "aborted"
    if isinstance(exc, DbMemoryError):
        return exit_code_for(exc), exc.code, exc.cli_message or exc.message
    if type(exc).__module__.startswith("sqlalchemy"):
        # SQLAlchemy is loaded (it raised this): its translation too, not on every start-up
        errors = importlib.import_module("dbmemory.db.dialect.errors")
        translated = errors.translate_db_error(exc, "running the command")
        return exit_code_for(translated), translated.code, translated.message
    if isinstance(exc, OSError):  # a file or folder the command reads or writes
        return EXIT_FAILURE, "file_error", file_error_message(exc)
    return EXIT_FAILURE, "unexpected_error", f"unexpected {type(exc).__name__}: {exc}"


def file_error_message(exc: OSError) -> str:
    """One line for a failed file operation: the path(s), the operating system's reason, and
    what to check; never the exception's class name."""
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    reason = (exc.strerror or str(exc)).rstrip(".").lower()
    where = " -> ".join(paths) if paths else "a file"
    return (
        f"cannot use {where}: {reason}; check that the folder exists, is a folder (not a "
        "file) and is writable by this user, or pick another path"
    )


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


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""Every integer the CLI takes is stored in (or compared with) a 64-bit column at most."""


def bound_integers(command: Any) -> None:
    """Range-check every integer option and argument of ``command`` and its subcommands
    before the command runs: no value may leave the 64-bit range a database column holds (nor
    go under a minimum the option sets, such as ``--store-id``'s 1), so ``--store-id
    99999999999999999999`` is refused with the option's name and range
    (:class:`~dbmemory.errors.InvalidArgumentError`, exit 2) before any database is opened,
    instead of the driver's ``OverflowError``."""
    callback = getattr(command, "callback", None)
    if callback is not None and not getattr(callback, "_dbmemory_bounded", False):
        params = list(getattr(command, "params", ()))

        @functools.wraps(callback)
        def checked(*args: Any, **kwargs: Any) -> Any:
            for param in params:
                _check_integer(param, kwargs.get(param.name))
            return callback(*args, **kwargs)

        checked._dbmemory_bounded = True  # type: ignore[attr-defined]
        command.callback = checked
    for sub in getattr(command, "commands", {}).values():
        bound_integers(sub)


def _check_integer(param: Any, value: Any) -> None:
    values = value if isinstance(value, (list, tuple)) else (value,)
    for item in values:
        if not isinstance(item, int) or isinstance(item, bool):
            continue
        low = getattr(param, "min", None)
        low = INT64_MIN if low is None else max(int(low), INT64_MIN)
        high = getattr(param, "max", None)
        high = INT64_MAX if high is None else min(int(high), INT64_MAX)
        if not low <= item <= high:
            name = (getattr(param, "opts", None) or [param.name])[0]
            if not str(name).startswith("-"):
                name = str(name).upper()
            raise InvalidArgumentError(
                f"{name} {item} is out of range: pass a whole number from {low} to {high}"
            )





def _option_value(args: list[str], name: str) -> str | None:
    """The value given to option ``name`` in ``args`` (``--name V`` or ``--name=V``; the last)."""
    value = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


def _refuse_missing_key(args: list[str]) -> None:
    """Raise :func:`dbmemory.llm.missing_key_error` for a ``--model`` whose provider's key is
    certainly missing, so the refusal costs no import of the agent or litellm (it answers in
    well under a second). Without ``--model``, or with ``--api-base``/``--api-key``, or for a name
    whose provider is not certain, the command's own check decides later."""
    if "--help" in args or "-h" in args:
        return
    model = _option_value(args, "--model")
    if model is None or _option_value(args, "--api-base") or _option_value(args, "--api-key"):
        return
    error = missing_key_error(model) if default_call_is_litellm() else None
    if error is not None:
        raise error


class LazyCommand(TyperCommand):
    """A top-level command whose module is imported only when it runs or shows its own help.

    ``dbmemory --help`` lists every command from :data:`dbmemory.cli.COMMANDS` (name, module,
    one-line help) without importing any command module, so start-up stays at typer's own cost;
    the first use of a command imports its module, calls its ``register(app)`` on a private
    :class:`typer.Typer`, and hands the click command typer built to click.
    """

    _loaded: dict[tuple[str, ...], dict[str, Any]] = {}

    def __init__(self, name: str, modules: tuple[str, ...], short_help: str) -> None:
        super().__init__(name, help=short_help, short_help=short_help)
        self.modules = modules

    def real(self) -> Any:
        """The command as its module defines it (imported on first use)."""
        commands = self._loaded.get(self.modules)
        if commands is None:
            app = typer.Typer(rich_markup_mode="rich")
            for module in self.modules:
                importlib.import_module(f"dbmemory.cli.{module}").register(app)
            group = typer.main.get_group(app)
            for command in group.commands.values():
                bound_integers(command)
                reflow_help(command)
            commands = self._loaded[self.modules] = dict(group.commands)
        assert self.name is not None
        return commands[self.name]

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        _refuse_missing_key(args)  # before the command's module (the agent, litellm) is imported
        return self.real().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        return self.real().invoke(ctx)

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = self.real().get_params(ctx)
        return params

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        items: list[Any] = self.real().shell_complete(ctx, incomplete)
        return items


class DbMemoryGroup(TyperGroup):
    """The root command group: commands load on first use (:class:`LazyCommand`), and every
    error ends as one ``Error: ...`` line and an exit code.

    Typer's standalone mode would print usage errors in a multi-line panel and unexpected
    exceptions as a traceback (which may show a URL with its password); this group runs the
    command in non-standalone mode and reports both itself.
    """

    lazy_commands: dict[str, tuple[tuple[str, ...], str]] = {}
    """Command name -> ``(modules under dbmemory.cli, one-line help)``, in help order (set by
    :mod:`dbmemory.cli`)."""

    def list_commands(self, ctx: Any) -> list[str]:
        """The lazy commands in help order, then any command added to the group itself."""
        return list(self.lazy_commands) + [
            name for name in super().list_commands(ctx) if name not in self.lazy_commands
        ]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command called ``cmd_name``: a :class:`LazyCommand` for the lazy ones."""
        lazy = self.lazy_commands.get(cmd_name)
        if lazy is not None:
            return LazyCommand(cmd_name, *lazy)
        return super().get_command(ctx, cmd_name)

    def main(
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
        last_args[:] = list(sys.argv[1:] if args is None else args)
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








def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``"1 session"``, ``"2 sessions"``, ``"0 files"``: a count with its noun agreeing.

    Args:
        count: the number.
        singular: the noun for one, e.g. ``"file"``.
        plural_form: the noun for other counts; default ``singular + "s"``.
    """
    return f"{count} {singular if count == 1 else (plural_form or singular + 's')}"


def remember_secret_in(url: str) -> None:
    """Remember the password written in the URL text ``url`` (before it is parsed)."""
    match = _URL_PASSWORD.search(url)
    if match:
        _secrets.add(match.group("secret"))


