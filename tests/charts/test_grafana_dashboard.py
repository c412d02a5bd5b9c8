"""Issue 43: the "Lambda vs Kappa" Grafana dashboard ships in the chart as a ConfigMap that
Grafana's dashboard sidecar finds by its label, and queries only metrics the project defines.
(That the running release exports each of them is checked on the real cluster, tests/k8s.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests import dashboard
from tests.charts.chart_utils import ROOT, render

SOURCES = ("core", "stream_engine", "speed_layer", "kappa", "batch_layer", "serving", "quality")
SERVICES = re.compile(r"^(up|kafka_|pg_|minio_|airflow_|jvm_|process_)")
"""Metric families of the services' own exporters (the JMX exporter, postgres_exporter, MinIO,
statsd_exporter's mapping) and Prometheus's `up`: not defined in our code."""


def _configmap(values: dict | None = None) -> dict:
    (cm,) = render(values).by_component("ConfigMap", "grafana-dashboard")
    return cm


def test_the_dashboard_should_be_a_configmap_the_grafana_sidecar_picks_up() -> None:
    cm = _configmap()
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["labels"]["app.kubernetes.io/component"] == "grafana-dashboard"
    shipped = json.loads(cm["data"]["lambda-kappa.json"])
    assert shipped == dashboard.load()  # the file, unchanged


def test_the_sidecars_label_namespace_and_folder_should_be_values() -> None:
    cm = _configmap(
        {
            "grafanaDashboard": {
                "namespace": "monitoring",
                "labels": {"team-dashboards": "yes"},
                "annotations": {"grafana_folder": "Data"},
            }
        }
    )
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["team-dashboards"] == "yes"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Data"}


def test_the_dashboard_can_be_left_out() -> None:
    rendered = render({"grafanaDashboard": {"enabled": False}})
    assert not rendered.by_component("ConfigMap", "grafana-dashboard")


def test_the_dashboard_should_compare_both_architectures_on_every_topic_the_issue_names() -> None:
    titles = " / ".join(p["title"].lower() for p in dashboard.panels(dashboard.load()))
    for topic in ("freshness", "throughput", "micro-batch", "late", "batch run", "hand-off",
                  "replay", "latency"):  # fmt: skip
        assert topic in titles, topic


def test_every_query_should_parse_and_use_the_datasource_variable() -> None:
    board = dashboard.load()
    assert {v["name"] for v in board["templating"]["list"]} >= {"datasource", "namespace"}
    exprs = list(dashboard.expressions(board))
    assert len(exprs) >= 20
    for title, expr in exprs:
        assert dashboard.selected_metrics(expr), (title, expr)
    for panel in dashboard.panels(board):
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def _defined_in_code() -> str:
    return "\n".join(
        path.read_text() for room in SOURCES for path in Path(ROOT, room).rglob("*.py")
    )


def test_every_metric_of_ours_the_dashboard_queries_should_be_defined_in_the_code() -> None:
    code = _defined_in_code()
    ours = {
        name: titles
        for name, titles in dashboard.queried_metrics(dashboard.load()).items()
        if not SERVICES.match(name)
    }
    assert ours
    missing = {
        name: sorted(titles)
        for name, titles in ours.items()
        if f'"{dashboard.exported_name(name)}"' not in code and f'"{name}"' not in code
    }
    assert not missing, missing
