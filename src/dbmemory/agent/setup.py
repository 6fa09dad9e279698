"""What the ``chat`` and ``replay`` commands share: choosing the model and preparing the database.

- :func:`choose_model`: the named litellm model, or the scripted stand-in when no model is
  configured (``--model`` and ``DBMEMORY_MODEL`` unset), with the notice the commands print on
  their first line of output.
- :func:`ensure_schema`: installs dbmemory's schema on a SQLite database that has none (the
  embedded default must work on a fresh machine with one command); on a server database it
  refuses and says to run ``dbmemory db upgrade`` (schema changes there are the operator's).
- :func:`ensure_agent`: enables memory for an agent that has no configuration yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from dbmemory import llm
from dbmemory.agent.scripted import (
    SCRIPTED_CHOSEN_NOTICE,
    SCRIPTED_MODEL_NAME,
    SCRIPTED_NOTICE,
    ScriptedModel,
)
from dbmemory.db import migrate
from dbmemory.db.dialect.base import is_sqlite
from dbmemory.errors import NotFoundError, StorageError
from dbmemory.store.agents import enable_for_agent, get_agent_config

__all__ = ["ModelChoice", "choose_model", "ensure_schema", "ensure_agent"]


@dataclass(frozen=True)
class ModelChoice:
    """The model a command uses.

    Attributes:
        model: the litellm model name, or ``"scripted"``.
        complete: the model call: None for :func:`dbmemory.llm.complete` (litellm), or the
            scripted stand-in.
        scripted: whether the stand-in is used.
        notice: the line to print first when the stand-in is used, else None.
    """

    model: str
    complete: Callable[..., Any] | None
    scripted: bool
    notice: str | None


def choose_model(model: str | None, *, check: bool = True) -> ModelChoice:
    """The model for a command, checked before any work starts.

    Args:
        model: ``--model`` (typer reads ``DBMEMORY_MODEL`` into it); None, ``""`` or
            ``"scripted"`` selects the scripted stand-in.
        check: run :func:`dbmemory.llm.preflight` on a litellm model (missing provider key,
            unknown name, refused local server), within about a second.

    Returns:
        A :class:`ModelChoice`.

    Raises:
        ModelError: the model cannot be used; its ``cli_message`` names ``--model scripted``.
    """
    name = (model or "").strip()
    if not name:
        return ModelChoice(SCRIPTED_MODEL_NAME, ScriptedModel(), True, SCRIPTED_NOTICE)
    if name == SCRIPTED_MODEL_NAME:
        return ModelChoice(SCRIPTED_MODEL_NAME, ScriptedModel(), True, SCRIPTED_CHOSEN_NOTICE)
    if check:
        llm.preflight(name, llm.complete)  # a test's fake model call is not checked
    return ModelChoice(name, None, False, None)


def ensure_schema(engine: Engine) -> bool:
    """Make sure dbmemory's schema is installed.

    Returns:
        True when this call installed it (SQLite only), False when it was there.

    Raises:
        StorageError: a non-SQLite database without the schema (run ``dbmemory db upgrade``).
    """
    if migrate.current(engine) is not None:
        return False
    if not is_sqlite(engine):
        raise StorageError(
            "this database has no dbmemory tables: run 'dbmemory db upgrade' (with the same --url) first"
        )
    migrate.upgrade(engine)
    return True


def ensure_agent(engine: Engine, agent_code: str, *, scope: str = "user") -> bool:
    """Enable memory for ``agent_code`` with ``scope`` when it has no configuration yet.

    An existing configuration (also a disabled one) is left as it is.

    Returns:
        True when this call enabled it.
    """
    with engine.begin() as conn:
        try:
            get_agent_config(conn, agent_code)
            return False
        except NotFoundError:
            enable_for_agent(conn, agent_code, scope=scope)
            return True
