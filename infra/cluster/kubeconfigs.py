"""Kubeconfigs (kubernetes-the-hard-way: "Generating Kubernetes Configuration Files").

One per user of the API: the admin's (written to ``paths.kubeconfig``, pointing at the relay on
host loopback) and one per component inside the network namespace (pointing at the node IP).
Certificates are embedded, so each file stands alone. JSON is valid YAML: no YAML writer needed.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from core.settings import Settings
from infra.cluster import paths

CLUSTER_NAME = "lambda-kappa"

# kubeconfig file name -> (certificate name in pki/, user name inside the kubeconfig)
COMPONENT_KUBECONFIGS = {
    "kube-controller-manager": "kube-controller-manager",
    "kube-scheduler": "kube-scheduler",
    "kube-proxy": "kube-proxy",
    "kubelet": "kubelet-client",
    "coredns": "coredns",
}


def host_server(settings: Settings) -> str:
    """The API as the host sees it: the relay on loopback."""
    return f"https://127.0.0.1:{settings.cluster_api_port}"


def internal_server(settings: Settings) -> str:
    """The API as the processes inside the netns see it."""
    return f"https://{settings.cluster_node_ip}:6443"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def render_kubeconfig(
    server: str, ca_pem_b64: str, cert_b64: str, key_b64: str, user: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {"server": server, "certificate-authority-data": ca_pem_b64},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": cert_b64, "client-key-data": key_b64},
            }
        ],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": CLUSTER_NAME,
    }


def _write_kubeconfig(path: Path, server: str, pki: Path, cert: str, user: str) -> None:
    config = render_kubeconfig(
        server, _b64(pki / "ca.crt"), _b64(pki / f"{cert}.crt"), _b64(pki / f"{cert}.key"), user
    )
    text = json.dumps(config, indent=2) + "\n"
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o600)


def component_kubeconfig(settings: Settings, component: str) -> Path:
    return paths.config_dir(settings) / f"{component}.kubeconfig"


def generate_kubeconfigs(settings: Settings) -> None:
    pki = paths.pki_dir(settings)
    _write_kubeconfig(paths.kubeconfig(settings), host_server(settings), pki, "admin", "admin")
    for component, cert in COMPONENT_KUBECONFIGS.items():
        _write_kubeconfig(
            component_kubeconfig(settings, component),
            internal_server(settings),
            pki,
            cert,
            component,
        )
