"""Retention by class and the grace-period purge under an injected clock, organisation
settings, organisation memory out of every agent's reach, the audit filters, and a DSAR export
followed by forget-user leaving only content-free audit rows; every backend."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import items as I
from dbmemory.core.model import StoreRef
from dbmemory.db.schema import audit_events
from dbmemory.db.schema import items as items_table
from dbmemory.errors import InvalidArgumentError, InvalidScopeError
from dbmemory.items.runtime_data import set_fold_mark
from dbmemory.store.agents import enable_for_agent
from dbmemory.store.files import put_file
from dbmemory.store.resolve import use_store
from dbmemory.tool import MemoryTool

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def at(**delta: float) -> dt.datetime:
    return T0 + dt.timedelta(**delta)


# -- retention -----------------------------------------------------------------------------


def test_items_expire_by_class_and_are_purged_after_the_grace_period(conn: Connection) -> None:
    std = I.add_item(conn, "u1", "standard", now=T0)
    tmp = I.add_item(conn, "u1", "temporary", retention_class="temporary", now=T0)
    auto = I.add_item(conn, "u1", "auto", kind="auto", now=T0)
    perm = I.add_item(conn, "u1", "permanent", retention_class="permanent", now=T0)
    set_fold_mark(conn, "default", "u1", T0)  # folded into the profile: the auto item may expire
    assert I.run_item_retention(conn, now=at(days=30) - dt.timedelta(seconds=1)) == {"expired": 0, "purged": 0}
    # an expired item stops being used at its expiry time, before the job runs
    assert [i.text for i in I.list_items(conn, "u1", now=at(days=30))] == ["standard", "temporary", "permanent"]
    assert I.run_item_retention(conn, now=at(days=30)) == {"expired": 1, "purged": 0}
    assert I.get_item(conn, "u1", auto.item_id).deleted_at == at(days=30)
    assert I.run_item_retention(conn, now=at(days=60)) == {"expired": 1, "purged": 1}  # auto purged
    assert I.run_item_retention(conn, now=at(days=180)) == {"expired": 1, "purged": 1}
    assert I.run_item_retention(conn, now=at(days=210)) == {"expired": 0, "purged": 1}
    assert I.run_item_retention(conn, now=at(days=100_000)) == {"expired": 0, "purged": 0}
    assert [i.item_id for i in I.list_items(conn, "u1", include_deleted=True)] == [perm.item_id]
    actions = [(e.action, e.item_id) for e in reversed(I.audit_events(conn, user_id="u1"))]
    assert actions[4:] == [
        ("item_expire", auto.item_id), ("item_expire", tmp.item_id), ("item_purge", auto.item_id),
        ("item_expire", std.item_id), ("item_purge", tmp.item_id), ("item_purge", std.item_id),
    ]


def test_an_expired_item_can_be_restored_during_its_grace_period(conn: Connection) -> None:
    item = I.add_item(conn, "u1", "fact", retention_class="temporary", now=T0)
    I.run_item_retention(conn, now=at(days=61))
    restored = I.restore_item(conn, "u1", item.item_id, now=at(days=70))
    assert restored.expires_at == at(days=130)
    assert I.run_item_retention(conn, now=at(days=100)) == {"expired": 0, "purged": 0}


def test_retention_days_and_grace_are_per_organisation(conn: Connection) -> None:
    I.set_org_setting(conn, "acme", "retention_standard_days", 10, now=T0, is_admin=True)
    I.set_org_setting(conn, "acme", "grace_days", "2", now=T0, is_admin=True)
    a = I.add_item(conn, "u1", "acme fact", org_id="acme", now=T0)
    d = I.add_item(conn, "u1", "default fact", now=T0)
    assert a.expires_at == at(days=10) and d.expires_at == at(days=180)
    assert I.run_item_retention(conn, now=at(days=11)) == {"expired": 1, "purged": 0}
    assert I.run_item_retention(conn, now=at(days=13)) == {"expired": 0, "purged": 1}
    # changing the days moves the expiry of live items of that class
    I.set_org_setting(conn, "default", "retention_standard_days", 365, now=T0, is_admin=True)
    assert I.get_item(conn, "u1", d.item_id).expires_at == at(days=365)
    assert I.get_org_settings(conn, "acme").retention_days("permanent") is None


def test_dbmemory_expire_also_expires_and_purges_items(engine: Engine, monkeypatch: pytest.MonkeyPatch, set_clock: Callable[[Any], None]) -> None:
    from typer.testing import CliRunner

    from dbmemory.cli import app

    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pytest.skip("the CLI opens its own engine")
    with engine.begin() as c:
        I.add_item(c, "u1", "old", kind="auto", now=T0)
        set_fold_mark(c, "default", "u1", T0)  # folded: it may expire
        gone = I.add_item(c, "u1", "deleted long ago", now=T0)
        I.delete_item(c, "u1", gone.item_id, now=T0)
    set_clock(lambda: at(days=31))
    url = engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(app, ["expire", "--days", "90", "--json", "--url", url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["items_expired"], report["items_purged"]) == (1, 1)
    assert report["episodes_expired"] == 0


# -- settings ------------------------------------------------------------------------------


def test_settings_have_the_documented_defaults_and_every_change_is_audited(conn: Connection) -> None:
    s = I.get_org_settings(conn, "acme")
    assert (s.confidence_threshold, s.retention_standard_days, s.retention_temporary_days) == (0.8, 180, 60)
    assert (s.retention_auto_days, s.grace_days, s.selection_threshold, s.top_k) == (30, 30, 20, 10)
    assert (s.summary_every_items, s.skip_window_seconds, s.extraction_model) == (10, 300, "")
    assert I.set_org_setting(conn, "acme", "confidence_threshold", "0.9", actor="boss", is_admin=True).confidence_threshold == 0.9
    I.set_org_setting(conn, "acme", "extraction_model", "gpt-4o-mini", is_admin=True)
    assert I.get_org_settings(conn, "default").confidence_threshold == 0.8
    [second, first] = I.audit_events(conn, org_id="acme", action="setting_set")
    assert (first.actor, first.detail) == ("boss", "confidence_threshold: 0.8 -> 0.9")
    assert second.detail == "extraction_model:  -> gpt-4o-mini"
    for name, value, code in (("nope", 1, "unknown_setting"), ("top_k", 0, "invalid_argument"),
                              ("grace_days", "x", "invalid_argument"), ("top_k", 2.5, "invalid_argument"),
                              ("confidence_threshold", True, "invalid_argument")):
        with pytest.raises(InvalidArgumentError) as info:
            I.set_org_setting(conn, "acme", name, value, is_admin=True)
        assert info.value.code == code


# -- organisation memory ---------------------------------------------------------------------


def test_org_settings_are_changed_by_admins_only(conn: Connection) -> None:
    for flag in (False, "yes", None):
        with pytest.raises(I.NotAdminError) as info:
            I.set_org_setting(conn, "acme", "org_memory_token_budget", 1, is_admin=flag)  # type: ignore[arg-type]
        assert info.value.code == "not_admin"
    assert I.get_org_settings(conn, "acme").org_memory_token_budget == 1000
    assert conn.execute(sa.select(sa.func.count()).select_from(audit_events)).scalar_one() == 0
    I.set_org_setting(conn, "acme", "org_memory_token_budget", 1, is_admin=True)
    assert I.get_org_settings(conn, "acme").org_memory_token_budget == 1


def test_org_memory_is_written_by_admins_only_and_refused_over_budget(conn: Connection) -> None:
    with pytest.raises(I.NotAdminError) as info:
        I.set_org_memory(conn, "acme", "We sell anvils.", is_admin=False, actor="eve")
    assert info.value.code == "not_admin"
    with pytest.raises(I.NotAdminError):
        I.set_org_memory(conn, "acme", "x", is_admin="yes", actor="eve")  # type: ignore[arg-type]
    memory = I.set_org_memory(conn, "acme", "We sell anvils.", is_admin=True, actor="boss")
    assert (memory.text, memory.version) == ("We sell anvils.", 1)
    assert I.get_org_memory(conn, "acme") == "We sell anvils." and I.get_org_memory(conn) == ""
    I.set_org_setting(conn, "acme", "org_memory_token_budget", 5, is_admin=True)
    with pytest.raises(InvalidArgumentError) as info2:
        I.set_org_memory(conn, "acme", "word " * 50, is_admin=True, actor="boss")
    assert info2.value.code == "over_budget"
    assert "the budget of organisation 'acme' is 5 tokens" in str(info2.value)
    assert I.get_org_memory(conn, "acme") == "We sell anvils."
    I.set_org_memory(conn, "acme", "", is_admin=True, actor="boss")
    assert I.get_org_memory(conn, "acme") == ""
    events = I.audit_events(conn, org_id="acme", action="org_memory_set")
    assert [(e.chars_before, e.chars_after, e.actor) for e in events] == [(15, 0, "boss"), (0, 15, "boss")]


HOSTILE_PATHS = [
    "/memories/organisation.md",
    "/memories/../reserved/org/acme/memories/organisation.md",
    "/memories/reserved:org:acme/organisation.md",
    "/memories/%2e%2e/organisation.md",
    "/memories//organisation.md",
    "/reserved:org:acme",
]


def test_no_agent_or_memory_tool_can_reach_the_org_memory(conn: Connection) -> None:
    secret = "Org secret: merger with Globex."
    I.set_org_memory(conn, "acme", secret, is_admin=True, actor="boss")
    key = I.org_memory_store_key("acme")
    assert key == "reserved:org:acme"
    with pytest.raises(InvalidScopeError):
        MemoryTool(conn, store=StoreRef(store_key=key, scope="reserved"))
    for code in (key, "reserved", "org", "acme"):
        try:
            tool = MemoryTool.for_store(conn, code)
        except InvalidScopeError:
            continue
        for path in HOSTILE_PATHS:
            assert secret not in tool.execute({"command": "view", "path": path})
        with use_store(code) as ref:
            assert not ref.store_key.startswith("reserved:")
    for config in ({"scope": "shared", "store_code": "acme"}, {"scope": "global"},
                   {"scope": "context", "store_code": "org", "context_key": "org_id"}):
        enable_for_agent(conn, "SPY", **config)  # type: ignore[arg-type]
        tool = MemoryTool(conn, "SPY", run_context={"org_id": "acme", "user_id": "u1"})
        assert not tool.store.store_key.startswith("reserved:")
        for path in HOSTILE_PATHS:
            answer = tool.execute({"command": "view", "path": path})
            assert secret not in answer
            tool.execute({"command": "create", "path": "/memories/organisation.md", "file_text": "pwned"})
    assert I.get_org_memory(conn, "acme") == secret


# -- audit -----------------------------------------------------------------------------------


def test_audit_filters_by_org_user_action_and_time(conn: Connection) -> None:
    I.add_item(conn, "u1", "one", now=at(days=1))
    item = I.add_item(conn, "u2", "two", org_id="acme", now=at(days=2))
    I.delete_item(conn, "u2", item.item_id, org_id="acme", now=at(days=3))
    assert [e.action for e in I.audit_events(conn)] == ["item_delete", "item_add", "item_add"]
    assert [e.user_id for e in I.audit_events(conn, user_id="u1")] == ["u1"]
    assert [e.action for e in I.audit_events(conn, org_id="acme")] == ["item_delete", "item_add"]
    assert [e.created_at for e in I.audit_events(conn, action="item_add")] == [at(days=2), at(days=1)]
    assert [e.created_at for e in I.audit_events(conn, since=at(days=2))] == [at(days=3), at(days=2)]
    assert [e.created_at for e in I.audit_events(conn, since=dt.date(2026, 1, 3), until=at(days=3))] == [at(days=2)]
    assert len(I.audit_events(conn, limit=1)) == 1
    assert I.audit_events(conn, user_id="u1", org_id="acme") == []
    with pytest.raises(InvalidArgumentError):
        I.audit_events(conn, since=at(days=3), until=at(days=1))
    with pytest.raises(InvalidArgumentError):
        I.audit_events(conn, limit=0)
    view = conn.execute(sa.text("SELECT action_name, user_key, item_id FROM dbm_audit_report_v")).all()
    assert sorted(r[0] for r in view) == ["item_add", "item_add", "item_delete"]


# -- DSAR ------------------------------------------------------------------------------------


SECRETS = ("Ann is allergic to peanuts", "Ann's profile: lives in Lyon", "Ann's agent note", "Ann context note")


def test_export_then_forget_leaves_only_content_free_audit_rows(conn: Connection) -> None:
    from dbmemory.profile import set_user_memory_enabled
    from dbmemory.profile.store import write_profile

    user = "ann_1"
    item = I.add_item(conn, user, SECRETS[0])
    I.edit_item(conn, user, item.item_id, SECRETS[0] + " and shellfish")
    I.add_item(conn, user, "Ann likes tea", kind="auto", confidence=0.9, source_chat_id="c1")
    write_profile(conn, user, SECRETS[1], expected_version=0)
    put_file(conn, StoreRef(store_key=f"user:SUPPORT:{user}", scope="user", agent_code="SUPPORT"),
             "/memories/notes.md", SECRETS[2])
    put_file(conn, StoreRef(store_key=f"context:store:DOCS:user_id:{user}", scope="context", store_code="DOCS"),
             "/memories/n.md", SECRETS[3])
    put_file(conn, StoreRef(store_key="context:store:DOCS:doc:ann_1", scope="context", store_code="DOCS"),
             "/memories/doc.md", "a document, not a person")
    put_file(conn, StoreRef(store_key="user:SUPPORT:bob", scope="user", agent_code="SUPPORT"),
             "/memories/notes.md", "Bob's note")
    I.set_memory_switch(conn, user, False)
    set_user_memory_enabled(conn, "someone-else", False)

    data = I.export_user(conn, user)
    json.dumps(data)  # JSON-able
    assert data["format"] == "dbmemory-user-export/1" and data["user_key"] == "ann_5F1"
    assert [p["files"][0]["text"] for p in data["profile"]] == [SECRETS[1]]
    assert sorted(i["text"] for i in data["items"]) == sorted(["Ann likes tea", SECRETS[0] + " and shellfish"])
    assert {(s["store_key"], s["kind"]) for s in data["stores"]} == {
        (f"user:SUPPORT:{user}", "user"), (f"context:store:DOCS:user_id:{user}", "context"),
    }
    assert data["switches"] == {"memory_switch_on": False, "profile_memory_enabled": True}
    assert {"item_add", "item_edit", "switch_set", "put"} <= {e["action"] for e in data["audit_events"]}

    counts = I.forget_user(conn, user)
    assert counts == {"items": 2, "stores": 3, "switches": 1, "episodes": 0, "events_redacted": 3,
                      "stores_kept": [], "other_orgs": [], "org_ids": ["default"]}
    assert I.list_items(conn, user, include_deleted=True) == []
    after = I.export_user(conn, user)
    assert (after["profile"], after["items"], after["stores"]) == ([], [], [])
    assert after["switches"] == {"memory_switch_on": True, "profile_memory_enabled": True}
    # the other user's store and the document store stay
    left = {r[0] for r in conn.execute(sa.text("SELECT store_key FROM dbm_stores"))}
    assert left == {"user:SUPPORT:bob", "context:store:DOCS:doc:ann_1"}
    # no audit column holds any of the texts, not even a piece of them
    columns = [c for c in audit_events.c if isinstance(c.type, sa.String)]
    rows = conn.execute(sa.select(*columns)).all()
    assert rows
    for row in rows:
        for value in row:
            for secret in (*SECRETS, "peanuts", "shellfish", "Ann likes tea", "Lyon"):
                assert value is None or secret not in value, (value, secret)
    assert conn.execute(sa.select(sa.func.count()).select_from(items_table)).scalar() == 0
    actions = {e.action for e in I.audit_events(conn, user_id=user)}
    assert {"user_export", "user_forget", "item_purge"} <= actions
