"""`lk cluster up | down | status | reset`: a real one-node Kubernetes without Docker.

The steps carry kubernetes-the-hard-way's names: build (what it downloads, we build from the
registries), certificates, kubeconfigs, etcd, control plane, worker (containerd, CNI, kubelet,
kube-proxy), DNS, the NetworkPolicy agent, then ``smoke_test`` (infra/cluster/smoke.py) and
``cleanup`` (``down``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.settings import Settings
from infra.cluster import (
    api,
    build,
    configs,
    host,
    images,
    kubeconfigs,
    network,
    network_policies,
    paths,
    pki,
    provisioner,
)
from infra.cluster.components import (
    API_RELAY,
    CONTAINERD,
    COREDNS,
    ETCD,
    KUBE_APISERVER,
    KUBE_CONTROLLER_MANAGER,
    KUBE_PROXY,
    KUBE_SCHEDULER,
    KUBELET,
    VOLUME_PROVISIONER,
    Component,
    Spec,
    components,
)
from infra.stack.process import StackError, pid_alive, wait_until

Progress = Callable[[str], None]
STORAGE_CLASS = "standard"


# -- 0. prerequisites -------------------------------------------------------------------------
# What the node needs from the system, and the Debian package that brings it.
SYSTEM_TOOLS = {
    "ip": "iproute2",
    "nsenter": "util-linux",
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "nft": "nftables",
    "conntrack": "conntrack",
    "go": "golang (1.24+)",
    "gcc": "gcc libc6-dev",
    "umount": "mount",
}


def preflight(settings: Settings) -> None:
    """Fail early, in one line, without root or a system tool."""
    if os.geteuid() != 0:
        raise StackError("lk cluster needs root (network namespace, mounts, cgroups)")
    missing = {pkg for tool, pkg in SYSTEM_TOOLS.items() if shutil.which(tool) is None}
    if not (configs.CNI_BIN_DIR / "bridge").is_file():
        missing.add("containernetworking-plugins")
    if missing:
        raise StackError(f"missing system packages: apt-get install {' '.join(sorted(missing))}")


# -- 1. build, certificates, kubeconfigs, configs ------------------------------------------
def prepare(settings: Settings, progress: Progress = print) -> None:
    """What `up` needs, built (or fetched) and cached; nothing starts (`lk cluster build`)."""
    preflight(settings)
    build.build_all(settings, progress)


def provision(settings: Settings, progress: Progress) -> None:
    build.build_all(settings, progress)
    for folder in (paths.cluster_dir(settings), paths.log_dir(settings), paths.pid_dir(settings)):
        folder.mkdir(parents=True, exist_ok=True)
    pki.generate_certificates(settings)
    kubeconfigs.generate_kubeconfigs(settings)
    configs.write_configs(settings)


# -- 2. bootstrap objects ---------------------------------------------------------------------
def bootstrap_objects(settings: Settings) -> list[dict[str, Any]]:
    """RBAC the components need beyond Kubernetes' defaults, and the default StorageClass."""
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {
            # the apiserver's client to kubelets: logs, exec, port-forward
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "lk:kube-apiserver-kubelet-client"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:kubelet-api-admin",
            },
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "User",
                    "name": pki.APISERVER_KUBELET_CLIENT,
                }
            ],
        },
        *api.cluster_role(
            "lk:coredns",
            {
                "": ["endpoints", "services", "pods", "namespaces"],
                "discovery.k8s.io": ["endpointslices"],
            },
            {"apiGroup": api.RBAC, "kind": "User", "name": pki.COREDNS_USER},
        ),
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": provisioner.PROVISIONER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
        },
    ]


def apply_bootstrap(settings: Settings) -> None:
    with contextlib.suppress(StackError):  # a StorageClass's provisioner cannot change
        current = api.get(settings, f"/apis/storage.k8s.io/v1/storageclasses/{STORAGE_CLASS}")
        if current.get("provisioner") != provisioner.PROVISIONER:
            api.request(
                settings, "DELETE", f"/apis/storage.k8s.io/v1/storageclasses/{STORAGE_CLASS}"
            )
    api.apply(settings, bootstrap_objects(settings))


