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
  commits or rolls back. (On MySQL/MariaDB every DDL statement commits implicitly anyway;
  PostgreSQL and SQLite roll DDL back.) On Oracle this is refused: every DDL statement would
  commit the caller's pending work; pass an Engine, or a Connection with no transaction begun.

Oracle (every DDL statement commits, so a failed migration leaves what it created):

* before the first DDL, :func:`upgrade` checks the database character set (AL32UTF8 only, see
  :func:`oracle_character_set_problem`), the privileges ``CREATE TABLE`` and ``CREATE VIEW`` and
  a quota on the default tablespace, and refuses with the ``GRANT``/``ALTER USER`` to run; a
  missing ``CREATE PROCEDURE`` or ``CREATE JOB`` (needed only by ``sql/oracle/expiry_job.sql``)
  is an :class:`OracleSetupWarning`;
* each revision creates only what is missing (tables, indexes, views, columns), so running
  :func:`upgrade` again after a failure half-way finishes the job.

Example:
    >>> from dbmemory.db import migrate
    >>> migrate.upgrade("sqlite:///memory.db")            # doctest: +SKIP
    >>> migrate.current("sqlite:///memory.db") == migrate.head()  # doctest: +SKIP
    True
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url

from dbmemory.core.checks import show
from dbmemory.db.dialect.oracle import ddl_commits_transaction, is_oracle, oracle19_dialect
from dbmemory.db.engine import connect, create_engine
from dbmemory.db.schema import VERSION_TABLE
from dbmemory.errors import InvalidArgumentError, StorageError

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
    "OracleFacts",
    "OracleSetupWarning",
    "ORACLE_CHARACTER_SET",
    "ORACLE_SCHEMA_PRIVILEGES",
    "ORACLE_JOB_PRIVILEGES",
    "oracle_character_set_problem",
    "oracle_preflight",
    "oracle_preflight_statements",
    "read_oracle_facts",
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
    config = Config()
    # ConfigParser interpolation: a '%' in the install path must be doubled.
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.attributes.update(attributes)
    return config


def _check_bind(bind: object) -> None:
    """Refuse a ``bind`` that is not a URL (text or URL), an Engine or a Connection: ``None``
    would otherwise open the default database (``DBMEMORY_URL`` or the user's SQLite file)."""
    if not isinstance(bind, (str, URL, Engine, Connection)):
        raise InvalidArgumentError(
            f"bind must be a database URL, an Engine or a Connection, got {show(bind)}: pass "
            "e.g. 'sqlite:///memory.db' or dbmemory.create_engine(url)"
        )


@contextmanager
def _connection(bind: Bind) -> Iterator[Connection]:
    """Yield a Connection inside a transaction, committing only a transaction opened here.

    Raises:
        InvalidArgumentError: ``bind`` is a Connection inside a transaction on a database whose
            DDL commits it (Oracle).
    """
    _check_bind(bind)
    if isinstance(bind, Connection):
        if bind.in_transaction():
            if ddl_commits_transaction(bind.dialect):
                raise InvalidArgumentError(
                    "the Connection given to the migration is inside a transaction, and on "
                    "Oracle every DDL statement commits it, your pending changes included: "
                    "commit or roll back first, or pass the Engine (the migration then runs "
                    "in a transaction of its own)"
                )
            yield bind
        else:
            with bind.begin():
                yield bind
        return
    if isinstance(bind, Engine):
        with connect(bind, "migrating the schema") as conn, conn.begin():
            yield conn
        return
    engine = create_engine(bind)
    try:
        with connect(engine, "migrating the schema") as conn, conn.begin():
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
        InvalidArgumentError: on Oracle, ``bind`` is a Connection inside a transaction.
        StorageError: on Oracle, a pre-flight check failed before any DDL ran: the database
            character set is not AL32UTF8 (code ``unsupported_database``), or a privilege or
            the tablespace quota is missing (code ``missing_privilege``; the message names the
            ``GRANT``/``ALTER USER`` statement to run).

    Warns:
        OracleSetupWarning: on Oracle, ``CREATE PROCEDURE`` or ``CREATE JOB`` is missing (the
            schema installs; ``sql/oracle/expiry_job.sql`` would fail).
    """
    with _connection(bind) as conn:
        if is_oracle(conn) and not _at_revision(conn, revision):
            facts = read_oracle_facts(conn)
            problems, notes = oracle_preflight(facts)
            for note in notes:
                warnings.warn(note, OracleSetupWarning, stacklevel=2)
            if problems:
                unsupported = oracle_character_set_problem(facts.character_set) is not None
                raise StorageError(
                    "the schema upgrade was refused before any change: " + "; ".join(problems),
                    code="unsupported_database" if unsupported else "missing_privilege",
                )
        command.upgrade(alembic_config(connection=conn), revision)


def _at_revision(conn: Connection, revision: str) -> bool:
    at = current(conn)
    return at is not None and (at == revision or (revision == "head" and at == head()))


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
        InvalidArgumentError: on Oracle, ``bind`` is a Connection inside a transaction.
    """
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
    _check_bind(bind)

    def read(conn: Connection) -> str | None:
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()

    if isinstance(bind, Connection):
        return read(bind)
    if isinstance(bind, Engine):
        with connect(bind, "reading the schema revision") as conn:
            return read(conn)
    engine = create_engine(bind)
    try:
        with connect(engine, "reading the schema revision") as conn:
            return read(conn)
    finally:
        engine.dispose()


