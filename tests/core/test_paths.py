"""Unit tests of dbmemory.core.paths: every spelling of a path gives one key, none escapes /memories."""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbmemory.core.paths import (
    MAX_DECODE_ROUNDS,
    MAX_PATH_CHARS,
    ROOT,
    ancestors,
    is_root,
    is_within,
    normalize_path,
    path_hash,
    quote_value,
)
from dbmemory.errors import InvalidArgumentError, InvalidPathError


def refused(raw: object) -> str:
    with pytest.raises(InvalidPathError) as info:
        normalize_path(raw)
    return str(info.value)


# ------------------------------------------------------------------ C1: outside /memories


@pytest.mark.parametrize(
    "raw",
    [
        "/memories_backup/notes.md",
        "/memoriesX",
        "/memories/..",
        "/memories/foo/..",
        "/memories/%2e%2e/secret.md",
        "/memories/..%2fsecret.md",
        "/memories\\..\\x.md",
    ],
)
def test_c1_paths_outside_memories_are_refused(raw: str) -> None:
    refused(raw)


def test_dot_dot_inside_one_segment_is_a_legal_name() -> None:
    assert normalize_path("/memories/first..last.md") == "/memories/first..last.md"


def test_sibling_directory_with_memories_prefix_is_refused_with_rule_and_remedy() -> None:
    assert refused("/memories_backup/notes.md") == (
        "path '/memories_backup/notes.md' must be /memories or start with /memories/: "
        "write it as '/memories/<name>', e.g. '/memories/notes.md'"
    )


def test_name_glued_to_root_is_refused() -> None:
    assert refused("/memoriesX") == (
        "path '/memoriesX' must be /memories or start with /memories/: "
        "write it as '/memories/<name>', e.g. '/memories/notes.md'"
    )


def test_dot_dot_segment_message_gives_value_rule_and_remedy() -> None:
    assert refused("/memories/a/../b") == (
        "path '/memories/a/../b' must stay under /memories: remove '..' segments"
    )


def test_trailing_dot_dot_is_refused() -> None:
    assert refused("/memories/foo/..") == (
        "path '/memories/foo/..' must stay under /memories: remove '..' segments"
    )


def test_percent_encoded_dot_dot_message_shows_the_decoded_path() -> None:
    assert refused("/memories/%2e%2e/secret.md") == (
        "path '/memories/%2e%2e/secret.md' (decoded: '/memories/../secret.md') "
        "must stay under /memories: remove '..' segments"
    )


def test_percent_encoded_slash_that_makes_a_dot_dot_segment_is_refused() -> None:
    assert refused("/memories/..%2fsecret.md") == (
        "path '/memories/..%2fsecret.md' (decoded: '/memories/../secret.md') "
        "must stay under /memories: remove '..' segments"
    )


def test_backslash_traversal_is_refused_with_remedy() -> None:
    assert refused("/memories\\..\\x.md") == (
        "path '/memories\\\\..\\\\x.md' contains a backslash at position 9: "
        "separate segments with '/' (e.g. '/memories/a/b.md')"
    )


def test_single_dot_segment_is_refused() -> None:
    assert refused("/memories/./a.md") == (
        "path '/memories/./a.md' contains a '.' segment: remove it "
        "('/memories/./a' is '/memories/a')"
    )


def test_dot_dot_escape_beyond_root_is_refused() -> None:
    assert "must stay under /memories" in refused("/memories/../../../etc/passwd")


@pytest.mark.parametrize("raw", ["/Memories/a.md", "/MEMORIES", "memories/a.md", "/", "/etc/passwd", "a.md"])
def test_other_roots_and_relative_paths_are_refused(raw: str) -> None:
    assert "must be /memories or start with /memories/" in refused(raw)


