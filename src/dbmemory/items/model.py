"""Dataclasses, constants and argument checks of :mod:`dbmemory.items` (no database access).

Every check runs before any SQL: a bad argument raises an
:class:`~dbmemory.errors.InvalidArgumentError` (or :class:`~dbmemory.errors.InvalidScopeError`
for ids) and the caller's transaction stays usable.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import unicodedata
from typing import Any, Literal

from dbmemory.core import checks as _v
from dbmemory.core.keys import validate_component
from dbmemory.errors import InvalidArgumentError
from dbmemory.profile.store import decode_user_id, encode_user_id

__all__ = [
    "DEFAULT_ORG",
    "MAX_ITEM_CHARS",
    "MAX_AUTO_ITEMS",
    "KINDS",
    "RETENTION_CLASSES",
    "EDITABLE_CLASSES",
    "ItemKind",
    "Item",
    "AuditEvent",
    "check_org",
    "user_key_of",
    "check_item_text",
    "check_kind",
    "check_class",
    "check_confidence",
    "normalise_text",
    "text_hash",
    "user_id_of",
]

DEFAULT_ORG = "default"
"""The organisation of a user whose host names none."""

MAX_ITEM_CHARS = 1000
"""Longest memory item, in characters (``VARCHAR2(1000 CHAR)`` on Oracle: at most 4,000 bytes
in AL32UTF8, so never a CLOB)."""

MAX_AUTO_ITEMS = 100
"""Most live auto items per user and organisation; at the limit the least recently used auto
item gives way (:func:`dbmemory.items.enforce_auto_item_limit`); manual items never do."""

ItemKind = Literal["manual", "auto"]
KINDS: tuple[str, ...] = ("manual", "auto")
"""``manual``: written by the user (or an admin); ``auto``: extracted by the model. The profile
is the third kind of memory and lives elsewhere (:mod:`dbmemory.profile`)."""

RETENTION_CLASSES: tuple[str, ...] = ("standard", "temporary", "permanent", "auto")
"""Retention classes. ``standard`` (default of manual items, 180 days) and ``temporary`` (60
days) have days editable per organisation; ``permanent`` never expires and is not editable;
``auto`` (default of auto items, 30 days, editable) is for auto items only."""

EDITABLE_CLASSES: tuple[str, ...] = ("standard", "temporary", "auto")
"""Classes whose days an organisation setting can change (``retention_<class>_days``)."""


@dataclasses.dataclass(frozen=True)
class Item:
    """One memory item, as stored.

    Attributes:
        item_id: the row id.
        org_id: organisation.
        user_id: the host's user id (decoded from the stored key).
        text: the fact, at most :data:`MAX_ITEM_CHARS` characters.
        kind: ``manual`` or ``auto``.
        retention_class: one of :data:`RETENTION_CLASSES`.
        confidence: 0..1 for auto items, None for manual ones.
        source_chat_id: the chat the fact came from (auto items), or None.
        source_turn_at: the time of that turn (UTC), or None.
        created_at, updated_at: UTC; ``updated_at`` moves on edit and restore.
        last_used_at: last injection into a conversation (UTC), or None (never used).
        expires_at: when the expiry soft-deletes it (UTC); None: never (``permanent``).
        deleted_at: soft delete time (UTC); None: live.
        version: 1 on create, +1 per edit, delete or restore.
        char_count: ``len(text)``.
        text_hash: sha256 hex of :func:`normalise_text` of the text (duplicate checks).
    """

    item_id: int
    org_id: str
    user_id: str
    text: str
    kind: str
    retention_class: str
    confidence: float | None
    source_chat_id: str | None
    source_turn_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime
    last_used_at: dt.datetime | None
    expires_at: dt.datetime | None
    deleted_at: dt.datetime | None
    version: int
    char_count: int = 0
    text_hash: str = ""

    @property
    def is_auto(self) -> bool:
        """True for an auto item (the "auto" badge of a listing)."""
        return self.kind == "auto"

    @property
    def is_deleted(self) -> bool:
        """True once soft-deleted (restorable until purged)."""
        return self.deleted_at is not None

    def age_days(self, now: dt.datetime | None = None) -> float:
        """Days since creation (fractions kept)."""
        now = now or dt.datetime.now(dt.timezone.utc)
        return (now - self.created_at).total_seconds() / 86400

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (timestamps as ISO 8601 text, UTC)."""
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, dt.datetime):
                out[key] = value.isoformat()
        out["is_auto"] = self.is_auto
        return out


