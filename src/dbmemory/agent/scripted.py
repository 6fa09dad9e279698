"""The scripted stand-in model: a deterministic ``CompleteFn`` with a fixed, documented policy.

It is **not a memory model**. It exists so the whole pipeline (tool loop, consolidation, scrub
and deterministic checks, budget and condensation fallback, compare-and-set write, audit,
metrics) runs end to end on real text with no model and no key. The commands use it when no
model is configured (``--model`` and ``DBMEMORY_MODEL`` unset) and say so on their first line.

Policy, as an agent (a call that offers the ``memory`` tool):

1. ``view /memories``.
2. If the user's latest message holds no first-person statement (small talk, thanks,
   questions), answer without writing.
3. Otherwise keep one notes file per session, ``/memories/sessions/<session>.md``: ``create`` it
   on the session's first statement, later ``view`` it, ``str_replace`` its ``Updated:`` line and
   ``insert`` a dated bullet at its end. Keep an index file, ``/memories/index.md``: ``create``
   it once, then ``view`` and ``insert`` one line per new session.
4. Answer with a short fixed text saying what it noted.

The session id and the time come from lines ``Session: <id>`` and ``Current time (UTC): <ISO>``
of the system prompt (the ``chat`` and ``replay`` commands write them; the time may be ISO 8601 or
``YYYY-MM-DD HH:MM UTC``); without them the
session is ``default`` and the time the wall clock.

Policy, for the profile consolidation (recognised from the prompt, see :func:`detect_purpose`):

- gate: ``NOOP`` when the user's latest message holds no first-person statement, else ``UPDATE``;
- rewrite: ``NOOP`` likewise; else the whole body with one dated ``Recent Topics`` bullet
  (``YYYY-MM-DD HH:MM UTC: <the statements>``) plus obvious bullets: ``Name:``, ``Lives in:``,
  ``Age:``, ``Pronouns:`` (Identity; the newest value replaces the old one), ``Enjoys ...``
  (Identity), ``Works as ...`` (Work Context), answer-style preferences (Communication
  Preferences), ``Learning ...`` (Skills & Expertise), ``remind me to ...`` (Follow-ups). Recent
  Topics keeps the newest ``recent_topics_limit`` bullets;
- scrub: ``CLEAN``, or the body without lines that hold an e-mail address, a long digit run, or a
  ``password``/``token``/``api key`` value;
- condense: the body with the oldest Recent Topics bullets (then the oldest Follow-ups, Skills, Work Context bullets) dropped
  until it is under the smallest token count the prompt names (its target, about 90% of the
  budget), at 3 characters per token.

Policy, for the memory items (extraction, scrub, reconciliation): see
:mod:`dbmemory.agent.scripted_items` (one third-person fact per obvious profile fact, fixed
confidences, the same scrub rule, single-valued facts updated in place).

Token usage is reported as an estimate (characters / 4), so per-purpose counters have numbers.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dbmemory.agent.scripted_items import decide_answer, extract_answer, fold_bullets, scrub_answer
from dbmemory.agent.scripted_text import clip, first_person_statements, is_small_talk, profile_facts
from dbmemory.items.extract_prompts import purpose_of as item_purpose_of
from dbmemory.llm import Completion, ToolCall, Usage
from dbmemory.profile.format import parse_body, render_body
from dbmemory.profile.prompts import purpose_of

__all__ = [
    "SCRIPTED_MODEL_NAME",
    "SCRIPTED_CHOSEN_NOTICE",
    "SCRIPTED_NOTICE",
    "ScriptedModel",
    "detect_purpose",
]

SCRIPTED_MODEL_NAME = "scripted"
"""The model name the commands show (and pass to the tokenizer, which falls back) when the
scripted stand-in is used."""

SCRIPTED_NOTICE = (
    "No model configured (--model / DBMEMORY_MODEL): using the scripted stand-in model, "
    "a fixed policy for demonstrations, not a memory model."
)
"""The first line of output of every command that uses the stand-in because no model was given."""

SCRIPTED_CHOSEN_NOTICE = (
    "Using the scripted stand-in model (--model scripted): "
    "a fixed policy for demonstrations, not a memory model."
)
"""The first line of output of every command run with ``--model scripted`` on purpose."""

NOTES_DIR = "/memories/sessions"
INDEX_PATH = "/memories/index.md"

_SESSION_LINE = re.compile(r"(?im)^\s*session(?:\s+id)?\s*:\s*([A-Za-z0-9_.\-]+)")
_TIME_LINE = re.compile(r"\s*current time\b", re.IGNORECASE)
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_BUDGET = re.compile(r"(\d[\d,]*)\s*tokens", re.IGNORECASE)
_LINE_NO = re.compile(r"^\s*(\d+)\t", re.MULTILINE)
_SENSITIVE = re.compile(
    r"[\w.+-]+@[\w-]+\.[\w.]+|\b\d{9,}\b|\+\d[\d ]{8,}\d|\b(password|passwd|token|api[ _-]?key|secret)\b\s*[:=]",
    re.IGNORECASE,
)


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return "" if content is None else str(content)


def detect_purpose(messages: Sequence[Mapping[str, Any]], tools: object = None, **kwargs: Any) -> str:
    """Recognise what a call is for: ``agent``, ``gate``, ``rewrite``, ``scrub``, ``condense``,
    ``item_extract``, ``item_scrub``, ``item_decide`` or ``chat``.

    An explicit ``purpose`` keyword wins, then the first line of the system prompt of the profile
    pipeline (:func:`dbmemory.profile.prompts.purpose_of`). A call offering the ``memory`` tool is
    ``agent``. Otherwise the system prompt (then the whole prompt) is read for the consolidation
    steps' wording: ``CLEAN`` -> scrub; condense/shrink/budget -> condense; ``UPDATE`` or ``NOOP`` as the
    only answers -> gate; ``NOOP`` -> rewrite; anything else -> chat.
    """
    purpose = kwargs.get("purpose") or (kwargs.get("metadata") or {}).get("purpose")
    if purpose:
        return str(purpose)
    known = purpose_of([dict(m) for m in messages])
    if known:
        return known
    item_purpose = item_purpose_of([dict(m) for m in messages])
    if item_purpose:
        return f"item_{item_purpose}"
    offered: Sequence[Any] = tools or ()  # type: ignore[assignment]  # litellm's loose tool list
    for tool in offered:
        name = tool.get("name") or (tool.get("function") or {}).get("name") if isinstance(tool, Mapping) else None
        if name == "memory":
            return "agent"
    system = "\n".join(_content_text(m.get("content")) for m in messages if m.get("role") == "system")
    for text in (system, "\n".join(_content_text(m.get("content")) for m in messages)):
        if not text:
            continue
        low = text.lower()
        if re.search(r"\bCLEAN\b", text) and ("scrub" in low or "policy" in low or "clean" in low):
            return "scrub"
        if "condens" in low or "shrink" in low or ("budget" in low and "noop" not in low):
            return "condense"
        if re.search(r"\bUPDATE\b", text) and re.search(r"\bNOOP\b", text) and (
            "only" in low and ("update or noop" in low or "one word" in low or "gate" in low)
        ):
            return "gate"
        if re.search(r"\bNOOP\b", text):
            return "rewrite"
    return "chat"


class ScriptedModel:
    """The deterministic stand-in model; call it like :func:`dbmemory.llm.complete`.

    Args:
        recent_topics_limit: most Recent Topics bullets a rewrite keeps (oldest dropped first).
        now: fixed time when the prompt names none (tests); None = the wall clock (UTC).

    Attributes:
        calls: number of calls answered, by purpose.
    """

    def __init__(self, *, recent_topics_limit: int = 10, now: dt.datetime | None = None) -> None:
        self.recent_topics_limit = recent_topics_limit
        self.now = now
        self.calls: dict[str, int] = {}

    # ------------------------------------------------------------------ entry points

    def __call__(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Completion:
        """Answer one call (same signature as :func:`dbmemory.llm.complete`; never raises)."""
        purpose = detect_purpose(messages, tools, **kwargs)
        self.calls[purpose] = self.calls.get(purpose, 0) + 1
        handler = {
            "agent": self._agent,
            "gate": self._gate,
            "rewrite": self._rewrite,
            "scrub": self._scrub,
            "condense": self._condense,
            "item_extract": self._item_extract,
            "item_scrub": self._item_scrub,
            "item_decide": self._item_decide,
        }.get(purpose, self._chat)
        result = handler(messages)
        prompt_chars = sum(len(_content_text(m.get("content"))) for m in messages)
        if isinstance(result, Completion):
            out = result
        else:
            out = Completion(text=str(result), finish_reason="stop")
        out_chars = len(out.text) + sum(len(str(c.arguments)) for c in out.tool_calls)
        out.usage = Usage(prompt_tokens=max(1, prompt_chars // 4), completion_tokens=max(1, out_chars // 4))
        return out

    async def acall(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        """Async form of :meth:`__call__` (for :func:`~dbmemory.agent.turn.arun_turn`)."""
        return self(model, messages, **kwargs)

    # ------------------------------------------------------------------ helpers

    def _time(self, text: str) -> dt.datetime:
        """The time on the first ``Current time`` line of ``text``; else :attr:`now` or the clock."""
        for line in text.splitlines():
            if not _TIME_LINE.match(line):
                continue
            match = _ISO_TIME.search(line)
            if not match:
                break
            raw = match.group(0).replace(" ", "T", 1)
            raw = raw[:-1] + "+00:00" if raw.endswith("Z") else raw
            try:
                value = dt.datetime.fromisoformat(raw)
            except ValueError:
                break
            return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)
        return self.now or dt.datetime.now(dt.timezone.utc)

    @staticmethod
    def _stamp(when: dt.datetime) -> str:
        return when.strftime("%Y-%m-%d %H:%M UTC")

    # ------------------------------------------------------------------ agent policy

    def _agent(self, messages: list[dict[str, Any]]) -> Completion:
        system = "\n".join(_content_text(m.get("content")) for m in messages if m.get("role") == "system")
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        user_text = _content_text(messages[last_user].get("content")) if last_user >= 0 else ""
        done: list[str] = []  # results of this turn's tool calls, in order
        for message in messages[last_user + 1 :]:
            if message.get("role") == "tool":
                done.append(_content_text(message.get("content")))
        match = _SESSION_LINE.search(system)
        session = match.group(1) if match else "default"
        when = self._time(system)
        plan = _AgentPlan(done, session=session, stamp=self._stamp(when), user_text=user_text)
        try:
            answer = plan.run()
        except _NeedCall as need:
            return Completion(
                text="",
                finish_reason="tool_calls",
                tool_calls=[ToolCall(id=f"scripted-{len(done) + 1}", name="memory", arguments=need.arguments)],
            )
        return Completion(text=answer, finish_reason="stop")

    # ------------------------------------------------------------------ consolidation policy

    @staticmethod
    def _data(messages: list[dict[str, Any]]) -> str:
        """The non-system messages' text: where the profile prompts put their data blocks."""
        return "\n".join(_content_text(m.get("content")) for m in messages if m.get("role") != "system")

    def _user_text(self, messages: list[dict[str, Any]]) -> str:
        return _extract_user_text(self._data(messages))

    def _gate(self, messages: list[dict[str, Any]]) -> str:
        return "NOOP" if is_small_talk(self._user_text(messages)) else "UPDATE"

    def _rewrite(self, messages: list[dict[str, Any]]) -> str:
        prompt = self._data(messages)
        user_text = _extract_user_text(prompt)
        folded = fold_bullets(user_text)
        if folded is not None:  # a summary fold of memory items
            sections = parse_body(_extract_body(prompt)).sections
            bullets = {name: [line for line in text.split("\n") if line.strip()] for name, text in sections.items()}
            for section, bullet in folded:
                if f"- {bullet}" not in bullets[section]:
                    bullets[section].append(f"- {bullet}")
            return render_body({name: "\n".join(lines) for name, lines in bullets.items()})
        statements = first_person_statements(user_text)
        if not statements:
            return "NOOP"

        sections = parse_body(_extract_body(prompt)).sections
        when = self._time(_extract_time_text(prompt))
        bullets = {name: [line for line in text.split("\n") if line.strip()] for name, text in sections.items()}
        for section, key, bullet in profile_facts(user_text):
            lines = bullets[section]
            if key is not None:
                lines[:] = [line for line in lines if not line.startswith(f"- {key.split()[0]}")]
            if f"- {bullet}" not in lines:
                lines.append(f"- {bullet}")
        topic = clip(" ".join(statements[:2]), 200)
        bullets["Recent Topics"].insert(0, f"- {self._stamp(when)}: {topic}")  # newest first
        bullets["Recent Topics"] = bullets["Recent Topics"][: self.recent_topics_limit]
        bullets["Follow-ups"] = bullets["Follow-ups"][-5:]
        return render_body({name: "\n".join(lines) for name, lines in bullets.items()})

    def _scrub(self, messages: list[dict[str, Any]]) -> str:
        body = _extract_body(self._data(messages))
        if not _SENSITIVE.search(body):
            return "CLEAN"
        return "\n".join(line for line in body.split("\n") if not _SENSITIVE.search(line)) + "\n"

    def _condense(self, messages: list[dict[str, Any]]) -> str:
        prompt = "\n".join(_content_text(m.get("content")) for m in messages)
        budgets = [int(b.replace(",", "")) for b in _BUDGET.findall(prompt)]
        budget = min(budgets) if budgets else 2000
        target_chars = budget * 3  # the smallest number named is the target (about 90% of the budget)
        sections = parse_body(_extract_body(self._data(messages))).sections
        bullets = {name: [line for line in text.split("\n") if line.strip()] for name, text in sections.items()}
        for name in ("Recent Topics", "Follow-ups", "Skills & Expertise", "Work Context"):
            while bullets[name] and len(render_body({k: "\n".join(v) for k, v in bullets.items()})) > target_chars:
                # Recent Topics is newest first: its oldest bullet is the last; others oldest first
                bullets[name].pop(-1 if name == "Recent Topics" else 0)
        return render_body({name: "\n".join(lines) for name, lines in bullets.items()})

    def _item_extract(self, messages: list[dict[str, Any]]) -> str:
        earlier = _tag(self._data(messages), "earlier_user_messages") or ""
        lines = [line[2:] for line in earlier.splitlines() if line.startswith("- ")]
        return extract_answer("\n".join([*lines, self._user_text(messages)]))

    def _item_scrub(self, messages: list[dict[str, Any]]) -> str:
        return scrub_answer(_tag(self._data(messages), "facts") or "")

    def _item_decide(self, messages: list[dict[str, Any]]) -> str:
        data = self._data(messages)
        return decide_answer(_tag(data, "facts") or "", _tag(data, "items") or "")

    def _chat(self, messages: list[dict[str, Any]]) -> str:
        return "(scripted stand-in) I have no language model; configure one with --model to get real answers."