# ---------------------------------------------------------------------- canonical spelling


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("/memories", "/memories"),
        ("/memories/", "/memories"),
        ("//memories", "/memories"),
        ("/memories//a//b.md", "/memories/a/b.md"),
        ("/memories/a/b/", "/memories/a/b"),
        ("///memories///a///", "/memories/a"),
        ("/memories/%61.md", "/memories/a.md"),
        ("/memories/my%20notes.md", "/memories/my notes.md"),
        ("/memories/a%2Fb.md", "/memories/a/b.md"),
        ("/memories/100%.md", "/memories/100%.md"),
        ("/memories/a+b.md", "/memories/a+b.md"),
        ("/memories/...", "/memories/..."),
        ("/memories/.hidden", "/memories/.hidden"),
        ("/memories/..x", "/memories/..x"),
        ("/memories/x..", "/memories/x.."),
        ("/memories/käse.md", "/memories/käse.md"),
        ("/memories/🍕.md", "/memories/🍕.md"),
    ],
)
def test_equivalent_spellings_give_the_canonical_key(raw: str, canonical: str) -> None:
    assert normalize_path(raw) == canonical


def test_nfc_and_nfd_spellings_give_one_key() -> None:
    composed = "/memories/caf\u00e9.md"
    decomposed = "/memories/cafe\u0301.md"
    assert normalize_path(decomposed) == normalize_path(composed) == composed


def test_percent_encoded_nfd_spelling_gives_the_nfc_key() -> None:
    assert normalize_path("/memories/cafe%CC%81.md") == "/memories/caf\u00e9.md"


def test_double_percent_encoding_is_decoded_until_stable() -> None:
    assert normalize_path("/memories/%2561.md") == "/memories/a.md"


def test_normalisation_is_idempotent_for_examples() -> None:
    for raw in ["/memories//a/", "/memories/%2561", "/memories/cafe\u0301"]:
        once = normalize_path(raw)
        assert normalize_path(once) == once


# ------------------------------------------------------- percent-encoding at several depths


def encode_times(text: str, rounds: int) -> str:
    for _ in range(rounds):
        text = quote(text, safe="")
    return text


@pytest.mark.parametrize("rounds", range(1, 10))
def test_dot_dot_encoded_at_any_depth_up_to_the_limit_is_refused_as_escape(rounds: int) -> None:
    raw = "/memories/" + encode_times("../secret.md", rounds)
    assert "must stay under /memories: remove '..' segments" in refused(raw)


@pytest.mark.parametrize("rounds", range(1, 10))
def test_each_dot_encoded_separately_at_any_depth_is_refused(rounds: int) -> None:
    # quote() leaves '.' alone, so spell it as %2e and then encode that further
    dot = encode_times("%2e", rounds - 1)
    assert "remove '..' segments" in refused(f"/memories/{dot}{dot}/x.md")


def test_legal_name_encoded_at_depth_nine_is_decoded() -> None:
    raw = "/memories/" + encode_times("notes.md", 9)
    assert normalize_path(raw) == "/memories/notes.md"


def test_encoding_deeper_than_the_decode_rounds_is_refused() -> None:
    raw = "/memories/" + encode_times("a/b", MAX_DECODE_ROUNDS + 1)
    assert refused(raw) == (
        f"path {quote_value(raw)} is percent-encoded more than 10 levels deep: "
        "write the path plainly, e.g. '/memories/notes.md'"
    )


def test_encoded_backslash_is_refused() -> None:
    assert "contains a backslash" in refused("/memories/a%5c..%5cb")


def test_percent_escape_that_is_not_utf8_is_refused() -> None:
    assert refused("/memories/%ff.md") == (
        "path '/memories/%ff.md' contains a percent-escape that is not valid UTF-8 text: "
        "write the characters themselves instead of '%' escapes"
    )


def test_percent_encoded_surrogate_is_refused() -> None:
    assert "not valid UTF-8" in refused("/memories/%ed%a0%80.md")


def test_percent_encoded_nul_is_refused() -> None:
    assert "control character ('\\x00', U+0000)" in refused("/memories/a%00.md")


# ----------------------------------------------------------------------- mixed slashes


@pytest.mark.parametrize(
    "raw",
    ["/memories\\a.md", "\\memories\\a.md", "/memories/a\\b.md", "/memories/a/\\/b.md", "\\\\memories/a"],
)
def test_any_backslash_is_refused(raw: str) -> None:
    assert "contains a backslash" in refused(raw)


# --------------------------------------------------------------------- unicode look-alikes


@pytest.mark.parametrize(
    "char",
    ["\uff0f", "\u2215", "\u2044", "\u29f8", "\uff3c", "\u2216", "\ufe68"],
)
def test_slash_look_alikes_are_refused(char: str) -> None:
    message = refused(f"/memories/a{char}..{char}b.md")
    assert f"U+{ord(char):04X}), a look-alike of '/' or '\\'" in message


