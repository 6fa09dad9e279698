"""The full-text index narrowed to the user (PostgreSQL's GIN index on ``(org_id, user_key,
search_vector)``): the migration on every backend, the same hits before and after it, and
its fallback when ``btree_gin`` cannot be created."""

from __future__ import annotations

import datetime as dt
import importlib
import secrets
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.db import migrate
from dbmemory.items.episode_search import (
    engine_query,
    episode_search_statement,
    salient_words,
    search_episodes,
)
from dbmemory.items.episodes import record_episode
from dbmemory.items.model import user_key_of

T0 = dt.datetime(2023, 5, 8, 13, 0, tzinfo=dt.timezone.utc)
TEXTS = [
    ("ann", "we went kayaking on the lake", "Sounds fun"),
    ("ann", "my sister paints watercolours", "Lovely"),
    ("ann", "kayaking again, the lake was cold", "Brr"),
    ("bob", "kayaking on the lake with my dog", "Nice"),
    ("bob", "I paint too, mostly the lake", "Cool"),
    ("ann", "a book about a lake monster", "Scary"),
]
REVISION = "dbmemory.db.migrations.versions.0010_episodes_user_search"
"""The revision that narrows PostgreSQL's index (its number is in this one place)."""
QUERIES = ["kayaking lake", "paint sister watercolours", "lake monster book", "dog"]


def _fill(engine: Engine) -> None:
    with engine.begin() as c:
        for i, (user, text, reply) in enumerate(TEXTS):
            record_episode(c, user, text, reply, turn_at=T0 + dt.timedelta(hours=i), chat_id="s1")


def _hits(engine: Engine) -> dict[tuple[str, str], list[tuple[str, float]]]:
    with engine.connect() as c:
        return {
            (user, q): [(h.user_text, round(h.score, 6)) for h in search_episodes(c, user, q, now=T0)]
            for user in ("ann", "bob") for q in QUERIES
        }


def _pg_indexes(engine: Engine) -> dict[str, str]:
    with engine.connect() as c:
        rows = c.exec_driver_sql(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'dbm_episodes'"
        ).all()
    return {name: definition for name, definition in rows}


def test_the_revision_keeps_the_hits_and_its_downgrade_restores_the_index(empty_engine: Engine) -> None:
    """Every backend: the same hits (texts, scores, order) before the revision, after it and
    after its downgrade; each user's only. PostgreSQL: the user is part of the GIN index."""
    version = importlib.import_module(REVISION)
    migrate.upgrade(empty_engine, version.down_revision)
    _fill(empty_engine)
    before = _hits(empty_engine)
    assert {t for t, _ in before["ann", "kayaking lake"]} == {TEXTS[0][1], TEXTS[2][1], TEXTS[5][1]}
    for (user, _q), found in before.items():
        own = {t for u, t, _r in TEXTS if u == user}
        assert {t for t, _ in found} <= own, (user, found)  # never another user's episode
    assert before["bob", "dog"] and not before["ann", "dog"]
    migrate.upgrade(empty_engine)
    assert _hits(empty_engine) == before
    postgres = empty_engine.dialect.name == "postgresql"
    if postgres:
        indexes = _pg_indexes(empty_engine)
        assert "ix_dbm_episodes_search" not in indexes
        assert "USING gin (org_id, user_key, search_vector) WITH (fastupdate=off)" in indexes[version.INDEX]
    migrate.downgrade(empty_engine, version.down_revision)
    assert _hits(empty_engine) == before
    if postgres:
        indexes = _pg_indexes(empty_engine)
        assert version.INDEX not in indexes and "USING gin (search_vector)" in indexes["ix_dbm_episodes_search"]
    migrate.upgrade(empty_engine)
    assert migrate.current(empty_engine) == migrate.head()
    assert _hits(empty_engine) == before


