"""The one schema source: SQLAlchemy Core tables (docs/databases.md for what each backend stores).

Rules kept here: every table is prefixed ``dbm_``; no table, column or constraint name is an
Oracle reserved word or longer than 30 characters; the file body is a CLOB that is never
compared, sorted or grouped (sizes live in ``char_count``, equality uses ``version_no`` and
``path_hash``); timestamps are UTC (:class:`~dbmemory.db.dialect.types.UtcDateTime`); yes/no columns
are :class:`~dbmemory.db.dialect.oracle.Flag` (``NUMBER(1)`` with a ``CHECK (col IN (0, 1))`` on
Oracle 19c and 23ai alike, ``BOOLEAN`` elsewhere).

Migrations (``dbmemory/db/migrations``) create exactly these tables; a test compares them.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from dbmemory.db.dialect.oracle import Flag, flag_check
from dbmemory.db.dialect.types import BodyText, PathText, SearchText, UtcDateTime, big_id

__all__ = [
    "metadata",
    "stores",
    "files",
    "agents",
    "audit_events",
    "user_settings",
    "file_reads",
    "job_locks",
    "EXPIRY_LOCK",
    "items",
    "org_settings",
    "memory_switches",
    "item_marks",
    "episodes",
    "EPISODE_SEARCH_TABLE",
    "BACKEND_ONLY_COLUMNS",
    "AUDIT_REPORT_VIEW",
    "audit_report_view_select",
    "FILE_LIST_VIEW",
    "file_list_view_select",
    "VERSION_TABLE",
    "PER_STORE_TABLES",
    "SQLITE_ROWID_KEYS",
]

VERSION_TABLE = "dbm_alembic_version"
"""Alembic's version table for dbmemory, apart from the host application's ``alembic_version``."""

FILE_LIST_VIEW = "dbm_file_list_v"
"""Report view: one row per file with its store, without the body."""

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)

_MYSQL: dict[str, Any] = {  # dialect keywords of sa.Table (its **kw is Any)
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
    "mariadb_engine": "InnoDB",
    "mariadb_charset": "utf8mb4",
    "mariadb_collate": "utf8mb4_bin",
}
"""MySQL/MariaDB table options. The binary collation makes every key column (store_key,
agent_code, store_code) case-sensitive as on the other backends (the server default
``utf8mb4_general_ci`` would let ``user:A:Bob`` and ``user:A:bob`` collide). The ``mariadb_``
spellings are needed because the MariaDB dialect ignores ``mysql_`` table options."""

stores = sa.Table(
    "dbm_stores",
    metadata,
    sa.Column("store_id", big_id, sa.Identity(), primary_key=True),
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
    sa.Column(
        "max_file_chars",
        sa.Integer(),
        nullable=False,
        server_default=sa.text("100000"),
        comment="cap: characters per file",
    ),
    sa.Column(
        "max_files",
        sa.Integer(),
        nullable=False,
        server_default=sa.text("1000"),
        comment="cap: files in the store",
    ),
    sa.Column(
        "max_store_chars",
        sa.BigInteger(),
        nullable=True,
        comment="cap: characters in the store; NULL means no cap",
    ),
    sa.Column(
        "file_count",
        sa.Integer(),
        nullable=False,
        server_default=sa.text("0"),
        comment="files in the store, kept by every writer under the store lock",
    ),
    sa.Column(
        "total_chars",
        sa.BigInteger(),
        nullable=False,
        server_default=sa.text("0"),
        comment="characters in the store, kept by every writer under the store lock",
    ),
    sa.UniqueConstraint("store_key", name="uq_dbm_stores_key"),
    sa.Index("ix_dbm_stores_agent", "agent_code"),
    **_MYSQL,
)

files = sa.Table(
    "dbm_files",
    metadata,
    sa.Column("file_id", big_id, sa.Identity(), nullable=False),
    sa.Column(
        "store_id",
        big_id,
        sa.ForeignKey("dbm_stores.store_id", ondelete="CASCADE", name="fk_dbm_files_store"),
        nullable=False,
    ),
    sa.Column("file_path", PathText, nullable=False),
    sa.Column("path_hash", sa.String(64), nullable=False, comment="sha256 hex of file_path"),
    sa.Column("body", BodyText, nullable=True, comment="NULL means empty (Oracle stores '' as NULL)"),
    sa.Column("char_count", sa.Integer(), nullable=False, comment="length of body in characters"),
    sa.Column("version_no", sa.Integer(), nullable=False, comment="1 on create, +1 per change"),
    sa.Column("expiry_exempt", Flag(), nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    sa.Column("last_accessed_at", UtcDateTime(), nullable=False, comment="last read or write"),
    # the store leads the key (revision 0007): every file row is placed by its store
    sa.PrimaryKeyConstraint("store_id", "file_id", name="pk_dbm_files"),
    sa.UniqueConstraint("store_id", "path_hash", name="uq_dbm_files_store_path"),
    sa.Index("ix_dbm_files_accessed", "last_accessed_at"),
    # cross-store statements by id (expiry batches, orphan reads); MySQL's AUTO_INCREMENT
    # column must also lead an index
    sa.Index("ix_dbm_files_file_id", "file_id"),
    flag_check("expiry_exempt", "ck_dbm_files_exempt"),
    **_MYSQL,
)

agents = sa.Table(
    "dbm_agents",
    metadata,
    sa.Column("agent_code", sa.String(200), primary_key=True),
    sa.Column("scope_name", sa.String(10), nullable=False),
    sa.Column("store_code", sa.String(200), nullable=True),
    sa.Column("context_key", sa.String(200), nullable=True),
    sa.Column("max_file_chars", sa.Integer(), nullable=False),
    sa.Column("max_files", sa.Integer(), nullable=False),
    sa.Column("max_store_chars", sa.BigInteger(), nullable=True, comment="NULL means no cap"),
    sa.Column("memory_enabled", Flag(), nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    flag_check("memory_enabled", "ck_dbm_agents_enabled"),
    **_MYSQL,
)

audit_events = sa.Table(
    "dbm_audit_events",
    metadata,
    sa.Column("event_id", big_id, sa.Identity(), primary_key=True),
    sa.Column("store_id", big_id, nullable=True, comment="no foreign key: events outlive stores"),
    sa.Column("store_key", sa.String(700), nullable=True),
    sa.Column("file_path", PathText, nullable=True),
    sa.Column("action_name", sa.String(30), nullable=False),
    sa.Column("actor_name", sa.String(500), nullable=False),
    sa.Column("chars_before", sa.BigInteger(), nullable=True),
    sa.Column("chars_after", sa.BigInteger(), nullable=True),
    sa.Column("detail_text", sa.String(1000), nullable=True),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("org_id", sa.String(200), nullable=True, comment="organisation (revision 0003)"),
    sa.Column("user_key", sa.String(200), nullable=True, comment="subject user, encoded (0003)"),
    sa.Column("item_id", big_id, nullable=True, comment="memory item; no foreign key (0003)"),
    sa.Column("session_user_name", sa.String(400), nullable=True,
              comment="the database login of the session that wrote the row"),
    sa.Index("ix_dbm_audit_events_store", "store_id", "created_at"),
    sa.Index("ix_dbm_audit_events_time", "created_at"),
    sa.Index("ix_dbm_audit_events_user", "user_key", "created_at"),
    sa.Index("ix_dbm_audit_events_org", "org_id", "created_at"),
    **_MYSQL,
)

user_settings = sa.Table(
    "dbm_user_settings",
    metadata,
    sa.Column(
        "user_key",
        sa.String(200),
        primary_key=True,
        comment="the user id as encoded for store keys (dbmemory.profile.store.encode_user_id)",
    ),
    sa.Column("memory_enabled", Flag(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    flag_check("memory_enabled", "ck_dbm_user_settings_enabled"),
    **_MYSQL,
)
"""Per-user settings: the user-memory opt-out (:func:`dbmemory.profile.set_user_memory_enabled`)."""


file_reads = sa.Table(
    "dbm_file_reads",
    metadata,
    sa.Column("file_id", big_id, nullable=False, autoincrement=False, comment="no foreign key: see revision 0002"),
    sa.Column("read_at", UtcDateTime(), nullable=False, comment="last recorded read"),
    sa.Column("store_id", big_id, nullable=False, comment="the file's store (revision 0007)"),
    sa.PrimaryKeyConstraint("store_id", "file_id", name="pk_dbm_file_reads"),
    sa.Index("ix_dbm_file_reads_file_id", "file_id"),
    **_MYSQL,
)
"""The last recorded read of each file (a read's touch), keyed like the file row (revision
0007). No foreign key: the check would wait for a writer's lock on the file row. Rows of deleted
files are purged by the expiry (by ``file_id``, through ``ix_dbm_file_reads_file_id``)."""

job_locks = sa.Table(
    "dbm_job_locks",
    metadata,
    sa.Column("lock_name", sa.String(30), primary_key=True),
    sa.Column("updated_at", UtcDateTime(), nullable=True),
    **_MYSQL,
)
"""One row per scheduled job; the expiry holds its row exclusively per batch, a read's touch
holds it shared (revision 0002)."""

EXPIRY_LOCK = "expiry"
"""``dbm_job_locks.lock_name`` of the expiry job."""

AUDIT_REPORT_VIEW = "dbm_audit_report_v"
"""Report view over ``dbm_audit_events`` (revision 0003): every column but the store id and
the session's login (``session_user_name``, added after the view)."""

