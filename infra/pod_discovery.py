"""Annotated pods as Prometheus file-based service discovery targets.

Debian's Prometheus (2.42+ds, infra/docker/prometheus.Dockerfile) is built without its
Kubernetes service discovery, so the project's Prometheus runs this beside it: every few
seconds it lists a namespace's pods through the Kubernetes API and writes the ones that ask to
be scraped as a `file_sd_configs` file, which Prometheus watches. It follows the annotation
convention of Prometheus's own example `kubernetes-pods` job, nothing of the chart's:

- keep a pod with `prometheus.io/scrape: "true"` that has an IP and has not ended;
- scrape `<pod IP>:<prometheus.io/port>` at `prometheus.io/path` (default `/metrics`);
- label it with its namespace, pod name and `app.kubernetes.io/component`.

    python -m infra.pod_discovery --namespace lambda-kappa --out /targets/pods.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ANNOTATION = "prometheus.io/"
ENDED = ("Succeeded", "Failed")


def targets(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The file_sd target groups of `pods` (Kubernetes Pod objects as dicts), one per pod."""
    groups = []
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        notes = meta.get("annotations") or {}
        port, ip = notes.get(ANNOTATION + "port"), status.get("podIP")
        if notes.get(ANNOTATION + "scrape") != "true" or not port or not ip:
            continue
        if status.get("phase") in ENDED:
            continue
        labels = {
            "__metrics_path__": notes.get(ANNOTATION + "path", "/metrics"),
            "namespace": meta["namespace"],
            "pod": meta["name"],
        }
        component = (meta.get("labels") or {}).get("app.kubernetes.io/component")
        if component:
            labels["component"] = component
        groups.append({"targets": [f"{ip}:{port}"], "labels": labels})
    return sorted(groups, key=lambda g: g["labels"]["pod"])


def write(path: Path, groups: list[dict[str, Any]]) -> None:
    """Replace the file at once (Prometheus may read it at any moment)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(groups, indent=1))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.pod_discovery", description=__doc__)
    parser.add_argument("--namespace", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args(argv)
    from kubernetes import client, config

    config.load_incluster_config()
    api = client.CoreV1Api().api_client
    core = client.CoreV1Api()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            pods = [
                api.sanitize_for_serialization(pod)
                for namespace in args.namespace
                for pod in core.list_namespaced_pod(namespace).items
            ]
            write(args.out, targets(pods))
        except client.ApiException as exc:  # keep the last file; say why once per round
            print(f"pod discovery: {exc.status} {exc.reason}", file=sys.stderr, flush=True)
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
