"""Organisation settings, retention classes and the memory switch.

**Settings** (one ``dbm_org_settings`` row per setting an organisation changed; the rest take
:data:`DEFAULTS`):

| name | default | meaning |
| --- | --- | --- |
| ``extraction_model`` | ``""`` | model of auto extraction; empty: the turn's model |
| ``embedding_model`` | ``""`` | litellm embedding model for selection; empty: BM25 |
| ``confidence_threshold`` | 0.8 | auto facts under it are dropped (0..1) |
| ``retention_standard_days`` | 180 | days a ``standard`` item lives after its last change or use |
| ``retention_temporary_days`` | 60 | the same for ``temporary`` |
| ``retention_auto_days`` | 30 | the same for ``auto`` (default class of auto items) |
| ``grace_days`` | 30 | days a soft-deleted item stays restorable before the purge |
| ``selection_threshold`` | 20 | from this many items on, only the top-k are injected |
| ``top_k`` | 10 | items injected at or above the threshold |
| ``item_token_budget`` | 1000 | tokens of the injected items block |
| ``org_memory_token_budget`` | 1000 | tokens of the organisation memory (refused above) |
| ``summary_every_items`` | 10 | new items that trigger a fold into the profile |
| ``skip_window_seconds`` | 300 | a message this soon after the previous one in a chat is not extracted |
| ``episode_retention_days`` | 365 | days a conversation episode is kept after its turn (:mod:`dbmemory.items.episodes`) |
| ``search_token_budget`` | 1200 | tokens of the searched part of a turn's memory (episodes, file snippets) |
| ``memory_token_budget`` | 0 | tokens of a turn's whole injected memory (organisation memory, profile, items, searched part); 0: no total, each block within its own budget (:mod:`dbmemory.agent.item_memory` says how a total is shared) |
| ``fold_window_days`` | 7 | an auto item this many days or fewer before its ``expires_at``, not yet folded, is folded into the profile by its owner's next turn (:mod:`dbmemory.items.summary`); 0: never |

``permanent`` items never expire and have no setting. Changing a ``retention_*_days`` setting
recomputes ``expires_at`` of that organisation's live items of that class (the later of the last
change and the last use, + the new days); an item already expired stays expired. Every change writes a ``setting_set`` audit event (name, old and new value).

**The memory switch** (Cloosphere's "Memory OFF", :func:`set_memory_switch`; table
``dbm_memory_switches``, per organisation and user, no row = on) stops auto extraction and the
injection of organisation memory, profile and items into that user's conversations, and
**keeps** every item and the profile: turning it on again uses them at once. It is not the
profile opt-out (:func:`dbmemory.profile.set_user_memory_enabled`, table ``dbm_user_settings``
column ``memory_enabled``, per user across organisations), which stops the profile's load and
update **and deletes the profile** for good. Both write an audit event (``switch_set``,
``optout_set``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.base import locks_by_update
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.writes import mysql_snapshot_reads
from dbmemory.db.schema import items as _it
from dbmemory.db.schema import memory_switches as _sw
from dbmemory.db.schema import org_settings as _os
from dbmemory.errors import ConflictError, DbMemoryError, InvalidArgumentError
from dbmemory.items import audit
from dbmemory.items.model import (
    DEFAULT_ORG,
    EDITABLE_CLASSES,
    RETENTION_CLASSES,
    check_org,
    user_key_of,
)
from dbmemory.store.units import write_unit

__all__ = [
    "DEFAULTS",
    "NotAdminError",
    "OrgSettings",
    "get_org_settings",
    "set_org_setting",
    "retention_days",
    "get_memory_switch",
    "set_memory_switch",
    "lock_user",
    "from_text",
]

DEFAULTS: dict[str, Any] = {
    "extraction_model": "",
    "embedding_model": "",
    "confidence_threshold": 0.8,
    "retention_standard_days": 180,
    "retention_temporary_days": 60,
    "retention_auto_days": 30,
    "grace_days": 30,
    "selection_threshold": 20,
    "top_k": 10,
    "item_token_budget": 1000,
    "org_memory_token_budget": 1000,
    "summary_every_items": 10,
    "skip_window_seconds": 300,
    "episode_retention_days": 365,
    "search_token_budget": 1200,
    "fold_window_days": 7,
    "memory_token_budget": 0,
}
"""Every setting and its default (see the module doc)."""

_RANGES: dict[str, tuple[float, float]] = {
    "confidence_threshold": (0.0, 1.0),
    "retention_standard_days": (1, 36_500),
    "retention_temporary_days": (1, 36_500),
    "retention_auto_days": (1, 36_500),
    "grace_days": (0, 3_650),
    "selection_threshold": (1, 10_000),
    "top_k": (1, 1_000),
    "item_token_budget": (1, 1_000_000),
    "org_memory_token_budget": (1, 1_000_000),
    "summary_every_items": (1, 10_000),
    "skip_window_seconds": (0, 86_400),
    "episode_retention_days": (1, 36_500),
    "search_token_budget": (1, 1_000_000),
    "fold_window_days": (0, 3_650),
    "memory_token_budget": (0, 1_000_000),
}


@dataclasses.dataclass(frozen=True)
class OrgSettings:
    """An organisation's settings (defaults filled in; see the module doc for each)."""

    org_id: str
    extraction_model: str
    embedding_model: str
    confidence_threshold: float
    retention_standard_days: int
    retention_temporary_days: int
    retention_auto_days: int
    grace_days: int
    selection_threshold: int
    top_k: int
    item_token_budget: int
    org_memory_token_budget: int
    summary_every_items: int
    skip_window_seconds: int
    episode_retention_days: int = 365
    search_token_budget: int = 1200
    fold_window_days: int = 7
    memory_token_budget: int = 0

    def retention_days(self, retention_class: str) -> int | None:
        """Days an item of ``retention_class`` lives after its last change; None: never."""
        if retention_class == "permanent":
            return None
        return int(getattr(self, f"retention_{retention_class}_days"))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return dataclasses.asdict(self)


