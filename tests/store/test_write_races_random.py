"""Random racing tool writers on one store (edits, one-file renames, deletes of
files and directories, creates at the file cap) on two and three connections, at every
isolation level: the counters equal the aggregates of the files and the audit log replays to
them (no event skipped or doubled), and no thread sees an exception or a hang."""

from __future__ import annotations

import os
import random
import threading
import traceback

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from counter_checks import mismatches
from dbmemory import enable_for_agent
from dbmemory.db.schema import audit_events, files, stores
from dbmemory.tool import MemoryTool

LEVELS = ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE", "AUTOCOMMIT"]
PATHS = ["/memories/a.md", "/memories/b.md", "/memories/d/c.md", "/memories/d/e.md", "/memories/d"]


def _command(rng: random.Random) -> dict[str, object]:
    path = rng.choice(PATHS)
    kind = rng.choice(["create", "create", "str_replace", "insert", "delete", "delete", "rename"])
    if kind == "create":
        return {"command": "create", "path": path, "file_text": "t" * rng.randint(0, 30) + " ab"}
    if kind == "str_replace":
        return {"command": "str_replace", "path": path, "old_str": "ab", "new_str": "x" * rng.randint(0, 9) + " ab"}
    if kind == "insert":
        return {"command": "insert", "path": path, "insert_line": 0, "insert_text": "y" * rng.randint(1, 9)}
    if kind == "rename":
        return {"command": "rename", "old_path": path, "new_path": rng.choice(PATHS)}
    return {"command": "delete", "path": path}


def _replayed(engine: Engine) -> list[tuple[object, ...]]:
    """Stores whose audit log does not replay to their counters."""
    with engine.connect() as c:
        rows = c.execute(
            sa.select(audit_events.c.store_id, audit_events.c.chars_before, audit_events.c.chars_after)
        ).all()
        counters = {r.store_id: (r.file_count, r.total_chars) for r in c.execute(sa.select(stores)).all()}
    replay: dict[int, list[int]] = {}
    for sid, before, after in rows:
        if sid is None:
            continue
        d = replay.setdefault(sid, [0, 0])
        d[0] += (after is not None) - (before is not None)
        d[1] += (after or 0) - (before or 0)
    return [(sid, tuple(d), counters.get(sid)) for sid, d in replay.items() if tuple(d) != counters.get(sid)]


@pytest.mark.parametrize("level", LEVELS)
def test_random_racing_writers_keep_counters_and_audit_exact(server_engine: Engine, level: str) -> None:
    engine = server_engine
    with engine.begin() as c:
        enable_for_agent(c, "HA", scope="shared", store_code="HA", max_files=3)
    errors: list[str] = []
    victims: list[str] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        last = [""]
        try:
            with engine.connect() as conn:
                conn = conn.execution_options(isolation_level=level)
                tool = MemoryTool(conn, "HA")
                conn.commit()
                for _ in range(int(os.environ.get("DBMEMORY_TEST_RACE_COMMANDS", "60"))):
                    cmd = _command(rng)
                    if level == "AUTOCOMMIT":
                        out = tool.execute(cmd)
                    else:
                        tx = conn.begin()
                        out = tool.execute(cmd)
                        last[0] = f"{cmd}: {out}"
                        if "deadlock victim" in out:  # visible, whole transaction rolled back
                            victims.append(out)
                            conn.rollback()
                            continue
                        try:
                            tx.commit()
                        except sa.exc.OperationalError as exc:  # the caller's own commit
                            if "serializ" not in str(exc) and "Deadlock" not in str(exc):
                                raise
                            conn.rollback()
                    last[0] = f"{cmd}: {out}"
                    if "rolled back" in out or "Traceback" in out or "nexpected" in out:
                        errors.append(f"{cmd}: {out}")
        except Exception:  # noqa: BLE001 - reported below
            errors.append(traceback.format_exc()[-3000:] + " after " + last[0])

    threads = [threading.Thread(target=worker, args=(s + int(os.environ.get("DBMEMORY_TEST_RACE_SEED", "0")),)) for s in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    print(f"{engine.dialect.name} {level}: {len(victims)} deadlock victims", victims[:1])
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert mismatches(engine) == []
    assert _replayed(engine) == []
    assert errors == [], "\n".join(errors[:3])
    with engine.connect() as c:
        assert c.execute(sa.select(sa.func.count()).select_from(files)).scalar_one() <= 3