def test_postgresql_reads_only_the_users_rows_from_the_index(engine: Engine) -> None:
    """The plan of the search: one index condition holds the organisation, the user and the
    words (before the revision the user was filtered after the index, or the table scanned),
    right after a bulk insert too (no pending list for the planner to shy away from)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's GIN index (the other engines' statements are unchanged)")
    stmt = episode_search_statement("postgresql")
    params: dict[str, Any] = {
        "q": engine_query("postgresql", salient_words("kayaking")), "org": "default",
        "user_key": user_key_of("u1"), "now": T0, "n": 50,
    }
    compiled = stmt.compile(dialect=engine.dialect)
    with engine.connect() as c:  # 6,000 episodes of three users, rolled back at the end
        c.exec_driver_sql(
            "INSERT INTO dbm_episodes (org_id, user_key, turn_at, episode_text, user_chars, char_count, "
            "retention_class, created_at) SELECT 'default', 'u' || mod(i, 3), now(), "
            "CASE WHEN mod(i, 30) = 0 THEN 'kayaking on the lake' ELSE 'a book about dogs' END, "
            "5, 20, 'episode', now() FROM generate_series(1, 6000) AS i"
        )
        c.exec_driver_sql("ANALYZE dbm_episodes")
        plan = "\n".join(r[0] for r in c.exec_driver_sql("EXPLAIN " + str(compiled), params))
        c.rollback()
    assert "ix_dbm_episodes_user_search" in plan, plan
    cond = next(line for line in plan.splitlines() if "Index Cond" in line)
    assert "user_key" in cond and "search_vector @@" in cond, plan


def test_postgresql_upgrade_without_btree_gin_warns_and_keeps_the_old_index(empty_engine: Engine) -> None:
    """A role that may not create the extension: the revision completes with a warning, the
    search keeps 0006's index and finds the same hits."""
    if empty_engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's btree_gin extension")
    version = importlib.import_module(REVISION)
    migrate.upgrade(empty_engine, version.down_revision)
    _fill(empty_engine)
    before = _hits(empty_engine)
    role = f"dbmt_noext_{secrets.token_hex(4)}"
    database = empty_engine.url.database
    with empty_engine.begin() as c:
        c.exec_driver_sql(f"CREATE ROLE {role} NOLOGIN")
        c.exec_driver_sql(f'REVOKE CREATE ON DATABASE "{database}" FROM PUBLIC')
        c.exec_driver_sql("DROP EXTENSION IF EXISTS btree_gin")
        c.exec_driver_sql(f"GRANT USAGE ON SCHEMA public TO {role}")
        for table in ("dbm_episodes", "dbm_alembic_version"):
            c.exec_driver_sql(f"ALTER TABLE {table} OWNER TO {role}")
    try:
        with empty_engine.connect() as c:
            c.exec_driver_sql(f"SET ROLE {role}")
            with pytest.warns(UserWarning, match="btree_gin"):
                migrate.upgrade(c)
            c.commit()
            c.exec_driver_sql("RESET ROLE")
        assert migrate.current(empty_engine) == migrate.head()
        indexes = _pg_indexes(empty_engine)
        assert version.INDEX not in indexes and "ix_dbm_episodes_search" in indexes
        assert _hits(empty_engine) == before
        with empty_engine.connect() as c:
            assert c.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'").first() is None
    finally:
        with empty_engine.begin() as c:
            for table in ("dbm_episodes", "dbm_alembic_version"):
                c.exec_driver_sql(f"ALTER TABLE {table} OWNER TO CURRENT_USER")
            c.exec_driver_sql(f"REVOKE ALL ON SCHEMA public FROM {role}")
        empty_engine.dispose()
        admin = sa.create_engine(empty_engine.url, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.exec_driver_sql(f"DROP OWNED BY {role}")
            c.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()


def test_offline_postgresql_script_creates_the_extension_and_the_index() -> None:
    version = importlib.import_module(REVISION)
    up = migrate.offline_sql("postgresql").split(f"Running upgrade {version.down_revision} -> {version.revision}")[1]
    down = migrate.offline_sql("postgresql", "downgrade").split(
        f"Running downgrade {version.revision} -> {version.down_revision}"
    )[1]
    assert "CREATE EXTENSION IF NOT EXISTS btree_gin" in up
    assert "USING gin (org_id, user_key, search_vector)" in up and "DROP INDEX IF EXISTS ix_dbm_episodes_search" in up
    assert "USING gin (search_vector)" in down.split("Running downgrade")[0]
    for dialect in ("sqlite", "mysql", "oracle"):
        script = migrate.offline_sql(dialect)
        tail = script.split(f"Running upgrade {version.down_revision} -> {version.revision}")[1]
        assert "btree_gin" not in tail and "CREATE INDEX" not in tail, dialect
