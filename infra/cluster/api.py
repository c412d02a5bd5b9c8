"""A few reads and writes of the cluster's API as the admin, over the relay on loopback."""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any, Final

from core.settings import Settings
from infra.cluster import paths
from infra.stack.process import StackError, run_tool


def _context(settings: Settings) -> ssl.SSLContext:
    pki = paths.pki_dir(settings)
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return ctx


def request(
    settings: Settings,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    timeout_s: float = 5.0,
) -> dict[str, Any]:
    """One API call; the decoded answer (StackError with the HTTP status otherwise)."""
    conn = http.client.HTTPSConnection(
        "127.0.0.1", settings.cluster_api_port, timeout=timeout_s, context=_context(settings)
    )
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        text = response.read().decode(errors="replace")
    finally:
        conn.close()
    if response.status not in (200, 201, 202):
        raise StackError(f"{method} {path}: HTTP {response.status}")
    result: dict[str, Any] = json.loads(text)
    return result


def get(settings: Settings, path: str, timeout_s: float = 5.0) -> dict[str, Any]:
    return request(settings, "GET", path, timeout_s=timeout_s)


def node_ready(settings: Settings) -> bool:
    node = get(settings, f"/api/v1/nodes/{settings.cluster_node_name}")
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pods_not_ready(settings: Settings) -> list[str]:
    """namespace/name of each pod that is neither Ready nor finished."""
    pods = get(settings, "/api/v1/pods").get("items", [])
    out = []
    for pod in pods:
        status = pod.get("status", {})
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions", [])
        )
        if not ready:
            meta = pod.get("metadata", {})
            out.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return out


def kubectl(
    settings: Settings, *args: str, stdin: str | None = None, timeout_s: float = 120
) -> str:
    """The cluster's own kubectl as the admin; its stdout."""
    binary = paths.kubectl_binary(settings)
    if not binary.is_file():
        raise StackError(f"{binary} is missing: run `lk cluster up` (with the same LK_CACHE_DIR)")
    argv = [
        str(binary),
        f"--kubeconfig={paths.kubeconfig(settings)}",
        f"--cache-dir={paths.cluster_dir(settings) / 'kubectl-cache'}",  # not ~/.kube/cache
    ]
    return run_tool(f"kubectl {' '.join(args)}", [*argv, *args], stdin=stdin, timeout_s=timeout_s)


def apply(settings: Settings, objects: list[dict[str, Any]]) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    kubectl(settings, "apply", "-f", "-", stdin=json.dumps(document))


RBAC: Final = "rbac.authorization.k8s.io"


def cluster_role(
    name: str,
    reads: dict[str, list[str]],
    subject: dict[str, str],
    verbs: tuple[str, ...] = ("list", "watch"),
    labels: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """A ClusterRole that may `verbs` (by default list and watch) `reads` (API group ->
    resources), bound to `subject`: the read-only access the cluster's own agents (CoreDNS, the
    NetworkPolicy agent, Prometheus's pod discovery) need."""
    rules = [
        {"apiGroups": [group], "resources": resources, "verbs": list(verbs)}
        for group, resources in reads.items()
    ]
    metadata: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return [
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": metadata,
            "rules": rules,
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": metadata,
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [subject],
        },
    ]
