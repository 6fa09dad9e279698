"""Recorded multi-session conversations: the LoCoMo JSON format and a simple JSONL format.

Two inputs are read into one shape, :class:`Conversation` (sessions of :class:`Utterance`):

- **LoCoMo** (Maharana et al., ACL 2024; the public data set of Snap Research,
  https://github.com/snap-research/locomo, file ``data/locomo10.json``): a JSON list of
  samples (or one sample object), each with ``sample_id`` and ``conversation`` holding
  ``speaker_a``, ``speaker_b``, ``session_N_date_time`` (``"1:56 pm on 8 May, 2023"``) and
  ``session_N`` (turns ``{"speaker", "dia_id", "text"}``, some with ``blip_caption``). One speaker
  plays the user (``as_speaker``, default ``speaker_a``), the other the assistant.
- **JSONL**: one object per line, ``{"session": "s1", "time": "2026-03-02T09:15:00Z",
  "role": "user" | "assistant", "text": "..."}``. ``time`` may be ISO 8601 or the LoCoMo form; a
  line without one inherits the time of its session.

Session timestamps are naive in LoCoMo; they are read as UTC (documented choice) and become the
turn times of a replay: Recent Topics dates come from them, never from the wall clock.

Example:
    >>> parse_session_time("1:56 pm on 8 May, 2023").isoformat()
    '2023-05-08T13:56:00+00:00'
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dbmemory.errors import InvalidArgumentError, NotFoundError

__all__ = [
    "Role",
    "Utterance",
    "Session",
    "Exchange",
    "Conversation",
    "parse_session_time",
    "read_conversation",
    "read_locomo",
    "read_jsonl",
    "exchanges",
    "iter_exchanges",
    "safe_component",
]

Role = Literal["user", "assistant"]

_USER_ROLES = {"user", "human"}
_ASSISTANT_ROLES = {"assistant", "ai", "bot", "model"}
_LOCOMO_TIME_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%H:%M on %d %B, %Y")
_SESSION_KEY = re.compile(r"session_(\d+)")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class Utterance:
    """One recorded line.

    Attributes:
        role: ``"user"`` or ``"assistant"``.
        text: what was said (a LoCoMo photo adds ``[shares a photo: <caption>]``).
        speaker: the speaker's name when the input has one (LoCoMo), else None.
        ref: the input's own id for the line (LoCoMo ``dia_id``, or ``"<line number>"``).
    """

    role: Role
    text: str
    speaker: str | None = None
    ref: str | None = None


@dataclass(frozen=True)
class Session:
    """One session of a conversation.

    Attributes:
        id: a store-key-safe session id (``[A-Za-z0-9_.-]+``), e.g. ``"conv-26.session_1"``.
        time: the session's timestamp (UTC, tz-aware) or None when the input has none.
        utterances: the lines in order.
    """

    id: str
    time: dt.datetime | None
    utterances: tuple[Utterance, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Exchange:
    """One user turn and the recorded reply that followed it.

    Attributes:
        session_id: the session's id.
        time: the session time (UTC) or None.
        user_text: the user's lines of the turn, joined by newlines (consecutive user lines merge).
        assistant_text: the recorded reply (consecutive assistant lines merged; ``""`` if none).
        index: position of the exchange in its session, from 0.
    """

    session_id: str
    time: dt.datetime | None
    user_text: str
    assistant_text: str
    index: int


@dataclass(frozen=True)
class Conversation:
    """A recorded multi-session conversation.

    Attributes:
        id: the sample id (LoCoMo ``sample_id``) or the JSONL file's stem, store-key-safe.
        sessions: sessions in chronological input order.
        user_speaker: the speaker replayed as the user (LoCoMo), else None.
        assistant_speaker: the other speaker (LoCoMo), else None.
    """

    id: str
    sessions: tuple[Session, ...]
    user_speaker: str | None = None
    assistant_speaker: str | None = None

    @property
    def turn_count(self) -> int:
        """Number of user turns (exchanges) in all sessions."""
        return sum(len(exchanges(s)) for s in self.sessions)

    def limited(self, sessions: int | None) -> Conversation:
        """This conversation cut to its first ``sessions`` sessions (None or 0 = all)."""
        if not sessions:
            return self
        return Conversation(self.id, self.sessions[:sessions], self.user_speaker, self.assistant_speaker)


def safe_component(text: str, *, fallback: str = "x") -> str:
    """Map ``text`` to a store-key component (``[A-Za-z0-9_.-]+``, at most 80 characters).

    Runs of other characters become ``-``; an empty result becomes ``fallback``.
    """
    out = _UNSAFE.sub("-", text).strip("-")[:80]
    return out or fallback


def parse_session_time(text: str) -> dt.datetime:
    """Parse a session timestamp to an aware UTC datetime.

    Args:
        text: the LoCoMo form ``"1:56 pm on 8 May, 2023"`` (read as UTC: LoCoMo has no zone) or
            ISO 8601 (``"2026-03-02T09:15:00Z"``, ``"2026-03-02 09:15"``; naive means UTC; an
            offset is converted to UTC).

    Returns:
        A ``datetime`` with ``tzinfo=UTC``.

    Raises:
        InvalidArgumentError: the text matches neither form.
    """
    raw = " ".join(str(text).split())
    for fmt in _LOCOMO_TIME_FORMATS:
        try:
            return dt.datetime.strptime(raw, fmt).replace(tzinfo=dt.timezone.utc)
        except ValueError:
            pass
    iso = raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw
    try:
        value = dt.datetime.fromisoformat(iso)
    except ValueError:
        raise InvalidArgumentError(
            f"session time {raw[:60]!r} is not understood: use ISO 8601 such as "
            "'2026-03-02T09:15:00Z' or the LoCoMo form '1:56 pm on 8 May, 2023'"
        ) from None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def read_conversation(
    path: str | Path, *, sample: str | None = None, as_speaker: str | None = None
) -> Conversation:
    """Read a conversation file, detecting the format from its first character.

    Args:
        path: a LoCoMo ``.json`` file (a list of samples or one sample) or a ``.jsonl`` file.
        sample: LoCoMo sample id (``"conv-26"``); None = the first sample. Ignored for JSONL.
        as_speaker: LoCoMo speaker to replay as the user (a name such as ``"Caroline"``, or
            ``"speaker_a"`` / ``"speaker_b"``); None = ``speaker_a``. Ignored for JSONL.

    Returns:
        The :class:`Conversation`.

    Raises:
        NotFoundError: the file, the sample or the speaker does not exist.
        InvalidArgumentError: the content is neither format, or a line is malformed.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFoundError(f"conversation file {str(path)!r} does not exist: check the path") from None
    head = text.lstrip()[:1]
    if head == "[" or (head == "{" and _is_single_json(text)):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"{file.name} is not valid JSON (line {exc.lineno}): {exc.msg}") from None
        return read_locomo(data, sample=sample, as_speaker=as_speaker)
    return read_jsonl(text.splitlines(), conversation_id=safe_component(file.stem, fallback="conversation"))


