"""The audit events record the database session's login next to the actor.

Revision ID: 0009
Revises: 0008

``dbm_audit_events.session_user_name`` (at most 400 characters, NULL allowed) is filled by the
database itself, as the column's default, for every row whose ``INSERT`` does not name it: the
rows of the Python API, of the in-database API (its definer routines included), of the episode
trigger and of the scheduled expiry alike. ``actor_name`` stays the text the caller passes; this
column is the session's login, as the database names it:

* PostgreSQL ``session_user`` (the login, also inside a ``SECURITY DEFINER`` function, whose
  ``current_user`` is its owner);
* MySQL/MariaDB ``USER()``, ``user@client-host`` (the login, also inside a ``SQL SECURITY
  DEFINER`` routine or a trigger, whose ``CURRENT_USER()`` is its definer): the user name the
  client sent, the authenticated one unless the account is anonymous (``''@host`` accepts any
  name);
* Oracle ``SYS_CONTEXT('USERENV', 'SESSION_USER')`` (compiled and reviewed, never run here);
* SQLite: none (no logins): the column stays NULL.

Rows written before this revision keep NULL: the column is added without a default and the
default set afterwards, so no backend fills the existing rows with the migrating login. The
downgrade drops the column (and its default with it).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "dbm_audit_events"
COLUMN = "session_user_name"
"""The column this revision adds (tests find the revision by it)."""

DEFAULTS = {
    "postgresql": f"ALTER TABLE {TABLE} ALTER COLUMN {COLUMN} SET DEFAULT session_user",
    "mysql": f"ALTER TABLE {TABLE} ALTER COLUMN {COLUMN} SET DEFAULT (USER())",
    "oracle": f"ALTER TABLE {TABLE} MODIFY ({COLUMN} DEFAULT SYS_CONTEXT('USERENV', 'SESSION_USER'))",
}
"""The statement that makes the database fill the column, by dialect (none on SQLite)."""
DEFAULTS["mariadb"] = DEFAULTS["mysql"]


def upgrade() -> None:
    """Add the column (existing rows NULL), then give it the session's login as default."""
    op.add_column(TABLE, sa.Column(COLUMN, sa.String(400), nullable=True,
                                   comment="the database login of the session that wrote the row"))
    statement = DEFAULTS.get(op.get_context().dialect.name)
    if statement is not None:
        op.execute(statement)


def downgrade() -> None:
    """Drop the column (plain ALTER TABLE ... DROP COLUMN; SQLite 3.35+)."""
    op.drop_column(TABLE, COLUMN)
