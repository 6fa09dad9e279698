"""Store counters: the number of files and characters of a store kept on its row.

Revision ID: 0004
Revises: 0003

``dbm_files`` gains the index ``ix_dbm_files_prefix`` on ``(store_id, <the first 600
characters of file_path in binary order>)`` (DDL per backend:
:func:`dbmemory.db.dialect.types.path_prefix_index_ddl`; an expression index, so it is not in
``dbmemory.db.schema``): "is anything under this directory?" becomes an index range probe.

``dbm_stores`` gains ``file_count`` and ``total_chars`` (both ``NOT NULL``, default 0),
backfilled here from ``dbm_files``. Every writer of a store changes them under the store-row
lock it already holds (the file API, the expiry in Python and in the generated SQL jobs), so
the caps ``max_files`` and ``max_store_chars`` are checked against two columns of the locked row
instead of an aggregate over the whole store: a write costs the same in a store of 20 files and
in one of 1,000. ``tests/store/test_counters.py`` checks counters against the aggregates after
random operation sequences and races.

Written out column by column (never from ``dbmemory.db.schema``), as 0001 and 0002 are; on
Oracle each column is added only when missing, so a run that failed half-way can be run again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from dbmemory.db.dialect.base import is_mysql
from dbmemory.db.dialect.oracle import oracle_object_exists
from dbmemory.db.dialect.types import path_prefix_index_ddl

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_stores = sa.table(
    "dbm_stores",
    sa.column("store_id", sa.BigInteger()),
    sa.column("file_count", sa.Integer()),
    sa.column("total_chars", sa.BigInteger()),
)
_files = sa.table(
    "dbm_files",
    sa.column("store_id", sa.BigInteger()),
    sa.column("char_count", sa.Integer()),
)


def _missing(name: str) -> bool:
    bind = None if op.get_context().as_sql else op.get_bind()
    return not oracle_object_exists(bind, "column", name, table="dbm_stores")


def upgrade() -> None:
    """Add ``file_count`` and ``total_chars`` to ``dbm_stores`` and fill them in; add the
    prefix index ``ix_dbm_files_prefix``."""
    if _missing("file_count"):
        op.add_column(
            "dbm_stores",
            sa.Column(
                "file_count",
                sa.Integer(),
                nullable=False,
                server_default=sa.text("0"),
                comment="files in the store, kept by every writer under the store lock",
            ),
        )
    if _missing("total_chars"):
        op.add_column(
            "dbm_stores",
            sa.Column(
                "total_chars",
                sa.BigInteger(),
                nullable=False,
                server_default=sa.text("0"),
                comment="characters in the store, kept by every writer under the store lock",
            ),
        )
    bind = None if op.get_context().as_sql else op.get_bind()
    if not oracle_object_exists(bind, "index", "ix_dbm_files_prefix"):
        op.execute(path_prefix_index_ddl(op.get_context().dialect.name))
    mine = _files.c.store_id == _stores.c.store_id
    op.execute(
        sa.update(_stores).values(
            file_count=sa.select(sa.func.count()).select_from(_files).where(mine).scalar_subquery(),
            total_chars=sa.select(sa.func.coalesce(sa.func.sum(_files.c.char_count), 0))
            .where(mine)
            .scalar_subquery(),
        )
    )


def downgrade() -> None:
    """Drop the prefix index and the counters."""
    if is_mysql(op.get_context().dialect):
        op.execute("DROP INDEX ix_dbm_files_prefix ON dbm_files")
    else:
        op.execute("DROP INDEX ix_dbm_files_prefix")
    for column in ("total_chars", "file_count"):
        op.drop_column("dbm_stores", column)
