"""Build a configured SQLAlchemy :class:`~sqlalchemy.engine.Engine` for dbmemory.

:func:`create_engine` resolves the URL (argument, ``DBMEMORY_URL``, or the embedded SQLite file
in the user data directory), picks dbmemory's default driver when the URL names none
(``postgresql://`` -> psycopg 3, ``mysql://``/``mariadb://`` -> PyMySQL, ``oracle://`` ->
python-oracledb thin mode), and applies :func:`dbmemory.db.dialect.setup.configure_engine`.
Driver-wide defaults (such as ``oracledb.defaults.fetch_lobs``) are never changed: the host
application shares the driver.

:func:`redact_url` renders a URL for messages and logs without its password.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine, make_url

from dbmemory.db.dialect import txn as dialect_txn
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.setup import configure_engine, engine_arguments
from dbmemory.errors import InvalidArgumentError, MissingDependencyError, extra_hint
from dbmemory.settings import Settings

__all__ = ["connect", "create_engine", "engine_url", "normalize_url", "redact_url"]

_DEFAULT_DRIVERS: dict[str, str] = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
    "oracle": "oracle+oracledb",
}
"""Backend name in a driverless URL -> the ``dialect+driver`` dbmemory's extras install."""

_EXTRAS: dict[str, tuple[str, str]] = {
    "postgresql": ("postgres", "PostgreSQL"),
    "mysql": ("mysql", "MySQL/MariaDB"),
    "mariadb": ("mysql", "MySQL/MariaDB"),
    "oracle": ("oracle", "Oracle"),
}
"""Backend name -> (the dbmemory extra with its driver, a display name)."""

_SECRET_QUERY_KEYS = ("password", "passwd", "pwd", "secret", "token")

_MULTI_HOST = re.compile(
    r"^(?P<scheme>postgres(?:ql)?(?:\+\w+)?)://(?P<auth>[^@/?#]*@)?(?P<hosts>[^@/?#]*,[^/?#]*)"
    r"(?P<path>/[^?#]*)?(?:\?(?P<query>[^#]*))?$"
)
"""A libpq multi-host URL, ``postgresql://u@h1:5432,h2:5433/db``, which SQLAlchemy cannot parse."""


def _multi_host_as_query(url: str) -> str:
    """``postgresql://u@h1:5432,h2:5433/db`` as SQLAlchemy's multi-host form,
    ``postgresql://u@/db?host=h1:5432&host=h2:5433`` (other URLs unchanged)."""
    match = _MULTI_HOST.match(url)
    if match is None:
        return url
    hosts = "&".join(f"host={host}" for host in match["hosts"].split(",") if host)
    query = "&".join(part for part in (hosts, match["query"]) if part)
    return f"{match['scheme']}://{match['auth'] or ''}{match['path'] or '/'}?{query}"


def normalize_url(url: str | URL) -> URL:
    """Parse ``url`` and add dbmemory's default driver when it names none.

    Args:
        url: a SQLAlchemy URL string or object, e.g. ``"postgresql://app@db/app"``.

    Returns:
        The parsed :class:`~sqlalchemy.engine.URL`; ``postgresql://`` (and ``postgres://``)
        becomes ``postgresql+psycopg://``, ``mysql://`` becomes ``mysql+pymysql://``,
        ``mariadb://`` becomes ``mariadb+pymysql://``, ``oracle://`` becomes
        ``oracle+oracledb://``. A URL with an explicit driver is returned unchanged. A libpq
        multi-host URL (``postgresql://u@h1:5432,h2:5433/db``) becomes SQLAlchemy's form of it
        (``postgresql+psycopg://u@/db?host=h1:5432&host=h2:5433``).

    Raises:
        InvalidArgumentError: the text is not a database URL.
    """
    try:
        parsed = make_url(_multi_host_as_query(url) if isinstance(url, str) else url)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise InvalidArgumentError(
            "the database URL could not be parsed: give a SQLAlchemy URL such as "
            "'sqlite:///memory.db' or 'postgresql://user@host/db'"
        ) from exc
    if "+" not in parsed.drivername and parsed.drivername in _DEFAULT_DRIVERS:
        parsed = parsed.set(drivername=_DEFAULT_DRIVERS[parsed.drivername])
    return parsed