def test_fullwidth_solidus_message_gives_rule_and_remedy() -> None:
    assert refused("/memories/a\uff0fb") == (
        "path '/memories/a／b' contains '／' (U+FF0F), a look-alike of '/' or '\\', at position "
        "11: separate segments with an ASCII '/' and do not use slash-like characters in names"
    )


@pytest.mark.parametrize("segment", ["\uff0e\uff0e", "\uff0e", "\u2025", "\u2024", ".\uff0e"])
def test_dot_segment_look_alikes_are_refused(segment: str) -> None:
    assert "that looks like '.' or '..'" in refused(f"/memories/{segment}/secret.md")


def test_cyrillic_look_alike_of_memories_is_another_root_and_refused() -> None:
    assert "must be /memories or start with /memories/" in refused("/m\u0435mories/a.md")


def test_fullwidth_letters_in_root_fold_into_the_root() -> None:
    assert normalize_path("/\uff4demories/a.md") == "/memories/a.md"  # NFKC (issue 21)


@pytest.mark.parametrize("char", ["\u200b", "\u200d", "\u202e", "\ufeff", "\u00ad", "\u2060"])
def test_invisible_format_characters_are_refused(char: str) -> None:
    assert refused(f"/memories/a{char}b.md") == (
        f"path {quote_value(f'/memories/a{char}b.md')} contains an invisible format character "
        f"({char!r}, U+{ord(char):04X}) at position 11: use only visible characters in memory paths"
    )


# ----------------------------------------------------------------------- control characters


@pytest.mark.parametrize("code", [*range(0, 32), 127, *range(128, 160)])
def test_every_control_character_is_refused(code: int) -> None:
    char = chr(code)
    message = refused(f"/memories/a{char}b.md")
    assert f"contains a control character ({char!r}, U+{code:04X}) at position 11" in message


def test_nul_message_is_escaped_and_gives_a_remedy() -> None:
    assert refused("/memories/n\x00.md") == (
        "path '/memories/n\\x00.md' contains a control character ('\\x00', U+0000) at position "
        "11: use only visible characters in memory paths"
    )


def test_trailing_newline_is_refused() -> None:
    assert "control character ('\\n', U+000A)" in refused("/memories/a.md\n")


@pytest.mark.parametrize(("char", "what"), [("\u2028", "a line separator"), ("\u2029", "a paragraph separator")])
def test_unicode_line_and_paragraph_separators_are_refused(char: str, what: str) -> None:
    assert f"contains {what} ({char!r}, U+{ord(char):04X})" in refused(f"/memories/a{char}b")


def test_lone_surrogate_is_refused_with_a_clear_message() -> None:
    assert refused("/memories/a\ud800.md") == (
        "path '/memories/a\\ud800.md' contains a lone surrogate ('\\ud800') at position 11, "
        "which is not valid Unicode text: pass the path as proper UTF-8 text"
    )


# ---------------------------------------------------------------------- whitespace segments


@pytest.mark.parametrize("raw", ["/memories/ notes.md", "/memories/notes.md ", "/memories/a /b.md", "/memories/ /b"])
def test_segment_with_surrounding_whitespace_is_refused(raw: str) -> None:
    assert "starts or ends with whitespace: remove the surrounding spaces" in refused(raw)


def test_inner_space_is_legal() -> None:
    assert normalize_path("/memories/my notes.md") == "/memories/my notes.md"


# ----------------------------------------------------------------------------- lengths


def test_path_of_exactly_1000_characters_is_accepted() -> None:
    raw = ROOT + "/" + "a" * (MAX_PATH_CHARS - len(ROOT) - 1)
    assert len(raw) == 1000
    assert normalize_path(raw) == raw


def test_path_of_1001_characters_is_refused_with_its_length() -> None:
    raw = ROOT + "/" + "a" * (MAX_PATH_CHARS - len(ROOT))
    assert refused(raw) == (
        f"path {quote_value(raw)} is 1,001 characters long after normalisation; "
        "the limit is 1,000 characters: use shorter names"
    )


def test_length_is_counted_after_normalisation() -> None:
    raw = ROOT + "//" + "a" * (MAX_PATH_CHARS - len(ROOT) - 1) + "/"
    assert len(normalize_path(raw)) == 1000


