"""Post-turn consolidation of a user's profile.

:class:`UserMemoryPostprocessor` runs after the assistant answered; it never changes the answer.
Steps of :meth:`UserMemoryPostprocessor.run`:

1. **Gate** (``config.gate_enabled``): a cheap call answering UPDATE or NOOP; NOOP ends the run,
   anything else (including an error) goes on (fails open).
2. **Rewrite**: the current body, the defused exchange and the UTC time; the answer is NOOP
   (any disguise) or the complete body (taken out of a fence or after prose). An empty answer, a
   cut-off answer (finish reason ``length``), a model error, or a body without all six sections
   keeps the old profile (counted as rejected). The profile's own rules
   (:func:`~dbmemory.profile.rules.enforce_rules`: dated Recent Topics that repeat no fact,
   no done or stale Follow-ups) are checked here, on the scrub's and the condensation's full
   answers too: repaired (counted) or refused; the body is written in the order
   :func:`~dbmemory.profile.rules.write_order` chooses (``config.section_order``).
3. **Scrub** (always): CLEAN keeps the rewrite, a complete body replaces it, anything else
   (including an error) vetoes the write (fails closed).
4. **Deterministic checks** (:mod:`~dbmemory.profile.detectors`): hits are redacted and counted.
5. **Fit** (:mod:`~dbmemory.profile.budget`): condensation call, then hard truncation.
6. **Write gate**: the scrub and the detectors judge exactly the body about to be written,
   whatever step produced it. A body equal to the one the scrub passed in step 3 is written as
   is; a body that condensation or truncation changed is scrubbed again (CLEAN keeps it; a
   complete body from the scrub replaces it and must then fit, a further truncation being
   scrubbed once more and answered CLEAN; anything else vetoes the write: ``scrub_veto``, old
   profile kept).
7. **Write**: compare-and-set on the version loaded (``files.put_file(expected_version=...)``);
   on a conflict the pipeline runs once more on the newer profile, then gives up (``conflict``).
   A body equal to the current one is not written (``unchanged``). The write and its audit
   event are one transaction, opened on the engine or connection factory given. It first locks
   the user's ``dbm_user_settings`` row (:func:`~dbmemory.profile.optout.lock_user_memory_enabled`)
   and then refuses (``disabled``, reason ``user forgotten``) when the user was forgotten
   (:func:`dbmemory.items.forget_user`) since the run started: the run reads the forget mark
   (:func:`~dbmemory.profile.optout.forget_mark`) in its first transaction and the write reads it
   again; a forget not committed yet waits for the write's lock and deletes the new profile.

The frontmatter is always the package's: ``user_id`` and ``schema_version`` preserved exactly,
``last_updated`` the UTC time of the rewrite, ``turn_count`` + 1 on each written rewrite only.
No database transaction is held while a model is called.

Deadline: the whole consolidation has a wall-clock limit (``UserMemoryConfig.deadline_s``). Each
model call runs in a worker thread and is waited for at most the time left (its ``timeout`` is
capped to it too); a call still running at the deadline is abandoned (its answer, if any, is
never read) and the run ends with ``outcome="error"``, ``reason="deadline"``, the old profile
kept. The compare-and-set write happens only here, in the pipeline, after a deadline check.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dbmemory import llm
from dbmemory.db.engine import connect
from dbmemory.errors import ConflictError, DbMemoryError
from dbmemory.profile import prompts
from dbmemory.profile.answers import extract_body, first_word, is_word_answer
from dbmemory.profile.budget import fit_profile, hard_truncate
from dbmemory.profile.calls import ConsolidationResult, DeadlineExceeded, ModelCall, call_within
from dbmemory.profile.config import UserMemoryConfig
from dbmemory.profile.detectors import (
    OwnContacts,
    ScanResult,
    find_emails,
    find_phones,
    own_contacts_from_text,
    scan,
)
from dbmemory.profile.events import REVIEW, UPDATING, StepLogger, log_entry, run_step
from dbmemory.profile.format import (
    UserProfile,
    new_profile,
    parse_body,
    parse_profile,
    render_body,
    render_profile,
)
from dbmemory.profile.load import UserMemoryState
from dbmemory.profile.metrics import default_metrics
from dbmemory.profile.optout import forget_mark, is_user_memory_enabled, lock_user_memory_enabled
from dbmemory.profile.rules import enforce_rules, write_order
from dbmemory.profile.store import read_profile, write_profile
from dbmemory.profile.tokens import count_tokens
from dbmemory.store.units import resolved_transaction

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from dbmemory.llm import CompleteFn, Completion
    from dbmemory.profile.metrics import ProfileMetrics

__all__ = [
    "UserMemoryPostprocessor",
    "ConnFactory",
]

log = logging.getLogger(__name__)

ConnFactory = Callable[[], AbstractContextManager["Connection"]]
"""A no-argument callable returning a context manager that yields a connection inside a
transaction and commits it on success, e.g. ``engine.begin``."""


class _Stop(Exception):
    """Ends the pipeline with an outcome (internal)."""

    def __init__(self, outcome: str, reason: str | None = None) -> None:
        super().__init__(outcome)
        self.outcome = outcome
        self.reason = reason


def _utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


class UserMemoryPostprocessor:
    """Consolidate one user's profile after a turn.

    Args:
        conn_factory_or_engine: an :class:`~sqlalchemy.engine.Engine` (each database step runs
            in ``engine.begin()``), or a :data:`ConnFactory` such as ``engine.begin``. The
            consolidation commits its own short transactions; no transaction is open during a
            model call.
        config: profile settings.
        model: the effective model (:meth:`UserMemoryConfig.effective_model`): every call and
            the tokenizer use it.
        user_id: whose profile.
        state: what :func:`~dbmemory.profile.load.load_user_memory` returned before the turn
            (None on the first turn); its version is the compare-and-set token.
        complete: the model call (default :func:`dbmemory.llm.complete`, litellm); tests pass a
            deterministic fake.
        metrics: where to count (default :func:`~dbmemory.profile.metrics.default_metrics`).
        step_logger: shows "Updating your memory" and "Review your context memory".
        now: returns the current time (default UTC now); used for ``last_updated`` and the
            rewrite prompt.
        own_contacts: the user's own e-mail addresses and phone numbers from the host's
            directory (never redacted).
        timeout: seconds per model call (passed to ``complete``; capped to the time left before
            the deadline).
        actor: recorded in the audit event of the write.
        deadline_s: wall-clock limit of the whole run in seconds; default
            ``config.deadline_s``.
    """

    def __init__(
        self,
        conn_factory_or_engine: Engine | ConnFactory,
        config: UserMemoryConfig,
        model: str | None,
        user_id: str,
        state: UserMemoryState | None,
        *,
        complete: CompleteFn | None = None,
        metrics: ProfileMetrics | None = None,
        step_logger: StepLogger | None = None,
        now: Callable[[], dt.datetime] | None = None,
        own_contacts: OwnContacts | None = None,
        timeout: float | None = 60.0,
        actor: str = "profile",
        deadline_s: float | None = None,
    ) -> None:
        self._begin = _factory(conn_factory_or_engine)
        self.config = config
        self.model = model
        self.user_id = user_id
        self.state = state
        self._complete = complete
        self.metrics = metrics or default_metrics()
        self.step_logger = step_logger
        self._now = now or (lambda: dt.datetime.now(dt.timezone.utc))
        self.own_contacts = own_contacts or OwnContacts()
        self.timeout = timeout
        self.actor = actor
        self.deadline_s = config.deadline_s if deadline_s is None else deadline_s
        self._deadline = float("inf")
        self._scanned: dict[tuple[str, OwnContacts], ScanResult] = {}
        self._forget_mark = 0
        self._base: UserProfile = new_profile(user_id)
        self._turn_at = dt.datetime.now(dt.timezone.utc)

    # -- public ------------------------------------------------------------------------------

    def run(self, user_message: str, assistant_message: str) -> ConsolidationResult:
        """Consolidate the profile with one exchange (see the module doc for the steps).

        Args:
            user_message: the user's message of the turn.
            assistant_message: the assistant's answer (read only; never changed).

        Returns:
            A :class:`ConsolidationResult`. Never raises for model or database failures: they
            become ``outcome="rejected"``/``"scrub_veto"``/``"error"`` and the old profile stays.
        """
        started = time.perf_counter()
        self._deadline = time.monotonic() + self.deadline_s
        self._scanned = {}
        result = ConsolidationResult()
        try:
            self._run(result, user_message or "", assistant_message or "")
        except _Stop as stop:
            result.outcome, result.reason = stop.outcome, stop.reason
        except DeadlineExceeded:
            log.warning("profile consolidation gave up at its deadline of %.1f s; the old profile is kept", self.deadline_s)
            result.outcome, result.reason = "error", "deadline"
        except DbMemoryError as exc:
            log.warning("profile consolidation failed: %s", exc.message)
            result.outcome, result.reason = "error", exc.message
        except Exception as exc:  # noqa: BLE001 - the turn must never fail because of memory
            log.exception("profile consolidation failed unexpectedly")
            result.outcome, result.reason = "error", f"unexpected {type(exc).__name__}"
        finally:
            self.metrics.postprocess(result.outcome, time.perf_counter() - started)
            if result.outcome in ("rejected", "scrub_veto") and result.reason:
                self.metrics.rejected(result.reason)
        return result

    # -- pipeline ----------------------------------------------------------------------------

    def _run(self, result: ConsolidationResult, user_message: str, assistant_message: str) -> None:
        with self._begin() as conn:
            # locked (created when missing) so that a forget committed later changes a row
            # this run's write snapshot can see (PostgreSQL REPEATABLE READ: serialization error)
            if not lock_user_memory_enabled(conn, self.user_id):
                raise _Stop("disabled", "user opted out")
            self._forget_mark = forget_mark(conn, self.user_id)
        state = self.state
        self._set_current(result, state)
        for attempt in (1, 2):
            result.attempts = attempt
            base = (
                parse_profile(state.text, default_user_id=self.user_id)
                if state is not None
                else new_profile(self.user_id)
            )
            order = write_order(self.config.section_order, base.order if state is not None else None)
            base = self._base = replace(base, order=order)
            if attempt == 1 and self.config.gate_enabled:
                if self._gate(result, base.body, user_message, assistant_message) == "noop":
                    raise _Stop("noop", "gate")
            stop: _Stop | None = None
            conflict = False
            record: Any = None
            with run_step(self.step_logger, UPDATING) as step:
                try:
                    text = self._draft(result, base, user_message, assistant_message)
                    if text is None:
                        stop = _Stop("unchanged")
                    else:
                        record = self._write(text, state)
                except _Stop as raised:
                    stop = raised
                except DeadlineExceeded:
                    log.warning(
                        "profile consolidation gave up at its deadline of %.1f s; the old profile is kept",
                        self.deadline_s,
                    )
                    stop = _Stop("error", "deadline")
                except ConflictError:
                    conflict = True
                if stop is not None:
                    if stop.outcome in ("rejected", "scrub_veto", "disabled", "error"):
                        step.fail("kept the previous memory")
                    else:
                        step.detail = "nothing new to remember"
                elif conflict:
                    if attempt == 2:
                        step.fail("the memory changed meanwhile")
                    else:
                        step.detail = "the memory changed meanwhile; retrying"
                else:
                    step.detail = "memory updated"
            if stop is not None:
                raise stop
            if conflict:
                if attempt == 2:
                    raise _Stop("conflict", "the profile changed during consolidation")
                state = self._reload()
                self._set_current(result, state)
                continue
            result.outcome = "updated"
            result.reason = None if attempt == 1 else "after a conflict"
            result.text, result.version = record.text, record.version
            result.token_count = self._tokens(record.text)
            self.metrics.size(result.token_count, len(record.text))
            log_entry(self.step_logger, REVIEW, "your memory was updated")
            return

    def _draft(
        self,
        result: ConsolidationResult,
        base: UserProfile,
        user_message: str,
        assistant_message: str,
    ) -> str | None:
        """Rewrite, scrub, check and fit; the new file text, or None when the body is unchanged."""
        base_body = base.body
        now = self._turn_at = _utc(self._now())
        answer = self._call(
            result,
            "rewrite",
            prompts.rewrite_messages(
                base_body, user_message, assistant_message,
                now_utc=now.strftime("%Y-%m-%d %H:%M UTC"), order=base.order,
            ),
        )
        if answer is None:
            raise _Stop("rejected", "model_error")
        if is_word_answer(answer.text, "NOOP"):
            raise _Stop("noop", "model")
        if answer.finish_reason == "length":
            raise _Stop("rejected", "truncated")
        extracted = extract_body(answer.text)
        if extracted.parsed is None:
            raise _Stop("rejected", extracted.reason)
        body = self._ruled(result, extracted.parsed.sections)
        if body is None:
            raise _Stop("rejected", "invalid_topic_date")

        body = self._scrub(result, body)
        own = self._own_contacts(base, user_message)
        checked = self._scan_once(body, own)
        if checked.counts:
            self._count_redactions(result, checked.counts)
        sections = extract_body(checked.text).parsed
        if sections is None:  # cannot happen: redaction keeps headings
            raise _Stop("rejected", "not_a_profile")
        approved = render_body(sections.sections, base.order)  # what the scrub passed, redacted
        if approved == base_body:
            return None

        candidate = replace(
            base.with_sections(sections.sections),
            last_updated=now.isoformat(timespec="seconds"),
            turn_count=base.turn_count + 1,
            has_frontmatter=True,
        )
        if not candidate.user_id:
            candidate = replace(candidate, user_id=self.user_id)

        def condense(text: str, target_tokens: int, max_tokens: int) -> str | None:
            reply = self._call(
                result,
                "condense",
                prompts.condense_messages(
                    text, target_tokens=target_tokens, max_tokens=max_tokens, order=base.order
                ),
            )
            if reply is None or reply.finish_reason == "length":
                return None
            condensed = extract_body(reply.text)
            ruled = self._ruled(result, condensed.parsed.sections) if condensed.parsed else None
            if ruled is None:
                return None
            rechecked = self._scan_once(ruled, own)
            if rechecked.counts:
                self._count_redactions(result, rechecked.counts)
            return rechecked.text

        fitted = fit_profile(
            candidate, max_tokens=self.config.max_tokens, model=self.model, condense=condense
        )
        self._check_deadline()  # a condensation abandoned at the deadline is not truncated around
        result.condensed, result.truncated = fitted.condensed, fitted.truncated
        self.metrics.fit(condensed=fitted.condensed, truncated=fitted.truncated)
        return self._write_gate(result, fitted.profile, approved, own)

    def _write_gate(
        self, result: ConsolidationResult, profile: UserProfile, approved: str, own: OwnContacts
    ) -> str:
        """The text to write: the scrub and the detectors on exactly its body (module doc, step 6).

        Raises:
            _Stop: ``scrub_veto`` when the scrub does not pass the final body.
        """
        body = self._detect(result, profile.body, own)
        if body == approved:
            return render_profile(profile.with_sections(parse_body(body).sections))
        # condensation or truncation changed the text after the scrub: scrub exactly this text
        scrubbed = self._scrub(result, body)
        if scrubbed == body:
            return render_profile(profile.with_sections(parse_body(body).sections))
        cleaned = profile.with_sections(parse_body(self._detect(result, scrubbed, own)).sections)
        text = render_profile(cleaned)
        if self._tokens(text) <= self.config.max_tokens:
            return text  # the scrub's own body (redacted by the detectors)
        cut = hard_truncate(cleaned, max_tokens=self.config.max_tokens, model=self.model)
        result.truncated = True
        cut_body = self._detect(result, cut.profile.body, own)
        if self._scrub(result, cut_body) != cut_body:
            raise _Stop("scrub_veto", "scrub_invalid")  # no third version: fail closed
        return render_profile(cut.profile.with_sections(parse_body(cut_body).sections))

    def _detect(self, result: ConsolidationResult, body: str, own: OwnContacts) -> str:
        """``body`` after the deterministic detectors (hits redacted and counted), canonical."""
        checked = self._scan_once(body, own)
        if checked.counts:
            self._count_redactions(result, checked.counts)
        return render_body(parse_body(checked.text).sections, self._base.order)

    def _ruled(self, result: ConsolidationResult, sections: dict[str, str]) -> str | None:
        """A model's body after the profile's rules (repairs counted), in the write order; None
        when refused."""
        checked = enforce_rules(
            sections, now=self._turn_at, base_sections=self._base.sections,
            follow_up_stale_days=self.config.follow_up_stale_days,
        )
        for rule, count in checked.repairs.items():
            result.repairs[rule] = result.repairs.get(rule, 0) + count
        self.metrics.repaired(checked.repairs)
        return None if checked.sections is None else render_body(checked.sections, self._base.order)

    def _scan_once(self, body: str, own: OwnContacts) -> ScanResult:
        """:func:`~dbmemory.profile.detectors.scan` of ``body``, remembered for this run: the
        write gate judges the body about to be written, which is usually the very text the draft
        checked (same text and contacts, same result; no hit is counted twice, since a text with
        hits changes when they are redacted)."""
        key = (body, own)
        checked = self._scanned.get(key)
        if checked is None:
            checked = self._scanned[key] = scan(body, own=own)
        return checked

    def _check_deadline(self) -> None:
        if time.monotonic() >= self._deadline:
            raise DeadlineExceeded()

    def _gate(
        self, result: ConsolidationResult, body: str, user_message: str, assistant_message: str
    ) -> str:
        """``"noop"`` or ``"update"``; errors and odd answers fail open (``"update"``)."""
        answer = self._call(result, "gate", prompts.gate_messages(body, user_message, assistant_message))
        if answer is None:
            return "update"
        return "noop" if first_word(answer.text) == "noop" else "update"

    def _scrub(self, result: ConsolidationResult, body: str) -> str:
        """The body after the scrub; raises ``_Stop("scrub_veto")`` unless CLEAN or a full body."""
        answer = self._call(result, "scrub", prompts.scrub_messages(body, order=self._base.order))
        if answer is None:
            raise _Stop("scrub_veto", "scrub_error")
        if answer.finish_reason == "length":
            raise _Stop("scrub_veto", "scrub_invalid")
        if is_word_answer(answer.text, "CLEAN"):
            return body
        cleaned = extract_body(answer.text)
        ruled = self._ruled(result, cleaned.parsed.sections) if cleaned.parsed else None
        if ruled is None:
            raise _Stop("scrub_veto", "scrub_invalid")
        return ruled

    # -- helpers -----------------------------------------------------------------------------

    def _call(
        self, result: ConsolidationResult, purpose: str, messages: list[dict[str, str]]
    ) -> Completion | None:
        """One model call, recorded in ``result`` and the metrics; None when it raised."""
        complete = self._complete
        if complete is None:
            complete = self._complete = llm.complete
        self._check_deadline()
        started = time.perf_counter()
        error: str | None = None
        reply: Completion | None = None
        expired = False
        left = self._deadline - time.monotonic()
        timeout = left if self.timeout is None else min(self.timeout, left)
        try:
            if not self.model:
                raise DbMemoryError("no model configured for the user profile")
            model = self.model
            reply = call_within(lambda: complete(model, messages, timeout=timeout), left)
        except DeadlineExceeded:
            error, expired = "DeadlineExceeded", True
            log.warning("profile %s call to %s was still running at the deadline", purpose, self.model)
        except Exception as exc:  # noqa: BLE001 - every model failure is handled by the caller
            error = type(exc).__name__
            log.warning("profile %s call to %s failed: %s", purpose, self.model, error)
        seconds = time.perf_counter() - started
        usage = reply.usage if reply is not None else None
        call = ModelCall(
            purpose=purpose,
            model=self.model,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            seconds=seconds,
            finish_reason=reply.finish_reason if reply is not None else None,
            error=error,
        )
        result.calls.append(call)
        self.metrics.model_call(
            purpose,
            self.model,
            seconds,
            error=error is not None,
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
        )
        if expired:
            raise DeadlineExceeded()
        return reply

    def _own_contacts(self, base: UserProfile, user_message: str) -> OwnContacts:
        """The user's own contacts: host-given, the user id, declared now, or in Identity."""
        identity = base.sections.get("Identity", "")
        emails = find_emails(self.user_id) + find_emails(identity)
        phones = find_phones(identity)
        return (
            self.own_contacts.merged(OwnContacts.of(emails, phones))
            .merged(own_contacts_from_text(user_message))
        )

    def _count_redactions(self, result: ConsolidationResult, counts: dict[str, int]) -> None:
        for kind, count in counts.items():
            result.redactions[kind] = result.redactions.get(kind, 0) + count
        self.metrics.detector(counts)

    def _write(self, text: str, state: UserMemoryState | None) -> Any:
        """Compare-and-set write in a transaction of its own (never after the deadline)."""
        self._check_deadline()
        with self._begin() as conn:
            if not lock_user_memory_enabled(conn, self.user_id):  # an opt-out waits for it
                raise _Stop("disabled", "user opted out")
            if forget_mark(conn, self.user_id) != self._forget_mark:  # a forget waits too
                raise _Stop("disabled", "user forgotten")
            return write_profile(
                conn,
                self.user_id,
                text,
                expected_version=state.version if state is not None else 0,
                root_folder=self.config.root_folder,
                actor=self.actor,
                store_id=state.store_id if state is not None else None,
                expected_text=state.text if state is not None else None,
            )

    def _reload(self) -> UserMemoryState | None:
        """The profile as stored now (after a conflict)."""
        with self._begin() as conn:
            if not is_user_memory_enabled(conn, self.user_id):
                raise _Stop("disabled", "user opted out")
            record = read_profile(conn, self.user_id, root_folder=self.config.root_folder)
        if record is None:
            return None
        return UserMemoryState(
            user_id=self.user_id,
            text=record.text,
            body=parse_profile(record.text).body,
            store_id=record.store_id,
            version=record.version,
            token_count=self._tokens(record.text),
        )

    def _set_current(self, result: ConsolidationResult, state: UserMemoryState | None) -> None:
        result.text = state.text if state is not None else None
        result.version = state.version if state is not None else None

    def _tokens(self, text: str) -> int:
        return count_tokens(text, self.model)


def _factory(target: Any) -> ConnFactory:
    """Normalise an Engine or a connection factory to a factory."""
    if hasattr(target, "begin") and hasattr(target, "connect") and hasattr(target, "dispose"):

        @contextmanager
        def owned() -> Iterator[Connection]:  # an Engine: a lost COMMIT reply is looked up
            with connect(target, "consolidating the profile") as conn, resolved_transaction(
                conn, "saving the profile", check="load the profile"
            ):
                yield conn

        return owned

    if callable(target):

        @contextmanager
        def opened() -> Iterator[Connection]:
            with target() as conn:
                yield conn

        return opened
    raise TypeError("conn_factory_or_engine must be an Engine or a callable such as engine.begin")