# -- 3. the node's images ---------------------------------------------------------------------
def import_node_images(settings: Settings) -> list[str]:
    """The pause image (every pod's sandbox; never pulled: no registry), the smoke test's
    busybox and the NetworkPolicy agent's, imported once into containerd and pinned."""
    present = images.image_names(settings)
    imported = []
    wanted = {
        build.PAUSE_IMAGE: build.pause_image_archive(settings, lambda _m: None),
        build.BUSYBOX_IMAGE: build.busybox_image_archive(settings),
        network_policies.image_name(settings): build.network_policy_agent_image_archive(
            settings, lambda _m: None
        ),
    }
    for name, archive in wanted.items():
        if name not in present:
            images.import_image(settings, archive)
            images.pin_image(settings, name)
            imported.append(name)
    return imported


# -- up -----------------------------------------------------------------------------------------
def _run_component(component: Component, progress: Progress) -> None:
    started = time.monotonic()
    action = component.up()
    took = f" in {time.monotonic() - started:.1f}s" if action != "already running" else ""
    progress(f"{component.name:<24} {action}{took}  {component.address}")


def claim(settings: Settings, progress: Progress = print) -> None:
    """One cluster per machine: refuse to start or stop another state folder's cluster while
    it runs. One whose processes are all gone (its machine or session was killed) only left
    mounts, a netns and kernel settings behind: those are undone with its own state folder,
    as its `lk cluster down` would, and the machine is ours."""
    owner = paths.owner_file(settings)
    ours = str(paths.cluster_dir(settings))
    try:
        other = owner.read_text().strip()
    except FileNotFoundError:
        other = ""
    if not other or other == ours or not Path(other).is_dir():
        return
    theirs = settings.model_copy(update={"stack_dir": Path(other).parent})
    if any(c.running() for c in components(theirs)) or network.pids_in_netns(theirs):
        raise StackError(
            f"the cluster running on this machine keeps its state in {other}, not {ours}: "
            "use the same LK_HOME (or LK_STACK_DIR) to stop it first"
        )
    progress(f"cleaning up a dead cluster left by {other}")
    down(theirs, progress)


def up(settings: Settings, progress: Progress = print) -> None:
    preflight(settings)
    claim(settings, progress)
    provision(settings, progress)
    paths.run_dir(settings).mkdir(parents=True, exist_ok=True)
    paths.owner_file(settings).write_text(str(paths.cluster_dir(settings)) + "\n")
    host.record_sysctls(settings)
    host.record_iptables(settings)
    host.record_folders(settings)
    if network.create_netns(settings):
        node_ip = settings.cluster_node_ip
        progress(f"{'network namespace':<24} {settings.cluster_netns} created (node IP {node_ip})")
    by_spec: dict[Spec, Component] = {c.spec: c for c in components(settings)}
    # etcd, the control plane, and the API relay for the host
    for spec in (API_RELAY, ETCD, KUBE_APISERVER):
        _run_component(by_spec[spec], progress)
    apply_bootstrap(settings)
    for spec in (KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, VOLUME_PROVISIONER, CONTAINERD):
        _run_component(by_spec[spec], progress)
    imported = import_node_images(settings)
    if imported:
        progress(f"images imported into containerd: {', '.join(imported)}")
    # the worker
    for spec in (KUBELET, KUBE_PROXY, COREDNS):
        _run_component(by_spec[spec], progress)
    if not wait_until(lambda: api.node_ready(settings), settings.cluster_startup_timeout_s, 0.5):
        kubelet = by_spec[KUBELET].process
        raise StackError(
            f"node {settings.cluster_node_name} did not become Ready (log {kubelet.log_file}): "
            f"{kubelet.log_tail(1) or 'no log output'}"
        )
    progress(f"node {settings.cluster_node_name} Ready")
    # NetworkPolicies enforced before any workload: the chart's are then what pods live by
    started = time.monotonic()
    api.apply(settings, network_policies.objects(settings))
    if not wait_until(
        lambda: network_policies.ready(settings), settings.cluster_startup_timeout_s, 0.5
    ):
        raise StackError(
            f"the NetworkPolicy agent ({network_policies.NAME}) did not become ready: "
            f"kubectl -n {network_policies.NAMESPACE} logs daemonset/{network_policies.NAME}"
        )
    took = time.monotonic() - started
    progress(f"{network_policies.NAME:<24} ready in {took:.1f}s  (NetworkPolicies enforced)")


