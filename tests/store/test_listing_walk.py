"""The bounded directory listing (issue 19, :mod:`dbmemory.store.listing`): the MEMORY tool's
``view`` of a directory reads only what its answer can show, and its text is the text of a
listing of every file (:func:`dbmemory.tool.render.render_listing`), byte for byte, clipped or
not, on every backend; a clipped listing says how many files it left out, counted exactly."""

from __future__ import annotations

import random
import re

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory import enable_for_agent
from dbmemory.core.clock import utcnow
from dbmemory.core.model import StoreRef
from dbmemory.core.paths import path_hash
from dbmemory.db.schema import files, stores
from dbmemory.store import files as files_api
from dbmemory.store.listing import walk_directory
from dbmemory.store.locks import find_store_id
from dbmemory.tool import MemoryTool, messages
from dbmemory.tool.render import OUTPUT_LIMIT_CHARS, hidden_name, listing_of_walk, render_listing

NAMES = ["a", "b", "a-b", "a.b", "a.md", ".h", "node_modules", "x.md", "é", "Z", "a b", "_", "a0", "ab"]


def _fill(engine: Engine, key: str, entries: list[tuple[str, int]]) -> int:
    """A store ``key`` holding ``entries`` (``(path, size)``; texts of ``size`` characters),
    written in bulk, its counters set from the rows; returns its id."""
    ref = StoreRef(store_key=key, scope="shared", store_code=key.split(":", 1)[1])
    with engine.begin() as c:
        sid = files_api.put_file(c, ref, entries[0][0], "x" * entries[0][1]).store_id
        now = utcnow()
        rows = [
            {
                "store_id": sid, "file_path": p, "path_hash": path_hash(p), "body": "x" * n or None,
                "char_count": n, "version_no": 1, "expiry_exempt": False,
                "created_at": now, "updated_at": now, "last_accessed_at": now,
            }
            for p, n in entries[1:]
        ]
        if rows:
            c.execute(sa.insert(files), rows)
        c.execute(
            sa.update(stores)
            .where(stores.c.store_id == sid)
            .values(file_count=len(entries), total_chars=sum(n for _p, n in entries))
        )
    return sid


def _random_entries(rng: random.Random, directory: str, n: int) -> list[tuple[str, int]]:
    paths: set[str] = set()
    while len(paths) < n:
        depth = rng.choice([1, 1, 2, 2, 2, 3, 4])
        paths.add(directory + "/" + "/".join(rng.choice(NAMES) for _ in range(depth)))
        paths = {p for p in paths if not any(q.startswith(p + "/") for q in paths)}
    return [(p, rng.choice([0, 7, 1023, 1024, 5000])) for p in sorted(paths)]


def _walk_listing(conn: Connection, sid: int, directory: str, max_chars: int) -> tuple[str, int]:
    header = messages.view_directory_header(directory)
    walk = walk_directory(conn, sid, directory, max_chars - len(header) - 1, hidden_name)
    return listing_of_walk(directory, walk, max_chars=max_chars), len(walk.rows)


def test_a_walked_listing_is_the_listing_of_every_file(engine: Engine) -> None:
    """Random stores (names that sort differently by path and by name: ``a-b``, ``a.b``,
    ``a b`` around the directory ``a/``; hidden names; deep trees) and small limits, so most
    listings are clipped: the text is the full listing's, note included."""
    rng = random.Random(19)
    with engine.begin() as c:
        enable_for_agent(c, "LW", scope="shared", store_code="lw", max_files=100_000)
    for k in range(24 if engine.dialect.name == "sqlite" else 10):
        key = f"shared:lw{k}"
        entries = _random_entries(rng, "/memories", rng.randint(1, 60))
        sid = _fill(engine, key, entries)
        with engine.connect() as conn:
            for limit in (110, 160, 240, 400, 900, OUTPUT_LIMIT_CHARS):
                for directory in ("/memories", "/memories/a"):
                    under = [(p, n) for p, n in entries if p.startswith(directory + "/")]
                    if not under:
                        continue
                    got, _ = _walk_listing(conn, sid, directory, limit)
                    assert got == render_listing(directory, under, max_chars=limit), (k, limit, directory)


def _note_counts(text: str) -> tuple[int, int, int]:
    found = re.search(r"showed ([\d,]+) entries; ([\d,]+) of ([\d,]+) files not listed", text.splitlines()[-1])
    assert found, text[-300:]
    shown, left, total = (int(g.replace(",", "")) for g in found.groups())
    return shown, left, total


def test_a_store_bigger_than_the_view_reads_only_what_it_shows(engine: Engine) -> None:
    """3,000 files in ``fill/``, a deep directory and hidden files: ``view /memories`` through
    the tool gives the full listing's text, counts what it leaves out (every file whose line
    is not shown and that is under no shown second-level directory line), and the walk read
    far fewer rows than the store holds."""
    entries = [(f"/memories/fill/f{j:05d}.md", 40 + j % 7) for j in range(3000)]
    entries += [("/memories/.hidden.md", 5), ("/memories/a-b.md", 3), ("/memories/a/b/c/d.md", 11),
                ("/memories/a/b/e.md", 13), ("/memories/a/x.md", 2), ("/memories/zz/.git/x", 9),
                ("/memories/zz/y.md", 4)]
    with engine.begin() as c:
        enable_for_agent(c, "BIG", scope="shared", store_code="big", max_files=10_000)
    sid = _fill(engine, "shared:big", sorted(entries))
    with engine.connect() as conn:
        out = MemoryTool(conn, "BIG").execute({"command": "view", "path": "/memories"})
        conn.commit()
        assert out == render_listing("/memories", entries)
        assert len(out) <= OUTPUT_LIMIT_CHARS
        lines = out.splitlines()
        assert lines[2:6] == ["26\t/memories/a/", "24\t/memories/a/b/", "2\t/memories/a/x.md", "3\t/memories/a-b.md"]
        shown, left, total = _note_counts(out)
        assert total == 3007 and shown == len(lines) - 3
        listed = sum(1 for line in lines[2:-1] if not line.endswith("/"))
        listed += 2  # /memories/a/b/: c/d.md and e.md
        assert left == 3007 - listed
        _, read = _walk_listing(conn, sid, "/memories", OUTPUT_LIMIT_CHARS)
        assert read < 1000, "the walk read about what the answer shows"
        sub = MemoryTool(conn, "BIG").execute({"command": "view", "path": "/memories/fill"})
        conn.commit()
        assert sub == render_listing("/memories/fill", [e for e in entries if e[0].startswith("/memories/fill/")])
        assert _note_counts(sub)[1:] == (3000 - (len(sub.splitlines()) - 3), 3000)
    with engine.begin() as c:
        assert find_store_id(c, "shared:big") == sid


@pytest.mark.parametrize("size", [1, 40])
def test_a_listing_that_fits_is_unchanged(engine: Engine, size: int) -> None:
    entries = [(f"/memories/d{j % 3}/f{j}.md", j) for j in range(size)] + [("/memories/top.md", 1)]
    with engine.begin() as c:
        enable_for_agent(c, "FIT", scope="shared", store_code="fit")
    _fill(engine, "shared:fit", sorted(entries))
    with engine.connect() as conn:
        out = MemoryTool(conn, "FIT").execute({"command": "view", "path": "/memories"})
        conn.commit()
    assert out == render_listing("/memories", entries)
    assert "clipped" not in out