def test_length_counts_characters_not_bytes() -> None:
    raw = ROOT + "/" + "€" * (MAX_PATH_CHARS - len(ROOT) - 1)
    assert normalize_path(raw) == raw


def test_ten_megabyte_path_is_refused_quickly_with_a_short_message() -> None:
    raw = "/memories/" + "a" * 10_000_000
    started = time.perf_counter()
    message = refused(raw)
    assert time.perf_counter() - started < 1.0
    assert len(message) < 300
    assert message == (
        f"path {quote_value(raw)} is 10,000,010 characters long; the limit is 1,000 characters: "
        "use a shorter path"
    )


# ---------------------------------------------------------------------- types and empty


def test_empty_path_is_refused() -> None:
    assert refused("") == "path is empty: pass a path under /memories, such as '/memories/notes.md'"


@pytest.mark.parametrize(
    ("raw", "name"),
    [(None, "null"), (5, "int"), (b"/memories/a", "bytes"), (["/memories"], "list"), (PurePosixPath("/memories"), "PurePosixPath")],
)
def test_non_string_path_is_refused_with_its_type(raw: object, name: str) -> None:
    assert refused(raw) == f"path must be a string, got {name}: pass text such as '/memories/notes.md'"


def test_invalid_path_error_is_an_invalid_argument_and_value_error() -> None:
    with pytest.raises(InvalidPathError) as info:
        normalize_path("/x")
    assert isinstance(info.value, InvalidArgumentError)
    assert isinstance(info.value, ValueError)
    assert info.value.code == "invalid_path"


# ------------------------------------------------------------------------- properties

_ALPHABET = st.sampled_from(
    list("ab.-_ /%25e2fcAB") + ["%2e", "%2f", "%5c", "..", "\\", "\x00", "\u200b", "\uff0f", "e\u0301", "é", "\n", "\u2028"]
    + ["\uff50", "\u0440", "\u0435", "\ufb01", "\U0001d429", "\u2024", "\u0307", "\u2100", "\uff05", "\u0430"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_ALPHABET, max_size=30).map("".join))
def test_every_accepted_path_is_canonical_and_inside_memories(tail: str) -> None:
    try:
        key = normalize_path("/memories/" + tail)
    except InvalidPathError:
        return
    assert key == ROOT or key.startswith(ROOT + "/")
    assert is_within(key, ROOT)
    assert normalize_path(key) == key
    assert "//" not in key and not key.endswith("/")
    assert unicodedata.normalize("NFKC", key) == key
    segments = key.split("/")[2:]
    assert "." not in segments and ".." not in segments
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in key)
    assert "\\" not in key
    assert len(key) <= MAX_PATH_CHARS
    resolved = PurePosixPath(key)
    assert resolved.parts[:2] == ("/", "memories")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_text_either_normalises_inside_memories_or_raises_invalid_path(text: str) -> None:
    for raw in (text, "/memories/" + text):
        try:
            key = normalize_path(raw)
        except InvalidPathError as exc:
            assert len(str(exc)) < 600
            continue
        assert key == ROOT or key.startswith(ROOT + "/")
        assert normalize_path(key) == key


# --------------------------------------------------------------------------- helpers


def test_is_root_is_true_only_for_the_root() -> None:
    assert is_root("/memories")
    assert not is_root("/memories/a")


def test_ancestors_lists_proper_ancestor_directories_nearest_last() -> None:
    assert ancestors("/memories/a/b/c.md") == ["/memories/a", "/memories/a/b"]


def test_ancestors_of_a_top_level_file_and_of_the_root_are_empty() -> None:
    assert ancestors("/memories/a.md") == []
    assert ancestors("/memories") == []


def test_path_hash_is_sha256_hex_of_the_utf8_path() -> None:
    path = "/memories/käse.md"
    assert path_hash(path) == hashlib.sha256(path.encode("utf-8")).hexdigest()
    assert len(path_hash(path)) == 64


def test_two_spellings_hash_to_one_key() -> None:
    assert path_hash(normalize_path("/memories//cafe\u0301.md/")) == path_hash(
        normalize_path("/memories/caf%C3%A9.md")
    )


