"""The smoke test (kubernetes-the-hard-way: "Smoke Test"), run by `lk cluster smoke`.

In a namespace of its own: a PVC without a storage class (must bind through the default
StorageClass), a Deployment of busybox httpd serving a file it wrote into that volume, a
Service in front of it, a client pod that fetches the page by the Service's DNS name, the
client's logs read through the kubelet, and the same page fetched from the host through
``kubectl port-forward`` (apiserver -> kubelet -> containerd). Everything is deleted after.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from core.settings import Settings
from infra.cluster import api, build, paths
from infra.stack.process import StackError, wait_until

NAMESPACE = "lk-smoke"
PAGE = "lambda-kappa smoke ok"
Progress = Callable[[str], None]


def manifests(settings: Settings) -> list[dict[str, Any]]:
    image = build.BUSYBOX_IMAGE
    labels = {"app": "lk-smoke-web"}
    serve = f"echo '{PAGE}' > /www/index.html && exec httpd -f -v -p 8080 -h /www"
    service_host = f"lk-smoke-web.{NAMESPACE}.svc.{settings.cluster_domain}"
    fetch = (
        f"printf 'GET / HTTP/1.0\\r\\nHost: {service_host}\\r\\n\\r\\n' | nc -w 5 {service_host} 80"
    )
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "lk-smoke-data", "namespace": NAMESPACE},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "16Mi"}},
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "lk-smoke-web", "namespace": NAMESPACE},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "image": image,
                                "imagePullPolicy": "Never",
                                "command": ["sh", "-c", serve],
                                "ports": [{"containerPort": 8080}],
                                "readinessProbe": {
                                    "httpGet": {"path": "/", "port": 8080},
                                    "periodSeconds": 1,
                                },
                                "volumeMounts": [{"name": "data", "mountPath": "/www"}],
                            }
                        ],
                        "volumes": [
                            {
                                "name": "data",
                                "persistentVolumeClaim": {"claimName": "lk-smoke-data"},
                            }
                        ],
                        # like the chart's pods: a non-root user must be able to write the volume
                        "securityContext": {
                            "runAsUser": 10001,
                            "runAsGroup": 10001,
                            "fsGroup": 10001,
                            "runAsNonRoot": True,
                        },
                        "terminationGracePeriodSeconds": 1,
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "lk-smoke-web", "namespace": NAMESPACE},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "lk-smoke-client", "namespace": NAMESPACE},
            "spec": {
                "restartPolicy": "OnFailure",
                "containers": [
                    {
                        "name": "client",
                        "image": image,
                        "imagePullPolicy": "Never",
                        # busybox's nc, not wget: Debian's static wget crashes (static
                        # glibc, no NSS modules).
                        "command": ["sh", "-c", fetch],
                    }
                ],
                "terminationGracePeriodSeconds": 1,
            },
        },
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _phase(settings: Settings, kind: str, name: str) -> str:
    out = api.kubectl(settings, "-n", NAMESPACE, "get", kind, name, "-o", "json")
    return str(json.loads(out).get("status", {}).get("phase", ""))


def _namespace_state(settings: Settings) -> str:
    try:
        namespace = api.get(settings, f"/api/v1/namespaces/{NAMESPACE}")
    except StackError as exc:
        return "NotFound" if "HTTP 404" in str(exc) else str(exc)
    return str(namespace.get("status", {}).get("phase", ""))


def _check(ok: bool, timeout_s: float, what: str) -> None:
    if not ok:
        raise StackError(f"smoke test: {what} (not within {timeout_s:.0f}s)")


def _port_forward_get(settings: Settings) -> str:
    port = _free_port()
    proc = subprocess.Popen(
        [
            str(paths.kubectl_binary(settings)),
            f"--kubeconfig={paths.kubeconfig(settings)}",
            "-n",
            NAMESPACE,
            "port-forward",
            "svc/lk-smoke-web",
            f"{port}:80",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        body = ""

        def fetch() -> bool:
            nonlocal body
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=3) as response:
                body = response.read().decode()
            return True

        if not wait_until(fetch, 30, 0.5):
            proc.terminate()
            out = proc.communicate(timeout=5)[0].strip().splitlines()
            raise StackError(f"smoke test: port-forward gave no answer: {(out or ['?'])[-1]}")
        return body
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def smoke_test(settings: Settings, progress: Progress = print, *, keep: bool = False) -> None:
    timeout = settings.cluster_startup_timeout_s
    started = time.monotonic()
    # a previous run's namespace may still be terminating
    wait_until(lambda: _namespace_state(settings) != "Terminating", timeout, 1.0)
    api.apply(settings, manifests(settings))
    try:
        _check(
            wait_until(lambda: _phase(settings, "pvc", "lk-smoke-data") == "Bound", timeout, 0.5),
            timeout,
            "the PVC without a storage class did not bind",
        )
        progress("smoke: PVC without a storage class bound (writable by a non-root pod)")
        api.kubectl(
            settings, "-n", NAMESPACE, "rollout", "status", "deployment/lk-smoke-web",
            f"--timeout={timeout:.0f}s", timeout_s=timeout + 10,
        )  # fmt: skip
        progress("smoke: Deployment ready (busybox httpd serving from the volume)")
        _check(
            wait_until(
                lambda: _phase(settings, "pod", "lk-smoke-client") == "Succeeded", timeout, 0.5
            ),
            timeout,
            "the client pod did not fetch the page through the Service's DNS name",
        )
        logs = api.kubectl(settings, "-n", NAMESPACE, "logs", "lk-smoke-client").strip()
        lines = logs.splitlines()
        if not lines or " 200 " not in lines[0] or lines[-1].strip() != PAGE:
            raise StackError(f"smoke test: the client pod read {logs[-80:]!r}, not {PAGE!r}")
        progress("smoke: pod -> Service by DNS name answered; its logs read through the kubelet")
        body = _port_forward_get(settings).strip()
        if body != PAGE:
            raise StackError(f"smoke test: port-forward read {body!r}, not {PAGE!r}")
        progress("smoke: host -> pod through kubectl port-forward answered")
        exec_out = api.kubectl(
            settings, "-n", NAMESPACE, "exec", "deploy/lk-smoke-web", "--", "cat", "/www/index.html"
        ).strip()
        if exec_out != PAGE:
            raise StackError(f"smoke test: kubectl exec read {exec_out!r}")
        progress("smoke: kubectl exec answered")
    finally:
        if not keep:
            api.kubectl(
                settings, "delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s",
                timeout_s=150,
            )  # fmt: skip
    progress(f"smoke test passed in {time.monotonic() - started:.1f}s")
