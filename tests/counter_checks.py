"""Store counters against the aggregates they stand for (shared by the counter and race tests)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.db.schema import files, stores


def mismatches(engine: Engine) -> list[tuple[Any, ...]]:
    """Stores whose counters differ from ``COUNT(*)`` / ``SUM(char_count)`` of their files."""
    n = sa.select(sa.func.count()).where(files.c.store_id == stores.c.store_id).scalar_subquery()
    c = (
        sa.select(sa.func.coalesce(sa.func.sum(files.c.char_count), 0))
        .where(files.c.store_id == stores.c.store_id)
        .scalar_subquery()
    )
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(stores.c.store_key, stores.c.file_count, n, stores.c.total_chars, c)
        ).all()
    return [tuple(r) for r in rows if (r[1], r[3]) != (r[2], r[4])]