# -- down (kubernetes-the-hard-way: "Cleaning Up") -----------------------------------------
def remove_pods(settings: Settings) -> list[str]:
    """Kill and delete every container and pod sandbox in containerd (the kubelet is already
    stopped, so nothing restarts them); their IDs."""
    containers = [c for c in images.ctr(settings, "containers", "ls", "-q").split() if c]
    for container in containers:
        with contextlib.suppress(StackError):
            images.ctr(settings, "tasks", "kill", "--signal", "SIGKILL", container, timeout_s=10)
    for container in containers:
        with contextlib.suppress(StackError):
            images.ctr(settings, "tasks", "delete", "--force", container, timeout_s=20)
        with contextlib.suppress(StackError):
            images.ctr(settings, "containers", "delete", container, timeout_s=20)
    return containers


def _kill_leftover_processes(settings: Settings) -> int:
    """SIGKILL whatever of the cluster still runs: processes in its namespace (containerd's
    shims) and in the kubelet's cgroups (containers, which live in their pods' namespaces),
    e.g. after containerd died and could not stop them."""
    found = set(network.pids_in_netns(settings)) | host.kubepods_pids()
    pids = sorted(found - {os.getpid(), 0})
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not any(pid_alive(p) for p in pids), 10.0)
    return len(pids)


def _sandbox_ids(settings: Settings) -> list[str]:
    """IDs of the containers and sandboxes containerd's state still names."""
    state = paths.containerd_state(settings)
    folders = (
        state / "io.containerd.runtime.v2.task" / paths.CONTAINERD_NAMESPACE,
        state / "io.containerd.grpc.v1.cri" / "sandboxes",
    )
    return [e.name for f in folders if f.is_dir() for e in f.iterdir()]


def _remove_pod_leftovers(settings: Settings, container_ids: list[str]) -> None:
    """Pod IP leases (every pod is gone now), libcni's cached results of our network and of
    our sandboxes' loopback, and the kubelet's links in /var/log/containers into our pod log
    folder."""
    ipam = paths.cni_ipam_dir(settings) / configs.CNI_NETWORK
    if ipam.is_dir():
        for lease in ipam.iterdir():
            if lease.name[0].isdigit() or lease.name.startswith("last_reserved_ip"):
                lease.unlink(missing_ok=True)
    results = Path("/var/lib/cni/results")
    if results.is_dir():
        ids = set(container_ids)
        for cached in results.iterdir():
            if cached.name.startswith(f"{configs.CNI_NETWORK}-") or any(
                f"-{cid}-" in cached.name for cid in ids
            ):
                cached.unlink(missing_ok=True)
    logs = Path("/var/log/containers")
    if logs.is_dir():
        ours = str(paths.pod_logs_dir(settings))
        for link in logs.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and str(link.readlink()).startswith(ours):
                    link.unlink()


