"""Column types pinned per backend: the file body (CLOB on Oracle, LONGTEXT on MySQL/MariaDB),
paths, UTC timestamps, surrogate keys, and the indexed path key of the prefix check."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, oracle, postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles

__all__ = [
    "UtcDateTime",
    "BodyText",
    "SearchText",
    "PathText",
    "big_id",
    "PATH_KEY_CHARS",
    "PathKey",
    "path_prefix_index_ddl",
]


class UtcDateTime(sa.types.TypeDecorator[dt.datetime]):
    """A timestamp that is always UTC, whatever the server or session time zone.

    Stored as ``TIMESTAMP WITH TIME ZONE`` on PostgreSQL, ``TIMESTAMP(6)`` on Oracle (never
    ``DATE``, which loses fractions), ``DATETIME(6)`` on MySQL/MariaDB (naive UTC: MySQL drops
    zones) and ISO text on SQLite (naive UTC). Binds accept aware datetimes (converted to UTC)
    or naive ones (taken as UTC); results are always aware UTC datetimes.
    """

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.TIMESTAMP(timezone=True))
        if dialect.name == "oracle":
            return dialect.type_descriptor(oracle.TIMESTAMP())
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        if dialect.name == "postgresql":
            return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return value.replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # SQLite text in a raw view or a hand-written row
            value = dt.datetime.fromisoformat(value)
        stamp: dt.datetime = value
        if stamp.tzinfo is None:
            return stamp.replace(tzinfo=dt.timezone.utc)
        return stamp.astimezone(dt.timezone.utc)


BodyText: sa.types.TypeEngine[str] = (
    sa.UnicodeText()
    .with_variant(oracle.CLOB(), "oracle")
    .with_variant(mysql.LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb")
)
"""A file body: ``CLOB`` on Oracle, ``LONGTEXT`` on MySQL/MariaDB (``TEXT`` stops at 64 KiB),
``TEXT`` on PostgreSQL and SQLite. Never compared, sorted, grouped or DISTINCTed."""


SearchText: sa.types.TypeEngine[str] = (
    sa.UnicodeText()
    .with_variant(oracle.CLOB(), "oracle")
    .with_variant(
        mysql.LONGTEXT(charset="utf8mb4", collation="utf8mb4_unicode_ci"), "mysql", "mariadb"
    )
)
"""Text under a full-text index (an episode): as :data:`BodyText`, but on MySQL/MariaDB with a
case-insensitive collation, since InnoDB ``MATCH ... AGAINST`` follows the column's collation
(a binary one would make the search case-sensitive)."""


PathText: sa.types.TypeEngine[str] = sa.String(1000).with_variant(
    mysql.VARCHAR(1000, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
)
"""A memory path, at most 1,000 characters. On MySQL/MariaDB the binary collation makes
comparisons case- and accent-sensitive like the other backends. Equality lookups and the unique
key use the ``path_hash`` column instead, so no backend needs an index on 1,000 characters
(InnoDB's 3,072-byte key limit, PostgreSQL's ~2,700-byte B-tree row limit)."""


big_id: sa.types.TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""Surrogate-key type: ``BIGINT`` everywhere but SQLite, where only ``INTEGER PRIMARY KEY``
autoincrements."""


PATH_KEY_CHARS = 600
"""Characters of ``file_path`` in the prefix index ``ix_dbm_files_prefix`` (revision 0004):
600 characters of UTF-8 (2,400 bytes at most) stay under PostgreSQL's B-tree row limit
(~2,700 bytes) and InnoDB's 3,072-byte key limit. A directory prefix longer than this is
checked by the scan form (:data:`dbmemory.store.statements.writes.INSERT_FILE_IF_FREE_SCAN`)."""


class PathKey(sa.sql.expression.ColumnElement[str]):
    """The indexed key of a ``file_path`` column, compared in binary (code point) order:
    ``substr(path, 1, 600)`` on SQLite (an expression index), ``substr(path, 1, 600) COLLATE
    "C"`` on PostgreSQL (an expression index in the ``C`` collation, whatever the database's
    collation), the column itself on MySQL/MariaDB (a prefix index of 600 characters,
    ``utf8mb4_bin``) and Oracle (an index on the column; comparisons are binary under the
    default ``NLS_COMP``). The 600 is rendered as a literal so the expression matches the
    index's."""

    inherit_cache = True
    type = sa.String()
    _traverse_internals = [("column", sa.sql.visitors.InternalTraversal.dp_clauseelement)]
    """Part of the statement cache key: without it SQLAlchemy compiles the statement anew on
    every execute (measured: ~25 ms per create on SQLite under load)."""

    def __init__(self, column: Any) -> None:
        self.column = column


@compiles(PathKey)
def _path_key_default(element: PathKey, compiler: Any, **kw: Any) -> str:
    return f"substr({compiler.process(element.column, **kw)}, 1, {PATH_KEY_CHARS})"


@compiles(PathKey, "postgresql")
def _path_key_postgresql(element: PathKey, compiler: Any, **kw: Any) -> str:
    return f'(substr({compiler.process(element.column, **kw)}, 1, {PATH_KEY_CHARS}) COLLATE "C")'


@compiles(PathKey, "mysql")
@compiles(PathKey, "mariadb")
@compiles(PathKey, "oracle")
def _path_key_column(element: PathKey, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.column, **kw))


def path_prefix_index_ddl(name: str) -> str:
    """``CREATE INDEX ix_dbm_files_prefix`` for dialect ``name``: ``(store_id, <PathKey>)``,
    so "is anything under this directory?" is an index range probe, not a scan of the store."""
    n = PATH_KEY_CHARS
    if name == "postgresql":
        return (
            "CREATE INDEX ix_dbm_files_prefix ON dbm_files "
            f'(store_id, (substr(file_path, 1, {n})) COLLATE "C")'
        )
    if name in ("mysql", "mariadb"):
        return f"CREATE INDEX ix_dbm_files_prefix ON dbm_files (store_id, file_path({n}))"
    if name == "oracle":
        return "CREATE INDEX ix_dbm_files_prefix ON dbm_files (store_id, file_path)"
    return f"CREATE INDEX ix_dbm_files_prefix ON dbm_files (store_id, substr(file_path, 1, {n}))"


