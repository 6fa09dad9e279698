"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}

Rules for dbmemory migrations: never import the Table objects of ``dbmemory.db.schema`` (history
must not change when the schema module does); column types and DDL helpers from ``dbmemory.db.dialect.types``
and ``dbmemory.db.dialect.oracle`` are fine. Names: ``dbm_`` prefix, no Oracle reserved word, at most 30 characters. Regenerate the
reference SQL afterwards: ``python -m dbmemory.sqlgen``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

revision: str = ${repr(up_revision)}
down_revision: str | Sequence[str] | None = ${repr(down_revision)}
branch_labels: str | Sequence[str] | None = ${repr(branch_labels)}
depends_on: str | Sequence[str] | None = ${repr(depends_on)}


def upgrade() -> None:
    """Upgrade the schema."""
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    """Downgrade the schema."""
    ${downgrades if downgrades else "pass"}
