"""infra/cluster: configs, flags and kubeconfigs rendered from the settings (no processes)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from core.settings import Settings
from infra.cluster import configs, kubeconfigs, paths
from infra.cluster.cluster import bootstrap_objects
from infra.cluster.components import (
    API_RELAY,
    KUBE_APISERVER,
    KUBELET,
    VOLUME_PROVISIONER,
    Component,
    components,
)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # Explicit values: the environment (LK_CACHE_DIR in CI) must not decide these tests.
    return Settings(home=tmp_path, stack_dir=None, cache_dir=tmp_path / "cache")


def test_public_paths_are_stable(settings: Settings, tmp_path: Path) -> None:
    assert paths.kubeconfig(settings) == tmp_path.resolve() / ".stack" / "cluster" / "kubeconfig"
    assert paths.containerd_socket(settings) == Path("/run/lk-cluster/containerd.sock")
    assert paths.helm_binary(settings) == tmp_path / "cache" / "tools" / "bin" / "helm"
    assert paths.kubectl_binary(settings).parent == paths.kubernetes_bin_dir(settings)
    # unix socket paths are limited to 108 bytes
    assert len(str(paths.containerd_socket(settings))) < 100


def test_containerd_config_is_toml_with_our_folders(settings: Settings) -> None:
    config = tomllib.loads(configs.containerd_toml(settings))
    assert config["version"] == 2
    assert config["grpc"]["address"] == str(paths.containerd_socket(settings))
    assert config["root"] == str(paths.containerd_root(settings))
    assert config["state"].startswith("/run/lk-cluster/")
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["netns_mounts_under_state_dir"] is True
    assert cri["containerd"]["snapshotter"] == "overlayfs"
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["SystemdCgroup"] is False
    assert runc["options"]["Root"].startswith("/run/lk-cluster/")  # not /run/containerd/runc
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    assert cri["cni"]["conf_dir"] == str(paths.cni_conf_dir(settings))
    opt = config["plugins"]["io.containerd.internal.v1.opt"]["path"]
    assert opt.startswith(str(paths.containerd_root(settings)))  # not /opt/containerd


def test_cni_bridge_with_host_local_ipam_in_our_folder(settings: Settings) -> None:
    conflist = configs.cni_conflist(settings)
    bridge = conflist["plugins"][0]
    assert bridge["type"] == "bridge"
    assert bridge["isGateway"] and bridge["hairpinMode"] and not bridge["ipMasq"]
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.0.0/24"}]]
    assert bridge["ipam"]["dataDir"] == str(paths.cni_ipam_dir(settings))


def test_kubelet_config_for_this_kind_of_vm(settings: Settings) -> None:
    config = configs.kubelet_config(settings)
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["failSwapOn"] is False
    assert config["protectKernelDefaults"] is False
    assert config["clusterDNS"] == [settings.cluster_node_ip]
    assert config["clusterDomain"] == "cluster.local"
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authorization"]["mode"] == "Webhook"
    assert config["containerRuntimeEndpoint"] == "unix:///run/lk-cluster/containerd.sock"
    # nothing written to the host's /var/log/pods or /usr/libexec
    assert config["podLogsDir"].startswith(str(paths.cluster_dir(settings)))
    assert config["volumePluginDir"].startswith(str(paths.cluster_dir(settings)))
    assert 0 < config["imageGCLowThresholdPercent"] < config["imageGCHighThresholdPercent"] < 100
    assert Path(config["resolvConf"]).name == "resolv.conf"


def test_kube_proxy_leaves_host_wide_conntrack_alone(settings: Settings) -> None:
    config = configs.kube_proxy_config(settings)
    assert config["mode"] == "iptables"
    assert config["conntrack"]["maxPerCore"] == 0
    assert config["conntrack"]["min"] == 0


def test_corefile_serves_the_cluster_zone_without_forwarding(settings: Settings) -> None:
    corefile = configs.corefile(settings)
    assert f"bind {settings.cluster_node_ip}" in corefile
    assert "kubernetes cluster.local" in corefile
    assert "forward" not in corefile
    assert str(kubeconfigs.component_kubeconfig(settings, "coredns")) in corefile


def test_every_component_but_the_host_helpers_runs_inside_the_netns(settings: Settings) -> None:
    for component in components(settings):
        argv = component.argv()
        if component.spec is API_RELAY:
            assert argv[1:3] == ["-m", "infra.cluster.relay"]
            assert "--listen=127.0.0.1:16443" in argv
        elif component.spec is VOLUME_PROVISIONER:
            assert argv[1:3] == ["-m", "infra.cluster.provisioner"]
        else:
            # nsenter (same mount namespace), never `ip netns exec` (a new one)
            assert argv[:3] == ["nsenter", "--net=/run/netns/lk-cluster", "--"]


def test_apiserver_flags(settings: Settings) -> None:
    flags = Component(KUBE_APISERVER, settings).flags()
    assert "--advertise-address=10.200.0.1" in flags
    assert "--bind-address=0.0.0.0" in flags
    assert "--service-cluster-ip-range=10.96.0.0/16" in flags
    assert "--authorization-mode=Node,RBAC" in flags
    assert any(f.startswith("--kubelet-client-certificate=") for f in flags)
    assert len({f.split("=")[0] for f in flags}) == len(flags)  # each flag once


def test_kubelet_flags(settings: Settings) -> None:
    flags = Component(KUBELET, settings).flags()
    assert f"--root-dir={paths.kubelet_dir(settings)}" in flags  # not /var/lib/kubelet
    assert "--node-ip=10.200.0.1" in flags
    assert "--hostname-override=lk-node" in flags


def test_admin_kubeconfig_points_at_the_relay_components_at_the_node(settings: Settings) -> None:
    assert kubeconfigs.host_server(settings) == "https://127.0.0.1:16443"
    assert kubeconfigs.internal_server(settings) == "https://10.200.0.1:6443"
    config = kubeconfigs.render_kubeconfig("https://x:1", "Q0E=", "Y2VydA==", "a2V5", "admin")
    assert config["current-context"] == "lambda-kappa"
    assert config["clusters"][0]["cluster"]["server"] == "https://x:1"
    assert config["users"][0]["user"]["client-key-data"] == "a2V5"
    json.dumps(config)  # written as JSON, which YAML readers accept


def test_bootstrap_objects(settings: Settings) -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in bootstrap_objects(settings)}
    storage_class = objects[("StorageClass", "standard")]
    annotations = storage_class["metadata"]["annotations"]
    assert annotations["storageclass.kubernetes.io/is-default-class"] == "true"
    assert storage_class["provisioner"] == "lk.local/hostpath"
    kubelet_api = objects[("ClusterRoleBinding", "lk:kube-apiserver-kubelet-client")]
    assert kubelet_api["roleRef"]["name"] == "system:kubelet-api-admin"
    assert kubelet_api["subjects"][0]["name"] == "kube-apiserver-kubelet-client"
