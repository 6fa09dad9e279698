"""``dbmemory search USER QUERY``: text and --json output, --limit, --scope, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.db.engine import create_engine
from dbmemory.db.migrate import upgrade
from dbmemory.items.episodes import record_episode


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{(tmp_path / 'search.db').as_posix()}"
    engine = create_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        record_episode(conn, "u-1", "My sister married in Porto", "Congratulations")
        record_episode(conn, "u-1", "Porto has good wine", "Indeed")
        record_episode(conn, "u-2", "My sister married in Porto", "ok")
    engine.dispose()
    return url


def invoke(*args: str) -> object:
    return CliRunner().invoke(app, list(args), prog_name="dbmemory")


def test_search_prints_labelled_hits_of_that_user_only(url: str) -> None:
    result = invoke("search", "u-1", "sister porto", "--url", url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 2 and lines[0].startswith("1. [conversation ")
    assert "My sister married in Porto Congratulations" in lines[0]


def test_search_json_and_limit(url: str) -> None:
    result = invoke("search", "u-1", "porto", "--json", "--limit", "1", "--url", url)
    assert result.exit_code == 0, result.output
    (hit,) = json.loads(result.output)
    assert hit["source"] == "episode" and set(hit) >= {"ref", "snippet", "score", "when"}


def test_search_with_a_bad_scope_fails_with_one_line(url: str) -> None:
    result = invoke("search", "u-1", "porto", "--scope", "bad", "--url", url)
    assert result.exit_code == 2
    assert "scope 'bad' is not one of all, episodes, items, profile, files" in result.output


def test_search_without_results_says_so(url: str) -> None:
    result = invoke("search", "u-3", "porto", "--url", url)
    assert result.exit_code == 0 and result.output.startswith("No results for 'porto'")
