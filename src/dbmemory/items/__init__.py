"""Memory items, organisation settings, organisation memory, the memory switch and the audit
trail: the data layer.

Contract (every function takes the caller's ``Connection`` first, joins its transaction, never
commits; validates before SQL; raises :class:`~dbmemory.errors.DbMemoryError` subclasses with
stable codes; writes one content-free audit event per change in the same transaction):

Items (:mod:`dbmemory.items.store`), per ``(org_id, user_id)``; ``org_id`` defaults to
``"default"``; ``user_id`` is the host's id (any text, encoded like the profile's):

* ``add_item(conn, user_id, text, *, org_id, kind='manual'|'auto', retention_class=None,
  confidence=None, source_chat_id=None, source_turn_at=None, actor, now=None) -> Item``;
  an auto item at the limit (100 live auto items) first evicts the least recently used auto
  item; manual items never give way.
* ``edit_item(conn, user_id, item_id, text=None, *, org_id, retention_class=None,
  confidence=None, expected_version=None, actor) -> Item`` (compare-and-set with
  ``expected_version``; kind stays).
* ``delete_item`` (soft: stops use at once), ``restore_item`` (until purged), ``clear_items``
  (soft-deletes all, returns count), ``purge_items(conn, *, org_id, user_id, item_ids,
  include_grace=False)`` (for good; by default only past the grace period).
* ``list_items(conn, user_id, *, org_id='default', include_deleted=False, kind=None) ->
  list[Item]`` (live only by default: not deleted, not expired; oldest first),
  ``get_item``, ``count_items``.
* ``mark_items_used(engine_or_conn, item_ids, *, now=None, settings=None)``: ``last_used_at``,
  and a live item's ``expires_at`` moves to the use + its class's days (what is used is kept);
  pass the **Engine** from a
  turn: it commits in its own short transaction, never holds a lock in the turn's one, and
  logs instead of raising.
* ``enforce_auto_item_limit(conn, user_id, *, org_id, limit=100, incoming=0)``.
* :class:`Item` fields: item_id, org_id, user_id, text, kind, retention_class, confidence,
  source_chat_id, source_turn_at, created_at, updated_at, last_used_at, expires_at, deleted_at,
  version, char_count, text_hash (sha256 of :func:`normalise_text`, for duplicate checks);
  ``is_auto``, ``to_dict()``.

Settings and switches (:mod:`dbmemory.items.settings`):

* ``get_org_settings(conn, org_id) -> OrgSettings`` (defaults filled in: confidence_threshold
  0.8, retention_standard_days 180, retention_temporary_days 60, retention_auto_days 30,
  grace_days 30, selection_threshold 20, top_k 10, item_token_budget 1000,
  org_memory_token_budget 1000, summary_every_items 10, skip_window_seconds 300,
  extraction_model '' = the turn's model, embedding_model '' = BM25);
  ``set_org_setting(conn, org_id, name, value, *, actor, is_admin=True)``.
* Retention classes: ``standard``, ``temporary``, ``auto`` (days editable), ``permanent``.
* ``get_memory_switch(conn, user_id, *, org_id) -> bool`` / ``set_memory_switch(conn, user_id,
  on, *, org_id, actor)``: off stops extraction and injection, keeps items and profile.
  Not the profile opt-out (``dbmemory.profile.set_user_memory_enabled``), which deletes the
  profile.

Organisation memory (:mod:`dbmemory.items.org`): ``get_org_memory(conn, org_id) -> str``,
``read_org_memory`` (with version and tokens), ``set_org_memory(conn, org_id, text, *,
is_admin, actor)`` (``NotAdminError`` unless ``is_admin is True``; ``over_budget`` error with the
budget in the message); stored in ``reserved:org:<org_id>``, out of every agent's reach.

Audit (:mod:`dbmemory.items.audit`): ``audit_events(conn, *, org_id=None, user_id=None,
action=None, since=None, until=None, limit=1000) -> list[AuditEvent]`` newest first; view
``dbm_audit_report_v``.

Retention (:mod:`dbmemory.items.retention`): ``expire_items``, ``run_item_retention`` (expiry by
class, then the grace-period purge), run by ``dbmemory expire`` and the SQL jobs.

Extraction and selection, for callers that run their own turn loop (the parts ``run_turn``
uses; mem0's ``add`` and ``search``):

* ``extract_items(engine, *, org_id, user_id, chat_id, user_message, assistant_message,
  complete, model, now=None, ...) -> ExtractionResult`` (:mod:`dbmemory.items.extract`): one
  exchange's facts as auto items (model call outside any transaction; each write in a short
  transaction of its own, so it takes the **Engine**).
* ``select_items(items, question, *, threshold=20, top_k=10, embedding_model=None, ...) ->
  Selection`` (:mod:`dbmemory.items.select`): the items to inject for a question (all of them
  under ``threshold``, else the ``top_k`` most relevant by BM25 or embeddings).
* ``rank_items(items, question, *, limit=None, embedding_model=None) -> [(item, score)]``: every
  item with its score, best first, at any count (a search with scores).

Administration (:mod:`dbmemory.items.admin`): ``export_user(conn, user_id, *, org_id) -> dict``
(JSON-able DSAR export) and ``forget_user(conn, user_id, *, org_id, actor) -> dict``.
"""

