"""Planning a LangGraph batch for :class:`~dbmemory.integrations.langgraph.DbMemoryStore`:
every op checked and encoded (namespaces to store keys, keys to paths, values to JSON) before
any SQL, so a bad op fails the whole batch with nothing run. Pure: no database."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, SearchOp

from dbmemory.core.keys import MAX_COMPONENT_CHARS
from dbmemory.errors import InvalidArgumentError
from dbmemory.integrations.langgraph import codec

__all__ = ["Get", "Search", "ListNamespaces", "Put", "plan_ops"]


class Get(NamedTuple):
    """A checked ``GetOp`` (``slot``: its place in the batch; ``store_key`` ``None``: the
    namespace cannot exist)."""

    slot: int
    namespace: tuple[str, ...]
    key: str
    store_key: str | None  # None: the namespace cannot exist
    path: str | None
    refresh: bool


class Search(NamedTuple):
    """A checked ``SearchOp`` (``key_prefix`` ``None``: longer than any store key, so nothing)."""

    slot: int
    prefix: tuple[str, ...]
    key_prefix: str | None
    filter: Mapping[str, Any] | None
    limit: int
    offset: int
    query: str | None
    refresh: bool


class ListNamespaces(NamedTuple):
    """A checked ``ListNamespacesOp``: its ``(match_type, labels)`` conditions and the store key
    prefix of the first prefix condition's literal labels."""

    slot: int
    conditions: tuple[tuple[str, tuple[str, ...]], ...]
    key_prefix: str
    max_depth: int | None
    limit: int
    offset: int


class Put(NamedTuple):
    """A checked ``PutOp``: the store and file it writes, the JSON ``text`` (``None``: delete) and
    whether the file is exempt from expiry."""

    namespace: tuple[str, ...]
    key: str
    store_key: str
    store_code: str
    path: str
    text: str | None  # None: delete
    exempt: bool


def _int(value: object, what: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{what} must be a whole number, got {value!r}")
    return value


def plan_ops(
    ops: list[Op], check_ttl: Callable[[object], bool], err: type[codec.NamespaceError]
) -> tuple[list[Any], dict[tuple[tuple[str, ...], str], Put]]:
    """Check every op before any SQL: the reads in order (:class:`Get`, :class:`Search`,
    :class:`ListNamespaces`, each with its slot) and the puts by item (of several puts of one
    item the last wins). ``check_ttl(ttl)``: whether a put's ``ttl`` leaves the item to the
    expiry job; ``err``: the class of a namespace error.

    Raises:
        NamespaceError (``err``): a label breaks LangGraph's rules, or a put's namespace does
            not fit a store key.
        InvalidArgumentError: a bad key, value, filter, limit, ttl or op.
        NotImplementedError: a ``ttl`` where the store has none.
    """
    reads: list[Any] = []
    puts: dict[tuple[tuple[str, ...], str], Put] = {}
    for index, op in enumerate(ops):
        if isinstance(op, GetOp):
            namespace = codec.check_labels(op.namespace, "namespace", err)
            path = codec.path_of(op.key)
            try:
                store_key: str | None = codec.store_key_of(namespace, err) if namespace else None
            except codec.NamespaceError:
                store_key = None  # too long to exist
            reads.append(Get(index, namespace, op.key, store_key, path, bool(op.refresh_ttl)))
        elif isinstance(op, SearchOp):
            prefix = codec.check_labels(op.namespace_prefix, "namespace prefix", err)
            codec.check_filter(op.filter)
            if op.query is not None and not isinstance(op.query, str):
                raise InvalidArgumentError(f"query must be text or None, got {type(op.query).__name__}")
            key_prefix = codec.key_prefix_of(prefix) if prefix else codec.STORE_KEY_PREFIX
            # A prefix longer than any store key names no store.
            fits = len(key_prefix) <= len("shared:") + MAX_COMPONENT_CHARS
            reads.append(
                Search(
                    index,
                    prefix,
                    key_prefix if fits else None,
                    op.filter,
                    _int(op.limit, "limit") or 0,
                    _int(op.offset, "offset") or 0,
                    op.query,
                    bool(op.refresh_ttl),
                )
            )
        elif isinstance(op, ListNamespacesOp):
            conditions: list[tuple[str, tuple[str, ...]]] = []
            for condition in op.match_conditions or ():
                kind = condition.match_type
                if kind not in ("prefix", "suffix"):
                    raise InvalidArgumentError(f"match_type {kind!r} is not 'prefix' or 'suffix'")
                conditions.append((kind, codec.check_labels(condition.path, f"{kind} condition", err)))
            literal: list[str] = []  # the first prefix condition's labels before a "*"
            for label in next((labels for kind, labels in conditions if kind == "prefix"), ()):
                if label == "*":
                    break
                literal.append(label)
            key_prefix = codec.key_prefix_of(literal) if literal else codec.STORE_KEY_PREFIX
            reads.append(
                ListNamespaces(
                    index,
                    tuple(conditions),
                    key_prefix,
                    _int(op.max_depth, "max_depth", optional=True),
                    _int(op.limit, "limit") or 0,
                    _int(op.offset, "offset") or 0,
                )
            )
        elif isinstance(op, PutOp):
            namespace = codec.check_labels(op.namespace, "namespace", err)
            if not namespace:
                raise err("namespace is empty: pass at least one label, e.g. ('users', 'u-42')")
            if namespace[0] == "langgraph":
                raise err(f"namespace {namespace!r}: the root label 'langgraph' is reserved by LangGraph")
            code = codec.store_code_of(namespace, err)
            path = codec.path_of(op.key)
            text = None if op.value is None else codec.encode_value(op.value)
            expiring = False if op.value is None else check_ttl(op.ttl)
            puts[(namespace, op.key)] = Put(
                namespace, op.key, "shared:" + code, code, path, text, not expiring
            )
        else:
            raise InvalidArgumentError(f"unknown LangGraph operation {type(op).__name__}")
    return reads, puts
