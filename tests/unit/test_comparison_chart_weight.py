"""The chart's weight per mode (comparison.chart_weight): Kubernetes quantities parsed as
Kubernetes does, a pod's requests as the scheduler reserves them, and the real chart rendered
in each mode, whose differences are exactly the components one architecture adds."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
import yaml

from comparison.chart_weight import (
    CHART_DIR,
    MODES,
    cpu_millicores,
    measure,
    memory_bytes,
    parse_quantity,
    pod_requests,
    weigh,
)
from tests.charts.chart_utils import render

MI, GI = 2**20, 2**30


@pytest.mark.parametrize(
    ("quantity", "value"),
    [
        ("100m", Decimal("0.1")),
        ("1", Decimal(1)),
        (1, Decimal(1)),
        (0.5, Decimal("0.5")),
        ("2.5", Decimal("2.5")),
        (".5", Decimal("0.5")),
        ("512Mi", Decimal(512 * MI)),
        ("1Gi", Decimal(GI)),
        ("1.5Gi", Decimal(3 * GI // 2)),
        ("1G", Decimal(10**9)),
        ("12k", Decimal(12_000)),
        ("64Ki", Decimal(65_536)),
        ("250u", Decimal("0.00025")),
        ("1e3", Decimal(1000)),
        ("129e6", Decimal(129_000_000)),
        ("1E", Decimal(10**18)),  # exa, not an exponent without digits
    ],
)
def test_quantities_parse_as_kubernetes_reads_them(
    quantity: str | int | float, value: Decimal
) -> None:
    assert parse_quantity(quantity) == value


@pytest.mark.parametrize("bad", ["", "Mi", "1Mb", "1 Gi", "1.2.3", "abc", "1gi", "0x10"])
def test_what_is_not_a_quantity_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(bad)


def test_cpu_and_memory_in_their_units() -> None:
    assert [cpu_millicores(q) for q in ("100m", "1", 2, "0.25", "1u")] == [100, 1000, 2000, 250, 1]
    assert [memory_bytes(q) for q in ("512Mi", "1Gi", "1G", "1500", "1.5Ki")] == [
        512 * MI,
        GI,
        10**9,
        1500,
        1536,
    ]


def _container(name: str, cpu: str, memory: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


def test_a_pod_reserves_its_containers_or_its_largest_init_container_per_resource() -> None:
    pod = {
        "containers": [_container("a", "100m", "128Mi"), _container("b", "200m", "256Mi")],
        "initContainers": [_container("migrate", "1", "64Mi"), _container("small", "10m", "1Mi")],
    }
    assert pod_requests(pod) == (1000, 384 * MI)  # CPU from the init container, memory summed
    sidecar = _container("proxy", "50m", "32Mi", restartPolicy="Always")
    pod["initContainers"].append(sidecar)  # a sidecar runs beside the containers: it adds
    assert pod_requests(pod) == (1000, 416 * MI)
    assert pod_requests({"containers": [{"name": "no-requests"}]}) == (0, 0)


def test_replicas_multiply_a_workload_and_test_hooks_do_not_count() -> None:
    one = weigh("both", list(render({"architecture": "both"}).objects))
    three = weigh(
        "both", list(render({"architecture": "both", "serving": {"replicas": 3}}).objects)
    )
    serving = yaml.safe_load((CHART_DIR / "values.yaml").read_text())["serving"]["resources"]
    assert three.cpu_requests_millicores - one.cpu_requests_millicores == 2 * cpu_millicores(
        serving["requests"]["cpu"]
    )
    assert three.memory_requests_bytes - one.memory_requests_bytes == 2 * memory_bytes(
        serving["requests"]["memory"]
    )
    assert "Pod" not in one.by_kind  # `helm test`'s pod exists only while the test runs


def test_each_mode_of_the_chart_weighs_its_own_components() -> None:
    weights = {w.mode: w for w in measure()}
    assert tuple(weights) == MODES
    for w in weights.values():
        assert sum(w.by_kind.values()) == w.objects > 0
        assert w.cpu_requests_millicores > 0 and w.memory_requests_bytes > 0
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())

    def asked(*components: str) -> tuple[int, int]:
        requests = [values[c]["resources"]["requests"] for c in components]
        return (
            sum(cpu_millicores(r["cpu"]) for r in requests),
            sum(memory_bytes(r["memory"]) for r in requests),
        )

    def difference(more: str, less: str) -> tuple[int, int]:
        a, b = weights[more], weights[less]
        return (
            a.cpu_requests_millicores - b.cpu_requests_millicores,
            a.memory_requests_bytes - b.memory_requests_bytes,
        )

    # `both` is `lambda` plus the Kappa stream job, and `kappa` plus Lambda's archiver and speed
    # layer: the log, the store, the API and Airflow are shared.
    assert difference("both", "lambda") == asked("kappaStream")
    assert difference("both", "kappa") == asked("archiver", "speedLayer")
    assert weights["both"].by_kind["Deployment"] == weights["lambda"].by_kind["Deployment"] + 1
