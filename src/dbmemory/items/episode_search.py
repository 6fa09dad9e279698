"""Full-text search over a user's episodes in the database's own engine.

The query is an **OR of the message's salient words**: words of 2+ letters or digits (Unicode
``\\w``), lower-cased, English stop words removed (``bm25s``' list when installed), at most
:data:`MAX_QUERY_WORDS` of them, first occurrence first. Each word is passed so that no
character of the message is read as an operator of the engine's query language:

| backend | index | match | relevance (higher is better) |
|---|---|---|---|
| SQLite | FTS5 ``dbm_episodes_fts``, ``porter unicode61`` | ``MATCH '"w1" OR "w2"'`` (each word a quoted string) | ``-bm25(dbm_episodes_fts)`` |
| PostgreSQL | ``search_vector`` (generated ``tsvector``) + GIN | ``@@ to_tsquery(cfg, '''w1''' \\| '''w2''')`` (each word a quoted lexeme) | ``ts_rank`` |
| MySQL/MariaDB | InnoDB ``FULLTEXT`` | ``MATCH (episode_text) AGAINST (:q IN NATURAL LANGUAGE MODE)`` (no operators in that mode) | the same ``MATCH`` |
| Oracle | Oracle Text ``CONTEXT`` | ``CONTAINS(episode_text, '{w1} ACCUM {w2}', 1) > 0`` (each word braced) | ``SCORE(1)`` |

``cfg`` is the configuration the generated column was built with (read once per engine from
the catalog). Words are only ever ``\\w`` characters, so quotes, ``*``, ``-``, parentheses,
``NEAR``/``AND``/``NOT`` and the like in a message cannot widen, narrow or break the search.
The Oracle form is compiled in the tests and reviewed, never run here.

Only the user's own, live (not expired) episodes in the organisation are ever read: the
``org_id``/``user_key`` condition is part of every statement.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dbmemory.core.clock import utcnow
from dbmemory.db.dialect.errors import translate_db_error
from dbmemory.db.dialect.types import UtcDateTime
from dbmemory.items.episodes import split_text
from dbmemory.items.model import check_org, user_key_of

__all__ = [
    "MAX_QUERY_WORDS",
    "DEFAULT_CANDIDATES",
    "EpisodeHit",
    "salient_words",
    "engine_query",
    "episode_search_statement",
    "search_episodes",
]

MAX_QUERY_WORDS = 16
"""Most words of a message put in one query."""

DEFAULT_CANDIDATES = 50
"""Episodes the engine returns for a search by default."""

_WORD = re.compile(r"\w\w+", re.UNICODE)

_FALLBACK_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with i you he she we me my your our what when where who "
    "how which do did does have has had am been so".split()
)

_STOP: list[frozenset[str]] = []


def _stopwords() -> frozenset[str]:
    if not _STOP:
        try:
            from bm25s.stopwords import STOPWORDS_EN  # optional dependency (items extra)
        except ImportError:
            _STOP.append(_FALLBACK_STOPWORDS)
        else:
            _STOP.append(frozenset(STOPWORDS_EN) | _FALLBACK_STOPWORDS)
    return _STOP[0]


def salient_words(message: str) -> list[str]:
    """The words of ``message`` a search looks for (see the module doc): lower case, no stop
    words, no duplicates, at most :data:`MAX_QUERY_WORDS`; ``[]`` when none is left."""
    stop = _stopwords()
    seen: dict[str, None] = {}
    for word in _WORD.findall(message.lower()):
        if word.strip("_") and word not in stop and word not in seen:
            seen[word] = None
            if len(seen) >= MAX_QUERY_WORDS:
                break
    return list(seen)


def engine_query(dialect: str, words: list[str]) -> str:
    """The engine's query text for ``words`` (see the table of the module doc)."""
    if dialect == "sqlite":
        return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    if dialect == "postgresql":
        return " | ".join("'" + w.replace("'", "''").replace("\\", "\\\\") + "'" for w in words)
    if dialect == "oracle":
        return " ACCUM ".join("{" + w.replace("}", "}}") + "}" for w in words)
    return " ".join(words)  # MySQL/MariaDB natural language mode: no operators


@dataclass(frozen=True)
class EpisodeHit:
    """An episode found by :func:`search_episodes`.

    Attributes:
        episode_id: its id.
        chat_id: the chat (session) of the turn, or None.
        turn_at: the time of the turn (UTC).
        user_text: the user's message as stored.
        assistant_text: the answer as stored.
        score: the engine's relevance (higher is better; comparable within one search only).
    """

    episode_id: int
    chat_id: str | None
    turn_at: dt.datetime
    user_text: str
    assistant_text: str
    score: float


def _typed(stmt: sa.TextClause) -> Any:
    """``stmt`` with the time bound and read as :class:`UtcDateTime`."""
    return stmt.bindparams(sa.bindparam("now", type_=UtcDateTime())).columns(
        sa.column("episode_id"), sa.column("chat_id"), sa.column("turn_at", UtcDateTime()),
        sa.column("episode_text"), sa.column("user_chars"), sa.column("score"),
    )


