"""Ranking a LangGraph store search by its query: BM25 over the values' text (``bm25s``, an
optional dependency of the ``langgraph`` extra, imported on first use)."""

from __future__ import annotations

from dbmemory.errors import MissingDependencyError, extra_hint

__all__ = ["bm25_scores"]


def bm25_scores(query: str, texts: list[str]) -> list[float]:
    """BM25 score of each text for ``query`` (``bm25s``); zeros when nothing can match."""
    if not texts:
        return []
    try:
        import bm25s  # optional dependency (items extra), imported on use
    except ImportError as exc:
        raise MissingDependencyError(
            "ranking a LangGraph search by its query needs bm25s: " + extra_hint("langgraph")
        ) from exc
    corpus = bm25s.tokenize(texts, stopwords=None, show_progress=False, return_ids=False)
    vocabulary = {token for tokens in corpus for token in tokens}
    wanted = [
        token
        for tokens in bm25s.tokenize([query], stopwords=None, show_progress=False, return_ids=False)
        for token in tokens
        if token in vocabulary
    ]
    if not wanted:
        return [0.0] * len(texts)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    return [float(score) for score in retriever.get_scores(wanted)]
