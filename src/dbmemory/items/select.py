"""Which memory items a turn injects.

:func:`select_items` is pure (no database): given the user's live items and the current question
it returns a :class:`Selection`:

- no items: nothing (``mode="none"``);
- fewer than ``threshold`` items (default 20): all of them (``mode="all"``), most recently
  used or changed first;
- ``threshold`` or more: the ``top_k`` (default 10) items most relevant to the question
  (``mode="ranked"``), ranked by BM25 (the ``bm25s`` library, English stop words and the Snowball
  stemmer from ``PyStemmer`` when installed), or by cosine similarity of embeddings when an
  embedding model is named (:func:`dbmemory.llm.embed`, litellm). The profile is injected
  beside them as always (:mod:`dbmemory.items.inject`).

Ties (and a question that shares no word with any item: every BM25 score 0) are broken by
recency, then by item id, so a selection is deterministic. An embedding call that fails falls
back to BM25 (logged and counted as ``method="bm25"``, ``fallback=True``); the turn never fails
because of selection.

Items are any objects with ``item_id`` (or ``id``) and ``text`` attributes; ``last_used_at``, ``updated_at`` and
``created_at`` (datetimes or None) order them by recency when present (the
:class:`dbmemory.items.Item` dataclass has them).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dbmemory.errors import InvalidArgumentError, MissingDependencyError, extra_hint
from dbmemory.llm import embed as llm_embed

__all__ = [
    "DEFAULT_SELECTION_THRESHOLD",
    "DEFAULT_TOP_K",
    "Selection",
    "ItemPool",
    "item_pool",
    "select_items",
    "rank_items",
    "bm25_scores",
    "bm25_scores_once",
    "by_recency",
    "item_id",
    "ITEMS_EXTRA_HINT",
]

log = logging.getLogger(__name__)

DEFAULT_SELECTION_THRESHOLD = 20
"""Item count from which a turn injects only the most relevant ``top_k`` items."""

DEFAULT_TOP_K = 10
"""Items injected when the user has ``threshold`` or more."""

ITEMS_EXTRA_HINT = extra_hint("items")
"""What to install when ``bm25s`` is missing."""

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

EmbedFn = Callable[..., list[list[float]]]
"""``embed(model, texts, timeout=...) -> one vector per text`` (default :func:`dbmemory.llm.embed`)."""


@dataclass(frozen=True)
class Selection:
    """The items a turn injects.

    Attributes:
        items: the chosen items, in injection order (most relevant or most recent first).
        mode: ``"none"`` (no items), ``"all"`` (under the threshold) or ``"ranked"`` (top-k).
        total: how many live items the user has.
        method: ``"bm25"`` or ``"embedding"`` for ranked selections, else None.
        fallback: the embedding call failed and BM25 ranked instead.
    """

    items: tuple[Any, ...]
    mode: Literal["none", "all", "ranked"]
    total: int
    method: str | None = None
    fallback: bool = False


def _aware(value: Any) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        return _EPOCH
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


def _recency(item: Any) -> dt.datetime:
    """The item's latest use or change (UTC), the epoch when it has none."""
    best = _EPOCH
    for name in ("last_used_at", "updated_at", "created_at"):
        value = getattr(item, name, None)
        if isinstance(value, dt.datetime):
            value = _aware(value)
            if value > best:
                best = value
    return best


def item_id(item: Any) -> Any:
    """The id of an item: ``item_id`` (:class:`dbmemory.items.Item`) or ``id``."""
    value = getattr(item, "item_id", None)
    return getattr(item, "id", None) if value is None else value


def by_recency(items: Sequence[Any]) -> list[Any]:
    """``items`` most recently used or changed first; ties by id (ascending)."""
    keyed = [((_EPOCH - _recency(item)).total_seconds(), str(type(item_id(item))), item_id(item), n)
             for n, item in enumerate(items)]
    keyed.sort()
    return [items[k[3]] for k in keyed]


_STEMMER: list[Any] = []


