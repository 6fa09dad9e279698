"""Argument checks for the public Python API, run before any SQL.

Every public function calls these on its first lines, so a caller's mistake (a wrong type,
``None``, a ``bool`` where an int is due, an int beyond its column's range, a ``run_context``
that is not a mapping, a ``now`` that is not a datetime) is an
:class:`~dbmemory.errors.InvalidArgumentError` with the value, the rule and a remedy, identical
on every backend, and never a raw ``TypeError``/``OverflowError``/``AttributeError`` from Python
or a :class:`~dbmemory.errors.StorageError` from the driver. Each checker returns the value
(sometimes normalised, e.g. ``now``), so a call reads ``x = check_...(x, "x")``.

Column ranges (``dbmemory.db.schema``): ids are ``BIGINT`` (64-bit signed), generated from 1;
``max_file_chars`` and ``max_files`` are 32-bit ``INTEGER``; ``max_store_chars`` is ``BIGINT``;
``version_no`` is ``INTEGER``.

Nothing here touches the database.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy.engine import Connection as _Connection
from sqlalchemy.engine import Engine as _Engine

from dbmemory.errors import InvalidArgumentError, InvalidScopeError

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "check_id",
    "check_int",
    "check_cap",
    "check_days",
    "check_now",
    "check_mapping",
    "check_text",
    "check_bool",
    "check_callable",
    "check_connection",
    "check_engine",
    "check_bind",
    "check_each",
    "check_key_text",
    "show",
    "argument_error",
]

INT32_MAX = 2**31 - 1
"""Largest value of a 32-bit ``INTEGER`` column (2,147,483,647)."""

INT64_MAX = 2**63 - 1
"""Largest value of a 64-bit ``BIGINT`` column (9,223,372,036,854,775,807)."""

_MAX_SHOWN = 80
_SURROGATE = re.compile("[\ud800-\udfff]")
T = TypeVar("T")


_PLAIN = (str, bytes, int, float, bool, dt.date, dt.time, dt.timedelta, type(None))


def _plain(value: object, depth: int = 0) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if depth < 2 and isinstance(value, (list, tuple, set, frozenset)):
        return all(_plain(item, depth + 1) for item in list(value)[:20])
    if depth < 2 and isinstance(value, dict):
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in list(value.items())[:20])
    return False


def show(value: object) -> str:
    """A value for a message: the ``repr`` of plain values (text, numbers, dates, and lists or
    dicts of them) clipped to 80 characters; any other object as ``<TypeName>`` only, so an
    Engine's URL, a password or a memory address never reaches a message, and the text is the
    same on every backend. Never raises."""
    if value is None:
        return "None"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {len(str(abs(value)))} digits"
    if not _plain(value):
        return f"<{type(value).__name__}>"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    if len(text) > _MAX_SHOWN:
        text = text[:_MAX_SHOWN] + f"... ({len(text):,} characters)"
    return text


def _what(value: object) -> str:
    return "None" if value is None else type(value).__name__


def argument_error(name: str, value: object, rule: str, remedy: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{name} {rule}, got {show(value)} ({_what(value)}): {remedy}")


def check_int(
    value: object,
    name: str,
    *,
    minimum: int,
    maximum: int,
    optional: bool = False,
    remedy: str | None = None,
) -> Any:
    """A whole number ``minimum <= value <= maximum`` (``bool`` refused; ``None`` only when
    ``optional``). Returns it."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        rule = f"must be a whole number from {minimum:,} to {maximum:,}"
        if optional:
            rule += " or None"
        raise argument_error(name, value, rule, remedy or f"pass e.g. {name}={max(minimum, 1)}")
    return int(value)


def check_id(value: object, name: str = "store_id", *, optional: bool = False) -> Any:
    """A row id (store id, file id): a whole number from 1 to 2**63-1, the ``BIGINT`` column's
    range; ``None`` only when ``optional``. Returns it."""
    if type(value) is int and 1 <= value <= INT64_MAX:  # fast path: the common valid id
        return value
    return check_int(
        value,
        name,
        minimum=1,
        maximum=INT64_MAX,
        optional=optional,
        remedy=f"pass the id of an existing row, e.g. {name}=1 (ids come from the database)",
    )


def check_cap(value: object, name: str, *, optional: bool = True) -> Any:
    """One cap value: a positive whole number within its column (``max_file_chars`` and
    ``max_files``: 32-bit ``INTEGER``; ``max_store_chars``: ``BIGINT``); ``None`` when
    ``optional``. Returns it."""
    maximum = INT64_MAX if name.endswith("max_store_chars") else INT32_MAX
    if type(value) is int and 1 <= value <= maximum:  # fast path: the common valid value
        return value
    return check_int(
        value,
        name,
        minimum=1,
        maximum=maximum,
        optional=optional,
        remedy=f"pass a positive whole number up to {maximum:,}"
        + (" or None" if optional else ""),
    )


