"""The warm profile load (issue 5): derived data cached with the file's version, one statement.

``load_user_memory`` keeps what it derives from a stored profile (body, budget fit, token count)
in a process-wide LRU keyed by store, file, version, user, tokenizer and budget, and checks the
text on every hit; it reads the profile and the opt-out flag in one ``SELECT`` once the
connection has seen the settings table. These tests prove the cache never serves a stale or
foreign profile on any backend, misses when the budget or the tokenizer changes, stays bounded,
and that the result is exactly what an uncached load derives.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from _profile_fakes import body_with, user_settings_table
from dbmemory.db.dialect.oracle import oracle19_dialect
from dbmemory.db.engine import create_engine
from dbmemory.db.migrate import upgrade
from dbmemory.profile import (
    UserMemoryConfig,
    count_tokens,
    hard_truncate,
    load_user_memory,
    optout,
    parse_profile,
    set_user_memory_enabled,
    store,
    write_profile,
)
from dbmemory.profile import budget as budget_module
from dbmemory.profile import load as load_module
from dbmemory.profile.cache import MAX_ENTRIES, Derived, LoadCache, clear_load_cache, load_cache
from dbmemory.profile.events import RecordingStepLogger
from dbmemory.profile.format import render_body

MODEL = "gpt-4o"
CONFIG = UserMemoryConfig()
USER = "cache-user"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_load_cache()
    yield
    clear_load_cache()


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    with user_settings_table(engine):
        yield engine


def _load(engine: Engine, user: str = USER, **kwargs: Any) -> Any:
    kwargs.setdefault("config", CONFIG)
    kwargs.setdefault("model", MODEL)
    with engine.begin() as conn:
        return load_user_memory(conn, user, **kwargs)


def _write(engine: Engine, facts: list[str], expected: int | None, user: str = USER) -> int:
    with engine.begin() as conn:
        return write_profile(
            conn, user, body_with({"Identity": facts}), expected_version=expected
        ).version


class _Derivations:
    """Counts the parses and budget token counts a load performs (0 = served from the cache)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parses = 0
        self.counts = 0
        parse, count = load_module.parse_profile, budget_module.profile_tokens

        def counting_parse(*args: Any, **kwargs: Any) -> Any:
            self.parses += 1
            return parse(*args, **kwargs)

        def counting_count(*args: Any, **kwargs: Any) -> Any:
            self.counts += 1
            return count(*args, **kwargs)

        monkeypatch.setattr(load_module, "parse_profile", counting_parse)
        monkeypatch.setattr(budget_module, "profile_tokens", counting_count)

    def take(self) -> tuple[int, int]:
        out = (self.parses, self.counts)
        self.parses = self.counts = 0
        return out


def _uncached(text: str, user: str, max_tokens: int, model: str | None) -> tuple[str, int, bool]:
    """What the load derived before the cache existed (issue 3's algorithm, spelled out)."""
    fitted = hard_truncate(
        parse_profile(text, default_user_id=user), max_tokens=max_tokens, model=model
    )
    tokens = fitted.tokens if fitted.truncated else count_tokens(text, model)
    return render_body(fitted.profile.sections), tokens, fitted.truncated


# -- never stale, on every backend ---------------------------------------------------------------