def _stemmer() -> Callable[[list[str]], list[str]] | None:
    found: Callable[[list[str]], list[str]] | None
    if not _STEMMER:
        try:
            import Stemmer  # PyStemmer, an optional companion of bm25s
        except ImportError:
            _STEMMER.append(None)
        else:
            _STEMMER.append(Stemmer.Stemmer("english").stemWords)
    found = _STEMMER[0]
    return found


_INDEX_CACHE_SIZE = 512
_index_cache: OrderedDict[tuple[str, ...], Any] = OrderedDict()
_index_lock = threading.Lock()


def _index(texts: tuple[str, ...]) -> Any:
    """The BM25 index of ``texts`` (kept per process for the last 512 distinct item lists: a
    user's items rarely change between turns), or None when no text has a term."""
    with _index_lock:
        found = _index_cache.get(texts)
        if found is not None:
            _index_cache.move_to_end(texts)
            return found[0]
    import bm25s  # optional dependency (items extra), imported on use

    corpus = _corpus_tokens(texts)
    retriever = None
    if any(corpus):
        retriever = bm25s.BM25()
        # an item of stop words only tokenises to []: give bm25s one placeholder token for it
        retriever.index([doc or ["\x00"] for doc in corpus], show_progress=False)
    with _index_lock:
        _index_cache[texts] = (retriever,)
        while len(_index_cache) > _INDEX_CACHE_SIZE:
            _index_cache.popitem(last=False)
    return retriever


_WORD = re.compile(r"(?u)\b\w\w+\b")
"""``bm25s.tokenize``'s default token pattern."""

_STOPWORDS: list[frozenset[str]] = []


def _stopwords() -> frozenset[str]:
    if not _STOPWORDS:
        from bm25s.stopwords import (
            STOPWORDS_EN,  # optional dependency (items extra), imported on use
        )

        _STOPWORDS.append(frozenset(STOPWORDS_EN))
    return _STOPWORDS[0]


def _corpus_tokens(texts: Sequence[str]) -> list[list[str]]:
    """``texts`` tokenised exactly as ``bm25s.tokenize(texts, stopwords="en", stemmer=...,
    return_ids=False)`` does (its default token pattern, lower case, its English stop words,
    each distinct word stemmed once), without its per-text rebuilding of the stop-word set and
    its progress-bar machinery (the cost of ranking a search's candidates per turn)."""
    stop = _stopwords()
    docs = [[w for w in _WORD.findall(text.lower()) if w not in stop] for text in texts]
    stem = _stemmer()
    if stem is None:
        return docs
    words = list(dict.fromkeys(w for doc in docs for w in doc))
    stems = dict(zip(words, stem(words), strict=True)) if words else {}
    return [[stems[w] for w in doc] for doc in docs]


def _query_tokens(query: str) -> list[str]:
    """``query`` split as ``bm25s.tokenize`` splits the corpus (its default token pattern, lower
    case, its English stop words, the same stemmer), without its progress-bar machinery."""
    stop = _stopwords()
    words = [w for w in _WORD.findall(query.lower()) if w not in stop]
    stem = _stemmer()
    return list(stem(words)) if stem is not None and words else words


def bm25_scores(texts: Sequence[str], query: str) -> list[float]:
    """BM25 score of each text for ``query`` (``bm25s``; English stop words, Snowball stemming).

    Args:
        texts: the documents (item texts), at least one.
        query: the question.

    Returns:
        One score (>= 0) per text, in order; all 0 when the query shares no term with any text.

    Raises:
        MissingDependencyError: ``bm25s`` is not installed (``pip install -e ".[items]"``).
    """
    scores = _bm25_array(tuple(texts), query)
    return [0.0] * len(texts) if scores is None else [float(s) for s in scores]


_K1, _B = 1.5, 0.75
"""``bm25s.BM25()``'s defaults (its ``lucene`` method), which :func:`bm25_scores_once` repeats."""