def retention_days(settings: OrgSettings, retention_class: str) -> int | None:
    """``settings.retention_days(retention_class)``."""
    return settings.retention_days(retention_class)


def _parse(name: str, value: object) -> Any:
    """A setting's value checked and converted to its type (text from the CLI accepted)."""
    if name not in DEFAULTS:
        raise InvalidArgumentError(
            f"setting {_v.show(name)} is unknown: use one of {', '.join(DEFAULTS)}",
            code="unknown_setting",
        )
    default = DEFAULTS[name]
    if isinstance(default, str):
        _v.check_text(value, name, max_chars=200)
        return str(value).strip()
    if isinstance(value, str):
        try:
            value = float(value) if isinstance(default, float) else int(value.strip())
        except ValueError:
            raise InvalidArgumentError(
                f"setting {name} must be a {'number' if isinstance(default, float) else 'whole number'}, "
                f"got {_v.show(value)}: pass e.g. {default}"
            ) from None
    low, high = _RANGES[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"setting {name} must be a number, got {_v.show(value)}")
    if isinstance(default, int) and not float(value).is_integer():
        raise InvalidArgumentError(f"setting {name} must be a whole number, got {value}")
    if not low <= value <= high:
        raise InvalidArgumentError(
            f"setting {name} = {value} is out of range: pass {low:g} to {high:g}"
        )
    return float(value) if isinstance(default, float) else int(value)


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def from_text(name: str, text: str) -> Any:
    default = DEFAULTS[name]
    try:
        return type(default)(text) if not isinstance(default, int) else int(text)
    except ValueError:  # a row written by hand: fall back to the default
        return default


def get_org_settings(conn: Connection, org_id: str = DEFAULT_ORG) -> OrgSettings:
    """An organisation's settings, defaults filled in (one ``SELECT``, no lock).

    Raises:
        InvalidScopeError: invalid organisation id.
        StorageError: the database failed (``dbmemory db upgrade`` missing?).
    """
    check_arguments(conn=conn)
    org = check_org(org_id)
    try:
        rows = conn.execute(
            sa.select(_os.c.setting_name, _os.c.setting_value).where(_os.c.org_id == org)
        ).all()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading organisation settings") from exc
    values = dict(DEFAULTS)
    for name, text in rows:
        if name in DEFAULTS:
            values[name] = from_text(name, text)
    return OrgSettings(org_id=org, **values)


class NotAdminError(DbMemoryError, PermissionError):
    """The caller is not an administrator of the organisation (code ``not_admin``)."""

    code = "not_admin"


