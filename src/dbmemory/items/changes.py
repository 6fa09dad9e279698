"""What one item extraction run plans (:class:`Change`) and reports (:class:`ExtractionResult`):
values shared by the extraction and the code that writes its changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbmemory.profile.calls import ModelCall

__all__ = [
    "ExtractionResult",
    "Change",
    "MANUAL_ITEM",
]

MANUAL_ITEM = "manual_item"
"""Reason of an ``update`` the write refused (:attr:`ExtractionResult.refused_updates`): its
item is a ``manual`` one, written by the user or an admin, which an extraction never rewrites;
the fact is added as an auto item beside it instead."""


@dataclass
class ExtractionResult:
    """What one :func:`~dbmemory.items.extract.extract_items` run did.

    Attributes:
        outcome: ``"written"`` (at least one item added or updated), ``"nothing"`` (no fact
            survived, or all were the same as kept items), ``"skipped"`` (skip window),
            ``"disabled"`` (memory switch off), ``"rejected"`` (the extraction answer was not a
            JSON array, or the model call failed), ``"scrub_veto"`` or ``"error"``.
        reason: detail, or None.
        added: ids of the items added.
        updated: ids of the items whose text an ``update`` replaced (auto items only).
        refused_updates: ``update`` decisions not written, per reason: :data:`MANUAL_ITEM` (the
            item is manual; the fact was added as an auto item beside it, its id in ``added``).
        same: ids of the items a candidate repeated (marked used).
        evicted: how many auto items the 100-item rule removed to make room.
        dropped: candidates not written, per reason (see
            :data:`~dbmemory.items.runtime_metrics.DROP_REASONS`).
        calls: every model call, in order.
        summary: the outcome of the profile summary fold when one ran, else None.
    """

    outcome: str = "error"
    reason: str | None = None
    added: list[Any] = field(default_factory=list)
    updated: list[Any] = field(default_factory=list)
    same: list[Any] = field(default_factory=list)
    evicted: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    refused_updates: dict[str, int] = field(default_factory=dict)
    calls: list[ModelCall] = field(default_factory=list)
    summary: str | None = None

    def drop(self, reason: str, count: int = 1) -> None:
        """Count ``count`` candidates not written for ``reason``."""
        if count:
            self.dropped[reason] = self.dropped.get(reason, 0) + count

    def refuse_update(self, reason: str) -> None:
        """Count one ``update`` not written for ``reason``."""
        self.refused_updates[reason] = self.refused_updates.get(reason, 0) + 1


@dataclass(frozen=True)
class Change:
    """One planned item write.

    Attributes:
        action: ``"add"``, ``"update"`` or ``"same"``.
        text: the fact's text (scrubbed and checked).
        confidence: the model's confidence.
        item: the existing item for ``update``/``same``, else None.
    """

    action: str
    text: str
    confidence: float
    item: Any = None


