"""The scoring criteria of the evaluation (pure functions, no database).

- **Evidence recall**: an evidence dialog turn counts as found when one line of the scored text
  holds at least half of the turn's salient word stems (:func:`salient_stems`: words of
  ``[a-z0-9]`` runs, stop words, tokens under 3 characters and the speakers' first names removed,
  Snowball English stems from PyStemmer, bm25s' English stop-word list). A question's evidence
  recall is the share of its scorable evidence turns found (a turn with no salient stem is not
  scorable).
- **Answer recall**: the gold answer, normalised as SQuAD does (:func:`normalize_answer`: lower
  case, punctuation and the articles a/an/the removed, white space collapsed), is a whole-word
  substring of the scored text normalised the same way.
- **Token F1** (tier 2): SQuAD's token F1 between a model's answer and the gold answer.
"""

from __future__ import annotations

import functools
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = [
    "salient_stems",
    "line_stems",
    "evidence_found",
    "normalize_answer",
    "answer_found",
    "token_f1",
]

_WORD = re.compile(r"[a-z0-9]+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


@functools.lru_cache(maxsize=1)
def _stem_words() -> object:
    import Stemmer  # optional: PyStemmer, the items extra

    return Stemmer.Stemmer("english").stemWords


@functools.lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN  # optional: bm25s, the items extra

    return frozenset(STOPWORDS_EN)


def _stems(words: list[str]) -> frozenset[str]:
    return frozenset(_stem_words()(words)) if words else frozenset()  # type: ignore[operator]


def salient_stems(text: str, names: Iterable[str] = ()) -> frozenset[str]:
    """The salient word stems of a dialog turn.

    Args:
        text: the turn's text.
        names: the speakers' names; their first names (lower case) are removed.

    Returns:
        The Snowball stems of the words left after removing stop words, tokens under 3
        characters and the first names.
    """
    drop = _stopwords() | {n.split()[0].lower() for n in names if n.split()}
    return _stems([w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in drop])


@functools.lru_cache(maxsize=65536)
def line_stems(line: str) -> frozenset[str]:
    """The stems of every word of one line of scored text."""
    return _stems(_WORD.findall(line.lower()))


def evidence_found(stems: frozenset[str], lines: Sequence[frozenset[str]]) -> bool:
    """Whether one line (its :func:`line_stems`) holds at least half of ``stems``."""
    if not stems:
        return False
    need = (len(stems) + 1) // 2
    return any(len(stems & line) >= need for line in lines)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_found(answer: str, normalized_text: str) -> bool:
    """Whether the normalised ``answer`` is a whole-word substring of ``normalized_text`` (the
    scored text already passed through :func:`normalize_answer`); an empty answer is never found."""
    gold = normalize_answer(answer)
    return bool(gold) and f" {gold} " in f" {normalized_text} "


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD's token F1 of ``prediction`` against ``gold`` (0.0 when either is empty)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)
