"""``dbmemory agent``: turn memory on or off for an agent and set its scope and caps.

Thin wrappers over :func:`dbmemory.store.agents.enable_for_agent`,
:func:`~dbmemory.store.agents.disable_for_agent` and :func:`~dbmemory.store.agents.list_agents`, each in a
transaction of its own that commits.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dbmemory.cli._common import (
    EXIT_CODES_HELP,
    JsonOption,
    UrlOption,
    plural,
    print_json,
    to_jsonable,
)
from dbmemory.cli._database import transaction
from dbmemory.cli._output import print_table
from dbmemory.store import agents as stores

if TYPE_CHECKING:
    from dbmemory.core.model import AgentConfig

__all__ = ["agent_app", "register", "enable", "disable", "list_", "ScopeName"]

agent_app = typer.Typer(
    help=(
        "Turn memory on or off for an agent and set its scope and caps. Each command runs "
        "in a transaction of its own and commits it. " + EXIT_CODES_HELP
    ),
    epilog="Example:\n\n    dbmemory agent enable SUPPORT --scope user --max-files 200",
    no_args_is_help=True,
)


class ScopeName(str, Enum):
    """Who shares one store (docs/stores.md, "Scopes and store keys")."""

    agent = "agent"
    user = "user"
    session = "session"
    shared = "shared"
    global_ = "global"
    context = "context"


def register(app: typer.Typer) -> None:
    """Add the ``agent`` command group to ``app``."""
    app.add_typer(
        agent_app,
        name="agent",
        short_help="Turn memory on or off for an agent; set scope and caps.",
    )


def _as_dict(config: AgentConfig) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(config)
    caps = data.pop("caps", {}) or {}
    data.update(caps)
    return data


def _describe(config: AgentConfig) -> str:
    caps = config.caps
    where = {
        "shared": f" (store code {config.store_code})",
        "context": f" (context key {config.context_key}"
        + (f", store code {config.store_code})" if config.store_code else ")"),
    }.get(config.scope, "")
    store_chars = "unlimited" if caps.max_store_chars is None else f"{caps.max_store_chars:,}"
    return (
        f"scope {config.scope}{where}; caps: {caps.max_file_chars:,} characters per file, "
        f"{caps.max_files:,} files, {store_chars} characters per store"
    )


@agent_app.command("enable")
def enable(
    agent: Annotated[str, typer.Argument(help="Agent code, e.g. SUPPORT.", show_default=False)],
    scope: Annotated[
        ScopeName,
        typer.Option("--scope", help="Who shares one store.", case_sensitive=False),
    ] = ScopeName.agent,
    store_code: Annotated[
        str | None,
        typer.Option(
            "--store-code",
            help="Store code: needed by --scope shared; optional namespace for context.",
            metavar="CODE",
            show_default=False,
        ),
    ] = None,
    context_key: Annotated[
        str | None,
        typer.Option(
            "--context-key",
            help="Run-context key naming the store: needed by --scope context.",
            metavar="KEY",
            show_default=False,
        ),
    ] = None,
    max_file_chars: Annotated[
        int | None,
        typer.Option(
            "--max-file-chars",
            min=1,
            metavar="N",
            help="Cap: characters per file. Default 100,000 (also on re-enable: left out = default).",
            show_default=False,
        ),
    ] = None,
    max_files: Annotated[
        int | None,
        typer.Option(
            "--max-files",
            min=1,
            metavar="N",
            help="Cap: files per store. Default 1,000 (also on re-enable: left out = default).",
            show_default=False,
        ),
    ] = None,
    max_store_chars: Annotated[
        int | None,
        typer.Option(
            "--max-store-chars",
            min=1,
            metavar="N",
            help="Cap: characters per store. Default no cap (also on re-enable: left out = default).",
            show_default=False,
        ),
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Enable memory for an agent, or change its configuration (an upsert).

    Caps left out are the defaults, also when re-enabling (they are never kept from the old
    configuration). The caps are set on the configuration and on the existing stores it names
    (its agent, user and context stores, its shared store, the global store); every writer of
    a store obeys its caps. Runs in a transaction of its own and commits it.

    Example:

        dbmemory agent enable SUPPORT
        dbmemory agent enable SUPPORT --scope user --max-files 200
        dbmemory agent enable DOCS --scope context --context-key document_id
        dbmemory agent enable TEAM --scope shared --store-code POLICIES
    """
    with transaction(url, f"enabling memory for agent {agent}") as conn:
        config = stores.enable_for_agent(
            conn,
            agent,
            scope=scope.value,
            store_code=store_code,
            context_key=context_key,
            max_file_chars=max_file_chars,
            max_files=max_files,
            max_store_chars=max_store_chars,
        )
    if as_json:
        print_json(_as_dict(config))
    else:
        typer.echo(f"Memory enabled for agent {config.agent_code}: {_describe(config)}")


@agent_app.command("disable")
def disable(
    agent: Annotated[str, typer.Argument(help="Agent code, e.g. SUPPORT.", show_default=False)],
    drop_store: Annotated[
        bool,
        typer.Option(
            "--drop-store",
            help=(
                "Also delete the agent's own stores and their files: agent:AGENT, "
                "user:AGENT:* and context:AGENT:*:* (chosen by exact key); never shared, "
                "global, session or store-code context stores, nor user profiles."
            ),
        ),
    ] = False,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Disable memory for an agent; its stores stay unless --drop-store is given.

    Runs in a transaction of its own and commits it.

    Example:

        dbmemory agent disable SUPPORT
        dbmemory agent disable SUPPORT --drop-store
    """
    with transaction(url, f"disabling memory for agent {agent}") as conn:
        dropped = stores.disable_for_agent(conn, agent, drop_store=drop_store)
    if as_json:
        print_json({"agent_code": agent, "memory_enabled": False, "stores_dropped": dropped})
    elif drop_store:
        typer.echo(f"Memory disabled for agent {agent}; {plural(dropped, 'store')} dropped")
    else:
        typer.echo(f"Memory disabled for agent {agent}; its stores are kept")


@agent_app.command("list")
def list_(
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List every configured agent with its scope, caps and whether memory is on.

    Reads only.

    Example:

        dbmemory agent list
        dbmemory agent list --json
    """
    with transaction(url, "listing agents", read_only=True) as conn:
        configs = stores.list_agents(conn)
    if as_json:
        print_json([_as_dict(c) for c in configs])
        return
    if not configs:
        typer.echo("No agents configured: enable one with 'dbmemory agent enable AGENT'")
        return
    print_table(
        [
            "agent",
            "enabled",
            "scope",
            "store code",
            "context key",
            "file chars",
            "files",
            "store chars",
        ],
        [
            [
                c.agent_code,
                "yes" if c.memory_enabled else "no",
                c.scope,
                c.store_code,
                c.context_key,
                f"{c.caps.max_file_chars:,}",
                f"{c.caps.max_files:,}",
                "unlimited" if c.caps.max_store_chars is None else f"{c.caps.max_store_chars:,}",
            ]
            for c in configs
        ],
        right=["file chars", "files", "store chars"],
    )
