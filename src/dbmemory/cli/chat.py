"""``dbmemory chat``: an interactive terminal chat with database memory (rich).

Shows, as they happen, "Loading context memory", each MEMORY tool call with its result, the
answer, then "Updating your memory" (each step once, when it ends, with its outcome). ``/memory``
prints the user's profile, ``/items`` the user's memory items, ``/files`` the
agent's memory files (``/files PATH`` one file), ``/help`` the commands, ``/quit`` ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from dbmemory.agent.chat import COMMANDS_HELP, ChatSession, default_session_id, describe_tool_call
from dbmemory.agent.setup import choose_model, ensure_schema
from dbmemory.cli._common import EXIT_CODES_HELP, UrlOption
from dbmemory.cli._database import engine_session
from dbmemory.cli._output import console, print_table
from dbmemory.cli.replay import ModelOption
from dbmemory.errors import PROFILE_MODULES, NotFoundError, require_extra
from dbmemory.store.agents import get_agent_config

if TYPE_CHECKING:
    from dbmemory.agent.litellm_tools import ToolCallRecord

__all__ = ["register", "chat", "RichChatDisplay"]

_RESULT_LINES = 8


def register(app: typer.Typer) -> None:
    """Add the ``chat`` command to ``app``."""
    app.command("chat", no_args_is_help=True, epilog=EXIT_CODES_HELP)(chat)


class RichChatDisplay:
    """Prints the chat's progress on a rich console (implements :class:`dbmemory.agent.chat.ChatDisplay`)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def step(self, name: str, status: str, detail: str | None) -> None:
        """Show a profile step once, when it ends (with its outcome)."""
        if status == "started":
            return
        mark = "ok" if status == "completed" else "failed"
        suffix = f" ({detail})" if detail else ""
        self.out.print(f"[{mark}] {name}{suffix}", style="dim" if status == "completed" else "yellow")

    def tool_call(self, record: ToolCallRecord) -> None:
        """Show one tool call and the first lines of its result."""
        label, result = describe_tool_call(record, max_chars=1_200)
        self.out.print(f"-> {label}", style="cyan")
        lines = result.splitlines() or [""]
        shown = lines[:_RESULT_LINES]
        if len(lines) > _RESULT_LINES:
            shown.append(f"... ({len(lines) - _RESULT_LINES} more lines)")
        for line in shown:
            self.out.print(f"   {line}", style="red" if record.is_error else "dim")

    def notice(self, text: str) -> None:
        """Show a one-line note."""
        self.out.print(f"note: {text}", style="yellow")


def _note_memory_tool(engine: Any, agent: str, out: Any) -> None:
    """Say up front when the agent will run without the MEMORY tool (never enabled, or
    disabled), so an empty store is not mistaken for an empty memory."""
    with engine.connect() as conn:
        try:
            config = get_agent_config(conn, agent)
        except NotFoundError:
            config = None
    if config is None or not config.memory_enabled:
        state = "has no memory configuration" if config is None else "has memory disabled"
        out.print(
            f"note: agent {agent!r} {state}: this chat runs without the MEMORY tool (your profile "
            f"still loads and updates); enable it with 'dbmemory agent enable {agent}'",
            style="yellow",
            markup=False,
        )


