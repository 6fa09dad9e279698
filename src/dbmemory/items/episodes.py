"""Conversation episodes: each turn's user text and assistant text, kept for the user.

An **episode** is one row of ``dbm_episodes`` (revision 0006): the organisation, the encoded
user id (:func:`dbmemory.items.model.user_key_of`, the key of the user's reserved data, like the
items'), the chat, the time of the turn, and one text: the user's message, a newline, the
assistant's answer (``user_chars`` says where the user's part ends). Its retention class is
``episode``: it expires ``episode_retention_days`` (organisation setting, default 365) after the
turn, and :func:`expire_episodes` deletes it for good then.

Rules:

* **A secret never reaches the table**: the profile's deterministic detectors
  (:func:`dbmemory.profile.detectors.scan`: keys, tokens, passwords, payment cards, national
  ids, other people's e-mail addresses and phone numbers) run on both texts before the
  ``INSERT``; what they find is replaced by its marker (``[REDACTED:secret]``...). The user's
  own contacts (their id when it is an e-mail address, what the message declares) stay.
* **One statement per turn**: :func:`record_episode` writes one ``INSERT ... SELECT`` into
  ``dbm_episodes`` that inserts nothing while the memory switch is off or the user opted out (so
  the switches are read by the write itself); the full-text index follows in the same statement
  (SQLite's triggers, PostgreSQL's generated column, InnoDB's and Oracle Text's own index) and
  so does its content-free ``episode_add`` audit event (the trigger ``dbm_episodes_audit_ai``
  of revision 0008, actor ``turn``). Oracle reads the two switches first (its ``INSERT ...
  SELECT`` returns no id).
* **Privacy as the profile's**: nothing is written while the user's memory switch is off or the
  user opted out (:func:`dbmemory.profile.set_user_memory_enabled`); :func:`delete_episodes`
  (called by the opt-out and by :func:`dbmemory.items.forget_user`) deletes them all. Audit
  events (``episode_add``, ``episode_delete``, ``episode_expire``) carry ids, sizes and counts,
  never the text.

Every writer runs in the caller's transaction; nothing here commits.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.core.keys import validate_component
from dbmemory.db.dialect.base import is_mysql, is_sqlite
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.schema import EPISODE_SEARCH_TABLE
from dbmemory.db.schema import episodes as _ep
from dbmemory.db.schema import memory_switches as _sw
from dbmemory.db.schema import user_settings as _us
from dbmemory.errors import InvalidArgumentError, StorageError
from dbmemory.items import audit
from dbmemory.items.model import DEFAULT_ORG, check_org, user_key_of
from dbmemory.items.settings import get_memory_switch, get_org_settings
from dbmemory.profile.detectors import OwnContacts, find_emails, own_contacts_from_text, scan
from dbmemory.profile.optout import is_user_memory_enabled
from dbmemory.store.units import write_unit

__all__ = [
    "EPISODE_CLASS",
    "MAX_EPISODE_CHARS",
    "Episode",
    "scrub_episode_text",
    "record_episode",
    "list_episodes",
    "count_episodes",
    "delete_episodes",
    "optimize_search_index",
    "purge_search_index_committing",
    "SEARCH_PURGE_STATEMENT",
    "expire_episodes",
    "episode_memory_allowed",
    "live_episode_rule",
]

EPISODE_CLASS = "episode"
"""Retention class of every episode (days: the ``episode_retention_days`` setting)."""

MAX_EPISODE_CHARS = 20_000
"""Longest text kept per side of an exchange, in characters (the rest is cut with ``…``)."""


@dataclass(frozen=True)
class Episode:
    """One stored episode.

    Attributes:
        episode_id: its id.
        chat_id: the chat (session) of the turn, or None.
        turn_at: the time of the turn (UTC).
        user_text: the user's message as stored (detectors applied).
        assistant_text: the answer as stored (detectors applied).
        expires_at: when it expires, or None.
    """

    episode_id: int
    chat_id: str | None
    turn_at: dt.datetime
    user_text: str
    assistant_text: str
    expires_at: dt.datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (times in ISO 8601)."""
        return {
            "episode_id": self.episode_id,
            "chat_id": self.chat_id,
            "turn_at": self.turn_at.isoformat(),
            "user_text": self.user_text,
            "assistant_text": self.assistant_text,
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
        }


def split_text(text: str | None, user_chars: int) -> tuple[str, str]:
    """``(user_text, assistant_text)`` of a stored ``episode_text``."""
    body = text or ""
    return body[:user_chars], body[user_chars + 1 :]