def test_an_unchanged_profile_is_not_derived_again_and_a_write_is_seen_at_once(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Derivations(monkeypatch)
    _write(db, ["first fact"], 0)
    one = _load(db)
    assert one is not None and "first fact" in one.body and one.version == 1
    assert spy.take()[0] == 1
    again = _load(db)
    assert again == one
    assert spy.take() == (0, 0), "an unchanged profile was parsed or counted again"

    assert _write(db, ["second fact"], 1) == 2
    two = _load(db)
    assert two is not None and two.version == 2
    assert "second fact" in two.body and "first fact" not in two.body
    assert spy.take()[0] == 1
    assert (two.body, two.token_count, two.truncated) == _uncached(
        two.text, USER, CONFIG.max_tokens, MODEL
    )


def test_a_rolled_back_write_never_leaks_its_text_under_the_reused_version(db: Engine) -> None:
    _write(db, ["committed one"], 0)
    assert "committed one" in _load(db).body
    with db.connect() as conn:
        transaction = conn.begin()
        write_profile(conn, USER, body_with({"Identity": ["rolled back"]}), expected_version=1)
        seen = load_user_memory(conn, USER, config=CONFIG, model=MODEL)
        assert seen is not None and seen.version == 2 and "rolled back" in seen.body
        transaction.rollback()
    assert "committed one" in _load(db).body
    assert _write(db, ["committed two"], 1) == 2  # version 2 again, other text
    state = _load(db)
    assert state is not None and state.version == 2
    assert "committed two" in state.body and "rolled back" not in state.body


def test_a_profile_deleted_and_written_again_is_never_served_from_the_old_entry(db: Engine) -> None:
    # opt-out deletes the file; SQLite then reuses the largest row id, so the new profile can
    # have the same store id, file id and version as the old one
    _write(db, ["before the opt-out"], 0)
    old = _load(db)
    assert old is not None and "before the opt-out" in old.body
    with db.begin() as conn:
        assert set_user_memory_enabled(conn, USER, False) is True
    assert _load(db) is None
    with db.begin() as conn:
        set_user_memory_enabled(conn, USER, True)
    assert _load(db) is None
    assert _write(db, ["after the opt-in"], 0) == 1
    new = _load(db)
    assert (
        new is not None and "after the opt-in" in new.body and "before the opt-out" not in new.body
    )


def test_the_same_ids_in_another_database_do_not_share_an_entry() -> None:
    engines = [create_engine("sqlite://"), create_engine("sqlite://")]
    try:
        for number, eng in enumerate(engines):
            upgrade(eng)
            _write(eng, [f"database {number}"], 0)
        first, second = (_load(eng) for eng in engines)
        assert (first.store_id, first.version) == (second.store_id, second.version)
        assert "database 0" in first.body and "database 1" in second.body
        assert "database 0" in _load(engines[0]).body
    finally:
        for eng in engines:
            eng.dispose()


# -- the key: budget, tokenizer, user --------------------------------------------------------------


def _long_profile(lines: int = 400) -> str:
    return body_with(
        {"Work Context": [f"worked on project {n} with team {n % 7}" for n in range(lines)]}
    )


def test_another_budget_misses_and_truncates_as_before(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with db.begin() as conn:
        write_profile(conn, USER, _long_profile(), expected_version=0)
    spy = _Derivations(monkeypatch)
    roomy = _load(db, config=UserMemoryConfig(max_tokens=8000))
    assert roomy is not None and not roomy.truncated
    assert spy.take()[0] == 1
    tight = _load(db, config=UserMemoryConfig(max_tokens=500))
    assert tight is not None and tight.truncated and tight.token_count <= 500
    assert spy.take()[0] == 1, "another budget must derive again"
    assert (tight.body, tight.token_count, tight.truncated) == _uncached(
        tight.text, USER, 500, MODEL
    )
    spy.take()
    assert _load(db, config=UserMemoryConfig(max_tokens=8000)) == roomy
    assert _load(db, config=UserMemoryConfig(max_tokens=500)) == tight
    assert spy.take() == (0, 0)


def test_another_tokenizer_misses_and_a_model_with_the_same_tokenizer_hits(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    german = [f"arbeitet an Projekt {n}: Überprüfung der Datenbankmigration" for n in range(60)]
    with db.begin() as conn:  # o200k counts German text with far fewer tokens than cl100k
        write_profile(conn, USER, body_with({"Work Context": german}), expected_version=0)
    spy = _Derivations(monkeypatch)
    o200k = _load(db, model="gpt-4o")
    cl100k = _load(db, model="gpt-4")
    assert spy.take()[0] == 2, "gpt-4 (cl100k) must not reuse gpt-4o's (o200k) count"
    assert o200k.token_count == count_tokens(o200k.text, "gpt-4o")
    assert cl100k.token_count == count_tokens(cl100k.text, "gpt-4")
    assert o200k.token_count != cl100k.token_count
    assert _load(db, model="gpt-4o-mini") == o200k  # same encoding: the same count
    assert spy.take() == (0, 0)


def test_the_character_estimate_does_not_reuse_a_tokenizer_count(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(db, ["estimate me"], 0)
    real = _load(db)
    monkeypatch.setattr(load_module.tokens, "get_encoding", lambda name: None)  # no tokenizer file
    estimated = _load(db)
    assert estimated.token_count == -(-len(estimated.text) // 3) != real.token_count


# -- one statement, no savepoint, no has_table ---------------------------------------------------


class _Statements:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.seen: list[str] = []
        sa.event.listen(engine, "before_cursor_execute", self._on)

    def _on(self, conn: Connection, cursor: Any, statement: str, *args: Any) -> None:
        self.seen.append(statement.split(None, 1)[0].upper())

    def close(self) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._on)

    def take(self) -> list[str]:
        out = [s for s in self.seen if s not in ("BEGIN", "COMMIT")]
        self.seen = []
        return out


def test_a_warm_load_is_one_select_without_savepoint(db: Engine) -> None:
    _write(db, ["one statement"], 0)
    with db.connect() as conn:
        with conn.begin():
            assert load_user_memory(conn, USER, config=CONFIG, model=MODEL) is not None
        counter = _Statements(db)
        try:
            for _ in range(3):
                with conn.begin():
                    assert load_user_memory(conn, USER, config=CONFIG, model=MODEL) is not None
                assert counter.take() == ["SELECT"]
        finally:
            counter.close()


def test_a_warm_load_reads_only_the_columns_it_uses(db: Engine) -> None:
    """Issue 12: the load's statement leaves out the timestamps (and their conversion)."""
    _write(db, ["lean"], 0)
    statements: list[str] = []

    def on(conn: Connection, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    with db.connect() as conn:
        with conn.begin():
            assert load_user_memory(conn, USER, config=CONFIG, model=MODEL) is not None
        sa.event.listen(db, "before_cursor_execute", on)
        try:
            with conn.begin():
                state = load_user_memory(conn, USER, config=CONFIG, model=MODEL)
        finally:
            sa.event.remove(db, "before_cursor_execute", on)
    assert state is not None and "- lean" in state.body and state.version == 1
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 1
    assert "memory_enabled" in selects[0] and "created_at" not in selects[0]


def test_opted_out_and_first_turn_keep_their_outcomes(db: Engine) -> None:
    with db.connect() as conn:
        with conn.begin():  # the connection reads the settings table once
            assert load_user_memory(conn, USER, config=CONFIG, model=MODEL) is None
        counter = _Statements(db)
        try:
            steps = RecordingStepLogger()
            with conn.begin():
                assert (
                    load_user_memory(conn, USER, config=CONFIG, model=MODEL, step_logger=steps)
                    is None
                )
            assert steps.steps[-1].detail == "no profile yet"
            assert "SAVEPOINT" not in counter.take()
            with conn.begin():
                write_profile(conn, USER, body_with({"Identity": ["x"]}), expected_version=0)
                set_user_memory_enabled(conn, USER, False)
            counter.take()
            with conn.begin():
                assert (
                    load_user_memory(conn, USER, config=CONFIG, model=MODEL, step_logger=steps)
                    is None
                )
            assert steps.steps[-1].detail == "memory is off for this user"
            assert counter.take() == ["SELECT", "SELECT"]
        finally:
            counter.close()


def test_an_opted_out_user_whose_profile_remains_elsewhere_is_not_loaded(db: Engine) -> None:
    config = UserMemoryConfig(root_folder="other-space")
    with db.begin() as conn:
        write_profile(
            conn,
            USER,
            body_with({"Identity": ["kept"]}),
            expected_version=0,
            root_folder="other-space",
        )
    assert _load(db, config=config) is not None
    with db.begin() as conn:
        assert set_user_memory_enabled(conn, USER, False) is False  # deletes in user-memory only
        assert store.read_profile(conn, USER, root_folder="other-space") is not None
    assert _load(db, config=config) is None


def test_without_the_settings_table_loads_still_count_as_enabled() -> None:
    eng = create_engine("sqlite://")
    try:
        upgrade(eng)
        with eng.begin() as conn:
            conn.exec_driver_sql("DROP TABLE dbm_user_settings")
        _write(eng, ["no settings table"], 0)
        for _ in range(2):
            with eng.connect() as conn:
                with conn.begin():
                    state = load_user_memory(conn, USER, config=CONFIG, model=MODEL)
                    assert state is not None and "no settings table" in state.body
                    assert conn.exec_driver_sql("SELECT 1").scalar() == 1
                assert not optout.settings_table_seen(conn)
    finally:
        eng.dispose()


# -- bounded and thread-safe ----------------------------------------------------------------------


def _entry(text: str) -> Derived:
    return Derived(
        text=text, body=text, token_count=1, truncated=False, fitted_tokens=1, fitted_chars=1
    )


def test_the_cache_is_bounded_and_drops_the_least_recently_used() -> None:
    assert load_cache().max_entries == MAX_ENTRIES == 1024
    cache = LoadCache(max_entries=3)
    for n in range(3):
        cache.put(n, _entry(str(n)))
    assert cache.get(0, "0") is not None  # 0 is now the most recently used
    cache.put(3, _entry("3"))
    cache.put(4, _entry("4"))
    assert len(cache) == 3
    assert cache.get(1, "1") is None and cache.get(2, "2") is None
    assert all(cache.get(n, str(n)) is not None for n in (0, 3, 4))
    assert cache.get(0, "other text") is None
    with pytest.raises(ValueError):
        LoadCache(max_entries=0)


def test_the_process_cache_stays_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    small = LoadCache(max_entries=4)
    monkeypatch.setattr(load_module, "load_cache", lambda: small)
    eng = create_engine("sqlite://")
    try:
        upgrade(eng)
        for n in range(6):
            _write(eng, [f"user {n}"], 0, user=f"u{n}")
            assert f"user {n}" in _load(eng, user=f"u{n}").body
        assert len(small) == 4
        assert "user 0" in _load(eng, user="u0").body  # evicted: derived again, still right
    finally:
        eng.dispose()


def test_concurrent_use_keeps_the_bound_and_never_mixes_entries() -> None:
    cache = LoadCache(max_entries=16)
    errors: list[str] = []

    def work(worker: int) -> None:
        for n in range(2000):
            key = (worker, n % 40)
            text = f"{worker}-{n % 40}"
            hit = cache.get(key, text)
            if hit is None:
                cache.put(key, _entry(text))
            elif hit.body != text:
                errors.append(f"{key} served {hit.body}")
            if len(cache) > 16:
                errors.append("over the bound")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(cache) <= 16


# -- Oracle 19c ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        store.SELECT_PROFILE,
        store.SELECT_PROFILE_AND_SETTING,
        store.SELECT_PROFILE_FOR_LOAD,
        optout.SELECT_ENABLED,
    ],
    ids=["select_profile", "select_profile_and_setting", "select_profile_for_load", "select_memory_enabled"],
)
def test_the_profile_read_compiles_for_oracle_19c(statement: Any) -> None:
    from oracle_checks import compiled, regex_problems, sqlglot_problems

    sql = compiled(statement)
    assert not regex_problems(sql) + sqlglot_problems(sql), sql
    compiled = statement.compile(dialect=oracle19_dialect())
    assert set(compiled.params) <= {"p_store_key", "p_path_hash", "p_user_key"}
