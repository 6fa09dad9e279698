"""Auto extraction of memory items after a turn.

:func:`extract_items` runs in the post-processing, after the profile consolidation, in short
transactions of its own (none is open during a model call). Steps:

1. **Switch, forget mark and skip window**: the user's switch row is locked (created when
   missing: a forget committed later then changes a row the write's snapshot sees) and the
   forget mark read (:func:`dbmemory.profile.optout.forget_mark`: the newest ``user_forget``
   audit event of the user in the organisation); nothing when the switch is off; nothing when the
   same chat had an extraction less than the skip window (default 5 minutes) before this turn's
   time, so a burst of messages is extracted once. The window is claimed atomically in
   ``dbm_item_marks`` (``chat:<chat id>``) before the model call: of two turns of one chat
   racing, one extracts.
2. **Extract**: one model call proposes facts with a confidence (JSON, see
   :mod:`dbmemory.items.extract_prompts`); candidates under the organisation's threshold
   (default 0.8) are dropped; an answer that is not a JSON array is ``rejected``.
3. **Scrub** (always) with the profile's content policy: ``CLEAN`` or a JSON array that keeps,
   rewrites or drops each fact; anything else (an error included) vetoes every candidate
   (``scrub_veto``: fails closed). Then the profile's **deterministic detectors**
   (:func:`dbmemory.profile.detectors.scan`) run on exactly the text about to be written; a fact
   with a hit is dropped, not redacted, and the hit counted. The decision step (4) never changes
   a text, so what is written is what the scrub and the detectors passed.
4. **Reconcile**: a candidate whose normalised text (:func:`~dbmemory.items.extract_prompts.normalise`)
   equals a live item's is the ``same`` item (no model call); the others go to one model call
   that answers ``new``, ``same`` or ``update`` per fact. An ``update`` replaces an auto item's
   text, so contradictory auto items never coexist; an extraction never rewrites a ``manual``
   item (what the user or an admin wrote): that fact is added as an auto item beside it and the
   refused update counted (``refused_updates``, reason ``manual_item``). A fact the model leaves undecided, or all of
   them when that call fails, is not written (never risk a contradiction).
5. **Write** in one transaction, after locking the switch row: nothing when the switch is off
   now or the forget mark changed (the user was forgotten, :func:`dbmemory.items.forget_user`,
   since step 1: ``disabled``, reason ``user forgotten``); a forget not committed yet takes the
   same lock first, so it waits for the write and deletes what it wrote. Updates are
   compare-and-set on the item's version read in
   step 4 (a changed item drops the fact as ``conflict``); new facts are added as ``auto`` items
   (retention default of the kind), then the 100-auto-items rule
   (:func:`dbmemory.items.enforce_auto_item_limit`) lets the least recently used auto items give
   way, never a manual one.
6. **Profile summary** (:func:`dbmemory.items.summary.fold_items`): when ``items per summary``
   items changed since the last fold, they are folded into the profile through the profile's
   rewrite path (compare-and-set).

Failures are logged and counted (:mod:`dbmemory.items.runtime_metrics`), never raised:
:func:`extract_items` returns an :class:`ExtractionResult` whatever happens.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dbmemory.items import extract_prompts as prompts
from dbmemory.items import runtime_data as data
from dbmemory.items.changes import Change, ExtractionResult
from dbmemory.items.extract_prompts import Candidate, ParseError, normalise
from dbmemory.items.runtime_metrics import item_metrics
from dbmemory.items.select import item_id
from dbmemory.items.summary import fold_items
from dbmemory.profile.calls import ModelCall
from dbmemory.profile.detectors import OwnContacts, find_emails, own_contacts_from_text, scan
from dbmemory.profile.metrics import default_metrics

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from dbmemory.items.runtime_metrics import ItemMetrics

__all__ = [
    "plan_changes",
    "screen_candidates",
    "extract_items",
    "Stop",
]

log = logging.getLogger(__name__)


class Stop(Exception):
    def __init__(self, outcome: str, reason: str | None = None) -> None:
        super().__init__(outcome)
        self.outcome, self.reason = outcome, reason


Complete = Callable[..., Any]


def _call(
    result: ExtractionResult,
    metrics: ItemMetrics,
    complete: Complete,
    model: str,
    purpose: str,
    messages: list[dict[str, str]],
    timeout: float | None,
) -> str | None:
    """One model call; its text, or None when it raised or was cut off (recorded and counted)."""
    started = time.perf_counter()
    error = None
    reply = None
    try:
        reply = complete(model, messages, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - every model failure is handled by the caller
        error = type(exc).__name__
        log.warning("item %s call to %s failed: %s", purpose, model, error)
    usage = getattr(reply, "usage", None)
    finish = getattr(reply, "finish_reason", None)
    result.calls.append(
        ModelCall(
            purpose=purpose,
            model=model,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            seconds=time.perf_counter() - started,
            finish_reason=finish,
            error=error,
        )
    )
    if reply is None or finish == "length":
        metrics.model_error(purpose)
        return None
    return str(getattr(reply, "text", "") or "")


def screen_candidates(
    candidates: Sequence[Candidate],
    *,
    threshold: float,
    scrub: Callable[[list[str]], str | None],
    own: OwnContacts,
    result: ExtractionResult,
    metrics: ItemMetrics,
) -> list[Candidate]:
    """Steps 2-3: the threshold, the scrub and the detectors; the candidates left to write.

    Args:
        candidates: the parsed candidates.
        threshold: the lowest confidence kept (0..1).
        scrub: the scrub call: facts in, the model's answer text out (None on failure).
        own: the user's own contacts (never counted as a detector hit).
        result: where drops are counted.
        metrics: where detector hits are counted (the profile's detector counter too).

    Returns:
        The candidates to reconcile, their texts as the scrub and detectors passed them.

    Raises:
        Stop: ``scrub_veto`` when the scrub answer is missing or malformed (fails closed).
    """
    kept = [c for c in candidates if c.confidence >= threshold]
    result.drop("low_confidence", len(candidates) - len(kept))
    if not kept:
        return []
    answer = scrub([c.text for c in kept])
    if answer is None:
        result.drop("scrub_veto", len(kept))
        raise Stop("scrub_veto", "scrub_error")
    try:
        verdicts = prompts.parse_scrub(answer, len(kept))
    except ParseError as exc:
        result.drop("scrub_veto", len(kept))
        raise Stop("scrub_veto", "scrub_invalid") from exc
    passed: list[Candidate] = []
    for candidate, verdict in zip(kept, verdicts, strict=True):
        if verdict is None:
            result.drop("scrub")
            continue
        text = candidate.text if verdict == "" else verdict
        checked = scan(text, own=own)
        if checked.counts:
            _count_detector_hits(metrics, checked.counts)
            result.drop("detector")
            continue
        passed.append(Candidate(text, candidate.confidence))
    return passed


def _count_detector_hits(metrics: ItemMetrics, counts: dict[str, int]) -> None:
    try:
        default_metrics().detector(counts)
    except Exception:  # metrics are best effort
        log.debug("could not count detector hits", exc_info=True)


def plan_changes(
    candidates: Sequence[Candidate],
    items: Sequence[Any],
    *,
    decide: Callable[[list[str], list[tuple[str, str]]], str | None],
    result: ExtractionResult,
) -> list[Change]:
    """Step 4: reconcile the screened candidates with the user's live items.

    Args:
        candidates: the screened candidates.
        items: the user's live items (objects with ``id`` and ``text``).
        decide: the decision call: ``(facts, [(item id, text)])`` in, the answer text out (None
            on failure). Called only for candidates no item matches after normalisation, and
            only when the user has items.
        result: where drops are counted.

    Returns:
        The changes, at most one per existing item (a later candidate aimed at an item already
        changed is dropped as ``conflict``), candidates repeating one another once.
    """
    by_key = {normalise(str(item.text)): item for item in items}
    by_id = {str(item_id(item)): item for item in items}
    changes: list[Change] = []
    touched: set[str] = set()
    rest: list[Candidate] = []
    for candidate in candidates:
        match = by_key.get(normalise(candidate.text))
        if match is None:
            rest.append(candidate)
        elif str(item_id(match)) not in touched:
            touched.add(str(item_id(match)))
            changes.append(Change("same", str(match.text), candidate.confidence, match))
    if not rest:
        return changes
    if not items:
        return changes + [Change("add", c.text, c.confidence) for c in rest]
    answer = decide([c.text for c in rest], [(str(item_id(i)), str(i.text)) for i in items])
    try:
        if answer is None:
            raise ParseError("no answer")
        decisions = prompts.parse_decisions(answer, len(rest), set(by_id))
    except ParseError:
        result.drop("decide_error", len(rest))
        return changes
    for number, candidate in enumerate(rest, 1):
        decision = decisions.get(number)
        if decision is None:
            result.drop("undecided")
            continue
        if decision.action == "new":
            changes.append(Change("add", candidate.text, candidate.confidence))
            continue
        target = by_id[str(decision.item)]
        if str(item_id(target)) in touched:
            result.drop("conflict")
            continue
        touched.add(str(item_id(target)))
        if decision.action == "same" or normalise(candidate.text) == normalise(str(target.text)):
            changes.append(Change("same", str(target.text), candidate.confidence, target))
        else:
            changes.append(Change("update", candidate.text, candidate.confidence, target))
    return changes


def _utc(value: dt.datetime | None) -> dt.datetime:
    if value is None:
        return dt.datetime.now(dt.timezone.utc)
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


def _own_contacts(user_id: str, user_message: str) -> OwnContacts:
    return OwnContacts.of(find_emails(user_id)).merged(own_contacts_from_text(user_message))


def extract_items(
    engine: Engine,
    *,
    org_id: str,
    user_id: str,
    chat_id: str | None,
    user_message: str,
    assistant_message: str,
    complete: Complete,
    model: str,
    now: dt.datetime | None = None,
    timeout: float | None = 60.0,
    profile_config: Any = None,
    metrics: Any = None,
    summarize: bool = True,
    skip_window: bool = True,
    earlier_messages: Sequence[str] = (),
) -> ExtractionResult:
    """Extract memory items from one exchange (see the module doc for the steps).

    Args:
        engine: the database; each step runs in a short transaction of its own
            (``engine.begin()``); none is open during a model call.
        org_id: the user's organisation (its settings apply).
        user_id: the user.
        chat_id: the chat (the turn's session id) for the skip window; None = no window.
        user_message: the user's message of the turn.
        assistant_message: the answer given (context for the model only).
        complete: the model call (:func:`dbmemory.llm.complete`, a fake, the scripted stand-in).
        model: the turn's model; the organisation's extraction model wins when set.
        now: the turn's time (UTC; replays: the recorded time), or None for the clock.
        timeout: seconds per model call.
        profile_config: the :class:`~dbmemory.profile.config.UserMemoryConfig` of the summary
            fold (None = defaults).
        metrics: the :class:`~dbmemory.profile.metrics.ProfileMetrics` whose registry gets the
            item metrics (None = the process-wide one).
        summarize: run the profile summary fold after the writes.
        earlier_messages: the user's earlier messages of the chat (the turn's history), oldest
            first: facts a skipped message stated are extracted with the next exchange.
        skip_window: apply the chat's skip window (False: extract this exchange whatever the
            chat's last extraction; replays of transcripts that carry one time per session).

    Returns:
        An :class:`ExtractionResult`. Never raises for model or database failures.
    """
    counters = item_metrics(metrics)
    started = time.perf_counter()
    result = ExtractionResult()
    when = _utc(now)
    try:
        with engine.begin() as conn:
            settings = data.load_settings(conn, org_id)
            if not data.memory_on(conn, org_id, user_id, when):
                raise Stop("disabled", "memory switch off")
            mark = data.forget_mark_of(conn, org_id, user_id)
            if skip_window and chat_id is not None and not data.claim_chat(
                conn, org_id, user_id, chat_id, when, window_s=settings.skip_window_seconds
            ):
                raise Stop("skipped", "skip window")
        use_model = settings.extraction_model or model
        answer = _call(
            result, counters, complete, use_model, "extract",
            prompts.extract_messages(user_message or "", assistant_message or "",
                                     now_utc=when.strftime("%Y-%m-%d %H:%M UTC"),
                                     earlier=tuple(earlier_messages)),
            timeout,
        )
        if answer is None:
            raise Stop("rejected", "model_error")
        try:
            candidates, invalid = prompts.parse_candidates(answer)
        except ParseError as exc:
            raise Stop("rejected", str(exc)) from exc
        result.drop("invalid", invalid)
        screened = screen_candidates(
            candidates,
            threshold=settings.confidence_threshold,
            scrub=lambda facts: _call(
                result, counters, complete, use_model, "scrub", prompts.scrub_messages(facts), timeout
            ),
            own=_own_contacts(user_id, user_message or ""),
            result=result,
            metrics=counters,
        )
        if screened:
            with engine.begin() as conn:
                items = data.live_items(conn, org_id, user_id, now=when)
            changes = plan_changes(
                screened,
                items,
                decide=lambda facts, listed: _call(
                    result, counters, complete, use_model, "decide",
                    prompts.decide_messages(facts, listed), timeout,
                ),
                result=result,
            )
            if changes:
                with engine.begin() as conn:
                    refused = data.apply_changes(
                        conn, org_id, user_id, changes, chat_id=chat_id, now=when, result=result,
                        forget_mark=mark,
                    )
                    if refused:
                        raise Stop("disabled", refused)
        result.outcome = "written" if (result.added or result.updated) else "nothing"
    except Stop as stop:
        result.outcome, result.reason = stop.outcome, stop.reason
    except Exception as exc:  # noqa: BLE001 - never raised into the turn
        log.warning("item extraction failed for an exchange: %s", type(exc).__name__, exc_info=True)
        result.outcome, result.reason = "error", f"unexpected {type(exc).__name__}"
        counters.failure("extract")
    finally:
        counters.extraction(result.outcome, time.perf_counter() - started)
        for action in ("added", "updated", "same"):
            counters.written(action, len(getattr(result, action)))
        counters.written("evicted", result.evicted)
        for reason, count in result.dropped.items():
            counters.dropped(reason, count)
        for reason, count in result.refused_updates.items():
            counters.update_refused(reason, count)
    if summarize and result.outcome in ("written", "nothing"):
        result.summary = fold_items(
            engine, org_id=org_id, user_id=user_id, complete=complete, model=model,
            config=profile_config, now=when, timeout=timeout, metrics=metrics,
        )
    return result
