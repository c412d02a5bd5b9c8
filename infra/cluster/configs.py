"""Config files of the node's components, rendered from the settings (pure functions) and
written by ``write_configs``. Flags live with each component (infra/cluster/components.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.settings import Settings
from infra.cluster import build, paths
from infra.cluster.kubeconfigs import component_kubeconfig
from infra.cluster.network import BRIDGE_INTERFACE

CNI_NETWORK = "lk-pods"
CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins


def containerd_toml(settings: Settings) -> str:
    """containerd 1.6 (CRI v1): runc (crun fails on hybrid cgroups), cgroupfs, overlayfs; its
    root, state, socket, runc state and pod netns mounts all under the cluster's folders."""
    run = paths.run_dir(settings)
    root = paths.containerd_root(settings)
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""\
version = 2
root = "{root}"
state = "{paths.containerd_state(settings)}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = "{paths.containerd_socket(settings)}"

[ttrpc]
  address = "{run / "containerd.sock.ttrpc"}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"

[{cri}]
  sandbox_image = "{build.PAUSE_IMAGE}"
  # root here lacks CAP_SYS_RESOURCE: never lower a process's oom_score_adj
  restrict_oom_score_adj = true
  # pod network namespaces under containerd's state, not the host's /run/netns
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  max_container_log_line_size = 16384

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{run / "runc"}"

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{paths.cni_conf_dir(settings)}"
  max_conf_num = 1
"""


def cni_conflist(settings: Settings) -> dict[str, Any]:
    """Pods on a bridge inside the netns; host-local IPAM keeps its leases in our folder. No
    masquerade: the namespace has no way out anyway."""
    return {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE_INTERFACE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": settings.cluster_pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.cni_ipam_dir(settings)),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(settings: Settings) -> dict[str, Any]:
    pki = paths.pki_dir(settings)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "address": "0.0.0.0",  # noqa: S104 - inside the cluster's own network namespace
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "tlsCertFile": str(pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket(settings)}",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,  # this VM mounts cgroup v1 (hybrid)
        "failSwapOn": False,
        # True refuses to start unless vm/overcommit_memory, kernel/panic, kernel/panic_on_oops
        # already hold the kubelet's values; false lets it set them: `lk cluster down`
        # restores them (infra/cluster/host.py).
        "protectKernelDefaults": False,
        "clusterDNS": [settings.cluster_node_ip],
        "clusterDomain": settings.cluster_domain,
        "resolvConf": str(paths.config_dir(settings) / "resolv.conf"),
        "maxPods": 110,
        "podLogsDir": str(paths.pod_logs_dir(settings)),
        "volumePluginDir": str(paths.kubelet_dir(settings) / "volume-plugins"),
        # A development VM: evict only when really out of memory or disk.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        # Imported images cannot be pulled again (no registry): never garbage-collect them.
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 98,
        "imageMinimumGCAge": "87600h",
        "serializeImagePulls": False,
        "registerNode": True,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "runtimeRequestTimeout": "10m",
        "staticPodPath": "",
        "enforceNodeAllocatable": ["pods"],
    }


def kube_proxy_config(settings: Settings) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {
            "kubeconfig": str(component_kubeconfig(settings, "kube-proxy")),
        },
        "mode": "iptables",
        "clusterCIDR": settings.cluster_pod_cidr,
        "hostnameOverride": settings.cluster_node_name,
        "bindAddress": settings.cluster_node_ip,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "nodePortAddresses": ["primary"],
        # Zero leaves the kernel's conntrack settings alone (nf_conntrack_max is host-wide).
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def corefile(settings: Settings) -> str:
    """CoreDNS on the node IP: the cluster zone only, nothing forwarded outside."""
    domain = settings.cluster_domain
    kubeconfig = component_kubeconfig(settings, "coredns")
    return f"""\
.:53 {{
    bind {settings.cluster_node_ip}
    errors
    health 127.0.0.1:8080
    ready 127.0.0.1:8181
    kubernetes {domain} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
}}
"""


def resolv_conf(settings: Settings) -> str:
    """The kubelet's resolvConf: pods with dnsPolicy Default resolve through the cluster DNS
    too (there is no other resolver inside the namespace)."""
    return f"nameserver {settings.cluster_node_ip}\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def config_file(settings: Settings, name: str) -> Path:
    return paths.config_dir(settings) / name


def write_configs(settings: Settings) -> None:
    _write(config_file(settings, "containerd.toml"), containerd_toml(settings))
    _write(
        paths.cni_conf_dir(settings) / f"10-{CNI_NETWORK}.conflist",
        json.dumps(cni_conflist(settings), indent=2) + "\n",
    )
    _write(config_file(settings, "kubelet.yaml"), json.dumps(kubelet_config(settings), indent=2))
    _write(
        config_file(settings, "kube-proxy.yaml"),
        json.dumps(kube_proxy_config(settings), indent=2),
    )
    _write(config_file(settings, "Corefile"), corefile(settings))
    _write(config_file(settings, "resolv.conf"), resolv_conf(settings))
