"""Where the local cluster keeps things: the public paths other code uses, in one place.

- ``kubeconfig(settings)``: the admin kubeconfig (``KUBECONFIG=...`` for kubectl and helm on
  the host; it points at the API relay on host loopback).
- ``containerd_socket(settings)``: containerd's socket, to import images into the node:
  ``ctr --address <socket> -n k8s.io images import <oci.tar>``.
- ``helm_binary(settings)`` and ``kubectl_binary(settings)``: the binaries built for the
  cluster's version (``infra.cluster.build`` builds them on ``lk cluster up``).

Nothing here touches the system: every function only computes a path.
"""

from __future__ import annotations

from pathlib import Path

from core.settings import Settings

# The containerd namespace the kubelet's CRI uses: images must be imported into it.
CONTAINERD_NAMESPACE = "k8s.io"


def cluster_dir(settings: Settings) -> Path:
    """The cluster's state: certificates, configs, etcd data, kubelet root, logs."""
    return settings.stack_path / "cluster"


def kubeconfig(settings: Settings) -> Path:
    """The admin kubeconfig (cluster-admin, server https://127.0.0.1:<cluster_api_port>)."""
    return cluster_dir(settings) / "kubeconfig"


def run_dir(settings: Settings) -> Path:
    """Sockets and runtime state (a tmpfs, short path): containerd's socket and state."""
    return settings.cluster_run_dir


def containerd_socket(settings: Settings) -> Path:
    """containerd's gRPC socket (for ``ctr --address`` and the kubelet)."""
    return run_dir(settings) / "containerd.sock"


def owner_file(settings: Settings) -> Path:
    """Names the state folder of the cluster that runs now (one per machine: the netns, the
    run folder and the API port are fixed)."""
    return run_dir(settings) / "owner"


def netns_path(settings: Settings) -> Path:
    """The cluster's network namespace, as ``ip netns`` mounts it."""
    return Path("/run/netns") / settings.cluster_netns


def pki_dir(settings: Settings) -> Path:
    return cluster_dir(settings) / "pki"


def config_dir(settings: Settings) -> Path:
    """Component configs and the internal kubeconfigs."""
    return cluster_dir(settings) / "config"


def log_dir(settings: Settings) -> Path:
    return cluster_dir(settings) / "logs"


def pid_dir(settings: Settings) -> Path:
    return cluster_dir(settings) / "run"


def etcd_dir(settings: Settings) -> Path:
    return cluster_dir(settings) / "etcd"


def kubelet_dir(settings: Settings) -> Path:
    """The kubelet's --root-dir (pod volumes are mounted below it)."""
    return cluster_dir(settings) / "kubelet"


def pod_logs_dir(settings: Settings) -> Path:
    return cluster_dir(settings) / "pod-logs"


def containerd_root(settings: Settings) -> Path:
    """containerd's content and snapshots: the imported images (kept by `lk cluster reset`)."""
    return cluster_dir(settings) / "containerd"


def containerd_state(settings: Settings) -> Path:
    return run_dir(settings) / "containerd"


def cni_conf_dir(settings: Settings) -> Path:
    return config_dir(settings) / "cni"


def cni_ipam_dir(settings: Settings) -> Path:
    """host-local IPAM's leases of pod IPs."""
    return cluster_dir(settings) / "cni-ipam"


def volumes_dir(settings: Settings) -> Path:
    """PersistentVolumes' folders (infra/cluster/provisioner.py)."""
    return cluster_dir(settings) / "volumes"


def build_dir(settings: Settings) -> Path:
    """Everything built for the cluster (kept by `lk cluster reset`)."""
    return settings.cache_path / "kubernetes" / settings.kubernetes_version


def kubernetes_bin_dir(settings: Settings) -> Path:
    return build_dir(settings) / "bin"


def tools_bin_dir(settings: Settings) -> Path:
    """`go install`ed tools: helm, coredns."""
    return settings.cache_path / "tools" / "bin"


def helm_binary(settings: Settings) -> Path:
    return tools_bin_dir(settings) / "helm"


def kubectl_binary(settings: Settings) -> Path:
    """kubectl of the cluster's own version."""
    return kubernetes_bin_dir(settings) / "kubectl"


def images_dir(settings: Settings) -> Path:
    """OCI image tarballs built for the cluster (pause, the smoke test's busybox)."""
    return build_dir(settings) / "images"


def kubectl(settings: Settings) -> Path:
    """Alias of ``kubectl_binary``."""
    return kubectl_binary(settings)


def helm(settings: Settings) -> Path:
    """Alias of ``helm_binary``."""
    return helm_binary(settings)
