"""Offline token counting for profile budgets.

``tiktoken.get_encoding`` downloads its encoding file on first use and fails (or hangs) without
internet. This module never calls it. It builds the :class:`tiktoken.Encoding` directly from an
encoding file that is already on disk, searched in this order:

1. the files litellm ships in ``litellm/litellm_core_utils/tokenizers/`` (``cl100k_base``,
   ``o200k_base``, ``p50k_base``; file names are the sha1 of the download URL). The folder is
   located with :func:`importlib.util.find_spec`, **without importing litellm** (seconds, network);
2. tiktoken's own cache: ``$TIKTOKEN_CACHE_DIR``, ``$DATA_GYM_CACHE_DIR`` or
   ``<tmp>/data-gym-cache``.

Each file is checked against tiktoken's published sha256 before use. No environment variable is
read-modified-written (``TIKTOKEN_CACHE_DIR`` is left as the host set it). Loaded encodings are
cached per process (o200k takes ~0.5 s to load once; counting 2,000 tokens ~1 ms). The counts
of the last :data:`COUNT_CACHE_ENTRIES` texts are kept too (per encoding and exact text), so a
text counted again costs a dictionary look-up.

Encoding choice by model name (a litellm provider prefix such as ``openai/`` or ``azure/`` is
ignored): tiktoken's own model table first (``gpt-4o``, ``gpt-4.1``, ``o1``/``o3``/``o4``,
``gpt-5`` ... give ``o200k_base``; ``gpt-4``/``gpt-3.5`` give ``cl100k_base``), then the rule
"``o200k_base`` for names starting ``gpt-4o``, ``gpt-4.1``, ``gpt-4.5``, ``gpt-5``, ``o1``, ``o3``,
``o4``, ``chatgpt-``, ``gpt-oss``; ``cl100k_base`` otherwise". For non-OpenAI models (Claude,
Llama, Mistral ...) cl100k is an approximation of their own tokenizer.

Documented fallback: when no encoding can be loaded (tiktoken missing, no file on disk, a
corrupt file), :func:`count_tokens` returns the character estimate ``ceil(characters / 3)``. It
never raises and never touches the network.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import logging
import math
import os
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

__all__ = [
    "count_tokens",
    "encoding_name_for_model",
    "get_encoding",
    "bundled_tokenizer_dir",
    "estimate_tokens",
    "CHARS_PER_TOKEN_ESTIMATE",
]

log = logging.getLogger(__name__)

CHARS_PER_TOKEN_ESTIMATE = 3
"""Characters per token assumed by the fallback estimate (conservative for English and code)."""

_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"

# Encoding parameters, copied from tiktoken_ext/openai_public.py (tiktoken 0.14). The regexes
# and special tokens are fixed by OpenAI; only the rank files are large, and those come from disk.
_ENDOFTEXT = "<|endoftext|>"
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_P50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

_SPECS: dict[str, dict[str, Any]] = {
    "cl100k_base": {
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "pat_str": _CL100K_PAT,
        "special_tokens": {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        "explicit_n_vocab": None,
    },
    "o200k_base": {
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "pat_str": _O200K_PAT,
        "special_tokens": {_ENDOFTEXT: 199999, "<|endofprompt|>": 200018},
        "explicit_n_vocab": None,
    },
    "p50k_base": {
        "sha256": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        "pat_str": _P50K_PAT,
        "special_tokens": {_ENDOFTEXT: 50256},
        "explicit_n_vocab": 50281,
    },
}

_O200K_PREFIXES = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "chatgpt-",
    "gpt-oss",
)

_lock = threading.Lock()
_cache: dict[str, Any] = {}
_FAILED = object()


def estimate_tokens(text: str) -> int:
    """The fallback estimate: ``ceil(len(text) / 3)`` tokens (characters, not bytes)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN_ESTIMATE)


def encoding_name_for_model(model: str | None) -> str:
    """The tiktoken encoding used to count tokens for ``model``.

    Args:
        model: a litellm model name such as ``"gpt-4o-mini"``, ``"openai/gpt-5"``,
            ``"anthropic/claude-3-5-haiku-latest"``, or None.

    Returns:
        ``"o200k_base"``, ``"cl100k_base"`` or ``"p50k_base"`` (see the module doc for the rule).
    """
    name = (model or "").strip().lower()
    base = name.rsplit("/", 1)[-1]
    try:
        import tiktoken.model  # optional dependency (llm extra), imported on use

        found = tiktoken.model.encoding_name_for_model(base)
    except Exception:  # noqa: BLE001 - unknown model or tiktoken missing: use the rule
        found = None
    if found is not None:
        if found.startswith("o200k"):
            return "o200k_base"
        if found in _SPECS:
            return found
    if base.startswith(_O200K_PREFIXES):
        return "o200k_base"
    return "cl100k_base"


