"""Running the generated SQL scripts with the databases' own clients (psql, mysql), and the seed
rows and expected outcome of the expiry procedure: shared by the script, job and counter tests."""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
import subprocess
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from dbmemory.db import schema
from dbmemory.sqlgen._common import EXPIRY_ACTOR
from dbmemory.sqlgen.expiry_job import expiry_procedure_sql
from dbmemory.store.touches import TOUCH_INTERVAL

DAYS = 30


@dataclass(frozen=True)
class Seed:
    store_key: str
    path: str
    chars: int
    exempt: bool
    age: dt.timedelta
    read_age: dt.timedelta | None = None
    """Age of the file's recorded read in dbm_file_reads (None: none recorded)."""


def client_command(server_name: str, url: URL) -> list[str]:
    if server_name == "postgres":
        cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", url.host or "127.0.0.1"]
        if url.port:
            cmd += ["-p", str(url.port)]
        if url.username:
            cmd += ["-U", url.username]
        return [*cmd, "-d", url.database or ""]
    cmd = ["mysql", "--batch", "-h", url.host or "127.0.0.1", "--protocol=TCP"]
    if url.port:
        cmd += ["-P", str(url.port)]
    if url.username:
        cmd += ["-u", url.username]
    if url.password:
        cmd += [f"-p{url.password}"]
    return [*cmd, url.database or ""]


def run_client(server_name: str, url: URL, script: str) -> None:
    binary = "psql" if server_name == "postgres" else "mysql"
    if shutil.which(binary) is None:
        pytest.skip(f"the {binary} client is not installed")
    env = None
    if server_name == "postgres" and url.password:
        import os

        env = {**os.environ, "PGPASSWORD": url.password}
    result = subprocess.run(
        client_command(server_name, url),
        input=script,
        text=True,
        capture_output=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, f"{binary} failed:\n{result.stderr}\n{result.stdout}"


def seed_rows() -> list[Seed]:
    """A data set around the cut-off (days + the touch interval): old/new, exempt or not, read
    recently or long ago, several stores, more than one batch (1,000) of expirable files; half
    an hour of margin either side of the boundary."""
    day = dt.timedelta(days=1)
    hour = dt.timedelta(hours=1)
    rows = [
        Seed("agent:A", "/memories/old.md", 11, False, DAYS * day + 2 * hour),
        Seed("agent:A", "/memories/new.md", 12, False, DAYS * day - hour),
        Seed("agent:A", "/memories/within-interval.md", 12, False, DAYS * day + hour / 2),
        Seed("agent:A", "/memories/read-lately.md", 9, False, 90 * day, read_age=DAYS * day - hour),
        Seed("agent:A", "/memories/read-long-ago.md", 8, False, 90 * day, read_age=60 * day),
        Seed("agent:A", "/memories/old-exempt.md", 13, True, 400 * day),
        Seed("agent:A", "/memories/empty-old.md", 0, False, 90 * day),
        Seed("user:A:bob", "/memories/memory.md", 14, True, 90 * day),
        Seed("user:A:bob", "/memories/notes/a.md", 15, False, 31 * day),
        Seed("user:A:bob", "/memories/notes/b.md", 16, False, 1 * day),
        Seed("global", "/memories/fresh.md", 17, False, dt.timedelta(0)),
    ]
    rows += [
        Seed("shared:bulk", f"/memories/bulk/{i:05d}.md", i % 50, False, (DAYS + 1 + i % 7) * day)
        for i in range(2100)
    ]
    rows += [
        Seed("shared:bulk", f"/memories/keep/{i:03d}.md", 1, False, 2 * day) for i in range(30)
    ]
    return rows


def seed(engine: Engine, rows: list[Seed], now: dt.datetime) -> None:
    with engine.begin() as c:
        store_ids: dict[str, int] = {}
        for key in sorted({r.store_key for r in rows}):
            store_ids[key] = c.execute(
                sa.insert(schema.stores).values(
                    store_key=key, scope_name=key.split(":")[0], created_at=now, updated_at=now
                )
            ).inserted_primary_key[0]
        c.execute(
            sa.insert(schema.files),
            [
                {
                    "store_id": store_ids[r.store_key],
                    "file_path": r.path,
                    "path_hash": hashlib.sha256(r.path.encode()).hexdigest(),
                    "body": "x" * r.chars if r.chars else None,
                    "char_count": r.chars,
                    "version_no": 1,
                    "expiry_exempt": r.exempt,
                    "created_at": now - r.age,
                    "updated_at": now - r.age,
                    "last_accessed_at": now - r.age,
                }
                for r in rows
            ],
        )
        read = [r for r in rows if r.read_age is not None]
        if read:
            ids = {
                p: (s, i)
                for p, s, i in c.execute(
                    sa.select(
                        schema.files.c.file_path, schema.files.c.store_id, schema.files.c.file_id
                    ).where(
                        schema.files.c.file_path.in_([r.path for r in read])
                    )
                )
            }
            c.execute(
                sa.insert(schema.file_reads),
                [
                    {"store_id": ids[r.path][0], "file_id": ids[r.path][1], "read_at": now - r.read_age}
                    for r in read
                ],
            )


def snapshot(engine: Engine) -> tuple[set[tuple[str, str]], list[tuple[object, ...]]]:
    """(remaining (store key, path) pairs, audit events as comparable tuples sorted)."""
    with engine.connect() as c:
        remaining = {
            (r.store_key, r.file_path)
            for r in c.execute(
                sa.select(schema.stores.c.store_key, schema.files.c.file_path).select_from(
                    schema.files.join(schema.stores)
                )
            )
        }
        events = sorted(
            tuple(r)
            for r in c.execute(
                sa.select(
                    schema.audit_events.c.action_name,
                    schema.audit_events.c.actor_name,
                    schema.audit_events.c.store_key,
                    schema.audit_events.c.file_path,
                    schema.audit_events.c.chars_before,
                    schema.audit_events.c.chars_after,
                )
            )
        )
    return remaining, events


def install_procedure(engine: Engine, dialect: str) -> None:
    with engine.connect() as c:
        dbapi = c.connection.dbapi_connection
        cursor = dbapi.cursor()  # the raw driver: no '%' placeholder parsing of the body
        try:
            for statement in expiry_procedure_sql(dialect):
                cursor.execute(statement)
        finally:
            cursor.close()
        dbapi.commit()


def call_procedure(engine: Engine, server_name: str, days: float) -> int:
    literal = repr(float(days)) if isinstance(days, float) else str(int(days))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        if server_name == "postgres":
            return int(c.exec_driver_sql(f"CALL dbm_expire_files({literal})").scalar_one())
        c.exec_driver_sql(f"CALL dbm_expire_files({literal}, @dbm_n)")
        return int(c.exec_driver_sql("SELECT @dbm_n").scalar_one())


def expected(
    rows: list[Seed], days: float
) -> tuple[set[tuple[str, str]], list[tuple[object, ...]]]:
    """The Python rule, written out: not exempt, last write and last recorded read both older
    than now - days - the touch interval."""
    cutoff_age = dt.timedelta(days=days) + TOUCH_INTERVAL
    gone = [
        r
        for r in rows
        if not r.exempt and r.age > cutoff_age and (r.read_age is None or r.read_age > cutoff_age)
    ]
    remaining = {(r.store_key, r.path) for r in rows if r not in gone}
    events = sorted(
        ("expire", EXPIRY_ACTOR, r.store_key, r.path, r.chars, None) for r in gone
    )
    return remaining, events
