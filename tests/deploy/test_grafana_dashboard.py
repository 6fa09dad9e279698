"""The Grafana dashboard in ``deploy/grafana/dbmemory.json`` queries only metrics the package
exports: every metric name in every panel's PromQL is a sample name of the real
:class:`~dbmemory.metrics.MemoryMetrics` and :class:`~dbmemory.profile.metrics.ProfileMetrics`
registries (counters' ``_total``, histograms' ``_bucket``/``_sum``/``_count``), and every
``code`` the dashboard filters on is a label value the tool metrics can take."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry  # noqa: E402

from dbmemory.metrics import ERROR_CODES, MemoryMetrics  # noqa: E402
from dbmemory.profile.metrics import ProfileMetrics  # noqa: E402

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dbmemory.json"
METRIC = re.compile(r"\b(dbmemory_[a-z0-9_]+)\b")


def _exported_names() -> set[str]:
    registry = CollectorRegistry()
    MemoryMetrics(registry)
    ProfileMetrics(registry)
    names: set[str] = set()
    for family in registry.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(family.name)
    return names


def _queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", ())]


def test_every_dashboard_query_names_a_metric_the_package_exports() -> None:
    exported = _exported_names()
    queries = _queries()
    assert queries
    for expr in queries:
        used = METRIC.findall(expr)
        assert used, f"no dbmemory metric in {expr!r}"
        unknown = set(used) - exported
        assert not unknown, (unknown, expr)


def test_every_error_code_the_dashboard_filters_on_is_a_label_value() -> None:
    for expr in _queries():
        for alternatives in re.findall(r'code=~"([^"]+)"', expr):
            unknown = set(alternatives.split("|")) - set(ERROR_CODES)
            assert not unknown, (unknown, expr)


def test_the_tool_metrics_are_all_on_the_dashboard() -> None:
    used = {name for expr in _queries() for name in METRIC.findall(expr)}
    for family in ("dbmemory_tool_commands_total", "dbmemory_tool_errors_total",
                   "dbmemory_tool_command_duration_seconds_bucket", "dbmemory_expiry_runs_total",
                   "dbmemory_expiry_files_total", "dbmemory_expiry_run_duration_seconds_bucket"):
        assert family in used, family