def bm25_scores_once(texts: Sequence[str], query: str) -> list[float]:
    """:func:`bm25_scores` for texts ranked once (a search's candidates): the same numbers, bit
    for bit, computed for the query's terms only, without building (and caching) a ``bm25s``
    index of every term of every text.

    The arithmetic is ``bm25s``' own for its default ``lucene`` method (k1 1.5, b 0.75): per
    text and query term, ``float32(idf32 * tf / (k1 * (1 - b + b * len / avg len) + tf))`` in
    float64 with ``idf32 = float32(ln(1 + (N - df + 0.5) / (df + 0.5)))``, summed in float32 in
    the query's term order (a repeated term counts again); a text of stop words only counts as
    one token, as :func:`_index` gives it. The tests compare both on real candidates.

    Args:
        texts: the documents, at least one.
        query: the question.

    Returns:
        One score (>= 0) per text, in order; all 0 when the query shares no term with any text.

    Raises:
        MissingDependencyError: ``bm25s`` is not installed (``pip install -e ".[items]"``).
    """
    try:
        import numpy as np  # a dependency of bm25s (optional items extra)
    except ImportError as exc:
        raise MissingDependencyError(f"ranking memory items needs the bm25s library: {ITEMS_EXTRA_HINT}") from exc
    _stopwords()  # raises MissingDependencyError without bm25s
    terms = _query_tokens(query)
    corpus = _corpus_tokens(texts) if terms else []
    if not any(corpus):
        return [0.0] * len(texts)
    wanted = set(terms)
    counts: list[dict[str, int]] = []
    for doc in corpus:
        found: dict[str, int] = {}
        for word in doc:
            if word in wanted:
                found[word] = found.get(word, 0) + 1
        counts.append(found)
    lengths = np.array([len(doc) or 1 for doc in corpus])
    n, avg = len(corpus), lengths.mean()  # numpy float64, as bm25s computes it
    scores = np.zeros(n, dtype=np.float32)
    columns: dict[str, tuple[Any, Any]] = {}
    for term in terms:
        if term not in columns:
            rows = [i for i, found in enumerate(counts) if term in found]
            df = len(rows)
            if not df:
                columns[term] = (None, None)
                continue
            idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
            tf = np.array([counts[i][term] for i in rows], dtype=np.float32)
            norm = np.array([_K1 * ((1 - _B) + _B * int(lengths[i]) / avg) for i in rows])
            values = (np.float64(idf) * (tf / (norm + tf))).astype(np.float32)
            columns[term] = (np.array(rows), values)
        rows_of, values_of = columns[term]
        if rows_of is not None:
            scores[rows_of] += values_of
    return [float(s) for s in scores]


def _bm25_array(texts: tuple[str, ...], query: str, retriever: Any = False) -> Any:
    """:func:`bm25_scores` as ``bm25s``' numpy array (float32), or None when every score is 0;
    ``retriever``: the index of ``texts`` when the caller kept it (False: look it up)."""
    try:
        import bm25s  # noqa: F401 - the dependency check of the optional items extra
    except ImportError as exc:
        raise MissingDependencyError(
            f"ranking memory items needs the bm25s library: {ITEMS_EXTRA_HINT}"
        ) from exc
    query_tokens = _query_tokens(query)
    if not query_tokens:
        return None
    if retriever is False:
        retriever = _index(texts)
    if retriever is None:
        return None
    return retriever.get_scores(query_tokens)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _embedding_scores(
    texts: Sequence[str], query: str, model: str, embed: EmbedFn | None, timeout: float | None
) -> list[float]:
    if embed is None:
        embed = llm_embed
    vectors = embed(model, [query, *texts], timeout=timeout)
    if len(vectors) != len(texts) + 1:
        raise ValueError(f"the embedding model returned {len(vectors)} vectors for {len(texts) + 1} texts")
    question = vectors[0]
    return [_cosine(question, vector) for vector in vectors[1:]]


