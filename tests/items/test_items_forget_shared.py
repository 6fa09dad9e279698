"""Export and forget never show or delete another user's or another organisation's data: a
session store shared by two users in one chat, and one user in two organisations (the user,
context and profile stores carry no organisation); every backend."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory import items as I
from dbmemory.core.model import StoreRef
from dbmemory.db.schema import audit_events
from dbmemory.items.episodes import list_episodes, record_episode
from dbmemory.items.user_share import HELD_IN_OTHER_ORGS, SHARED_WITH_USERS
from dbmemory.profile.store import read_profile, write_profile
from dbmemory.store.agents import enable_for_agent
from dbmemory.store.files import put_file
from dbmemory.tool import MemoryTool

B_NOTE = "B's private note: blue-falcon"


def _store_keys(conn: Connection) -> set[str]:
    return {r[0] for r in conn.execute(sa.text("SELECT store_key FROM dbm_stores"))}


def _two_users_in_one_chat(conn: Connection) -> None:
    enable_for_agent(conn, "S", scope="session")
    record_episode(conn, "userA", "hi from A", "ok", chat_id="room-1")
    record_episode(conn, "userB", "hi from B, my hint is blue-falcon", "ok", chat_id="room-1")
    record_episode(conn, "userA", "A alone", "ok", chat_id="a-only")
    out = MemoryTool(conn, "S", session_id="room-1").execute(
        {"command": "create", "path": "/memories/b-notes.md", "file_text": B_NOTE}
    )
    assert "created" in out.lower(), out
    out = MemoryTool(conn, "S", session_id="a-only").execute(
        {"command": "create", "path": "/memories/a-notes.md", "file_text": "A's own session note"}
    )
    assert "created" in out.lower(), out


def test_a_shared_session_store_is_listed_without_content_and_kept_by_a_forget(conn: Connection) -> None:
    _two_users_in_one_chat(conn)
    data = I.export_user(conn, "userA")
    text = json.dumps(data)
    assert "blue-falcon" not in text and "b-notes" not in text
    assert data["shared_stores"] == [{"store_key": "session:room-1", "kind": "session", "note": SHARED_WITH_USERS}]
    own = {s["store_key"]: s for s in data["stores"]}
    assert set(own) == {"session:a-only"}  # a session store of this user only stays the user's
    assert [f["text"] for f in own["session:a-only"]["files"]] == ["A's own session note"]
    assert own["session:a-only"]["note"] is None and data["other_orgs"] == []

    counts = I.forget_user(conn, "userA")
    assert counts["stores"] == 1 and counts["episodes"] == 2
    assert counts["stores_kept"] == [{"store_key": "session:room-1", "kind": "session", "reason": SHARED_WITH_USERS}]
    assert _store_keys(conn) == {"session:room-1"}
    # user B's session memory is whole, its file name in the audit trail too
    view = MemoryTool(conn, "S", session_id="room-1").execute({"command": "view", "path": "/memories/b-notes.md"})
    assert "blue-falcon" in view
    paths = {r[0] for r in conn.execute(sa.select(audit_events.c.file_path).where(audit_events.c.store_key == "session:room-1"))}
    assert "/memories/b-notes.md" in paths
    assert [e.user_text for e in list_episodes(conn, "userB")] == ["hi from B, my hint is blue-falcon"]
    # B's export holds the store as shared too (A's episode in room-1 is gone, so B's own now)
    assert {s["store_key"] for s in I.export_user(conn, "userB")["stores"]} == {"session:room-1"}


def test_a_chat_shared_through_an_item_or_a_mark_counts_too(conn: Connection) -> None:
    enable_for_agent(conn, "S", scope="session")
    record_episode(conn, "userA", "hi", "ok", chat_id="room-2")
    I.add_item(conn, "userB", "B likes jazz", kind="auto", confidence=0.9, source_chat_id="room-2", org_id="org2")
    MemoryTool(conn, "S", session_id="room-2").execute(
        {"command": "create", "path": "/memories/n.md", "file_text": B_NOTE}
    )
    assert [s["store_key"] for s in I.export_user(conn, "userA")["shared_stores"]] == ["session:room-2"]
    assert I.forget_user(conn, "userA")["stores"] == 0
    assert _store_keys(conn) == {"session:room-2"}


def _alice_in_two_orgs(conn: Connection) -> None:
    record_episode(conn, "alice", "zebra lasagna in default", "ok")
    record_episode(conn, "alice", "zebra lasagna in org2", "ok", org_id="org2")
    I.add_item(conn, "alice", "Alice likes zebras", org_id="org2")
    put_file(conn, StoreRef(store_key="user:UA:alice", scope="user", agent_code="UA"), "/memories/a.md", "alice's file")
    put_file(conn, StoreRef(store_key="context:CA:user:alice", scope="context", agent_code="CA"),
             "/memories/c.md", "alice's context")
    write_profile(conn, "alice", "Alice, zookeeper", expected_version=0)


def test_a_forget_in_one_organisation_keeps_the_organisation_less_stores_of_a_user_held_elsewhere(
    conn: Connection,
) -> None:
    _alice_in_two_orgs(conn)
    before = _store_keys(conn)
    data = I.export_user(conn, "alice", org_id="org2")
    assert data["other_orgs"] == ["default"]
    assert {s["store_key"]: s["note"] for s in data["stores"]} == {
        "user:UA:alice": HELD_IN_OTHER_ORGS, "context:CA:user:alice": HELD_IN_OTHER_ORGS,
    }
    assert [p["note"] for p in data["profile"]] == [HELD_IN_OTHER_ORGS]

    counts = I.forget_user(conn, "alice", org_id="org2")
    assert (counts["items"], counts["episodes"], counts["stores"]) == (1, 1, 0)
    assert counts["other_orgs"] == ["default"] and counts["org_ids"] == ["org2"]
    assert {k["store_key"] for k in counts["stores_kept"]} == {
        "user:UA:alice", "context:CA:user:alice", *(k for k in before if k.startswith("reserved:profile:")),
    }
    assert {k["reason"] for k in counts["stores_kept"]} == {HELD_IN_OTHER_ORGS}
    assert _store_keys(conn) == before
    assert read_profile(conn, "alice").text == "Alice, zookeeper"
    assert [e.user_text for e in list_episodes(conn, "alice")] == ["zebra lasagna in default"]
    assert list_episodes(conn, "alice", org_id="org2") == []
    paths = {r[0] for r in conn.execute(sa.select(audit_events.c.file_path).where(audit_events.c.store_key == "user:UA:alice"))}
    assert paths == {"/memories/a.md"}  # not redacted: the store is kept

    # the last organisation holding the user: the organisation-less stores go with it
    counts = I.forget_user(conn, "alice")
    assert counts["other_orgs"] == [] and counts["stores_kept"] == [] and counts["stores"] == 3
    assert _store_keys(conn) == set()


def test_a_forget_in_every_organisation_deletes_all_of_the_user(conn: Connection) -> None:
    _alice_in_two_orgs(conn)
    I.set_memory_switch(conn, "alice", False, org_id="org2")
    counts = I.forget_user(conn, "alice", org_id=None)
    assert counts["org_ids"] == ["default", "org2"] and counts["other_orgs"] == []
    assert (counts["items"], counts["episodes"], counts["stores"], counts["switches"]) == (1, 2, 3, 1)
    assert _store_keys(conn) == set()
    for org in ("default", "org2"):
        assert list_episodes(conn, "alice", org_id=org) == []
        assert I.list_items(conn, "alice", org_id=org, include_deleted=True) == []
    assert {e.org_id for e in I.audit_events(conn, user_id="alice", action="user_forget")} == {"default", "org2"}


def test_a_user_in_one_organisation_only_is_forgotten_whole_by_a_scoped_forget(conn: Connection) -> None:
    _alice_in_two_orgs(conn)
    I.forget_user(conn, "alice")  # default first: org2 still holds her, the stores stay
    assert len(_store_keys(conn)) == 3
    counts = I.forget_user(conn, "alice", org_id="org2")
    assert counts["stores"] == 3 and counts["other_orgs"] == []
    assert _store_keys(conn) == set()