def check_days(value: object, name: str = "days") -> Any:
    """An age in days: a finite number > 0 (int or float, never ``bool``). Returns it.

    The smallest allowed value (the touch interval) is checked by :mod:`dbmemory.store.expiry`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
        or not value > 0
    ):
        raise argument_error(name, value, "must be a finite number greater than 0", f"pass e.g. {name}=30")
    return value


def check_now(value: object, name: str = "now", *, optional: bool = True) -> Any:
    """A point in time: a ``datetime.datetime`` (aware, converted to UTC, or naive, taken as
    UTC); ``None`` (the clock) when ``optional``. A ``date`` is refused. Returns an aware UTC
    datetime (or ``None``)."""
    if value is None and optional:
        return None
    if not isinstance(value, dt.datetime):
        raise argument_error(
            name,
            value,
            "must be a datetime.datetime" + (" or None" if optional else ""),
            "pass e.g. datetime.datetime.now(datetime.timezone.utc)"
            + (", or leave it out for the current time" if optional else ""),
        )
    try:
        if value.tzinfo is None or value.utcoffset() is None:
            return value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc)
    except (OverflowError, ValueError):
        raise argument_error(name, value, "is out of range in UTC", "pass a time between years 1 and 9999") from None


def check_mapping(
    value: object, name: str = "run_context", *, optional: bool = True, scope: bool = True
) -> Any:
    """A mapping (e.g. ``run_context``; ``None`` when ``optional``) whose keys are strings.
    Raises :class:`~dbmemory.errors.InvalidScopeError` (run-context values name stores), or
    a plain :class:`~dbmemory.errors.InvalidArgumentError` when not ``scope``. Returns it."""
    if value is None and optional:
        return None
    error = InvalidScopeError if scope else InvalidArgumentError
    if not isinstance(value, Mapping):
        raise error(
            f"{name} must be a mapping such as {{'document_id': '7'}}"
            + (" or None" if optional else "")
            + f", got {show(value)} ({_what(value)}): pass a dict"
        )
    for key in value:
        if not isinstance(key, str):
            raise error(
                f"{name} keys must be strings, got {show(key)} ({_what(key)}): "
                "use text keys such as 'document_id'"
            )
    return value


def check_text(
    value: object,
    name: str,
    *,
    optional: bool = False,
    max_chars: int | None = None,
    empty: bool = True,
) -> Any:
    """Text: a ``str`` without NUL or lone surrogates (which no backend stores alike), at
    most ``max_chars`` characters, non-empty unless ``empty``; ``None`` when ``optional``.
    Returns it."""
    if value is None and optional:
        return None
    if (
        type(value) is str
        and value.isascii()  # O(1) in CPython: no lone surrogate possible
        and (empty or value)
        and (max_chars is None or len(value) <= max_chars)
        and "\x00" not in value
    ):
        return value  # fast path: plain ASCII text within its limits
    if not isinstance(value, str):
        raise argument_error(
            name, value, "must be a string" + (" or None" if optional else ""), f"pass text for {name}"
        )
    if not empty and value == "":
        raise InvalidArgumentError(f"{name} is empty: pass a non-empty text")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidArgumentError(
            f"{name} is {len(value):,} characters long; the limit is {max_chars:,}: shorten it"
        )
    if "\x00" in value:
        raise InvalidArgumentError(f"{name} contains a NUL character (U+0000): remove it")
    surrogate = None if value.isascii() else _SURROGATE.search(value)
    if surrogate is not None:
        raise InvalidArgumentError(
            f"{name} contains a lone surrogate at position {surrogate.start()}, which is not "
            "valid Unicode text: remove or replace it"
        )
    return value


def check_key_text(value: object, name: str, *, optional: bool = True) -> Any:
    """The type of a store-key part (user id, session id, agent code): a ``str`` (``None``
    when ``optional``); its characters are checked where the key is built. Raises
    :class:`~dbmemory.errors.InvalidScopeError`. Returns it."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidScopeError(
            f"{name} must be a string" + (" or None" if optional else "")
            + f", got {show(value)} ({_what(value)}): pass text such as 'u-42'"
        )
    return value


def check_bool(value: object, name: str, *, optional: bool = False) -> Any:
    """``True`` or ``False`` (not ``0``/``1``/``"yes"``); ``None`` when ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise argument_error(
            name,
            value,
            "must be True or False" + (" or None" if optional else ""),
            f"pass {name}=True or {name}=False",
        )
    return value


def check_callable(value: object, name: str, *, optional: bool = True) -> Any:
    """A callable (``None`` when ``optional``). Returns it."""
    if value is None and optional:
        return None
    if not callable(value):
        raise argument_error(
            name, value, "must be callable" + (" or None" if optional else ""), "pass a function"
        )
    return value


def check_connection(value: object, name: str = "conn") -> Any:
    """A SQLAlchemy ``Connection`` (from ``engine.connect()`` or ``engine.begin()``)."""
    if type(value) is _Connection or isinstance(value, _Connection):
        return value
    raise argument_error(
        name,
        value,
        "must be a SQLAlchemy Connection",
        "pass the connection of 'with engine.begin() as conn:' (an Engine is not accepted "
        "here: memory writes join your transaction)",
    )


def check_engine(value: object, name: str = "engine") -> Any:
    """A SQLAlchemy ``Engine`` (from :func:`dbmemory.create_engine`)."""
    if not isinstance(value, _Engine):
        raise argument_error(
            name, value, "must be a SQLAlchemy Engine", "pass dbmemory.create_engine(url)"
        )
    return value


def check_bind(value: object, name: str = "engine_or_conn") -> Any:
    """A SQLAlchemy ``Engine`` or ``Connection``."""
    if not isinstance(value, (_Engine, _Connection)):
        raise argument_error(
            name,
            value,
            "must be a SQLAlchemy Engine or Connection",
            "pass dbmemory.create_engine(url), or the connection of 'with engine.begin() as conn:'",
        )
    return value


def check_each(values: object, name: str, check: Callable[[object, str], T]) -> list[T]:
    """A list or tuple whose items each pass ``check``; returns them as a list."""
    if not isinstance(values, (list, tuple)):
        raise argument_error(name, values, "must be a list", f"pass a list, e.g. {name}=[1, 2]")
    return [check(item, f"{name}[{index}]") for index, item in enumerate(values)]


