"""metrics.prometheusRule: the Prometheus Operator's alerting rules on change data capture (a
PrometheusRule, monitoring.coreos.com/v1), only when asked: a replication slot holding back
too much WAL (postgres.enabled), a Connect task failed (connect.enabled). Runbooks:
docs/METRICS.md, "Alerts"."""

from __future__ import annotations

import re
from typing import Any

import helm_python as helm
import promql_parser
import pytest
import yaml

from tests import dashboard
from tests.charts.chart_utils import (
    CHART_DIR,
    KUBE_VERSIONS,
    NAMESPACE,
    RELEASE,
    VALUE_SETS,
    Manifest,
    Rendered,
    load_values,
    render,
    render_release,
    render_set,
)
from tests.charts.test_grafana_dashboard import exporter_patterns

ENABLED: dict[str, Any] = {"metrics": {"prometheusRule": {"enabled": True}}}
SLOT_ALERT = "LambdaKappaReplicationSlotWalHigh"
TASK_ALERT = "LambdaKappaConnectTaskFailed"
TEMPLATE = "lambda-kappa/templates/metrics/metrics-prometheusrule.yaml"
# The fields of monitoring.coreos.com/v1 PrometheusRule and of a Prometheus alerting rule the
# chart renders (no CRD schema is vendored here).
RULE_FIELDS = {"alert", "expr", "for", "labels", "annotations"}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def _rule(rendered: Rendered) -> Manifest:
    (rule,) = rendered.of_kind("PrometheusRule")
    return rule


def _alerts(rendered: Rendered) -> dict[str, Manifest]:
    (group,) = _rule(rendered)["spec"]["groups"]
    assert group["name"] == "lambda-kappa.cdc"
    return {r["alert"]: r for r in group["rules"]}


def _selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def _matchers(selector: promql_parser.VectorSelector) -> dict[str, tuple[str, str]]:
    return {m.name: (str(m.op), m.value) for m in selector.matchers.matchers}


def _threshold(expr: str) -> tuple[str, float]:
    """(operator, number) of an alert's `<aggregation> <op> <number>`."""
    node = promql_parser.parse(expr)
    assert isinstance(node, promql_parser.BinaryExpr), expr
    assert isinstance(node.rhs, promql_parser.NumberLiteral), expr
    return str(node.op), float(node.rhs.val)


def _grouping(expr: str) -> tuple[str, list[str]]:
    """(aggregation, its `by` labels) of an alert's `<aggregation> by (...) (...) <op> <n>`."""
    node = promql_parser.parse(expr)
    assert isinstance(node, promql_parser.BinaryExpr), expr
    aggregation = node.lhs
    assert isinstance(aggregation, promql_parser.AggregateExpr), expr
    assert aggregation.modifier is not None, expr
    return str(aggregation.op), list(aggregation.modifier.labels)


def _bytes(size: str) -> int:
    """A Postgres memory setting such as max_slot_wal_keep_size's `1GB` (units of 1024)."""
    number, unit = re.fullmatch(r"([0-9]+)(kB|MB|GB|TB)?", size).groups()  # type: ignore[union-attr]
    return int(number) * 1024 ** {None: 0, "kB": 1, "MB": 2, "GB": 3, "TB": 4}[unit]


def test_should_not_be_rendered_by_default() -> None:
    for value_set in VALUE_SETS:
        assert render_set(value_set).of_kind("PrometheusRule") == [], value_set
    defaults = render().values["metrics"]["prometheusRule"]
    assert defaults == {"enabled": False, "labels": {}, "slotRetainedWalBytes": 536870912}


def test_the_default_threshold_should_be_half_the_slots_wal_limit() -> None:
    values = render().values
    limit = _bytes(values["postgres"]["maxSlotWalKeepSize"])
    assert values["metrics"]["prometheusRule"]["slotRetainedWalBytes"] * 2 == limit


