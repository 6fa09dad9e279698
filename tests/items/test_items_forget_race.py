"""A user forgotten (``forget_user``) while an item extraction or a profile consolidation is in
flight gets nothing written afterwards (found by the hattack review).

Both read the user's switch or settings row before their model calls and wrote in a later
transaction: the write re-created the row ``forget_user`` had deleted and added items, or a
profile, derived from the conversation before the forget. Now each run reads the forget mark
(the newest ``user_forget`` audit event) when it starts and again under its write lock, and
``forget_user`` takes the same locks first (switch row, then settings row), so a forget either
waits for the write and deletes what it wrote, or commits first and the write refuses.

The sequential tests (the forget commits during the model call) run on every backend; the
two-connection races (the forget committing while the write waits for its lock, or waiting for
the write's lock) on PostgreSQL and MariaDB: SQLite's single write lock serialises the write and
the forget as a whole, which the sequential tests cover.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from _profile_fakes import FakeModel, body_with, fixed_now
from dbmemory.db.schema import memory_switches, user_settings
from dbmemory.items import forget_user
from dbmemory.items import runtime_data as data_module
from dbmemory.items.model import user_key_of
from dbmemory.items.settings import lock_user
from dbmemory.profile import (
    ProfileMetrics,
    UserMemoryConfig,
    UserMemoryPostprocessor,
    load_user_memory,
    read_profile,
    write_profile,
)
from dbmemory.profile import consolidate as consolidate_module
from item_fakes import USER, ItemModel, facts, run, texts

FULL = body_with({"Identity": ["Name: Dana, data engineer"]})
SEED = body_with({"Identity": ["Name: Dana"]})


@pytest.fixture
def servers(engine: Engine, backend_name: str) -> Engine:
    if backend_name.startswith("sqlite"):
        pytest.skip("SQLite: one write lock serialises the write and the forget (no window)")
    return engine


def _forget(conn: Connection) -> None:
    forget_user(conn, USER, actor="admin")


def _switch_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(
            sa.select(sa.func.count()).select_from(memory_switches)
            .where(memory_switches.c.user_key == user_key_of(USER))
        ).scalar_one())


def _settings_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(
            sa.select(sa.func.count()).select_from(user_settings)
            .where(user_settings.c.user_key == user_key_of(USER))
        ).scalar_one())


class _HeldForget:
    """A forget in another session that has run (its locks held) and commits ``hold_s`` later."""

    def __init__(self, engine: Engine, hold_s: float = 1.0) -> None:
        self.done = threading.Event()
        self.errors: list[BaseException] = []

        def work() -> None:
            try:
                with engine.begin() as conn:
                    _forget(conn)
                    self.done.set()
                    threading.Event().wait(hold_s)  # the write now waits for our locks
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(exc)
                self.done.set()

        self.thread = threading.Thread(target=work)

    def start(self) -> None:
        if self.thread.ident is None:  # once (a consolidation retried after a conflict)
            self.thread.start()
        assert self.done.wait(30)

    def finish(self) -> None:
        self.thread.join(30)
        assert not self.thread.is_alive() and not self.errors


class _WaitingForget:
    """A forget in another session started while the write holds its lock (it waits for it)."""

    def __init__(self, engine: Engine) -> None:
        self.errors: list[BaseException] = []

        def work() -> None:
            try:
                with engine.begin() as conn:
                    _forget(conn)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(exc)

        self.thread = threading.Thread(target=work)

    def start(self) -> None:
        self.thread.start()
        self.thread.join(0.5)  # finishes at once (unfixed) or waits for the write

    def finish(self) -> None:
        self.thread.join(30)
        assert not self.thread.is_alive() and not self.errors


# -- items -------------------------------------------------------------------------------------


def _answering_after(action: Callable[[], None]) -> ItemModel:
    def extract(_prompt: str) -> str:
        action()  # the forget happens while the model answers
        return facts(("User lives in Lisbon", 0.95))

    return ItemModel(extract=extract)


def test_a_user_forgotten_during_the_model_call_keeps_no_item(engine: Engine) -> None:
    def forget() -> None:
        with engine.begin() as conn:
            _forget(conn)

    result = run(engine, _answering_after(forget))
    assert texts(engine) == []
    assert (result.outcome, result.reason) == ("disabled", "user forgotten")
    assert _switch_rows(engine) == 0  # the switch row forget deleted is not re-created


def test_a_user_forgotten_before_the_extraction_started_gets_items_again(engine: Engine) -> None:
    with engine.begin() as conn:
        _forget(conn)
    result = run(engine, _answering_after(lambda: None))
    assert result.outcome == "written"
    assert texts(engine) == ["User lives in Lisbon"]


def test_a_forget_in_another_organisation_does_not_stop_the_extraction(engine: Engine) -> None:
    def forget_elsewhere() -> None:
        with engine.begin() as conn:
            forget_user(conn, USER, org_id="other", actor="admin")

    result = run(engine, _answering_after(forget_elsewhere))
    assert result.outcome == "written"


def test_a_forget_committing_while_the_item_write_waits_leaves_no_item(servers: Engine) -> None:
    held = _HeldForget(servers)
    result = run(servers, _answering_after(held.start))
    held.finish()
    assert texts(servers) == []
    assert result.outcome in ("disabled", "error")  # error: a snapshot that missed the forget
    assert _switch_rows(servers) == 0


def test_a_forget_started_during_the_item_write_deletes_what_it_wrote(
    servers: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = _WaitingForget(servers)
    answered: list[bool] = []
    real_lock = lock_user

    def lock_then_forget(conn: Connection, *args: Any, **kwargs: Any) -> bool:
        value = real_lock(conn, *args, **kwargs)
        if answered and not waiting.thread.is_alive() and waiting.thread.ident is None:
            waiting.start()  # the write holds the switch row: the forget waits for it
        return value

    monkeypatch.setattr(data_module, "lock_user", lock_then_forget)

    def extract(_prompt: str) -> str:
        answered.append(True)
        return facts(("User lives in Lisbon", 0.95))

    result = run(servers, ItemModel(extract=extract))
    waiting.finish()
    assert result.outcome == "written"  # written first, then deleted by the forget
    assert texts(servers) == []
    assert _switch_rows(servers) == 0


# -- profile -----------------------------------------------------------------------------------


def _state(engine: Engine) -> Any:
    with engine.connect() as conn:
        return load_user_memory(conn, USER, config=UserMemoryConfig(), model="gpt-4o-mini")


def _consolidate(engine: Engine, during_rewrite: Callable[[], None], state: Any) -> Any:
    model = FakeModel(rewrite=lambda _m: (during_rewrite(), FULL)[1])
    post = UserMemoryPostprocessor(
        engine, UserMemoryConfig(), "gpt-4o-mini", USER, state,
        complete=model, now=fixed_now("2026-06-17T12:00:00+00:00"), metrics=ProfileMetrics(),
    )
    return post.run("My name is Dana, I am a data engineer.", "Hello Dana.")


def _profile(engine: Engine) -> Any:
    with engine.connect() as conn:
        return read_profile(conn, USER)


@pytest.mark.parametrize("had_profile", [True, False], ids=["profile", "no-profile"])
def test_a_user_forgotten_during_the_rewrite_keeps_no_profile(engine: Engine, had_profile: bool) -> None:
    if had_profile:
        with engine.begin() as conn:
            write_profile(conn, USER, SEED, expected_version=0)
    state = _state(engine) if had_profile else None

    def forget() -> None:
        with engine.begin() as conn:
            _forget(conn)

    result = _consolidate(engine, forget, state)
    assert _profile(engine) is None
    assert (result.outcome, result.reason) == ("disabled", "user forgotten")
    assert _settings_rows(engine) == 0


def test_a_forget_committing_while_the_profile_write_waits_leaves_no_profile(servers: Engine) -> None:
    held = _HeldForget(servers)
    result = _consolidate(servers, held.start, None)
    held.finish()
    assert _profile(servers) is None
    assert result.outcome in ("disabled", "error")
    assert _settings_rows(servers) == 0


def test_a_forget_started_during_the_profile_write_deletes_what_it_wrote(
    servers: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = _WaitingForget(servers)
    real_write = consolidate_module.write_profile

    def forget_then_write(conn: Connection, *args: Any, **kwargs: Any) -> Any:
        if waiting.thread.ident is None:
            waiting.start()  # the write holds the settings row: the forget waits for it
        return real_write(conn, *args, **kwargs)

    monkeypatch.setattr(consolidate_module, "write_profile", forget_then_write)
    result = _consolidate(servers, lambda: None, None)
    waiting.finish()
    assert result.outcome == "updated"  # written first, then deleted by the forget
    assert _profile(servers) is None
    assert _settings_rows(servers) == 0


def test_at_repeatable_read_a_forget_committing_during_the_writes_leaves_nothing(servers: Engine) -> None:
    """The writes' snapshot starts at their lock, before the forget commits: the deleted row is
    reported (PostgreSQL: a serialization error, then a retry that sees the mark), never missed."""
    rr = servers.execution_options(isolation_level="REPEATABLE READ")
    held = _HeldForget(servers)
    result = run(rr, _answering_after(held.start))  # type: ignore[arg-type]
    held.finish()
    assert texts(servers) == [] and result.outcome in ("disabled", "error")
    held = _HeldForget(servers)
    consolidated = _consolidate(rr, held.start, None)  # type: ignore[arg-type]
    held.finish()
    assert _profile(servers) is None
    assert (consolidated.outcome, consolidated.attempts) in (("disabled", 1), ("disabled", 2))
    assert _switch_rows(servers) == 0 and _settings_rows(servers) == 0


class _RetriedForget(_WaitingForget):
    """:class:`_WaitingForget` at REPEATABLE READ, retried as a caller retries a conflict
    (a new transaction each time)."""

    def __init__(self, engine: Engine) -> None:
        from dbmemory.errors import ConflictError

        self.errors = []
        self.conflicts = 0
        rr = engine.execution_options(isolation_level="REPEATABLE READ")

        def work() -> None:
            try:
                for _ in range(3):
                    try:
                        with rr.begin() as conn:
                            _forget(conn)
                        return
                    except ConflictError:
                        self.conflicts += 1
                raise AssertionError("the forget never got through")
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(exc)

        self.thread = threading.Thread(target=work)


@pytest.mark.parametrize("had_switch", [True, False], ids=["switch-row", "no-switch-row"])
def test_a_repeatable_read_forget_that_waited_for_an_item_write_deletes_what_it_wrote(
    servers: Engine, monkeypatch: pytest.MonkeyPatch, had_switch: bool
) -> None:
    """A forget in a REPEATABLE READ (snapshot) transaction that waited for an item write's lock
    must not keep that write's items: its snapshot predates the write's commit, so on
    PostgreSQL it could not see them and deleted nothing of them. The write now changes the
    row it locks (the forget's lock then fails with a serialization error and the caller retries,
    seeing everything), and a switch row the snapshot cannot see is reported, not skipped."""
    if had_switch:
        from dbmemory.items import set_memory_switch

        with servers.begin() as conn:
            set_memory_switch(conn, USER, True)
    waiting = _RetriedForget(servers)
    answered: list[bool] = []
    real_lock = lock_user

    def lock_then_forget(conn: Connection, *args: Any, **kwargs: Any) -> bool:
        value = real_lock(conn, *args, **kwargs)
        if answered and waiting.thread.ident is None:
            waiting.start()  # the write holds the switch row: the forget waits for it
        return value

    monkeypatch.setattr(data_module, "lock_user", lock_then_forget)

    def extract(_prompt: str) -> str:
        answered.append(True)
        return facts(("User lives in Lisbon", 0.95))

    result = run(servers, ItemModel(extract=extract))
    waiting.finish()
    assert result.outcome == "written"
    assert texts(servers) == []  # deleted by the forget (after a retry where it conflicted)
    assert _switch_rows(servers) == 0


def test_a_repeatable_read_forget_that_waited_for_a_profile_write_deletes_what_it_wrote(
    servers: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile's side of the rule above: a snapshot forget that waited for the
    consolidation's write (the settings row it locks) deletes the profile it wrote."""
    waiting = _RetriedForget(servers)
    real_write = consolidate_module.write_profile

    def forget_then_write(conn: Connection, *args: Any, **kwargs: Any) -> Any:
        if waiting.thread.ident is None:
            waiting.start()  # the write holds the settings row: the forget waits for it
        return real_write(conn, *args, **kwargs)

    monkeypatch.setattr(consolidate_module, "write_profile", forget_then_write)
    result = _consolidate(servers, lambda: None, None)
    waiting.finish()
    assert result.outcome == "updated"
    assert _profile(servers) is None
    assert _settings_rows(servers) == 0
