"""Every table of the schema is in the user-rows registry or declared free of user data, and a
forget leaves nothing of the user outside the content-free audit columns that name the user
while an export holds every row of the user; every backend.

Both users' ids are markers that every text and file name carries (``kqann``, ``zbob``): after
``forget_user`` the forgotten user's marker is searched in every column of every table (the
SQLite FTS5 segments as bytes), and the other user's rows are counted unchanged.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import items as I
from dbmemory.core.clock import utcnow
from dbmemory.core.model import StoreRef
from dbmemory.db.schema import file_reads, files
from dbmemory.items.episodes import record_episode
from dbmemory.items.retention import SUMMARY_MARK
from dbmemory.items.runtime_data import claim_chat, set_fold_mark
from dbmemory.items.user_rows import NO_USER_DATA, USER_ROWS, user_keys
from dbmemory.profile import set_user_memory_enabled
from dbmemory.profile.store import write_profile
from dbmemory.store.agents import enable_for_agent
from dbmemory.store.drop import drop_stores
from dbmemory.store.files import put_file
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import rename_path

ANN, BOB = "kqann", "zbob"

KEPT_COLUMNS = {("dbm_audit_events", "user_key"), ("dbm_audit_events", "store_key")}
"""Where a forgotten user's id stays: the audit events' subject and store key (content-free)."""


def _tables(bind: Engine | Connection) -> list[str]:
    return sorted(t for t in sa.inspect(bind).get_table_names() if t.lower().startswith("dbm_"))


def test_every_table_is_registered_as_holding_user_rows_or_none(engine: Engine) -> None:
    assert not set(USER_ROWS) & set(NO_USER_DATA)
    missing = [t for t in _tables(engine) if t.lower() not in USER_ROWS and t.lower() not in NO_USER_DATA]
    assert missing == [], f"tables neither in USER_ROWS nor in NO_USER_DATA: {missing}"
    if engine.dialect.name == "sqlite":  # every backend's tables, so no stale entry
        assert set(_tables(engine)) == set(USER_ROWS) | set(NO_USER_DATA)


def test_the_langgraph_labels_of_a_user_are_those_the_langgraph_store_writes() -> None:
    codec = pytest.importorskip("dbmemory.integrations.langgraph.codec")
    for user in ("ann", "ann 7", "a_b", "Zoë@example"):
        assert codec.store_key_of(("users", user)) == f"shared:lg.users.{user_keys(user).label}"


def _refs(user: str) -> dict[str, StoreRef]:
    lg = f"lg.users.{user}"
    return {
        "user": StoreRef(f"user:SUPPORT:{user}", "user", agent_code="SUPPORT"),
        "context": StoreRef(f"context:SUPPORT:user_id:{user}", "context", agent_code="SUPPORT"),
        "context-code": StoreRef(f"context:store:DOCS:user:{user}", "context", store_code="DOCS"),
        "session": StoreRef(f"session:chat-{user}", "session", agent_code="SUPPORT"),
        "langgraph": StoreRef(f"shared:{lg}", "shared", store_code=lg),
        "langgraph-deeper": StoreRef(f"shared:{lg}.prefs", "shared", store_code=f"{lg}.prefs"),
        "gone": StoreRef(f"context:store:OLD:user_id:{user}", "context", store_code="OLD"),
    }


def _fill(engine: Engine, user: str) -> None:
    chat = f"chat-{user}"
    now = utcnow()
    with engine.begin() as c:
        enable_for_agent(c, "SUPPORT", scope="user")
        I.add_item(c, user, f"{user} likes tea")
        I.add_item(c, user, f"{user} drinks coffee", kind="auto", confidence=0.9, source_chat_id=chat)
        write_profile(c, user, f"{user} profile: lives in Lyon", expected_version=0)
        for name, ref in _refs(user).items():
            put_file(c, ref, f"/memories/{user}-{name}.md", f"{user} note in {name}")
        rename_path(c, _refs(user)["user"], f"/memories/{user}-user.md", f"/memories/{user}-renamed.md")
        drop_stores(c, [find_store_id(c, _refs(user)["gone"].store_key)])
        record_episode(c, user, f"{user} said hello", "hello to you", chat_id=chat, now=now)
        assert claim_chat(c, "default", user, chat, now, window_s=300)
        set_fold_mark(c, "default", user, now)
        I.set_memory_switch(c, user, False)
        set_user_memory_enabled(c, user, True)
        ids = c.execute(sa.select(files.c.file_id, files.c.store_id).where(files.c.file_path.contains(user))).all()
        c.execute(sa.insert(file_reads), [{"file_id": i, "store_id": s, "read_at": now} for i, s in ids])


def _occurrences(conn: Connection, marker: str) -> dict[tuple[str, str], int]:
    """How many values of each (table, column) contain ``marker`` (text or bytes)."""
    out: dict[tuple[str, str], int] = {}
    for table in _tables(conn):
        for row in conn.execute(sa.text(f"SELECT * FROM {table}")).mappings():
            for column, value in row.items():
                if value is None:
                    continue
                if isinstance(value, (bytes, bytearray, memoryview)):
                    found = marker.encode() in bytes(value).lower()
                else:
                    found = marker in str(value).lower()
                if found:
                    key = (table.lower(), str(column).lower())
                    out[key] = out.get(key, 0) + 1
    return out


def _count(conn: Connection, table: str, rule: str) -> int:
    return int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {table} WHERE {rule}")).scalar_one())


def test_forget_leaves_nothing_of_the_user_and_export_holds_every_row(engine: Engine) -> None:
    _fill(engine, ANN)
    _fill(engine, BOB)
    with engine.connect() as c:
        ann_before = _occurrences(c, ANN)
        bob_before = _occurrences(c, BOB)
        # every table of the registry that this backend has holds rows of both users
        tables = {t.lower() for t in _tables(c)}
        for table in sorted(set(USER_ROWS) & tables):
            if table in ("dbm_file_reads", "dbm_episodes_fts_idx", "dbm_episodes_fts_docsize"):
                continue  # no text column: checked by count below
            assert (table in {t for t, _ in ann_before}) and (table in {t for t, _ in bob_before}), table
        assert _count(c, "dbm_file_reads", "1 = 1") == 2 * 6
        assert _count(c, "dbm_memory_switches", "1 = 1") == _count(c, "dbm_user_settings", "1 = 1") == 2

        export = I.export_user(c, ANN)
        c.commit()
    text = json.dumps(export)
    assert BOB not in text
    stores = {s["store_key"]: s for s in export["stores"]}
    assert {s["kind"] for s in export["stores"]} == {"user", "context", "session", "langgraph"}
    assert len(stores) == 6  # the dropped store is gone, its audit events are exported
    with engine.connect() as c:
        assert len(stores) + len(export["profile"]) == _count(c, "dbm_stores", f"store_key LIKE '%{ANN}%'")
        exported_files = [f for s in [*export["stores"], *export["profile"]] for f in s["files"]]
        assert len(exported_files) == _count(
            c, "dbm_files", f"store_id IN (SELECT store_id FROM dbm_stores WHERE store_key LIKE '%{ANN}%')"
        )
        assert sum(f["read_at"] is not None for f in exported_files) == 6
        for f in exported_files:
            assert f["text"].startswith(ANN)
        assert all(f["path"].startswith(f"/memories/{ANN}-") for s in export["stores"] for f in s["files"])
        assert len(export["items"]) == _count(c, "dbm_items", f"user_key = '{ANN}'") == 2
        assert [(e["user_text"], e["assistant_text"], e["chat_id"]) for e in export["episodes"]] == [
            (f"{ANN} said hello", "hello to you", f"chat-{ANN}")
        ]
        assert {m["mark"] for m in export["marks"]} == {f"chat:chat-{ANN}", SUMMARY_MARK}
        assert export["switches"] == {"memory_switch_on": False, "profile_memory_enabled": True}
        audited = _count(c, "dbm_audit_events", f"user_key = '{ANN}' OR store_key LIKE '%{ANN}%'")
        assert len(export["audit_events"]) == audited - 1  # all but the export's own event
        assert any(e["action"] == "rename" and e["detail"] == f"/memories/{ANN}-renamed.md"
                   for e in export["audit_events"])
        assert any(e["store_key"] == _refs(ANN)["gone"].store_key and e["file_path"]
                   for e in export["audit_events"])

    with engine.begin() as c:
        counts = I.forget_user(c, ANN)
    assert counts["items"] == 2 and counts["stores"] == 7 and counts["episodes"] == 1
    assert counts["switches"] == 2 and counts["events_redacted"] >= 8

    with engine.connect() as c:
        left = _occurrences(c, ANN)
        assert set(left) <= KEPT_COLUMNS, {k: v for k, v in left.items() if k not in KEPT_COLUMNS}
        # the other user's rows are untouched (the FTS5 segments are rewritten, so only present)
        bob_after = _occurrences(c, BOB)
        assert {k: v for k, v in bob_after.items() if "fts" not in k[0]} == {
            k: v for k, v in bob_before.items() if "fts" not in k[0]
        }
        assert set(bob_after) == set(bob_before)
        assert _count(c, "dbm_file_reads", "1 = 1") == 6
        assert _count(c, "dbm_memory_switches", "1 = 1") == _count(c, "dbm_user_settings", "1 = 1") == 1
        hits = I.search_memory(c, BOB, "hello") if hasattr(I, "search_memory") else None
        assert hits is None or any(h.source == "episode" for h in hits)
        again = I.export_user(c, ANN)
        for name in ("profile", "items", "episodes", "stores", "marks"):
            assert again[name] == [], name
        assert all(e["file_path"] is None for e in again["audit_events"])
        assert [e["action"] for e in again["audit_events"] if e["action"] == "user_forget"] == ["user_forget"]