def test_different_paths_hash_differently() -> None:
    assert path_hash("/memories/a") != path_hash("/memories/A")


@pytest.mark.parametrize(
    ("path", "directory", "expected"),
    [
        ("/memories/a", "/memories/a", True),
        ("/memories/a/b.md", "/memories/a", True),
        ("/memories/a/b/c.md", "/memories/a", True),
        ("/memories/ab", "/memories/a", False),
        ("/memories/a_b/c", "/memories/a", False),
        ("/memories/a%/c", "/memories/a", False),
        ("/memories/b", "/memories/a", False),
        ("/memories/x.md", "/memories", True),
        ("/memories", "/memories", True),
        ("/memories", "/memories/a", False),
    ],
)
def test_is_within_requires_the_slash_boundary(path: str, directory: str, expected: bool) -> None:
    assert is_within(path, directory) is expected


def test_quote_value_escapes_and_clips_long_values() -> None:
    assert quote_value("a\x00b") == "'a\\x00b'"
    assert quote_value("x" * 150) == repr("x" * 100) + "... (150 characters)"


@pytest.mark.parametrize(
    "raw",
    ["/memories/\u0307../x", "/memories/\u3002\u3002/x", "/memories/\uff61/x", "/memories/.\u0301./x"],
    ids=["combining-dot-then-dots", "ideographic-stops", "halfwidth-stop", "dots-with-accent"],
)
def test_segments_that_look_like_dot_or_dot_dot_are_refused(raw: str) -> None:
    with pytest.raises(InvalidPathError, match="looks like"):
        normalize_path(raw)


# ------------------------------------------- issue 8 section 5: invisible and look-alike names

from dbmemory.core.paths import DEFAULT_IGNORABLE_RANGES, is_default_ignorable  # noqa: E402

DEFAULT_IGNORABLE_CODES = [
    code for first, last, _ in DEFAULT_IGNORABLE_RANGES for code in range(first, last + 1)
]
INVISIBLE_REMEDY = "use only visible characters in memory paths"


def test_the_default_ignorable_table_is_sorted_disjoint_and_has_4174_code_points() -> None:
    previous = -1
    for first, last, names in DEFAULT_IGNORABLE_RANGES:
        assert previous < first <= last, (hex(first), hex(last))
        assert names
        previous = last
    assert len(DEFAULT_IGNORABLE_CODES) == 4174 == len(set(DEFAULT_IGNORABLE_CODES))


