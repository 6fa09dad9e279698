"""A user's opt-out of memory.

``set_user_memory_enabled(conn, user_id, False)`` stops load and update for that user in every
space and deletes the profile permanently; the audit event of the delete remains. The flag is a
row of ``dbm_user_settings`` keyed by the encoded user id (:func:`~dbmemory.profile.store.encode_user_id`):

| column         | type                            | meaning                        |
|----------------|---------------------------------|--------------------------------|
| user_key       | VARCHAR(200) PK                 | encoded user id                |
| memory_enabled | BOOLEAN (NUMBER(1)) NOT NULL    | False after an opt-out         |
| updated_at     | TIMESTAMP (UTC)                 | last change                    |

The table belongs to the schema (``dbmemory.db.schema.user_settings``, created by the
migrations).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.db import schema
from dbmemory.db.dialect.base import locks_by_update
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.errors import ConflictError
from dbmemory.profile.store import DEFAULT_ROOT_FOLDER, delete_profile, encode_user_id

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "user_settings",
    "USER_SETTINGS_TABLE",
    "is_user_memory_enabled",
    "lock_user_memory_enabled",
    "FORGET_ACTION",
    "forget_mark",
    "forget_mark_stmt",
    "set_user_memory_enabled",
    "settings_table_seen",
    "forget_settings_table",
]

USER_SETTINGS_TABLE = "dbm_user_settings"

user_settings: sa.Table = schema.user_settings
"""The ``dbm_user_settings`` table."""

SCHEMA_HAS_TABLE = hasattr(schema, "user_settings")
"""Whether the schema module defines the table (False: the private fallback is used)."""


SELECT_ENABLED = sa.select(user_settings.c.memory_enabled).where(
    user_settings.c.user_key == sa.bindparam("p_user_key")
)

_TABLE_SEEN = "dbmemory.user_settings_table"
"""Key in ``Connection.info`` (kept with the DB-API connection across pool check-outs): this
database connection has read ``dbm_user_settings`` successfully, so the table exists."""


def _select(user_key: str) -> sa.Select[tuple[bool]]:
    return sa.select(user_settings.c.memory_enabled).where(user_settings.c.user_key == user_key)


def settings_table_seen(conn: Connection) -> bool:
    """Whether ``conn``'s database connection has already read ``dbm_user_settings``.

    Then the table is known to exist and the setting is read with a plain ``SELECT`` (no
    savepoint, no ``has_table``), alone or joined to the profile read
    (:func:`~dbmemory.profile.store.read_profile` with ``unless_opted_out=True``).
    """
    return bool(conn.info.get(_TABLE_SEEN))


def is_user_memory_enabled(conn: Connection, user_id: str) -> bool:
    """Whether ``user_id`` has memory on (True unless they opted out).

    A database without the settings table counts as "nobody opted out": the first check on a
    database connection runs in a savepoint, so a missing table never spoils the caller's
    transaction. Once the table has been read on that connection (the usual case: the
    migrations create it) the check is one plain ``SELECT``.

    Raises:
        InvalidScopeError: invalid user id.
        StorageError: the database failed (also when the table disappears after it was read:
            run ``dbmemory db upgrade``).
        InvalidArgumentError: ``conn`` not a Connection.
    """

    check_arguments(conn=conn)
    user_key = encode_user_id(user_id)
    if settings_table_seen(conn):
        try:
            value = conn.execute(SELECT_ENABLED, {"p_user_key": user_key}).scalar_one_or_none()
        except sa.exc.SQLAlchemyError as exc:
            forget_settings_table(conn)
            raise translate_db_error(exc, "reading the memory setting") from exc
        return value is None or bool(value)
    try:
        with conn.begin_nested():
            value = conn.execute(_select(user_key)).scalar_one_or_none()
    except sa.exc.DBAPIError as exc:
        # Every driver error, whatever its class: a missing table is ProgrammingError on
        # psycopg/PyMySQL, OperationalError on sqlite3, plain DatabaseError on python-oracledb
        # (ORA-00942). Only a table known to be missing means "nobody opted out"; a lost
        # connection cannot be asked.
        if not conn.invalidated and _table_exists(conn) is False:
            return True
        raise translate_db_error(exc, "reading the memory setting") from exc
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading the memory setting") from exc
    conn.info[_TABLE_SEEN] = True
    return value is None or bool(value)


def forget_settings_table(conn: Connection) -> None:
    """Drop the "table seen" mark of ``conn`` (after a failed read: check again next time)."""
    try:
        conn.info.pop(_TABLE_SEEN, None)
    except sa.exc.SQLAlchemyError:  # the connection is closed or invalidated: nothing to forget
        pass


def _table_exists(conn: Connection) -> bool | None:
    """Whether ``dbm_user_settings`` exists; None when even that cannot be read (the caller
    then reports the original error instead of assuming no one opted out)."""
    try:
        return bool(sa.inspect(conn).has_table(USER_SETTINGS_TABLE))
    except sa.exc.SQLAlchemyError:
        return None


def lock_user_memory_enabled(conn: Connection, user_id: str) -> bool:
    """:func:`is_user_memory_enabled`, with the user's ``dbm_user_settings`` row locked
    (``FOR UPDATE``) until the caller's transaction ends, the row created (memory on) when
    missing. A profile write that checks this first, in its own transaction, serialises with
    :func:`set_user_memory_enabled` and :func:`dbmemory.items.forget_user`: an opt-out or a
    forget either waits for the write and then deletes the new profile, or commits first and
    is seen here. A plain read left a window in which an opt-out committed between the check
    and the write, and the opted-out user kept a new profile. A database without the table
    counts as "nobody opted out" (no lock).

    The locking ``SELECT`` is the first statement this runs (no plain read before it), so a
    plain read the caller makes after it (:func:`forget_mark`) sees what committed before the
    lock was granted, on MariaDB/MySQL's REPEATABLE READ too (its snapshot starts at the first
    plain read).

    Raises:
        ConflictError: the row was created by a transaction this one's snapshot cannot see
            (PostgreSQL REPEATABLE READ / SERIALIZABLE): retry in a new transaction.
        InvalidScopeError: invalid user id.
        StorageError: the database failed.
        InvalidArgumentError: ``conn`` not a Connection.
    """

    check_arguments(conn=conn)
    user_key = encode_user_id(user_id)
    if locks_by_update(conn):  # a snapshot that waited for this lock must not miss our rows
        lock: Any = (
            sa.update(user_settings)
            .where(user_settings.c.user_key == user_key)
            .values(updated_at=user_settings.c.updated_at)
            .returning(user_settings.c.memory_enabled)
        )
    else:
        lock = (
            sa.select(user_settings.c.memory_enabled)
            .where(user_settings.c.user_key == user_key)
            .with_for_update()
        )

    def locked() -> Any:
        row = conn.execute(lock).first()
        if row is None:
            try:
                with conn.begin_nested():
                    conn.execute(
                        sa.insert(user_settings).values(
                            user_key=user_key, memory_enabled=True, updated_at=utcnow()
                        )
                    )
            except sa.exc.IntegrityError:
                pass  # an opt-out or a forget inserted it meanwhile: read its value below
            row = conn.execute(lock).first()
        return row

    try:
        if settings_table_seen(conn):  # the table exists: no savepoint around the lock
            row = locked()
        else:
            with conn.begin_nested():
                row = locked()
    except sa.exc.DBAPIError as exc:
        if conn.invalidated:  # the connection was lost: its info is out of reach, and no table
            raise translate_db_error(exc, "reading the memory setting") from exc  # is missing
        # as in is_user_memory_enabled: only a table known to be missing means "nobody opted out"
        if not settings_table_seen(conn) and _table_exists(conn) is False:
            return True
        forget_settings_table(conn)
        raise translate_db_error(exc, "reading the memory setting") from exc
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading the memory setting") from exc
    conn.info[_TABLE_SEEN] = True
    if row is None:  # inserted after this transaction's snapshot (REPEATABLE READ)
        raise ConflictError(
            "the memory setting of this user changed during the write: roll back and retry"
        )
    return bool(row[0])


FORGET_ACTION = "user_forget"
"""``action_name`` of the audit event :func:`dbmemory.items.forget_user` writes: the tombstone
:func:`forget_mark` reads (audit events outlive the forget by design and hold no memory text)."""


def forget_mark_stmt(user_key: str, org_id: str | None = None) -> sa.Select[tuple[int | None]]:
    """``SELECT MAX(event_id)`` of the user's ``user_forget`` audit events (of one
    organisation when ``org_id`` is given); uses the ``(user_key, created_at)`` index."""
    ae = schema.audit_events.c
    stmt = sa.select(sa.func.max(ae.event_id)).where(
        ae.user_key == user_key, ae.action_name == FORGET_ACTION
    )
    return stmt if org_id is None else stmt.where(ae.org_id == org_id)


def forget_mark(conn: Connection, user_id: str, *, org_id: str | None = None) -> int:
    """The newest ``user_forget`` audit event id of ``user_id`` (0: never forgotten), of one
    organisation when ``org_id`` is given (items), else of any (the profile, which a forget in
    any organisation deletes).

    **The forget rule.** A post-turn step that derives memory from a conversation (item
    extraction, profile consolidation) reads this mark when it starts, before its model calls,
    and again in its write transaction right after taking the lock the forget also takes (the
    switch row, the settings row); a different value means a forget of this user committed
    since it started, and it writes nothing. Audit events are append-only, so the mark never
    goes back. A forget that has not committed when the write takes its lock waits for the write
    (it takes the same lock first) and then deletes what it wrote.

    Raises:
        InvalidScopeError: invalid user id.
        StorageError: the database failed.
    """
    try:
        value: Any = conn.execute(forget_mark_stmt(encode_user_id(user_id), org_id)).scalar()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading the audit trail") from exc
    return int(value or 0)


def set_user_memory_enabled(
    conn: Connection,
    user_id: str,
    enabled: bool,
    *,
    root_folders: Iterable[str] = (DEFAULT_ROOT_FOLDER,),
    actor: str = "user",
) -> bool:
    """Turn memory on or off for ``user_id``; turning it off deletes the profile permanently.

    Runs in the caller's transaction; commits nothing. The change writes an ``optout_set``
    audit event (old and new value, no content) and the delete its own.

    Not the memory switch (:func:`dbmemory.items.set_memory_switch`), which stops extraction
    and injection but keeps the profile and the items.

    Args:
        conn: a SQLAlchemy connection.
        user_id: whose setting.
        enabled: False to opt out (profile deleted, load and update stop everywhere); True to
            opt back in (a new profile starts empty).
        root_folders: profile namespaces whose profile is deleted on opt-out.
        actor: recorded in the audit event of the delete.

    Returns:
        Whether a profile was deleted.

    Raises:
        InvalidScopeError: invalid user id.
        StorageError: the database failed (for instance the settings table is missing: run
            ``dbmemory db upgrade``).
        InvalidArgumentError: ``conn`` not a Connection; ``enabled`` not a bool;
            ``root_folders`` not an iterable of strings (a bare string is refused); ``actor`` not text.
    """
    check_arguments(conn=conn, actor=actor)
    _v.check_bool(enabled, "enabled")
    if not isinstance(root_folders, (str, bytes)) and hasattr(root_folders, "__iter__"):
        root_folders = list(root_folders)
    root_folders = _v.check_each(root_folders, "root_folders", _v.check_text)
    user_key = encode_user_id(user_id)
    now = utcnow()
    try:
        with conn.begin_nested():
            row = conn.execute(
                sa.select(user_settings.c.user_key)
                .where(user_settings.c.user_key == user_key)
                .with_for_update()
            ).first()
            inserted = False
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(
                            sa.insert(user_settings).values(
                                user_key=user_key, memory_enabled=bool(enabled), updated_at=now
                            )
                        )
                    inserted = True
                except sa.exc.IntegrityError:
                    pass  # inserted concurrently: update it below
            if not inserted:
                old = conn.execute(
                    sa.select(user_settings.c.memory_enabled).where(user_settings.c.user_key == user_key)
                ).scalar_one()
                conn.execute(
                    sa.update(user_settings)
                    .where(user_settings.c.user_key == user_key)
                    .values(memory_enabled=bool(enabled), updated_at=now)
                )
            else:
                old = True
            # the opt-out change itself is audited (content-free: names the user and values)
            conn.execute(
                sa.insert(schema.audit_events).values(
                    action_name="optout_set",
                    actor_name=(actor or "unknown")[:500],
                    user_key=user_key,
                    detail_text=(
                        f"memory_enabled: {str(bool(old)).lower()} -> {str(bool(enabled)).lower()}"
                    ),
                    created_at=now,
                )
            )
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "saving the memory setting") from exc
    deleted = False
    if not enabled:
        for root_folder in root_folders:
            deleted = delete_profile(conn, user_id, root_folder=root_folder, actor=actor) or deleted
        _delete_episodes(conn, user_key, actor, now)
    return deleted


def _delete_episodes(conn: Connection, user_key: str, actor: str, now: Any) -> None:
    """The opt-out also deletes the user's conversation episodes in every organisation
    (:mod:`dbmemory.items.episodes`), with one content-free ``episode_delete`` audit event per
    organisation (count and characters)."""
    ep = schema.episodes
    try:
        with conn.begin_nested():
            groups = conn.execute(
                sa.select(ep.c.org_id, sa.func.count(), sa.func.sum(ep.c.char_count))
                .where(ep.c.user_key == user_key)
                .group_by(ep.c.org_id)
            ).all()
            if not groups:
                return
            conn.execute(sa.delete(ep).where(ep.c.user_key == user_key))
            conn.execute(
                sa.insert(schema.audit_events),
                [
                    {
                        "action_name": "episode_delete", "actor_name": (actor or "unknown")[:500],
                        "org_id": org, "user_key": user_key, "chars_before": int(chars or 0),
                        "detail_text": f"{int(n)} episodes, opt-out", "created_at": now,
                    }
                    for org, n, chars in groups
                ],
            )
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "deleting the conversation episodes") from exc