def chat(
    agent: Annotated[str, typer.Option("--agent", metavar="AGENT", help="Agent code (its memory configuration decides the MEMORY tool).")],
    user: Annotated[str, typer.Option("--user", metavar="USER", help="Your user id (profile and user-scoped stores).")],
    session: Annotated[
        str | None,
        typer.Option("--session", metavar="SESSION", help="Session id (default: chat-<UTC timestamp>).", show_default=False),
    ] = None,
    model: ModelOption = None,
    url: UrlOption = None,
) -> None:
    """Chat with an agent that has database memory, in the terminal.

    Each turn runs in a transaction of its own and commits it; the profile update follows the
    answer. Type /memory for your profile, /items for your memory items, /files for the agent's memory files (/files PATH for
    one file), /help, and /quit (or Ctrl-D) to end. Without --model (or DBMEMORY_MODEL) the
    scripted stand-in answers: it takes notes, it does not converse.

    A SQLite database without dbmemory's tables gets them; memory for a new agent must be
    enabled first ('dbmemory agent enable AGENT'), else the chat runs with the profile only.

    Example:

        dbmemory chat --agent SUPPORT --user u-42

        dbmemory chat --agent SUPPORT --user u-42 --model ollama/llama3.1
    """
    require_extra("profile", PROFILE_MODULES)  # said at start-up, not at the first turn
    choice = choose_model(model)
    out = console()
    if choice.notice:  # the first line of output, always
        out.print(choice.notice, style="yellow")
    with engine_session(url, "chatting") as engine:
        if ensure_schema(engine):
            out.print("Installed dbmemory's schema in this SQLite database.")
        _note_memory_tool(engine, agent, out)
        session_id = session or default_session_id()
        display = RichChatDisplay(out)
        chat_session = ChatSession(
            engine=engine,
            agent_code=agent,
            user_id=user,
            session_id=session_id,
            model=choice.model,
            complete=choice.complete,
            display=display,
        )
        out.print(f"Chat with agent {agent!r} as {user!r}, session {session_id!r}, model {choice.model!r}. {COMMANDS_HELP}")
        while True:
            try:
                text = out.input("you> ")
            except (EOFError, KeyboardInterrupt):
                out.print()
                break
            text = text.strip()
            if not text:
                continue
            if text in ("/quit", "/exit", "/q"):
                break
            if text == "/help":
                out.print(COMMANDS_HELP)
                continue
            if text in ("/memory on", "/memory off"):
                chat_session.set_memory_switch(text == "/memory on")
                out.print(
                    "Memory is on: facts are noted and recalled again."
                    if text == "/memory on"
                    else "Memory is paused: nothing is noted or recalled; your profile and items are kept (/memory on resumes).",
                    markup=False,
                )
                continue
            if text in ("/optout", "/optin"):
                deleted = chat_session.set_opted_out(text == "/optout")
                out.print(
                    ("Opted out: your profile was deleted for good; " if deleted else "Opted out: ")
                    + "memory is neither loaded nor updated for you (/optin starts anew)."
                    if text == "/optout"
                    else "Opted in: a new profile starts empty after your next turn.",
                    markup=False,
                )
                continue
            if text == "/memory":
                profile = chat_session.profile_text()
                out.print(profile or "(no profile yet: it is written after a turn that teaches something about you)", markup=False, highlight=False)
                continue
            if text == "/items":
                items = chat_session.items()
                if not items:
                    out.print("(no memory items yet: facts you state are noted after a turn)")
                else:
                    print_table(
                        ["id", "kind", "text"], [[i.item_id, i.kind, i.text] for i in items], right=["id"]
                    )
                continue
            if text.startswith("/files"):
                _files(out, chat_session, text[len("/files") :].strip())
                continue
            if text.startswith("/"):
                out.print(f"unknown command {text.split()[0]!r}: {COMMANDS_HELP}", style="yellow")
                continue
            result = chat_session.send(text)  # a configuration error ends the chat with one line
            out.print(f"assistant> {result.answer}", markup=False, highlight=False, soft_wrap=True)
            if result.tool_limit_reached:
                out.print("note: the tool-call limit was reached in this turn", style="yellow")
            chat_session.finish_turn(result)


def _files(out: Any, chat_session: Any, path: str) -> None:
    if path:
        text = chat_session.file_text(path)
        out.print(text if text is not None else f"(no file {path})", markup=False, highlight=False)
        return
    files = chat_session.files()
    if not files:
        out.print("(no memory files yet)")
        return
    print_table(["path", "chars", "updated (UTC)"], [[f.path, f.chars, f.updated_at] for f in files], right=["chars"])