def redact_url(url: str | URL | None) -> str:
    """Render ``url`` for a message or a log line with its password hidden.

    Args:
        url: a URL string or object; None gives ``"<default>"``.

    Returns:
        The URL with the password (and any password-like query parameter) shown as ``***``;
        ``"<unparseable URL>"`` when the text is not a URL (it is never echoed back, as it may
        hold a secret).
    """
    if url is None:
        return "<default>"
    try:
        parsed = make_url(_multi_host_as_query(url) if isinstance(url, str) else url)
    except (sa.exc.ArgumentError, ValueError):
        return "<unparseable URL>"
    if parsed.query:
        query = {
            key: ("***" if any(s in key.lower() for s in _SECRET_QUERY_KEYS) else value)
            for key, value in parsed.query.items()
        }
        parsed = parsed.set(query=query)
    return parsed.render_as_string(hide_password=True)


def _backend(url: URL) -> str:
    return url.get_backend_name()


POOLING_QUERY_KEY = "dbmemory_transaction_pooling"
"""URL query option (``?dbmemory_transaction_pooling=true``) that says the URL reaches
PostgreSQL through a transaction-mode pooler (PgBouncer); removed before the driver sees it."""

_TRUE = ("1", "true", "yes", "on")


def _pop_pooling(url: URL) -> tuple[URL, bool | None]:
    """Take :data:`POOLING_QUERY_KEY` out of ``url``: (the URL without it, its value or None)."""
    if POOLING_QUERY_KEY not in url.query:
        return url, None
    raw = url.query[POOLING_QUERY_KEY]
    value = raw[-1] if isinstance(raw, tuple) else raw
    if str(value).strip().lower() not in _TRUE + ("0", "false", "no", "off"):
        raise InvalidArgumentError(
            f"{POOLING_QUERY_KEY} in the URL must be true or false, got {value!r}"
        )
    return url.difference_update_query([POOLING_QUERY_KEY]), str(value).strip().lower() in _TRUE


def engine_url(engine: Engine, *, hide_password: bool = True) -> str:
    """The URL that makes another :func:`create_engine` (another process, ``dbmemory ... --url``)
    connect as ``engine`` does: ``engine.url`` plus ``?dbmemory_transaction_pooling=true`` when
    the engine was made for a transaction-mode pooler (that option is taken out of
    ``engine.url`` before the driver sees it, so ``str(engine.url)`` would lose it).

    Args:
        engine: an engine made by :func:`create_engine`.
        hide_password: render the password as ``***`` (default) or in clear.

    Returns:
        The URL as text.
    """
    url = engine.url
    if dialect_txn.transaction_pooling(engine):
        url = url.update_query_dict({POOLING_QUERY_KEY: "true"})
    return url.render_as_string(hide_password=hide_password)


