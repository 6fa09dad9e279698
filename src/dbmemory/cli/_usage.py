"""Usage-error hints of the ``dbmemory`` command line: the options a mistyped one is close to
(:func:`close_options`), and the user's own command rewritten so a negative value reads as a
value (:func:`negative_example`). Used by :func:`dbmemory.cli._common.describe_error`."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Sequence
from typing import Any

__all__ = ["close_options", "negative_example", "last_args", "NEGATIVE_NUMBER"]

NEGATIVE_NUMBER = re.compile(r"^-\d")


def close_options(typed: str, options: Sequence[str]) -> list[str]:
    """The options of ``options`` that ``typed`` is plausibly a typo of, closest first.

    click suggests any option whose spelling is 60% alike (``--bogus`` -> ``--user``, ``--usr``
    -> ``--url``); here an option is suggested only when ``typed`` (without its dashes, at
    least two characters) starts it, or the names without dashes are at least 75% alike
    (:class:`difflib.SequenceMatcher` ratio): ``--usr`` -> ``--user``, ``--stor`` ->
    ``--store``, ``--bogus`` -> nothing.
    """
    bare = typed.lstrip("-").lower()
    scored = []
    for option in dict.fromkeys(options):
        name = option.lstrip("-").lower()
        ratio = difflib.SequenceMatcher(None, bare, name).ratio()
        if (len(bare) >= 2 and name.startswith(bare)) or ratio >= 0.75:
            scored.append((-ratio, option))
    return [option for _, option in sorted(scored)][:3]


last_args: list[str] = []
"""The arguments of the running command line (set by :meth:`DbMemoryGroup.main`), for hints
that repeat the user's own command."""


def negative_example(ctx: Any, args: Sequence[str]) -> str:
    """The user's command line with its options first and ``--`` before its values, so that a
    negative value (``settings set --admin grace_days -1``) reads as a value:
    ``dbmemory settings set --admin -- grace_days -1``. Falls back to ``COMMAND -- VALUES``
    when the arguments are not known."""
    words = ctx.command_path.split()[1:]
    argv = list(args)
    rest = argv[len(words) :] if argv[: len(words)] == words else []
    if not rest:
        return f"{ctx.command_path} -- VALUES"
    takes_value = {
        name: not (getattr(param, "is_flag", False) or getattr(param, "count", False))
        for param in getattr(ctx.command, "params", ())
        for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
        if name.startswith("-")
    }
    options: list[str] = []
    values: list[str] = []
    tokens = iter(rest)
    for token in tokens:
        if token == "--":
            values.extend(tokens)
        elif token.startswith("-") and not NEGATIVE_NUMBER.match(token):
            options.append(token)
            if "=" not in token and takes_value.get(token, False):
                options.append(next(tokens, ""))
        else:
            values.append(token)
    shown = [shlex.quote(word) for word in (*options, "--", *values)]
    return " ".join([ctx.command_path, *shown])
