"""The project's Prometheus finds the release's pods by Prometheus's annotation convention
(infra.pod_discovery: Debian's Prometheus has no Kubernetes service discovery of its own)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infra import pod_discovery, prometheus


def _pod(name: str, phase: str = "Running", ip: str | None = "10.0.0.5", **notes: str) -> Any:
    return {
        "metadata": {
            "name": name,
            "namespace": "lambda-kappa",
            "annotations": {f"prometheus.io/{k}": v for k, v in notes.items()},
            "labels": {"app.kubernetes.io/component": name},
        },
        "status": {"phase": phase, "podIP": ip},
    }


def test_an_annotated_running_pod_is_a_target_at_its_port_and_path() -> None:
    [group] = pod_discovery.targets(
        [_pod("minio", scrape="true", port="9000", path="/minio/v2/metrics/cluster")]
    )
    assert group == {
        "targets": ["10.0.0.5:9000"],
        "labels": {
            "__metrics_path__": "/minio/v2/metrics/cluster",
            "namespace": "lambda-kappa",
            "pod": "minio",
            "component": "minio",
        },
    }


def test_the_path_defaults_to_metrics() -> None:
    [group] = pod_discovery.targets([_pod("serving", scrape="true", port="8000")])
    assert group["labels"]["__metrics_path__"] == "/metrics"


def test_pods_not_asking_without_an_ip_or_ended_are_left_out() -> None:
    pods = [
        _pod("plain"),
        _pod("off", scrape="false", port="1"),
        _pod("no-port", scrape="true"),
        _pod("pending", ip=None, scrape="true", port="1"),
        _pod("done", phase="Succeeded", scrape="true", port="1"),
        _pod("crashed", phase="Failed", scrape="true", port="1"),
    ]
    assert pod_discovery.targets(pods) == []


def test_the_file_is_replaced_whole(tmp_path: Path) -> None:
    out = tmp_path / "pods.json"
    groups = pod_discovery.targets([_pod("kafka", scrape="true", port="9404")])
    pod_discovery.write(out, groups)
    assert json.loads(out.read_text()) == groups
    assert [p.name for p in tmp_path.iterdir()] == ["pods.json"]


def test_prometheus_reads_the_discovered_file_and_runs_the_discovery_beside_it() -> None:
    [job] = prometheus.scrape_config()["scrape_configs"]
    assert job["file_sd_configs"] == [{"files": [f"{prometheus.TARGETS_DIR}/*.json"]}]
    objects = prometheus.manifests("p:1", "a:1", ["lambda-kappa"])
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    server, discovery = deployment["spec"]["template"]["spec"]["containers"]
    assert server["command"] == ["prometheus"]
    assert discovery["image"] == "a:1"
    assert "--namespace=lambda-kappa" in discovery["command"]
    [role] = [o for o in objects if o["kind"] == "ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