def to_episode(row: Any) -> Episode:
    m = row._mapping
    user, reply = split_text(m["episode_text"], int(m["user_chars"]))
    return Episode(int(m["episode_id"]), m["chat_id"], m["turn_at"], user, reply, m["expires_at"])


def live_episode_rule(now: Any) -> sa.ColumnElement[bool]:
    """SQL: the episode has not expired at ``now``."""
    return sa.or_(_ep.c.expires_at.is_(None), _ep.c.expires_at > now)


def _cut(text: str) -> str:
    text = text.replace("\x00", "")
    return text if len(text) <= MAX_EPISODE_CHARS else text[: MAX_EPISODE_CHARS - 1] + "\u2026"


def scrub_episode_text(user_id: str, user_text: str, assistant_text: str) -> tuple[str, str, int]:
    """Both texts after the deterministic detectors (the user's own contacts kept).

    Returns:
        ``(user_text, assistant_text, hits)``: the redacted texts (each at most
        :data:`MAX_EPISODE_CHARS` characters) and how many values were replaced.
    """
    own = OwnContacts.of(find_emails(user_id)).merged(own_contacts_from_text(user_text))
    user = scan(_cut(user_text), own=own)
    reply = scan(_cut(assistant_text), own=own)
    return user.text, reply.text, user.total + reply.total


def episode_memory_allowed(conn: Connection, user_id: str, *, org_id: str = DEFAULT_ORG) -> bool:
    """Whether the user's episodes may be written and searched: the memory switch is on and the
    user has not opted out (two ``SELECT``\\ s)."""
    return get_memory_switch(conn, user_id, org_id=org_id) and is_user_memory_enabled(conn, user_id)


def record_episode(
    conn: Connection,
    user_id: str,
    user_text: str,
    assistant_text: str,
    *,
    org_id: str = DEFAULT_ORG,
    chat_id: str | None = None,
    turn_at: dt.datetime | None = None,
    retention_days: int | None = None,
    check_switches: bool = True,
    now: dt.datetime | None = None,
) -> int | None:
    """Keep one exchange as an episode of ``user_id``, in the caller's transaction: one
    ``INSERT`` (its ``episode_add`` audit event, actor ``turn``, is written by the database in
    the same statement), plus one ``SELECT`` of the retention when ``retention_days`` is None.

    Args:
        conn: the caller's connection.
        user_id: the host's user id.
        user_text: the user's message (any text; NUL removed; cut at 20,000 characters).
        assistant_text: the answer.
        org_id: the organisation.
        chat_id: the chat (a store-key component), or None.
        turn_at: the time of the turn (replays: the recorded session time); default ``now``.
        retention_days: days it lives after ``turn_at``; None: the organisation's
            ``episode_retention_days`` (one more ``SELECT``).
        check_switches: write nothing when the memory switch is off or the user opted out
            (checked by the ``INSERT`` itself; False: the caller has just read them).
        now: the current time (tests); default UTC now.

    Returns:
        The new episode id, or None when nothing was written (switch off, opted out, or both
        texts blank).

    Raises:
        InvalidArgumentError: a text is not a ``str``, a bad time or retention.
        InvalidScopeError: invalid user, organisation or chat id.
        StorageError: the database failed.
    """
    check_arguments(conn=conn)
    org = check_org(org_id)
    key = user_key_of(user_id)
    for name, value in (("user_text", user_text), ("assistant_text", assistant_text)):
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{name} must be a str, got {type(value).__name__}")
    if chat_id is not None:
        validate_component(chat_id, "chat id")
    now = _v.check_now(now) or utcnow()
    when = _v.check_now(turn_at, "turn_at") or now
    if retention_days is not None and (
        isinstance(retention_days, bool) or not isinstance(retention_days, int) or retention_days < 1
    ):
        raise InvalidArgumentError("retention_days must be a whole number of days >= 1, or None")
    if not user_text.strip() and not assistant_text.strip():
        return None
    user, reply, _hits = scrub_episode_text(user_id, user_text, assistant_text)
    text = user + "\n" + reply
    try:
        days = retention_days if retention_days is not None else get_org_settings(conn, org).episode_retention_days
        if check_switches and conn.dialect.name == "oracle":
            if not episode_memory_allowed(conn, user_id, org_id=org):  # no INSERT ... SELECT id there
                return None
            check_switches = False
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading the memory switches") from exc
    row = {
        "org_id": org, "user_key": key, "chat_id": chat_id, "turn_at": when, "episode_text": text,
        "user_chars": len(user), "char_count": len(text), "retention_class": EPISODE_CLASS,
        "created_at": now, "expires_at": when + dt.timedelta(days=days),
    }
    with write_unit(conn, "keeping a conversation episode"):
        return _insert_episode(conn, row, key, check_switches)


