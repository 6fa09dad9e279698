"""Shard-ready keys: the store leads the keys of the per-store rows.

Revision ID: 0007
Revises: 0006

* ``dbm_files``: the primary key becomes ``(store_id, file_id)`` (``file_id`` stays the
  identity column, still unique by itself as before), plus the index ``ix_dbm_files_file_id``
  on ``file_id`` for the cross-store statements by id (expiry batches, orphan reads) and
  because MySQL's ``AUTO_INCREMENT`` column must lead an index. On SQLite the table is left as
  it is: only a one-column ``INTEGER PRIMARY KEY`` (the rowid) numbers new rows there, and a
  SQLite file is never distributed (``dbmemory.db.schema.SQLITE_ROWID_KEYS``).
* ``dbm_file_reads`` gains ``store_id`` (``NOT NULL``), filled from the file rows; the reads of
  files that no longer exist (which the expiry would purge) are dropped. Its primary key becomes
  ``(store_id, file_id)``, with the index ``ix_dbm_file_reads_file_id`` for the expiry's purge by
  id. SQLite rebuilds the table (it cannot change a primary key in place).

With ``dbm_stores`` keyed by ``store_id`` already, every row of the three per-store tables is
placed by ``store_id`` (a Citus distribution column, a Vitess primary vindex, an Oracle
Sharding key: docs/scaling.md). The downgrade restores the keys of revision 0006 and drops
the column and the indexes.

Written out statement by statement (never from ``dbmemory.db.schema``), as 0001 to 0006 are; online
on Oracle each step is skipped when a run that failed half-way already did it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from dbmemory.db.dialect.oracle import oracle_object_exists
from dbmemory.db.dialect.types import UtcDateTime, big_id

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MYSQL: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
    "mariadb_engine": "InnoDB",
    "mariadb_charset": "utf8mb4",
    "mariadb_collate": "utf8mb4_bin",
}

_STORE_COMMENT = "the file's store (revision 0007)"
_FILE_COMMENT = "no foreign key: see revision 0002"
_READS_COPY = "dbm_file_reads_0007"

_ORACLE_PK_COLUMNS = (
    "SELECT COUNT(*) FROM user_constraints c JOIN user_cons_columns k "
    "ON k.constraint_name = c.constraint_name "
    "WHERE c.table_name = :table_name AND c.constraint_type = 'P'"
)
"""Oracle: the number of columns of a table's primary key (a re-run skips a key already swapped)."""


def _dialect() -> str:
    return str(op.get_context().dialect.name)


def _bind() -> sa.Connection | None:
    return None if op.get_context().as_sql else op.get_bind()


def _missing(kind: str, name: str, table: str | None = None) -> bool:
    """Whether ``name`` still has to be created (always True offline and off Oracle)."""
    return not oracle_object_exists(_bind(), kind, name, table=table)


def _oracle_pk_width(table: str) -> int | None:
    """Columns of ``table``'s primary key online on Oracle; None elsewhere and offline."""
    bind = _bind()
    if bind is None or bind.dialect.name != "oracle":
        return None
    return int(bind.execute(sa.text(_ORACLE_PK_COLUMNS), {"table_name": table.upper()}).scalar() or 0)


def _swap_primary_key(table: str, columns: str) -> None:
    """Make ``pk_<table>`` the key on ``columns`` (a comma-separated list)."""
    width = _oracle_pk_width(table)
    if width is not None and width == len(columns.split(",")):
        return  # Oracle: a run that failed half-way swapped it already
    name = f"pk_{table}"
    dialect = _dialect()
    if dialect in ("mysql", "mariadb"):
        op.execute(f"ALTER TABLE {table} DROP PRIMARY KEY, ADD CONSTRAINT {name} PRIMARY KEY ({columns})")
    elif dialect == "oracle":
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name} DROP INDEX")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} PRIMARY KEY ({columns})")
    else:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {name}, ADD CONSTRAINT {name} PRIMARY KEY ({columns})"
        )


def _sqlite_rebuild_reads(*, with_store: bool) -> None:
    """SQLite: ``dbm_file_reads`` again with (``with_store``) or without ``store_id``."""
    columns = [
        sa.Column("file_id", big_id, nullable=False, autoincrement=False, comment=_FILE_COMMENT),
        sa.Column("read_at", UtcDateTime(), nullable=False, comment="last recorded read"),
    ]
    if with_store:
        columns.append(sa.Column("store_id", big_id, nullable=False, comment=_STORE_COMMENT))
        key = sa.PrimaryKeyConstraint("store_id", "file_id", name="pk_dbm_file_reads")
        copy = (
            f"INSERT INTO {_READS_COPY} (file_id, read_at, store_id) "
            "SELECT r.file_id, r.read_at, f.store_id FROM dbm_file_reads r "
            "JOIN dbm_files f ON f.file_id = r.file_id"
        )
    else:
        key = sa.PrimaryKeyConstraint("file_id", name="pk_dbm_file_reads")
        copy = f"INSERT INTO {_READS_COPY} (file_id, read_at) SELECT file_id, read_at FROM dbm_file_reads"
    op.create_table(_READS_COPY, *columns, key)
    op.execute(copy)
    op.drop_table("dbm_file_reads")
    op.rename_table(_READS_COPY, "dbm_file_reads")
    if with_store:
        op.create_index("ix_dbm_file_reads_file_id", "dbm_file_reads", ["file_id"])


def upgrade() -> None:
    """Key ``dbm_files`` and ``dbm_file_reads`` by ``(store_id, file_id)``."""
    if _dialect() == "sqlite":
        _sqlite_rebuild_reads(with_store=True)
        return
    # dbm_files: the index on file_id first (MySQL's AUTO_INCREMENT column keeps an index)
    if _missing("index", "ix_dbm_files_file_id"):
        op.create_index("ix_dbm_files_file_id", "dbm_files", ["file_id"])
    _swap_primary_key("dbm_files", "store_id, file_id")
    # dbm_file_reads: the store of each read, then the key
    if _missing("column", "store_id", "dbm_file_reads"):
        op.add_column(
            "dbm_file_reads", sa.Column("store_id", big_id, nullable=True, comment=_STORE_COMMENT)
        )
    op.execute(
        "DELETE FROM dbm_file_reads WHERE NOT EXISTS "
        "(SELECT 1 FROM dbm_files f WHERE f.file_id = dbm_file_reads.file_id)"
    )
    op.execute(
        "UPDATE dbm_file_reads SET store_id = "
        "(SELECT f.store_id FROM dbm_files f WHERE f.file_id = dbm_file_reads.file_id)"
    )
    op.alter_column(
        "dbm_file_reads",
        "store_id",
        existing_type=big_id,
        existing_comment=_STORE_COMMENT,
        nullable=False,
    )
    _swap_primary_key("dbm_file_reads", "store_id, file_id")
    if _missing("index", "ix_dbm_file_reads_file_id"):
        op.create_index("ix_dbm_file_reads_file_id", "dbm_file_reads", ["file_id"])


def downgrade() -> None:
    """Key both tables by ``file_id`` alone again; drop ``dbm_file_reads.store_id``."""
    if _dialect() == "sqlite":
        _sqlite_rebuild_reads(with_store=False)
        return
    op.drop_index("ix_dbm_file_reads_file_id", table_name="dbm_file_reads")
    _swap_primary_key("dbm_file_reads", "file_id")
    op.drop_column("dbm_file_reads", "store_id")
    _swap_primary_key("dbm_files", "file_id")
    op.drop_index("ix_dbm_files_file_id", table_name="dbm_files")