def set_org_setting(
    conn: Connection,
    org_id: str,
    name: str,
    value: object,
    *,
    is_admin: bool,
    actor: str = "admin",
    now: dt.datetime | None = None,
) -> OrgSettings:
    """Change one setting of an organisation (administrators only), in the caller's
    transaction, audited.

    Organisation settings are admin decisions (a budget of 1 would block the admin's next
    organisation-memory write): the host decides who is an administrator and passes
    ``is_admin=True``.

    Args:
        conn: the caller's connection (joins its transaction; commits nothing).
        org_id: the organisation.
        name: a key of :data:`DEFAULTS`.
        value: the new value (its type, or text such as ``"0.7"`` from a command line).
        actor: recorded in the ``setting_set`` audit event.
        now: the current time (tests); default: UTC now.

    Returns:
        The organisation's settings after the change.

    Raises:
        InvalidArgumentError: unknown setting (code ``unknown_setting``), a value of the wrong
            type or out of range.
        InvalidScopeError: invalid organisation id.
        NotAdminError: ``is_admin`` is not True (code ``not_admin``); nothing written.
    """
    check_arguments(conn=conn, actor=actor)
    org = check_org(org_id)
    if is_admin is not True:
        raise NotAdminError(
            f"only an administrator of organisation {org!r} can change its settings: the host "
            "decides who is one and passes is_admin=True"
        )
    parsed = _parse(name, value)
    now = _v.check_now(now) or utcnow()
    before = get_org_settings(conn, org)
    old = getattr(before, name)
    with write_unit(conn, f"setting {name} of organisation {org}"):
        key = sa.and_(_os.c.org_id == org, _os.c.setting_name == name)
        found = conn.execute(sa.select(_os.c.setting_name).where(key).with_for_update()).first()
        if found is None:
            conn.execute(
                sa.insert(_os).values(
                    org_id=org, setting_name=name, setting_value=_text(parsed), updated_at=now
                )
            )
        else:
            conn.execute(sa.update(_os).where(key).values(setting_value=_text(parsed), updated_at=now))
        if name.startswith("retention_") and parsed != old:
            _reschedule(conn, org, name[len("retention_") : -len("_days")], int(parsed), now)
        audit.record(
            conn,
            "setting_set",
            actor=actor,
            org_id=org,
            detail=f"{name}: {_text(old)} -> {_text(parsed)}",
            now=now,
        )
    return get_org_settings(conn, org)


def _reschedule(conn: Connection, org: str, retention_class: str, days: int, now: dt.datetime) -> None:
    """New ``expires_at`` (the later of the last change and the last use, + ``days``) for the
    organisation's live items of a class. An item already expired at ``now`` keeps its
    ``expires_at``: a longer retention set later never brings it back."""
    assert retention_class in EDITABLE_CLASSES and retention_class in RETENTION_CLASSES
    rows = conn.execute(
        sa.select(_it.c.item_id, _it.c.updated_at, _it.c.last_used_at).where(
            _it.c.org_id == org,
            _it.c.retention_class == retention_class,
            _it.c.deleted_at.is_(None),
            sa.or_(_it.c.expires_at.is_(None), _it.c.expires_at > now),
        )
    ).all()
    if rows:
        conn.execute(
            sa.update(_it)
            .where(_it.c.item_id == sa.bindparam("p_id"))
            .values(expires_at=sa.bindparam("p_exp", type_=_it.c.expires_at.type)),
            [
                {"p_id": r.item_id, "p_exp": _later(r.updated_at, r.last_used_at) + dt.timedelta(days=days)}
                for r in rows
            ],
        )


def _later(changed: dt.datetime, used: dt.datetime | None) -> dt.datetime:
    if used is None:
        return changed
    a, b = _aware_utc(changed), _aware_utc(used)
    return a if a >= b else b


def _aware_utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


# -- the memory switch ------------------------------------------------------------------------


def get_memory_switch(conn: Connection, user_id: str, *, org_id: str = DEFAULT_ORG) -> bool:
    """Whether the memory switch is on for the user (True unless turned off).

    Raises:
        InvalidScopeError: invalid user or organisation id.
    """
    check_arguments(conn=conn)
    org = check_org(org_id)
    key = user_key_of(user_id)
    try:
        value = conn.execute(
            sa.select(_sw.c.memory_on).where(_sw.c.org_id == org, _sw.c.user_key == key)
        ).scalar_one_or_none()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading the memory switch") from exc
    return value is None or bool(value)


def lock_user(conn: Connection, org: str, user_key: str, now: dt.datetime) -> bool:
    """Lock the user's switch row (``FOR UPDATE``; on PostgreSQL a no-op ``UPDATE``, see
    :func:`dbmemory.db.dialect.base.locks_by_update`), creating it (on) when missing: writers of one
    user's items that check a count (the auto-item limit) and :func:`~dbmemory.items.forget_user`
    serialise on it. Call inside a write unit. Returns the switch's value."""
    key = sa.and_(_sw.c.org_id == org, _sw.c.user_key == user_key)
    stmt: sa.Executable
    if locks_by_update(conn):  # a snapshot that waited for us must not miss our rows
        stmt = (
            sa.update(_sw).where(key).values(updated_at=_sw.c.updated_at).returning(_sw.c.memory_on)
        )
    else:
        stmt = sa.select(_sw.c.memory_on).where(key).with_for_update()
    row = conn.execute(stmt).first()
    if row is None:
        try:
            with conn.begin_nested():
                conn.execute(
                    sa.insert(_sw).values(org_id=org, user_key=user_key, memory_on=True, updated_at=now)
                )
        except sa.exc.IntegrityError:
            pass  # created concurrently: lock it below
        row = conn.execute(stmt).first()
    return row is None or bool(row[0])


