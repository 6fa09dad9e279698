"""Look-alike names (issue 21): ten spellings that all list as ``/memories/prefs.md`` either fold
into that one key (NFKC) or are refused (a word that mixes scripts, a combining mark on an ASCII
character), and names of other scripts stay legal (:mod:`dbmemory.core.lookalikes`)."""

from __future__ import annotations

import unicodedata

import pytest

from dbmemory.core.lookalikes import ascii_lookalike, lookalike_problem
from dbmemory.core.paths import normalize_path
from dbmemory.errors import InvalidPathError

PREFS = "/memories/prefs.md"

FOLDED = {
    "fullwidth p": "/memories/\uff50refs.md",
    "fullwidth name": "/memories/\uff50\uff52\uff45\uff46\uff53\uff0e\uff4d\uff44",
    "mathematical bold p": "/memories/\U0001d429refs.md",
    "mathematical bold name": "/memories/\U0001d429\U0001d42b\U0001d41e\U0001d41f\U0001d42c.md",
    "one-dot leader": "/memories/prefs\u2024md",
    "fullwidth full stop": "/memories/prefs\uff0emd",
}
REFUSED = {
    "Cyrillic er": ("/memories/\u0440refs.md", "mixes the scripts Cyrillic and Latin"),
    "Cyrillic ie": ("/memories/pr\u0435fs.md", "mixes the scripts Cyrillic and Latin"),
    "Cyrillic dze": ("/memories/pref\u0455.md", "mixes the scripts Cyrillic and Latin"),
    "combining dot on the dot": ("/memories/prefs.\u0307md", "combining mark"),
}
LIGATURES = {"/memories/pro\ufb01le.md": "/memories/profile.md", "/memories/\ufb00.md": "/memories/ff.md"}


@pytest.mark.parametrize("raw", list(FOLDED.values()), ids=list(FOLDED))
def test_compatibility_spellings_fold_into_the_plain_key(raw: str) -> None:
    assert normalize_path(raw) == PREFS


@pytest.mark.parametrize("raw,canonical", list(LIGATURES.items()))
def test_ligatures_fold_into_their_letters(raw: str, canonical: str) -> None:
    assert normalize_path(raw) == canonical


@pytest.mark.parametrize("raw", ["/memories/%a\ufb01", "/memories/%\uff41f.md", "/memories/%2\U0001d41e.md"])
def test_a_fold_that_completes_a_percent_escape_is_refused(raw: str) -> None:
    """Decoding is total, so a key never holds an escape: ``%aﬁ`` folds into ``%afi``, which
    would decode into another key the next time (a key must normalise into itself)."""
    with pytest.raises(InvalidPathError) as info:
        normalize_path(raw)
    assert "percent-escape" in str(info.value)


@pytest.mark.parametrize("raw,why", list(REFUSED.values()), ids=list(REFUSED))
def test_look_alike_spellings_are_refused_with_the_rule(raw: str, why: str) -> None:
    with pytest.raises(InvalidPathError) as info:
        normalize_path(raw)
    assert why in str(info.value)
    assert "U+" in str(info.value) or "script" in str(info.value)


def test_the_ten_spellings_leave_one_key() -> None:
    keys = set()
    for raw in [*FOLDED.values(), *(p for p, _ in REFUSED.values())]:
        try:
            keys.add(normalize_path(raw))
        except InvalidPathError:
            pass
    assert keys == {PREFS}


def test_a_word_whose_letters_all_look_like_ascii_is_refused() -> None:
    with pytest.raises(InvalidPathError, match="reads as 'ace'"):
        normalize_path("/memories/\u0430\u0441\u0435.md")  # Cyrillic а, с, е
    with pytest.raises(InvalidPathError, match="reads as 'opa'"):
        normalize_path("/memories/\u03bf\u03c1\u03b1/x.md")  # Greek ο, ρ, α: a directory too


def test_a_compatibility_character_that_would_make_a_segment_or_an_escape_is_refused() -> None:
    with pytest.raises(InvalidPathError, match="holds '/'"):
        normalize_path("/memories/\u2100.md")  # ℀ is a/c
    with pytest.raises(InvalidPathError, match="holds '%'"):
        normalize_path("/memories/\uff0541.md")  # ％41 would be %41, then A
    with pytest.raises(InvalidPathError, match="looks like '.' or '..'"):
        normalize_path("/memories/\u2025/x.md")  # TWO DOT LEADER is ..


@pytest.mark.parametrize(
    "name",
    [
        "\u0437\u0430\u043c\u0435\u0442\u043a\u0438.md",  # Cyrillic word, Latin extension
        "\u0391\u03b8\u03ae\u03bd\u03b1.md",  # Greek
        "k\u0131rm\u0131z\u0131.md",  # Turkish dotless i is a Latin letter
        "caf\u00e9.md",
        "cafe\u0301.md",  # composes into é
        "bl\u00e5b\u00e6r.md",
        "\u65e5\u672c\u8a9e\u30e1\u30e2.md",  # Han + Katakana + Latin: one writing system
        "\ud55c\uad6d\uc5b4 notes.md",
        "\u0928\u092e\u0938\u094d\u0924\u0947.md",  # Devanagari with its vowel signs
        "\u0645\u0644\u0627\u062d\u0638\u0627\u062a.md",  # Arabic
    ],
)
def test_names_of_other_scripts_stay_legal(name: str) -> None:
    key = normalize_path("/memories/" + name)
    assert key == unicodedata.normalize("NFKC", "/memories/" + name)
    assert normalize_path(key) == key


def test_ascii_segments_are_never_judged_and_the_data_is_unicodes() -> None:
    assert lookalike_problem("rn-m-l-1-I-0-O.md") is None
    assert ascii_lookalike("\u0440") == "p" and ascii_lookalike("\u0455") == "s"
    assert ascii_lookalike("\u0437") is None