def head() -> str:
    """The newest revision id shipped with this version of dbmemory (e.g. ``"0001"``)."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:  # pragma: no cover - a packaging error
        raise RuntimeError(f"dbmemory's migrations must have one head, found {heads}")
    return heads[0]


def offline_dialect(dialect_name: str) -> Dialect:
    """The unconnected dialect used to render offline SQL for ``dialect_name``.

    Oracle is compiled as 19c (:func:`dbmemory.db.dialect.oracle.oracle19_dialect`: no native
    BOOLEAN, no JSON); other names get SQLAlchemy's default dialect for that database.

    Args:
        dialect_name: ``"oracle"``, ``"postgresql"``, ``"mysql"``, ``"mariadb"`` or ``"sqlite"``.

    Raises:
        sqlalchemy.exc.NoSuchModuleError: the name is not a SQLAlchemy dialect.
    """
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
    buffer = io.StringIO()
    config = alembic_config(offline_dialect=offline_dialect(dialect_name), output_buffer=buffer)
    if direction == "upgrade":
        command.upgrade(config, "base:head", sql=True)
    elif direction == "downgrade":
        command.downgrade(config, "head:base", sql=True)
    else:
        raise ValueError(f"direction {direction!r} must be 'upgrade' or 'downgrade'")
    return buffer.getvalue()


# -- Oracle pre-flight -------------------------------------------------------------------------

ORACLE_CHARACTER_SET = "AL32UTF8"
"""The only database character set dbmemory installs into (``NLS_CHARACTERSET``)."""

ORACLE_SCHEMA_PRIVILEGES: tuple[str, ...] = ("CREATE TABLE", "CREATE VIEW")
"""System privileges the migrations need (indexes on one's own tables need none)."""

ORACLE_JOB_PRIVILEGES: tuple[str, ...] = ("CREATE PROCEDURE", "CREATE JOB")
"""System privileges ``sql/oracle/expiry_job.sql`` needs (not the migrations)."""


class OracleSetupWarning(UserWarning):
    """The schema installs, but an optional Oracle feature (the expiry job) lacks a privilege."""


@dataclass(frozen=True)
class OracleFacts:
    """What the Oracle pre-flight reads from the dictionary (:func:`read_oracle_facts`).

    Attributes:
        user: ``USER_USERS.USERNAME`` (the schema the tables go to).
        character_set: ``NLS_DATABASE_PARAMETERS`` ``NLS_CHARACTERSET``.
        privileges: ``SESSION_PRIVS.PRIVILEGE`` (direct and through enabled roles).
        default_tablespace: ``USER_USERS.DEFAULT_TABLESPACE`` (no ``TABLESPACE`` clause in the
            DDL, so every table goes there).
        quotas: ``USER_TS_QUOTAS``: tablespace -> (``BYTES`` used, ``MAX_BYTES``; -1 unlimited).
    """

    user: str
    character_set: str | None
    privileges: frozenset[str] = frozenset()
    default_tablespace: str | None = None
    quotas: Mapping[str, tuple[int, int]] = field(default_factory=dict)


def oracle_character_set_problem(character_set: str | None) -> str | None:
    """Why a database with ``NLS_CHARACTERSET`` = ``character_set`` cannot hold dbmemory's
    data, or None for AL32UTF8.

    Refused rather than warned about: in a non-Unicode database (WE8MSWIN1252, WE8ISO8859P1,
    US7ASCII, ...) Oracle silently replaces every character it cannot represent with a
    replacement character, so two different user ids, store keys or paths can be stored as
    the same text (memories of two users merged), and a stored body no longer matches its
    ``char_count``, its path's hash or an edit's ``old_str``. ``UTF8`` (CESU-8) keeps every
    character but stores one outside the BMP (emoji) as two 3-byte surrogates, so character
    counts and ``VARCHAR2(n CHAR)`` limits disagree with Python's. Both are silent corruption,
    never an error at write time, so nothing is installed.
    """
    value = (character_set or "").strip().upper()
    if value == ORACLE_CHARACTER_SET:
        return None
    shown = value or "unknown"
    detail = (
        "it stores characters outside the Basic Multilingual Plane (emoji) as two surrogates, "
        "so lengths and limits disagree"
        if value == "UTF8"
        else "characters it cannot represent would be replaced silently, merging different "
        "keys and paths"
    )
    return (
        f"the database character set is {shown}, and dbmemory needs {ORACLE_CHARACTER_SET} "
        f"({detail}): install into an AL32UTF8 database or pluggable database, or migrate this "
        "one with Oracle's Database Migration Assistant for Unicode"
    )


def _has_privilege(privileges: Iterable[str], privilege: str) -> bool:
    held = {p.strip().upper() for p in privileges}
    return privilege in held or privilege.replace("CREATE ", "CREATE ANY ", 1) in held


def oracle_preflight(facts: OracleFacts) -> tuple[list[str], list[str]]:
    """Check an Oracle schema before the first DDL of a migration.

    A pure function of what :func:`read_oracle_facts` read, so the rules are testable without
    a server.

    Args:
        facts: the session's character set, privileges, default tablespace and quotas.

    Returns:
        ``(problems, warnings)``: each problem stops the upgrade and names the statement a DBA
        runs (``GRANT CREATE VIEW TO <user>``, ``ALTER USER <user> QUOTA UNLIMITED ON <ts>``);
        the character set problem comes first. Warnings name privileges only the expiry job
        script needs.
    """
    problems: list[str] = []
    charset = oracle_character_set_problem(facts.character_set)
    if charset is not None:
        problems.append(charset)
    user = facts.user or "<user>"
    for privilege in ORACLE_SCHEMA_PRIVILEGES:
        if not _has_privilege(facts.privileges, privilege):
            problems.append(f"{privilege} is missing: run GRANT {privilege} TO {user}")
    if not _has_privilege(facts.privileges, "UNLIMITED TABLESPACE"):
        tablespace = facts.default_tablespace
        used, limit = facts.quotas.get((tablespace or "").upper(), (0, 0))
        if tablespace is None:
            problems.append(
                f"{user} has no default tablespace: run ALTER USER {user} DEFAULT TABLESPACE "
                f"<tablespace> QUOTA UNLIMITED ON <tablespace>"
            )
        elif limit != -1 and limit <= used:
            problems.append(
                f"{user} has no quota left on its default tablespace {tablespace} (the tables "
                f"would be created, and the first row would fail): run ALTER USER {user} "
                f"QUOTA UNLIMITED ON {tablespace}"
            )
    notes = [
        f"{privilege} is missing, so sql/oracle/expiry_job.sql (the in-database expiry job) "
        f"cannot be installed: run GRANT {privilege} TO {user}, or schedule 'dbmemory expire' "
        "instead"
        for privilege in ORACLE_JOB_PRIVILEGES
        if not _has_privilege(facts.privileges, privilege)
    ]
    return problems, notes


_nls = sa.table("nls_database_parameters", sa.column("parameter"), sa.column("value"))
_privs = sa.table("session_privs", sa.column("privilege"))
_users = sa.table("user_users", sa.column("username"), sa.column("default_tablespace"))
_quotas = sa.table(
    "user_ts_quotas", sa.column("tablespace_name"), sa.column("bytes"), sa.column("max_bytes")
)


def oracle_preflight_statements() -> dict[str, sa.Select[Any]]:
    """The dictionary queries of the Oracle pre-flight, by name (compiled in the tests)."""
    return {
        "character_set": sa.select(_nls.c.value).where(
            _nls.c.parameter == sa.bindparam("p_parameter", "NLS_CHARACTERSET")
        ),
        "privileges": sa.select(_privs.c.privilege),
        "user": sa.select(_users.c.username, _users.c.default_tablespace),
        "quotas": sa.select(_quotas.c.tablespace_name, _quotas.c.bytes, _quotas.c.max_bytes),
    }


def read_oracle_facts(conn: Connection) -> OracleFacts:
    """Read :class:`OracleFacts` for the session's schema (four dictionary queries, no DDL).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the dictionary could not be read.
    """
    statements = oracle_preflight_statements()
    user_row = conn.execute(statements["user"]).first()
    return OracleFacts(
        user=str(user_row[0]) if user_row else "",
        character_set=conn.execute(statements["character_set"]).scalar(),
        privileges=frozenset(str(p) for p in conn.execute(statements["privileges"]).scalars()),
        default_tablespace=str(user_row[1]) if user_row and user_row[1] else None,
        quotas={
            str(name).upper(): (int(used or 0), int(limit if limit is not None else 0))
            for name, used, limit in conn.execute(statements["quotas"])
        },
    )
