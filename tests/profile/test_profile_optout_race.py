"""An opt-out that commits between the consolidation's opt-out check and its profile
write leaves the opted-out user with a new profile (PostgreSQL, MariaDB; SQLite's single
write lock closes the window).

``UserMemoryPostprocessor._write`` read ``memory_enabled`` with a plain SELECT and then
created the profile (``expected_version=0``) in the same transaction; the opt-out deleted the
profile it found (none yet) and committed in between, as nothing serialised the two. The check
now locks the user's settings row (``lock_user_memory_enabled``), so the opt-out waits for the
write and deletes the new profile."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from _profile_fakes import FakeModel, body_with, fixed_now, user_settings_table
from dbmemory.profile import (
    ProfileMetrics,
    UserMemoryConfig,
    UserMemoryPostprocessor,
    is_user_memory_enabled,
    read_profile,
    set_user_memory_enabled,
)
from dbmemory.profile import consolidate as consolidate_module
from dbmemory.profile.store import write_profile

FULL = body_with({"Identity": ["Name: Dana, data engineer"]})


@pytest.fixture
def db(engine: Engine, backend_name: str) -> Iterator[Engine]:
    if backend_name.startswith("sqlite"):
        pytest.skip("SQLite: the write lock is taken before the check (no window)")
    with user_settings_table(engine):
        yield engine


def test_an_opt_out_committed_during_the_consolidation_leaves_no_profile(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired: list[threading.Thread] = []
    real_write = write_profile

    def opt_out() -> None:
        with db.begin() as other:
            set_user_memory_enabled(other, "u-optout", False)

    def opt_out_then_write(conn, user_id, *args, **kwargs):  # type: ignore[no-untyped-def]
        # _write has just checked memory_enabled on conn: the user opts out meanwhile, in
        # another session (it either finishes at once or waits for this transaction)
        if not fired:
            fired.append(threading.Thread(target=opt_out))
            fired[0].start()
            fired[0].join(0.5)
        return real_write(conn, user_id, *args, **kwargs)

    monkeypatch.setattr(consolidate_module, "write_profile", opt_out_then_write)
    post = UserMemoryPostprocessor(
        db, UserMemoryConfig(), "gpt-4o-mini", "u-optout", None,
        complete=FakeModel(rewrite=FULL), now=fixed_now("2026-06-17T12:00:00+00:00"),
        metrics=ProfileMetrics(),
    )
    post.run("My name is Dana.", "Hello Dana.")
    assert fired
    fired[0].join(10)
    assert not fired[0].is_alive()
    with db.connect() as conn:
        assert not is_user_memory_enabled(conn, "u-optout")
        assert read_profile(conn, "u-optout") is None
