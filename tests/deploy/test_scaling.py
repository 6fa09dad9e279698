"""docs/scaling.md: every hot-path statement the package builds touches one store.

The hot path is what a MEMORY tool command, a read's touch and a write's audit event run
(:data:`HOT_PATH`); each must filter by one store, by ``store_id`` or ``store_key`` compared
with a parameter (or, for an INSERT, carry the store's id/key as a value), so that with the
store as the shard key (Citus distribution column ``store_id``, Vitess/Oracle Sharding key)
every one can be routed to one shard; the statements that address a row by its own id name
its store too. The cross-store statements (expiry, admin reports, configuration) are in
:data:`CROSS_STORE`. Every statement of
:func:`dbmemory.store.statements.examples.example_statements` must be in one list, so a new
statement cannot skip the check. The tables are :data:`dbmemory.db.schema.PER_STORE_TABLES`,
each keyed with ``store_id`` first.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import operators, visitors
from sqlalchemy.sql.elements import BinaryExpression, BindParameter

from dbmemory.db import schema
from dbmemory.store.statements.examples import example_statements

HOT_PATH = frozenset(
    {
        "select_store_id",
        "lock_store_by_key",
        "lock_store_by_id",
        "insert_store",
        "bump_store",
        "insert_audit_bump",
        "set_store_caps",
        "select_file",
        "select_file_for_update",
        "select_file_by_key",
        "lock_store_and_file",
        "lock_store_with_file",
        "select_file_meta",
        "select_listing",
        "select_listing_dir",
        "select_listing_dir_any",
        "select_listing_by_key",
        "select_listing_dir_by_key",
        "select_sizes",
        "select_sizes_dir",
        "select_sizes_by_key",
        "select_sizes_dir_by_key",
        "select_write_facts",
        "select_write_facts_top",
        "insert_file",
        "insert_audit",
        "select_file_read",
        "select_file_read_by_key",
        # the short write path (store counters, indexed prefix check)
        "select_store_key",
        "adjust_store",
        "insert_audit_adjust",
        "claim_file_slot",
        "claim_file_slot_by_key",
        "insert_file_if_free",
        # a one-file delete in three statements (issue 12)
        "uncount_file_subquery",
        "uncount_file_subquery_by_key",
        "insert_audit_of_file",
        "delete_file_at",
        "insert_file_if_free_top",
        "insert_file_if_free_scan_top",
        "select_byte_sizes",
        # rows of one store addressed by their own id, the store named too (revision 0007's
        # key (store_id, file_id)): the file was found by a statement above first
        "update_file",
        "update_file_exempt",
        "delete_files_by_id",
        "delete_file_by_id",
        "move_file",
        "select_file_alive",
        "insert_file_read",
        "update_file_read",
        "upsert_file_read_oracle",
    }
)
"""Every hot-path statement: each names its store."""

CROSS_STORE = frozenset(
    {
        # expiry: every store (or one, by id), batches of file ids
        "select_job_lock",
        "select_expiry_candidates",
        "select_expiry_candidates_store",
        "lock_expiry_stores",
        "delete_expired",
        "insert_expired_audit",
        "select_files_left",
        "select_store_keys",
        "delete_file_reads_by_id",
        "select_orphan_reads",
        "count_expirable",
        "count_expirable_store",
        # admin: stores of an agent, drop_stores, totals, configuration caps
        "select_configured_caps_shared",
        "select_configured_caps_global",
        "select_configured_caps_agent",
        "update_configured_store_caps",
        "update_configured_store_caps_shared",
        "select_stores_of_agent",
        "lock_stores_by_id",
        "lock_stores_by_id_1000",
        "lock_stores_by_key",
        "select_store_totals",
        "delete_store_files",
        "delete_stores",
        # agent configuration (dbm_agents: a small reference table)
        "select_agent",
        "select_agent_for_update",
        "select_agents",
        "insert_agent",
        "update_agent",
    }
)

STORE_COLUMNS = ("store_id", "store_key")

_STORE_TAGGED = frozenset(
    name for name, table in schema.metadata.tables.items() if "store_id" in table.c
)
"""Tables whose rows carry their store's id: the per-store ones and the audit events."""


def _is_parameter(element: Any) -> bool:
    return isinstance(element, BindParameter) or isinstance(
        element, (sa.sql.elements.Grouping, sa.sql.selectable.ScalarSelect)
    ) and _filters_by_store(getattr(element, "element", element))


def _store_column(element: Any) -> bool:
    return isinstance(element, sa.Column) and element.name in STORE_COLUMNS


def _filters_by_store(stmt: Any) -> bool:
    """Some ``<table>.store_id|store_key = <parameter or store-filtered scalar subquery>``."""
    for element in visitors.iterate(stmt):
        if isinstance(element, BinaryExpression) and element.operator is operators.eq:
            left, right = element.left, element.right
            if _store_column(left) and _is_parameter(right):
                return True
            if _store_column(right) and _is_parameter(left):
                return True
    return False


def _inserts_store(stmt: Any) -> bool:
    if not isinstance(stmt, sa.Insert):
        return False
    compiled = stmt.compile()  # the values given to .values(): store_id / store_key among them
    return stmt.table.name in _STORE_TAGGED and any(
        compiled.params.get(name) is not None for name in STORE_COLUMNS
    )


