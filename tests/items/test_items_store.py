"""Memory items on every backend: CRUD, soft delete and restore, the auto-item limit, the memory
switch, validation before SQL, and the transaction policy (checked through a second
connection)."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import items as I
from dbmemory.db.schema import items as items_table
from dbmemory.errors import ConflictError, InvalidArgumentError, InvalidScopeError, NotFoundError
from dbmemory.items import mark_items_used

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def at(**delta: float) -> dt.datetime:
    return T0 + dt.timedelta(**delta)


def texts(conn: Connection, user: str = "u1", **kw: object) -> list[str]:
    return [i.text for i in I.list_items(conn, user, **kw)]  # type: ignore[arg-type]


def test_add_list_edit_and_the_item_fields(conn: Connection) -> None:
    item = I.add_item(conn, "ann@example.com", "  User prefers tea.  ", now=T0)
    assert (item.text, item.kind, item.retention_class, item.version) == ("User prefers tea.", "manual", "standard", 1)
    assert item.user_id == "ann@example.com" and item.org_id == "default"
    assert item.confidence is None and item.deleted_at is None and item.last_used_at is None
    assert item.created_at == item.updated_at == T0
    assert item.expires_at == at(days=180)
    assert item.char_count == len("User prefers tea.") and item.text_hash == I.text_hash("user prefers TEA")
    auto = I.add_item(conn, "ann@example.com", "Likes Python", kind="auto", confidence=0.91234,
                      source_chat_id="chat-1", source_turn_at=at(hours=1), now=at(hours=1))
    assert (auto.kind, auto.retention_class, auto.confidence, auto.is_auto) == ("auto", "auto", 0.912, True)
    assert auto.expires_at == at(hours=1, days=30) and auto.source_chat_id == "chat-1"
    edited = I.edit_item(conn, "ann@example.com", item.item_id, "User prefers green tea",
                         retention_class="permanent", now=at(days=1))
    assert (edited.version, edited.retention_class, edited.expires_at) == (2, "permanent", None)
    assert edited.updated_at == at(days=1) and edited.kind == "manual"
    assert texts(conn, "ann@example.com", now=at(days=2)) == ["User prefers green tea", "Likes Python"]
    assert I.count_items(conn, "ann@example.com", now=at(days=2)) == {"manual": 1, "auto": 1}
    assert [i.kind for i in I.list_items(conn, "ann@example.com", kind="auto", now=at(days=2))] == ["auto"]
    assert I.list_items(conn, "ann@example.com", org_id="other") == []


def test_edit_is_a_compare_and_set_with_expected_version(conn: Connection) -> None:
    item = I.add_item(conn, "u1", "one")
    I.edit_item(conn, "u1", item.item_id, "two", expected_version=1)
    with pytest.raises(ConflictError):
        I.edit_item(conn, "u1", item.item_id, "three", expected_version=1)
    assert texts(conn) == ["two"]


def test_soft_delete_stops_use_at_once_and_restore_works_until_purge(conn: Connection) -> None:
    keep = I.add_item(conn, "u1", "keep", now=T0)
    gone = I.add_item(conn, "u1", "gone", now=T0)
    deleted = I.delete_item(conn, "u1", gone.item_id, now=at(days=1))
    assert deleted.deleted_at == at(days=1) and deleted.version == 2
    assert texts(conn, now=at(days=1)) == ["keep"]
    assert texts(conn, include_deleted=True, now=at(days=1)) == ["keep", "gone"]
    with pytest.raises(NotFoundError) as info:
        I.edit_item(conn, "u1", gone.item_id, "x")
    assert info.value.code == "item_deleted"
    with pytest.raises(NotFoundError):
        I.delete_item(conn, "u1", gone.item_id)
    restored = I.restore_item(conn, "u1", gone.item_id, now=at(days=20))
    assert restored.deleted_at is None and restored.expires_at == at(days=200)
    with pytest.raises(InvalidArgumentError) as info2:
        I.restore_item(conn, "u1", keep.item_id, now=at(days=20))
    assert info2.value.code == "item_not_deleted"
    assert "expired" not in info2.value.message
    with pytest.raises(InvalidArgumentError) as info3:  # expired (standard: 180 days), not deleted
        I.restore_item(conn, "u1", keep.item_id, now=at(days=181))
    assert info3.value.code == "item_not_deleted"
    assert "an expired item stays expired" in info3.value.message
    # purge: not before the grace period (30 days) is over, unless include_grace
    I.delete_item(conn, "u1", gone.item_id, now=at(days=21))
    assert I.purge_items(conn, now=at(days=50)) == 0
    assert I.purge_items(conn, now=at(days=51)) == 1
    with pytest.raises(NotFoundError) as info3:
        I.restore_item(conn, "u1", gone.item_id)
    assert info3.value.code == "item_not_found"
    I.delete_item(conn, "u1", keep.item_id, now=at(days=52))
    assert I.purge_items(conn, user_id="u1", include_grace=True, now=at(days=52)) == 1
    assert texts(conn, include_deleted=True) == []


def test_clear_soft_deletes_every_item_of_one_user_only(conn: Connection) -> None:
    for text in ("a", "b", "c"):
        I.add_item(conn, "u1", text)
    I.add_item(conn, "u2", "other user")
    I.add_item(conn, "u1", "other org", org_id="acme")
    assert I.clear_items(conn, "u1") == 3
    assert texts(conn) == [] and texts(conn, "u2") == ["other user"]
    assert texts(conn, org_id="acme") == ["other org"]
    assert len(I.audit_events(conn, user_id="u1", action="item_delete")) == 3


def test_a_user_cannot_reach_another_users_item_by_id(conn: Connection) -> None:
    item = I.add_item(conn, "u1", "mine")
    for call in (
        lambda: I.edit_item(conn, "u2", item.item_id, "hijack"),
        lambda: I.delete_item(conn, "u2", item.item_id),
        lambda: I.get_item(conn, "u2", item.item_id),
        lambda: I.delete_item(conn, "u1", item.item_id, org_id="acme"),
    ):
        with pytest.raises(NotFoundError):
            call()
    assert texts(conn) == ["mine"]


def test_auto_item_limit_evicts_the_least_recently_used_auto_item_never_a_manual_one(
    conn: Connection, engine: Engine
) -> None:
    manual = [I.add_item(conn, "u1", f"manual {n}", now=at(minutes=n)) for n in range(3)]
    autos = [
        I.add_item(conn, "u1", f"auto {n}", kind="auto", confidence=0.9, now=at(hours=1, minutes=n))
        for n in range(I.MAX_AUTO_ITEMS)
    ]
    conn.commit()
    # auto 0 was used recently: auto 1 is now the least recently used
    assert mark_items_used(engine, [autos[0].item_id], now=at(hours=5)) == 1
    new = I.add_item(conn, "u1", "auto new", kind="auto", confidence=0.9, now=at(hours=6))
    live = I.list_items(conn, "u1", now=at(hours=6))
    assert len([i for i in live if i.is_auto]) == I.MAX_AUTO_ITEMS
    assert {i.item_id for i in manual} <= {i.item_id for i in live}
    assert autos[1].item_id not in {i.item_id for i in live}
    assert {autos[0].item_id, new.item_id} <= {i.item_id for i in live}
    evicted = I.audit_events(conn, user_id="u1", action="item_evict")
    assert [e.item_id for e in evicted] == [autos[1].item_id]
    # manual items are never counted nor evicted, whatever their number
    assert I.enforce_auto_item_limit(conn, "u1", limit=0, now=at(hours=7)) == I.MAX_AUTO_ITEMS
    assert [i.kind for i in I.list_items(conn, "u1", now=at(hours=7))] == ["manual"] * 3


def test_two_writers_never_pass_the_auto_limit_together(engine: Engine, backend_name: str) -> None:
    if backend_name == "sqlite-memory":
        pytest.skip("in-memory SQLite has one shared connection")
    with engine.begin() as c:
        for n in range(I.MAX_AUTO_ITEMS - 1):
            I.add_item(c, "u1", f"auto {n}", kind="auto", now=at(minutes=n))
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            with engine.begin() as c:
                I.add_item(c, "u1", f"racer {n}", kind="auto", now=at(hours=3))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    with engine.connect() as c:
        assert I.count_items(c, "u1", now=at(hours=4))["auto"] == I.MAX_AUTO_ITEMS


def test_mark_items_used_with_an_engine_commits_apart_from_the_callers_transaction(
    engine: Engine, other_connection: object
) -> None:
    with engine.begin() as c:
        item = I.add_item(c, "u1", "fact")
    with engine.connect() as turn:
        turn.begin()
        I.list_items(turn, "u1")  # the turn read its items
        turn.rollback()
    assert mark_items_used(engine, [item.item_id], now=at(days=3)) == 1
    with other_connection() as c2:  # type: ignore[operator]
        assert I.get_item(c2, "u1", item.item_id).last_used_at == at(days=3)
    assert mark_items_used(engine, []) == 0


def test_memory_switch_keeps_items_and_is_audited(conn: Connection) -> None:
    I.add_item(conn, "u1", "fact")
    assert I.get_memory_switch(conn, "u1") is True
    assert I.set_memory_switch(conn, "u1", False, actor="ann") is True
    assert I.get_memory_switch(conn, "u1") is False
    assert I.get_memory_switch(conn, "u1", org_id="acme") is True
    assert texts(conn) == ["fact"]
    assert I.set_memory_switch(conn, "u1", True) is False
    assert texts(conn) == ["fact"]
    details = [e.detail for e in I.audit_events(conn, user_id="u1", action="switch_set")]
    assert details == ["memory_on: false -> true", "memory_on: true -> false"]


def test_the_switch_and_the_profile_opt_out_are_two_switches(conn: Connection) -> None:
    from dbmemory.profile import set_user_memory_enabled
    from dbmemory.profile.optout import is_user_memory_enabled

    I.add_item(conn, "u1", "fact")
    set_user_memory_enabled(conn, "u1", False, actor="ann")
    assert I.get_memory_switch(conn, "u1") is True and is_user_memory_enabled(conn, "u1") is False
    assert texts(conn) == ["fact"]
    [event] = I.audit_events(conn, user_id="u1", action="optout_set")
    assert (event.actor, event.detail) == ("ann", "memory_enabled: true -> false")


@pytest.mark.parametrize(
    ("call", "error", "code"),
    [
        (lambda c: I.add_item(c, "u1", ""), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.add_item(c, "u1", "   "), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.add_item(c, "u1", "a\x00b"), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.add_item(c, "u1", "x" * 1001), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.add_item(c, "u1", 7), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.add_item(c, "", "x"), InvalidScopeError, "invalid_scope"),
        (lambda c: I.add_item(c, "u1", "x", org_id="a b"), InvalidScopeError, "invalid_scope"),
        (lambda c: I.add_item(c, "u1", "x", org_id="acme "), InvalidScopeError, "invalid_scope"),
        (lambda c: I.add_item(c, "u1", "x", kind="profile"), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.add_item(c, "u1", "x", retention_class="forever"), InvalidArgumentError, "invalid_retention_class"),
        (lambda c: I.add_item(c, "u1", "x", retention_class="auto"), InvalidArgumentError, "invalid_retention_class"),
        (lambda c: I.add_item(c, "u1", "x", confidence=0.5), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.add_item(c, "u1", "x", kind="auto", confidence=1.5), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.add_item(c, "u1", "x", kind="auto", source_chat_id="a/b"), InvalidScopeError, "invalid_scope"),
        (lambda c: I.edit_item(c, "u1", 0, "x"), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.edit_item(c, "u1", 1), InvalidArgumentError, "invalid_argument"),
        (lambda c: I.set_memory_switch(c, "u1", 1), InvalidArgumentError, "invalid_argument"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_is_refused_before_sql_and_the_transaction_stays_usable(
    conn: Connection, call: object, error: type, code: str
) -> None:
    conn.begin()
    I.add_item(conn, "u1", "before")
    with pytest.raises(error) as info:
        call(conn)  # type: ignore[operator]
    assert info.value.code == code
    assert texts(conn) == ["before"]
    conn.commit()


def test_every_item_write_joins_the_callers_transaction(engine: Engine, other_connection: object) -> None:
    with engine.begin() as c:
        kept = I.add_item(c, "u1", "kept")
    with engine.connect() as c:
        with c.begin() as tx:
            I.add_item(c, "u1", "rolled back")
            I.edit_item(c, "u1", kept.item_id, "edited then rolled back")
            I.set_memory_switch(c, "u1", False)
            I.set_org_setting(c, "default", "grace_days", 3, is_admin=True)
            with other_connection() as c2:  # type: ignore[operator]
                assert texts(c2) == ["kept"]  # nothing is committed before the caller commits
            tx.rollback()
        with c.begin():
            I.delete_item(c, "u1", kept.item_id)
            c.rollback()
    with other_connection() as c2:  # type: ignore[operator]
        assert texts(c2) == ["kept"]
        assert I.get_memory_switch(c2, "u1") is True
        assert I.get_org_settings(c2).grace_days == 30
        assert [e.action for e in I.audit_events(c2)] == ["item_add"]
        assert c2.execute(sa.select(sa.func.count()).select_from(items_table)).scalar() == 1
    with engine.begin() as c:
        I.delete_item(c, "u1", kept.item_id)
    with other_connection() as c2:  # type: ignore[operator]
        assert texts(c2) == [] and len(texts(c2, include_deleted=True)) == 1
