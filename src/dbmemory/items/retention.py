"""Retention of memory items: expiry by class and the grace-period purge.

Run by the same job as the files' expiry: ``dbmemory expire`` (after the files), the
``dbm_expire_files`` procedures / events of ``sql/<dialect>/expiry_job.sql`` (rendered by
:mod:`dbmemory.sqlgen`) and, from Python, :func:`expire_items` / :func:`run_item_retention`.

The rules (the SQL jobs repeat them; a test runs both):

1. **Expiry**: a live item whose ``expires_at`` is at or before now is soft-deleted
   (``deleted_at`` = now, one ``item_expire`` audit event each). It stays restorable during the
   grace period like any deleted item.

   **Folded first** (:func:`held_rule`): an *auto* item that the profile consolidation has not
   folded yet (changed after its user's ``summary`` mark in ``dbm_item_marks``, or no mark:
   :mod:`dbmemory.items.summary`) is not expired; it waits, out of the injected memory, for its
   owner's next turn, whose fold takes it (it is due), and the next run expires it. The wait
   ends after the organisation's ``grace_days`` past its ``expires_at`` (a user without a turn
   for that long, or whose memory switch is off: the item then expires unfolded), so nothing
   is kept longer than its class's retention plus the grace period.
2. **Purge**: a soft-deleted item whose ``deleted_at`` is at or before now minus its
   organisation's ``grace_days`` (default 30) is deleted for good (one ``item_purge`` audit
   event each, sizes only).

Both select candidates ``FOR UPDATE SKIP LOCKED`` in batches of at most 1,000 (Oracle's IN-list
limit) and change them **with the rule again**, so an item edited or restored meanwhile stays.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.expiry import batch_isolation, lock_expiry_candidates
from dbmemory.db.schema import item_marks as _mk
from dbmemory.db.schema import items as _it
from dbmemory.db.schema import org_settings as _os
from dbmemory.items import audit
from dbmemory.items.model import check_org
from dbmemory.items.settings import DEFAULTS
from dbmemory.store.units import resolved_transaction, write_unit

__all__ = [
    "BATCH",
    "SUMMARY_MARK",
    "expire_rule",
    "held_rule",
    "purge_rule",
    "expire_items",
    "purge_deleted",
    "run_item_retention",
    "run_item_retention_committing",
]

BATCH = 1000
"""Items per batch (Oracle's IN-list limit)."""

SUMMARY_MARK = "summary"
"""``dbm_item_marks.mark_key`` of a user's last profile summary fold (:mod:`dbmemory.items.summary`)."""

_SELECT_COLUMNS = (_it.c.item_id, _it.c.org_id, _it.c.user_key, _it.c.char_count)


def _org_days_rule(column: Any, now: dt.datetime, groups: dict[int, list[str]]) -> sa.ColumnElement[bool]:
    """SQL: ``column`` is after ``now`` minus the item's organisation's ``grace_days``
    (``groups``: organisations with their own value, by value; the others take the default)."""
    default = int(DEFAULTS["grace_days"])
    own = sa.exists().where(_os.c.org_id == _it.c.org_id, _os.c.setting_name == "grace_days")
    branches = [sa.and_(~own, column > now - dt.timedelta(days=default))]
    for days, orgs in groups.items():
        for i in range(0, len(orgs), BATCH):
            branches.append(
                sa.and_(_it.c.org_id.in_(orgs[i : i + BATCH]), column > now - dt.timedelta(days=days))
            )
    return sa.or_(*branches)


def held_rule(now: dt.datetime, groups: dict[int, list[str]]) -> sa.ColumnElement[bool]:
    """SQL: an auto item not folded into its user's profile yet (``updated_at`` after the user's
    ``summary`` mark, or no mark), whose ``expires_at`` is less than its organisation's
    ``grace_days`` before ``now``: the expiry waits for the fold (module doc)."""
    folded = sa.exists().where(
        _mk.c.org_id == _it.c.org_id,
        _mk.c.user_key == _it.c.user_key,
        _mk.c.mark_key == SUMMARY_MARK,
        _mk.c.marked_at >= _it.c.updated_at,
    )
    return sa.and_(_it.c.item_kind == "auto", ~folded, _org_days_rule(_it.c.expires_at, now, groups))


def expire_rule(now: dt.datetime, groups: dict[int, list[str]]) -> sa.ColumnElement[bool]:
    """SQL: the item expires at ``now`` (``groups``: see :func:`held_rule`)."""
    return sa.and_(
        _it.c.deleted_at.is_(None),
        _it.c.expires_at.is_not(None),
        _it.c.expires_at <= now,
        ~held_rule(now, groups),
    )


def _grace_groups(conn: Connection, org: str | None) -> dict[int, list[str]]:
    """Organisations with their own ``grace_days``, grouped by the value."""
    stmt = sa.select(_os.c.org_id, _os.c.setting_value).where(_os.c.setting_name == "grace_days")
    if org is not None:
        stmt = stmt.where(_os.c.org_id == org)
    groups: dict[int, list[str]] = {}
    for org_id, text in conn.execute(stmt):
        try:
            days = int(text)
        except ValueError:  # written by hand: the default, as get_org_settings reads it
            days = int(DEFAULTS["grace_days"])
        groups.setdefault(days, []).append(org_id)
    return groups


def purge_rule(now: dt.datetime, groups: dict[int, list[str]]) -> sa.ColumnElement[bool]:
    """SQL: the soft-deleted item's grace period is over at ``now`` (``groups``: organisations
    with their own ``grace_days``, by value; the others take the default)."""
    default = int(DEFAULTS["grace_days"])
    own = sa.exists().where(_os.c.org_id == _it.c.org_id, _os.c.setting_name == "grace_days")
    branches = [sa.and_(~own, _it.c.deleted_at <= now - dt.timedelta(days=default))]
    for days, orgs in groups.items():
        for i in range(0, len(orgs), BATCH):
            branches.append(
                sa.and_(
                    _it.c.org_id.in_(orgs[i : i + BATCH]),
                    _it.c.deleted_at <= now - dt.timedelta(days=days),
                )
            )
    return sa.and_(_it.c.deleted_at.is_not(None), sa.or_(*branches))


def _candidates(conn: Connection, rule: sa.ColumnElement[bool]) -> list[Any]:
    stmt = lock_expiry_candidates(conn, sa.select(*_SELECT_COLUMNS).where(rule), BATCH)
    return list(conn.execute(stmt).all())


def _gone(conn: Connection, rows: list[Any], still: sa.ColumnElement[bool]) -> list[Any]:
    """The rows of ``rows`` that no longer match ``still`` (i.e. were changed by us)."""
    ids = [int(r.item_id) for r in rows]
    left = set(conn.execute(sa.select(_it.c.item_id).where(_it.c.item_id.in_(ids), still)).scalars())
    return [r for r in rows if int(r.item_id) not in left]


def _expire_batch(
    conn: Connection, now: dt.datetime, org: str | None, actor: str, groups: dict[int, list[str]]
) -> tuple[int, int]:
    rule = expire_rule(now, groups)
    if org is not None:
        rule = sa.and_(rule, _it.c.org_id == org)
    rows = _candidates(conn, rule)
    if not rows:
        return 0, 0
    ids = [int(r.item_id) for r in rows]
    conn.execute(
        sa.update(_it)
        .where(_it.c.item_id.in_(ids), expire_rule(now, groups))
        .values(deleted_at=now, version_no=_it.c.version_no + 1)
    )
    done = _gone(conn, rows, expire_rule(now, groups))
    audit.record_many(
        conn,
        [
            audit.event_row(
                "item_expire", actor=actor, org_id=r.org_id, user_key=r.user_key,
                item_id=int(r.item_id), before=int(r.char_count), after=0, now=now,
            )
            for r in done
        ],
    )
    return len(rows), len(done)


def purge_deleted(
    conn: Connection,
    now: dt.datetime,
    *,
    org: str | None = None,
    user_key: str | None = None,
    item_ids: list[int] | None = None,
    include_grace: bool = False,
    actor: str = "expiry",
) -> int:
    """Purge soft-deleted items (checked arguments; in the caller's write unit). Returns how
    many were deleted. See :func:`dbmemory.items.purge_items`."""
    total = 0
    groups = _grace_groups(conn, org)
    rule = _it.c.deleted_at.is_not(None) if include_grace else purge_rule(now, groups)
    if org is not None:
        rule = sa.and_(rule, _it.c.org_id == org)
    if user_key is not None:
        rule = sa.and_(rule, _it.c.user_key == user_key)
    id_chunks: list[list[int] | None] = [None]
    if item_ids is not None:
        id_chunks = [item_ids[i : i + BATCH] for i in range(0, len(item_ids), BATCH)] or []
    for chunk in id_chunks:
        this = rule if chunk is None else sa.and_(rule, _it.c.item_id.in_(chunk))
        while True:
            rows = _candidates(conn, this)
            if not rows:
                break
            ids = [int(r.item_id) for r in rows]
            conn.execute(sa.delete(_it).where(_it.c.item_id.in_(ids), this))
            done = _gone(conn, rows, sa.true())
            audit.record_many(
                conn,
                [
                    audit.event_row(
                        "item_purge", actor=actor, org_id=r.org_id, user_key=r.user_key,
                        item_id=int(r.item_id), before=int(r.char_count), after=None, now=now,
                    )
                    for r in done
                ],
            )
            total += len(done)
            if len(rows) < BATCH or not done:
                break
    return total


def expire_items(
    conn: Connection,
    *,
    org_id: str | None = None,
    actor: str = "expiry",
    now: dt.datetime | None = None,
) -> int:
    """Soft-delete the items whose ``expires_at`` has come (rule 1), in the caller's
    transaction. Returns how many."""
    check_arguments(conn=conn, actor=actor)
    org = None if org_id is None else check_org(org_id)
    now = _v.check_now(now) or utcnow()
    total = 0
    with write_unit(conn, "expiring memory items"):
        groups = _grace_groups(conn, org)
        while True:
            seen, done = _expire_batch(conn, now, org, actor, groups)
            total += done
            if seen < BATCH or not done:
                return total


def run_item_retention(
    conn: Connection,
    *,
    org_id: str | None = None,
    actor: str = "expiry",
    now: dt.datetime | None = None,
) -> dict[str, int]:
    """Rules 1 and 2 in the caller's transaction: ``{"expired": n, "purged": m}``."""
    check_arguments(conn=conn, actor=actor)
    org = None if org_id is None else check_org(org_id)
    now = _v.check_now(now) or utcnow()
    expired = expire_items(conn, org_id=org, actor=actor, now=now)
    with write_unit(conn, "purging memory items"):
        purged = purge_deleted(conn, now, org=org, actor=actor)
    return {"expired": expired, "purged": purged}


def run_item_retention_committing(
    engine: Engine, *, actor: str = "expiry", now: dt.datetime | None = None
) -> dict[str, int]:
    """:func:`run_item_retention` in a READ COMMITTED transaction of its own, committed (for
    ``dbmemory expire`` and operators)."""
    check_arguments(engine=engine, actor=actor)
    now = _v.check_now(now) or utcnow()
    isolation = batch_isolation(engine)
    try:
        with engine.connect().execution_options(isolation_level=isolation) as conn:
            with resolved_transaction(conn, "committing the item retention", check="run it again"):
                return run_item_retention(conn, actor=actor, now=now)
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "expiring memory items", target=engine) from exc