_TEXT_STORE_FILTER = re.compile(r"\b(\w+\.)?store_id\s*=\s*(:p_sid\b|\w+\.store_id\b)")


def _text_filters_by_store(stmt: Any) -> bool:
    """A textual statement (Oracle's MERGE of a touch) binds ``:p_sid`` and matches on it."""
    text = str(stmt)
    return ":p_sid" in text and _TEXT_STORE_FILTER.search(text) is not None


def test_every_statement_is_classified() -> None:
    names = set(example_statements())
    lists = [HOT_PATH, CROSS_STORE]
    assert not HOT_PATH & CROSS_STORE
    assert names == set().union(*lists), (
        f"unclassified: {sorted(names - set().union(*lists))}; "
        f"gone: {sorted(set().union(*lists) - names)}"
    )


def test_every_hot_path_statement_filters_by_one_store() -> None:
    statements = example_statements()
    missing = [
        name
        for name in sorted(HOT_PATH)
        if not (
            _filters_by_store(statements[name])
            or _inserts_store(statements[name])
            or (isinstance(statements[name], sa.TextClause) and _text_filters_by_store(statements[name]))
        )
    ]
    assert missing == [], missing


def test_every_per_store_table_is_keyed_by_its_store_first() -> None:
    """Each table of :data:`dbmemory.db.schema.PER_STORE_TABLES` has a ``NOT NULL`` ``store_id``
    leading its primary key and every unique key but :data:`_GLOBAL_KEY`, so a row is placed
    by its store alone."""
    assert set(schema.PER_STORE_TABLES) <= _STORE_TAGGED
    for name, key in schema.PER_STORE_TABLES.items():
        table = schema.metadata.tables[name]
        assert not table.c.store_id.nullable, name
        assert tuple(c.name for c in table.primary_key) == key and key[0] == "store_id", name
        for constraint in table.constraints:
            if isinstance(constraint, sa.UniqueConstraint) and constraint.name != _GLOBAL_KEY:
                assert constraint.columns[0].name == "store_id", (name, constraint.name)
    assert _GLOBAL_KEY in {c.name for c in schema.stores.constraints}


_GLOBAL_KEY = "uq_dbm_stores_key"
"""The one unique key not led by the store: a store key names one store across all shards,
which a distributed table cannot enforce (docs/scaling.md: a lookup table or vindex)."""


PER_USER_TABLES = ("dbm_items", "dbm_episodes")
"""The per-user tables whose shard key is the user (``user_key``, with ``org_id``):
docs/scaling.md."""


def _names_its_user(statement: str) -> bool:
    """An INSERT carries ``user_key``; any other statement filters by it (after WHERE)."""
    text = " ".join(statement.lower().split())
    if text.startswith("insert"):
        return "user_key" in text.split(" values", 1)[0] or "user_key" in text.split(" select ", 1)[-1]
    return " where " in text and "user_key" in text.split(" where ", 1)[1]


def test_every_hot_item_and_episode_statement_names_its_user(engine: Any) -> None:
    """What a turn and the item API run on one user's items and episodes (add, edit, delete,
    restore, clear, eviction at the auto-item limit, listing, counting, use marks, episodes
    kept, listed and searched): every statement on :data:`PER_USER_TABLES` names the user, so
    with the items and episodes distributed by ``user_key`` each is a router query on Citus
    and single-shard on Vitess and Oracle Sharding. Cross-user statements (retention and
    episode expiry, the organisation's retention reschedule, forget and export) are not run
    here: they are batch and admin work."""
    from dbmemory.items.episode_search import search_episodes
    from dbmemory.items.episodes import list_episodes, record_episode
    from dbmemory.items.store import (
        add_item,
        clear_items,
        count_items,
        delete_item,
        edit_item,
        enforce_auto_item_limit,
        get_item,
        list_items,
        restore_item,
    )
    from dbmemory.items.usage import mark_items_used

    seen: list[str] = []

    def on(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if any(table in statement for table in PER_USER_TABLES) and not any(
            catalog in statement for catalog in ("pg_attrdef", "information_schema", "sqlite_master")
        ):  # the rows, not the catalog (PostgreSQL's search configuration, once per engine)
            seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", on)
    try:
        with engine.begin() as c:
            item = add_item(c, "u1", "likes tea")
            edit_item(c, "u1", item.item_id, "likes green tea")
            assert get_item(c, "u1", item.item_id).text == "likes green tea"
            assert [i.text for i in list_items(c, "u1")] == ["likes green tea"]
            delete_item(c, "u1", item.item_id)
            restore_item(c, "u1", item.item_id)
            assert mark_items_used(c, [item.item_id], user_id="u1") == 1
            for n in range(3):
                add_item(c, "u1", f"auto fact {n}", kind="auto", confidence=0.9)
            assert enforce_auto_item_limit(c, "u1", limit=2) == 1
            assert sum(count_items(c, "u1").values()) == 3
            assert clear_items(c, "u1") == 3
            record_episode(c, "u1", "I drink green tea", "Noted.", check_switches=True)
            assert len(list_episodes(c, "u1")) == 1
            search_episodes(c, "u1", "green tea")
    finally:
        sa.event.remove(engine, "before_cursor_execute", on)
    assert seen
    unnamed = [s for s in seen if not _names_its_user(s)]
    assert unnamed == [], unnamed
