"""Pure helpers of the LangGraph store (:mod:`dbmemory.integrations.langgraph`): how a
LangGraph namespace becomes a store key, an item key a file path and a value a JSON text, and
how filters and namespace conditions match. Nothing here touches the database or imports
LangGraph.

Mapping (reversible and validated, so a hostile label or key can never name another store, a
``reserved:`` store or a path outside ``/memories``):

* namespace ``("users", "u 42")`` -> store key ``shared:lg.users.u_2042``: the store code is
  ``lg.`` followed by the labels, each encoded, joined by ``.`` (LangGraph forbids ``.`` in a
  label, so the split is exact). A label keeps ASCII letters, digits and ``-``; every other
  character becomes ``_XX`` per UTF-8 byte (upper-case hex; ``_`` itself is ``_5F``). The
  store code must be a valid store-key component (:func:`dbmemory.core.keys.validate_component`):
  at most 200 characters, so the encoded labels and their dots take at most 197.
* item key ``"prefs"`` -> file ``/memories/prefs.json``; a key keeps ASCII letters, digits,
  ``-`` and ``.``; every other character becomes ``_XX`` per UTF-8 byte (so ``/``, ``%``,
  ``\\``, spaces and non-ASCII letters never reach the path rules). The path is at most 1,000
  characters, so the encoded key takes at most 985.
* value -> compact JSON (``ensure_ascii=False``; when a string holds a lone surrogate the whole
  value is written ASCII-escaped instead, so it still round-trips).

Decoding is strict: only the exact output of the encoder decodes (a store code ``lg.A_41`` or a
file ``/memories/notes.md`` is not a LangGraph namespace or item and is skipped).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dbmemory.core.escapes import escape, unescape
from dbmemory.core.keys import MAX_COMPONENT_CHARS
from dbmemory.core.paths import MAX_PATH_CHARS, ROOT
from dbmemory.errors import InvalidArgumentError, InvalidScopeError

__all__ = [
    "STORE_CODE_PREFIX",
    "STORE_KEY_PREFIX",
    "ITEM_SUFFIX",
    "NamespaceError",
    "check_labels",
    "store_code_of",
    "store_key_of",
    "namespace_of_key",
    "key_prefix_of",
    "path_of",
    "key_of_path",
    "encode_value",
    "decode_value",
    "matches_filter",
    "check_filter",
    "matches_conditions",
    "text_of_value",
]

STORE_CODE_PREFIX = "lg."
"""Every LangGraph namespace is the shared store whose store code starts with this."""

STORE_KEY_PREFIX = "shared:" + STORE_CODE_PREFIX
"""The store keys of LangGraph namespaces start with this."""

ITEM_SUFFIX = ".json"
"""Every item is the file ``/memories/<encoded key>.json``."""

_LABEL_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_KEY_SAFE = _LABEL_SAFE | {"."}
_MAX_KEY_CHARS = MAX_PATH_CHARS - len(ROOT) - 1 - len(ITEM_SUFFIX)


class NamespaceError(InvalidScopeError):
    """A LangGraph namespace label breaks LangGraph's rules or does not fit a store key
    (code ``invalid_namespace``). Also an ``InvalidNamespaceError`` of LangGraph when LangGraph
    is installed (:mod:`dbmemory.integrations.langgraph` makes that subclass)."""

    code = "invalid_namespace"


def _encode(text: str, safe: frozenset[str]) -> str:
    return escape(text, safe)


def _decode(encoded: str, safe: frozenset[str]) -> str | None:
    """The text :func:`_encode` made ``encoded`` from, or ``None`` if it did not."""
    return unescape(encoded, safe)[0]


def check_labels(labels: object, what: str, error: type[NamespaceError] = NamespaceError) -> tuple[str, ...]:
    """Check namespace labels by LangGraph's rules (``BaseStore``'s label validation).

    Args:
        labels: a tuple (or list) of labels.
        what: its name in messages (``"namespace"``, ``"namespace prefix"``).
        error: the exception class to raise.

    Returns:
        The labels as a tuple.

    Raises:
        NamespaceError: not a tuple/list, or a label that is not a string, is empty, or
            contains ``.`` or NUL.
    """
    if not isinstance(labels, (tuple, list)):
        raise error(f"{what} must be a tuple of strings, got {type(labels).__name__}: pass e.g. ('users', 'u-42')")
    for label in labels:
        if not isinstance(label, str):
            raise error(
                f"{what} {tuple(labels)!r} has a label of type {type(label).__name__}: labels must be strings"
            )
        if label == "":
            raise error(f"{what} {tuple(labels)!r} has an empty label: labels must not be empty")
        if "." in label:
            raise error(f"{what} {tuple(labels)!r} has a label with a period ('.'), which LangGraph forbids")
        if "\x00" in label:
            raise error(f"{what} {tuple(labels)!r} has a label with a NUL character, which LangGraph forbids")
    return tuple(labels)


@functools.lru_cache(maxsize=4096)
def _store_code(namespace: tuple[str, ...]) -> str:
    """``lg.`` and the encoded labels (encoded once per namespace: the last 4,096 are kept)."""
    return STORE_CODE_PREFIX + ".".join(_encode(label, _LABEL_SAFE) for label in namespace)


def store_code_of(namespace: tuple[str, ...], error: type[NamespaceError] = NamespaceError) -> str:
    """The store code of a (checked, non-empty) namespace: ``lg.<label>.<label>...``.

    Raises:
        NamespaceError: the code would be longer than 200 characters.
    """
    code = _store_code(namespace)
    if len(code) > MAX_COMPONENT_CHARS:
        raise error(
            f"namespace {namespace!r} takes {len(code)} characters as a store code "
            f"({STORE_CODE_PREFIX!r}, the labels and their dots; each character other than an "
            f"ASCII letter, digit or '-' takes 3 per UTF-8 byte); the limit is "
            f"{MAX_COMPONENT_CHARS}: use fewer or shorter labels"
        )
    return code


def store_key_of(namespace: tuple[str, ...], error: type[NamespaceError] = NamespaceError) -> str:
    """The store key of a namespace: ``shared:lg.<label>...`` (see :func:`store_code_of`)."""
    return "shared:" + store_code_of(namespace, error)


def key_prefix_of(labels: Sequence[str]) -> str:
    """The text every store key of a namespace starting with ``labels`` starts with (labels
    are literal, no wildcard): ``shared:lg.`` for none, else ``shared:lg.<a>.<b>`` (the key
    itself, or followed by ``.``)."""
    return STORE_KEY_PREFIX + ".".join(_encode(label, _LABEL_SAFE) for label in labels)


@functools.lru_cache(maxsize=4096)
def namespace_of_key(store_key: str) -> tuple[str, ...] | None:
    """The namespace a store key names, or ``None`` when it is not exactly the key of one
    (decoded once per store key: the answers of the last 4,096 keys are kept)."""
    if not store_key.startswith(STORE_KEY_PREFIX):
        return None
    labels = []
    for part in store_key[len(STORE_KEY_PREFIX) :].split("."):
        label = _decode(part, _LABEL_SAFE)
        if not label:
            return None
        labels.append(label)
    return tuple(labels)


def path_of(key: object) -> str:
    """The file path of an item key: ``/memories/<encoded key>.json``.

    Raises:
        InvalidArgumentError: ``key`` is not a string, or its path would be longer than 1,000
            characters.
    """
    if not isinstance(key, str):
        raise InvalidArgumentError(
            f"item key must be a string, got {type(key).__name__}: pass e.g. 'prefs'", code="invalid_item_key"
        )
    encoded = _encode(key, _KEY_SAFE)
    if len(encoded) > _MAX_KEY_CHARS:
        raise InvalidArgumentError(
            f"item key of {len(key):,} characters takes {len(encoded):,} once encoded for a file "
            f"name (each character other than an ASCII letter, digit, '-' or '.' takes 3 per "
            f"UTF-8 byte); the limit is {_MAX_KEY_CHARS:,}: use a shorter key",
            code="invalid_item_key",
        )
    return f"{ROOT}/{encoded}{ITEM_SUFFIX}"


@functools.lru_cache(maxsize=4096)
def key_of_path(path: str) -> str | None:
    """The item key a file path holds, or ``None`` when the file is not an item (decoded once
    per path: the answers of the last 4,096 paths are kept)."""
    head = ROOT + "/"
    if not path.startswith(head) or not path.endswith(ITEM_SUFFIX):
        return None
    middle = path[len(head) : len(path) - len(ITEM_SUFFIX)]
    if "/" in middle:
        return None
    return _decode(middle, _KEY_SAFE)


def _check_json(value: Any, where: str) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(
                f"{where} is {value!r}, which JSON cannot hold: store a finite number or null",
                code="invalid_value",
            )
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArgumentError(
                    f"{where} has a key {k!r} of type {type(k).__name__}: JSON object keys must be strings",
                    code="invalid_value",
                )
            _check_json(v, f"{where}[{k!r}]")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]")
        return
    raise InvalidArgumentError(
        f"{where} is a {type(value).__name__}, which is not JSON: store str, int, float, bool, "
        "None, lists and dicts with string keys (convert dates to ISO text)",
        code="invalid_value",
    )


def encode_value(value: object) -> str:
    """The JSON text an item's value is stored as (compact; a file's text).

    Raises:
        InvalidArgumentError: not a mapping, or it holds something JSON cannot (a ``datetime``,
            a set, a non-string key, ``nan``/``inf``), naming where.
    """
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"an item's value must be a dict (or None to delete), got {type(value).__name__}",
            code="invalid_value",
        )
    _check_json(value, "value")
    text = json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escape everything, so it still round-trips
        text = json.dumps(dict(value), ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text


def decode_value(text: str) -> dict[str, Any] | None:
    """The value a file's text holds, or ``None`` when it is not a JSON object (invalid JSON,
    nested too deep for the parser, or another JSON value)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# -- filters (the semantics of LangGraph's InMemoryStore) ----------------------------------------


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _operator(value: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return bool(value == operand)
    if name == "$ne":
        return bool(value != operand)
    if name in ("$gt", "$gte", "$lt", "$lte"):
        left, right = _number(value), _number(operand)
        if left is None or right is None:
            return False  # the reference raises here; a missing or non-numeric field never matches
        if name == "$gt":
            return left > right
        if name == "$gte":
            return left >= right
        if name == "$lt":
            return left < right
        return left <= right
    raise InvalidArgumentError(
        f"filter operator {name!r} is not supported: use $eq, $ne, $gt, $gte, $lt or $lte",
        code="invalid_filter",
    )


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(value, k, v) for k, v in wanted.items())
        if not isinstance(value, dict):
            return False
        return all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def matches_filter(value: dict[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a LangGraph search filter.

    Each field of ``filter`` must match the value's field: a plain value by ``==`` (Python
    equality, as LangGraph's ``InMemoryStore``: ``1 == 1.0 == True``); a dict of operators
    (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``; the ordering ones compare as
    ``float``) by all of them; a dict of fields by each field (nested); a list by length and
    element. Where ``InMemoryStore`` raises (an ordering operator on a missing or non-numeric
    field) the item does not match.

    Raises:
        InvalidArgumentError: an unknown ``$`` operator (code ``invalid_filter``).
    """
    if not filter:
        return True
    return all(_matches(value.get(k), v) for k, v in filter.items())


def check_filter(filter: object) -> None:
    """Refuse a filter that is not a dict, or names an unknown ``$`` operator (before SQL)."""
    if filter is None:
        return
    if not isinstance(filter, Mapping):
        raise InvalidArgumentError(
            f"a search filter must be a dict, got {type(filter).__name__}", code="invalid_filter"
        )

    def walk(wanted: Any) -> None:
        if isinstance(wanted, Mapping):
            for k, v in wanted.items():
                if isinstance(k, str) and k.startswith("$"):
                    _operator(0, k, 0)
                walk(v)
        elif isinstance(wanted, (list, tuple)):
            for v in wanted:
                walk(v)

    walk(filter)


def _condition_matches(kind: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path, strict=False) if kind == "prefix" else zip(reversed(namespace), reversed(path), strict=False)
    return all(p == "*" or n == p for n, p in pairs)


def matches_conditions(namespace: tuple[str, ...], conditions: Sequence[tuple[str, Sequence[str]]]) -> bool:
    """Whether a namespace meets every ``(match_type, path)`` condition: ``prefix`` compares
    from the start, ``suffix`` from the end, ``"*"`` matches any one label, and the namespace
    has at least as many labels as the path (LangGraph's ``MatchCondition``)."""
    return all(_condition_matches(kind, path, namespace) for kind, path in conditions)


def text_of_value(value: Any) -> str:
    """The text a query is ranked against: every string in the value (nested ones included,
    keys excluded), in order, joined by newlines."""
    parts: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(value)
    return "\n".join(parts)
