"""Store guarantees: caps kept with the store, durable read touches, the expiry lock, and store
keys that no two owners can share.

Revision ID: 0002
Revises: 0001

* ``dbm_stores`` gains ``max_file_chars``, ``max_files`` and ``max_store_chars``: a store's caps
  live on its row, so every writer (any agent, ``use_store``, the CLI, the admin API, the
  in-database procedures) enforces the same caps. Existing stores get the caps of the agent
  whose namespace holds them (agent, user, session and agent-keyed context stores) or the
  strictest caps among the enabled agents configured for them (shared and store-code context
  stores), else the defaults.
* ``dbm_file_reads``: one row per file with the time of its last recorded read. A read's touch
  is written here, never to the file row, so it takes no lock a writer holds and never makes a
  REPEATABLE READ writer's later edit of the file a serialisation failure. No foreign key (a
  foreign key check would wait for a writer's lock on the file row); rows of deleted files are
  purged by the expiry.
* ``dbm_job_locks``: one row per job (``expiry``). An expiry batch holds its row exclusively
  until it commits; a read's touch holds it shared, so a file read while an expiry batch runs is
  either touched before the batch looks at it or found gone after the batch commits.
* Store keys: the user profile moves from ``context:user-memory:user_id:<id>`` to the reserved
  namespace ``reserved:profile:user-memory:<id>`` (scope ``reserved``), which no agent
  configuration can name. Profiles under another root folder ``<R>`` (``UserMemoryConfig.
  root_folder``) move from ``context:<R>:user_id:<id>`` to ``reserved:profile:<R>:<id>``: they
  are the stores with no agent, store code ``<R>`` and an expiry-exempt ``/memories/memory.md``
  (only the profile module writes expiry-exempt files). Context stores under a store code move from
  ``context:<CODE>:<KEY>:<VALUE>`` to ``context:store:<CODE>:<KEY>:<VALUE>``, so they can never
  share a key with the context stores of an agent whose code equals that store code.

Written out column by column (never from ``dbmemory.db.schema``), as 0001 is. All DDL comes
before the data changes: Oracle commits each DDL statement, and online on Oracle each column
and table is created only when missing, so a run that failed half-way can be run again (the
data changes after the last DDL roll back on a failure, with the version stamp).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from dbmemory.db.dialect.oracle import Flag, drop_table, oracle_object_exists
from dbmemory.db.dialect.types import UtcDateTime, big_id

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
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

PROFILE_OLD_PREFIX = "context:user-memory:user_id:"
PROFILE_NEW_PREFIX = "reserved:profile:user-memory:"
PROFILE_ROOT = "user-memory"
PROFILE_PATH = "/memories/memory.md"
RESERVED_PROFILE = "reserved:profile:"

_stores = sa.table(
    "dbm_stores",
    sa.column("store_id", sa.BigInteger()),
    sa.column("store_key", sa.String(700)),
    sa.column("scope_name", sa.String(10)),
    sa.column("agent_code", sa.String(200)),
    sa.column("store_code", sa.String(200)),
    sa.column("max_file_chars", sa.Integer()),
    sa.column("max_files", sa.Integer()),
    sa.column("max_store_chars", sa.BigInteger()),
)
_agents = sa.table(
    "dbm_agents",
    sa.column("agent_code", sa.String(200)),
    sa.column("scope_name", sa.String(10)),
    sa.column("store_code", sa.String(200)),
    sa.column("max_file_chars", sa.Integer()),
    sa.column("max_files", sa.Integer()),
    sa.column("max_store_chars", sa.BigInteger()),
    sa.column("memory_enabled", Flag()),
)
_files = sa.table(
    "dbm_files",
    sa.column("store_id", sa.BigInteger()),
    sa.column("file_path", sa.String(1000)),
    sa.column("expiry_exempt", sa.Boolean(create_constraint=False)),
)
_job_locks = sa.table(
    "dbm_job_locks",
    sa.column("lock_name", sa.String(30)),
    sa.column("updated_at", UtcDateTime()),
)


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


def _starts_with(column: sa.ColumnElement[str], prefix: str) -> sa.ColumnElement[bool]:
    """Exact prefix test (no LIKE: ``_`` would be a wildcard)."""
    return sa.func.substr(column, 1, len(prefix)) == prefix


def _rest(column: sa.ColumnElement[str], prefix_len: int) -> sa.ColumnElement[str]:
    return sa.func.substr(column, prefix_len + 1)


def _concat(*parts: sa.ColumnElement[str] | str) -> sa.ColumnElement[str]:
    """String concatenation: ``+`` on String expressions renders ``||`` (PostgreSQL, Oracle,
    SQLite) or ``concat()`` (MySQL/MariaDB)."""
    expr: sa.ColumnElement[str] = (
        sa.literal(parts[0], sa.String()) if isinstance(parts[0], str) else parts[0]
    )
    for part in parts[1:]:
        expr = expr + (sa.literal(part, sa.String()) if isinstance(part, str) else part)
    return expr


def upgrade() -> None:
    """Add the store caps, the read and job-lock tables, and move keys to their namespaces."""
    _add_column(
        "dbm_stores",
        sa.Column(
            "max_file_chars",
            sa.Integer(),
            nullable=False,
            server_default=sa.text("100000"),
            comment="cap: characters per file",
        ),
    )
    _add_column(
        "dbm_stores",
        sa.Column(
            "max_files",
            sa.Integer(),
            nullable=False,
            server_default=sa.text("1000"),
            comment="cap: files in the store",
        ),
    )
    _add_column(
        "dbm_stores",
        sa.Column(
            "max_store_chars",
            sa.BigInteger(),
            nullable=True,
            comment="cap: characters in the store; NULL means no cap",
        ),
    )

    _create_table(
        "dbm_file_reads",
        sa.Column(
            "file_id",
            big_id,
            nullable=False,
            autoincrement=False,
            comment="no foreign key: see revision 0002",
        ),
        sa.Column("read_at", UtcDateTime(), nullable=False, comment="last recorded read"),
        sa.PrimaryKeyConstraint("file_id", name="pk_dbm_file_reads"),
        **_MYSQL,
    )
    _create_table(
        "dbm_job_locks",
        sa.Column("lock_name", sa.String(30), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("lock_name", name="pk_dbm_job_locks"),
        **_MYSQL,
    )
    op.bulk_insert(_job_locks, [{"lock_name": "expiry", "updated_at": None}])

    # Caps of existing stores: the owning agent's, else the strictest configured, else defaults.
    owner = _agents.alias("owner")
    for cap in ("max_file_chars", "max_files", "max_store_chars"):
        op.execute(
            sa.update(_stores)
            .where(
                _stores.c.agent_code.is_not(None),
                sa.exists().where(owner.c.agent_code == _stores.c.agent_code),
            )
            .values(
                {
                    cap: sa.select(owner.c[cap])
                    .where(owner.c.agent_code == _stores.c.agent_code)
                    .scalar_subquery()
                }
            )
        )
    configured = _agents.alias("configured")
    for cap in ("max_file_chars", "max_files", "max_store_chars"):
        match = sa.and_(
            configured.c.store_code == _stores.c.store_code,
            configured.c.scope_name == _stores.c.scope_name,
            configured.c.memory_enabled == sa.true(),
            configured.c[cap].is_not(None),
        )
        op.execute(
            sa.update(_stores)
            .where(
                _stores.c.agent_code.is_(None),
                _stores.c.store_code.is_not(None),
                sa.exists().where(match),
            )
            .values({cap: sa.select(sa.func.min(configured.c[cap])).where(match).scalar_subquery()})
        )

    # Profiles into the reserved namespace, then store-code context stores under "store:".
    op.execute(
        sa.update(_stores)
        .where(_starts_with(_stores.c.store_key, PROFILE_OLD_PREFIX))
        .values(
            store_key=_concat(PROFILE_NEW_PREFIX, _rest(_stores.c.store_key, len(PROFILE_OLD_PREFIX))),
            scope_name="reserved",
            agent_code=None,
            store_code=PROFILE_ROOT,
        )
    )
    # Profiles under another root folder R: context:R:user_id:<id>, no agent, store code R, and
    # an expiry-exempt memory.md (len("context:") + len(":user_id:") == 17).
    code_len = sa.func.length(_stores.c.store_code)
    op.execute(
        sa.update(_stores)
        .where(
            _stores.c.scope_name == "context",
            _stores.c.agent_code.is_(None),
            _stores.c.store_code.is_not(None),
            sa.func.substr(_stores.c.store_key, 1, code_len + 17)
            == _concat("context:", _stores.c.store_code, ":user_id:"),
            sa.exists().where(
                _files.c.store_id == _stores.c.store_id,
                _files.c.file_path == PROFILE_PATH,
                _files.c.expiry_exempt == sa.true(),
            ),
        )
        .values(
            store_key=_concat(
                RESERVED_PROFILE,
                _stores.c.store_code,
                ":",
                sa.func.substr(_stores.c.store_key, code_len + 18),
            ),
            scope_name="reserved",
        )
    )
    op.execute(
        sa.update(_stores)
        .where(
            _stores.c.scope_name == "context",
            _stores.c.store_code.is_not(None),
            _stores.c.agent_code.is_(None),
            sa.func.substr(_stores.c.store_key, 1, sa.func.length(_stores.c.store_code) + 9)
            == _concat("context:", _stores.c.store_code, ":"),
        )
        .values(store_key=_concat("context:store:", _rest(_stores.c.store_key, len("context:"))))
    )


def downgrade() -> None:
    """Move keys back, drop the read and job-lock tables and the store caps."""
    op.execute(
        sa.update(_stores)
        .where(
            _stores.c.scope_name == "context",
            _starts_with(_stores.c.store_key, "context:store:"),
        )
        .values(store_key=_concat("context:", _rest(_stores.c.store_key, len("context:store:"))))
    )
    # reserved:profile:<R>:<id> -> context:<R>:user_id:<id> (every profile row has store code R)
    op.execute(
        sa.update(_stores)
        .where(
            _stores.c.scope_name == "reserved",
            _stores.c.store_code.is_not(None),
            _starts_with(_stores.c.store_key, RESERVED_PROFILE),
        )
        .values(
            store_key=_concat(
                "context:",
                _stores.c.store_code,
                ":user_id:",
                sa.func.substr(
                    _stores.c.store_key,
                    sa.func.length(_stores.c.store_code) + len(RESERVED_PROFILE) + 2,
                ),
            ),
            scope_name="context",
        )
    )
    drop_table(op, "dbm_job_locks")
    drop_table(op, "dbm_file_reads")
    # plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+ has it; a batch copy of the table would
    # break the report view that names dbm_stores)
    for column in ("max_store_chars", "max_files", "max_file_chars"):
        op.drop_column("dbm_stores", column)
