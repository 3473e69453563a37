"""The Grafana dashboard in the chart charts what the processes export: every
metric name a panel's PromQL names is one voxwire (or prometheus_client's
process collector) really exports, and every voxwire metric has a panel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric

import voxwire.core.metrics  # noqa: F401  (defines every voxwire metric)

DASHBOARD = Path(__file__).resolve().parents[2] / "helm" / "voxwire" / "dashboards" / "voxwire.json"

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "gauge": ("",),
    "info": ("_info",),
}

PROMQL_WORDS = {
    # functions and aggregations the dashboard may use; anything else is a metric
    "rate", "irate", "increase", "sum", "avg", "max", "min", "count", "topk",
    "histogram_quantile", "clamp_min", "clamp_max", "abs", "by", "without",
    "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset",
}  # fmt: skip


def names_of(family: Metric) -> set[str]:
    """The sample names a metric family exports (labelled or not yet)."""
    suffixes = _SUFFIXES.get(family.type)
    if suffixes is None:
        return {sample.name for sample in family.samples}
    return {family.name + suffix for suffix in suffixes}


def exported_names() -> set[str]:
    """Every sample name the process's registry can export."""
    return {name for family in REGISTRY.collect() for name in names_of(family)}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    tokens = re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr)
    return {t for t in tokens if t not in PROMQL_WORDS and not re.fullmatch(r"\d+\w*", t)}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in dashboard["panels"]:
        found += panel.get("panels", []) if panel["type"] == "row" else [panel]
    return found


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def test_every_metric_a_panel_reads_is_exported(dashboard: dict[str, Any]) -> None:
    exported = exported_names()
    for panel in panels(dashboard):
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            names = metric_names(target["expr"])
            assert names, f"{panel['title']!r}: no metric in {target['expr']}"
            unknown = names - exported
            assert not unknown, f"{panel['title']!r} reads metrics nobody exports: {unknown}"


def test_every_voxwire_metric_has_a_panel(dashboard: dict[str, Any]) -> None:
    charted = {
        name
        for panel in panels(dashboard)
        for target in panel["targets"]
        for name in metric_names(target["expr"])
    }
    uncharted = {
        family.name
        for family in REGISTRY.collect()
        if family.name.startswith("voxwire_") and not charted & names_of(family)
    }
    assert not uncharted, f"metrics without a panel: {sorted(uncharted)}"


def test_the_dashboard_is_importable(dashboard: dict[str, Any]) -> None:
    """Grafana's import needs a uid, a title, panels with unique ids, and a
    Prometheus datasource variable the panels use."""
    assert dashboard["uid"] and dashboard["title"]
    every = dashboard["panels"] + [p for row in dashboard["panels"] for p in row.get("panels", [])]
    ids = [p["id"] for p in every]
    assert len(set(ids)) == len(ids)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels(dashboard):
        assert panel["datasource"]["uid"] == "${datasource}"
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


def test_metric_names_ignore_labels_ranges_and_groupings() -> None:
    expr = 'histogram_quantile(0.95, sum by (le, route) (rate(a_bucket{route="/x"}[5m]))) / b'
    assert metric_names(expr) == {"a_bucket", "b"}


def test_the_chart_ships_the_dashboard_for_grafanas_sidecar(dashboard: dict[str, Any]) -> None:
    from tests.deploy.chart import render

    assert not [
        o for o in render("default").of("ConfigMap") if o["metadata"]["name"].endswith("dashboard")
    ]
    config_map = render("default", "grafanaDashboard.enabled=true").one("ConfigMap", "-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["voxwire.json"]) == dashboard