from __future__ import annotations

from dbmemory.items.admin import export_user, forget_user
from dbmemory.items.audit import ACTIONS, audit_events
from dbmemory.items.extract import extract_items
from dbmemory.items.model import (
    DEFAULT_ORG,
    EDITABLE_CLASSES,
    KINDS,
    MAX_AUTO_ITEMS,
    MAX_ITEM_CHARS,
    RETENTION_CLASSES,
    AuditEvent,
    Item,
    normalise_text,
    text_hash,
)
from dbmemory.items.org import (
    ORG_MEMORY_PATH,
    OrgMemory,
    get_org_memory,
    org_memory_store_key,
    read_org_memory,
    set_org_memory,
)
from dbmemory.items.retention import expire_items, run_item_retention, run_item_retention_committing
from dbmemory.items.select import Selection, rank_items, select_items
from dbmemory.items.settings import (
    DEFAULTS,
    NotAdminError,
    OrgSettings,
    get_memory_switch,
    get_org_settings,
    set_memory_switch,
    set_org_setting,
)
from dbmemory.items.store import (
    add_item,
    clear_items,
    count_items,
    delete_item,
    edit_item,
    enforce_auto_item_limit,
    get_item,
    list_items,
    purge_items,
    restore_item,
)
from dbmemory.items.usage import mark_items_used
from dbmemory.items.user_rows import CONTEXT_USER_KEYS

__all__ = [
    "ACTIONS",
    "CONTEXT_USER_KEYS",
    "DEFAULTS",
    "DEFAULT_ORG",
    "EDITABLE_CLASSES",
    "KINDS",
    "MAX_AUTO_ITEMS",
    "MAX_ITEM_CHARS",
    "ORG_MEMORY_PATH",
    "RETENTION_CLASSES",
    "AuditEvent",
    "Item",
    "NotAdminError",
    "OrgMemory",
    "OrgSettings",
    "Selection",
    "add_item",
    "audit_events",
    "clear_items",
    "count_items",
    "delete_item",
    "edit_item",
    "enforce_auto_item_limit",
    "expire_items",
    "export_user",
    "extract_items",
    "forget_user",
    "get_item",
    "get_memory_switch",
    "get_org_memory",
    "get_org_settings",
    "list_items",
    "mark_items_used",
    "normalise_text",
    "org_memory_store_key",
    "purge_items",
    "rank_items",
    "read_org_memory",
    "restore_item",
    "run_item_retention",
    "run_item_retention_committing",
    "select_items",
    "set_memory_switch",
    "set_org_memory",
    "set_org_setting",
    "text_hash",
]


def __dir__() -> list[str]:
    # the public API only, never the helper names this module imports
    return sorted(__all__)
