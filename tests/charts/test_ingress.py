"""Ingresses to the release's three UIs (`ingress.serving`, `ingress.airflow`,
`ingress.sparkHistory`): none by default; each names its component's Service and port, its
hosts and their TLS."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from tests.charts.chart_utils import KUBE_VERSIONS, render, validate

UIS = {  # values key -> (component, its Service's port name)
    "serving": ("serving", "http"),
    "airflow": ("airflow-api-server", "api"),
    "sparkHistory": ("spark-history", "http"),
}
HOSTS = [
    {"name": "lk.example.com", "tls": {"enabled": True, "secretName": "lk-tls"}},
    {"name": "lk.internal"},
]


def _values(ui: str, **ingress: Any) -> dict[str, Any]:
    return {"architecture": "both", "ingress": {ui: {"enabled": True, **ingress}}}


def test_no_ingress_by_default() -> None:
    assert render({"architecture": "both"}).of_kind("Ingress") == []


@pytest.mark.parametrize("ui", UIS)
def test_an_ingress_routes_each_host_to_the_ui_s_service(ui: str) -> None:
    component, port = UIS[ui]
    values = _values(ui, ingressClassName="nginx", hosts=HOSTS, annotations={"a.example/b": "c"})
    rendered = render(values)
    (ingress,) = rendered.of_kind("Ingress")
    (service,) = rendered.by_component("Service", component)
    assert port in {p["name"] for p in service["spec"]["ports"]}
    spec = ingress["spec"]
    assert spec["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == {"a.example/b": "c"}
    assert [r["host"] for r in spec["rules"]] == ["lk.example.com", "lk.internal"]
    for rule in spec["rules"]:
        (path,) = rule["http"]["paths"]
        assert (path["path"], path["pathType"]) == ("/", "Prefix")
        backend = path["backend"]["service"]
        assert backend == {"name": service["metadata"]["name"], "port": {"name": port}}
    assert spec["tls"] == [{"hosts": ["lk.example.com"], "secretName": "lk-tls"}]
    for version in KUBE_VERSIONS:
        validate(ingress, version)


def test_without_hosts_the_ingress_answers_every_host() -> None:
    (ingress,) = render(_values("serving")).of_kind("Ingress")
    (rule,) = ingress["spec"]["rules"]
    assert "host" not in rule
    assert "tls" not in ingress["spec"]
    assert "ingressClassName" not in ingress["spec"]


def test_no_ingress_to_a_component_that_is_off() -> None:
    values = _values("sparkHistory")
    values["sparkHistory"] = {"enabled": False}
    assert render(values).of_kind("Ingress") == []


@pytest.mark.parametrize(
    "ingress",
    [
        {"pathType": "Regex"},
        {"path": "ui"},
        {"hosts": [{"name": "lk.example.com", "tls": {"enabled": True}}]},
        {"hosts": ["lk.example.com"]},
    ],
)
def test_the_schema_should_refuse(ingress: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        render(_values("serving", **ingress))
