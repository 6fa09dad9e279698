"""Reserved stores are written only through their owners' API: the generic file paths refuse
them, and ``files put --admin`` on the organisation memory runs its owner's rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner, Result

from dbmemory.cli import app
from dbmemory.core.keys import RESERVED_SCOPE
from dbmemory.core.model import StoreRef
from dbmemory.items.audit import audit_events
from dbmemory.items.org import ORG_MEMORY_PATH, read_org_memory, set_org_memory
from dbmemory.store.files import put_file
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import clear_store_files, delete_file, delete_path
from dbmemory.store.owners import ReservedStoreError
from dbmemory.store.trees import import_tree

ORG_KEY = "reserved:org:default"
ORG_REF = StoreRef(store_key=ORG_KEY, scope=RESERVED_SCOPE, agent_code=None, store_code=None)


def _cli(engine: Engine, *args: str) -> Result:
    url = engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(app, [*args, "--url", url], prog_name="dbmemory")


def _org_store_id(engine: Engine) -> int:
    with engine.begin() as conn:
        set_org_memory(conn, "default", "Be polite.", is_admin=True, actor="test")
    with engine.connect() as conn:
        org = read_org_memory(conn, "default")
        assert org.text == "Be polite."
        found = find_store_id(conn, ORG_KEY)
        assert found is not None
        return found


def test_generic_file_functions_refuse_the_organisation_memory_store(engine: Engine, tmp_path: Path) -> None:
    store_id = _org_store_id(engine)
    (tmp_path / "organisation.md").write_text("bypass", encoding="utf-8")
    attempts = [
        lambda c: put_file(c, ORG_REF, ORG_MEMORY_PATH, "bypass"),
        lambda c: put_file(c, store_id, "/memories/other.md", "bypass"),
        lambda c: delete_file(c, store_id, ORG_MEMORY_PATH),
        lambda c: delete_path(c, store_id, ORG_MEMORY_PATH),
        lambda c: clear_store_files(c, store_id),
        lambda c: import_tree(c, store_id, tmp_path, replace=True),
    ]
    for n, attempt in enumerate(attempts):
        with engine.connect() as conn, pytest.raises(ReservedStoreError) as caught:
            with conn.begin():
                attempt(conn)
        assert caught.value.code == "reserved_store", n
        assert "dbmemory.items.set_org_memory" in str(caught.value)
    with engine.connect() as conn:
        assert read_org_memory(conn, "default").text == "Be polite."


def test_generic_file_functions_refuse_a_new_reserved_profile_store(engine: Engine) -> None:
    ref = StoreRef(
        store_key="reserved:profile:user-memory:u-7", scope=RESERVED_SCOPE, agent_code=None,
        store_code="user-memory",
    )
    with engine.connect() as conn, pytest.raises(ReservedStoreError, match="write_profile"):
        with conn.begin():
            put_file(conn, ref, "/memories/memory.md", "x")


def test_cli_files_commands_refuse_the_org_store_and_put_admin_runs_the_owners_rules(engine: Engine) -> None:
    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pytest.skip("each CLI command opens its own engine: an in-memory database is not shared")
    _org_store_id(engine)
    put = ("files", "put", ORG_MEMORY_PATH, "--store", ORG_KEY, "--text")
    for args in (
        (*put, "replaced"),
        ("files", "rm", ORG_MEMORY_PATH, "--store", ORG_KEY),
        ("files", "clear", "--store", ORG_KEY, "--yes"),
    ):
        result = _cli(engine, *args)
        assert result.exit_code != 0, result.output
        assert "dbmemory org-memory edit --admin" in result.output
    big = " ".join(["word"] * 20_000)
    result = _cli(engine, *put, big, "--admin")
    assert result.exit_code == 2 and "budget" in result.output, result.output
    result = _cli(engine, *put, "Acme sells anvils.", "--admin", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["store_key"] == ORG_KEY
    with engine.connect() as conn:
        assert read_org_memory(conn, "default").text == "Acme sells anvils."
        actions = [e.action for e in audit_events(conn, org_id="default")]
    assert actions.count("org_memory_set") == 2
