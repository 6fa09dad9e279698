"""The per-process item cache of a turn (dbmemory.items.turn_cache) never serves stale data:
every change made by another connection (or another engine, as another process would), a
caller's rollback, an organisation-memory, switch or setting change, and expiry by time are
seen by the very next assembly; users, organisations and databases never share entries."""

from __future__ import annotations

import datetime as dt

import pytest

from dbmemory.items import (
    add_item,
    clear_items,
    delete_item,
    edit_item,
    forget_user,
    mark_items_used,
    purge_items,
    restore_item,
    set_memory_switch,
    set_org_memory,
    set_org_setting,
    turn_cache,
)
from dbmemory.items.turn_memory import choose, load_turn_items
from dbmemory.profile.tokens import count_tokens

U = "cache-user"


@pytest.fixture(autouse=True)
def _fresh_cache():
    turn_cache.clear()
    yield
    turn_cache.clear()


def texts(engine, user=U, org="default", now=None):
    with engine.connect() as c, c.begin():
        loaded = load_turn_items(c, org_id=org, user_id=user, now=now)
    return sorted(i.text for i in loaded.items)


def seed(engine, n, user=U, org="default", prefix="fact"):
    with engine.begin() as c:
        return [add_item(c, user, f"User {prefix} {k}", org_id=org).item_id for k in range(n)]


@pytest.fixture
def writer(engine, backend_name):
    """Another engine on the same database (what another process would write through); on
    in-memory SQLite (one shared connection) the test's engine itself."""
    if backend_name == "sqlite-memory":
        yield engine
        return
    from dbmemory.db.engine import create_engine

    other = create_engine(engine.url.render_as_string(hide_password=False))
    try:
        yield other
    finally:
        other.dispose()


def test_second_assembly_hits_the_cache(engine):
    seed(engine, 3)
    assert texts(engine) == ["User fact 0", "User fact 1", "User fact 2"]
    with engine.connect() as c, c.begin():
        load_turn_items(c, org_id="default", user_id=U)
    users = turn_cache.entries.get(engine)
    assert users is not None and len(users) == 1
    entry = next(iter(users.values()))
    with engine.connect() as c, c.begin():
        again = load_turn_items(c, org_id="default", user_id=U)
    assert next(iter(turn_cache.entries[engine].values())) is entry
    assert [i.item_id for i in again.items] == [i.item_id for i in entry.items]


def test_add_edit_delete_restore_by_another_writer_seen_at_once(engine, writer):
    ids = seed(engine, 3)
    assert len(texts(engine)) == 3
    with writer.begin() as c:
        add_item(c, U, "User added elsewhere")
    assert "User added elsewhere" in texts(engine)
    with writer.begin() as c:
        edit_item(c, U, ids[0], "User edited elsewhere")
    now = texts(engine)
    assert "User edited elsewhere" in now and "User fact 0" not in now
    with writer.begin() as c:
        delete_item(c, U, ids[1])
    assert "User fact 1" not in texts(engine)
    with writer.begin() as c:
        restore_item(c, U, ids[1])
    assert "User fact 1" in texts(engine)
    with writer.begin() as c:
        clear_items(c, U)
    assert texts(engine) == []


def test_purge_and_readd_with_the_same_count_seen(engine, writer):
    """Rows hard-deleted and as many re-added (SQLite may reuse the ids): new texts."""
    seed(engine, 4, prefix="old")
    assert texts(engine)[0].startswith("User old")
    with writer.begin() as c:
        forget_user(c, U)
    assert texts(engine) == []
    seed(writer, 4, prefix="new")
    assert texts(engine) == [f"User new {k}" for k in range(4)]
    with writer.begin() as c:
        clear_items(c, U)
        purge_items(c, user_id=U, include_grace=True)
    seed(writer, 4, prefix="newer")
    assert texts(engine) == [f"User newer {k}" for k in range(4)]


def test_callers_rollback_is_not_served_afterwards(engine):
    seed(engine, 2)
    assert len(texts(engine)) == 2
    with engine.connect() as c:
        with c.begin() as tx:
            add_item(c, U, "User uncommitted fact")
            loaded = load_turn_items(c, org_id="default", user_id=U)
            assert "User uncommitted fact" in [i.text for i in loaded.items]  # own write seen
            tx.rollback()
    assert texts(engine) == ["User fact 0", "User fact 1"]