def _is_single_json(text: str) -> bool:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(data, dict) and "conversation" in data


def read_locomo(data: Any, *, sample: str | None = None, as_speaker: str | None = None) -> Conversation:
    """Read one LoCoMo sample.

    Args:
        data: the parsed JSON: a list of samples or one sample dict.
        sample: the ``sample_id`` to read; None = the first.
        as_speaker: the speaker replayed as the user (name, ``speaker_a`` or ``speaker_b``);
            None = ``speaker_a``.

    Returns:
        The :class:`Conversation`; session ids are ``"<sample_id>.session_<N>"`` in N order.

    Raises:
        NotFoundError: no such sample or speaker.
        InvalidArgumentError: the sample lacks ``conversation``/``speaker_a``/``speaker_b``.
    """
    samples = data if isinstance(data, list) else [data]
    chosen = None
    for item in samples:
        if isinstance(item, dict) and (sample is None or item.get("sample_id") == sample):
            chosen = item
            break
    if chosen is None:
        ids = ", ".join(str(s.get("sample_id")) for s in samples if isinstance(s, dict))[:200]
        raise NotFoundError(f"sample {sample!r} is not in the file: choose one of {ids}")
    conv = chosen.get("conversation")
    if not isinstance(conv, dict) or "speaker_a" not in conv or "speaker_b" not in conv:
        raise InvalidArgumentError("a LoCoMo sample needs 'conversation' with 'speaker_a' and 'speaker_b'")
    speakers = (str(conv["speaker_a"]), str(conv["speaker_b"]))
    user = _pick_speaker(as_speaker, speakers)
    other = speakers[1] if user == speakers[0] else speakers[0]
    conv_id = safe_component(str(chosen.get("sample_id") or "locomo"), fallback="locomo")
    numbers = sorted(
        int(m.group(1)) for key in conv if (m := _SESSION_KEY.fullmatch(key)) and isinstance(conv[key], list)
    )
    sessions = []
    for n in numbers:
        stamp = conv.get(f"session_{n}_date_time")
        time = parse_session_time(stamp) if stamp else None
        lines = []
        for turn in conv[f"session_{n}"]:
            text = str(turn.get("text") or "").strip()
            caption = turn.get("blip_caption")
            if caption:
                text = f"{text} [shares a photo: {caption}]".strip()
            if not text:
                continue
            speaker = str(turn.get("speaker") or "")
            role: Role = "user" if speaker == user else "assistant"
            lines.append(Utterance(role, text, speaker or None, turn.get("dia_id")))
        sessions.append(Session(f"{conv_id}.session_{n}", time, tuple(lines)))
    return Conversation(conv_id, tuple(sessions), user, other)