class ItemPool:
    """A user's live items with what ranking derives from them, built once per item list
    (:func:`item_pool`) and reused turn after turn (:mod:`dbmemory.items.turn_cache` keeps one
    per cached list), so a turn neither sorts by recency nor collects the texts again.

    Attributes:
        items: the items, in the caller's order (a tuple).
        recent: the same objects in :func:`by_recency` order.
        texts: ``str(item.text)`` per item, in ``items`` order.
        ranks: each item's position in ``recent``, in ``items`` order.
    """

    __slots__ = ("items", "recent", "texts", "ranks", "_retriever", "_rank_array")

    def __init__(self, items: Sequence[Any], recent: Sequence[Any] | None = None) -> None:
        self.items = tuple(items)
        self.recent = tuple(by_recency(self.items) if recent is None else recent)
        if len(self.recent) != len(self.items):
            raise InvalidArgumentError("recent must hold the same items as items")
        position = {id(item): index for index, item in enumerate(self.recent)}
        try:
            self.ranks = tuple(position[id(item)] for item in self.items)
        except KeyError:
            raise InvalidArgumentError("recent must hold the same items as items") from None
        self.texts = tuple(str(getattr(item, "text", "")) for item in self.items)
        self._retriever: Any = False  # False: not looked up yet
        self._rank_array: Any = None

    def __len__(self) -> int:
        return len(self.items)

    def bm25(self, query: str) -> Any:
        """BM25 scores of :attr:`texts` for ``query`` (numpy float32, None: all 0); the index is
        looked up once per pool."""
        if self._retriever is False:
            try:
                import bm25s  # noqa: F401 - the optional items extra checked before caching anything
            except ImportError:
                return _bm25_array(self.texts, query)  # raises MissingDependencyError
            self._retriever = _index(self.texts)
        return _bm25_array(self.texts, query, self._retriever)

    def top(self, scores: Any, top_k: int) -> tuple[Any, ...]:
        """The ``top_k`` items by descending score, ties by recency (``scores`` a numpy array in
        :attr:`items` order)."""
        import numpy as np  # optional dependency (items extra), imported on use

        if self._rank_array is None:
            self._rank_array = np.asarray(self.ranks, dtype=np.int64)
        # lexsort: the last key is the primary one; every rank differs, so the order is total
        order = np.lexsort((self._rank_array, -np.asarray(scores, dtype=np.float64)))[:top_k]
        items = self.items
        return tuple(items[i] for i in order.tolist())


def item_pool(items: Sequence[Any], recent: Sequence[Any] | None = None) -> ItemPool:
    """An :class:`ItemPool` of ``items`` (``recent``: the same objects in :func:`by_recency`
    order, when the caller has it; None sorts them).

    Raises:
        InvalidArgumentError: ``recent`` does not hold exactly the objects of ``items``.
    """
    return ItemPool(items, recent)


def _ranked(pool: ItemPool, scores: Sequence[float], top_k: int) -> tuple[Any, ...]:
    """Top ``top_k`` of ``pool`` by ``scores`` (Python floats), ties by recency, then order."""
    best = sorted(zip([-s for s in scores], pool.ranks, range(len(pool)), strict=True))[:top_k]
    return tuple(pool.items[i] for _, _, i in best)


def _bm25_ranked(pool: ItemPool, query: str, top_k: int) -> tuple[Any, ...]:
    scores = pool.bm25(query)
    if scores is None:  # every score 0: by recency
        return pool.recent[:top_k]
    return pool.top(scores, top_k)


