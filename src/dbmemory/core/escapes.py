"""The escape that maps any text to a small safe alphabet: each character outside ``safe``
becomes ``_XX`` per byte of its UTF-8 encoding (uppercase hex; lone surrogates kept with
``surrogatepass``), so the result is reversible and canonical. Used for user ids in store keys
(:func:`dbmemory.profile.store.encode_user_id`) and for LangGraph namespace labels and keys
(:mod:`dbmemory.integrations.langgraph.codec`), each with its own ``safe`` set; ``_`` is never safe.
"""

from __future__ import annotations

import re

__all__ = ["escape", "unescape"]

_ESCAPE = re.compile(r"_([0-9A-F]{2})")


def escape(text: str, safe: frozenset[str]) -> str:
    """``text`` with every character outside ``safe`` written as ``_XX`` per UTF-8 byte."""
    return "".join(
        c if c in safe else "".join(f"_{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
        for c in text
    )


def unescape(encoded: str, safe: frozenset[str]) -> tuple[str | None, str]:
    """Invert :func:`escape`.

    Returns:
        ``(text, "")``, or ``(None, why)`` when ``encoded`` is not what :func:`escape` makes of
        any text: ``"bad escape"``, the offending character's ``repr``, ``"not UTF-8"`` or
        ``"not canonical"`` (an escape of a safe character, lowercase hex).
    """
    out = bytearray()
    position = 0
    while position < len(encoded):
        char = encoded[position]
        if char == "_":
            match = _ESCAPE.match(encoded, position)
            if match is None:
                return None, "bad escape"
            out.append(int(match.group(1), 16))
            position = match.end()
        elif char in safe:
            out.append(ord(char))
            position += 1
        else:
            return None, repr(char)
    try:
        text = out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    if escape(text, safe) != encoded:
        return None, "not canonical"
    return text, ""