def _pick_speaker(as_speaker: str | None, speakers: tuple[str, str]) -> str:
    if as_speaker is None or as_speaker == "speaker_a":
        return speakers[0]
    if as_speaker == "speaker_b":
        return speakers[1]
    for name in speakers:
        if name.casefold() == as_speaker.casefold():
            return name
    raise NotFoundError(
        f"speaker {as_speaker!r} is not in this conversation: use {speakers[0]!r} or {speakers[1]!r}"
    )


def read_jsonl(lines: Iterable[str], *, conversation_id: str = "conversation") -> Conversation:
    """Read the simple JSONL format.

    Args:
        lines: the file's lines; blank lines and lines starting with ``#`` are skipped.
        conversation_id: the conversation id (the CLI passes the file stem).

    Returns:
        The :class:`Conversation`; sessions in order of first appearance, ids made
        store-key-safe (``"<conversation_id>.<session>"``).

    Raises:
        InvalidArgumentError: a line is not a JSON object, lacks ``text``/``role``, has an unknown
            role, or an unparseable ``time``; the message gives the line number.
    """
    order: list[str] = []
    times: dict[str, dt.datetime | None] = {}
    utterances: dict[str, list[Utterance]] = {}
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError:
            raise InvalidArgumentError(f"line {number} is not JSON: each line must be one object") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise InvalidArgumentError(f"line {number} must be an object with a 'text' string")
        role_raw = str(obj.get("role", "")).strip().lower()
        if role_raw in _USER_ROLES:
            role: Role = "user"
        elif role_raw in _ASSISTANT_ROLES:
            role = "assistant"
        else:
            raise InvalidArgumentError(f"line {number}: role {role_raw!r} must be 'user' or 'assistant'")
        session = str(obj.get("session", "1"))
        if session not in utterances:
            order.append(session)
            utterances[session] = []
            times[session] = None
        if obj.get("time") and times[session] is None:
            try:
                times[session] = parse_session_time(str(obj["time"]))
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"line {number}: {exc.message}") from None
        if obj["text"].strip():
            utterances[session].append(Utterance(role, obj["text"].strip(), obj.get("speaker"), str(number)))
    sessions = tuple(
        Session(f"{conversation_id}.{safe_component(s, fallback='session')}", times[s], tuple(utterances[s]))
        for s in order
    )
    return Conversation(conversation_id, sessions)


def exchanges(session: Session) -> list[Exchange]:
    """Group a session's lines into user turns and the replies that follow them.

    Consecutive user lines form one turn; the assistant lines after them are its recorded reply.
    Assistant lines before the first user line are dropped (there is no turn to attach them to).

    Returns:
        list of :class:`Exchange` in order.
    """
    result: list[Exchange] = []
    user: list[str] = []
    reply: list[str] = []
    for utt in session.utterances:
        if utt.role == "user":
            if reply and user:
                result.append(_exchange(session, user, reply, len(result)))
                user, reply = [], []
            elif reply:
                reply = []
            user.append(utt.text)
        else:
            reply.append(utt.text)
    if user:
        result.append(_exchange(session, user, reply, len(result)))
    return result


def _exchange(session: Session, user: list[str], reply: list[str], index: int) -> Exchange:
    return Exchange(session.id, session.time, "\n".join(user), "\n".join(reply), index)


def iter_exchanges(conversation: Conversation) -> Iterator[Exchange]:
    """All exchanges of all sessions, in order."""
    for session in conversation.sessions:
        yield from exchanges(session)
