"""Hot statements run on the DB-API cursor, behind the same statement objects.

SQLAlchemy's ``Connection.execute`` costs ~40-50 µs per statement on SQLite against ~7 µs for
the statement itself on ``sqlite3``'s cursor. The reads of the MEMORY tool's ``view`` (a
directory's listing, a file read, and the touch a read records on SQLite) go through
:func:`all_rows`, :func:`first_row` and :func:`row_count` instead: where
:func:`dbmemory.db.dialect.base.raw_reads` allows it, the statement object of
:mod:`dbmemory.store.statements.reads` is compiled once per dialect into its SQL text, the order of its
parameters with their bind processors and the result processors of its columns, and run on
``driver_connection(conn)``. An edit's writes on SQLite take the same path through
:func:`row_count` (the file update, the store counters and a single audit row: their SQL never
binds a LIKE or GLOB pattern, so SQLite never prepares them again per run). Everywhere else (and whenever the raw path is not
exactly what ``conn.execute`` would do) the same statement runs through ``conn.execute``.

Same transaction: the raw path is taken only when ``conn`` is in a transaction SQLAlchemy began
and the driver's connection is in it too (``sqlite3.Connection.in_transaction``: the ``BEGIN
IMMEDIATE`` of :func:`dbmemory.db.dialect.setup.configure_engine` ran). Then ``conn.execute`` would
not begin anything first and would run the statement on that same driver connection, so the
statement joins the caller's transaction (and savepoint) either way. Not in a transaction yet
(SQLAlchemy would autobegin), an ``AUTOCOMMIT`` connection outside a transaction of its own, a
transaction SQLite ended on its own, an invalidated connection: ``conn.execute``.

Same observers: a connection with ``before_cursor_execute`` or ``after_cursor_execute``
listeners (instrumentation, tests injecting faults) or echo logging takes ``conn.execute``, so
they keep seeing every statement; so does one with a ``schema_translate_map`` (SQLAlchemy
renders the schema names per execution). Statement counts on SQLite are taken from the driver
(``sqlite3.Connection.set_trace_callback``), which sees both paths.

Same results: values go through the bind processors of the statement's parameters and come
back through the result processors of its columns, as in ``conn.execute`` (``UtcDateTime``
gives aware UTC datetimes, ``Flag`` bools). Rows are plain tuples in the statement's column
order on both paths (:func:`columns` gives the positions by name).

Same errors: on a driver error the statement runs again through ``conn.execute`` (a failed
SQLite statement changed nothing and left the transaction as it was), so SQLAlchemy's error
wrapping, ``handle_error`` events and invalidation happen as if the raw path had never been
tried. Only when the failed statement writes (a touch, an edit) and SQLite has ended the transaction
with it is the statement not run again (it would run on its own, outside the caller's
transaction): the driver error is raised wrapped as SQLAlchemy wraps it.

Lone reads (:func:`engine_rows`): one ``SELECT`` given an Engine, not a Connection, runs on a
pooled DB-API connection outside any transaction where
:func:`dbmemory.db.dialect.base.lone_reads` allows it (SQLite; PostgreSQL with psycopg, in
autocommit for the statement): one statement is its own consistent snapshot, so the
``BEGIN``/``COMMIT`` round trips and SQLAlchemy's Connection are saved. The connection comes
from the engine's own pool (its size bounds the connections; its ``pool_pre_ping``,
dbmemory's default for servers, costs one round trip), whose check-out and check-in events run
as usual; a named paramstyle (psycopg's ``%(name)s``) gets its parameters as a dict. The same
observers rule holds (engine listeners, echo or a ``schema_translate_map``: not run). On a
driver error the connection is invalidated and nothing is returned, so the caller runs the
statement again its usual way, which reports the error.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect, Engine

from dbmemory.db.dialect.base import driver_connection, lone_reads, raw_reads, set_lone_read

__all__ = ["all_rows", "first_row", "row_count", "columns", "engine_rows"]

_PLANS = "_dbmemory_raw_plans"
"""Attribute of a dialect instance: ``{statement: _Plan or None}`` (None: never raw)."""

_NOT_RAW = object()
_MISSING = object()


class _Plan:
    """One statement compiled for one dialect: SQL text, each parameter's name with its
    default (a value of the statement, or ``_MISSING``) and bind processor, and the
    ``(position, result processor)`` of the columns that have one (``None``: no column).
    ``named``: the names the SQL text uses for the parameters of a named paramstyle (psycopg's
    ``%(name)s``), else ``None`` (positional)."""

    __slots__ = ("sql", "binds", "results", "writes", "named")

    def __init__(
        self,
        sql: str,
        binds: list[tuple[str, Any, Any]],
        results: list[tuple[int, Any]] | None,
        writes: bool,
        named: list[str] | None = None,
    ) -> None:
        self.sql = sql
        self.binds = binds
        self.results = results
        self.writes = writes
        self.named = named

    def args(self, params: dict[str, Any]) -> Any:
        """The values for ``params``: a tuple (positional) or a dict (named); ``KeyError``: a
        required one is missing."""
        out = []
        for name, default, process in self.binds:
            value = params.get(name, _MISSING)
            if value is _MISSING:
                if default is _MISSING:
                    raise KeyError(name)
                out.append(default)
            else:
                out.append(value if process is None else process(value))
        if self.named is not None:
            return dict(zip(self.named, out, strict=True))
        return tuple(out)

    def row(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        results = self.results
        if results is None:
            return row
        values = list(row)
        for i, process in results:
            values[i] = process(values[i])
        return tuple(values)


def _compile(dialect: Dialect, stmt: Any) -> _Plan | None:
    compiled = stmt.compile(dialect=dialect)
    if compiled.literal_execute_params or compiled.post_compile_params:
        return None
    names = compiled.positiontup
    named = None
    if names is None:  # a named paramstyle: every bind once, under the name the text uses
        if dialect.paramstyle not in ("pyformat", "named"):
            return None
        names = list(compiled.binds)
        named = [compiled.escaped_bind_names.get(name, name) for name in names]
    binds: list[tuple[str, Any, Any]] = []
    for name in names:
        bind = compiled.binds[name]
        if bind.expanding or bind.callable is not None:
            return None
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if bind.required:
            default = _MISSING
        else:  # a value of the statement (e.g. substr's 1), unless the caller passes one
            default = bind.value if process is None else process(bind.value)
        binds.append((name, default, process))
    results = None
    if isinstance(stmt, sa.Select):
        processors = [c.type.dialect_impl(dialect).result_processor(dialect, None) for c in stmt.selected_columns]
        results = [(i, p) for i, p in enumerate(processors) if p is not None] or None
    return _Plan(compiled.string, binds, results, writes=not isinstance(stmt, sa.Select), named=named)


def plan_of(dialect: Dialect, stmt: Any) -> _Plan | None:
    plans = dialect.__dict__.get(_PLANS)
    if plans is None:
        plans = dialect.__dict__.setdefault(_PLANS, {})
    try:
        return plans[stmt]  # type: ignore[no-any-return]
    except KeyError:
        pass
    try:
        plan = _compile(dialect, stmt)
    except Exception:  # a statement the raw path cannot render: always conn.execute
        plan = None
    plans[stmt] = plan
    return plan


def dbapi_connection(conn: Connection) -> Any:
    """The DB-API connection when a statement may run on it directly (see the module text),
    else ``None``."""
    if not raw_reads(conn):
        return None
    if conn.invalidated or not conn.in_transaction() or conn._echo:
        return None
    if "schema_translate_map" in conn.get_execution_options():  # rendered per execution
        return None
    dispatch = conn.dispatch
    if dispatch.before_cursor_execute or dispatch.after_cursor_execute:
        return None
    try:
        driver = driver_connection(conn)
        if not driver.in_transaction:
            return None
    except Exception:  # a closed driver connection: conn.execute says so
        return None
    return driver


def _run(conn: Connection, stmt: Any, params: dict[str, Any], how: str) -> Any:
    driver = dbapi_connection(conn)
    if driver is None:
        return _NOT_RAW
    plan = plan_of(conn.dialect, stmt)
    if plan is None:
        return _NOT_RAW
    try:
        args = plan.args(params)
    except Exception:  # a parameter missing or refused by its type: conn.execute says so
        return _NOT_RAW
    dbapi_error = conn.dialect.loaded_dbapi.Error
    try:
        cursor = driver.execute(plan.sql, args)
        try:
            if how == "count":
                return cursor.rowcount
            if how == "first":
                row = cursor.fetchone()
                return None if row is None else plan.row(row)
            rows = cursor.fetchall()
        finally:
            cursor.close()
    except dbapi_error as exc:
        if plan.writes and not _still_in_transaction(driver):
            raise sa.exc.DBAPIError.instance(
                plan.sql, args, exc, dbapi_error, dialect=conn.dialect
            ) from exc
        return _NOT_RAW
    if plan.results is None:
        return rows
    return [plan.row(row) for row in rows]


def _still_in_transaction(driver: Any) -> bool:
    try:
        return bool(driver.in_transaction)
    except Exception:
        return True  # closed: conn.execute fails on it without running anything


def all_rows(conn: Connection, stmt: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of the ``SELECT`` ``stmt`` with ``params``, as tuples in its column order.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: as ``conn.execute(stmt, params)`` raises it.
    """
    out = _run(conn, stmt, params, "all")
    if out is _NOT_RAW:  # .all() first: iterating a result row by row costs ~2x
        return list(map(tuple, conn.execute(stmt, params).all()))
    return out  # type: ignore[no-any-return]


