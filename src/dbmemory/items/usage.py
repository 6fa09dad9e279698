"""Usage of memory items: ``last_used_at`` (the least-recently-used order of the auto-item
limit, :func:`dbmemory.items.enforce_auto_item_limit`) and **retention that keeps what is used**.

The rule: a live item's ``expires_at`` is its last change (create, edit, restore) **or its last
use**, whichever is later, plus its retention class's days (the organisation's
``retention_<class>_days``; ``permanent`` never expires). A use is an injection into a turn or
a search that returns the item: :func:`mark_items_used` moves ``last_used_at`` to the time of
the use and ``expires_at`` to that time plus the class's days when that is later (never
earlier). An item already expired (``expires_at`` at or before the use) stays expired: a use
cannot bring it back (only :func:`~dbmemory.items.restore_item` does)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.db.schema import items as _it
from dbmemory.errors import DbMemoryError, InvalidArgumentError
from dbmemory.items.model import RETENTION_CLASSES, user_key_of
from dbmemory.items.settings import OrgSettings, get_org_settings
from dbmemory.store.units import write_unit

__all__ = ["extended_expiry", "mark_items_used"]

log = logging.getLogger(__name__)


def mark_items_used(
    engine_or_conn: Engine | Connection,
    item_ids: Iterable[int],
    *,
    now: dt.datetime | None = None,
    settings: OrgSettings | None = None,
    user_id: str | None = None,
) -> int:
    """Record that items were used (injected into a conversation or returned by a search):
    ``last_used_at`` becomes ``now`` and a live item's ``expires_at`` becomes ``now`` + its
    class's days when that is later (the module's rule). Not a change: no version, no audit
    event.

    With an **Engine** (what a turn passes) the update runs in a short transaction of its own,
    committed here, never in the turn's transaction, so it holds no lock there; a failure is
    logged and counted as 0 (the turn goes on). With a **Connection** it joins that
    connection's transaction (the caller decides; a failure raises). On SQLite, whose writers
    take the database's one write lock, call it after the turn's own write transaction ended
    (else it waits for the busy timeout, then logs and returns 0).

    Args:
        item_ids: the items used (ids of other users' or deleted items change nothing that
            matters: a deleted or expired item keeps its ``expires_at``).
        now: the time of the use (UTC; default: the core clock).
        settings: the items' organisation settings when the caller has them (a turn does);
            else they are read (one ``SELECT`` per organisation of the items).
        user_id: the user whose items these are, when the caller knows it (a turn does): the
            update then names the user too (``user_key``), so it stays on the user's shard
            when the items are distributed (docs/scaling.md); items of another user are not
            touched. None: by id alone.

    Returns:
        The number of rows whose ``last_used_at`` was set.
    """
    check_arguments(engine_or_conn=engine_or_conn)
    ids = _v.check_each(list(item_ids), "item_ids", _v.check_id)
    now = _v.check_now(now) or utcnow()
    if settings is not None and not isinstance(settings, OrgSettings):
        raise InvalidArgumentError(f"settings must be an OrgSettings, got {type(settings).__name__}")
    if not ids:
        return 0
    mine = sa.true() if user_id is None else _it.c.user_key == user_key_of(user_id)

    def run(conn: Connection) -> int:
        total = 0
        for chunk in (ids[i : i + 1000] for i in range(0, len(ids), 1000)):
            if settings is not None:
                orgs = {settings.org_id: settings}
            else:
                found = conn.execute(
                    sa.select(_it.c.org_id).where(mine, _it.c.item_id.in_(chunk)).distinct()
                ).scalars()
                orgs = {org: get_org_settings(conn, org) for org in found}
            for org, org_settings in orgs.items():
                total += conn.execute(
                    sa.update(_it)
                    .where(_it.c.org_id == org, mine, _it.c.item_id.in_(chunk))
                    .values(last_used_at=now, expires_at=extended_expiry(org_settings, now))
                ).rowcount
        return total

    if isinstance(engine_or_conn, Connection):
        with write_unit(engine_or_conn, "marking memory items used"):
            return run(engine_or_conn)
    try:
        with engine_or_conn.begin() as conn:
            return run(conn)
    except (sa.exc.SQLAlchemyError, DbMemoryError) as exc:
        log.warning("marking %d memory items used failed: %s", len(ids), exc)
        return 0


def extended_expiry(settings: OrgSettings, used_at: dt.datetime) -> sa.ColumnElement[dt.datetime]:
    """The ``expires_at`` of an item used at ``used_at``, as SQL over the row: unchanged when
    deleted, permanent (NULL) or already expired; else the later of the current value and
    ``used_at`` + the class's days."""
    live = sa.and_(_it.c.deleted_at.is_(None), _it.c.expires_at.is_not(None), _it.c.expires_at > used_at)
    whens = []
    for cls in RETENTION_CLASSES:
        days = settings.retention_days(cls)
        if days is None:
            continue
        until = sa.literal(used_at + dt.timedelta(days=days), type_=_it.c.expires_at.type)
        whens.append((sa.and_(live, _it.c.retention_class == cls, _it.c.expires_at < until), until))
    return sa.case(*whens, else_=_it.c.expires_at)