def _insert_switch_row(conn: Connection, org: str, user_key: str, now: dt.datetime) -> bool:
    """Insert the user's switch row (on) in a savepoint; False when it exists already."""
    try:
        with conn.begin_nested():
            conn.execute(sa.insert(_sw).values(org_id=org, user_key=user_key, memory_on=True, updated_at=now))
    except sa.exc.IntegrityError:
        return False
    return True


def lock_user_to_count(conn: Connection, org: str, user_key: str, now: dt.datetime) -> None:
    """:func:`lock_user` for a writer that counts the user's rows under the lock (the auto-item
    limit), so that the count sees every commit of the lock's previous holders.

    PostgreSQL's lock is an ``UPDATE`` (a snapshot that waited for it fails with a serialization
    error); READ COMMITTED reads are current. At MySQL/MariaDB REPEATABLE READ
    (:func:`dbmemory.db.dialect.writes.mysql_snapshot_reads`) a plain read after the lock still
    answers from the transaction's snapshot, so there the switch row is a version stamp: its
    ``updated_at`` as the snapshot sees it must be the one the locking read sees, else a writer
    committed after the snapshot was taken and the count would miss its rows (refused like
    PostgreSQL's: :class:`~dbmemory.errors.ConflictError` code ``serialization_failure``,
    nothing written); then it moves on by at least a microsecond (``DATETIME(6)``), so the next
    holder's check sees this write. No locking read of the counted rows: their next-key locks
    would make writers of neighbouring users deadlock.

    Raises:
        ConflictError: the transaction's snapshot predates another writer's commit (roll back
            and retry the whole transaction).
    """
    if not mysql_snapshot_reads(conn):
        lock_user(conn, org, user_key, now)
        return
    key = sa.and_(_sw.c.org_id == org, _sw.c.user_key == user_key)
    stamp = sa.select(_sw.c.updated_at).where(key)
    seen = conn.execute(stamp).scalar_one_or_none()  # the snapshot's
    # a row the snapshot does not hold is inserted, not locked first: a locking read of a
    # missing key takes a gap lock, and first writers of neighbouring users would deadlock
    if seen is None and _insert_switch_row(conn, org, user_key, now):
        return
    current = conn.execute(stamp.with_for_update()).scalar_one_or_none()
    if current != seen:  # also: created, or deleted by a forget, after the snapshot was taken
        raise ConflictError(
            "counting the user's memory items was refused: another writer changed them after "
            "the caller's transaction took its snapshot (REPEATABLE READ), so the auto-item "
            "limit could not be checked against what is committed. Nothing was written. Roll "
            "back and retry the whole transaction: retrying inside the same transaction fails again",
            code="serialization_failure",
        )
    assert current is not None  # None here would differ from the row the snapshot saw
    bumped = now if now > current else current + dt.timedelta(microseconds=1)
    conn.execute(sa.update(_sw).where(key).values(updated_at=bumped))


def set_memory_switch(
    conn: Connection,
    user_id: str,
    on: bool,
    *,
    org_id: str = DEFAULT_ORG,
    actor: str = "user",
    now: dt.datetime | None = None,
) -> bool:
    """Turn the user's memory switch on or off (items and profile are kept), audited.

    Runs in the caller's transaction; commits nothing.

    Returns:
        The switch's value before the change.

    Raises:
        InvalidArgumentError: ``on`` not a bool; ``actor`` not text.
        InvalidScopeError: invalid user or organisation id.
    """
    check_arguments(conn=conn, actor=actor)
    _v.check_bool(on, "on")
    org = check_org(org_id)
    key = user_key_of(user_id)
    now = _v.check_now(now) or utcnow()
    with write_unit(conn, "setting the memory switch"):
        old = lock_user(conn, org, key, now)
        conn.execute(
            sa.update(_sw)
            .where(_sw.c.org_id == org, _sw.c.user_key == key)
            .values(memory_on=bool(on), updated_at=now)
        )
        audit.record(
            conn,
            "switch_set",
            actor=actor,
            org_id=org,
            user_key=key,
            detail=f"memory_on: {str(old).lower()} -> {str(bool(on)).lower()}",
            now=now,
        )
    return old
