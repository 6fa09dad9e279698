"""Search over everything a user's memory holds: episodes, items, the profile and the user's files.

:func:`search_memory` returns ranked :class:`SearchHit`\\ s, each saying where it came from:

- ``episode``: a conversation episode, found and ranked by the database's full-text engine
  (:mod:`dbmemory.items.episode_search`); ``ref`` is the episode id, ``when`` the turn's time;
- ``item``: a live memory item (``ref``: its id);
- ``profile``: a line of the user's profile (``ref``: ``/memories/profile.md`` or the root
  folder's path);
- ``file``: a paragraph (or one item of a list) of a file in one of the user's own stores (``user`` scope, and the
  user-keyed ``context`` stores), i.e. notes the agent wrote with the MEMORY tool (``ref``: the
  store key and path).

Items, profile lines and file paragraphs are few per user and are ranked in Python with the
items' BM25 (:func:`dbmemory.items.select.bm25_scores`: the ``bm25s`` library, English stop
words, Snowball stems). Each source's scores are divided by that source's best, so the merged
list interleaves the sources by relative relevance (scores of two sources are not otherwise
comparable); ties go to the newer episode.

**Only the user's own memory is read**: every statement is keyed by the user (episodes and
items by organisation and encoded user id, the profile by its reserved store key, files by
the user's store keys, :func:`dbmemory.items.admin.user_stores`). With the user's memory
switch off or the user opted out, nothing is searched and ``[]`` is returned.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core.arguments import check_arguments
from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.schema import files as _files
from dbmemory.errors import InvalidArgumentError
from dbmemory.items.admin import user_stores
from dbmemory.items.episode_search import DEFAULT_CANDIDATES, search_episodes
from dbmemory.items.episodes import episode_memory_allowed
from dbmemory.items.model import DEFAULT_ORG, check_org
from dbmemory.items.select import bm25_scores, bm25_scores_once
from dbmemory.items.store import list_items
from dbmemory.profile.store import DEFAULT_ROOT_FOLDER, PROFILE_PATH, read_profile

__all__ = ["SOURCES", "SearchHit", "search_memory", "check_scope", "MAX_SNIPPET_CHARS"]

SOURCES: tuple[str, ...] = ("episodes", "items", "profile", "files")
"""What :func:`search_memory` can search (its ``scope``)."""

MAX_SNIPPET_CHARS = 1_200
"""Longest snippet of a hit, in characters (longer texts are cut with ``…``)."""


@dataclass(frozen=True)
class SearchHit:
    """One result of :func:`search_memory`.

    Attributes:
        source: ``episode``, ``item``, ``profile`` or ``file``.
        ref: where it is: the episode id, the item id, the profile path, or
            ``<store key>:<path>`` of a file.
        snippet: the matching text (an episode: ``user text`` then the answer on the next line),
            at most :data:`MAX_SNIPPET_CHARS` characters.
        score: relevance in 0..1, relative to the best hit of the same source.
        when: the episode's turn time (UTC), else None.
        chat_id: the episode's chat, else None.
        path: the file's path (``file``) or the profile's path (``profile``), else None.
    """

    source: str
    ref: str
    snippet: str
    score: float
    when: dt.datetime | None = None
    chat_id: str | None = None
    path: str | None = None
    user_text: str | None = None
    assistant_text: str | None = None

    def label(self) -> str:
        """Where it came from, for a prompt: ``[conversation 2023-05-08]``, ``[item 12]``,
        ``[profile]``, ``[file /memories/x.md]``."""
        if self.source == "episode":
            return f"[conversation {self.when.date().isoformat()}]" if self.when else "[conversation]"
        if self.source == "file":
            return f"[file {self.path}]"
        if self.source == "item":
            return f"[item {self.ref}]"
        return "[profile]"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "source": self.source,
            "ref": self.ref,
            "snippet": self.snippet,
            "score": round(self.score, 6),
            "when": None if self.when is None else self.when.isoformat(),
            "chat_id": self.chat_id,
            "path": self.path,
        }


def check_scope(scope: object) -> tuple[str, ...]:
    """``scope`` as a tuple of :data:`SOURCES`: ``"all"`` (or None) means every source; a name
    or a sequence of names picks some.

    Raises:
        InvalidArgumentError: an unknown name.
    """
    if scope is None or scope == "all":
        return SOURCES
    names = (scope,) if isinstance(scope, str) else tuple(scope)  # type: ignore[arg-type]
    bad = [n for n in names if n not in SOURCES]
    if bad or not names:
        raise InvalidArgumentError(
            f"scope {(bad or [''])[0]!r} is not one of all, {', '.join(SOURCES)}: pick one of them"
        )
    return tuple(dict.fromkeys(names))


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_SNIPPET_CHARS else text[: MAX_SNIPPET_CHARS - 1] + "\u2026"


_PARAGRAPH = re.compile(r"\n\s*\n")


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def _chunks(body: str) -> list[str]:
    """The searchable pieces of a file: its paragraphs, a list paragraph split into its items
    (notes are mostly lists; one item is one fact) and a long paragraph into its lines; blank
    ones left out."""
    out: list[str] = []
    for para in _PARAGRAPH.split(body or ""):
        para = para.strip()
        if not para:
            continue
        lines = [line.strip() for line in para.splitlines() if line.strip()]
        if len(para) > MAX_SNIPPET_CHARS or (len(lines) > 1 and all(_LIST_ITEM.match(x) for x in lines)):
            out.extend(lines)
        else:
            out.append(para)
    return out


def _profile_lines(body: str) -> list[str]:
    lines, in_front = [], False
    for i, line in enumerate((body or "").splitlines()):
        text = line.strip()
        if i == 0 and text == "---":
            in_front = True
            continue
        if in_front:
            in_front = text != "---"
            continue
        if text and not text.startswith("#"):
            lines.append(text)
    return lines


def _ranked(texts: Sequence[str], query: str) -> list[tuple[int, float]]:
    """``(index, relative score)`` of the texts that match, best first."""
    if not texts:
        return []
    scores = bm25_scores(texts, query)
    best = max(scores) if scores else 0.0
    if best <= 0:
        return []
    found = [(i, s / best) for i, s in enumerate(scores) if s > 0]
    return sorted(found, key=lambda p: (-p[1], p[0]))


ENGINE_WEIGHT = 0.5
"""Weight of the engine's relevance in an episode's score; the rest is the candidates' BM25
re-rank in Python (:func:`_episode_hits`)."""


def _episode_hits(conn: Connection, user_id: str, query: str, org: str, n: int, now: Any) -> list[SearchHit]:
    """The engine's top ``n`` episodes, re-ranked: the engine's relevance (relative to its best)
    weighted :data:`ENGINE_WEIGHT`, plus the BM25 of the same candidates in Python (Snowball
    stems, English stop words) for the rest. The engines' own stemming and length
    normalisation differ (FTS5 porter, PostgreSQL ``english``, InnoDB none); the re-rank gives
    every backend the same ordering rule over what its index found. Ties: newer first."""
    hits = search_episodes(conn, user_id, query, org_id=org, limit=n, now=now)
    if not hits:
        return []
    texts = [h.user_text + ("\n" + h.assistant_text if h.assistant_text else "") for h in hits]
    best = max(h.score for h in hits)
    python = bm25_scores_once(texts, query)  # new candidates each search: no index to keep
    python_best = max(python) if python else 0.0
    out = []
    for h, text, extra in zip(hits, texts, python, strict=True):
        engine = h.score / best if best > 0 else 0.0
        local = extra / python_best if python_best > 0 else 0.0
        out.append(
            SearchHit(
                "episode", str(h.episode_id), _cut(text), ENGINE_WEIGHT * engine + (1 - ENGINE_WEIGHT) * local,
                when=h.turn_at, chat_id=h.chat_id, user_text=h.user_text, assistant_text=h.assistant_text,
            )
        )
    return out


def _item_hits(conn: Connection, user_id: str, query: str, org: str, now: Any) -> list[SearchHit]:
    items = list_items(conn, user_id, org_id=org, now=now)
    return [
        SearchHit("item", str(items[i].item_id), _cut(items[i].text), s)
        for i, s in _ranked([it.text for it in items], query)
    ]


def _profile_hits(conn: Connection, user_id: str, query: str, root_folder: str) -> list[SearchHit]:
    record = read_profile(conn, user_id, root_folder=root_folder, unless_opted_out=True)
    if record is None:
        return []
    lines = _profile_lines(record.text or "")
    return [
        SearchHit("profile", PROFILE_PATH, _cut(lines[i]), s, path=PROFILE_PATH)
        for i, s in _ranked(lines, query)
    ]


def _file_hits(conn: Connection, user_id: str, query: str) -> list[SearchHit]:
    stores = [(sid, key) for sid, key, kind in user_stores(conn, user_id) if kind in ("user", "context")]
    if not stores:
        return []
    keys = dict(stores)
    rows = conn.execute(
        sa.select(_files.c.store_id, _files.c.file_path, _files.c.body).where(
            _files.c.store_id.in_(list(keys))
        )
    ).all()
    chunks: list[tuple[str, str, str]] = []
    for row in sorted(rows, key=lambda r: (keys[r.store_id], r.file_path)):
        for chunk in _chunks(row.body or ""):
            chunks.append((keys[row.store_id], row.file_path, chunk))
    return [
        SearchHit("file", f"{chunks[i][0]}:{chunks[i][1]}", _cut(chunks[i][2]), s, path=chunks[i][1])
        for i, s in _ranked([c[2] for c in chunks], query)
    ]


def _on_one_scale(hits: list[SearchHit], query: str) -> list[SearchHit]:
    """The hits of the small sources (items, profile lines, file pieces) scored again by one
    BM25 over them **and** the episode candidates, relative to that corpus's best: ranked
    alone, a user's best note would score 1.0 however weakly it matches, level with the best
    episode. Unchanged when there are no episodes or nothing else."""
    episodes = [h for h in hits if h.source == "episode"]
    others = [h for h in hits if h.source != "episode"]
    if not episodes or not others:
        return hits
    scores = bm25_scores_once([h.snippet for h in episodes] + [h.snippet for h in others], query)
    best = max(scores) if scores else 0.0
    if best <= 0:
        return hits
    rescored = [
        dataclasses.replace(h, score=s / best) for h, s in zip(others, scores[len(episodes) :], strict=True) if s > 0
    ]
    return episodes + rescored


def search_memory(
    conn: Connection,
    user_id: str,
    query: str,
    *,
    org_id: str = DEFAULT_ORG,
    scope: str | Iterable[str] | None = "all",
    limit: int = 10,
    candidates: int = DEFAULT_CANDIDATES,
    root_folder: str = DEFAULT_ROOT_FOLDER,
    check_switches: bool = True,
    now: dt.datetime | None = None,
) -> list[SearchHit]:
    """Search everything ``user_id``'s memory holds for ``query`` (see the module doc).

    Args:
        conn: the caller's connection (reads only, in its transaction; nothing is written).
        user_id: whose memory (never anyone else's is read).
        query: free text; its salient words are searched.
        org_id: the organisation (episodes and items are per organisation).
        scope: ``"all"`` (default) or one or more of ``episodes``, ``items``, ``profile``,
            ``files``.
        limit: most hits returned (1..1,000).
        candidates: episodes the engine returns before the merge (1..1,000, default 50).
        root_folder: the profile's namespace.
        check_switches: read the memory switch and the opt-out first (two ``SELECT``\\ s) and
            return ``[]`` when either is off; False when the caller has just read them.
        now: the time that decides expiry; default UTC now.

    Returns:
        Up to ``limit`` :class:`SearchHit`, best first.

    Raises:
        InvalidArgumentError: a non-``str`` query, a bad scope or limit.
        InvalidScopeError: invalid user or organisation id.
        StorageError: the database failed.
    """
    check_arguments(conn=conn)
    if not isinstance(query, str):
        raise InvalidArgumentError(f"query must be a str, got {type(query).__name__}")
    sources = check_scope(scope)
    org = check_org(org_id)
    for name, value in (("limit", limit), ("candidates", candidates)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
            raise InvalidArgumentError(f"{name} must be a whole number from 1 to 1000, got {value!r}")
    now = now or utcnow()
    try:
        if check_switches and not episode_memory_allowed(conn, user_id, org_id=org):
            return []
        hits: list[SearchHit] = []
        if "episodes" in sources:
            hits += _episode_hits(conn, user_id, query, org, max(candidates, limit), now)
        if "items" in sources:
            hits += _item_hits(conn, user_id, query, org, now)
        if "profile" in sources:
            hits += _profile_hits(conn, user_id, query, root_folder)
        if "files" in sources:
            hits += _file_hits(conn, user_id, query)
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "searching a user's memory") from exc
    hits = _on_one_scale(hits, query)
    order = {name: i for i, name in enumerate(("episode", "item", "profile", "file"))}
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    hits.sort(key=lambda h: (-h.score, order[h.source], -((h.when or epoch) - epoch).total_seconds()))
    return hits[:limit]
