"""The exceptions of dbmemory: one root, a few subclasses, each with a stable code.

Admin and configuration functions raise these. The MEMORY tool never raises: it turns them into
text that starts with :data:`~dbmemory.tool.messages.ERROR_MARKER` (see :mod:`dbmemory.tool`).

No message built here contains SQL, a DSN, a table name or a driver error code: driver errors
are translated once, in :func:`dbmemory.db.dialect.errors.translate_db_error`, with
``raise ... from``. This module is the bottom layer with :mod:`dbmemory.settings`: it imports no
other module of dbmemory.
"""

from __future__ import annotations

import importlib

__all__ = [
    "extra_hint",
    "require_extra",
    "PROFILE_MODULES",
    "DbMemoryError",
    "NotFoundError",
    "InvalidArgumentError",
    "InvalidPathError",
    "InvalidScopeError",
    "CapExceededError",
    "ConflictError",
    "AlreadyExistsError",
    "MissingDependencyError",
    "StorageError",
    "ModelError",
]


class DbMemoryError(Exception):
    """Root of every dbmemory error.

    Attributes:
        code: a stable, machine-matchable code such as ``"not_found"``; it never changes
            between releases, unlike the message.
    """

    code = "dbmemory_error"

    cli_message: str | None = None
    """The same error worded for the command line (remedies name CLI options such as
    ``--model scripted`` instead of Python arguments), or None when :attr:`message` fits both."""

    def __init__(self, message: str, *, code: str | None = None, cli_message: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if cli_message is not None:
            self.cli_message = cli_message

    @property
    def message(self) -> str:
        """The human-readable text (value, rule, remedy)."""
        return str(self.args[0]) if self.args else ""


class NotFoundError(DbMemoryError, LookupError):
    """A store, file or agent configuration does not exist (code ``not_found``)."""

    code = "not_found"


class InvalidArgumentError(DbMemoryError, ValueError):
    """An argument breaks a documented rule; nothing was written (code ``invalid_argument``)."""

    code = "invalid_argument"


class InvalidPathError(InvalidArgumentError):
    """A memory path is not a valid path under ``/memories`` (code ``invalid_path``)."""

    code = "invalid_path"


class InvalidScopeError(InvalidArgumentError):
    """A scope, store-key component, run context or agent configuration is invalid
    (code ``invalid_scope``). Raised before any store is opened or created."""

    code = "invalid_scope"


class CapExceededError(DbMemoryError):
    """A write would exceed a cap (characters per file, files per store, characters per store);
    the write did not happen (code ``cap_exceeded``).

    Attributes:
        cap: ``"max_file_chars"``, ``"max_files"`` or ``"max_store_chars"``.
        limit: the cap's value.
        actual: what the store or file would hold after the write.
    """

    code = "cap_exceeded"

    def __init__(self, message: str, *, cap: str, limit: int, actual: int) -> None:
        super().__init__(message)
        self.cap = cap
        self.limit = limit
        self.actual = actual


class ConflictError(DbMemoryError):
    """A concurrent change won (a compare-and-set lost, a lock wait timed out, a deadlock was
    broken); nothing was written and the operation can be retried (code ``conflict``).

    Attributes:
        cause: what happened, for texts that must say it truly: ``"changed"`` (the default: a
            compare-and-set lost, another writer changed or created the same thing first),
            ``"locked"`` (another writer held a lock this write needed: a lock wait timed out,
            the database broke a deadlock, a Galera certification failure) or ``"failed"``
            (the database undid the write for another reason, named in the message: a lost
            connection, a full disk).
    """

    code = "conflict"
    cause = "changed"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        cause: str | None = None,
        cli_message: str | None = None,
    ) -> None:
        super().__init__(message, code=code, cli_message=cli_message)
        if cause is not None:
            self.cause = cause


class AlreadyExistsError(InvalidArgumentError):
    """The target path already exists (code ``already_exists``): ``create`` on an existing file,
    ``rename`` onto an existing file or directory. Nothing was written."""

    code = "already_exists"


class MissingDependencyError(DbMemoryError, ImportError):
    """An optional dependency is not installed (code ``missing_dependency``); the message
    names the extra to install and the pip command (:func:`extra_hint`)."""

    code = "missing_dependency"


def extra_hint(extra: str) -> str:
    """The pip command that installs dbmemory's optional extra ``extra``, e.g. for ``"llm"``:
    ``pip install -e '.[llm]' in a clone of dbmemory (or pip install 'WHEEL[llm]')``. dbmemory is
    not published on PyPI yet, so ``pip install 'dbmemory[llm]'`` would not find it."""
    return f"pip install -e '.[{extra}]' in a clone of dbmemory (or pip install 'WHEEL[{extra}]')"


PROFILE_MODULES = ("yaml", "stdnum", "prometheus_client")
"""The modules of the ``profile`` extra (pyyaml, python-stdnum, prometheus-client)."""


def require_extra(extra: str, modules: tuple[str, ...]) -> None:
    """Check that the optional extra ``extra`` is installed by importing its ``modules``.

    Raises:
        MissingDependencyError: one of them cannot be imported; the message names it and gives
            the pip command (:func:`extra_hint`).
    """
    for name in modules:
        try:
            importlib.import_module(name)  # optional dependencies, imported to check them
        except ImportError as exc:
            raise MissingDependencyError(
                f"this needs {exc.name or name} (the {extra} extra): " + extra_hint(extra)
            ) from exc


class StorageError(DbMemoryError):
    """The database could not be reached or failed (code ``storage_error``). The message never
    contains SQL, a DSN or a driver code; the driver exception is chained as ``__cause__``."""

    code = "storage_error"


class ModelError(DbMemoryError):
    """A language model cannot be used, found before the first call (preflight) or mapped from
    the provider's error; the message is one line with the remedy (code ``model_error`` or a
    more precise one).

    Codes: ``model_missing_key`` (the provider's key is not set), ``model_unknown`` (litellm
    cannot tell the provider, or the provider does not know the model), ``model_unreachable``
    (the server refused or timed out the connection; a local server is named with its URL),
    ``model_auth`` (the key was refused), ``model_rate_limit``, ``model_timeout``,
    ``model_context_window`` (the prompt is too long), ``model_refused`` (the provider refused
    the request), ``model_unavailable`` (the provider's server failed), ``model_error``.

    Attributes:
        model: the litellm model name.
        cli_message: the same text with the command-line remedy (``--model scripted``).
    """

    code = "model_error"

    def __init__(
        self, message: str, *, code: str | None = None, cli_message: str | None = None, model: str = ""
    ) -> None:
        super().__init__(message, code=code, cli_message=cli_message)
        self.model = model
