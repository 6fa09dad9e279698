"""Conversation episodes and the search over a user's memory, on every backend."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from dbmemory.agent.item_memory import record as record_turn_episode
from dbmemory.cli import app
from dbmemory.core.model import StoreRef
from dbmemory.db import migrate
from dbmemory.db.schema import audit_events, episodes
from dbmemory.errors import InvalidArgumentError
from dbmemory.items import export_user, forget_user
from dbmemory.items.episode_search import (
    engine_query,
    episode_search_statement,
    salient_words,
    search_episodes,
)
from dbmemory.items.episodes import (
    count_episodes,
    delete_episodes,
    expire_episodes,
    list_episodes,
    record_episode,
)
from dbmemory.items.memory_search import search_memory
from dbmemory.items.model import user_key_of
from dbmemory.items.settings import set_memory_switch
from dbmemory.items.store import add_item
from dbmemory.items.turn_memory import load_turn_items
from dbmemory.profile.optout import set_user_memory_enabled
from dbmemory.profile.store import write_profile
from dbmemory.store.files import put_file
from helpers import StatementLog
from oracle_checks import compiled, regex_problems

T0 = dt.datetime(2023, 5, 8, 13, 0, tzinfo=dt.timezone.utc)
SECRET = "sk-proj-9f8e7d6c5b4a39281716151413121110"


def _write(engine: Engine, user: str, text: str, reply: str = "ok", **kw: Any) -> int | None:
    with engine.begin() as c:
        return record_episode(c, user, text, reply, turn_at=kw.pop("turn_at", T0), **kw)


def _search(engine: Engine, user: str, query: str, **kw: Any) -> list[Any]:
    with engine.connect() as c:
        return search_episodes(c, user, query, now=kw.pop("now", T0), **kw)


def _all_stored_text(engine: Engine) -> str:
    with engine.connect() as c:
        texts = [r[0] or "" for r in c.execute(sa.select(episodes.c.episode_text))]
        texts += [str(r) for r in c.execute(sa.select(audit_events)).all()]
        if engine.dialect.name == "sqlite":  # the FTS5 table's own copy of the index terms
            texts += [str(r) for r in c.exec_driver_sql("SELECT * FROM dbm_episodes_fts_data")]
    return "\n".join(texts)


def test_an_episode_keeps_both_texts_and_a_secret_never_reaches_the_table(engine: Engine) -> None:
    episode_id = _write(
        engine, "ann", f"my key is {SECRET}, mail bob@example.org", "I will not repeat it", chat_id="s1"
    )
    assert episode_id is not None
    with engine.connect() as c:
        (ep,) = list_episodes(c, "ann", now=T0)
    assert ep.chat_id == "s1" and ep.turn_at == T0
    assert ep.assistant_text == "I will not repeat it"
    assert SECRET not in ep.user_text and "bob@example.org" not in ep.user_text
    assert "[redacted:" in ep.user_text.lower()
    stored = _all_stored_text(engine)
    assert SECRET not in stored and "bob@example.org" not in stored


def test_an_episode_expires_by_its_own_class_and_the_expiry_deletes_it(engine: Engine) -> None:
    _write(engine, "ann", "we talked about sailing", retention_days=10)
    assert [h.user_text for h in _search(engine, "ann", "sailing")] == ["we talked about sailing"]
    later = T0 + dt.timedelta(days=11)
    assert _search(engine, "ann", "sailing", now=later) == []
    with engine.begin() as c:
        assert expire_episodes(c, now=later) == 1
        assert count_episodes(c, "ann") == 0
        events = c.execute(
            sa.select(audit_events.c.action_name, audit_events.c.detail_text)
        ).all()
    assert ("episode_expire", "1 episodes") in [tuple(e) for e in events]


def test_search_uses_the_engines_stemming_and_ranks_the_better_match_first(engine: Engine) -> None:
    _write(engine, "ann", "I went hiking in the Alps", "Which trail did you hike?")
    _write(engine, "ann", "My cat is called Mochi", "Cute name")
    _write(engine, "ann", "Hiking and more hiking, then hikes again in the hills", "Lots of hikes")
    hits = _search(engine, "ann", "Did I hike?")
    if engine.dialect.name in ("mysql", "mariadb"):  # InnoDB FULLTEXT has no stemmer: whole words
        assert [h.user_text for h in hits] == ["I went hiking in the Alps"]
        hits = _search(engine, "ann", "hiking hikes")
    assert len(hits) == 2 and all("hik" in h.user_text.lower() for h in hits)
    assert hits[0].score >= hits[1].score > 0
    assert hits[0].user_text.startswith("Hiking and more")
    assert [h.user_text for h in _search(engine, "ann", "mochi")] == ["My cat is called Mochi"]


def test_search_never_returns_another_users_episodes(engine: Engine) -> None:
    _write(engine, "ann", "the secret garden recipe")
    _write(engine, "bob", "the secret garden recipe")
    _write(engine, "bob", "garden party plans")
    with engine.begin() as c:
        add_item(c, "bob", "bob's garden is big")
    ann = _search(engine, "ann", "garden recipe")
    assert len(ann) == 1
    with engine.connect() as c:
        ids = {e.episode_id for e in list_episodes(c, "ann", now=T0)}
        hits = search_memory(c, "ann", "garden recipe party", now=T0)
    assert {h.source for h in hits} == {"episode"} and {int(h.ref) for h in hits} == ids


@pytest.mark.parametrize(
    "query",
    [
        '"hiking',
        'hiking" OR "cat',
        "hik*",
        "NEAR(hiking cat)",
        "-cat",
        "(hiking) AND NOT cat",
        "hiking) OR (*",
        "'; DROP TABLE dbm_episodes; --",
        "{hiking} ACCUM $cat % _ \\",
        "ünïcødé 日本語 hiking",
    ],
)
def test_a_hostile_query_neither_breaks_nor_widens_the_search(engine: Engine, query: str) -> None:
    _write(engine, "ann", "I went hiking in the Alps")
    _write(engine, "ann", "My cat is called Mochi")
    _write(engine, "ann", "ünïcødé and 日本語 text")
    hits = _search(engine, "ann", query)
    words = salient_words(query)
    for hit in hits:  # every hit holds one of the query's own words (stemmed by the engine)
        text = hit.user_text.lower()
        assert any(w[:4] in text for w in words), (query, hit.user_text)
    if query in ("hik*", "-cat", "NEAR(hiking cat)"):
        # a prefix is a word of its own, a '-' negates nothing, NEAR is a plain word
        texts = {h.user_text for h in hits}
        assert texts == {
            "hik*": set(),
            "-cat": {"My cat is called Mochi"},
            "NEAR(hiking cat)": {"I went hiking in the Alps", "My cat is called Mochi"},
        }[query]
    with engine.connect() as c:
        assert count_episodes(c, "ann") == 3


def test_engine_queries_quote_every_word() -> None:
    words = salient_words('NEAR "x" hik* (a OR b) don\'t')
    assert words == ["near", "hik", "don"]
    assert engine_query("sqlite", words) == '"near" OR "hik" OR "don"'
    assert engine_query("postgresql", words) == "'near' | 'hik' | 'don'"
    assert engine_query("oracle", words) == "{near} ACCUM {hik} ACCUM {don}"
    assert salient_words("the and of") == []


def test_switch_off_or_opt_out_stops_episode_writes_and_search(engine: Engine) -> None:
    _write(engine, "ann", "notes about kayaking")
    _write(engine, "bob", "notes about kayaking")
    with engine.begin() as c:
        set_memory_switch(c, "ann", False)
    assert _write(engine, "ann", "more kayaking") is None
    with engine.connect() as c:
        assert search_memory(c, "ann", "kayaking", now=T0) == []
        assert count_episodes(c, "ann") == 1
    with engine.begin() as c:
        set_user_memory_enabled(c, "bob", False)
    assert _write(engine, "bob", "more kayaking") is None
    with engine.connect() as c:
        assert search_memory(c, "bob", "kayaking", now=T0) == []


def test_search_memory_finds_items_profile_and_the_users_files(engine: Engine) -> None:
    _write(engine, "ann", "we discussed the marathon training plan", "Good luck with the marathon")
    with engine.begin() as c:
        add_item(c, "ann", "Ann runs a marathon every spring")
        write_profile(
            c, "ann", "# Profile\n\n## Identity\n- Ann, a marathon runner\n- Likes tea\n",
            expected_version=None,
        )
        put_file(c, StoreRef(store_key="user:COACH:ann", scope="user", agent_code="COACH"),
                 "/memories/plan.md", "Week 1: easy runs\n\nMarathon pace work in week 6")
        put_file(c, StoreRef(store_key="user:COACH:bob", scope="user", agent_code="COACH"),
                 "/memories/plan.md", "Bob marathon notes")
    with engine.connect() as c:
        hits = search_memory(c, "ann", "marathon", now=T0)
        only_files = search_memory(c, "ann", "marathon", scope="files", now=T0)
    assert {h.source for h in hits} == {"episode", "item", "profile", "file"}
    labels = {h.label() for h in hits}
    assert "[conversation 2023-05-08]" in labels and "[file /memories/plan.md]" in labels
    assert [h.snippet for h in only_files] == ["Marathon pace work in week 6"]
    assert all("Bob" not in h.snippet for h in hits)


def test_delete_episodes_removes_them_with_a_content_free_audit_event(engine: Engine) -> None:
    _write(engine, "ann", "private words here")
    _write(engine, "ann", "more private words")
    with engine.begin() as c:
        assert delete_episodes(c, "ann", reason="forget") == 2
        assert count_episodes(c, "ann") == 0
    assert _search(engine, "ann", "private") == []
    assert "private" not in _all_stored_text(engine)


def test_bad_arguments_are_refused_before_the_database(engine: Engine) -> None:
    with engine.connect() as c:
        with pytest.raises(InvalidArgumentError):
            search_memory(c, "ann", "x", scope="everything")
        with pytest.raises(InvalidArgumentError):
            search_memory(c, "ann", "x", limit=0)
        with pytest.raises(InvalidArgumentError):
            record_episode(c, "ann", None, "x")  # type: ignore[arg-type]
        assert count_episodes(c, "ann") == 0


def test_episode_statements_compile_for_oracle_without_problems() -> None:
    """The Oracle Text search and the episode writers, compiled for 19c (never run here)."""
    search = compiled(episode_search_statement("oracle"))
    assert "CONTAINS(episode_text, :q, 1) > 0" in search and "SCORE(1)" in search
    assert "FETCH FIRST :n ROWS ONLY" in search
    assert regex_problems(search) == []
    writes = [
        sa.insert(episodes).values(
            org_id="o", user_key="u", chat_id=None, turn_at=T0, episode_text="x", user_chars=0,
            char_count=1, retention_class="episode", created_at=T0, expires_at=T0,
        ),
        sa.delete(episodes).where(episodes.c.user_key == "u"),
        sa.select(episodes.c.org_id, sa.func.count()).where(episodes.c.expires_at <= T0).group_by(
            episodes.c.org_id
        ),
    ]
    for stmt in writes:
        assert regex_problems(compiled(stmt)) == []


@pytest.mark.parametrize(
    ("dialect_name", "wanted"),
    [
        ("sqlite", "CREATE VIRTUAL TABLE dbm_episodes_fts USING fts5(episode_text, content='dbm_episodes', "
                   "content_rowid='episode_id', tokenize='porter unicode61')"),
        ("postgresql", "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, coalesce(episode_text, ''))) STORED"),
        ("mysql", "CREATE FULLTEXT INDEX ix_dbm_episodes_search ON dbm_episodes (episode_text)"),
        ("oracle", "INDEXTYPE IS CTXSYS.CONTEXT PARAMETERS ('SYNC (ON COMMIT)')"),
    ],
)
def test_the_migration_creates_each_engines_full_text_index(dialect_name: str, wanted: str) -> None:
    assert wanted in migrate.offline_sql(dialect_name)


def test_forget_user_and_the_opt_out_delete_the_episodes_and_export_lists_them(engine: Engine) -> None:
    for user in ("ann", "bob", "cid"):
        _write(engine, user, f"{user} likes climbing", "Nice")
    with engine.begin() as c:
        data = export_user(c, "ann")
    assert [e["user_text"] for e in data["episodes"]] == ["ann likes climbing"]
    with engine.begin() as c:
        assert forget_user(c, "ann")["episodes"] == 1
        set_user_memory_enabled(c, "bob", False)
    with engine.connect() as c:
        assert count_episodes(c, "ann") == 0 and count_episodes(c, "bob") == 0
        assert count_episodes(c, "cid") == 1
        events = c.execute(
            sa.select(audit_events.c.action_name, audit_events.c.detail_text).where(
                audit_events.c.action_name == "episode_delete"
            )
        ).all()
    assert sorted(e.detail_text for e in events) == ["1 episodes, forget", "1 episodes, opt-out"]
    assert "climbing" not in str([tuple(r) for r in events])


def test_dbmemory_expire_deletes_the_episodes_past_their_retention(engine: Engine) -> None:
    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        pytest.skip("the CLI opens its own engine")
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=400)
    _write(engine, "ann", "an old exchange", turn_at=old)
    _write(engine, "ann", "a recent exchange", turn_at=dt.datetime.now(dt.timezone.utc))
    url = engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(app, ["expire", "--days", "90", "--url", url])
    assert result.exit_code == 0, result.output
    assert "Deleted 1 conversation episode past episode_retention_days" in result.output
    with engine.connect() as c:
        assert [e.user_text for e in list_episodes(c, "ann")] == ["a recent exchange"]


def _episode_events(engine: Engine) -> list[Any]:
    with engine.connect() as c:
        return c.execute(
            # the columns the episode revisions know (a later one adds the session's login)
            sa.select(*(c for c in audit_events.c if c.name != "session_user_name"))
            .where(audit_events.c.action_name == "episode_add")
        ).all()


def test_keeping_a_turns_episode_is_one_statement_with_its_audit_event(engine: Engine) -> None:
    """The turn's episode write (switch and opt-out checks, the row, its full-text index, its
    ``episode_add`` audit event) is one statement of the post-processing, on every backend."""
    with engine.begin() as c:
        loaded = load_turn_items(c, org_id="default", user_id="ann", now=T0)
    with StatementLog(engine) as log:
        episode_id = record_turn_episode(
            engine, loaded, user_id="ann", chat_id="s1", user_message="we went kayaking",
            assistant_message="Sounds fun", now=T0,
        )
    assert episode_id is not None
    assert len(log.statements) == 1, log.statements
    assert log.of_kind("INSERT") == log.statements
    (event,) = _episode_events(engine)
    assert (event.actor_name, event.org_id, event.detail_text) == ("turn", "default", f"episode {episode_id}")
    assert event.user_key == user_key_of("ann") and event.chars_after == len("we went kayaking\nSounds fun")
    assert "kayaking" not in str(tuple(event))
    with engine.begin() as c:  # the same one statement obeys a switch turned off during the turn
        set_memory_switch(c, "ann", False)
    with StatementLog(engine) as log:
        assert record_turn_episode(
            engine, loaded, user_id="ann", chat_id="s1", user_message="more kayaking",
            assistant_message="ok", now=T0,
        ) is None
    assert len(log.statements) == 1
    assert len(_episode_events(engine)) == 1
    with engine.connect() as c:
        assert count_episodes(c, "ann") == 1


def test_revision_0008_adds_the_audit_trigger_and_its_downgrade_removes_it(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine, "0007")
    _write(empty_engine, "ann", "before the trigger")
    assert _episode_events(empty_engine) == []  # revision 0007's writer wrote the event itself
    migrate.upgrade(empty_engine)
    _write(empty_engine, "ann", "with the trigger")
    assert len(_episode_events(empty_engine)) == 1
    migrate.downgrade(empty_engine, "0007")
    with empty_engine.begin() as c:
        c.execute(sa.delete(audit_events))
    _write(empty_engine, "ann", "after the downgrade")
    assert _episode_events(empty_engine) == []
    migrate.upgrade(empty_engine)
    assert migrate.current(empty_engine) == migrate.head()
