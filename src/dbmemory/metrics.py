"""Prometheus metrics of the MEMORY tool and of expiry.

Registered on the process-wide :func:`shared_registry`, where the profile's and the items'
metrics register too, so one scrape of :func:`exposition` (or of the registry a host passed to
:class:`MemoryMetrics`) shows them all. ``prometheus-client`` is optional (the ``profile`` extra):
without it every recording call is a no-op and :func:`exposition` returns ``b""``.

Every label is a closed set (anything else becomes ``"other"``); no store key, user, path or
agent ever becomes a label.

Metric names (``_total``/``_bucket`` suffixes added by the client):

* ``dbmemory_tool_commands_total{command,outcome}``: one per :meth:`MemoryTool.execute
  <dbmemory.tool.MemoryTool.execute>`; command in :data:`COMMANDS`, outcome ``ok`` or
  ``error``
* ``dbmemory_tool_command_duration_seconds{command}``
* ``dbmemory_tool_errors_total{code}``: error answers by code, code in :data:`ERROR_CODES`
  (the :class:`~dbmemory.errors.DbMemoryError` code; ``tool_input`` for arguments the tool
  refused before touching the database, ``internal`` for an unexpected failure)
* ``dbmemory_expiry_runs_total{outcome}``: runs of :func:`~dbmemory.store.expiry.expire_files` /
  :func:`~dbmemory.store.expiry.expire_files_committing` (``dbmemory expire``), outcome ``ok`` or
  ``error``
* ``dbmemory_expiry_files_total``: files deleted by those runs
* ``dbmemory_expiry_run_duration_seconds``
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = [
    "COMMANDS",
    "ERROR_CODES",
    "MemoryMetrics",
    "default_memory_metrics",
    "exposition",
    "record_command",
    "record_expiry",
    "shared_registry",
]

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename", "invalid", "other")
"""``command`` label values: the tool's commands, ``invalid`` when the arguments did not parse."""

ERROR_CODES = (
    "not_found",
    "invalid_argument",
    "invalid_path",
    "invalid_scope",
    "cap_exceeded",
    "conflict",
    "busy",
    "serialization_failure",
    "transaction_rolled_back",
    "already_exists",
    "missing_dependency",
    "storage_error",
    "connect_failed",
    "pool_exhausted",
    "no_majority",
    "statement_timeout",
    "outcome_unknown",
    "read_only",
    "tool_input",
    "internal",
    "other",
)
"""``code`` label values of ``dbmemory_tool_errors_total``."""

OUTCOMES = ("ok", "error")
_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_EXPIRY_SECONDS = (0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)


def _closed(value: str, allowed: tuple[str, ...]) -> str:
    return value if value in allowed else "other"


class MemoryMetrics:
    """The MEMORY tool and expiry metrics on one registry.

    Args:
        registry: a ``prometheus_client.CollectorRegistry``; default :func:`shared_registry`.
        namespace: metric name prefix (default ``"dbmemory"``).

    Raises:
        ImportError: prometheus-client is not installed (use :func:`default_memory_metrics`,
            which falls back to no-ops).
    """

    def __init__(self, registry: Any | None = None, namespace: str = "dbmemory") -> None:
        from prometheus_client import (  # optional dependency (profile extra), imported on use
            Counter,
            Histogram,
        )

        registry = self.registry = registry if registry is not None else shared_registry()
        self._children: dict[tuple[str, bool], tuple[Any, Any]] = {}
        tool = {"namespace": namespace, "subsystem": "tool", "registry": registry}
        expiry = {"namespace": namespace, "subsystem": "expiry", "registry": registry}
        self.commands = Counter(
            "commands", "MEMORY tool commands by command and outcome.", ["command", "outcome"], **tool
        )
        self.command_seconds = Histogram(
            "command_duration_seconds",
            "Time of one MEMORY tool command.",
            ["command"],
            buckets=_SECONDS,
            **tool,
        )
        self.errors = Counter("errors", "MEMORY tool error answers by code.", ["code"], **tool)
        self.expiry_runs = Counter("runs", "Expiry runs by outcome.", ["outcome"], **expiry)
        self.expiry_files = Counter("files", "Files deleted by expiry runs.", **expiry)
        self.expiry_seconds = Histogram(
            "run_duration_seconds", "Time of one expiry run.", buckets=_EXPIRY_SECONDS, **expiry
        )

    def command(self, command: str, error_code: str | None, seconds: float) -> None:
        """Count one tool command (``error_code`` None: it succeeded)."""
        name = _closed(command, COMMANDS)
        key = (name, error_code is None)
        children = self._children.get(key)
        if children is None:  # the labelled series, looked up once per command and outcome
            children = self._children[key] = (
                self.commands.labels(name, "ok" if error_code is None else "error"),
                self.command_seconds.labels(name),
            )
        children[0].inc()
        children[1].observe(max(0.0, seconds))
        if error_code is not None:
            self.errors.labels(_closed(error_code, ERROR_CODES)).inc()

    def expiry(self, *, ok: bool, files: int, seconds: float) -> None:
        """Count one expiry run and the files it deleted."""
        self.expiry_runs.labels("ok" if ok else "error").inc()
        if files:
            self.expiry_files.inc(files)
        self.expiry_seconds.observe(max(0.0, seconds))


class _NoMetrics:
    """Stands in for :class:`MemoryMetrics` without prometheus-client: records nothing."""

    registry = None

    def command(self, command: str, error_code: str | None, seconds: float) -> None:
        return None

    def expiry(self, *, ok: bool, files: int, seconds: float) -> None:
        return None


_default: MemoryMetrics | _NoMetrics | None = None
_lock = threading.Lock()
_registry: Any | None = None
_registry_lock = threading.Lock()


def shared_registry() -> Any:
    """The process-wide ``prometheus_client.CollectorRegistry`` that the tool, expiry, profile
    and item metrics register on by default, so one scrape shows them all.

    Raises:
        ImportError: prometheus-client is not installed (the ``profile`` extra).
    """
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                # optional dependency (the profile extra): imported on first use
                from prometheus_client import (
                    CollectorRegistry,  # optional dependency (profile extra), imported on use
                )

                _registry = CollectorRegistry(auto_describe=True)
    return _registry


def default_memory_metrics() -> MemoryMetrics | _NoMetrics:
    """The process-wide metrics (on :func:`shared_registry`), or no-ops when
    prometheus-client is not installed."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                try:
                    _default = MemoryMetrics()
                except ImportError:
                    _default = _NoMetrics()
    return _default


def record_command(command: str, error_code: str | None, seconds: float) -> None:
    """Record one MEMORY tool command on :func:`default_memory_metrics`."""
    (_default or default_memory_metrics()).command(command, error_code, seconds)


def record_expiry(*, ok: bool, files: int, seconds: float) -> None:
    """Record one expiry run on :func:`default_memory_metrics`."""
    (_default or default_memory_metrics()).expiry(ok=ok, files=files, seconds=seconds)


def exposition() -> bytes:
    """The shared registry in the Prometheus text format (``b""`` without prometheus-client)."""
    metrics = default_memory_metrics()
    if metrics.registry is None:
        return b""
    from prometheus_client import (
        generate_latest,  # optional dependency (profile extra), imported on use
    )

    return bytes(generate_latest(metrics.registry))
