"""PostgreSQL's full-text index of the episodes narrowed to the user: ``(org_id, user_key,
search_vector)`` in one GIN index.

Revision ID: 0010
Revises: 0009

Every episode search names the organisation and the user (:mod:`dbmemory.items.episode_search`).
Revision 0006's GIN index ``ix_dbm_episodes_search`` holds the lexemes only, so PostgreSQL either
read every user's matching rows from it and dropped the others' after the bitmap, or scanned the
table evaluating ``@@`` on each row. This revision replaces it, on PostgreSQL only, with the GIN
index ``ix_dbm_episodes_user_search`` on ``(org_id, user_key, search_vector)``: the index scan
itself yields only the user's matching rows. The ``btree_gin`` extension (shipped with
PostgreSQL, trusted from PostgreSQL 13) gives GIN its ``varchar`` operator classes.

* ``btree_gin`` already installed, or installable by the migrating role (``CREATE EXTENSION``
  needs the ``CREATE`` privilege on the database, or superuser before PostgreSQL 13): the
  extension is created (in a savepoint), the new index is built and 0006's is dropped (a
  multi-column GIN index serves a condition on any of its columns, so nothing loses its index).
* Otherwise the revision keeps 0006's index, warns (``UserWarning``) and still completes: the
  search returns the same hits, only as slowly as before. A DBA can run
  ``CREATE EXTENSION btree_gin;`` and then the two statements of :data:`POSTGRESQL_DDL` later.
* The offline script (``dbmemory migrate --sql``) always creates the extension and the index.
* SQLite, MySQL/MariaDB and Oracle: nothing changes (their search statements already read
  only the user's rows of the table; see docs/search.md, "Speed").

The downgrade restores 0006's index and drops the new one (the extension is left installed:
other objects may use it). ``CREATE INDEX`` blocks writes to ``dbm_episodes`` while it runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_dbm_episodes_user_search"
"""PostgreSQL's GIN index on ``(org_id, user_key, search_vector)``."""

EXTENSION_DDL = "CREATE EXTENSION IF NOT EXISTS btree_gin"

POSTGRESQL_DDL = (
    f"CREATE INDEX IF NOT EXISTS {INDEX} ON dbm_episodes USING gin (org_id, user_key, search_vector) "
    "WITH (fastupdate = off)",
    "DROP INDEX IF EXISTS ix_dbm_episodes_search",
)
"""The new index, then 0006's (lexemes only) dropped. ``fastupdate = off``: each episode's
``INSERT`` enters its lexemes into the index itself instead of GIN's pending list, which every
search would read in full until (auto)vacuum merges it, and whose size makes the planner
prefer a scan of the table (one row per turn is written; every turn searches)."""

POSTGRESQL_DOWNGRADE_DDL = (
    "CREATE INDEX IF NOT EXISTS ix_dbm_episodes_search ON dbm_episodes USING gin (search_vector)",
    f"DROP INDEX IF EXISTS {INDEX}",
)

NO_EXTENSION_NOTE = (
    "PostgreSQL's btree_gin extension is not installed and this role may not create it: the "
    "episode search keeps the full-text index of revision 0006 (same hits, slower for a user "
    "with many episodes). To narrow it to the user later, run as a role with CREATE on the "
    "database: CREATE EXTENSION btree_gin; " + "; ".join(POSTGRESQL_DDL)
)
"""The warning of an upgrade that could not create ``btree_gin``."""


def _btree_gin(bind: sa.Connection) -> bool:
    """Whether ``btree_gin`` is installed after trying to create it (in a savepoint, so a
    refusal leaves the caller's transaction usable)."""
    found = "SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'"
    if bind.exec_driver_sql(found).first() is not None:
        return True
    savepoint = bind.begin_nested()
    try:
        bind.exec_driver_sql(EXTENSION_DDL)
    except sa.exc.DBAPIError:
        savepoint.rollback()
        return False
    savepoint.commit()
    return True


def upgrade() -> None:
    """On PostgreSQL, replace 0006's GIN index with the one on ``(org_id, user_key,
    search_vector)`` (see the module doc for when ``btree_gin`` is missing)."""
    context = op.get_context()
    if context.dialect.name != "postgresql":
        return
    if context.as_sql:
        op.execute(EXTENSION_DDL)
    elif not _btree_gin(op.get_bind()):
        warnings.warn(NO_EXTENSION_NOTE, UserWarning, stacklevel=2)
        return
    for statement in POSTGRESQL_DDL:
        op.execute(statement)


def downgrade() -> None:
    """On PostgreSQL, restore 0006's GIN index and drop the narrowed one."""
    if op.get_context().dialect.name == "postgresql":
        for statement in POSTGRESQL_DOWNGRADE_DDL:
            op.execute(statement)