items = sa.Table(
    "dbm_items",
    metadata,
    sa.Column("item_id", big_id, sa.Identity(), primary_key=True),
    sa.Column("org_id", sa.String(200), nullable=False),
    sa.Column("user_key", sa.String(200), nullable=False, comment="encoded user id"),
    sa.Column("item_text", sa.String(1000), nullable=False, comment="at most 1,000 characters"),
    sa.Column("char_count", sa.Integer(), nullable=False),
    sa.Column("text_hash", sa.String(64), nullable=False, comment="sha256 of the normalised text"),
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
    # covers the per-turn change marker (dbmemory.items.turn_cache), revision 0005
    sa.Index(
        "ix_dbm_items_marker",
        "org_id", "user_key", "version_no", "char_count", "updated_at", "last_used_at", "item_id",
    ),
    sa.Index("ix_dbm_items_expires", "expires_at"),
    sa.Index("ix_dbm_items_deleted", "deleted_at"),
    **_MYSQL,
)
"""Memory items (revision 0003): one row per fact, see :mod:`dbmemory.items`."""

org_settings = sa.Table(
    "dbm_org_settings",
    metadata,
    sa.Column("org_id", sa.String(200), primary_key=True),
    sa.Column("setting_name", sa.String(50), primary_key=True),
    sa.Column("setting_value", sa.String(500), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    **_MYSQL,
)
"""Per-organisation settings that differ from the defaults (revision 0003)."""

memory_switches = sa.Table(
    "dbm_memory_switches",
    metadata,
    sa.Column("org_id", sa.String(200), primary_key=True),
    sa.Column("user_key", sa.String(200), primary_key=True),
    sa.Column("memory_on", Flag(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    flag_check("memory_on", "ck_dbm_memory_switches_on"),
    **_MYSQL,
)
"""The memory switch per user and organisation (revision 0003); no row means on."""

item_marks = sa.Table(
    "dbm_item_marks",
    metadata,
    sa.Column("org_id", sa.String(200), primary_key=True),
    sa.Column("user_key", sa.String(200), primary_key=True),
    sa.Column("mark_key", sa.String(250), primary_key=True, comment="chat:<chat id> or summary"),
    sa.Column("marked_at", UtcDateTime(), nullable=False),
    **_MYSQL,
)
"""Times of the item runtime (revision 0003): the last extraction per chat (skip window) and
the last profile summary fold per user, see :mod:`dbmemory.items.runtime_data`."""


episodes = sa.Table(
    "dbm_episodes",
    metadata,
    sa.Column("episode_id", big_id, sa.Identity(), primary_key=True),
    sa.Column("org_id", sa.String(200), nullable=False),
    sa.Column("user_key", sa.String(200), nullable=False, comment="encoded user id"),
    sa.Column("chat_id", sa.String(200), nullable=True, comment="the session the turn was in"),
    sa.Column("turn_at", UtcDateTime(), nullable=False, comment="time of the turn"),
    sa.Column(
        "episode_text",
        SearchText,
        nullable=True,
        comment="user text, a newline, assistant text (detectors applied); NULL means empty",
    ),
    sa.Column("user_chars", sa.Integer(), nullable=False, comment="characters of the user's text"),
    sa.Column("char_count", sa.Integer(), nullable=False, comment="length of episode_text"),
    sa.Column("retention_class", sa.String(20), nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("expires_at", UtcDateTime(), nullable=True, comment="NULL: never"),
    sa.Index("ix_dbm_episodes_user", "org_id", "user_key", "turn_at"),
    sa.Index("ix_dbm_episodes_expires", "expires_at"),
    **_MYSQL,
)
"""Conversation episodes (revision 0006): one row per turn of a user, see
:mod:`dbmemory.items.episodes`. Each backend also has its full-text index, created by the
revision outside this metadata: SQLite the FTS5 table :data:`EPISODE_SEARCH_TABLE` kept by
triggers, PostgreSQL the generated ``search_vector`` column with a GIN index, MySQL/MariaDB a
``FULLTEXT`` index, Oracle an Oracle Text ``CONTEXT`` index (all named
``ix_dbm_episodes_search`` but SQLite's)."""

EPISODE_SEARCH_TABLE = "dbm_episodes_fts"
"""SQLite's FTS5 external-content table over ``dbm_episodes.episode_text``."""

PER_STORE_TABLES: dict[str, tuple[str, ...]] = {
    "dbm_stores": ("store_id",),
    "dbm_files": ("store_id", "file_id"),
    "dbm_file_reads": ("store_id", "file_id"),
}
"""The tables whose every row belongs to one store, with their primary keys: ``store_id``
leads each (revision 0007), so a sharded deployment can distribute all three by ``store_id``
(docs/scaling.md). ``dbm_audit_events`` carries a ``store_id`` too, but it may be ``NULL``
(item and organisation events, events of dropped stores), so it is not placed by store."""

SQLITE_ROWID_KEYS: dict[str, str] = {"dbm_files": "file_id"}
"""Tables that keep a one-column ``INTEGER PRIMARY KEY`` on SQLite instead of their key here:
only a rowid alias numbers new rows there, and a SQLite file is never distributed. The rowid
index also serves the lookups by id, so ``ix_dbm_files_file_id`` is not created there. (On
MySQL/MariaDB the migration makes ``file_id`` ``AUTO_INCREMENT``; SQLAlchemy renders neither
for a column of a composite key, and the insert reads the new id from the driver's
``lastrowid`` there.)"""

BACKEND_ONLY_COLUMNS: dict[str, frozenset[tuple[str, str]]] = {
    "postgresql": frozenset({("dbm_episodes", "search_vector")}),
}
"""``(table, column)`` a revision adds on one backend only, outside this metadata (PostgreSQL's
generated ``tsvector`` of the episodes)."""


def audit_report_view_select() -> sa.Select[tuple[object, ...]]:
    """The ``SELECT`` behind :data:`AUDIT_REPORT_VIEW`: one row per audit event."""
    a = audit_events.c
    return sa.select(
        a.event_id,
        a.created_at,
        a.action_name,
        a.actor_name,
        a.org_id,
        a.user_key,
        a.item_id,
        a.store_key,
        a.file_path,
        a.chars_before,
        a.chars_after,
        a.detail_text,
    )


def file_list_view_select() -> sa.Select[tuple[object, ...]]:
    """The ``SELECT`` behind :data:`FILE_LIST_VIEW`: store key, scope, path, size in characters,
    version and timestamps of every file, without the body."""
    return sa.select(
        stores.c.store_id,
        stores.c.store_key,
        stores.c.scope_name,
        files.c.file_id,
        files.c.file_path,
        files.c.char_count,
        files.c.version_no,
        files.c.created_at,
        files.c.updated_at,
        files.c.last_accessed_at,
    ).select_from(stores.join(files, files.c.store_id == stores.c.store_id))
