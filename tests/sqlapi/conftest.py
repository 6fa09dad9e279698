"""Fixtures of the in-database API tests: the server backends that have it, and an installed
client of its calls per test database."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine

from backends import BACKENDS  # noqa: E402
from dbmemory.sqlgen.api import api_statements
from sql_api_client import SqlApi

_INSTALLED: set[str] = set()


@pytest.fixture(params=[p for p in BACKENDS if p.values[0] in ("postgres", "mysql", "oracle")])
def server_name(request: pytest.FixtureRequest, _backends: Any) -> str:
    """PostgreSQL and MariaDB (required in CI), and Oracle when DBMEMORY_TEST_ORACLE_URL is
    set (skipped otherwise): the conformance cases run on each."""
    _backends.engine(request.param)
    return request.param


def _folder(server_name: str) -> str:
    return {"postgres": "postgresql", "mysql": "mysql", "oracle": "oracle"}[server_name]


@pytest.fixture
def api(server_engine: Engine, server_name: str) -> SqlApi:
    key = str(server_engine.url)
    if key not in _INSTALLED:
        with server_engine.connect() as c:
            dbapi = c.connection.dbapi_connection
            cursor = dbapi.cursor()
            try:
                for statement in api_statements(_folder(server_name)):
                    cursor.execute(statement)
            finally:
                cursor.close()
            dbapi.commit()
        _INSTALLED.add(key)
    return SqlApi(server_name)


