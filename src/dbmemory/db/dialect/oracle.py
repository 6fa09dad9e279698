"""Oracle specifics: statements compiled as Oracle 19c (:func:`oracle19_dialect`), ``FOR UPDATE
WAIT n`` on locking reads (a compile hook registered on import), one flag type on 19c and 23ai
(:class:`Flag`: ``NUMBER(1)`` with a ``CHECK``, :func:`flag_check`), the session's binary
comparison rules (:data:`ORACLE_SESSION_SQL`, :func:`configure_oracle_session`), and the helpers
of idempotent DDL in the migrations (:func:`ddl_commits_transaction`,
:func:`oracle_object_exists`, :func:`drop_table`)."""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import oracle
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.ext.compiler import compiles

from dbmemory.db.dialect.base import DEFAULT_LOCK_TIMEOUT_MS, lock_wait_seconds

__all__ = [
    "oracle19_dialect",
    "is_oracle",
    "Flag",
    "flag_check",
    "ORACLE_SESSION_SQL",
    "oracle_session_listener",
    "configure_oracle_session",
    "ddl_commits_transaction",
    "ORACLE_EXISTS",
    "oracle_object_exists",
    "drop_table",
]

# -- Oracle: FOR UPDATE WAIT n -----------------------------------------------------------------

_FOR_UPDATE_AT_END = re.compile(r"(FOR UPDATE(?: OF [^()]*?)?)\s*$")
_DBM_TABLE = re.compile(r"\bdbm_", re.IGNORECASE)


@compiles(sa.sql.Select, "oracle")
def _oracle_select_wait(element: sa.sql.Select[Any], compiler: Any, **kw: Any) -> str:
    """dbmemory's locking reads wait at most the engine's lock timeout on Oracle.

    Oracle has no session lock timeout: a plain ``FOR UPDATE`` waits forever. dbmemory's
    ``SELECT ... FOR UPDATE`` statements (those on its ``dbm_`` tables, without ``NOWAIT`` or
    ``SKIP LOCKED``) compile to ``FOR UPDATE WAIT n``, ``n`` from
    :func:`~dbmemory.db.dialect.setup.configure_engine` (default 5 s); a timeout raises ORA-30006, reported as a
    conflict to retry. Other statements compile unchanged.
    """
    text: str = compiler.visit_select(element, **kw)
    arg = element._for_update_arg
    if arg is None or arg.nowait or arg.skip_locked or arg.read:
        return text
    if not _DBM_TABLE.search(text):
        return text
    seconds = getattr(
        compiler.dialect, "_dbmemory_lock_wait_s", lock_wait_seconds(DEFAULT_LOCK_TIMEOUT_MS)
    )
    return _FOR_UPDATE_AT_END.sub(lambda m: f"{m.group(1)} WAIT {int(seconds)}", text, count=1)


def oracle19_dialect() -> Dialect:
    """An unconnected Oracle dialect configured as a 19c server, for compile-only checks.

    An unconnected ``oracle.dialect()`` assumes 23ai (native BOOLEAN and JSON); dbmemory
    supports 19c, so statements are compiled against 19c's features.
    """
    dialect: Dialect = oracle.dialect()  # type: ignore[no-untyped-call]
    dialect.server_version_info = (19, 0)
    dialect.supports_native_boolean = False
    setattr(dialect, "_supports_oracle_json", False)  # noqa: B010  (a private flag of the dialect)
    return dialect


# -- Oracle: one flag type on 19c and 23ai, session comparison rules, idempotent DDL ------------


def is_oracle(bind: Connection | Engine | Dialect) -> bool:
    """Whether ``bind`` talks to Oracle Database."""
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return dialect.name == "oracle"


class _FlagConstant(sa.sql.expression.ColumnElement[bool]):
    """``TRUE``/``FALSE`` compared with a :class:`Flag` column: ``true``/``false`` (or what the
    dialect renders for :func:`sqlalchemy.true`) everywhere, ``1``/``0`` on Oracle whatever
    the server version (the column is ``NUMBER(1)`` there, also on 23ai)."""

    __visit_name__ = "dbm_flag_constant"
    inherit_cache = True
    _traverse_internals = [("value", sa.sql.visitors.InternalTraversal.dp_plain_obj)]

    def __init__(self, value: bool) -> None:
        self.value = bool(value)
        self.type = sa.Boolean(create_constraint=False)


