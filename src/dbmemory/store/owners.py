"""Reserved stores are written only through their owners' API.

The package's own stores (``reserved:profile:...``, ``reserved:items:...``,
``reserved:org:...``; :mod:`dbmemory.core.keys`) keep rules the generic file paths do not know:
the profile's budget and scrub, the organisation memory's admin decision, token budget, scrub and
``org_memory_set`` audit event. So every generic write, delete and clear of a file
(:mod:`dbmemory.store.files`, :mod:`dbmemory.store.moves`, and through them
:mod:`dbmemory.store.trees`, the CLI ``files`` commands and the integrations) refuses such a store
with :class:`ReservedStoreError`, naming the owner's command. The owner runs its writes inside
:func:`owner_writes`, which lets exactly its own kind through (a context variable: per thread
and per task).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from dbmemory.core.keys import RESERVED_SCOPE, is_reserved_key
from dbmemory.errors import InvalidScopeError

__all__ = ["OWNER_COMMANDS", "ReservedStoreError", "owner_writes", "refuse_reserved"]

OWNER_COMMANDS: dict[str, str] = {
    "profile": "dbmemory.profile.write_profile or 'dbmemory profile import'",
    "items": "dbmemory.items.add_item / delete_item or 'dbmemory items add/rm'",
    "org": "dbmemory.items.set_org_memory or 'dbmemory org-memory edit --admin' "
    "(or 'dbmemory files put --admin')",
}
"""The owner's API and command of each reserved kind, named by :class:`ReservedStoreError`."""

_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("dbmemory_owner", default=None)


class ReservedStoreError(InvalidScopeError):
    """A generic file operation on a reserved store (code ``reserved_store``)."""

    code = "reserved_store"


@contextlib.contextmanager
def owner_writes(kind: str) -> Iterator[None]:
    """Let the generic file functions write stores of reserved ``kind`` inside the block (only
    for the owner of that kind: :mod:`dbmemory.profile.store`, :mod:`dbmemory.items.org`)."""
    token = _OWNER.set(kind)
    try:
        yield
    finally:
        _OWNER.reset(token)


def refuse_reserved(store_key: str, action: str) -> None:
    """Raise :class:`ReservedStoreError` when ``store_key`` is reserved and the running code is
    not its owner (:func:`owner_writes`).

    Args:
        store_key: the locked store's key.
        action: what was refused, for the message (``"write"``, ``"delete"``, ``"clear"``).
    """
    if not is_reserved_key(store_key):
        return
    kind = store_key.split(":", 2)[1] if store_key.count(":") >= 1 else ""
    if _OWNER.get() == kind:
        return
    owner = OWNER_COMMANDS.get(kind, "the owner's API")
    raise ReservedStoreError(
        f"store {store_key!r} is in the {RESERVED_SCOPE} namespace dbmemory keeps for its own "
        f"stores; the generic file functions cannot {action} it (its owner keeps the budget, "
        f"the scrub and the audit): use {owner}",
        code="reserved_store",
    )
