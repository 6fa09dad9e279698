"""Initial schema: stores, files, agents, audit events and the file-list report view.

Revision ID: 0001
Revises:

Written out column by column (never from ``dbmemory.db.schema``'s Table objects) so that later
schema changes cannot rewrite history; only the column types come from
:mod:`dbmemory.db.dialect.types` and :mod:`dbmemory.db.dialect.oracle`. The view's SELECT is frozen here too, built from lightweight
``sa.table()`` constructs; a test checks it matches ``schema.file_list_view_select()``.

Oracle commits every DDL statement, so a run that failed half-way left its first objects
behind: online on Oracle each table, index and view is created only when missing
(:func:`dbmemory.db.dialect.oracle.oracle_object_exists`), so the upgrade can simply be run again.
Elsewhere and offline the DDL is unconditional and unchanged. Flags are
:class:`~dbmemory.db.dialect.oracle.Flag`: ``NUMBER(1)`` with a ``CHECK`` on Oracle (this revision
rendered ``SMALLINT`` on 19c and ``BOOLEAN`` on 23ai before; it had never run on a real Oracle
here), ``BOOLEAN``/``BOOL`` elsewhere exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from dbmemory.db.dialect.oracle import Flag, drop_table, flag_check, oracle_object_exists
from dbmemory.db.dialect.types import BodyText, PathText, UtcDateTime, big_id

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
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

VIEW_NAME = "dbm_file_list_v"


def _missing(kind: str, name: str) -> bool:
    """Whether ``name`` still has to be created (always True offline and off Oracle)."""
    bind = None if op.get_context().as_sql else op.get_bind()
    return not oracle_object_exists(bind, kind, name)


def _create_table(name: str, *columns: sa.schema.SchemaItem, **kw: Any) -> None:
    if _missing("table", name):
        op.create_table(name, *columns, **kw)


def _create_index(name: str, table: str, columns: list[str]) -> None:
    if _missing("index", name):
        op.create_index(name, table, columns)


def view_select() -> sa.Select[tuple[object, ...]]:
    """The frozen SELECT behind ``dbm_file_list_v`` as of this revision (no body column)."""
    st = sa.table(
        "dbm_stores",
        sa.column("store_id"),
        sa.column("store_key"),
        sa.column("scope_name"),
    )
    fi = sa.table(
        "dbm_files",
        sa.column("file_id"),
        sa.column("store_id"),
        sa.column("file_path"),
        sa.column("char_count"),
        sa.column("version_no"),
        sa.column("created_at"),
        sa.column("updated_at"),
        sa.column("last_accessed_at"),
    )
    return sa.select(
        st.c.store_id,
        st.c.store_key,
        st.c.scope_name,
        fi.c.file_id,
        fi.c.file_path,
        fi.c.char_count,
        fi.c.version_no,
        fi.c.created_at,
        fi.c.updated_at,
        fi.c.last_accessed_at,
    ).select_from(st.join(fi, fi.c.store_id == st.c.store_id))


def upgrade() -> None:
    """Create the four tables, their indexes and the report view."""
    _create_table(
        "dbm_stores",
        sa.Column("store_id", big_id, sa.Identity(), nullable=False),
        sa.Column("store_key", sa.String(700), nullable=False),
        sa.Column("scope_name", sa.String(10), nullable=False),
        sa.Column(
            "agent_code",
            sa.String(200),
            nullable=True,
            comment="agent whose namespace holds the store, or that created a session store",
        ),
        sa.Column("store_code", sa.String(200), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("store_id", name="pk_dbm_stores"),
        sa.UniqueConstraint("store_key", name="uq_dbm_stores_key"),
        **_MYSQL,
    )
    _create_index("ix_dbm_stores_agent", "dbm_stores", ["agent_code"])

    _create_table(
        "dbm_files",
        sa.Column("file_id", big_id, sa.Identity(), nullable=False),
        sa.Column("store_id", big_id, nullable=False),
        sa.Column("file_path", PathText, nullable=False),
        sa.Column("path_hash", sa.String(64), nullable=False, comment="sha256 hex of file_path"),
        sa.Column(
            "body", BodyText, nullable=True, comment="NULL means empty (Oracle stores '' as NULL)"
        ),
        sa.Column(
            "char_count", sa.Integer(), nullable=False, comment="length of body in characters"
        ),
        sa.Column("version_no", sa.Integer(), nullable=False, comment="1 on create, +1 per change"),
        sa.Column("expiry_exempt", Flag(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("last_accessed_at", UtcDateTime(), nullable=False, comment="last read or write"),
        sa.PrimaryKeyConstraint("file_id", name="pk_dbm_files"),
        sa.UniqueConstraint("store_id", "path_hash", name="uq_dbm_files_store_path"),
        flag_check("expiry_exempt", "ck_dbm_files_exempt"),
        sa.ForeignKeyConstraint(
            ["store_id"],
            ["dbm_stores.store_id"],
            name="fk_dbm_files_store",
            ondelete="CASCADE",
        ),
        **_MYSQL,
    )
    _create_index("ix_dbm_files_accessed", "dbm_files", ["last_accessed_at"])

    _create_table(
        "dbm_agents",
        sa.Column("agent_code", sa.String(200), nullable=False),
        sa.Column("scope_name", sa.String(10), nullable=False),
        sa.Column("store_code", sa.String(200), nullable=True),
        sa.Column("context_key", sa.String(200), nullable=True),
        sa.Column("max_file_chars", sa.Integer(), nullable=False),
        sa.Column("max_files", sa.Integer(), nullable=False),
        sa.Column("max_store_chars", sa.BigInteger(), nullable=True, comment="NULL means no cap"),
        sa.Column("memory_enabled", Flag(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("agent_code", name="pk_dbm_agents"),
        flag_check("memory_enabled", "ck_dbm_agents_enabled"),
        **_MYSQL,
    )

    _create_table(
        "dbm_audit_events",
        sa.Column("event_id", big_id, sa.Identity(), nullable=False),
        sa.Column(
            "store_id", big_id, nullable=True, comment="no foreign key: events outlive stores"
        ),
        sa.Column("store_key", sa.String(700), nullable=True),
        sa.Column("file_path", PathText, nullable=True),
        sa.Column("action_name", sa.String(30), nullable=False),
        sa.Column("actor_name", sa.String(500), nullable=False),
        sa.Column("chars_before", sa.BigInteger(), nullable=True),
        sa.Column("chars_after", sa.BigInteger(), nullable=True),
        sa.Column("detail_text", sa.String(1000), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("event_id", name="pk_dbm_audit_events"),
        **_MYSQL,
    )
    _create_index("ix_dbm_audit_events_store", "dbm_audit_events", ["store_id", "created_at"])
    _create_index("ix_dbm_audit_events_time", "dbm_audit_events", ["created_at"])

    _create_table(
        "dbm_user_settings",
        sa.Column(
            "user_key",
            sa.String(200),
            nullable=False,
            comment="the user id as encoded for store keys (dbmemory.profile.store.encode_user_id)",
        ),
        sa.Column("memory_enabled", Flag(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("user_key", name="pk_dbm_user_settings"),
        flag_check("memory_enabled", "ck_dbm_user_settings_enabled"),
        **_MYSQL,
    )

    dialect = op.get_context().dialect
    select_sql = str(view_select().compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    if _missing("view", VIEW_NAME):
        op.execute(f"CREATE VIEW {VIEW_NAME} AS {select_sql}")


def downgrade() -> None:
    """Drop the view and the tables (children first; indexes go with their tables; on Oracle
    with ``PURGE``: nothing stays in the recycle bin)."""
    op.execute(f"DROP VIEW {VIEW_NAME}")
    drop_table(op, "dbm_user_settings")
    drop_table(op, "dbm_audit_events")
    drop_table(op, "dbm_agents")
    drop_table(op, "dbm_files")
    drop_table(op, "dbm_stores")
