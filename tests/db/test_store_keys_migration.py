"""Revision 0007 on a populated database, every backend: the store leads the keys of the file
rows and the recorded reads, the reads get their store, and the downgrade restores 0006."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.core.clock import utcnow
from dbmemory.db import migrate, schema
from dbmemory.db.dialect.types import UtcDateTime

_stores = sa.table(
    "dbm_stores",
    sa.column("store_id", sa.BigInteger()),
    *(sa.column(n) for n in ("store_key", "scope_name", "store_code")),
    sa.column("created_at", UtcDateTime()),
    sa.column("updated_at", UtcDateTime()),
)
_files = sa.table(
    "dbm_files",
    sa.column("file_id", sa.BigInteger()),
    sa.column("store_id", sa.BigInteger()),
    *(sa.column(n) for n in ("file_path", "path_hash", "body", "char_count", "version_no")),
    sa.column("expiry_exempt", sa.Boolean()),
    *(sa.column(n, UtcDateTime()) for n in ("created_at", "updated_at", "last_accessed_at")),
)
_reads = sa.table("dbm_file_reads", sa.column("file_id", sa.BigInteger()), sa.column("read_at", UtcDateTime()))

ORPHAN = 10**9
"""A recorded read whose file is gone (the expiry would purge it)."""


def _populate(engine: Engine, now: dt.datetime) -> dict[str, tuple[int, int]]:
    """Two stores with two files each at revision 0006, a read of three files and an orphan
    read; ``{path@store: (store_id, file_id)}``."""
    with engine.begin() as c:
        for key in ("shared:A", "shared:B"):
            c.execute(
                sa.insert(_stores).values(
                    store_key=key, scope_name="shared", store_code=key[7:], created_at=now, updated_at=now
                )
            )
        sids = dict(c.execute(sa.select(_stores.c.store_key, _stores.c.store_id)).all())
        for key, sid in sids.items():
            for n in (1, 2):
                path = f"/memories/{n}.md"
                c.execute(
                    sa.insert(_files).values(
                        store_id=sid, file_path=path, path_hash=f"{key}{n}".ljust(64, "0"), body="x",
                        char_count=1, version_no=1, expiry_exempt=False,
                        created_at=now, updated_at=now, last_accessed_at=now,
                    )
                )
        ids = {
            f"{path}@{key}": (sid, fid)
            for key, path, sid, fid in c.execute(
                sa.select(_stores.c.store_key, _files.c.file_path, _files.c.store_id, _files.c.file_id)
                .select_from(_stores.join(_files, _files.c.store_id == _stores.c.store_id))
            )
        }
        read = [fid for name, (_sid, fid) in sorted(ids.items()) if name != "/memories/2.md@shared:B"]
        c.execute(sa.insert(_reads), [{"file_id": f, "read_at": now} for f in [*read, ORPHAN]])
    return ids


def _pk(engine: Engine, table: str) -> list[str]:
    return [c.lower() for c in sa.inspect(engine).get_pk_constraint(table)["constrained_columns"]]


def test_0007_keys_the_file_rows_and_reads_by_store_and_downgrades_back(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine, "0006")
    now = utcnow()
    ids = _populate(empty_engine, now)
    assert _pk(empty_engine, "dbm_files") == ["file_id"]
    assert _pk(empty_engine, "dbm_file_reads") == ["file_id"]

    migrate.upgrade(empty_engine, "0007")
    sqlite = empty_engine.dialect.name == "sqlite"
    assert _pk(empty_engine, "dbm_files") == (["file_id"] if sqlite else ["store_id", "file_id"])
    assert _pk(empty_engine, "dbm_file_reads") == ["store_id", "file_id"]
    with empty_engine.connect() as c:
        reads = set(c.execute(sa.text("SELECT store_id, file_id FROM dbm_file_reads")).all())
        files = set(c.execute(sa.text("SELECT store_id, file_id FROM dbm_files")).all())
    # every read now names its file's store; the orphan read is gone
    assert reads == {v for k, v in ids.items() if k != "/memories/2.md@shared:B"}
    assert reads <= files and len(files) == 4

    # the new keys number new files after the old ones, and a second read of a file collides
    with empty_engine.begin() as c:
        sid = ids["/memories/1.md@shared:A"][0]
        c.execute(
            sa.insert(schema.files).values(
                store_id=sid, file_path="/memories/3.md", path_hash="n".ljust(64, "0"), body="y",
                char_count=1, version_no=1, expiry_exempt=False,
                created_at=now, updated_at=now, last_accessed_at=now,
            )
        )
        new_id = c.execute(
            sa.select(schema.files.c.file_id).where(schema.files.c.file_path == "/memories/3.md")
        ).scalar_one()
    assert new_id > max(fid for _sid, fid in ids.values())
    with pytest.raises(sa.exc.IntegrityError), empty_engine.begin() as c:
        sid, fid = ids["/memories/1.md@shared:A"]
        c.execute(sa.insert(schema.file_reads).values(store_id=sid, file_id=fid, read_at=now))

    migrate.downgrade(empty_engine, "0006")
    assert _pk(empty_engine, "dbm_files") == ["file_id"]
    assert _pk(empty_engine, "dbm_file_reads") == ["file_id"]
    columns = [c["name"].lower() for c in sa.inspect(empty_engine).get_columns("dbm_file_reads")]
    assert columns == ["file_id", "read_at"]
    with empty_engine.connect() as c:
        kept = set(c.execute(sa.text("SELECT file_id FROM dbm_file_reads")).scalars())
        left = c.execute(sa.text("SELECT COUNT(*) FROM dbm_files")).scalar_one()
    assert kept == {fid for _sid, fid in reads} and left == 5

    migrate.upgrade(empty_engine)
    assert migrate.current(empty_engine) == migrate.head()
    assert _pk(empty_engine, "dbm_file_reads") == ["store_id", "file_id"]


@pytest.mark.parametrize("dialect_name", ["oracle", "postgresql", "mysql"])
def test_0007_offline_ddl_rekeys_in_both_directions(dialect_name: str) -> None:
    """The rendered DDL of the revision (what the install/uninstall scripts carry)."""
    up = migrate.offline_sql(dialect_name).split("Running upgrade 0006 -> 0007")[1]
    down = migrate.offline_sql(dialect_name, "downgrade").split("Running downgrade 0007 -> 0006")[1]
    down = down.split("Running downgrade 0006 -> 0005")[0]
    assert "CONSTRAINT pk_dbm_files PRIMARY KEY (store_id, file_id)" in up
    assert "CONSTRAINT pk_dbm_file_reads PRIMARY KEY (store_id, file_id)" in up
    assert "CREATE INDEX ix_dbm_files_file_id ON dbm_files (file_id)" in up
    assert up.index("ix_dbm_files_file_id") < up.index("pk_dbm_files")  # MySQL's AUTO_INCREMENT
    assert "CONSTRAINT pk_dbm_files PRIMARY KEY (file_id)" in down
    assert "CONSTRAINT pk_dbm_file_reads PRIMARY KEY (file_id)" in down