# --------------------------------------------------------------------------- prompt reading

_BODY_START = re.compile(r"^#[ \t]+User[ \t]+Memory[ \t]*$|^##[ \t]+Identity[ \t]*$", re.MULTILINE | re.IGNORECASE)


def _tag(prompt: str, *names: str) -> str | None:
    """The text inside the last ``<name>...</name>`` block of ``prompt`` for the first name found."""
    for name in names:
        blocks = re.findall(rf"<{name}>\n?(.*?)\n?</{name}>", prompt, re.DOTALL)
        if blocks:
            last: str = blocks[-1]
            return last
    return None


def _extract_body(prompt: str) -> str:
    """The profile body inside a consolidation prompt (``<current_profile>`` or ``<profile>``;
    else from ``# User Memory`` to the end), or ``""``."""
    inside = _tag(prompt, "current_profile", "profile")
    if inside is not None:
        return inside
    match = _BODY_START.search(prompt)
    return prompt[match.start():] if match else ""


def _extract_user_text(prompt: str) -> str:
    inside = _tag(prompt, "user_message")
    return inside.strip() if inside is not None else ""


def _extract_time_text(prompt: str) -> str:
    for line in prompt.splitlines():
        if line.lower().startswith("current time") and _ISO_TIME.search(line):
            return line
    return ""


