"""The item change marker read from an index alone.

Revision ID: 0005
Revises: 0004

``dbm_items``' index ``ix_dbm_items_user`` on ``(org_id, user_key)`` is replaced by
``ix_dbm_items_marker`` on ``(org_id, user_key, version_no, char_count, updated_at,
last_used_at, item_id)``: the same leading columns (every lookup by organisation and user uses
it as before), plus every column of the per-turn change marker
(:mod:`dbmemory.items.turn_cache`: count, sum and maximum of the ids, sum of the versions and of
the lengths, latest ``updated_at`` and ``last_used_at``, count of used rows), so the marker
aggregate is an index-only scan instead of one table row per item (SQLite's plan: ``USING
COVERING INDEX ix_dbm_items_marker``). Key size: 200 + 200 characters (1,600 bytes in utf8mb4 or
AL32UTF8) plus 36 bytes of numbers and times, under InnoDB's 3,072 bytes and Oracle's ~6,400
(8 KiB blocks).

Written out column by column (never from ``dbmemory.db.schema``), as 0001 to 0004 are; online on
Oracle each index is dropped or created only when needed, so a run that failed half-way can be
run again.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from dbmemory.db.dialect.oracle import oracle_object_exists

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MARKER_COLUMNS = ["org_id", "user_key", "version_no", "char_count", "updated_at", "last_used_at", "item_id"]
"""Columns of ``ix_dbm_items_marker`` as of this revision."""


def _exists(name: str) -> bool:
    """Whether an online Oracle run finds index ``name`` (always False offline and elsewhere)."""
    bind = None if op.get_context().as_sql else op.get_bind()
    return oracle_object_exists(bind, "index", name)


def upgrade() -> None:
    """Create ``ix_dbm_items_marker``, then drop ``ix_dbm_items_user`` (its prefix)."""
    if not _exists("ix_dbm_items_marker"):
        op.create_index("ix_dbm_items_marker", "dbm_items", MARKER_COLUMNS)
        op.drop_index("ix_dbm_items_user", table_name="dbm_items")
    elif _exists("ix_dbm_items_user"):  # online Oracle, run again after a failure
        op.drop_index("ix_dbm_items_user", table_name="dbm_items")


def downgrade() -> None:
    """Put ``ix_dbm_items_user`` back and drop ``ix_dbm_items_marker``."""
    op.create_index("ix_dbm_items_user", "dbm_items", ["org_id", "user_key"])
    op.drop_index("ix_dbm_items_marker", table_name="dbm_items")
