"""The reference PL/SQL memory API's call shapes (docs/sql-api.md, "The reference PL/SQL API").

Oracle: read, never run (no Oracle server here): the package spec declares the reference
procedures and functions with the reference names, parameter order, defaults and types, each
name once (a procedure and a function of the same parameters would be ambiguous, PLS-00307), and
the body passes the caps by name and raises the reference error numbers. PostgreSQL and MariaDB:
the shapes they share with the reference API, called as a reference user writes them."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

import dbmemory
from dbmemory.sqlgen.oracle.api import oracle_statements
from sql_api_client import SqlApi

_REFERENCE = {
    "enable_for_agent": ("PROCEDURE", [
        ("p_agent_code", "VARCHAR2", None), ("p_scope", "VARCHAR2", "c_scope_agent"),
        ("p_store_code", "VARCHAR2", "NULL"), ("p_context_key", "VARCHAR2", "NULL"),
        ("p_update_profile", "BOOLEAN", "TRUE"), ("p_max_file_chars", "NUMBER", "NULL"),
        ("p_max_store_chars", "NUMBER", "NULL"), ("p_max_files", "NUMBER", "NULL")]),
    "disable_for_agent": ("PROCEDURE", [
        ("p_agent_code", "VARCHAR2", None), ("p_remove_tool_tag", "BOOLEAN", "TRUE"),
        ("p_drop_store", "BOOLEAN", "FALSE")]),
    "put_file": ("PROCEDURE", [("p_store_id", "NUMBER", None), ("p_path", "VARCHAR2", None),
                               ("p_content", "CLOB", None)]),
    "delete_file": ("PROCEDURE", [("p_store_id", "NUMBER", None), ("p_path", "VARCHAR2", None)]),
    "clear_store_files": ("PROCEDURE", [("p_store_id", "NUMBER", None)]),
    "expire_files": ("PROCEDURE", [("p_days", "NUMBER", None), ("p_store_id", "NUMBER", "NULL")]),
    "resolve_store_id": ("FUNCTION", [
        ("p_scope", "VARCHAR2", None), ("p_agent_code", "VARCHAR2", "NULL"),
        ("p_store_code", "VARCHAR2", "NULL"), ("p_context_key", "VARCHAR2", "NULL"),
        ("p_context_value", "VARCHAR2", "NULL"), ("p_user_id", "VARCHAR2", "NULL"),
        ("p_session_id", "VARCHAR2", "NULL")]),
    "get_file": ("FUNCTION", [("p_store_id", "NUMBER", None), ("p_path", "VARCHAR2", None)]),
    "list_files": ("FUNCTION", [("p_store_id", "NUMBER", None)]),
    "set_store": ("PROCEDURE", [("p_store_code", "VARCHAR2", None)]),
    "clear_store": ("PROCEDURE", []),
    "get_memory_protocol": ("FUNCTION", []),
}

_DECL = re.compile(r"^  (PROCEDURE|FUNCTION) (\w+)\s*(\((.*?)\))?\s*(RETURN\b[^;]*)?;", re.M | re.S)


def _spec_declarations() -> dict[str, list[tuple[str, list[tuple[str, str, str | None]]]]]:
    spec, _ = oracle_statements()
    found: dict[str, list[tuple[str, list[tuple[str, str, str | None]]]]] = {}
    for kind, name, _, params, _ in _DECL.findall(spec):
        parsed = []
        for param in filter(None, (p.strip() for p in params.split(","))):
            m = re.fullmatch(r"(\w+)\s+IN\s+(\w+)(?:\s+DEFAULT\s+(\S+))?", param)
            assert m, param
            parsed.append((m.group(1), m.group(2), m.group(3)))
        found.setdefault(name, []).append((kind, parsed))
    return found


def test_oracle_spec_declares_each_reference_call_with_the_reference_shape_once() -> None:
    declared = _spec_declarations()
    for name, (kind, params) in _REFERENCE.items():
        assert declared.get(name) == [(kind, params)], name
    # dbmemory's own NUMBER forms stay, under names of their own
    for name in ("enable_for_agent", "disable_for_agent", "put_file", "delete_file",
                 "clear_store_files", "expire_files", "resolve_store_id"):
        assert [k for k, _ in declared[f"{name}_n"]] == ["FUNCTION"], name
    for name, forms in declared.items():
        assert len(forms) == 1, f"{name} is declared {len(forms)} times (ambiguous calls)"
    spec, _ = oracle_statements()
    for scope in ("agent", "user", "session", "shared", "global", "context"):
        assert re.search(rf"c_scope_{scope}\s+CONSTANT VARCHAR2\(10\) := '{scope}';", spec)
    assert "PRAGMA EXCEPTION_INIT(e_store_not_found, -20423);" in spec
    assert "PRAGMA EXCEPTION_INIT(e_missing_context, -20426);" in spec


def _body_of(name: str) -> str:
    _, body = oracle_statements()
    m = re.search(rf"^  (?:PROCEDURE|FUNCTION) {name}\b.*?^  END {name};", body, re.M | re.S)
    assert m, name
    return m.group(0)


def test_oracle_reference_procedures_pass_the_caps_by_name_and_raise_the_reference_errors() -> None:
    enable = _body_of("enable_for_agent")
    # the reference order is max_file_chars, max_store_chars, max_files; dbmemory's is
    # max_file_chars, max_files, max_store_chars: positional passing would swap two caps
    for cap in ("p_max_file_chars", "p_max_files", "p_max_store_chars"):
        assert f"{cap} => {cap}" in enable
    assert "RAISE_APPLICATION_ERROR(-20426" in enable
    resolve = _body_of("resolve_store_id")
    assert "WHEN e_not_found THEN\n      RAISE_APPLICATION_ERROR(-20423" in resolve
    assert "RAISE_APPLICATION_ERROR(-20426" in resolve
    # dbmemory's order of the key parts: user id and session id before the store code
    assert "resolve_store_id_n(p_scope, p_agent_code, p_user_id, p_session_id, v_code," in resolve
    assert "v_code := g_store_code;" in resolve
    disable = _body_of("disable_for_agent")
    assert "CASE WHEN p_drop_store THEN 1 WHEN NOT p_drop_store THEN 0 END" in disable
    assert "put_file_n(p_store_id, p_path, p_content," in _body_of("put_file")
    assert "g_store_code := component(p_store_code" in _body_of("set_store")
    assert "g_store_code := NULL;" in _body_of("clear_store")


@pytest.fixture
def shared_calls(server_engine: Engine, server_name: str, api: SqlApi) -> tuple[Engine, str]:
    if server_name == "oracle":
        pytest.skip("Oracle is checked by reading (the two tests above)")
    return server_engine, server_name


def test_reference_shaped_file_calls_run_on_postgresql_and_mariadb(shared_calls: tuple[Engine, str]) -> None:
    """put_file(store_id, path, content), get_file, list_files, delete_file, clear_store_files,
    expire_files(days, store_id) and get_memory_protocol in the reference order."""
    engine, server = shared_calls
    pg = server == "postgres"
    with engine.begin() as c:
        if pg:
            sid = c.execute(sa.text("SELECT dbm_memory.open_store('agent', 'REFQ')")).scalar()
            c.execute(sa.text("SELECT dbm_memory.put_file(:s, '/memories/a.md', 'alpha')"), {"s": sid})
            c.execute(sa.text("SELECT dbm_memory.put_file(p_store_id => :s, p_path => '/memories/b.md', "
                              "p_text => 'beta')"), {"s": sid})
            got = c.execute(sa.text("SELECT dbm_memory.get_file(:s, '/memories/a.md')"), {"s": sid}).scalar()
            paths = c.execute(sa.text("SELECT path FROM dbm_memory.list_files(:s)"), {"s": sid}).scalars().all()
            found = c.execute(sa.text("SELECT dbm_memory.resolve_store_id(p_scope => 'agent', "
                                      "p_agent_code => 'REFQ')")).scalar()
            c.execute(sa.text("SELECT dbm_memory.delete_file(:s, '/memories/a.md')"), {"s": sid})
            after_delete = c.execute(sa.text("SELECT count(*) FROM dbm_memory.list_files(:s)"), {"s": sid}).scalar()
            c.execute(sa.text("SELECT dbm_memory.clear_store_files(:s)"), {"s": sid})
            c.execute(sa.text("SELECT dbm_memory.expire_files(30, :s)"), {"s": sid})
            after_clear = c.execute(sa.text("SELECT count(*) FROM dbm_memory.list_files(:s)"), {"s": sid}).scalar()
            protocol = c.execute(sa.text("SELECT dbm_memory.get_memory_protocol()")).scalar()
        else:
            c.execute(sa.text("CALL dbm_memory_open_store('agent', 'REFQ', NULL, NULL, NULL, NULL, NULL, @s)"))
            sid = c.execute(sa.text("SELECT @s")).scalar()
            c.execute(sa.text("CALL dbm_memory_put_file(@s, '/memories/a.md', 'alpha', NULL, @v)"))
            c.execute(sa.text("CALL dbm_memory_put_file(@s, '/memories/b.md', 'beta', NULL, @v)"))
            got = c.execute(sa.text("SELECT dbm_memory_get_file(@s, '/memories/a.md')")).scalar()
            paths = [r[0] for r in c.execute(sa.text("CALL dbm_memory_list_files(@s)"))]
            found = c.execute(sa.text("SELECT dbm_memory_resolve_store_id('agent', 'REFQ', NULL, NULL, "
                                      "NULL, NULL, NULL)")).scalar()
            c.execute(sa.text("CALL dbm_memory_delete_file(@s, '/memories/a.md', NULL, @d)"))
            after_delete = len(list(c.execute(sa.text("CALL dbm_memory_list_files(@s)"))))
            c.execute(sa.text("CALL dbm_memory_clear_store_files(@s, NULL, @d)"))
            c.execute(sa.text("CALL dbm_memory_expire_files(30, @s, @d)"))
            after_clear = len(list(c.execute(sa.text("CALL dbm_memory_list_files(@s)"))))
            protocol = c.execute(sa.text("SELECT dbm_memory_get_memory_protocol()")).scalar()
        assert got == "alpha"
        assert paths == ["/memories/a.md", "/memories/b.md"]
        assert found == sid
        assert (after_delete, after_clear) == (1, 0)
        assert protocol == dbmemory.get_memory_protocol()


def test_enable_for_agent_with_the_caps_named_in_the_reference_order_sets_each_cap(
    shared_calls: tuple[Engine, str],
) -> None:
    """On PostgreSQL a reference call that names its caps (reference order: file chars, store
    chars, files) sets each cap to its own value; MariaDB has no named arguments, so its call is
    positional in dbmemory's order (docs: the mapping table)."""
    engine, server = shared_calls
    with engine.begin() as c:
        if server == "postgres":
            c.execute(sa.text(
                "SELECT dbm_memory.enable_for_agent(p_agent_code => 'REFC', p_scope => 'agent', "
                "p_max_file_chars => 1000, p_max_store_chars => 50000, p_max_files => 7)"))
        else:
            c.execute(sa.text("CALL dbm_memory_enable_for_agent('REFC', 'agent', NULL, NULL, 1000, 7, 50000, @e)"))
        row = c.execute(sa.text(
            "SELECT max_file_chars, max_store_chars, max_files FROM dbm_agents WHERE agent_code = 'REFC'")).one()
        assert tuple(row) == (1000, 50000, 7)