@compiles(_FlagConstant)
def _compile_flag_constant(element: _FlagConstant, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(sa.true() if element.value else sa.false(), **kw))


@compiles(_FlagConstant, "oracle")
def _compile_flag_constant_oracle(element: _FlagConstant, compiler: Any, **kw: Any) -> str:
    return "1" if element.value else "0"


class Flag(sa.types.TypeDecorator[bool]):
    """A NOT NULL yes/no column, one type per backend whatever its version.

    ``BOOLEAN`` on PostgreSQL and SQLite, ``BOOL`` (``TINYINT(1)``) on MySQL/MariaDB (the DDL
    ``sa.Boolean(create_constraint=False)`` renders, unchanged), and ``NUMBER(1)`` on Oracle,
    19c and 23ai alike (SQLAlchemy's ``Boolean`` is ``SMALLINT`` on 19c but a native
    ``BOOLEAN`` on 23ai, so one install script could not serve both). Pair it with
    :func:`flag_check` for the ``CHECK (col IN (0, 1))`` constraint Oracle gets.

    Binds accept ``bool`` (or 0/1) and send ``1``/``0`` to Oracle; results are Python ``bool``.
    ``col == sa.false()`` / ``sa.true()`` renders ``= 0`` / ``= 1`` on every Oracle version
    (``= false`` elsewhere, as before). Do not use ``col.is_(False)`` (``IS 0`` on Oracle) or a
    bare ``where(col)`` (a bare ``NUMBER`` on 23ai): compare with ``==``.
    """

    impl = sa.Boolean
    cache_ok = True

    def __init__(self) -> None:
        super().__init__(create_constraint=False)

    class comparator_factory(sa.types.TypeDecorator.Comparator):  # type: ignore[type-arg]  # noqa: N801
        def operate(self, op: Any, *other: Any, **kwargs: Any) -> Any:
            if op in (sa.sql.operators.eq, sa.sql.operators.ne) and other:
                value = other[0]
                if isinstance(value, (sa.sql.elements.True_, sa.sql.elements.False_)):
                    other = (_FlagConstant(isinstance(value, sa.sql.elements.True_)), *other[1:])
            return super().operate(op, *other, **kwargs)

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "oracle":
            return oracle.NUMBER(1, asdecimal=False)  # type: ignore[no-untyped-call]
        return dialect.type_descriptor(sa.Boolean(create_constraint=False))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "oracle":
            return 1 if value else 0
        return bool(value)

    def bind_processor(self, dialect: Dialect) -> Any:
        if dialect.name == "oracle":  # an int, not NUMBER's float conversion
            return _oracle_flag_bind
        return super().bind_processor(dialect)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        if dialect.name == "oracle":
            return _flag_result
        return super().result_processor(dialect, coltype)

    def process_result_value(self, value: Any, dialect: Dialect) -> bool | None:
        if value is None:
            return None
        return bool(value)


def _oracle_flag_bind(value: Any) -> int | None:
    return None if value is None else (1 if value else 0)


def _flag_result(value: Any) -> bool | None:
    return None if value is None else bool(value)


def flag_check(column_name: str, name: str) -> sa.CheckConstraint:
    """The ``CHECK (<column_name> IN (0, 1))`` constraint of a :class:`Flag` column, created on
    Oracle only (the other backends' DDL is unchanged). ``name`` is used as given (at most 30
    characters)."""
    return sa.CheckConstraint(
        f"{column_name} IN (0, 1)", name=sa.sql.elements.conv(name)
    ).ddl_if(dialect="oracle")


ORACLE_SESSION_SQL = "ALTER SESSION SET NLS_COMP = 'BINARY' NLS_SORT = 'BINARY'"
"""Run on every new Oracle connection of a configured engine. A session with
``NLS_COMP=LINGUISTIC`` and a ``_CI``/``_AI`` ``NLS_SORT`` (APEX sets these per application)
compares ``=``, ``LIKE`` and ``ORDER BY`` case- or accent-insensitively: ``user:A:Bob`` would
find ``user:A:bob``'s store and a directory prefix would match other folders. Binary
comparison is what the keys, paths and unique constraints assume."""