def test_the_default_ignorable_table_matches_the_unicode_database_of_perl() -> None:
    """An independent copy of DerivedCoreProperties.txt: Perl's ``\\p{Default_Ignorable_Code_Point}``."""
    import shutil
    import subprocess

    perl = shutil.which("perl")
    if perl is None:
        pytest.skip("perl is not installed: no second copy of the Unicode database to compare with")
    out = subprocess.run(
        [perl, "-e", 'for $c (0..0x10FFFF) { print "$c\\n" if chr($c) =~ /\\p{Default_Ignorable_Code_Point}/ }'],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    assert [int(line) for line in out.split()] == DEFAULT_IGNORABLE_CODES


def test_the_table_holds_what_the_brief_names() -> None:
    named = [0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F,
             0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF, 0x00AD, 0x061C, 0x17B4, 0x17B5,
             *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0), *range(0x180B, 0x1810),
             *range(0xE0000, 0xE0080), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    assert all(is_default_ignorable(chr(c)) for c in named)
    assert not any(is_default_ignorable(c) for c in "a.é /-_\u00e9\u0301")


@pytest.mark.parametrize("place", ["middle", "start", "end", "alone", "directory"])
def test_every_default_ignorable_code_point_is_refused_naming_it(place: str) -> None:
    """Exhaustive over the 4,174 code points, in every position of a segment."""
    for code in DEFAULT_IGNORABLE_CODES:
        char = chr(code)
        raw = {
            "middle": f"/memories/a{char}b.md",
            "start": f"/memories/{char}a.md",
            "end": f"/memories/a.md{char}",
            "alone": f"/memories/{char}",
            "directory": f"/memories/{char * 3}/a.md",
        }[place]
        message = refused(raw)
        assert f"U+{code:04X}" in message, message
        assert INVISIBLE_REMEDY in message, message


def test_every_format_character_of_the_database_is_refused() -> None:
    """Cf is refused by category (also the Cf characters that are not default-ignorable, e.g.
    U+0600 ARABIC NUMBER SIGN), exhaustively over all code points."""
    import sys

    cf = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(cf) > 150
    for code in cf:
        assert f"U+{code:04X}" in refused(f"/memories/a{chr(code)}b")


@pytest.mark.parametrize(
    ("char", "name"),
    [("\ufe0f", "VARIATION SELECTOR-16"), ("\ufe0e", "VARIATION SELECTOR-15"),
     ("\U000e0100", "VARIATION SELECTOR-17"), ("\u034f", "COMBINING GRAPHEME JOINER"),
     ("\u115f", "HANGUL CHOSEONG FILLER"), ("\u1160", "HANGUL JUNGSEONG FILLER"),
     ("\u3164", "HANGUL FILLER"), ("\uffa0", "HALFWIDTH HANGUL FILLER"),
     ("\u180b", "MONGOLIAN FREE VARIATION SELECTOR ONE"),
     ("\u180f", "MONGOLIAN FREE VARIATION SELECTOR FOUR"), ("\u17b4", "KHMER VOWEL INHERENT AQ")],
)
def test_invisible_characters_that_are_not_format_characters_name_code_point_and_remedy(
    char: str, name: str
) -> None:
    code = ord(char)
    escaped = f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    assert refused(f"/memories/a{char}.md") == (
        f"path '/memories/a{escaped}.md' contains an invisible character ('{escaped}', "
        f"U+{code:04X} {name}) at position 11, so it would list like a name without it: "
        f"remove it and {INVISIBLE_REMEDY}"
    )


def test_emoji_with_and_without_variation_selector_cannot_be_two_files() -> None:
    assert normalize_path("/memories/\u2764.md") == "/memories/\u2764.md"
    assert "U+FE0F" in refused("/memories/\u2764\ufe0f.md")


@pytest.mark.parametrize(
    "char", ["\u00a0", "\u2000", "\u2002", "\u2003", "\u2007", "\u2009", "\u200a", "\u202f",
             "\u205f", "\u3000", "\u1680", "\u2800"],
)
def test_space_look_alikes_are_refused_inside_a_name(char: str) -> None:
    message = refused(f"/memories/my{char}notes.md")
    shown = unicodedata.normalize("NFC", char)  # U+2000 EN QUAD is U+2002 EN SPACE in NFC
    assert f"U+{ord(shown):04X}" in message and "use the ASCII space (U+0020)" in message, message
    assert normalize_path("/memories/my notes.md") == "/memories/my notes.md"


@pytest.mark.parametrize(
    "segment",
    ["\u0301", "\u0301\u0302", "\u20dd", "\u0307" * 500],
    ids=["one-mark", "two-marks", "enclosing", "500-marks"],
)
def test_a_segment_of_combining_marks_only_is_refused(segment: str) -> None:
    assert "made only of combining marks" in refused(f"/memories/{segment}/a.md")
    assert "made only of combining marks" in refused(f"/memories/d/{segment}")


@pytest.mark.parametrize(
    "segment",
    [".\u0307" + "\u0307" * 20 + ".", "\u0307" * 9 + "..", "." + "\u0301" * 998,
     "\u3002" + "\u0323" * 100 + "\u3002", "\uff0e" * 2 + "\u0307" * 50, ".." + "\u20dd" * 30,
     "\u0660\u0660", "\u06f0", "\ua4f8\ua4f8", "\U00010a50\U00010a50", "\u2024" + "\u0307" * 12],
    ids=["dot-marks-dot", "marks-then-dots", "dot-998-marks", "ideographic-long", "fullwidth-long",
         "enclosing-long", "arabic-zero", "persian-zero", "lisu", "kharoshthi", "leader-long"],
)
def test_long_segments_that_look_like_dot_or_dot_dot_are_refused(segment: str) -> None:
    """No length shortcut: a look-alike of '.' or '..' is refused however many marks it carries."""
    assert "looks like '.' or '..'" in refused(f"/memories/{segment}/secret.md")
    assert "looks like '.' or '..'" in refused(f"/memories/a/{segment}")


def test_long_legal_names_with_dots_and_accents_are_kept() -> None:
    name = "r\u00e9sum\u00e9." * 50 + "md"
    assert normalize_path(f"/memories/{name}") == f"/memories/{name}"
    assert normalize_path("/memories/...") == "/memories/..."
    assert normalize_path("/memories/.hidden") == "/memories/.hidden"


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab.") + [chr(c) for c in (0x0301, 0x0307, 0xFE0F, 0x3164,
                                                                      0x00A0, 0x200B, 0x3002)]),
            min_size=1, max_size=12),
    st.text(alphabet=st.sampled_from([chr(c) for c in DEFAULT_IGNORABLE_CODES[:200]]), min_size=1,
            max_size=3),
)
def test_inserting_invisible_characters_never_gives_a_second_key(name: str, extra: str) -> None:
    """Two names that differ only by default-ignorable characters are never two accepted keys."""
    try:
        plain = normalize_path(f"/memories/{name}")
    except InvalidPathError:
        plain = None
    with pytest.raises(InvalidPathError):
        normalize_path(f"/memories/{name[:1]}{extra}{name[1:]}")
    if plain is not None:
        assert not any(is_default_ignorable(c) for c in plain)


