"""The in-database API refuses what the Python API refuses, on every server: a fractional store
id or cap never lands on a neighbouring integer (MariaDB's BIGINT parameters round 5.6 to 6), and
two transactions configuring one agent at once get the documented conflict, never a raw
unique-key error."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.db.dialect.oracle import oracle19_dialect
from dbmemory.sqlgen.deploy import ORACLE_ERRORS_QUERY, oracle_compile_report
from dbmemory.sqlgen.mysql.rules import MYSQL_AUTOCOMMIT_RULE, NEED_TRX
from dbmemory.sqlgen.oracle.api import oracle_statements
from sql_api_client import ApiError, SqlApi


def _file_count(engine: Engine) -> int:
    with engine.connect() as c:
        return int(c.execute(sa.text("SELECT COUNT(*) FROM dbm_files")).scalar())


@pytest.mark.parametrize("bad", [5.6, "5.6", 5.5, "6.000001", 0.4])
def test_a_fractional_store_id_is_refused_and_writes_nothing(
    server_engine: Engine, api: SqlApi, server_name: str, bad: Any
) -> None:
    with server_engine.begin() as c:
        for user in ("u5", "u6"):  # stores 5 and 6, or whatever ids they get, side by side
            api.serve(c, user)
            sid = api.open(c, scope="user", agent_code="HOLES", user_id=user)
            api.put(c, sid, "/memories/own.md", user)
    before = _file_count(server_engine)
    with server_engine.connect() as c:
        c.exec_driver_sql("START TRANSACTION" if server_name == "mysql" else "BEGIN")
        for call in (lambda: api.put(c, bad, "/memories/x.md", "lost"),
                     lambda: api.delete(c, bad, "/memories/own.md"),
                     lambda: api.clear(c, bad),
                     lambda: api.get(c, bad, "/memories/own.md")):
            with pytest.raises((ApiError, sa.exc.DBAPIError)) as caught:
                call()
            if isinstance(caught.value, ApiError):
                assert caught.value.code == "invalid_argument", caught.value
                assert "must be a whole number" in str(caught.value)
            elif server_name == "postgres":
                c.rollback()  # a bigint parameter: PostgreSQL itself refuses the number
                c.exec_driver_sql("BEGIN")
        c.commit()
    assert _file_count(server_engine) == before


def test_the_path_rule_names_a_code_point_past_the_bmp_in_full(
    server_engine: Engine, api: SqlApi, server_name: str
) -> None:
    """U+1F600 (an emoji) is named U+1F600, not cut to four digits (U+1F60)."""
    with server_engine.connect() as c:
        c.exec_driver_sql("START TRANSACTION" if server_name == "mysql" else "BEGIN")
        sid = api.open(c, scope="shared", store_code="emoji")
        with pytest.raises(ApiError) as caught:
            api.put(c, sid, "/memories/\U0001f600.md", "x")
        assert caught.value.code == "invalid_path" and "U+1F600 " in str(caught.value), caught.value
        c.rollback()


def test_a_fractional_cap_is_refused(server_engine: Engine, api: SqlApi, server_name: str) -> None:
    with server_engine.connect() as c:
        c.exec_driver_sql("START TRANSACTION" if server_name == "mysql" else "BEGIN")
        with pytest.raises((ApiError, sa.exc.DBAPIError)) as caught:
            api.enable(c, "HOLESCAP", max_files=1.5)  # type: ignore[arg-type]
        if isinstance(caught.value, ApiError):
            assert caught.value.code == "invalid_argument"
            assert "max_files=1.5" in str(caught.value)
        c.rollback()
    with server_engine.connect() as c:
        assert c.execute(sa.text("SELECT COUNT(*) FROM dbm_agents WHERE agent_code = 'HOLESCAP'")).scalar() == 0


def test_two_transactions_enabling_one_agent_get_a_conflict_not_a_raw_unique_error(
    server_engine: Engine, api: SqlApi, server_name: str
) -> None:
    agent = "RACE"
    first = server_engine.connect()
    second = server_engine.connect()
    outcome: dict[str, Any] = {}
    try:
        first.exec_driver_sql("START TRANSACTION" if server_name == "mysql" else "BEGIN")
        api.enable(first, agent, max_files=7)  # inserted, not committed

        def other() -> None:
            try:
                second.exec_driver_sql("START TRANSACTION" if server_name == "mysql" else "BEGIN")
                api.enable(second, agent, max_files=9)  # waits for the first one's row
                second.commit()
                outcome["result"] = "saved"
            except ApiError as exc:
                outcome["result"] = exc.code
                second.rollback()
            except Exception as exc:  # noqa: BLE001 - the raw error is what the test looks for
                outcome["result"] = repr(exc)
                second.rollback()

        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(0.5)  # the second transaction is waiting on the first one's insert
        first.commit()
        thread.join(30)
    finally:
        first.close()
        second.close()
    # PostgreSQL: the second insert meets the committed key; MariaDB's locking read waits for the
    # first row and updates it
    assert outcome["result"] in ({"conflict"} if server_name == "postgres" else {"conflict", "saved"})


def test_mysql_writers_refuse_autocommit_where_no_open_transaction_can_be_seen() -> None:
    """MySQL 8 (not run here: CI has MariaDB) refuses every writer called with autocommit on;
    MariaDB keeps telling an open START TRANSACTION apart (the conformance cases run it)."""
    mariadb, _, mysql = NEED_TRX.partition("ELSEIF @@autocommit = 1 THEN")
    assert "VERSION() LIKE '%MariaDB%'" in mariadb and "@@in_transaction" in mariadb
    assert MYSQL_AUTOCOMMIT_RULE in mysql and "@@in_transaction" not in mysql


def test_oracle_key_lookups_compare_bytes_whatever_the_session_nls_settings() -> None:
    """Compiled and reviewed, not run (no Oracle here): every SQL comparison of a key column in
    the package also compares the RAW bytes, so NLS_COMP = LINGUISTIC with a case-insensitive
    NLS_SORT cannot make user:SUPPORT:alice find ALICE's store."""
    _, body = oracle_statements()
    plain = re.findall(
        r"(?:WHERE|AND|OR) \(*((?:[a-z]\.)?(?:store_key|agent_code|store_code|context_key|scope_name)) = (?![^\n]*CAST_TO_RAW)",
        body)
    assert plain == []
    assert body.count("UTL_RAW.CAST_TO_RAW(s.store_key)") >= 3
    assert "(store_key = v_key AND UTL_RAW.CAST_TO_RAW(store_key) = UTL_RAW.CAST_TO_RAW(v_key))" in body


def test_oracle_install_reads_user_errors_and_reports_them() -> None:
    """Not run on a live Oracle: the query compiles for 19c and the report names each error
    (python-oracledb turns ORA-24344 into warning DPY-7000, so nothing else would)."""
    compiled = str(sa.text(ORACLE_ERRORS_QUERY).compile(dialect=oracle19_dialect()))
    assert "user_errors" in compiled and "LIMIT" not in compiled
    rows = [("PACKAGE BODY", 12, 5, "PL/SQL: ORA-00942: table or view does not exist\n")] * 12
    report = oracle_compile_report(rows)
    assert report.startswith("package DBM_MEMORY did not compile (12 error(s) in USER_ERRORS)")
    assert "PACKAGE BODY line 12, column 5: PL/SQL: ORA-00942" in report
    assert report.count("ORA-00942") == 10 and report.endswith("... and 2 more")