def bundled_tokenizer_dir() -> Path | None:
    """litellm's bundled tiktoken folder, found without importing litellm; None when absent."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    return None


def candidate_files(name: str) -> list[Path]:
    cache_key = hashlib.sha1(_URL.format(name=name).encode()).hexdigest()  # noqa: S324 - tiktoken's key
    folders: list[Path] = []
    bundled = bundled_tokenizer_dir()
    if bundled is not None:
        folders.append(bundled)
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        value = os.environ.get(variable)
        if value:
            folders.append(Path(value))
    folders.append(Path(tempfile.gettempdir()) / "data-gym-cache")
    return [folder / cache_key for folder in folders]


def _load_ranks(name: str) -> dict[bytes, int] | None:
    expected = _SPECS[name]["sha256"]
    for path in candidate_files(name):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() != expected:
            log.warning("tokenizer file %s does not match the expected hash; skipped", path)
            continue
        ranks: dict[bytes, int] = {}
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        return ranks
    return None


def get_encoding(name: str) -> Any | None:
    """A :class:`tiktoken.Encoding` built from a file on disk, or None when none can be loaded.

    Args:
        name: ``"cl100k_base"``, ``"o200k_base"`` or ``"p50k_base"``.

    Returns:
        The encoding (cached per process), or None (unknown name, tiktoken missing, no file, a
        corrupt file). Never raises, never downloads.
    """
    cached = _cache.get(name)
    if cached is not None:
        return None if cached is _FAILED else cached
    with _lock:
        cached = _cache.get(name)
        if cached is not None:
            return None if cached is _FAILED else cached
        encoding: Any = _FAILED
        try:
            if name in _SPECS:
                import tiktoken  # optional dependency (llm extra), imported on use

                ranks = _load_ranks(name)
                if ranks is not None:
                    spec = _SPECS[name]
                    encoding = tiktoken.Encoding(
                        name=name,
                        pat_str=spec["pat_str"],
                        mergeable_ranks=ranks,
                        special_tokens=spec["special_tokens"],
                        explicit_n_vocab=spec["explicit_n_vocab"],
                    )
        except Exception:  # noqa: BLE001 - documented fallback, never raise
            log.warning("could not build tokenizer %s; using the character estimate", name)
            encoding = _FAILED
        if encoding is _FAILED:
            log.info("no offline tokenizer file for %s; using ceil(chars/3)", name)
        _cache[name] = encoding
        return None if encoding is _FAILED else encoding


def count_tokens(text: str, model: str | None) -> int:
    """Count the tokens of ``text`` with the tokenizer of ``model``, offline.

    Special-token text such as ``<|endoftext|>`` inside ``text`` is counted as ordinary text.

    Args:
        text: any text.
        model: the litellm model name whose tokenizer decides (see :func:`encoding_name_for_model`).

    Returns:
        The number of tokens; the fallback estimate ``ceil(len(text) / 3)`` when no encoding can
        be loaded. Never raises, never uses the network.
    """
    if not text:
        return 0
    name = encoding_name(model)
    encoding = get_encoding(name)
    if encoding is None:
        return estimate_tokens(text)
    key = (name, text)
    with _counted_lock:
        counted = _counted.get(key)
        if counted is not None:
            _counted.move_to_end(key)
            return counted
    try:
        counted = len(encoding.encode(text, disallowed_special=()))
    except Exception:  # noqa: BLE001 - documented fallback
        return estimate_tokens(text)
    with _counted_lock:
        _counted[key] = counted
        while len(_counted) > COUNT_CACHE_ENTRIES:
            _counted.popitem(last=False)
    return counted


COUNT_CACHE_ENTRIES = 64
"""Texts whose count :func:`count_tokens` keeps (least recently used dropped first). A turn
counts the same profile text several times (the fit, the result, the next load); an entry holds
the text (~8 KB for 2,000 tokens)."""

_counted: OrderedDict[tuple[str, str], int] = OrderedDict()
_counted_lock = threading.Lock()


@functools.lru_cache(maxsize=256)
def encoding_name(model: str | None) -> str:
    """:func:`encoding_name_for_model`, cached per model name."""
    return encoding_name_for_model(model)


def reset_cache_for_tests() -> None:
    """Forget loaded encodings (tests use it to prove loading works from a cold start)."""
    with _lock:
        _cache.clear()
    with _counted_lock:
        _counted.clear()
    encoding_name.cache_clear()
