"""Memory items, organisation settings, the memory switch, and audit events about users and
items.

Revision ID: 0003
Revises: 0002

* ``dbm_items``: one row per memory item (:mod:`dbmemory.items`): organisation, encoded user
  id, text (at most 1,000 characters, so at most 4,000 bytes in AL32UTF8: a ``VARCHAR2(1000
  CHAR)`` on Oracle, never a CLOB, so it can be read 100 rows a turn without LOB fetches), its
  size and normalised-text hash, kind (``manual``/``auto``), retention class, confidence,
  source chat and turn time, timestamps (``expires_at`` NULL: never; ``deleted_at`` NULL:
  live), version.
* ``dbm_org_settings``: the settings of an organisation that differ from the defaults, one row
  per (organisation, setting name).
* ``dbm_memory_switches``: the memory switch per (organisation, user); no row means on.
* ``dbm_item_marks``: times of the item runtime per (organisation, user, mark): the last
  extraction of a chat (skip window) and the last profile summary fold.
* ``dbm_audit_events`` gains ``org_id``, ``user_key`` and ``item_id`` (all NULL for the events
  written before) and two indexes, so audit queries by user or organisation use an index.
* ``dbm_audit_report_v``: the report view over the audit events.

Written out column by column (never from ``dbmemory.db.schema``), as 0001 and 0002 are; online
on Oracle each object is created only when missing, so a run that failed half-way can be run
again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from dbmemory.db.dialect.oracle import Flag, drop_table, flag_check, oracle_object_exists
from dbmemory.db.dialect.types import UtcDateTime, big_id

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MYSQL = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
    "mariadb_engine": "InnoDB",
    "mariadb_charset": "utf8mb4",
    "mariadb_collate": "utf8mb4_bin",
}

VIEW_NAME = "dbm_audit_report_v"

_AUDIT_INDEXES = (
    ("ix_dbm_audit_events_user", ["user_key", "created_at"]),
    ("ix_dbm_audit_events_org", ["org_id", "created_at"]),
)


def view_select() -> sa.Select[tuple[object, ...]]:
    """The frozen SELECT behind ``dbm_audit_report_v`` as of this revision."""
    ev = sa.table(
        "dbm_audit_events",
        *(
            sa.column(name)
            for name in (
                "event_id",
                "created_at",
                "action_name",
                "actor_name",
                "org_id",
                "user_key",
                "item_id",
                "store_key",
                "file_path",
                "chars_before",
                "chars_after",
                "detail_text",
            )
        ),
    )
    return sa.select(*ev.c)


def _missing(kind: str, name: str, table: str | None = None) -> bool:
    """Whether ``name`` still has to be created (always True offline and off Oracle)."""
    bind = None if op.get_context().as_sql else op.get_bind()
    return not oracle_object_exists(bind, kind, name, table=table)


def _add_column(table: str, column: sa.Column[object]) -> None:
    if _missing("column", column.name, table):
        op.add_column(table, column)


def _create_table(name: str, *columns: sa.schema.SchemaItem, **kw: Any) -> None:
    if _missing("table", name):
        op.create_table(name, *columns, **kw)


def _create_index(name: str, table: str, columns: list[str]) -> None:
    if _missing("index", name):
        op.create_index(name, table, columns)


def upgrade() -> None:
    """Create the item, setting and switch tables, extend the audit events, add the view."""
    _create_table(
        "dbm_items",
        sa.Column("item_id", big_id, sa.Identity(), nullable=False),
        sa.Column("org_id", sa.String(200), nullable=False),
        sa.Column("user_key", sa.String(200), nullable=False, comment="encoded user id"),
        sa.Column("item_text", sa.String(1000), nullable=False, comment="at most 1,000 characters"),
        sa.Column("char_count", sa.Integer(), nullable=False),
        sa.Column(
            "text_hash", sa.String(64), nullable=False, comment="sha256 of the normalised text"
        ),
        sa.Column("item_kind", sa.String(10), nullable=False, comment="manual or auto"),
        sa.Column("retention_class", sa.String(20), nullable=False),
        sa.Column("confidence", sa.Numeric(4, 3, asdecimal=False), nullable=True),
        sa.Column("source_chat_id", sa.String(200), nullable=True),
        sa.Column("source_turn_at", UtcDateTime(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("last_used_at", UtcDateTime(), nullable=True),
        sa.Column("expires_at", UtcDateTime(), nullable=True, comment="NULL: never (permanent)"),
        sa.Column("deleted_at", UtcDateTime(), nullable=True, comment="soft delete; NULL: live"),
        sa.Column("version_no", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("item_id", name="pk_dbm_items"),
        **_MYSQL,
    )
    _create_index("ix_dbm_items_user", "dbm_items", ["org_id", "user_key"])
    _create_index("ix_dbm_items_expires", "dbm_items", ["expires_at"])
    _create_index("ix_dbm_items_deleted", "dbm_items", ["deleted_at"])
    _create_table(
        "dbm_org_settings",
        sa.Column("org_id", sa.String(200), nullable=False),
        sa.Column("setting_name", sa.String(50), nullable=False),
        sa.Column("setting_value", sa.String(500), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "setting_name", name="pk_dbm_org_settings"),
        **_MYSQL,
    )
    _create_table(
        "dbm_memory_switches",
        sa.Column("org_id", sa.String(200), nullable=False),
        sa.Column("user_key", sa.String(200), nullable=False),
        sa.Column("memory_on", Flag(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "user_key", name="pk_dbm_memory_switches"),
        flag_check("memory_on", "ck_dbm_memory_switches_on"),
        **_MYSQL,
    )
    _create_table(
        "dbm_item_marks",
        sa.Column("org_id", sa.String(200), nullable=False),
        sa.Column("user_key", sa.String(200), nullable=False),
        sa.Column("mark_key", sa.String(250), nullable=False, comment="chat:<chat id> or summary"),
        sa.Column("marked_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "user_key", "mark_key", name="pk_dbm_item_marks"),
        **_MYSQL,
    )
    _add_column(
        "dbm_audit_events",
        sa.Column("org_id", sa.String(200), nullable=True, comment="organisation (revision 0003)"),
    )
    _add_column(
        "dbm_audit_events",
        sa.Column(
            "user_key", sa.String(200), nullable=True, comment="subject user, encoded (0003)"
        ),
    )
    _add_column(
        "dbm_audit_events",
        sa.Column("item_id", big_id, nullable=True, comment="memory item; no foreign key (0003)"),
    )
    for name, columns in _AUDIT_INDEXES:
        _create_index(name, "dbm_audit_events", columns)
    dialect = op.get_context().dialect
    select_sql = str(view_select().compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    if _missing("view", VIEW_NAME):
        op.execute(f"CREATE VIEW {VIEW_NAME} AS {select_sql}")


def downgrade() -> None:
    """Drop the view, the audit columns and indexes, and the four tables."""
    op.execute(f"DROP VIEW {VIEW_NAME}")
    for name, _columns in reversed(_AUDIT_INDEXES):
        op.drop_index(name, table_name="dbm_audit_events")
    # plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+), as in 0002
    for column in ("item_id", "user_key", "org_id"):
        op.drop_column("dbm_audit_events", column)
    drop_table(op, "dbm_item_marks")
    drop_table(op, "dbm_memory_switches")
    drop_table(op, "dbm_org_settings")
    drop_table(op, "dbm_items")