def test_a_positional_reference_enable_for_agent_sets_each_cap_on_postgresql(
    shared_calls: tuple[Engine, str],
) -> None:
    """The reference order, positionally, with its BOOLEAN: each cap lands where it belongs;
    dbmemory's own seven-argument call still runs; a reference call of fewer arguments is refused,
    never matched to dbmemory's order (which would swap max_files and max_store_chars)."""
    engine, server = shared_calls
    if server != "postgres":
        pytest.skip("MariaDB/MySQL: one routine per name, dbmemory's order (docs: the mapping table)")
    with engine.begin() as c:
        c.execute(sa.text("SELECT dbm_memory.enable_for_agent('REFP', 'agent', NULL, NULL, true, 1000, 50000, 7)"))
        c.execute(sa.text("SELECT dbm_memory.enable_for_agent('REFO', 'agent', NULL, NULL, 1000, 7, 50000)"))
        c.execute(sa.text("SELECT dbm_memory.enable_for_agent(p_agent_code => 'REFN')"))
        rows = c.execute(sa.text(
            "SELECT agent_code, max_file_chars, max_store_chars, max_files FROM dbm_agents"
            " WHERE agent_code IN ('REFP', 'REFO') ORDER BY agent_code")).all()
        assert [tuple(r) for r in rows] == [("REFO", 1000, 50000, 7), ("REFP", 1000, 50000, 7)]
        with pytest.raises(sa.exc.ProgrammingError), c.begin_nested():
            c.execute(sa.text("SELECT dbm_memory.enable_for_agent('REFS', 'agent', NULL, NULL, true, 1000)"))