def down(settings: Settings, progress: Progress = print) -> None:
    claim(settings)
    comps = components(settings)
    by_spec = {c.spec: c for c in comps}
    kubelet, containerd = by_spec[KUBELET], by_spec[CONTAINERD]
    if kubelet.stop():
        progress("kubelet                  stopped")
    removed: list[str] = []
    if containerd.running() and paths.containerd_socket(settings).is_socket():
        removed = remove_pods(settings)
        if removed:
            progress(f"containers removed       {len(removed)}")
    for component in reversed(comps):
        if component is kubelet:
            continue
        if component.stop():
            progress(f"{component.name:<24} stopped")
    removed += _sandbox_ids(settings)  # containerd may have died before it could list them
    killed = _kill_leftover_processes(settings)
    if killed:
        progress(f"leftover processes       {killed} killed (containers, containerd shims)")
    unmounted = host.unmount_all(settings)
    if unmounted:
        progress(f"mounts                   {len(unmounted)} unmounted")
    cgroups = host.remove_cgroups()
    if cgroups:
        progress(f"cgroups                  {len(cgroups)} kubepods hierarchies removed")
    _remove_pod_leftovers(settings, removed)
    if network.delete_netns(settings):
        progress(f"network namespace        {settings.cluster_netns} deleted")
    restored = host.restore_sysctls(settings)
    if restored:
        progress(f"kernel settings          restored {', '.join(restored)}")
    run = paths.run_dir(settings)
    if run.is_dir() and not host.remaining_mounts(settings):
        shutil.rmtree(run, ignore_errors=True)
    host.remove_made_folders(settings)
    problems = _leftovers(settings)
    unchanged = host.iptables_unchanged(settings)
    if unchanged is False:
        problems.append("the host's iptables rules changed while the cluster ran")
    if problems:
        raise StackError("cluster stopped, but: " + "; ".join(problems))


def _leftovers(settings: Settings) -> list[str]:
    problems = []
    if pids := sorted(set(network.pids_in_netns(settings)) | host.kubepods_pids()):
        problems.append(f"cluster processes still running: {pids[:5]}")
    if mounts := host.remaining_mounts(settings):
        problems.append(f"{len(mounts)} mounts left, e.g. {mounts[0]}")
    if cgroups := host.kubelet_cgroups():
        problems.append(f"cgroups left: {cgroups[0]}")
    if network.netns_exists(settings):
        problems.append(f"netns {settings.cluster_netns} still exists")
    return problems


# -- status -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ComponentStatus:
    name: str
    running: bool
    ready: bool
    address: str


@dataclass(frozen=True)
class ClusterStatus:
    components: list[ComponentStatus]
    node_ready: bool
    pods_not_ready: list[str]

    @property
    def up(self) -> bool:
        return self.node_ready and all(c.ready for c in self.components)

    def reason(self) -> str:
        down = [c.name for c in self.components if not c.ready]
        if not any(c.running for c in self.components):
            return "the cluster is not running: run `lk cluster up`"
        if down:
            return f"not running or not ready: {', '.join(down)}: run `lk cluster up`"
        if not self.node_ready:
            return "the node is not Ready"
        return ""


def status(settings: Settings) -> ClusterStatus:
    results = []
    netns = network.netns_exists(settings)
    for component in components(settings):
        running = component.running()
        ready = False
        if running and netns:
            try:
                ready = component.ready()
            except Exception:
                ready = False
        results.append(ComponentStatus(component.name, running, ready, component.address))
    node_ok, not_ready = False, []
    if all(r.ready for r in results if r.name in ("api-relay", "kube-apiserver")) and results:
        with contextlib.suppress(Exception):
            node_ok = api.node_ready(settings)
            not_ready = api.pods_not_ready(settings)
    return ClusterStatus(results, node_ok, not_ready)


def is_up(settings: Settings) -> bool:
    """Whether the cluster answers (every component ready and the node Ready)."""
    return status(settings).up


# -- reset --------------------------------------------------------------------------------------
def reset(settings: Settings, *, keep_images: bool = True, progress: Progress = print) -> None:
    """`down`, then delete the cluster's data (etcd, volumes, certificates, kubelet state,
    logs); the build cache stays, and so do containerd's images unless ``keep_images`` is off."""
    down(settings, progress)
    if host.remaining_mounts(settings):
        raise StackError("mounts are left under the cluster's folders: not deleting its data")
    cluster = paths.cluster_dir(settings)
    keep = paths.containerd_root(settings) if keep_images else None
    if cluster.is_dir():
        for entry in cluster.iterdir():
            if entry != keep:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
    kept = f" (kept the images in {keep})" if keep else ""
    progress(f"deleted the cluster's data (objects, volumes, certificates) in {cluster}{kept}")