def _insert_episode(conn: Connection, row: dict[str, Any], key: str, check_switches: bool) -> int | None:
    """The one ``INSERT`` of an episode (the trigger of revision 0008 writes its ``episode_add``
    audit event); with ``check_switches`` an ``INSERT ... SELECT`` that inserts nothing while the
    memory switch is off or the user opted out. The new id, or None."""
    if not check_switches:
        result = conn.execute(sa.insert(_ep).values(**row))
        new_key = result.inserted_primary_key
        assert new_key is not None  # an INSERT of one row always has it
        return int(new_key[0])
    switch_off = sa.exists().where(
        _sw.c.org_id == row["org_id"], _sw.c.user_key == key, _sw.c.memory_on == sa.false()
    )
    opted_out = sa.exists().where(_us.c.user_key == key, _us.c.memory_enabled == sa.false())
    source = sa.select(
        *(sa.literal(value, type_=_ep.c[name].type).label(name) for name, value in row.items())
    ).where(~switch_off, ~opted_out)
    stmt = sa.insert(_ep).from_select(list(row), source)
    if conn.dialect.insert_returning:
        return conn.execute(stmt.returning(_ep.c.episode_id)).scalar_one_or_none()
    result = conn.execute(stmt)  # MySQL/MariaDB: the id the server reports with the insert
    return int(result.lastrowid) if result.rowcount == 1 and result.lastrowid else None


def list_episodes(
    conn: Connection,
    user_id: str,
    *,
    org_id: str | None = DEFAULT_ORG,
    include_expired: bool = False,
    now: dt.datetime | None = None,
    limit: int | None = None,
) -> list[Episode]:
    """The user's episodes, oldest turn first (``org_id=None``: every organisation's).

    Raises:
        InvalidScopeError: invalid user or organisation id.
        StorageError: the database failed.
    """
    check_arguments(conn=conn)
    key = user_key_of(user_id)
    stmt = sa.select(_ep).where(_ep.c.user_key == key)
    if org_id is not None:
        stmt = stmt.where(_ep.c.org_id == check_org(org_id))
    if not include_expired:
        stmt = stmt.where(live_episode_rule(_v.check_now(now) or utcnow()))
    stmt = stmt.order_by(_ep.c.turn_at, _ep.c.episode_id)
    if limit is not None:
        stmt = stmt.limit(int(limit))
    try:
        return [to_episode(r) for r in conn.execute(stmt)]
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "listing conversation episodes") from exc


def count_episodes(conn: Connection, user_id: str, *, org_id: str | None = DEFAULT_ORG) -> int:
    """How many episodes the user has (expired ones not yet deleted included)."""
    check_arguments(conn=conn)
    stmt = sa.select(sa.func.count()).select_from(_ep).where(_ep.c.user_key == user_key_of(user_id))
    if org_id is not None:
        stmt = stmt.where(_ep.c.org_id == check_org(org_id))
    return int(conn.execute(stmt).scalar_one())


def optimize_search_index(conn: Connection) -> None:
    """Make deleted episodes' words leave the full-text index, in the caller's transaction.

    SQLite's FTS5 index marks a deleted row's terms in a new segment and keeps the old segments
    until they merge: the FTS5 ``optimize`` command merges them all now (it rewrites the
    index, so its cost grows with the index). PostgreSQL's ``tsvector`` is a column of the
    deleted row; nothing to do there and on Oracle (``SYNC (ON COMMIT)``). MySQL/MariaDB's
    InnoDB ``FULLTEXT`` index keeps the words of deleted rows in its auxiliary tables until
    ``OPTIMIZE TABLE dbm_episodes`` runs, a statement that commits, so it is not run here:
    :func:`purge_search_index_committing` runs it (``dbmemory users forget`` does after its
    commit; ``dbmemory db optimize-search`` at any time).
    """
    if is_sqlite(conn):
        conn.execute(sa.text(f"INSERT INTO {EPISODE_SEARCH_TABLE}({EPISODE_SEARCH_TABLE}) VALUES ('optimize')"))


SEARCH_PURGE_STATEMENT = "OPTIMIZE TABLE dbm_episodes"
"""What :func:`purge_search_index_committing` runs on MySQL/MariaDB (for messages and docs)."""