@dataclasses.dataclass(frozen=True)
class AuditEvent:
    """One audit event (a row of ``dbm_audit_events``; never any memory text).

    Attributes:
        event_id: row id (increasing).
        created_at: UTC.
        action: e.g. ``item_add``, ``item_delete``, ``setting_set``, ``create`` (a file).
        actor: who did it (text given by the caller).
        org_id: organisation, or None (file events).
        user_id: subject user (decoded), or None.
        item_id: memory item, or None.
        store_key, file_path: store and file of a file event, or None.
        chars_before, chars_after: sizes in characters, or None.
        detail: short content-free detail (a setting's name and values, a class), or None.
        session_user: the database login of the session that wrote the row, filled by the
            database (PostgreSQL ``session_user``; MySQL/MariaDB ``USER()``,
            ``user@client-host``, the name the client sent, which an anonymous account does
            not check; Oracle ``SESSION_USER``): the account of the application or
            administrator, not data of the memory user. None on SQLite (no logins) and for
            events written before the column existed.
    """

    event_id: int
    created_at: dt.datetime
    action: str
    actor: str
    org_id: str | None
    user_id: str | None
    item_id: int | None
    store_key: str | None
    file_path: str | None
    chars_before: int | None
    chars_after: int | None
    detail: str | None
    session_user: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        out = dataclasses.asdict(self)
        out["created_at"] = self.created_at.isoformat()
        return out


def check_org(org_id: object) -> str:
    """An organisation id: a store-key component (1-200 of ``[A-Za-z0-9_.-]``).

    Raises:
        InvalidScopeError: breaks :func:`dbmemory.core.keys.validate_component`'s rule.
    """
    return validate_component(org_id, "organisation id")


def user_key_of(user_id: object) -> str:
    """The stored key of a host user id (:func:`dbmemory.profile.store.encode_user_id`).

    Raises:
        InvalidScopeError: not a string, empty, or too long once encoded.
    """
    return encode_user_id(user_id)


def user_id_of(user_key: str | None) -> str | None:
    """The host user id of a stored key (None stays None; an undecodable key is returned
    as is)."""
    if user_key is None:
        return None
    try:
        return decode_user_id(user_key)
    except Exception:  # noqa: BLE001 - a key written by hand: show it as stored
        return user_key


def check_item_text(text: object) -> str:
    """Item text: a non-blank ``str``, no NUL or lone surrogate, at most
    :data:`MAX_ITEM_CHARS` characters once stripped of surrounding white space. Returns it
    stripped."""
    _v.check_text(text, "item text")
    assert isinstance(text, str)
    stripped = text.strip()
    if not stripped:
        raise InvalidArgumentError("item text is empty: pass a short fact such as 'User prefers tea'")
    if len(stripped) > MAX_ITEM_CHARS:
        raise InvalidArgumentError(
            f"item text is {len(stripped):,} characters long; the limit is {MAX_ITEM_CHARS:,}: "
            "split it into shorter facts"
        )
    return stripped


def check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise InvalidArgumentError(
            f"item kind {_v.show(kind)} is not one of {', '.join(KINDS)}: pass 'manual' or 'auto'"
        )
    return str(kind)


def check_class(retention_class: object, kind: str) -> str:
    if not isinstance(retention_class, str) or retention_class not in RETENTION_CLASSES:
        raise InvalidArgumentError(
            f"retention class {_v.show(retention_class)} is not one of "
            f"{', '.join(RETENTION_CLASSES)}: pick one of them",
            code="invalid_retention_class",
        )
    if retention_class == "auto" and kind != "auto":
        raise InvalidArgumentError(
            "retention class 'auto' is for auto items only: give a manual item "
            "'standard', 'temporary' or 'permanent'",
            code="invalid_retention_class",
        )
    return retention_class


def check_confidence(confidence: object, kind: str) -> float | None:
    if kind == "manual":
        if confidence is not None:
            raise InvalidArgumentError(
                "a manual item has no confidence: leave confidence out (None)"
            )
        return None
    if confidence is None:
        return None
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not (
        0.0 <= float(confidence) <= 1.0
    ):
        raise InvalidArgumentError(
            f"confidence {_v.show(confidence)} must be a number from 0 to 1: pass e.g. 0.9"
        )
    return round(float(confidence), 3)


def normalise_text(text: str) -> str:
    """The text duplicate checks compare: NFKC, case-folded, white space collapsed, trailing
    ``.``/``!`` removed (``"User  prefers tea."`` == ``"user prefers TEA"``)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).rstrip(".! ")


def text_hash(text: str) -> str:
    """sha256 hex of :func:`normalise_text` (kept on the item row only, never in audit rows)."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()
