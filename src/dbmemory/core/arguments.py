"""Argument checks of the public Python API by argument name (:func:`check_arguments`), and the checks of
the value types of :mod:`dbmemory.core.model` (:func:`check_store`, :func:`check_caps`), run
before any SQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dbmemory.core.checks import (
    INT64_MAX,
    argument_error,
    check_bind,
    check_bool,
    check_connection,
    check_engine,
    check_id,
    check_mapping,
    check_text,
    show,
)
from dbmemory.core.model import Caps, StoreRef
from dbmemory.errors import InvalidScopeError

__all__ = [
    "check_store",
    "check_caps",
    "check_arguments",
]


def check_store(value: object, name: str = "store") -> Any:
    """A store argument: a store id (:func:`check_id`) or a :class:`~dbmemory.core.model.StoreRef`
    whose fields have the right types (a ``str`` key and scope, an optional store id in range,
    :class:`~dbmemory.core.model.Caps`). Returns it."""
    if type(value) is StoreRef:  # fast path: the exact type with well-typed fields
        key, sid, caps = value.store_key, value.store_id, value.caps
        if (
            type(key) is str
            and key
            and type(value.scope) is str
            and (sid is None or (type(sid) is int and 1 <= sid <= INT64_MAX))
            and (caps is None or type(caps) is Caps)
        ):
            return value
    if type(value) is int and 1 <= value <= INT64_MAX:  # fast path: a store id in range
        return value
    if isinstance(value, StoreRef):
        if not isinstance(value.store_key, str) or not value.store_key:
            raise InvalidScopeError(
                f"{name}.store_key must be a non-empty string, got {show(value.store_key)}: "
                "build the StoreRef with dbmemory.build_store_key"
            )
        if not isinstance(value.scope, str):
            raise InvalidScopeError(
                f"{name}.scope must be a string, got {show(value.scope)}: pass e.g. 'shared'"
            )
        check_id(value.store_id, f"{name}.store_id", optional=True)
        check_caps(value.caps, f"{name}.caps", optional=True)  # None: the configured caps
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise argument_error(
            name,
            value,
            "must be a store id (int) or a StoreRef",
            "pass the id from dbmemory.resolve_store_id or a StoreRef from dbmemory.resolve_store",
        )
    return check_id(value, name)


def check_caps(value: object, name: str = "caps", *, optional: bool = False) -> Any:
    """A :class:`~dbmemory.core.model.Caps` (never ``None`` unless ``optional``). Returns it."""
    if value is None and optional:
        return None
    if not isinstance(value, Caps):
        raise argument_error(
            name,
            value,
            "must be a dbmemory.Caps" + (" or None" if optional else ""),
            "pass e.g. caps=dbmemory.Caps(max_file_chars=100_000, max_files=1_000)",
        )
    return value


_BY_NAME: dict[str, Callable[[object, str], object]] = {
    "conn": check_connection,
    "engine": check_engine,
    "engine_or_conn": check_bind,
    "store": check_store,
    "store_id": check_id,
    "caps": check_caps,
    "actor": check_text,
    "touch": check_bool,
    "enforce_caps": check_bool,
    "drop_store": check_bool,
    "run_context": check_mapping,
}


def check_arguments(**named: object) -> None:
    """Check common arguments by their name, in the order given, e.g.
    ``check_arguments(conn=conn, store_id=store_id, actor=actor)``: ``conn`` a Connection, ``engine``
    an Engine, ``engine_or_conn`` either, ``store`` a store id or StoreRef, ``store_id`` a row
    id, ``caps`` a Caps, ``actor`` text, ``touch``/``enforce_caps``/``drop_store`` a bool,
    ``run_context`` a mapping or None.

    Raises:
        InvalidArgumentError (InvalidScopeError for ``run_context`` and StoreRef keys): the
            first argument that breaks its rule.
    """
    for name, value in named.items():
        _BY_NAME[name](value, name)