def purge_search_index_committing(engine: Engine) -> str | None:
    """Remove the words of deleted episodes from the full-text index now, **committing** (its
    own connection and transaction): for operators, after a forget or an opt-out.

    MySQL/MariaDB: InnoDB keeps a deleted row's words in the ``FULLTEXT`` index (its
    ``INNODB_FT_DELETED`` list filters them from searches) until the table is optimised;
    ``OPTIMIZE TABLE dbm_episodes`` rebuilds the table and its index (InnoDB: "recreate +
    analyze"), so the words are gone from the index's files. It needs only the table's
    ``SELECT`` and ``INSERT`` privileges; writes of new episodes wait while it runs (its time
    grows with the table). SQLite: the FTS5 ``optimize`` command (which the deletes already run
    in their transaction). PostgreSQL and Oracle keep no words of deleted rows: nothing runs.

    Returns:
        The statement that ran (:data:`SEARCH_PURGE_STATEMENT` on MySQL/MariaDB,
        ``"FTS5 optimize"`` on SQLite), or None when the backend needs none.

    Raises:
        InvalidArgumentError: ``engine`` is not an Engine.
        StorageError: the database refused or failed the statement (the message says what to
            run by hand).
    """
    check_arguments(engine=engine)
    if not (is_mysql(engine) or is_sqlite(engine)):
        return None
    action = "optimising the episodes' full-text index"
    try:
        if is_sqlite(engine):
            with engine.begin() as conn:
                optimize_search_index(conn)
            return "FTS5 optimize"
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(SEARCH_PURGE_STATEMENT).all()
            conn.commit()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, action, target=engine) from exc
    failed = [str(row[3]) for row in rows if str(row[2]).lower() == "error"]
    if failed:  # OPTIMIZE reports its failures as result rows, not as errors
        raise StorageError(
            f"{action} failed ({'; '.join(failed)}): the deleted episodes' words stay in the "
            f"index until '{SEARCH_PURGE_STATEMENT}' succeeds: run it again later"
        )
    return SEARCH_PURGE_STATEMENT


def delete_episodes(
    conn: Connection,
    user_id: str,
    *,
    org_id: str | None = None,
    actor: str = "admin",
    reason: str = "delete",
    now: dt.datetime | None = None,
) -> int:
    """Delete every episode of the user (``org_id=None``: in every organisation), with one
    content-free ``episode_delete`` audit event per organisation touched (the count and the
    characters). Returns how many were deleted."""
    check_arguments(conn=conn, actor=actor)
    key = user_key_of(user_id)
    rule = _ep.c.user_key == key
    if org_id is not None:
        rule = sa.and_(rule, _ep.c.org_id == check_org(org_id))
    now = _v.check_now(now) or utcnow()
    with write_unit(conn, "deleting conversation episodes"):
        groups = conn.execute(
            sa.select(_ep.c.org_id, sa.func.count(), sa.func.sum(_ep.c.char_count))
            .where(rule)
            .group_by(_ep.c.org_id)
        ).all()
        if not groups:
            return 0
        conn.execute(sa.delete(_ep).where(rule))
        optimize_search_index(conn)
        audit.record_many(
            conn,
            [
                audit.event_row(
                    "episode_delete", actor=actor, org_id=org, user_key=key, before=int(chars or 0),
                    detail=f"{int(n)} episodes, {reason}", now=now,
                )
                for org, n, chars in groups
            ],
        )
    return sum(int(n) for _, n, _ in groups)


def expire_episodes(conn: Connection, *, now: dt.datetime | None = None, actor: str = "expiry") -> int:
    """Delete the episodes whose ``expires_at`` is at or before ``now`` (one content-free
    ``episode_expire`` audit event per organisation and user). Returns how many."""
    check_arguments(conn=conn, actor=actor)
    now = _v.check_now(now) or utcnow()
    rule = sa.and_(_ep.c.expires_at.is_not(None), _ep.c.expires_at <= now)
    with write_unit(conn, "expiring conversation episodes"):
        groups = conn.execute(
            sa.select(_ep.c.org_id, _ep.c.user_key, sa.func.count(), sa.func.sum(_ep.c.char_count))
            .where(rule)
            .group_by(_ep.c.org_id, _ep.c.user_key)
        ).all()
        if not groups:
            return 0
        conn.execute(sa.delete(_ep).where(rule))
        optimize_search_index(conn)
        audit.record_many(
            conn,
            [
                audit.event_row(
                    "episode_expire", actor=actor, org_id=org, user_key=key, before=int(chars or 0),
                    detail=f"{int(n)} episodes", now=now,
                )
                for org, key, n, chars in groups
            ],
        )
    return sum(int(g[2]) for g in groups)