def create_engine(
    url: str | URL | None = None,
    *,
    lock_timeout_ms: int | None = None,
    transaction_pooling: bool | None = None,
    commit_outcome_wait_s: float | None = None,
    **kwargs: Any,
) -> Engine:
    """Create an Engine set up the way dbmemory needs it.

    Args:
        url: a SQLAlchemy URL. None reads ``DBMEMORY_URL`` (:class:`dbmemory.settings.Settings`)
            and falls back to ``sqlite:///<user data dir>/dbmemory.db`` (the folder is created).
            A URL without a driver gets dbmemory's default driver (see :func:`normalize_url`).
        lock_timeout_ms: how long a write waits for another transaction's lock, in
            milliseconds, before it gives up with a retry text; None reads
            ``DBMEMORY_LOCK_TIMEOUT_MS`` (default 5000). See
            :func:`~dbmemory.db.dialect.setup.configure_engine`.
        **kwargs: passed to :func:`sqlalchemy.create_engine` (``echo``, ``pool_size``, ...).
            ``pool_pre_ping`` defaults to True on server databases (a connection dropped by a
            server restart is replaced before use instead of failing the first call); pass
            ``pool_pre_ping=False`` to save its round trip per checkout.
        transaction_pooling: PostgreSQL only: the URL reaches the server through a pooler in
            transaction mode (PgBouncer ``pool_mode = transaction``). psycopg's prepared
            statements are turned off (``prepare_threshold=None``; PgBouncer < 1.21 cannot
            route them) and ``lock_timeout`` is set with ``SET LOCAL`` in every transaction, so
            no session state is left on the pooler's server connections. None reads the URL
            option ``?dbmemory_transaction_pooling=true`` and then
            ``DBMEMORY_TRANSACTION_POOLING`` (default False).

    Returns:
        A configured :class:`~sqlalchemy.engine.Engine` whose lock waits are bounded by
        ``lock_timeout_ms``. SQLite engines get WAL, a busy timeout,
        foreign keys and ``BEGIN IMMEDIATE`` transactions
        (:func:`~dbmemory.db.dialect.setup.configure_engine`);
        an in-memory SQLite database uses a :class:`~sqlalchemy.pool.StaticPool`, so every
        connection of the engine sees the same database (one shared DB-API connection: use
        one :class:`~sqlalchemy.engine.Connection` at a time).

    Raises:
        MissingDependencyError: the URL's driver is not installed; the message names the extra,
            e.g. ``pip install -e ".[postgres]"``.
        InvalidArgumentError: the URL cannot be parsed or names an unknown database.
    """
    settings = None
    if url is not None:
        url, from_url = _pop_pooling(normalize_url(url))
        if transaction_pooling is None:
            transaction_pooling = from_url
    if url is None or lock_timeout_ms is None or transaction_pooling is None or commit_outcome_wait_s is None:
        try:
            settings = Settings()
        except ValueError as exc:  # pydantic's ValidationError: a DBMEMORY_* variable is wrong
            raise InvalidArgumentError(
                "a DBMEMORY_* environment variable is invalid (e.g. DBMEMORY_LOCK_TIMEOUT_MS "
                "must be a positive whole number of milliseconds): fix or unset it"
            ) from exc
        if url is None:
            url = settings.resolved_url()
        if lock_timeout_ms is None:
            lock_timeout_ms = settings.lock_timeout_ms
        if transaction_pooling is None:
            transaction_pooling = settings.transaction_pooling
        if commit_outcome_wait_s is None:
            commit_outcome_wait_s = settings.commit_outcome_wait_s
    if isinstance(lock_timeout_ms, bool) or not isinstance(lock_timeout_ms, int) or lock_timeout_ms <= 0:
        raise InvalidArgumentError(
            f"lock_timeout_ms must be a positive whole number of milliseconds, got "
            f"{lock_timeout_ms!r}: pass e.g. lock_timeout_ms=5000"
        )
    parsed, from_url = _pop_pooling(normalize_url(url))
    if from_url is not None:  # the URL came from DBMEMORY_URL
        transaction_pooling = from_url
    backend = _backend(parsed)
    kwargs, pooling = engine_arguments(parsed, kwargs, transaction_pooling=bool(transaction_pooling))

    try:
        engine = sa.create_engine(parsed, **kwargs)
    except ImportError as exc:
        extra, display = _EXTRAS.get(backend, (None, backend))
        remedy = (
            extra_hint(extra)
            if extra
            else f"install the DB-API driver for {parsed.drivername}"
        )
        raise MissingDependencyError(
            f"the {display} driver for '{parsed.drivername}' is not installed: {remedy}"
        ) from exc
    except sa.exc.NoSuchModuleError as exc:
        raise InvalidArgumentError(
            f"'{parsed.drivername}' is not a database SQLAlchemy knows: use sqlite, oracle, "
            "postgresql or mysql/mariadb URLs"
        ) from exc
    return configure_engine(
        engine,
        lock_timeout_ms=lock_timeout_ms,
        transaction_pooling=pooling,
        commit_outcome_wait_s=commit_outcome_wait_s,
    )


def connect(engine: Engine, action: str = "connecting to the database") -> Connection:
    """``engine.connect()`` with its failures translated: what every entry point that is given
    an Engine uses to open its connection.

    Returns:
        A new :class:`~sqlalchemy.engine.Connection` (close it, e.g. ``with connect(e) as c``).

    Raises:
        StorageError: the database cannot be reached or refused the connection (code
            ``connect_failed``, the message names host:port/database as
            :func:`~dbmemory.db.dialect.errors.database_target` does, never the password), or
            the engine's pool had no free connection within ``pool_timeout`` (code
            ``pool_exhausted``); the driver's exception is chained as ``__cause__``.
    """
    try:
        return engine.connect()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, action, target=engine) from exc
