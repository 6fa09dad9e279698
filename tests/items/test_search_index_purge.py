"""After ``dbmemory users forget`` commits, the deleted episodes' words are gone from the
full-text index itself, not only filtered out of searches: on MariaDB/MySQL InnoDB keeps a
deleted row's words in its ``FULLTEXT`` index (``INNODB_FT_INDEX_CACHE`` / ``_TABLE``, the row
listed in ``INNODB_FT_DELETED``) until ``OPTIMIZE TABLE``, which commits, so the Python
``forget_user`` (in the caller's transaction) cannot run it: the CLI runs it after its commit,
and ``dbmemory db optimize-search`` does on demand. Every backend answers both commands."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.engine import Connection, Engine
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.items.admin import forget_user
from dbmemory.items.episodes import (
    SEARCH_PURGE_STATEMENT,
    purge_search_index_committing,
    record_episode,
)

WORDS = ("zorblattword", "quuxwordy")


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _record(engine: Engine, user: str = "ft-u1") -> None:
    with engine.begin() as conn:
        for n in range(3):
            record_episode(conn, user, f"my {WORDS[0]} secret number {n}", f"noted {WORDS[1]} {n}", chat_id="c1")


def _innodb_words(conn: Connection, engine: Engine) -> tuple[set[str], int]:
    """(the test words in the index's cache and tables, the rows InnoDB lists as deleted)."""
    conn.exec_driver_sql(f"SET GLOBAL innodb_ft_aux_table = '{engine.url.database}/dbm_episodes'")
    found: set[str] = set()
    for table in ("INNODB_FT_INDEX_CACHE", "INNODB_FT_INDEX_TABLE"):
        rows = conn.exec_driver_sql(
            f"SELECT word FROM information_schema.{table} WHERE word IN ('{WORDS[0]}', '{WORDS[1]}')"
        ).all()
        found |= {str(row[0]) for row in rows}
    deleted = sum(
        int(conn.exec_driver_sql(f"SELECT count(*) FROM information_schema.{t}").scalar_one())
        for t in ("INNODB_FT_DELETED", "INNODB_FT_BEING_DELETED")
    )
    return found, deleted


def test_mariadb_the_cli_forget_removes_the_words_from_the_fulltext_index(engine: Engine, backend_name: str) -> None:
    if backend_name != "mysql":
        pytest.skip("InnoDB FULLTEXT keeps deleted words; the other engines do not")
    purge_search_index_committing(engine)  # start from an index with nothing pending
    _record(engine, "ft-keep")
    _record(engine)
    with engine.connect() as conn:
        assert _innodb_words(conn, engine)[0] == set(WORDS)
    result = CliRunner().invoke(app, ["users", "forget", "ft-u1", "--yes", "--json", "--url", _url(engine)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["episodes"] == 3 and out["search_index_purged"] is True
    with engine.connect() as conn:
        words, deleted = _innodb_words(conn, engine)
    assert deleted == 0
    assert words == set(WORDS)  # ft-keep's episodes hold the same words and stay
    CliRunner().invoke(app, ["users", "forget", "ft-keep", "--yes", "--url", _url(engine)])
    with engine.connect() as conn:
        assert _innodb_words(conn, engine) == (set(), 0)


def test_mariadb_the_python_forget_leaves_the_words_until_the_purge_runs(engine: Engine, backend_name: str) -> None:
    if backend_name != "mysql":
        pytest.skip("InnoDB FULLTEXT keeps deleted words; the other engines do not")
    purge_search_index_committing(engine)
    _record(engine)
    with engine.begin() as conn:
        assert forget_user(conn, "ft-u1")["episodes"] == 3
    with engine.connect() as conn:
        words, deleted = _innodb_words(conn, engine)
    assert words == set(WORDS) and deleted == 3  # what the docs say stays, until the purge
    assert purge_search_index_committing(engine) == SEARCH_PURGE_STATEMENT
    with engine.connect() as conn:
        assert _innodb_words(conn, engine) == (set(), 0)


def test_every_backend_answers_the_forget_and_the_maintenance_command(engine: Engine, backend_name: str) -> None:
    if backend_name == "sqlite-memory":
        pytest.skip("the CLI opens its own connection: an in-memory database is not shared")
    _record(engine)
    result = CliRunner().invoke(app, ["users", "forget", "ft-u1", "--yes", "--json", "--url", _url(engine)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["search_index_purged"] is (backend_name == "mysql")
    result = CliRunner().invoke(app, ["db", "optimize-search", "--json", "--url", _url(engine)])
    assert result.exit_code == 0, result.output
    expected = {"mysql": SEARCH_PURGE_STATEMENT, "sqlite-file": "FTS5 optimize"}.get(backend_name)
    assert json.loads(result.stdout) == {"statement": expected}
