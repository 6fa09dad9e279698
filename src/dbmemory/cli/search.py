"""``dbmemory search USER QUERY``: search everything a user's memory holds.

Episodes (earlier conversations, found by the database's own full-text engine), memory items,
the profile and the user's files (:func:`dbmemory.items.memory_search.search_memory`). Reads
only; the memory switch and the opt-out apply (nothing is searched while either is off).
"""

from __future__ import annotations

from typing import Annotated

import typer

from dbmemory.cli._common import EXIT_CODES_HELP, JsonOption, UrlOption, print_json
from dbmemory.cli._database import transaction
from dbmemory.items.memory_search import SOURCES, search_memory

__all__ = ["register", "search"]


def register(app: typer.Typer) -> None:
    """Add the ``search`` command to ``app``."""
    app.command("search", no_args_is_help=True, epilog=EXIT_CODES_HELP)(search)


def search(
    user: Annotated[
        str,
        typer.Argument(help="The user's id as the host knows it, e.g. u-123.", metavar="USER", show_default=False),
    ],
    query: Annotated[
        str, typer.Argument(help="What to look for, e.g. 'sister wedding'.", metavar="QUERY", show_default=False)
    ],
    scope: Annotated[
        str,
        typer.Option(
            "--scope", help=f"Where to search: all, {', '.join(SOURCES)}.", metavar="SCOPE"
        ),
    ] = "all",
    limit: Annotated[int, typer.Option("--limit", help="Most results (1-1000).", min=1, max=1000)] = 10,
    org: Annotated[
        str, typer.Option("--org", help="Organisation id (letters, digits, '_', '.', '-').", metavar="ORG")
    ] = "default",
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search a user's memory: earlier conversations, items, profile and files, best first.

    Each result says where it came from (a conversation and its date, an item and its id,
    the profile, a file and its path) and its score relative to the best hit of the same
    source (0 to 1).

    Example:

        dbmemory search u-123 "sister wedding"
        dbmemory search u-123 "marathon" --scope files --limit 3 --json
    """
    with transaction(url, "searching a user's memory") as conn:
        hits = search_memory(conn, user, query, org_id=org, scope=scope, limit=limit)
    if as_json:
        print_json([h.to_dict() for h in hits])
        return
    if not hits:
        typer.echo(f"No results for {query!r} in the memory of {user} ({org}).")
        return
    for n, hit in enumerate(hits, 1):
        text = " ".join(hit.snippet.split())
        typer.echo(f"{n}. {hit.label()} ({hit.score:.2f}) {text}")