def test_org_memory_switch_and_settings_seen_at_once(engine, writer):
    seed(engine, 25)
    with engine.connect() as c, c.begin():
        first = load_turn_items(c, org_id="default", user_id=U)
    assert first.org_memory == "" and first.memory_on
    assert choose(first, "fact").mode == "ranked"
    with writer.begin() as c:
        set_org_memory(c, "default", "- Cite the handbook.", is_admin=True, actor="t")
        set_org_setting(c, "default", "selection_threshold", 30, is_admin=True)
    with engine.connect() as c, c.begin():
        second = load_turn_items(c, org_id="default", user_id=U)
    assert second.org_memory == "- Cite the handbook."
    assert second.settings.selection_threshold == 30 and choose(second, "fact").mode == "all"
    with writer.begin() as c:
        set_memory_switch(c, U, False)
    with engine.connect() as c, c.begin():
        off = load_turn_items(c, org_id="default", user_id=U)
    assert not off.memory_on and off.items == []
    with writer.begin() as c:
        set_memory_switch(c, U, True)
    assert len(texts(engine)) == 25


def test_marked_used_by_another_writer_moves_the_recency_order(engine, writer):
    t0 = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
    with engine.begin() as c:
        ids = [add_item(c, U, f"User fact {k}", now=t0 + dt.timedelta(seconds=k)).item_id for k in range(3)]
    when = t0 + dt.timedelta(days=1)

    def order():
        with engine.connect() as c, c.begin():
            loaded = load_turn_items(c, org_id="default", user_id=U, now=when)
        return [i.item_id for i in choose(loaded, "anything").items]

    assert order() == [ids[2], ids[1], ids[0]]
    with writer.begin() as c:
        mark_items_used(c, [ids[0]], now=t0 + dt.timedelta(hours=1))
    assert order() == [ids[0], ids[2], ids[1]]
    with writer.begin() as c:
        mark_items_used(c, [ids[1]], now=t0 + dt.timedelta(hours=2))
    assert order() == [ids[1], ids[0], ids[2]]


def test_expiry_by_time_leaves_items_out_of_a_cached_entry(engine):
    t0 = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
    with engine.begin() as c:
        add_item(c, U, "User auto fact", kind="auto", confidence=0.9, now=t0)  # auto: 30 days
        add_item(c, U, "User manual fact", now=t0)  # standard: 180 days
    assert texts(engine, now=t0 + dt.timedelta(days=1)) == ["User auto fact", "User manual fact"]
    assert texts(engine, now=t0 + dt.timedelta(days=31)) == ["User manual fact"]
    assert texts(engine, now=t0 + dt.timedelta(days=1)) == ["User auto fact", "User manual fact"]


def test_retention_setting_change_moves_expiry_of_cached_items(engine, writer):
    t0 = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=5)
    with engine.begin() as c:
        add_item(c, U, "User standard fact", now=t0)
    assert texts(engine) == ["User standard fact"]
    with writer.begin() as c:
        set_org_setting(c, "default", "retention_standard_days", 2, is_admin=True)
    assert texts(engine) == []


def test_users_and_organisations_never_share_entries(engine):
    seed(engine, 2, user="alice")
    seed(engine, 2, user="bob", prefix="bob fact")
    seed(engine, 2, user="alice", org="other", prefix="other-org fact")
    for _ in range(2):  # cold, then warm
        assert texts(engine, user="alice") == ["User fact 0", "User fact 1"]
        assert texts(engine, user="bob") == ["User bob fact 0", "User bob fact 1"]
        assert texts(engine, user="alice", org="other") == ["User other-org fact 0", "User other-org fact 1"]


