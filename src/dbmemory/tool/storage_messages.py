"""The MEMORY tool's answers when the database, not the command, failed: a concurrent writer
(a change, or a lock held),
a busy or read-only database, a cluster node without its majority, a timeout, an exhausted pool, an unreachable server, an
unexpected failure. Each says that nothing was changed and what to do next; none shows the
driver's text. The command's own answers are in :mod:`dbmemory.tool.messages`."""

from __future__ import annotations

__all__ = [
    "conflict",
    "store_contended",
    "database_busy",
    "retry_transaction",
    "storage_unavailable",
    "storage_timed_out",
    "storage_pool_exhausted",
    "storage_read_only",
    "storage_no_majority",
    "internal_error",
]


def conflict(path: str) -> str:
    """A concurrent writer changed ``path`` first (a lost compare-and-set, a file created or
    deleted meanwhile)."""
    return (
        f"{path} was changed by another writer at the same time; nothing was written. "
        "View it again and retry the command."
    )


def store_contended(path: str) -> str:
    """Another writer held a lock the command on ``path`` needed (a lock wait timed out, the
    database broke a deadlock, a Galera node certified another node's write first): nothing
    says that ``path`` itself changed."""
    return (
        f"Another writer was writing this memory store at the same time, so the command on "
        f"{path} could not complete; nothing was written. View it again and retry the command."
    )


def database_busy() -> str:
    """The database is busy (SQLite: another connection holds the write lock past the timeout);
    said for reads and writes alike, never as a conflicting change to a file."""
    return (
        "The database is busy: another connection is writing to it and did not finish in "
        "time; nothing was changed. Retry the command in a moment."
    )


def retry_transaction(path: str) -> str:
    """The caller's REPEATABLE READ/SERIALIZABLE transaction started before another writer's
    change to the store: no write can succeed in it any more."""
    return (
        f"{path} was not written: another writer changed this memory store after the current "
        "transaction began, so this write cannot be checked against the store's limits; "
        "nothing was changed. Retrying in this same transaction fails again: do not retry "
        "memory writes in this turn. The application must roll back and retry the whole turn."
    )


def storage_unavailable() -> str:
    """The database failed; never shows the driver's text."""
    return "The memory store could not be reached; nothing was changed. Retry the command later."


def storage_timed_out(detail: str) -> str:
    """The database cancelled a statement at its time limit; ``detail`` is the
    :class:`~dbmemory.errors.StorageError`'s message (what waited, which limit)."""
    return f"The memory store timed out: {detail}"


def storage_pool_exhausted() -> str:
    """The application's connection pool had no free connection in time."""
    return (
        "The memory store is busy: no database connection came free in time; nothing was "
        "changed. Retry the command in a moment."
    )


def storage_read_only() -> str:
    """The database refused a write because it is read-only (a SQLite file without write
    permission, a read-only mount, ``mode=ro``); a view needs to write too (it records the read
    for expiry)."""
    return (
        "The memory store is read-only, so this command could not be completed (a view also "
        "records the read, for expiry); nothing was changed. Ask the operator to make the "
        "database writable."
    )


def storage_no_majority() -> str:
    """The database node is cut off from the majority of its cluster (MariaDB Galera,
    non-primary component: error 1047): it refuses every read and write until it rejoins."""
    return (
        "The memory store's database node is cut off from the majority of its cluster, so it "
        "refuses every read and write until it rejoins; nothing was changed. Retry the command "
        "later (the application or its load balancer should use a node of the majority)."
    )


def internal_error() -> str:
    """An unexpected failure inside the tool; details go to the log only."""
    return (
        "The memory tool failed unexpectedly; nothing was changed. Retry the command, "
        "or continue without memory."
    )
