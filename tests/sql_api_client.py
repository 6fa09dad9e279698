"""A Python client of the in-database API (sql/<dialect>/api.sql) for the tests: calls, error
mapping, the audit rows and the logins that call it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.errors import (
    DbMemoryError,
)
from dbmemory.sqlgen.api_common import API_ERRORS


class ApiError(Exception):
    """A documented error of the SQL API, by its code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.python = {e.name: e.python for e in API_ERRORS}[code]


class SqlApi:
    """Calls of the SQL API on a Connection (in its transaction)."""

    def __init__(self, server_name: str) -> None:
        self.pg = server_name == "postgres"
        self.ora = server_name == "oracle"

    def _oracle(self, conn: Connection, call: str, params: dict[str, Any]) -> Any:
        """``:r := dbm_memory.<call>`` in an anonymous block on the raw driver (CLOB binds)."""
        import oracledb

        cursor = conn.connection.dbapi_connection.cursor()
        try:
            result = cursor.var(oracledb.DB_TYPE_CLOB if "get_" in call else oracledb.DB_TYPE_NUMBER)
            if "t" in params:
                cursor.setinputsizes(t=oracledb.DB_TYPE_CLOB)
            cursor.execute(f"BEGIN :r := {call}; END;", {**params, "r": result})
            value = result.getvalue()
            return value.read() if hasattr(value, "read") else value
        except oracledb.DatabaseError as exc:
            api_error = code_of(exc)
            if api_error is None:
                raise
            raise api_error from exc
        finally:
            cursor.close()

    def _run(self, conn: Connection, pg: str, my: str, params: dict[str, Any], out: str | None = None) -> Any:
        if self.ora:
            call = pg.replace("SELECT ", "", 1).replace("CAST(:d AS numeric)", ":d").replace("CAST(:s AS bigint)", ":s")
            # the Oracle package keeps the reference names for its procedures: dbmemory's
            # NUMBER-returning functions are the *_n ones
            call = re.sub(r"^dbm_memory\.(resolve_store_id|put_file|delete_file|clear_store_files|"
                          r"enable_for_agent|disable_for_agent|expire_files)\(", r"dbm_memory.\1_n(", call)
            params = {k: (int(v) if isinstance(v, bool) else v) for k, v in params.items()}
            value = self._oracle(conn, call, params)
            return "" if value is None and "get_" in call else value
        try:
            if self.pg:
                with conn.begin_nested():  # an error aborts the caller's transaction otherwise
                    result = conn.execute(sa.text(pg), params)
                    return result.scalar() if result.returns_rows else None
            result = conn.execute(sa.text(my), params)
            if out:
                return conn.execute(sa.text(f"SELECT {out}")).scalar()
            return result.scalar() if result.returns_rows else None
        except sa.exc.DBAPIError as exc:
            api_error = code_of(exc)
            if api_error is None:
                raise
            raise api_error from exc

    def serve(self, conn: Connection, user_id: str | None) -> None:
        """Name the user the session's next calls serve (a user-scope store is reachable only
        with its user named, on MariaDB/MySQL whoever calls): PostgreSQL's setting
        ``dbm_memory.user_id`` for the transaction, MariaDB's ``@dbm_memory_user_id``, Oracle's
        ``dbm_memory.set_user`` (None: ``clear_user``)."""
        if self.ora:
            cursor = conn.connection.dbapi_connection.cursor()
            try:
                if user_id is None:
                    cursor.execute("BEGIN dbm_memory.clear_user; END;")
                else:
                    cursor.execute("BEGIN dbm_memory.set_user(:u); END;", {"u": user_id})
            finally:
                cursor.close()
        elif self.pg:
            conn.execute(sa.text("SELECT set_config('dbm_memory.user_id', :u, true)"),
                         {"u": user_id or ""})
        else:
            conn.execute(sa.text("SET @dbm_memory_user_id = :u"), {"u": user_id})

    def put(self, conn: Connection, store_id: Any, path: Any, text: Any, actor: str = "admin") -> int:
        return int(self._run(
            conn, "SELECT dbm_memory.put_file(:s, :p, :t, :a)",
            "CALL dbm_memory_put_file(:s, :p, :t, :a, @dbm_v)",
            {"s": store_id, "p": path, "t": text, "a": actor}, "@dbm_v"))

    def get(self, conn: Connection, store_id: Any, path: Any) -> str:
        return self._run(conn, "SELECT dbm_memory.get_file(:s, :p)",
                         "SELECT dbm_memory_get_file(:s, :p)", {"s": store_id, "p": path})

    def delete(self, conn: Connection, store_id: Any, path: Any) -> bool:
        return bool(self._run(conn, "SELECT dbm_memory.delete_file(:s, :p)",
                              "CALL dbm_memory_delete_file(:s, :p, NULL, @dbm_d)",
                              {"s": store_id, "p": path}, "@dbm_d"))

    def clear(self, conn: Connection, store_id: Any) -> int:
        return int(self._run(conn, "SELECT dbm_memory.clear_store_files(:s)",
                             "CALL dbm_memory_clear_store_files(:s, NULL, @dbm_c)",
                             {"s": store_id}, "@dbm_c"))

    def listing(self, conn: Connection, store_id: Any) -> list[tuple[Any, ...]]:
        try:
            if self.ora:
                rows = conn.execute(sa.text(
                    "SELECT path, chars, version FROM TABLE(dbm_memory.list_files(:s))"), {"s": store_id})
            elif self.pg:
                with conn.begin_nested():  # an error aborts the caller's transaction otherwise
                    rows = conn.execute(sa.text("SELECT * FROM dbm_memory.list_files(:s)"), {"s": store_id}).all()
            else:
                rows = conn.execute(sa.text("CALL dbm_memory_list_files(:s)"), {"s": store_id})
            return [tuple(r)[:3] for r in rows]
        except sa.exc.DBAPIError as exc:
            api_error = code_of(exc)
            if api_error is None:
                raise
            raise api_error from exc

    def resolve(self, conn: Connection, **parts: Any) -> int:
        names = ("scope", "agent_code", "user_id", "session_id", "store_code", "context_key", "context_value")
        params = {n: parts.get(n) for n in names}
        args = ", ".join(f":{n}" for n in names)
        return int(self._run(conn, f"SELECT dbm_memory.resolve_store_id({args})",
                             f"SELECT dbm_memory_resolve_store_id({args})", params))

    def open(self, conn: Connection, **parts: Any) -> int:
        names = ("scope", "agent_code", "user_id", "session_id", "store_code", "context_key", "context_value")
        params = {n: parts.get(n) for n in names}
        args = ", ".join(f":{n}" for n in names)
        return int(self._run(conn, f"SELECT dbm_memory.open_store({args})",
                             f"CALL dbm_memory_open_store({args}, @dbm_o)", params, "@dbm_o"))

    def enable(self, conn: Connection, agent: str, scope: str = "agent", store_code: str | None = None,
               context_key: str | None = None, max_file_chars: int | None = None,
               max_files: int | None = None, max_store_chars: int | None = None) -> int:
        params = {"a": agent, "sc": scope, "c": store_code, "k": context_key,
                  "f": max_file_chars, "n": max_files, "m": max_store_chars}
        return int(self._run(conn, "SELECT dbm_memory.enable_for_agent(:a, :sc, :c, :k, :f, :n, :m)",
                             "CALL dbm_memory_enable_for_agent(:a, :sc, :c, :k, :f, :n, :m, @dbm_e)",
                             params, "@dbm_e"))

    def disable(self, conn: Connection, agent: str, drop_store: bool = False) -> int:
        return int(self._run(conn, "SELECT dbm_memory.disable_for_agent(:a, :d)",
                             "CALL dbm_memory_disable_for_agent(:a, :d, @dbm_x)",
                             {"a": agent, "d": drop_store}, "@dbm_x"))

    def expire(self, conn: Connection, days: float, store_id: int | None = None) -> int:
        return int(self._run(conn, "SELECT dbm_memory.expire_files(CAST(:d AS numeric), CAST(:s AS bigint))",
                             "CALL dbm_memory_expire_files(:d, :s, @dbm_n)",
                             {"d": days, "s": store_id}, "@dbm_n"))

    def protocol(self, conn: Connection) -> str:
        return self._run(conn, "SELECT dbm_memory.get_memory_protocol()",
                         "SELECT dbm_memory_get_memory_protocol()", {})


