"""A Prometheus on the project's cluster that scrapes the release as a user's own would.

The chart runs no Prometheus: it marks what to scrape (`prometheus.io/*` pod annotations, or
ServiceMonitor/PodMonitor objects for the Prometheus Operator) and ships a Grafana dashboard.
To prove those work, `make cluster-prometheus` and the real-cluster tests (tests/k8s) run Debian's
Prometheus (infra/docker/prometheus.Dockerfile) in a namespace of its own, scraping the pods of
the release that are annotated `prometheus.io/scrape: "true"`: the annotation convention of
Prometheus's own example configuration, nothing of the chart's. Debian builds Prometheus
without its Kubernetes service discovery, so `infra.pod_discovery` runs beside it (the app
image) and lists those pods through the API into a file Prometheus watches.

Run it as `python -m infra.prometheus --tag TAG` (the images' tag).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any, Final

import yaml

from core.settings import get_settings
from infra.cluster import api, install, paths
from infra.images import image_name

NAMESPACE: Final = "lk-monitoring"
NAME: Final = "prometheus"
PORT: Final = 9090
SCRAPE_INTERVAL: Final = "10s"
UID: Final = 990  # the image's `prometheus` user
APP_UID: Final = 10001  # the app image's `lk` user

TARGETS_DIR: Final = "/prometheus-targets"


def scrape_config() -> dict[str, Any]:
    """prometheus.yml: the annotated pods that `infra.pod_discovery` writes beside it (Debian's
    build has no Kubernetes service discovery of its own), as one job."""
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "scrape_configs": [
            {
                "job_name": "kubernetes-pods",
                "file_sd_configs": [{"files": [f"{TARGETS_DIR}/*.json"]}],
            }
        ],
    }


def manifests(image: str, app_image: str, namespaces: list[str]) -> list[dict[str, Any]]:
    """The objects: a namespace, read access to pods, the config, the server (with the pod
    discovery beside it, from the app image) and its Service."""
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "lk-monitoring"}
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": labels}
    security = {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "runAsGroup": UID,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    container = {
        "name": NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["prometheus"],
        "args": [
            "--config.file=/etc/prometheus/prometheus.yml",
            "--storage.tsdb.path=/prometheus",
            "--storage.tsdb.retention.time=1d",
            f"--web.listen-address=:{PORT}",
        ],
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/-/ready", "port": "http"}, "periodSeconds": 5},
        "resources": {
            "requests": {"cpu": "20m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        "securityContext": security,
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/prometheus"},
            {"name": "data", "mountPath": "/prometheus"},
            {"name": "targets", "mountPath": TARGETS_DIR, "readOnly": True},
        ],
    }
    discovery = {
        "name": "discovery",
        "image": app_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "infra.pod_discovery", "--out", f"{TARGETS_DIR}/pods.json",
                    *(f"--namespace={n}" for n in namespaces)],
        "resources": {
            "requests": {"cpu": "5m", "memory": "64Mi"},
            "limits": {"cpu": "200m", "memory": "192Mi"},
        },
        "securityContext": {**security, "runAsUser": APP_UID, "runAsGroup": APP_UID},
        "volumeMounts": [{"name": "targets", "mountPath": TARGETS_DIR}],
    }  # fmt: skip
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        *api.cluster_role(
            f"{NAMESPACE}-{NAME}",
            {"": ["pods"]},
            {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE},
            verbs=("get", "list", "watch"),
            labels=labels,
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta,
            "data": {"prometheus.yml": yaml.safe_dump(scrape_config())},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": NAME,
                        "securityContext": {
                            "fsGroup": UID,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [container, discovery],
                        "volumes": [
                            {"name": "config", "configMap": {"name": NAME}},
                            {"name": "data", "emptyDir": {}},
                            {"name": "targets", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "selector": labels,
                "ports": [{"name": "http", "port": PORT, "targetPort": "http"}],
            },
        },
    ]


def apply(kubectl: list[str], env: dict[str, str], tag: str, namespaces: list[str]) -> None:
    """`kubectl apply` the objects (the project's images at `tag`) and wait for the server."""
    objects = manifests(image_name(NAME, tag), image_name("app", tag), namespaces)
    docs = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    for args in (
        ["apply", "-f", "-"],
        ["-n", NAMESPACE, "rollout", "status", f"deployment/{NAME}", "--timeout=300s"],
    ):
        subprocess.run([*kubectl, *args], input=docs, text=True, env=env, check=True,
                       capture_output=True, timeout=360)  # fmt: skip


def delete(kubectl: list[str], env: dict[str, str]) -> None:
    """Remove what `apply` made (the namespace and the cluster-wide role)."""
    for args in (
        ["delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true"],
        ["delete", "clusterrole,clusterrolebinding", f"{NAMESPACE}-{NAME}", "--ignore-not-found"],
    ):
        subprocess.run([*kubectl, *args], env=env, check=False, capture_output=True, timeout=360)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.prometheus")
    parser.add_argument("--tag", required=True, help="the images' tag (make print-image-tag)")
    parser.add_argument("--delete", action="store_true", help="remove it instead")
    args = parser.parse_args(argv)
    settings = get_settings()
    kubectl = [str(paths.kubectl(settings))]
    env = install.helm_env(settings)
    try:
        if args.delete:
            delete(kubectl, env)
        else:
            apply(kubectl, env, args.tag, [install.NAMESPACE])
            print(
                f"prometheus: scraping namespace {install.NAMESPACE}; open it with\n"
                f"  kubectl -n {NAMESPACE} port-forward svc/{NAME} {PORT}:{PORT}"
            )
    except subprocess.CalledProcessError as exc:
        print(f"lk: error: kubectl {' '.join(exc.cmd[1:3])}: {exc.stderr.strip()}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