def test_oracle_package_state_is_declared_before_the_first_subprogram_body() -> None:
    """PL/SQL refuses an item declared after a subprogram body (PLS-00103) and a name never
    declared (PLS-00201): every package variable the body uses is declared at its top."""
    _, body = oracle_statements()
    lines = body.splitlines()
    first = next(i for i, line in enumerate(lines) if re.match(r"  (PROCEDURE|FUNCTION) ", line))
    declared = {m[1] for line in lines[1:first] for m in [re.match(r"  (g_\w+) ", line)] if m}
    used = set(re.findall(r"\b(g_\w+)\b", body))
    assert used and used <= declared, used - declared
    for line in lines[first:]:
        assert not re.match(r"  g_\w+ ", line), line


def test_the_documented_reference_example_names_only_declared_calls() -> None:
    """docs/sql-api.md's PL/SQL example of the reference API (read, not run on Oracle): each
    dbm_memory call it makes is declared in the spec, the writers as procedures."""
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "sql-api.md").read_text()
    section = doc.split("## The reference PL/SQL API", 1)[1].split("\n## ", 1)[0]
    example = section.split("```sql", 1)[1].split("```", 1)[0]
    declared = _spec_declarations()
    calls = re.findall(r"dbm_memory\.(\w+)\(", example)
    assert {"enable_for_agent", "put_file", "set_store", "resolve_store_id", "get_file"} <= set(calls)
    for name in calls:
        assert name in declared, name
    for name in ("enable_for_agent", "put_file", "set_store"):
        assert [kind for kind, _ in declared[name]] == ["PROCEDURE"], name
    assert "e_store_not_found" in example