def first_row(conn: Connection, stmt: Any, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """The first row of the ``SELECT`` ``stmt`` (a lookup by key: at most one) as a tuple, or
    ``None``.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: as ``conn.execute(stmt, params)`` raises it.
    """
    out = _run(conn, stmt, params, "first")
    if out is _NOT_RAW:
        row = conn.execute(stmt, params).first()
        return None if row is None else tuple(row)
    return out  # type: ignore[no-any-return]


def row_count(conn: Connection, stmt: Any, params: dict[str, Any]) -> int:
    """Run the ``INSERT``/``UPDATE`` ``stmt`` with ``params``; the rows it changed.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: as ``conn.execute(stmt, params)`` raises it.
    """
    out = _run(conn, stmt, params, "count")
    if out is _NOT_RAW:
        return int(conn.execute(stmt, params).rowcount)
    return int(out)


def columns(stmt: Any) -> dict[str, int]:
    """``{column name: position}`` of the rows of the ``SELECT`` ``stmt``."""
    return {name: i for i, name in enumerate(stmt.selected_columns.keys())}


def engine_rows(engine: Engine, stmt: Any, params: dict[str, Any]) -> list[tuple[Any, ...]] | None:
    """Every row of the ``SELECT`` ``stmt`` with ``params``, run alone on a pooled DB-API
    connection of ``engine`` outside any transaction (see the module text: a lone read), as
    tuples in its column order; ``None`` when it was not run or failed (the caller runs it in
    a transaction of its own, which reports any error).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: no connection could be had (the database cannot be
            reached, or the pool had none free within ``pool_timeout``), as
            ``engine.connect()`` raises it: the usual way would only wait again.
    """
    dialect = engine.dialect
    if not lone_reads(dialect) or engine.echo:
        return None
    dispatch = engine.dispatch
    if dispatch.before_cursor_execute or dispatch.after_cursor_execute:
        return None
    if "schema_translate_map" in engine.get_execution_options():
        return None
    plan = plan_of(dialect, stmt)
    if plan is None or plan.writes:
        return None
    try:
        args = plan.args(params)
    except Exception:  # a parameter missing or refused by its type: the usual way says so
        return None
    try:  # no connection: raised, wrapped as engine.connect() wraps it (the usual way would wait again)
        pooled = engine.raw_connection()
    except dialect.loaded_dbapi.Error as exc:
        raise sa.exc.DBAPIError.instance(
            None, None, exc, dialect.loaded_dbapi.Error,
            connection_invalidated=dialect.is_disconnect(exc, None, None), dialect=dialect,
        ) from exc
    try:
        driver = pooled.driver_connection
        if driver is None:
            raise sa.exc.ResourceClosedError("the pooled connection has no driver connection")
        set_lone_read(dialect, driver, True)
        try:
            cursor = driver.cursor()
            try:
                cursor.execute(plan.sql, args)
                rows = cursor.fetchall()
            finally:
                cursor.close()
        finally:
            set_lone_read(dialect, driver, False)
    except Exception:  # the connection may be unusable: never hand it out again
        try:
            pooled.invalidate()
        except Exception:
            pass
        pooled.close()
        return None
    pooled.close()
    if plan.results is None:
        return rows  # type: ignore[no-any-return]
    return [plan.row(row) for row in rows]
