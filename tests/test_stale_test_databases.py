"""A killed test run's ``dbmt_<pid>_*`` databases are dropped by the next run; a live run's stay."""

from __future__ import annotations

import os

import pytest

from backends import SERVERS, _admin_engine, _drop_stale_databases
from dbmemory.db.engine import normalize_url


@pytest.mark.parametrize("server_name", ["postgres", "mysql"])
def test_stale_databases_of_dead_runs_are_dropped_and_live_ones_kept(server_name: str) -> None:
    server = SERVERS[server_name]
    if not os.environ.get(server.env_var):
        pytest.skip(f"{server.display} backend unavailable: set {server.env_var}")
    dead, live = "dbmt_99999999_deadbeef", f"dbmt_{os.getpid()}_stalecheck"
    admin = _admin_engine(normalize_url(os.environ[server.env_var]))
    quote = '"' if server_name == "postgres" else "`"
    try:
        with admin.connect() as c:
            for name in (dead, live):
                c.exec_driver_sql(f"DROP DATABASE IF EXISTS {quote}{name}{quote}")
                c.exec_driver_sql(f"CREATE DATABASE {quote}{name}{quote}")
            _drop_stale_databases(server, c)
            if server_name == "postgres":
                names = set(c.exec_driver_sql("SELECT datname FROM pg_database").scalars())
            else:
                names = set(c.exec_driver_sql("SHOW DATABASES").scalars())
            assert dead not in names and live in names
            c.exec_driver_sql(f"DROP DATABASE IF EXISTS {quote}{live}{quote}")
    finally:
        admin.dispose()
