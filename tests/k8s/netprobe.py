"""Connections tried from inside the cluster, to check what its NetworkPolicies enforce.

A probe is a busybox pod (the node's own image: no registry) with the labels under test, in
the release's namespace or another; an app pod is tried with its own Python. A connection is
made or not within `CONNECT_TIMEOUT_S`: a policy's refusal is a dropped SYN, so a time-out.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from infra.cluster.build import BUSYBOX_IMAGE
from tests.k8s.kube import Kube

CONNECT_TIMEOUT_S = 5


def service_host(kube: Kube, service: str, namespace: str | None = None) -> str:
    """A Service's DNS name, qualified when asked from another namespace."""
    return f"{service}.{kube.namespace}.svc" if namespace else service


@contextlib.contextmanager
def probe_pod(
    kube: Kube, name: str, labels: dict[str, str], namespace: str | None = None
) -> Iterator[str]:
    """A running busybox pod with `labels`; deleted after."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "probe",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }
    run = kube.run
    kubectl = [kube.kubectl_bin, "--namespace", namespace or kube.namespace]
    run([*kubectl, "delete", "pod", name, "--ignore-not-found", "--wait=true"], timeout=120)
    run([*kubectl, "create", "-f", "-"], stdin=json.dumps(pod))
    try:
        run([*kubectl, "wait", "--for=condition=Ready", f"pod/{name}", "--timeout=120s"])
        yield name
    finally:
        run([*kubectl, "delete", "pod", name, "--wait=false"], check=False)


def probe_connects(
    kube: Kube, pod: str, host: str, port: int, namespace: str | None = None
) -> bool:
    """Whether busybox's `nc` in `pod` opens a TCP connection to host:port."""
    kubectl = [kube.kubectl_bin, "--namespace", namespace or kube.namespace]
    nc = ["nc", "-w", str(CONNECT_TIMEOUT_S), host, str(port)]
    result = kube.run([*kubectl, "exec", pod, "--", *nc], check=False, stdin="", timeout=60)
    return result.returncode == 0


_PY_CONNECT = (
    "import socket,sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))\n"
    "except OSError as exc:\n"
    "    print(exc); sys.exit(1)\n"
)


def app_pod_connects(kube: Kube, component: str, host: str, port: int) -> bool:
    """Whether the first running pod of the release's `component` connects to host:port, from
    its main container's Python (every image of the release but Kafka's has one)."""
    pods = kube.items("pods", "-l", f"app.kubernetes.io/component={component}")
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    assert running, f"no running pod of {component}"
    pod = running[0]
    container = pod["spec"]["containers"][0]["name"]
    argv = ["python3", "-c", _PY_CONNECT, host, str(port), str(CONNECT_TIMEOUT_S)]
    result = kube.run(
        [kube.kubectl_bin, "--namespace", kube.namespace, "exec", pod["metadata"]["name"],
         "-c", container, "--", *argv],
        check=False,
        timeout=60,
    )  # fmt: skip
    return result.returncode == 0