class _NeedCall(Exception):
    def __init__(self, arguments: dict[str, Any]) -> None:
        super().__init__("tool call needed")
        self.arguments = arguments


class _AgentPlan:
    """The agent policy as straight-line code, replayed over this turn's tool results.

    Each :meth:`call` returns the result of the n-th tool call already made in this turn, or raises
    :class:`_NeedCall` with the next call's arguments; so the plan is stateless across calls.
    """

    def __init__(self, done: list[str], *, session: str, stamp: str, user_text: str) -> None:
        self._done = done
        self._next = 0
        self.session = session
        self.stamp = stamp
        self.user_text = user_text

    def call(self, **arguments: Any) -> str:
        if self._next < len(self._done):
            result = self._done[self._next]
            self._next += 1
            return result
        raise _NeedCall(arguments)

    def run(self) -> str:
        listing = self.call(command="view", path="/memories")
        statements = first_person_statements(self.user_text)
        if not statements:
            return "(scripted stand-in) Noted nothing new: that message holds no statement about you."
        notes = f"{NOTES_DIR}/{self.session}.md"
        bullet = f"- {self.stamp}: {clip(' '.join(statements[:2]), 200)}"
        new_session = notes not in listing
        if new_session:
            text = f"# Notes of session {self.session}\n\nUpdated: {self.stamp}\n\n{bullet}\n"
            result = self.call(command="create", path=notes, file_text=text)
            new_session = not result.startswith("Error: ")
        if not new_session:
            view = self.call(command="view", path=notes)
            lines = [int(n) for n in _LINE_NO.findall(view)]
            updated = re.search(r"Updated: ([^\n]+)", view)
            if updated and updated.group(1).strip() != self.stamp:
                self.call(
                    command="str_replace",
                    path=notes,
                    old_str=f"Updated: {updated.group(1).strip()}",
                    new_str=f"Updated: {self.stamp}",
                )
            self.call(command="insert", path=notes, insert_line=max(lines, default=0), insert_text=bullet)
        if INDEX_PATH not in listing:
            self.call(
                command="create",
                path=INDEX_PATH,
                file_text=(
                    "# Memory index\n\nOne notes file per conversation session.\n\n"
                    f"- sessions/{self.session}.md (started {self.stamp})\n"
                ),
            )
        elif new_session:
            view = self.call(command="view", path=INDEX_PATH)
            lines = [int(n) for n in _LINE_NO.findall(view)]
            self.call(
                command="insert",
                path=INDEX_PATH,
                insert_line=max(lines, default=0),
                insert_text=f"- sessions/{self.session}.md (started {self.stamp})",
            )
        return f"(scripted stand-in) Noted in {notes}."