def test_engines_on_different_databases_never_share_entries(engine, backend_name, tmp_path):
    """Two databases with the very same rows (same ids, versions, times): each engine reads its own."""
    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import upgrade

    t0 = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
    other = create_engine(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        upgrade(other)
        for eng, word in ((engine, "here"), (other, "there")):
            with eng.begin() as c:
                add_item(c, U, f"User lives {word}", now=t0)
        for _ in range(2):
            assert texts(engine, now=t0) == ["User lives here"]
            assert texts(other, now=t0) == ["User lives there"]
    finally:
        other.dispose()


def test_turn_state_statement_compiles_for_oracle():
    from sqlalchemy.dialects import oracle

    sql = str(turn_cache.turn_state_stmt().compile(dialect=oracle.dialect()))
    assert "dbm_items" in sql and "dbm_org_settings" in sql and "dbm_memory_switches" in sql
    assert sql.count(":org_id") >= 3 and "'selection_threshold'" in sql


def test_marker_aggregate_reads_only_the_covering_index_on_sqlite(engine, backend_name):
    """Revision 0005: the marker over the user's rows is an index-only scan of
    ix_dbm_items_marker (no table row per item)."""
    if not backend_name.startswith("sqlite"):
        pytest.skip("EXPLAIN QUERY PLAN is SQLite's")
    from dbmemory.items.model import user_key_of
    from dbmemory.items.org import org_memory_store_key

    seed(engine, 3)
    stmt = turn_cache.turn_state_stmt()
    params = {"org_id": "default", "user_key": user_key_of(U), "store_key": org_memory_store_key("default")}
    compiled = stmt.compile(engine)
    args = tuple(compiled.construct_params(params)[name] for name in compiled.positiontup)
    with engine.connect() as c:
        plan = [row[-1] for row in c.exec_driver_sql("EXPLAIN QUERY PLAN " + str(compiled), args)]
    assert any("dbm_items USING COVERING INDEX ix_dbm_items_marker" in step for step in plan), plan
    assert not any("SCAN dbm_items" in step for step in plan), plan


def test_cached_entry_keeps_one_ranking_pool_across_turns(engine):
    seed(engine, 25)
    seed(engine, 1, prefix="lives in Lisbon")
    with engine.connect() as c, c.begin():
        first = load_turn_items(c, org_id="default", user_id=U)
    with engine.connect() as c, c.begin():
        second = load_turn_items(c, org_id="default", user_id=U)
    assert first.pool is not None and second.pool is first.pool
    assert list(second.pool.items) == second.items and list(second.pool.recent) == second.recent
    assert choose(second, "Lisbon?").items[0].text == "User lives in Lisbon 0"


def test_choose_ranks_the_callers_items_when_they_differ_from_the_pool(engine):
    seed(engine, 25)
    seed(engine, 1, prefix="lives in Lisbon")
    with engine.connect() as c, c.begin():
        loaded = load_turn_items(c, org_id="default", user_id=U)
    assert choose(loaded, "Lisbon?").items[0].text == "User lives in Lisbon 0"
    loaded.items = [i for i in loaded.items if "Lisbon" not in i.text]
    loaded.recent = [i for i in loaded.recent if "Lisbon" not in i.text]
    picked = choose(loaded, "Lisbon?")
    assert "User lives in Lisbon 0" not in [i.text for i in picked.items] and picked.total == 25


def test_rendered_lines_are_kept_per_user_and_carried_over_a_re_read(engine, writer, monkeypatch):
    """Each item line is rendered and counted once per text and model: counted ahead
    (count_item_lines, the post-processing's step), then neither the next render nor a re-read
    after another item changed counts the unchanged ones again."""
    from dbmemory.items import inject

    ids = seed(engine, 3)
    with engine.connect() as c, c.begin():
        loaded = load_turn_items(c, org_id="default", user_id=U)
    assert inject.count_item_lines(loaded.items, model="gpt-4o", lines=loaded.lines) == 3
    assert inject.count_item_lines(loaded.items, model="gpt-4o", lines=loaded.lines) == 0
    counted: list[str] = []
    real = count_tokens
    def count(text, model):
        if text.startswith("- "):  # an item line (the block's frame is counted once per process)
            counted.append(text)
        return real(text, model)

    monkeypatch.setattr(inject, "count_tokens", count)
    _, block = inject.memory_sections(
        org_memory=None, profile_section="", items=loaded.items, model="gpt-4o", lines=loaded.lines
    )
    assert len(block.items) == 3 and counted == []
    with writer.begin() as c:
        edit_item(c, U, ids[1], "User edited fact")
    with engine.connect() as c, c.begin():
        again = load_turn_items(c, org_id="default", user_id=U)
    assert again.lines is not loaded.lines and len(again.lines) == 2  # the edited text dropped
    assert inject.count_item_lines(again.items, model="gpt-4o", lines=again.lines) == 1
    assert counted == ["- User edited fact (manual)\n"]