def error_class(fn: Callable[[], Any]) -> type[DbMemoryError] | None:
    try:
        fn()
    except ApiError as exc:
        return exc.python
    except DbMemoryError as exc:
        return type(exc) if type(exc) in {e.python for e in API_ERRORS} else exc.__class__.__mro__[1]
    return None


def audit(conn: Connection, store_id: int | None = None) -> list[tuple[Any, ...]]:
    rows = conn.execute(sa.text(
        "SELECT store_key, file_path, action_name, actor_name, chars_before, chars_after, detail_text"
        " FROM dbm_audit_events" + ("" if store_id is None else f" WHERE store_id = {int(store_id)}")
    )).all()
    return sorted((tuple("" if v is None else v for v in r) for r in rows), key=repr)


def code_of(exc: BaseException) -> ApiError | None:
    orig = getattr(exc, "orig", exc)
    state = getattr(orig, "sqlstate", None)
    first = orig.args[0] if getattr(orig, "args", None) else None
    number = getattr(first, "code", first)  # oracledb: args[0].code is 20701 for ORA-20701
    for e in API_ERRORS:
        if state == e.sqlstate or number == e.number:
            return ApiError(e.name, str(orig))
    return None


def missing_store_text(dialect_name: str, store_id: int) -> str:
    """What the API answers for a store id with no store: the precise text for a caller that is
    not bound (the PostgreSQL and Oracle test logins can act as the API's owner), the other-user
    text on MariaDB/MySQL, where every caller is bound to its stores."""
    if dialect_name in ("mysql", "mariadb"):
        return f"store {store_id} does not exist or belongs to another user than this session's"
    return f"store {store_id} does not exist: check the store id"


def create_login(engine: sa.engine.Engine, server_name: str, name: str, role: str) -> None:
    """A LOGIN ``name`` holding only ``role`` (MariaDB/MySQL: ``'name'@'%'``, the role as its
    default role), created through ``engine`` (an account that may create logins)."""
    with engine.begin() as c:
        if server_name == "postgres":
            c.exec_driver_sql(f'CREATE ROLE "{name}" LOGIN')
            c.exec_driver_sql(f'GRANT "{role}" TO "{name}"')
        else:
            c.exec_driver_sql(f"CREATE USER '{name}'@'%%'")
            c.exec_driver_sql(f"GRANT {role} TO '{name}'@'%%'")
            c.exec_driver_sql(f"SET DEFAULT ROLE {role} FOR '{name}'@'%%'")
