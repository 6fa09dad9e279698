"""Conversation episodes and their full-text index in each database's own engine.

Revision ID: 0006
Revises: 0005

* ``dbm_episodes``: one row per turn of a user (:mod:`dbmemory.items.episodes`): organisation,
  encoded user id, chat, turn time, the text (the user's message, a newline, the assistant's
  answer, after the secret/PII detectors), the length of the user's part, size, retention class,
  creation and expiry times; indexes on ``(org_id, user_key, turn_at)`` and ``expires_at``.
* The full-text index, one per backend:

  - SQLite: the FTS5 table ``dbm_episodes_fts`` (``tokenize='porter unicode61'``) with
    external content ``dbm_episodes``, kept by three triggers in the writer's own statement
    (so in its transaction);
  - PostgreSQL: the generated column ``search_vector tsvector`` (``to_tsvector(<config>,
    episode_text)``, config ``english`` unless ``DBMEMORY_SEARCH_PG_CONFIG`` names another when
    the revision runs) and the GIN index ``ix_dbm_episodes_search``;
  - MySQL/MariaDB: the InnoDB ``FULLTEXT`` index ``ix_dbm_episodes_search`` (the column has a
    case-insensitive collation);
  - Oracle: the Oracle Text ``CONTEXT`` index ``ix_dbm_episodes_search``, synchronised on
    commit (compiled and reviewed, never run here).

Written out column by column (never from ``dbmemory.db.schema``), as 0001 to 0005 are; online on
Oracle each object is created only when missing, so a run that failed half-way can be run again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, oracle

from dbmemory.db.dialect.oracle import drop_table, oracle_object_exists
from dbmemory.db.dialect.types import UtcDateTime, big_id

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
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

_TEXT = (
    sa.UnicodeText()
    .with_variant(oracle.CLOB(), "oracle")
    .with_variant(
        mysql.LONGTEXT(charset="utf8mb4", collation="utf8mb4_unicode_ci"), "mysql", "mariadb"
    )
)

PG_CONFIG_VARIABLE = "DBMEMORY_SEARCH_PG_CONFIG"
"""Environment variable naming PostgreSQL's text search configuration (default ``english``)."""

_CONFIG_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

SQLITE_DDL = (
    "CREATE VIRTUAL TABLE dbm_episodes_fts USING fts5(episode_text, content='dbm_episodes', "
    "content_rowid='episode_id', tokenize='porter unicode61')",
    "CREATE TRIGGER dbm_episodes_fts_ai AFTER INSERT ON dbm_episodes BEGIN "
    "INSERT INTO dbm_episodes_fts(rowid, episode_text) VALUES (new.episode_id, new.episode_text); "
    "END",
    "CREATE TRIGGER dbm_episodes_fts_ad AFTER DELETE ON dbm_episodes BEGIN "
    "INSERT INTO dbm_episodes_fts(dbm_episodes_fts, rowid, episode_text) "
    "VALUES ('delete', old.episode_id, old.episode_text); END",
    "CREATE TRIGGER dbm_episodes_fts_au AFTER UPDATE OF episode_text ON dbm_episodes BEGIN "
    "INSERT INTO dbm_episodes_fts(dbm_episodes_fts, rowid, episode_text) "
    "VALUES ('delete', old.episode_id, old.episode_text); "
    "INSERT INTO dbm_episodes_fts(rowid, episode_text) VALUES (new.episode_id, new.episode_text); "
    "END",
)
"""SQLite's FTS5 table and the triggers that keep it equal to ``dbm_episodes``."""

MYSQL_DDL = ("CREATE FULLTEXT INDEX ix_dbm_episodes_search ON dbm_episodes (episode_text)",)

ORACLE_DDL = (
    "CREATE INDEX ix_dbm_episodes_search ON dbm_episodes (episode_text) "
    "INDEXTYPE IS CTXSYS.CONTEXT PARAMETERS ('SYNC (ON COMMIT)')",
)


def pg_config() -> str:
    """PostgreSQL's text search configuration for the generated column (``english`` unless
    :data:`PG_CONFIG_VARIABLE` names another; a name that is not a plain lower-case identifier
    is refused)."""
    name = os.environ.get(PG_CONFIG_VARIABLE, "").strip() or "english"
    if _CONFIG_NAME.fullmatch(name) is None:
        raise ValueError(
            f"{PG_CONFIG_VARIABLE}={name!r} is not a text search configuration name such as "
            "'english' or 'simple'"
        )
    return name


def postgresql_ddl(config: str) -> tuple[str, ...]:
    """The generated ``tsvector`` column and its GIN index."""
    return (
        "ALTER TABLE dbm_episodes ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
        f"(to_tsvector('{config}'::regconfig, coalesce(episode_text, ''))) STORED",
        "CREATE INDEX ix_dbm_episodes_search ON dbm_episodes USING gin (search_vector)",
    )


def _missing(kind: str, name: str) -> bool:
    """Whether ``name`` still has to be created (always True offline and off Oracle)."""
    bind = None if op.get_context().as_sql else op.get_bind()
    return not oracle_object_exists(bind, kind, name)


def upgrade() -> None:
    """Create ``dbm_episodes``, its indexes and the backend's full-text index."""
    if _missing("table", "dbm_episodes"):
        op.create_table(
            "dbm_episodes",
            sa.Column("episode_id", big_id, sa.Identity(), nullable=False),
            sa.Column("org_id", sa.String(200), nullable=False),
            sa.Column("user_key", sa.String(200), nullable=False, comment="encoded user id"),
            sa.Column(
                "chat_id", sa.String(200), nullable=True, comment="the session the turn was in"
            ),
            sa.Column("turn_at", UtcDateTime(), nullable=False, comment="time of the turn"),
            sa.Column(
                "episode_text",
                _TEXT,
                nullable=True,
                comment="user text, a newline, assistant text (detectors applied); NULL means empty",
            ),
            sa.Column(
                "user_chars", sa.Integer(), nullable=False, comment="characters of the user's text"
            ),
            sa.Column("char_count", sa.Integer(), nullable=False, comment="length of episode_text"),
            sa.Column("retention_class", sa.String(20), nullable=False),
            sa.Column("created_at", UtcDateTime(), nullable=False),
            sa.Column("expires_at", UtcDateTime(), nullable=True, comment="NULL: never"),
            sa.PrimaryKeyConstraint("episode_id", name="pk_dbm_episodes"),
            **_MYSQL,
        )
    for name, columns in (
        ("ix_dbm_episodes_user", ["org_id", "user_key", "turn_at"]),
        ("ix_dbm_episodes_expires", ["expires_at"]),
    ):
        if _missing("index", name):
            op.create_index(name, "dbm_episodes", columns)
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        statements: tuple[str, ...] = SQLITE_DDL
    elif dialect == "postgresql":
        statements = postgresql_ddl(pg_config())
    elif dialect in ("mysql", "mariadb"):
        statements = MYSQL_DDL
    elif dialect == "oracle":
        statements = ORACLE_DDL if _missing("index", "ix_dbm_episodes_search") else ()
    else:  # pragma: no cover - dbmemory runs on the four backends only
        statements = ()
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    """Drop the full-text index and ``dbm_episodes``."""
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TABLE dbm_episodes_fts")  # its triggers go with dbm_episodes
    elif dialect != "postgresql":  # PostgreSQL's column and index go with the table
        op.drop_index("ix_dbm_episodes_search", table_name="dbm_episodes")
    op.drop_index("ix_dbm_episodes_expires", table_name="dbm_episodes")
    op.drop_index("ix_dbm_episodes_user", table_name="dbm_episodes")
    drop_table(op, "dbm_episodes")