_SQLITE = sa.text(
    "SELECT e.episode_id, e.chat_id, e.turn_at, e.episode_text, e.user_chars, "
    "-bm25(dbm_episodes_fts) AS score "
    "FROM dbm_episodes_fts JOIN dbm_episodes e ON e.episode_id = dbm_episodes_fts.rowid "
    "WHERE dbm_episodes_fts MATCH :q AND e.org_id = :org AND e.user_key = :user_key "
    "AND (e.expires_at IS NULL OR e.expires_at > :now) "
    "ORDER BY score DESC, e.turn_at DESC LIMIT :n"  # the alias: bm25() runs once per row
)

_MYSQL = sa.text(
    "SELECT episode_id, chat_id, turn_at, episode_text, user_chars, "
    "MATCH (episode_text) AGAINST (:q IN NATURAL LANGUAGE MODE) AS score "
    "FROM dbm_episodes WHERE org_id = :org AND user_key = :user_key "
    "AND (expires_at IS NULL OR expires_at > :now) "
    "AND MATCH (episode_text) AGAINST (:q IN NATURAL LANGUAGE MODE) "
    "ORDER BY score DESC, turn_at DESC LIMIT :n"
)

_ORACLE = sa.text(
    "SELECT episode_id, chat_id, turn_at, episode_text, user_chars, SCORE(1) AS score "
    "FROM dbm_episodes WHERE org_id = :org AND user_key = :user_key "
    "AND (expires_at IS NULL OR expires_at > :now) "
    "AND CONTAINS(episode_text, :q, 1) > 0 "
    "ORDER BY SCORE(1) DESC, turn_at DESC FETCH FIRST :n ROWS ONLY"
)


def _postgresql(config: str) -> sa.TextClause:
    return sa.text(
        "SELECT episode_id, chat_id, turn_at, episode_text, user_chars, "
        f"ts_rank(search_vector, to_tsquery('{config}'::regconfig, :q)) AS score "
        "FROM dbm_episodes WHERE org_id = :org AND user_key = :user_key "
        "AND (expires_at IS NULL OR expires_at > :now) "
        f"AND search_vector @@ to_tsquery('{config}'::regconfig, :q) "
        "ORDER BY score DESC, turn_at DESC LIMIT :n"
    )


_PG_CONFIG_SQL = sa.text(
    "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a "
    "ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
    "WHERE d.adrelid = to_regclass('dbm_episodes') AND a.attname = 'search_vector'"
)
_PG_CONFIG = re.compile(r"to_tsvector\('([a-z_][a-z0-9_]*)'::regconfig")
_pg_configs: dict[str, str] = {}
_pg_lock = threading.Lock()


def _pg_config(conn: Connection) -> str:
    """The text search configuration ``search_vector`` was generated with (cached per URL)."""
    url = conn.engine.url.render_as_string(hide_password=True)
    with _pg_lock:
        found = _pg_configs.get(url)
    if found is None:
        expr = conn.execute(_PG_CONFIG_SQL).scalar_one_or_none() or ""
        match = _PG_CONFIG.search(expr)
        found = match.group(1) if match else "english"
        with _pg_lock:
            _pg_configs[url] = found
    return found


def episode_search_statement(dialect: str, pg_config: str = "english") -> Any:
    """The search statement for ``dialect`` (parameters ``q``, ``org``, ``user_key``, ``now``,
    ``n``)."""
    if dialect == "sqlite":
        return _typed(_SQLITE)
    if dialect == "postgresql":
        return _typed(_postgresql(pg_config))
    if dialect in ("mysql", "mariadb"):
        return _typed(_MYSQL)
    if dialect == "oracle":
        return _typed(_ORACLE)
    raise ValueError(f"no full-text search for dialect {dialect!r}")


def search_episodes(
    conn: Connection,
    user_id: str,
    query: str,
    *,
    org_id: str = "default",
    limit: int = DEFAULT_CANDIDATES,
    now: dt.datetime | None = None,
) -> list[EpisodeHit]:
    """The user's live episodes that match ``query``, best first (one ``SELECT``; on
    PostgreSQL one more, once per engine, for the configuration).

    Args:
        conn: the caller's connection (reads only, in its transaction).
        user_id: whose episodes.
        query: free text (a message); its salient words are searched (module doc).
        org_id: the organisation.
        limit: most hits (1..1,000).
        now: the time that decides expiry; default UTC now.

    Returns:
        Up to ``limit`` :class:`EpisodeHit`, by the engine's relevance, then newest first; ``[]``
        when the query has no salient word. MySQL/MariaDB's InnoDB index sees only committed
        rows (an episode written in the caller's open transaction is found after the commit).

    Raises:
        InvalidScopeError: invalid user or organisation id.
        StorageError: the database failed.
    """
    org = check_org(org_id)
    key = user_key_of(user_id)
    n = max(1, min(int(limit), 1000))
    words = salient_words(query)
    if not words:
        return []
    dialect = conn.dialect.name
    try:
        config = _pg_config(conn) if dialect == "postgresql" else "english"
        stmt = episode_search_statement(dialect, config)
        rows = conn.execute(
            stmt,
            {"q": engine_query(dialect, words), "org": org, "user_key": key, "now": now or utcnow(), "n": n},
        ).all()
    except sa.exc.SQLAlchemyError as exc:
        raise translate_db_error(exc, "searching conversation episodes") from exc
    hits = []
    for row in rows:
        user, reply = split_text(row.episode_text, int(row.user_chars))
        hits.append(
            EpisodeHit(int(row.episode_id), row.chat_id, _utc(row.turn_at), user, reply, float(row.score or 0.0))
        )
    return hits


def _utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