# -------------------------------------------- section 5 on every backend: tool and create_file

INVISIBLE_PATHS = [
    pytest.param("/memories/notes\ufe0f.md", "U+FE0F", id="variation-selector"),
    pytest.param("/memories/notes\U000e0101.md", "U+E0101", id="variation-selector-supplement"),
    pytest.param("/memories/no\u034ftes.md", "U+034F", id="grapheme-joiner"),
    pytest.param("/memories/\u3164/notes.md", "U+3164", id="hangul-filler-directory"),
    pytest.param("/memories/\uffa0", "U+FFA0", id="halfwidth-filler-alone"),
    pytest.param("/memories/notes\u200b.md", "U+200B", id="zero-width-space"),
    pytest.param("/memories/no\u180btes.md", "U+180B", id="mongolian-selector"),
    pytest.param("/memories/notes\U000e0041.md", "U+E0041", id="tag-character"),
    pytest.param("/memories/my\u00a0notes.md", "U+00A0", id="no-break-space"),
    pytest.param("/memories/" + "\u0307" * 40 + "../x.md", "looks like '.' or '..'", id="long-dot-dot"),
    pytest.param("/memories/\u0301\u0301/x.md", "made only of combining marks", id="marks-only"),
]


def _rows(engine: Any) -> tuple[Any, ...]:
    from helpers import committed_view, counts, store_files

    with committed_view(engine) as c:
        return counts(c), store_files(c)


@pytest.mark.parametrize(("path", "expected"), INVISIBLE_PATHS)
def test_invisible_names_are_refused_by_the_memory_tool_on_every_backend(
    engine: Any, path: str, expected: str
) -> None:
    from dbmemory.tool import MemoryTool

    with engine.begin() as c:
        assert MemoryTool.for_store(c, "looks").execute(
            {"command": "create", "path": "/memories/notes.md", "file_text": "real"}
        ).startswith("File created")
    before = _rows(engine)
    with engine.begin() as c:
        tool = MemoryTool.for_store(c, "looks")
        for arguments in (
            {"command": "create", "path": path, "file_text": "shadow"},
            {"command": "rename", "old_path": "/memories/notes.md", "new_path": path},
            {"command": "view", "path": path},
            {"command": "delete", "path": path},
            {"command": "str_replace", "path": path, "old_str": "real", "new_str": "x"},
        ):
            text = tool.execute(arguments)
            assert text.startswith("Error: "), text
            assert expected in text, text
    assert _rows(engine) == before


@pytest.mark.parametrize(("path", "expected"), INVISIBLE_PATHS)
def test_invisible_names_are_refused_by_create_file_on_every_backend(
    engine: Any, path: str, expected: str
) -> None:
    from dbmemory.core.model import StoreRef
    from dbmemory.store import files

    before = _rows(engine)
    ref = StoreRef(store_key="shared:looks", scope="shared", store_code="looks")
    with engine.begin() as c:
        with pytest.raises(InvalidPathError, match=re.escape(expected)):
            files.create_file(c, ref, path, "shadow")
        with pytest.raises(InvalidPathError, match=re.escape(expected)):
            files.put_file(c, ref, path, "shadow")
    assert _rows(engine) == before
