"""Which of a user's organisation-less stores are shared, for :func:`dbmemory.items.export_user`
and :func:`dbmemory.items.forget_user`.

Stores carry no organisation, items, episodes, marks and switches do. Two rules follow:

* **A session store shared with other users is nobody's own.** The session stores of a user are
  those of the chats the user's items, episodes and extraction marks record
  (:mod:`dbmemory.items.user_rows`); a chat that the same sources record for another user too
  (in any organisation: a group chat, two speakers) is *shared*. An export lists such a store
  by key with :data:`SHARED_WITH_USERS` and no content; a forget keeps it.
* **The organisation-less data of a user who is held in other organisations stays.** The user,
  context, LangGraph, items and profile stores and the profile opt-out (``dbm_user_settings``)
  have no organisation. A forget scoped to one organisation deletes them only when the user
  holds nothing (items, episodes, marks, switches) in any other organisation; otherwise it keeps
  them (:data:`HELD_IN_OTHER_ORGS`) and names those organisations. A session store whose chat is
  recorded for this user in another organisation too is kept alike. A forget in every
  organisation (``org_id=None``) has no other organisation and deletes them. An export scoped to
  one organisation lists them with their content and the same note.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.db.schema import episodes as _ep
from dbmemory.db.schema import item_marks as _mk
from dbmemory.db.schema import items as _it
from dbmemory.db.schema import memory_switches as _sw

__all__ = [
    "SHARED_WITH_USERS",
    "HELD_IN_OTHER_ORGS",
    "Sharing",
    "user_orgs",
    "sharing_of",
]

SHARED_WITH_USERS = "shared with other users"
"""Why a session store is not exported with content and not deleted: its chat is recorded for
another user too."""

HELD_IN_OTHER_ORGS = "the user has data in other organisations"
"""Why an organisation-less store is kept by a forget scoped to one organisation."""

_SESSION = "session:"
_MARK = "chat:"


def user_orgs(conn: Connection, user_key: str) -> list[str]:
    """The organisations in which the user (encoded id) has items, episodes, marks or a memory
    switch, sorted."""
    found: set[str] = set()
    for table in (_it, _ep, _mk, _sw):
        stmt = sa.select(table.c.org_id).where(table.c.user_key == user_key).distinct()
        found.update(str(v) for (v,) in conn.execute(stmt))
    return sorted(found)


class Sharing(NamedTuple):
    """What of one user's data another user or organisation also holds.

    Attributes:
        other_orgs: the other organisations holding the user (empty for a forget or export in
            every organisation).
        shared_chats: chat ids recorded for another user too (any organisation).
        other_org_chats: chat ids recorded for this user in another organisation too.
    """

    other_orgs: tuple[str, ...]
    shared_chats: frozenset[str]
    other_org_chats: frozenset[str]

    def reason(self, store_key: str, kind: str) -> str | None:
        """Why the store (one of the user's, of ``kind``) is kept, or None when it is only the
        user's in this scope."""
        if kind == "session":
            chat = store_key[len(_SESSION) :]
            if chat in self.shared_chats:
                return SHARED_WITH_USERS
            return HELD_IN_OTHER_ORGS if chat in self.other_org_chats else None
        return HELD_IN_OTHER_ORGS if self.other_orgs else None


def _chat_rows(chats: list[str]) -> list[Any]:
    marks = [_MARK + c for c in chats]
    return [
        sa.select(_it.c.source_chat_id, _it.c.org_id, _it.c.user_key).where(_it.c.source_chat_id.in_(chats)),
        sa.select(_ep.c.chat_id, _ep.c.org_id, _ep.c.user_key).where(_ep.c.chat_id.in_(chats)),
        sa.select(_mk.c.mark_key, _mk.c.org_id, _mk.c.user_key).where(_mk.c.mark_key.in_(marks)),
    ]


def sharing_of(
    conn: Connection, user_key: str, org_id: str | None, chats: Iterable[str]
) -> Sharing:
    """The :class:`Sharing` of the user (encoded id) in ``org_id`` (``None``: every
    organisation), for the user's chat ids ``chats``."""
    others = () if org_id is None else tuple(o for o in user_orgs(conn, user_key) if o != org_id)
    shared: set[str] = set()
    elsewhere: set[str] = set()
    wanted = sorted(set(chats))
    for i in range(0, len(wanted), 500):
        for n, stmt in enumerate(_chat_rows(wanted[i : i + 500])):
            for value, org, key in conn.execute(stmt.distinct()):
                chat = str(value)[len(_MARK) :] if n == 2 else str(value)
                if key != user_key:
                    shared.add(chat)
                elif org_id is not None and org != org_id:
                    elsewhere.add(chat)
    return Sharing(others, frozenset(shared), frozenset(elsewhere))