def select_items(
    items: Sequence[Any] | ItemPool,
    question: str,
    *,
    threshold: int = DEFAULT_SELECTION_THRESHOLD,
    top_k: int = DEFAULT_TOP_K,
    embedding_model: str | None = None,
    embed: EmbedFn | None = None,
    timeout: float | None = None,
    recent: Sequence[Any] | None = None,
) -> Selection:
    """Choose the items to inject for ``question`` (see the module doc for the rule).

    Args:
        items: the user's live items (soft-deleted and expired ones already left out), or an
            :class:`ItemPool` of them (then ``recent`` is None: the pool has it).
        question: the user's current message.
        threshold: item count from which only the ``top_k`` most relevant are injected (>= 1).
        top_k: how many items a ranked selection keeps (>= 1).
        embedding_model: a litellm embedding model name; None ranks by BM25.
        embed: the embedding call (default :func:`dbmemory.llm.embed`); tests pass a fake.
        timeout: seconds for the embedding call, or None for litellm's default.
        recent: ``items`` already in :func:`by_recency` order (the same objects), when the
            caller keeps it (:mod:`dbmemory.items.turn_cache`); None sorts them here.

    Returns:
        A :class:`Selection`.

    Raises:
        InvalidArgumentError: ``threshold`` or ``top_k`` below 1.
        MissingDependencyError: BM25 ranking is needed and ``bm25s`` is not installed.
    """
    for name, value in (("threshold", threshold), ("top_k", top_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name} must be a whole number >= 1, got {value!r}")
    if isinstance(items, ItemPool):
        if recent is not None:
            raise InvalidArgumentError("recent is part of an ItemPool: pass one or the other")
        pool = items
    else:
        items = list(items)
        if not items:
            return Selection((), "none", 0)
        if recent is not None and len(recent) != len(items):
            raise InvalidArgumentError("recent must hold the same items as items")
        if len(items) < threshold:
            return Selection(tuple(by_recency(items) if recent is None else recent), "all", len(items))
        pool = ItemPool(items, recent)
    total = len(pool)
    if not total:
        return Selection((), "none", 0)
    if total < threshold:
        return Selection(pool.recent, "all", total)
    query = question or ""
    if embedding_model:
        try:
            scores = _embedding_scores(pool.texts, query, embedding_model, embed, timeout)
        except Exception as exc:  # noqa: BLE001 - selection never fails the turn
            log.warning("embedding selection with %s failed (%s); ranking by BM25", embedding_model, type(exc).__name__)
        else:
            return Selection(_ranked(pool, scores, top_k), "ranked", total, "embedding")
        return Selection(_bm25_ranked(pool, query, top_k), "ranked", total, "bm25", True)
    return Selection(_bm25_ranked(pool, query, top_k), "ranked", total, "bm25")


def rank_items(
    items: Sequence[Any],
    question: str,
    *,
    limit: int | None = None,
    embedding_model: str | None = None,
    embed: EmbedFn | None = None,
    timeout: float | None = None,
) -> list[tuple[Any, float]]:
    """Every item of ``items`` with its relevance to ``question``, best first, at any count (a
    search with scores, as mem0's ``search`` answers; :func:`select_items` decides what a turn
    injects and ranks only from its threshold on).

    Args:
        items: the user's live items (e.g. :func:`dbmemory.items.list_items`).
        question: the query.
        limit: keep the ``limit`` best (>= 1); None keeps all.
        embedding_model: a litellm embedding model name: scores are cosine similarities; None
            ranks by BM25 (scores >= 0, all 0 when the query shares no term with any item).
        embed: the embedding call (default :func:`dbmemory.llm.embed`); tests pass a fake.
        timeout: seconds for the embedding call, or None for litellm's default.

    Returns:
        ``[(item, score), ...]``, descending score, ties by recency (latest use or change
        first). An embedding call that fails is not hidden: it raises (no BM25 fallback, since
        the scores would mean something else).

    Raises:
        InvalidArgumentError: ``limit`` below 1.
        MissingDependencyError: BM25 ranking is needed and ``bm25s`` is not installed.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArgumentError(f"limit must be a whole number >= 1 or None, got {limit!r}")
    pool = ItemPool(list(items))
    if not len(pool):
        return []
    query = question or ""
    if embedding_model:
        scores = _embedding_scores(pool.texts, query, embedding_model, embed, timeout)
    else:
        raw = pool.bm25(query)
        scores = [0.0] * len(pool) if raw is None else [float(s) for s in raw]
    order = sorted(range(len(pool)), key=lambda i: (-scores[i], pool.ranks[i]))
    return [(pool.items[i], scores[i]) for i in order[: limit or len(order)]]
