"""Organisation memory: one text per organisation, written by administrators only, injected
before every user's own memory.

It is the file :data:`ORG_MEMORY_PATH` of the store ``reserved:org:<org_id>``
(:func:`dbmemory.core.keys.reserved_store_key`), in the package's reserved namespace: no agent
configuration, store code, ``use_store``/``for_store`` call or MEMORY tool path can name that
store, so no agent can read or write it. Writes go through :mod:`dbmemory.store.files` (caps, locks,
the file audit events) and are expiry-exempt; each also writes an ``org_memory_set`` audit
event with the organisation and the sizes.

:func:`set_org_memory` takes the host's ``is_admin`` decision (dbmemory has no users or roles
of its own) and refuses a text over the organisation's ``org_memory_token_budget`` with the
budget in the message. An empty text deletes the organisation memory.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core import checks as _v
from dbmemory.core.arguments import check_arguments
from dbmemory.core.keys import RESERVED_SCOPE, reserved_store_key
from dbmemory.core.model import StoreRef
from dbmemory.db import schema
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.errors import InvalidArgumentError
from dbmemory.items import audit
from dbmemory.items.model import DEFAULT_ORG, check_org
from dbmemory.items.settings import NotAdminError, get_org_settings
from dbmemory.profile.tokens import count_tokens
from dbmemory.store.files import put_file
from dbmemory.store.locks import find_store_id
from dbmemory.store.moves import delete_file
from dbmemory.store.owners import owner_writes
from dbmemory.store.units import write_unit

__all__ = [
    "ORG_MEMORY_PATH",
    "MAX_ORG_MEMORY_CHARS",
    "OrgMemory",
    "org_memory_store_key",
    "get_org_memory",
    "read_org_memory",
    "set_org_memory",
]

ORG_MEMORY_PATH = "/memories/organisation.md"
"""Path of the organisation memory inside its reserved store."""

MAX_ORG_MEMORY_CHARS = 100_000
"""Most characters of an organisation memory (the default file cap), besides its token budget."""

TOKEN_MODEL = "gpt-4o"
"""Tokenizer that counts the budget (o200k, offline: :func:`dbmemory.profile.tokens.count_tokens`)."""


@dataclasses.dataclass(frozen=True)
class OrgMemory:
    """An organisation memory.

    Attributes:
        org_id: the organisation.
        text: the text ('' when none).
        version: file version (0 when none).
        updated_at: last change (UTC), or None.
        tokens: tokens of ``text`` (the budget's unit).
    """

    org_id: str
    text: str
    version: int
    updated_at: dt.datetime | None
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["updated_at"] = None if self.updated_at is None else self.updated_at.isoformat()
        return out


def org_memory_store_key(org_id: str = DEFAULT_ORG) -> str:
    """``reserved:org:<org_id>``."""
    return reserved_store_key("org", check_org(org_id))


def _ref(org: str) -> Any:
    return StoreRef(
        store_key=org_memory_store_key(org), scope=RESERVED_SCOPE, agent_code=None, store_code=None
    )


def _count(text: str) -> int:
    return count_tokens(text, TOKEN_MODEL)


def read_org_memory(conn: Connection, org_id: str = DEFAULT_ORG) -> OrgMemory:
    """The organisation memory with its version and size (one ``SELECT``, no lock, no touch)."""
    check_arguments(conn=conn)
    org = check_org(org_id)
    stmt = (
        sa.select(schema.files.c.body, schema.files.c.version_no, schema.files.c.updated_at)
        .select_from(schema.stores.join(schema.files, schema.files.c.store_id == schema.stores.c.store_id))
        .where(schema.stores.c.store_key == org_memory_store_key(org), schema.files.c.file_path == ORG_MEMORY_PATH)
    )
    try:
        row = conn.execute(stmt).first()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "reading the organisation memory") from exc
    if row is None:
        return OrgMemory(org, "", 0, None, 0)
    text = row.body or ""
    return OrgMemory(org, text, int(row.version_no), row.updated_at, _count(text))


def get_org_memory(conn: Connection, org_id: str = DEFAULT_ORG) -> str:
    """The organisation memory's text ('' when none). Any caller may read it (it is injected
    into every conversation of the organisation); only :func:`set_org_memory` writes it."""
    return read_org_memory(conn, org_id).text


def set_org_memory(
    conn: Connection,
    org_id: str,
    text: str,
    *,
    is_admin: bool,
    actor: str,
) -> OrgMemory:
    """Replace the organisation memory (administrators only), in the caller's transaction.

    Args:
        conn: the caller's connection (joins its transaction; commits nothing).
        org_id: the organisation.
        text: the whole new text; '' deletes the organisation memory.
        is_admin: the host's decision that ``actor`` administers ``org_id``; False is refused.
        actor: who writes it (recorded in the audit events).

    Returns:
        The :class:`OrgMemory` after the write.

    Raises:
        NotAdminError: ``is_admin`` is not True (code ``not_admin``); nothing written.
        InvalidArgumentError: text not a string, with NUL, over 100,000 characters, or over the
            organisation's ``org_memory_token_budget`` tokens (code ``over_budget``; the message
            gives the count and the budget).
        InvalidScopeError: invalid organisation id.
    """
    check_arguments(conn=conn, actor=actor)
    org = check_org(org_id)
    if is_admin is not True:
        raise NotAdminError(
            f"only an administrator of organisation {org!r} can change its organisation memory: "
            "the host decides who is one and passes is_admin=True"
        )
    _v.check_text(text, "organisation memory", max_chars=MAX_ORG_MEMORY_CHARS)
    budget = get_org_settings(conn, org).org_memory_token_budget
    tokens = _count(text)
    if tokens > budget:
        raise InvalidArgumentError(
            f"organisation memory is {tokens:,} tokens; the budget of organisation {org!r} is "
            f"{budget:,} tokens (setting org_memory_token_budget): shorten it or raise the budget",
            code="over_budget",
        )
    before = read_org_memory(conn, org)
    with write_unit(conn, f"writing the organisation memory of {org}"), owner_writes("org"):
        if text == "":
            store_id = find_store_id(conn, org_memory_store_key(org))
            if store_id is not None:
                delete_file(conn, store_id, ORG_MEMORY_PATH, actor=actor)
        else:
            put_file(conn, _ref(org), ORG_MEMORY_PATH, text, expiry_exempt=True, actor=actor)
        audit.record(
            conn,
            "org_memory_set",
            actor=actor,
            org_id=org,
            store_key=org_memory_store_key(org),
            before=len(before.text),
            after=len(text),
        )
    return read_org_memory(conn, org)