def oracle_session_listener(dbapi_conn: Any, _record: Any = None) -> None:
    """Pool ``connect`` listener: :data:`ORACLE_SESSION_SQL` on a new DB-API connection.

    Also callable by hand on any python-oracledb connection (``engine.raw_connection()``'s
    ``driver_connection``) when the host application sets up its own sessions."""
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute(ORACLE_SESSION_SQL)
    finally:
        cursor.close()


def configure_oracle_session(engine: Engine) -> Engine:
    """Make every new connection of an Oracle ``engine`` compare and sort binary
    (:data:`ORACLE_SESSION_SQL`); other engines are returned untouched. Idempotent.

    Applies to connections the pool opens from now on. A caller who brings a Connection of an
    engine dbmemory did not configure, or who changes ``NLS_COMP``/``NLS_SORT`` later in the
    session, must run :data:`ORACLE_SESSION_SQL` on it (or call
    :func:`~dbmemory.db.dialect.setup.configure_engine` on the engine before its pool connects)."""
    if engine.dialect.name != "oracle" or getattr(engine, "_dbmemory_oracle_session", False):
        return engine
    sa.event.listen(engine, "connect", oracle_session_listener)
    engine._dbmemory_oracle_session = True  # type: ignore[attr-defined]
    return engine


def ddl_commits_transaction(dialect: Dialect) -> bool:
    """Whether DDL on ``dialect`` commits the session's open transaction on its own, so a
    migration must never run inside a caller's transaction (Oracle: every DDL statement
    commits before and after it runs)."""
    return dialect.name == "oracle"


ORACLE_EXISTS = {
    "table": "SELECT COUNT(*) FROM user_tables WHERE table_name = :name",
    "view": "SELECT COUNT(*) FROM user_views WHERE view_name = :name",
    "index": "SELECT COUNT(*) FROM user_indexes WHERE index_name = :name",
    "column": (
        "SELECT COUNT(*) FROM user_tab_columns WHERE table_name = :table_name "
        "AND column_name = :name"
    ),
}


def oracle_object_exists(
    bind: Connection | None, kind: str, name: str, *, table: str | None = None
) -> bool:
    """Whether an online Oracle migration finds ``name`` already created, so it skips it.

    Oracle commits each DDL statement: a migration that failed half-way (no quota, lost
    connection) left its first tables behind, and running it again must create only what is
    missing. Always False elsewhere (PostgreSQL and SQLite roll DDL back; MySQL/MariaDB keep
    their behaviour) and in offline mode (``bind`` None): the rendered DDL is unchanged.

    Args:
        bind: the migration's connection (``op.get_bind()``), None offline.
        kind: ``"table"``, ``"view"``, ``"index"`` or ``"column"`` (of ``table``).
        name: the unquoted object name as dbmemory writes it (stored upper-case by Oracle).
        table: the table of a ``"column"``.

    Raises:
        ValueError: unknown ``kind``, or a ``"column"`` without ``table``.
    """
    if kind not in ORACLE_EXISTS or (kind == "column" and table is None):
        raise ValueError(f"kind {kind!r} must be one of {sorted(ORACLE_EXISTS)} (columns need table)")
    if bind is None or bind.dialect.name != "oracle":
        return False
    params = {"name": name.upper()}
    if table is not None:
        params["table_name"] = table.upper()
    return bool(bind.execute(sa.text(ORACLE_EXISTS[kind]), params).scalar())


def drop_table(op: Any, name: str) -> None:
    """Drop table ``name`` in a migration: ``DROP TABLE <name> PURGE`` on Oracle (no copy left
    in the recycle bin, where it would keep its tablespace quota and BIN$ index names), the
    plain ``op.drop_table`` elsewhere (DDL unchanged)."""
    if op.get_context().dialect.name == "oracle":
        op.execute(f"DROP TABLE {name} PURGE")
    else:
        op.drop_table(name)
