"""Every statement the package runs, with sample values: :func:`example_statements`, a dict of
name -> statement for the compile checks (the Oracle 19c test compiles each and checks
identifiers and CLOB use; the deployment tests classify them by the stores they touch). Only the
tests and the docs' checks import this module; no hot path does."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.sql.expression import Executable

from dbmemory.db.schema import files
from dbmemory.store.statements import bulk as statements_bulk
from dbmemory.store.statements.bulk import (
    INSERT_EXPIRED_AUDIT,
    MAX_IN_LIST,
    delete_stores_by_id,
    insert_agent,
    lock_stores_by_id,
    lock_stores_by_key,
    select_agent,
    select_agents,
    select_configured_caps,
    select_store_keys,
    select_store_totals,
    select_stores_of_agent,
    touch_and_expiry_examples,
    update_agent,
    update_configured_store_caps,
)
from dbmemory.store.statements.reads import (
    ADJUST_STORE,
    BUMP_STORE,
    CLAIM_FILE_SLOT,
    CLAIM_FILE_SLOT_BY_KEY,
    INSERT_STORE,
    LOCK_STORE_AND_FILE,
    LOCK_STORE_BY_ID,
    LOCK_STORE_BY_KEY,
    LOCK_STORE_WITH_FILE,
    SELECT_FILE,
    SELECT_FILE_BY_KEY,
    SELECT_FILE_FOR_UPDATE,
    SELECT_FILE_META,
    SELECT_LISTING,
    SELECT_LISTING_BY_KEY,
    SELECT_LISTING_DIR,
    SELECT_LISTING_DIR_ANY,
    SELECT_LISTING_DIR_BY_KEY,
    SELECT_SIZES,
    SELECT_SIZES_BY_KEY,
    SELECT_SIZES_DIR,
    SELECT_SIZES_DIR_BY_KEY,
    SELECT_STORE_ID,
    SELECT_STORE_KEY,
    SET_STORE_CAPS,
    select_byte_sizes,
    with_values,
)
from dbmemory.store.statements.writes import (
    DELETE_FILE_AT,
    DELETE_FILE_BY_ID,
    DELETE_FILES_BY_ID,
    INSERT_AUDIT,
    INSERT_AUDIT_ADJUST,
    INSERT_AUDIT_BUMP,
    INSERT_AUDIT_OF_FILE,
    INSERT_FILE,
    INSERT_FILE_IF_FREE_SCAN_TOP,
    INSERT_FILE_IF_FREE_TOP,
    MOVE_FILE,
    MOVE_FILE_COUNTED,
    SELECT_WRITE_FACTS_TOP,
    UNCOUNT_FILE_JOIN,
    UNCOUNT_FILE_JOIN_BY_KEY,
    UNCOUNT_FILE_SUBQUERY,
    UNCOUNT_FILE_SUBQUERY_BY_KEY,
    UPDATE_FILE,
    UPDATE_FILE_COUNTED,
    UPDATE_FILE_EXEMPT,
    UPDATE_FILE_EXEMPT_COUNTED,
    insert_file_if_free_params,
    insert_file_params,
    write_facts,
)

__all__ = [
    "example_statements",
    "join_update_statements",
]


def example_statements() -> dict[str, Executable]:
    """Every statement the package runs (prebuilt ones as they are; expanding IN lists bound to
    sample values so they render).

    Returns:
        Name -> statement. The Oracle compile test compiles each for Oracle 19c and checks
        identifiers and CLOB use; add new statements here when you add them above.
    """
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    h = "0" * 64
    drop_files, drop_stores = delete_stores_by_id([1, 2])
    facts, facts_params = write_facts(1, "/memories/a/b.md", h, [h])
    # statements with post-compile parts (expanding IN lists, Oracle's FETCH FIRST) render
    # only with every value bound
    sample: dict[str, Any] = {
        **facts_params,
        "p_ids": [1, 2, 3],
        "p_now": now,
        "p_older": now,
    }
    return {
        "select_store_id": SELECT_STORE_ID,
        "select_store_key": SELECT_STORE_KEY,
        "lock_store_by_key": LOCK_STORE_BY_KEY,
        "lock_store_by_id": LOCK_STORE_BY_ID,
        "insert_store": INSERT_STORE.values(
            store_key="agent:A",
            scope_name="agent",
            agent_code="A",
            store_code=None,
            created_at=now,
            updated_at=now,
            max_file_chars=100_000,
            max_files=1_000,
            max_store_chars=None,
        ),
        "bump_store": BUMP_STORE,
        "adjust_store": ADJUST_STORE,
        "claim_file_slot": CLAIM_FILE_SLOT,
        "claim_file_slot_by_key": CLAIM_FILE_SLOT_BY_KEY,
        "insert_audit_bump": INSERT_AUDIT_BUMP,
        "insert_audit_adjust": INSERT_AUDIT_ADJUST,
        "set_store_caps": SET_STORE_CAPS,
        "select_configured_caps_shared": select_configured_caps("shared", None, "TEAM"),
        "select_configured_caps_global": select_configured_caps("global", None, None),
        "select_configured_caps_agent": select_configured_caps("user", "A", None),
        "update_configured_store_caps": update_configured_store_caps(
            scope="user",
            key="user:A:",
            is_prefix=True,
            agent_code="A",
            store_code=None,
            caps={"max_file_chars": 10, "max_files": 3, "max_store_chars": None},
            now=now,
        ),
        "update_configured_store_caps_shared": update_configured_store_caps(
            scope="shared",
            key="shared:TEAM",
            is_prefix=False,
            agent_code=None,
            store_code="TEAM",
            caps={"max_file_chars": 10, "max_files": 3, "max_store_chars": 30},
            now=now,
        ),
        "select_stores_of_agent": select_stores_of_agent("A"),
        "lock_stores_by_id": lock_stores_by_id([1, 2]),
        "lock_stores_by_id_1000": lock_stores_by_id(range(1, MAX_IN_LIST + 1)),
        "select_store_keys": select_store_keys([1, 2]),
        "lock_stores_by_key": lock_stores_by_key(["agent:A", "user:A:u1"]),
        "select_store_totals": select_store_totals([1, 2]),
        "insert_expired_audit": with_values(
            INSERT_EXPIRED_AUDIT, **sample, p_cutoff=now, p_action="expire", p_actor="expiry"
        ),
        "delete_store_files": drop_files,
        "delete_stores": drop_stores,
        "select_file": SELECT_FILE,
        "select_file_for_update": SELECT_FILE_FOR_UPDATE,
        "select_file_by_key": SELECT_FILE_BY_KEY,
        "lock_store_and_file": LOCK_STORE_AND_FILE,
        "lock_store_with_file": LOCK_STORE_WITH_FILE,
        "select_file_meta": SELECT_FILE_META,
        "select_listing": SELECT_LISTING,
        "select_listing_dir": SELECT_LISTING_DIR,
        "select_listing_dir_any": with_values(SELECT_LISTING_DIR_ANY, **sample),
        "select_listing_by_key": SELECT_LISTING_BY_KEY,
        "select_listing_dir_by_key": SELECT_LISTING_DIR_BY_KEY,
        "select_sizes": SELECT_SIZES,
        "select_sizes_dir": SELECT_SIZES_DIR,
        "select_sizes_by_key": SELECT_SIZES_BY_KEY,
        "select_sizes_dir_by_key": SELECT_SIZES_DIR_BY_KEY,
        "select_write_facts": with_values(facts, **sample),
        "select_write_facts_top": SELECT_WRITE_FACTS_TOP,
        "insert_file_if_free": with_values(
            *insert_file_if_free_params(1, "/memories/a/b.md", h, [h], "x" * 50, now)[:1],
            **insert_file_if_free_params(1, "/memories/a/b.md", h, [h], "x" * 50, now)[1],
        ),
        "insert_file_if_free_top": INSERT_FILE_IF_FREE_TOP,
        "insert_file_if_free_scan_top": INSERT_FILE_IF_FREE_SCAN_TOP,
        "insert_file": INSERT_FILE.values(
            **insert_file_params(1, "/memories/a.md", h, "x" * 5000, now)
        ),
        "update_file": UPDATE_FILE,
        "update_file_exempt": UPDATE_FILE_EXEMPT,
        "delete_files_by_id": with_values(DELETE_FILES_BY_ID, **sample),
        "delete_file_by_id": DELETE_FILE_BY_ID,
        "move_file": MOVE_FILE,
        "uncount_file_subquery": UNCOUNT_FILE_SUBQUERY,
        "uncount_file_subquery_by_key": UNCOUNT_FILE_SUBQUERY_BY_KEY,
        "insert_audit_of_file": INSERT_AUDIT_OF_FILE,
        "delete_file_at": DELETE_FILE_AT,
        **touch_and_expiry_examples(sample),
        "insert_audit": INSERT_AUDIT.values(
            store_id=1,
            store_key="agent:A",
            file_path="/memories/a.md",
            action_name="create",
            actor_name="tool:A",
            chars_before=None,
            chars_after=3,
            detail_text=None,
            created_at=now,
        ),
        "select_byte_sizes": select_byte_sizes(files.c.body, under=True),
        "select_agent": select_agent("A"),
        "select_agent_for_update": select_agent("A", for_update=True),
        "select_agents": select_agents(),
        "insert_agent": insert_agent(
            {
                "agent_code": "A",
                "scope_name": "agent",
                "store_code": None,
                "context_key": None,
                "max_file_chars": 100_000,
                "max_files": 1_000,
                "max_store_chars": None,
                "memory_enabled": True,
                "created_at": now,
                "updated_at": now,
            }
        ),
        "update_agent": update_agent("A", {"memory_enabled": False, "updated_at": now}),
    }


def join_update_statements() -> dict[str, Executable]:
    """The multi-table ``UPDATE`` statements, MySQL/MariaDB only (Oracle, PostgreSQL
    and SQLite cannot compile them, so they are not in :func:`example_statements`; a test
    compiles them for MySQL and checks that :mod:`dbmemory.db.dialect` picks them nowhere
    else). Name -> statement."""
    return {
        "update_file_counted": UPDATE_FILE_COUNTED,
        "update_file_exempt_counted": UPDATE_FILE_EXEMPT_COUNTED,
        "move_file_counted": MOVE_FILE_COUNTED,
        "uncount_file_join": UNCOUNT_FILE_JOIN,
        "uncount_file_join_by_key": UNCOUNT_FILE_JOIN_BY_KEY,
        "uncount_expired_join": statements_bulk.UNCOUNT_EXPIRED_JOIN,
    }


