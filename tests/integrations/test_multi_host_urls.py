"""A PostgreSQL URL naming several hosts (libpq's ``postgresql://u@h1:5432,h2:5433/db``,
SQLAlchemy's ``?host=h1:5432&host=h2:5433``, libpq's ``?host=h1,h2&port=5432,5433``) is named
host by host in every connection failure, never as ``localhost:5432`` and never with its
password; the libpq form is accepted (SQLAlchemy cannot parse it) and connects to the first host
that answers."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.db.dialect.errors import database_target
from dbmemory.db.engine import create_engine, normalize_url, redact_url
from dbmemory.db.migrate import upgrade
from dbmemory.errors import StorageError

SECRET = "s3cret-Pw-42"
CLOSED = "127.0.0.1:1,127.0.0.1:2"
"""Two loopback ports nothing listens at: refused at once, no network needed."""
FORMS = [
    f"postgresql://app:{SECRET}@127.0.0.1:1,127.0.0.1:2/appdb",
    f"postgresql+psycopg://app:{SECRET}@/appdb?host=127.0.0.1:1&host=127.0.0.1:2",
    f"postgresql://app:{SECRET}@/appdb?host=127.0.0.1,127.0.0.1&port=1,2",
]
IDS = ["libpq-netloc", "sqlalchemy-query", "libpq-query"]


@pytest.mark.parametrize("url", FORMS, ids=IDS)
def test_the_target_names_every_host_of_the_url(url: str) -> None:
    assert database_target(normalize_url(url)) == f"{CLOSED}/appdb"
    assert SECRET not in redact_url(url) and "<unparseable URL>" != redact_url(url)


def test_a_socket_folder_and_hosts_without_ports_are_named_too() -> None:
    assert database_target(sa.make_url("postgresql+psycopg://u@/db?host=/run/postgresql")) == (
        "/run/postgresql (socket)/db"
    )
    assert database_target(sa.make_url("postgresql+psycopg://u@/db?host=h1,h2")) == "h1:5432,h2:5432/db"
    assert database_target(sa.make_url("postgresql+psycopg://u@h/db")) == "h:5432/db"


@pytest.mark.parametrize("url", FORMS, ids=IDS)
def test_python_raises_a_storage_error_naming_the_hosts_not_localhost(url: str) -> None:
    engine = create_engine(url)
    try:
        with pytest.raises(StorageError) as caught:
            upgrade(engine)
    finally:
        engine.dispose()
    message = str(caught.value)
    assert caught.value.code == "connect_failed", message
    assert f"(database: {CLOSED}/appdb)" in message, message
    assert "nothing accepts connections at any host and port in the URL" in message, message
    assert "localhost" not in message and SECRET not in message


@pytest.mark.parametrize("url", FORMS, ids=IDS)
def test_the_cli_names_the_hosts_without_the_password(url: str) -> None:
    result = CliRunner().invoke(app, ["files", "ls", "--url", url], prog_name="dbmemory")
    assert result.exit_code == 1, result.output
    assert f"(database: {CLOSED}/appdb)" in result.output, result.output
    assert "localhost" not in result.output and SECRET not in result.output
    assert "could not be parsed" not in result.output


def test_the_libpq_form_connects_to_the_first_host_that_answers() -> None:
    live = os.environ.get("DBMEMORY_TEST_POSTGRES_URL")
    if not live:
        pytest.skip("set DBMEMORY_TEST_POSTGRES_URL")
    server = sa.make_url(live)
    auth = server.username + (f":{server.password}" if server.password else "")
    url = f"postgresql://{auth}@127.0.0.1:1,{server.host}:{server.port or 5432}/{server.database}"
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        engine.dispose()
