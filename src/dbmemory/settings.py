"""Configuration from ``DBMEMORY_*`` environment variables (pydantic-settings).

Build a :class:`Settings` explicitly and pass values down; nothing in dbmemory reads the
environment behind the caller's back except :func:`dbmemory.db.engine.create_engine` when it is
given no URL or no ``lock_timeout_ms``. Importing this module does not touch the file system.

Example:
    >>> from dbmemory.settings import Settings
    >>> Settings(url="sqlite:///memory.db").url
    'sqlite:///memory.db'
"""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_data_dir
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["APP_NAME", "DB_FILE_NAME", "Settings", "default_db_path", "default_url"]

APP_NAME = "dbmemory"
"""Application name used for the per-user data directory (``platformdirs``)."""

DB_FILE_NAME = "dbmemory.db"
"""File name of the embedded SQLite database inside the user data directory."""


class Settings(BaseSettings):
    """dbmemory settings, read from ``DBMEMORY_*`` environment variables.

    Field docstrings are the descriptions (``use_attribute_docstrings``). Credentials belong in
    the URL given by the operator's secret store; dbmemory never logs a URL unredacted
    (see :func:`dbmemory.db.engine.redact_url`).
    """

    model_config = SettingsConfigDict(
        env_prefix="DBMEMORY_",
        extra="ignore",
        use_attribute_docstrings=True,
    )

    url: str | None = None
    """SQLAlchemy database URL (``DBMEMORY_URL``), e.g. ``oracle+oracledb://app@db:1521/?service_name=APP``,
    ``postgresql://app@db/app``, ``mysql://app@db/app``. None means the embedded SQLite default
    (:func:`default_url`)."""

    model: str | None = None
    """The litellm model name for LLM steps (``DBMEMORY_MODEL``), e.g. ``"gpt-4o-mini"`` or
    ``"ollama/llama3.1"``. None means no model configured: LLM steps refuse to run."""

    lock_timeout_ms: int = Field(default=5_000, gt=0)
    """How long a write waits for another transaction's lock, in milliseconds
    (``DBMEMORY_LOCK_TIMEOUT_MS``, default 5000), before it gives up with a text that says to
    retry. Applied by :func:`dbmemory.create_engine` on every connection (PostgreSQL
    ``lock_timeout``, MariaDB/MySQL ``innodb_lock_wait_timeout`` rounded up to seconds, SQLite
    busy timeout, Oracle ``FOR UPDATE WAIT n``)."""

    commit_outcome_wait_s: float = Field(default=10.0, ge=0)
    """How long, in seconds, dbmemory reconnects and asks the database for the outcome of a
    ``COMMIT`` whose reply was lost (a cut connection, a failover) before it answers that the
    change may or may not have been saved (``DBMEMORY_COMMIT_OUTCOME_WAIT_S``, default 10).
    Within it the answer is "saved" or "nothing was saved: retry"."""

    transaction_pooling: bool = False
    """Whether the PostgreSQL server is reached through a pooler in transaction mode, such as
    PgBouncer with ``pool_mode = transaction`` (``DBMEMORY_TRANSACTION_POOLING``, default
    False). :func:`dbmemory.create_engine` then turns psycopg's prepared statements off
    (``prepare_threshold=None``: PgBouncer before 1.21, or without ``max_prepared_statements``,
    cannot route them) and sets ``lock_timeout`` with ``SET LOCAL`` in every transaction
    instead of once per connection. Same as ``?dbmemory_transaction_pooling=true`` in the URL."""

    galera_cluster_size: int | None = Field(default=None, gt=0)
    """How many nodes the operator expects in the Galera cluster (``DBMEMORY_GALERA_CLUSTER_SIZE``,
    default None: not said). ``dbmemory doctor`` on a Galera node is unhealthy when
    ``wsrep_cluster_size`` is smaller (a node is down or split off); same as
    ``dbmemory doctor --expected-cluster-size N``."""

    def resolved_url(self) -> str:
        """The configured URL, or the embedded SQLite default (creating its folder).

        Returns:
            A SQLAlchemy URL string.
        """
        return self.url or default_url()


def default_db_path(*, create_dir: bool = True) -> Path:
    """Path of the embedded SQLite database in the user data directory.

    Args:
        create_dir: create the data directory when missing (default True).

    Returns:
        ``<user data dir>/dbmemory.db``, e.g. ``~/.local/share/dbmemory/dbmemory.db`` on Linux.
    """
    folder = Path(user_data_dir(APP_NAME))
    if create_dir:
        folder.mkdir(parents=True, exist_ok=True)
    return folder / DB_FILE_NAME


def default_url() -> str:
    """The embedded default database URL: a SQLite file in the user data directory.

    The folder is created when missing; the database file is created by SQLite on first connect.

    Returns:
        A ``sqlite:///<absolute path>`` URL string.
    """
    return f"sqlite:///{default_db_path().as_posix()}"