def test_enabled_should_render_one_rule_with_both_alerts() -> None:
    rendered = render(ENABLED)
    rule = _rule(rendered)
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["name"] == f"{RELEASE}-metrics"
    assert rule["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"
    assert set(rule["spec"]) == {"groups"}
    alerts = _alerts(rendered)
    assert set(alerts) == {SLOT_ALERT, TASK_ALERT}
    for name, alert in alerts.items():
        assert set(alert) == RULE_FIELDS, name
        assert alert["for"] == "5m" and DURATION.match(alert["for"]), name
        assert alert["labels"] == {"severity": "warning"}, name
        assert set(alert["annotations"]) == {"summary", "description"}, name
        assert "docs/METRICS.md" in alert["annotations"]["description"], name


def test_slot_alert_should_compare_each_slots_wal_with_the_value() -> None:
    expr = _alerts(render(ENABLED))[SLOT_ALERT]["expr"]
    assert _threshold(expr) == (">", 536870912)
    (selector,) = _selectors(expr)
    assert selector.name == "pg_replication_slot_retained_bytes"
    operation, labels = _grouping(expr)
    assert operation == "max" and "slot_name" in labels

    bigger = load_values(**ENABLED)
    bigger["metrics"]["prometheusRule"]["slotRetainedWalBytes"] = 805306368
    alert = _alerts(render(bigger))[SLOT_ALERT]
    assert _threshold(alert["expr"]) == (">", 805306368)
    assert "805306368" in alert["annotations"]["description"]


def test_task_alert_should_fire_on_any_failed_task() -> None:
    expr = _alerts(render(ENABLED))[TASK_ALERT]["expr"]
    assert _threshold(expr) == (">", 0)
    (selector,) = _selectors(expr)
    assert selector.name == "kafka_connect_worker_connector_tasks"
    assert _matchers(selector)["state"] == ("MatchOp.Equal", "failed")


def test_every_alert_should_select_the_releases_namespace_only() -> None:
    for release_namespace in (NAMESPACE, "cdc-team"):
        rendered = render_release(ENABLED, namespace=release_namespace)
        for name, alert in _alerts(rendered).items():
            for selector in _selectors(alert["expr"]):
                assert _matchers(selector)["namespace"] == ("MatchOp.Equal", release_namespace)
            assert "namespace" in _grouping(alert["expr"])[1], name


def test_alerts_should_use_only_series_the_chart_exports() -> None:
    patterns = exporter_patterns()
    for name, alert in _alerts(render(ENABLED)).items():
        for selector in _selectors(alert["expr"]):
            assert selector.name, (name, alert["expr"])
            assert any(p.fullmatch(selector.name) for p in patterns), (name, selector.name)
    # And the dashboard shows them: its change data capture row.
    queried = dashboard.queried_metrics(dashboard.load())
    assert {"pg_replication_slot_retained_bytes", "kafka_connect_worker_connector_tasks"} <= set(
        queried
    )


def test_annotations_should_be_prometheus_templates_of_the_alerts_labels() -> None:
    alerts = _alerts(render(ENABLED))
    for name, alert in alerts.items():
        for key, text in alert["annotations"].items():
            assert text.count("{{") == text.count("}}"), (name, key)
            for action in re.findall(r"\{\{(.*?)\}\}", text, re.S):
                assert re.fullmatch(
                    r"\s*\$(labels\.[a-z_]+|value)(\s*\|\s*humanize1024)?\s*", action
                ), (name, key, action)
    assert "$labels.slot_name" in alerts[SLOT_ALERT]["annotations"]["summary"]
    assert "$labels.connector" in alerts[TASK_ALERT]["annotations"]["summary"]


def test_labels_should_carry_the_values_for_the_rule_selector() -> None:
    values = load_values(
        metrics={
            "prometheusRule": {"enabled": True, "labels": {"release": "kps", "role": "alerts"}},
            "serviceMonitor": {"labels": {"release": "monitors", "team": "data"}},
        }
    )
    labels = _rule(render(values))["metadata"]["labels"]
    assert labels["role"] == "alerts"
    assert labels["team"] == "data"  # the monitors' labels too
    assert labels["release"] == "kps"  # the rule's own over them
    assert labels["app.kubernetes.io/instance"] == RELEASE


@pytest.mark.parametrize(
    ("values", "alerts"),
    [
        ({"connect": {"enabled": False}}, {SLOT_ALERT}),
        ({"postgres": {"enabled": False, "externalHost": "pg.example.internal"}}, {TASK_ALERT}),
        (
            {
                "connect": {"enabled": False},
                "postgres": {"enabled": False, "externalHost": "pg.example.internal"},
            },
            set(),
        ),
    ],
)
def test_each_alert_should_need_its_component(values: dict[str, Any], alerts: set[str]) -> None:
    rendered = render(load_values(**ENABLED, **values))
    if alerts:
        assert set(_alerts(rendered)) == alerts
    else:
        assert rendered.of_kind("PrometheusRule") == []  # no empty group


def test_metrics_disabled_should_remove_it() -> None:
    values = load_values(**ENABLED)
    values["metrics"]["enabled"] = False
    assert render(values).of_kind("PrometheusRule") == []


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"slotRetainedWalBytes": "512Mi"}, "slotRetainedWalBytes"),
        ({"slotRetainedWalBytes": 0}, "slotRetainedWalBytes"),
        ({"labels": {"release": 1}}, "labels"),
        ({"threshold": 1}, "threshold"),
    ],
)
def test_schema_should_reject(values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=complaint):
        render({"metrics": {"prometheusRule": values}})


def test_should_render_as_one_yaml_document_and_lint() -> None:
    values = load_values(**ENABLED)
    manifests = helm.Chart.load(CHART_DIR).render(
        values=values, name=RELEASE, namespace=NAMESPACE, is_install=True
    )
    documents = [d for d in yaml.safe_load_all(manifests[TEMPLATE]) if d]
    assert [d["kind"] for d in documents] == ["PrometheusRule"]
    report = helm.lint(
        CHART_DIR, values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSIONS[0]}.0"
    )
    assert report["errors"] == [], report
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
