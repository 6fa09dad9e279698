"""Profile settings, enablement rule, user-id encoding, step events and transaction policy."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from sqlalchemy.engine import Engine

from _profile_fakes import body_with, user_settings_table
from dbmemory.core.keys import validate_component
from dbmemory.errors import InvalidScopeError
from dbmemory.profile import (
    UserMemoryConfig,
    is_user_memory_enabled,
    memory_enabled,
    read_profile,
    set_user_memory_enabled,
    write_profile,
)
from dbmemory.profile.events import RecordingStepLogger, log_entry, run_step
from dbmemory.profile.store import decode_user_id, encode_user_id, profile_store_key


def test_config_defaults_and_bounds() -> None:
    config = UserMemoryConfig()
    assert (config.max_tokens, config.root_folder, config.gate_enabled) == (2000, "user-memory", True)
    assert config.use_orchestrator_language_model and config.language_model is None
    assert UserMemoryConfig(max_tokens=500).max_tokens == 500
    assert UserMemoryConfig(max_tokens=8000).max_tokens == 8000
    for bad in (499, 8001):
        with pytest.raises(ValidationError):
            UserMemoryConfig(max_tokens=bad)
    with pytest.raises(ValidationError):
        UserMemoryConfig(root_folder="user memory")
    with pytest.raises(ValidationError):
        UserMemoryConfig(use_orchestrator_language_model=False)


def test_effective_model_follows_the_orchestrator_setting() -> None:
    assert UserMemoryConfig().effective_model("gpt-4o") == "gpt-4o"
    own = UserMemoryConfig(use_orchestrator_language_model=False, language_model="gpt-4o-mini")
    assert own.effective_model("gpt-4o") == "gpt-4o-mini"


@pytest.mark.parametrize(
    ("company", "space", "web", "allows", "opted_out"),
    list(itertools.product([True, False], [True, False, None], [True, False], [True, False], [True, False])),
)
def test_memory_is_enabled_only_when_all_four_conditions_hold(
    company: bool, space: bool | None, web: bool, allows: bool, opted_out: bool
) -> None:
    expected = company and space is not False and (not web or allows) and not opted_out
    assert (
        memory_enabled(
            company_feature_enabled=company,
            space_memory_enabled=space,
            web_search_enabled=web,
            company_allows_memory_with_web_search=allows,
            user_opted_out=opted_out,
        )
        is expected
    )


@pytest.mark.parametrize(
    ("user_id", "encoded"),
    [
        ("u-123", "u-123"),
        ("ann@example.com", "ann_40example.com"),
        ("first_last", "first_5Flast"),
        ("a b:c", "a_20b_3Ac"),
        ("Jürgen", "J_C3_BCrgen"),
        ("00123", "00123"),
    ],
)
def test_user_ids_are_encoded_to_the_store_key_alphabet(user_id: str, encoded: str) -> None:
    assert encode_user_id(user_id) == encoded
    assert decode_user_id(encoded) == user_id
    assert profile_store_key(user_id) == f"reserved:profile:user-memory:{encoded}"


@given(st.text(min_size=1, max_size=40))
def test_encoding_is_valid_and_reversible_for_any_id(user_id: str) -> None:
    try:
        encoded = encode_user_id(user_id)
    except InvalidScopeError:
        assert len(user_id.encode("utf-8", "surrogatepass")) * 3 > 200
        return
    assert validate_component(encoded, "encoded id") == encoded
    assert decode_user_id(encoded) == user_id


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_distinct_ids_never_share_a_store_key(a: str, b: str) -> None:
    if a != b:
        assert encode_user_id(a) != encode_user_id(b)


@pytest.mark.parametrize("bad", ["", None, 7, "x" * 201])
def test_invalid_user_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidScopeError):
        encode_user_id(bad)


def test_a_failing_block_marks_its_step_failed_and_a_broken_logger_is_ignored() -> None:
    steps = RecordingStepLogger()
    with pytest.raises(ValueError):
        with run_step(steps, "Loading context memory"):
            raise ValueError("boom")
    assert [(s.name, s.status) for s in steps.steps] == [("Loading context memory", "failed")]

    class Broken:
        def start(self, name: str) -> None:
            raise RuntimeError("host logger down")

        def finish(self, *args: object) -> None:
            raise RuntimeError("host logger down")

    with run_step(Broken(), "Updating your memory") as step:  # type: ignore[arg-type]
        step.detail = "fine"
    log_entry(Broken(), "Review your context memory")  # type: ignore[arg-type]


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    with user_settings_table(engine):
        yield engine


def test_opt_out_joins_the_callers_transaction_and_rolls_back_with_it(db: Engine) -> None:
    with db.begin() as conn:
        write_profile(conn, "u-1", body_with({"Identity": ["one"]}), expected_version=0)
    with db.connect() as conn:
        transaction = conn.begin()
        assert set_user_memory_enabled(conn, "u-1", False) is True
        assert read_profile(conn, "u-1") is None
        assert not is_user_memory_enabled(conn, "u-1")
        transaction.rollback()
    with db.begin() as conn:
        assert read_profile(conn, "u-1") is not None
        assert is_user_memory_enabled(conn, "u-1")


def test_opt_out_twice_and_back_in_updates_the_same_setting(db: Engine) -> None:
    with db.begin() as conn:
        assert set_user_memory_enabled(conn, "u-2", False) is False
        assert set_user_memory_enabled(conn, "u-2", False) is False
        assert not is_user_memory_enabled(conn, "u-2")
        set_user_memory_enabled(conn, "u-2", True)
        assert is_user_memory_enabled(conn, "u-2")


def test_without_the_settings_table_nobody_counts_as_opted_out(engine: Engine) -> None:
    import sqlalchemy as sa

    from dbmemory.profile import UserMemoryConfig, load_user_memory
    from dbmemory.profile.optout import USER_SETTINGS_TABLE

    if sa.inspect(engine).has_table(USER_SETTINGS_TABLE):
        pytest.skip("the migrations create dbm_user_settings: nothing to fall back from")
    with engine.begin() as conn:
        write_profile(conn, "u-3", body_with({"Identity": ["three"]}), expected_version=0)
    with engine.begin() as conn:
        assert is_user_memory_enabled(conn, "u-3")
        state = load_user_memory(conn, "u-3", config=UserMemoryConfig(), model="gpt-4o")
        assert state is not None and "three" in state.body
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1  # the transaction is still usable
