"""Issue 43: the "Lambda vs Kappa" Grafana dashboard ships in the chart as a ConfigMap that
Grafana's dashboard sidecar finds by its label, and queries only metrics the project defines.
(That the running release exports each of them is checked on the real cluster, tests/k8s.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import promql_parser
import yaml

from tests import dashboard
from tests.charts.chart_utils import ROOT, render

SOURCES = ("core", "stream_engine", "speed_layer", "kappa", "batch_layer", "serving", "quality")
SERVICES = re.compile(r"^(up|kafka_|debezium_|pg_|minio_|airflow_|jvm_|process_)")
"""Metric families of the services' own exporters (the JMX exporter in Kafka's broker and in
Kafka Connect's worker, with Debezium's MBeans; postgres_exporter, MinIO, statsd_exporter's
mapping) and Prometheus's `up`: not defined in our code."""
CONFIGURED = re.compile(r"^(kafka_|debezium_|pg_replication_slot_)")
"""Of those, the names the chart's own exporter configuration makes: the JMX exporters' rules
(ConfigMaps <release>-kafka-metrics and -connect-metrics) and the Postgres exporter's extra
query (queries.yaml)."""


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


def exporter_patterns() -> list[re.Pattern[str]]:
    """The names the chart's exporter configuration makes, as patterns: each rule of the JMX
    exporters (a `$N` of its name: a captured part, lowercased) and each value column of the
    Postgres exporter's queries.yaml (<query>_<column>)."""
    rendered = render()
    patterns = []
    for name in ("lk-kafka-metrics", "lk-connect-metrics"):
        config = yaml.safe_load(rendered.named("ConfigMap", name)["data"]["jmx-exporter.yaml"])
        for rule in config["rules"]:
            patterns.append(re.compile(re.sub(r"\\\$\d+", "[a-z0-9_]+", re.escape(rule["name"]))))
    (scripts,) = rendered.by_component("ConfigMap", "postgres")
    for query, spec in yaml.safe_load(scripts["data"]["queries.yaml"]).items():
        for metric in spec["metrics"]:
            for column, usage in metric.items():
                if usage["usage"] != "LABEL":
                    patterns.append(re.compile(re.escape(f"{query}_{column}")))
    return patterns


def test_every_exporter_metric_the_chart_configures_should_be_one_its_rules_make() -> None:
    """Kafka's, Connect's and Debezium's names come from the chart's JMX exporter rules, the
    replication slots' from its Postgres exporter query: a name no rule makes is a typo."""
    patterns = exporter_patterns()
    configured = {
        name: sorted(titles)
        for name, titles in dashboard.queried_metrics(dashboard.load()).items()
        if CONFIGURED.match(name)
    }
    assert {"pg_replication_slot_retained_bytes", "debezium_streaming_connected"} <= set(configured)
    unmade = {
        name: titles
        for name, titles in configured.items()
        if not any(p.fullmatch(name) for p in patterns)
    }
    assert not unmade, unmade


def test_change_data_capture_should_have_its_own_row() -> None:
    board = dashboard.load()
    rows = [p for p in board["panels"] if p["type"] == "row"]
    assert rows[-1]["title"] == "Change data capture"
    below = [p for p in board["panels"] if p["gridPos"]["y"] > rows[-1]["gridPos"]["y"]]
    queried = {
        name
        for panel in below
        for _, expr in dashboard.expressions({"panels": [panel]})
        for name in dashboard.selected_metrics(expr)
    }
    assert queried == {
        "pg_replication_slot_retained_bytes",
        "debezium_streaming_milliseconds_behind_source",
        "debezium_streaming_connected",
        "kafka_connect_source_task_records_write_total",
        "kafka_connect_worker_connector_tasks",
    }
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in below}
    assert units["Replication slots: WAL retained"] == "bytes"
    assert units["Debezium: lag behind the source, and connected"] == "s"  # ms / 1000


def test_panels_should_have_unique_ids_and_not_overlap() -> None:
    laid = list(dashboard.panels(dashboard.load()))
    ids = [p["id"] for p in laid]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in laid:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]


def test_every_selector_should_be_narrowed_to_the_namespace_variable() -> None:
    board = dashboard.load()
    for panel in dashboard.panels(board):
        for target in panel.get("targets", []):
            selectors: list[promql_parser.VectorSelector] = []

            def visit(node: object, found: list[promql_parser.VectorSelector] = selectors) -> bool:
                if isinstance(node, promql_parser.VectorSelector):
                    found.append(node)
                return True

            raw = target["expr"].replace("$__rate_interval", "1m")
            promql_parser.walk(promql_parser.parse(raw), visit)
            for selector in selectors:
                matchers = {(m.name, str(m.op), m.value) for m in selector.matchers.matchers}
                assert ("namespace", "MatchOp.Re", "$namespace") in matchers, (
                    panel["title"],
                    selector.name,
                )
