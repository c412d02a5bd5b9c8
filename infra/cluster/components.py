"""The processes of the cluster, in the shape of envtest's: each declared once as a `Spec` (its
flags in one place, where it answers, its readiness, what it needs before it starts), run by
one `Component` (``start``, ``ready``, ``stop``).

Every component but the relay and the volume provisioner runs inside the cluster's network
namespace, started as ``nsenter --net=/run/netns/<name> -- <binary> <flags>`` so it keeps the
host's mount namespace (the kubelet's volume mounts must be visible to containerd's
containers); those two are modules of this project run by its own Python on the host
(``module``). Each is a ``ManagedProcess``: a PID file with the start time, its own process
group, a log file.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.settings import Settings
from infra.cluster import configs, images, network, paths, provisioner
from infra.cluster.kubeconfigs import component_kubeconfig
from infra.cluster.pki import service_ip
from infra.stack.process import ManagedProcess, StackError, port_open, wait_until

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""Where a project module runs from (`-m` finds it there)."""

Check = Callable[["Component"], bool]
"""A readiness check of a running component."""


# -- where a binary comes from (settings, the component's name) ------------------------------------
def kubernetes_binary(settings: Settings, name: str) -> Path:
    return paths.kubernetes_bin_dir(settings) / name


def tools_binary(settings: Settings, name: str) -> Path:
    """Built with `go install` (build.py): etcd, coredns."""
    return paths.tools_bin_dir(settings) / name


def containerd_binary(settings: Settings, name: str) -> Path:
    """The system's, from Debian's package."""
    found = shutil.which("containerd")
    if found is None:
        raise StackError("containerd is not installed: apt-get install containerd runc")
    return Path(found)


def project_python(settings: Settings, name: str) -> Path:
    return Path(sys.executable)


# -- readiness -------------------------------------------------------------------------------------
def answers(port: int, path: str, *, tls: bool = True, on_node_ip: bool = False) -> Check:
    """Ready when ``GET path`` answers 200 inside the namespace, on its loopback (or the
    node's IP)."""

    def check(component: Component) -> bool:
        s = component.settings
        host = s.cluster_node_ip if on_node_ip else "127.0.0.1"
        status, _ = network.http_get(s, host, port, path, tls=tls)
        return status == 200

    return check


def _nothing(settings: Settings) -> None:
    return None


@dataclass(frozen=True, eq=False)
class Spec:
    """One process of the cluster, declared once."""

    name: str
    address: Callable[[Settings], str]
    """Where it answers, for `lk cluster status`."""
    flags: Callable[[Settings], list[str]]
    ready: Check
    binary: Callable[[Settings, str], Path] = kubernetes_binary
    module: str | None = None
    """A module of this project, run by `project_python` on the host (not in the namespace),
    from the project root: ``python -m <module> <flags>``."""
    stop_timeout_s: float = 20.0
    prepare: Callable[[Settings], None] = _nothing
    """Before it starts: the folders it needs, or a refusal (`StackError`)."""
    started: Callable[[Settings], None] = _nothing
    """Once it started."""


class Component:
    """A `Spec` run on these settings: ``argv``, ``start``, ``ready``, ``stop``, ``up``."""

    def __init__(self, spec: Spec, settings: Settings) -> None:
        self.spec = spec
        self.name = spec.name
        self.stop_timeout_s = spec.stop_timeout_s
        self.settings = settings
        self.process = ManagedProcess(self.name, paths.pid_dir(settings), paths.log_dir(settings))

    @property
    def address(self) -> str:
        """Where it answers, for `lk cluster status`."""
        return self.spec.address(self.settings)

    def binary(self) -> Path:
        return self.spec.binary(self.settings, self.name)

    def flags(self) -> list[str]:
        flags = self.spec.flags(self.settings)
        return flags if self.spec.module is None else ["-m", self.spec.module, *flags]

    def ready(self) -> bool:
        return self.spec.ready(self)

    def argv(self) -> list[str]:
        command = [str(self.binary()), *self.flags()]
        if self.spec.module is not None:
            return command  # no nsenter: it runs on the host
        return network.nsenter_argv(self.settings, command)

    def running(self) -> bool:
        return self.process.pid() is not None

    @property
    def argv_file(self) -> Path:
        """The command line it was started with: `up` restarts it when that changed."""
        return self.process.run_dir / f"{self.name}.argv"

    def started_with_other_flags(self) -> bool:
        try:
            return json.loads(self.argv_file.read_text()) != self.argv()
        except (FileNotFoundError, ValueError):
            return False

    def start(self) -> None:
        self.spec.prepare(self.settings)
        if self.spec.module is None:
            binary = self.binary()
            if not binary.is_file():
                raise StackError(f"{self.name}: {binary} is missing")
        self.process.start(self.argv(), cwd=None if self.spec.module is None else PROJECT_ROOT)
        self.argv_file.write_text(json.dumps(self.argv()) + "\n")
        self.spec.started(self.settings)

    def stop(self) -> bool:
        return self.process.stop(timeout_s=self.stop_timeout_s)

    def up(self) -> str:
        """Start if needed and wait until ready; what was done, for progress output."""
        if self.running() and self.started_with_other_flags():
            self.stop()
            self.start()
            action = "restarted (its flags changed)"
        elif self.running():
            action = "already running"
        else:
            self.start()
            action = "started"
        if not wait_until(self.ready, self.settings.cluster_startup_timeout_s, interval_s=0.3):
            reason = "did not become ready" if self.running() else "exited"
            tail = self.process.log_tail(1)
            raise StackError(
                f"{self.name} {reason} (log {self.process.log_file}): {tail or 'no log output'}"
            )
        return action


# -- what some components need beyond their flags --------------------------------------------------
def _refuse_a_taken_api_port(s: Settings) -> None:
    if port_open("127.0.0.1", s.cluster_api_port):
        raise StackError(
            f"port {s.cluster_api_port} is in use by a process the cluster did "
            "not start; stop it or set LK_CLUSTER_API_PORT"
        )


def etcd_version_file(settings: Settings) -> Path:
    """The minor version that wrote the data: etcd upgrades one minor version at a time."""
    return paths.cluster_dir(settings) / "etcd.version"


def _etcd_minor(settings: Settings) -> str:
    return ".".join(settings.etcd_version.lstrip("v").split(".")[:2])


def _refuse_other_etcd_data(s: Settings) -> None:
    data = paths.etcd_dir(s)
    if data.is_dir() and any(data.iterdir()):
        try:
            written = etcd_version_file(s).read_text().strip()
        except FileNotFoundError:
            written = "3.4"  # clusters before this record ran Debian's etcd 3.4
        if written != _etcd_minor(s):
            raise StackError(
                f"the cluster's etcd data was written by etcd {written}, and etcd "
                f"{_etcd_minor(s)} cannot read it: `lk cluster reset` deletes the cluster's data"
            )


def _record_etcd_version(s: Settings) -> None:
    etcd_version_file(s).write_text(_etcd_minor(s) + "\n")


def _etcd_ready(c: Component) -> bool:
    status, body = network.http_get(c.settings, "127.0.0.1", 2379, "/health")
    return status == 200 and '"true"' in body


def _containerd_ready(c: Component) -> bool:
    if not paths.containerd_socket(c.settings).is_socket():
        return False
    images.ctr(c.settings, "version", timeout_s=5)
    return True


def _coredns_ready(c: Component) -> bool:
    if not answers(8181, "/ready", tls=False)(c):
        return False
    name = f"kubernetes.default.svc.{c.settings.cluster_domain}"
    return network.resolve(c.settings, name) == [service_ip(c.settings)]


def _make_kubelet_folders(s: Settings) -> None:
    paths.kubelet_dir(s).mkdir(parents=True, exist_ok=True)
    paths.pod_logs_dir(s).mkdir(parents=True, exist_ok=True)


# -- the flags -------------------------------------------------------------------------------------
def _etcd_flags(s: Settings) -> list[str]:
    return [
        f"--name={s.cluster_node_name}",
        f"--data-dir={paths.etcd_dir(s)}",
        "--listen-client-urls=http://127.0.0.1:2379",
        "--advertise-client-urls=http://127.0.0.1:2379",
        "--listen-peer-urls=http://127.0.0.1:2380",
        "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        f"--initial-cluster={s.cluster_node_name}=http://127.0.0.1:2380",
        "--listen-metrics-urls=http://127.0.0.1:2381",
        "--quota-backend-bytes=4294967296",
        "--snapshot-count=10000",
    ]


def _apiserver_flags(s: Settings) -> list[str]:
    pki = paths.pki_dir(s)
    return [
        f"--advertise-address={s.cluster_node_ip}",
        "--bind-address=0.0.0.0",
        "--secure-port=6443",
        "--etcd-servers=http://127.0.0.1:2379",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--tls-cert-file={pki / 'kube-apiserver.crt'}",
        f"--tls-private-key-file={pki / 'kube-apiserver.key'}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        f"--service-account-key-file={pki / 'service-account.pub'}",
        f"--service-account-signing-key-file={pki / 'service-account.key'}",
        f"--service-account-issuer=https://kubernetes.default.svc.{s.cluster_domain}",
        f"--service-cluster-ip-range={s.cluster_service_cidr}",
        "--service-node-port-range=30000-32767",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--event-ttl=1h",
        "--profiling=false",
    ]


def _controller_flags(s: Settings, name: str) -> list[str]:
    """A controller of the control plane (the controller-manager, the scheduler): its
    kubeconfig for the API and for authenticating its own endpoint, on loopback, alone."""
    kubeconfig = component_kubeconfig(s, name)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
    ]


def _controller_manager_flags(s: Settings) -> list[str]:
    pki = paths.pki_dir(s)
    return [
        *_controller_flags(s, "kube-controller-manager"),
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--service-account-private-key-file={pki / 'service-account.key'}",
        "--use-service-account-credentials=true",
        f"--service-cluster-ip-range={s.cluster_service_cidr}",
        "--allocate-node-cidrs=false",
        "--controllers=*,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
        # not the host's /usr/libexec/kubernetes/kubelet-plugins/volume/exec
        f"--flex-volume-plugin-dir={paths.kubelet_dir(s) / 'volume-plugins'}",
    ]


def _kubelet_flags(s: Settings) -> list[str]:
    return [
        f"--config={configs.config_file(s, 'kubelet.yaml')}",
        f"--kubeconfig={component_kubeconfig(s, 'kubelet')}",
        f"--root-dir={paths.kubelet_dir(s)}",
        f"--cert-dir={paths.kubelet_dir(s) / 'pki'}",
        f"--hostname-override={s.cluster_node_name}",
        f"--node-ip={s.cluster_node_ip}",
        "--v=1",
    ]


# -- the components, in start order (stop in reverse) ----------------------------------------------
# Host loopback -> the apiserver in the namespace (relay.py): it binds on the host, then
# enters the namespace itself.
API_RELAY = Spec(
    "api-relay",
    address=lambda s: f"127.0.0.1:{s.cluster_api_port}",
    flags=lambda s: [
        f"--listen=127.0.0.1:{s.cluster_api_port}",
        f"--netns={paths.netns_path(s)}",
        f"--target={s.cluster_node_ip}:6443",
    ],
    ready=lambda c: c.running() and port_open("127.0.0.1", c.settings.cluster_api_port),
    binary=project_python,
    module="infra.cluster.relay",
    stop_timeout_s=5.0,
    prepare=_refuse_a_taken_api_port,
)
# Built from the Go proxy (build.etcd); plain HTTP on the namespace's loopback only.
ETCD = Spec(
    "etcd",
    address=lambda s: "127.0.0.1:2379 (in netns)",
    flags=_etcd_flags,
    ready=_etcd_ready,
    binary=tools_binary,
    prepare=_refuse_other_etcd_data,
    started=_record_etcd_version,
)
KUBE_APISERVER = Spec(
    "kube-apiserver",
    address=lambda s: f"{s.cluster_node_ip}:6443 (host: 127.0.0.1:{s.cluster_api_port})",
    flags=_apiserver_flags,
    ready=answers(6443, "/readyz", on_node_ip=True),
)
KUBE_CONTROLLER_MANAGER = Spec(
    "kube-controller-manager",
    address=lambda s: "127.0.0.1:10257 (in netns)",
    flags=_controller_manager_flags,
    ready=answers(10257, "/healthz"),
)
KUBE_SCHEDULER = Spec(
    "kube-scheduler",
    address=lambda s: "127.0.0.1:10259 (in netns)",
    flags=lambda s: _controller_flags(s, "kube-scheduler"),
    ready=answers(10259, "/healthz"),
)
# Volumes for PVCs of the default StorageClass (provisioner.py), through the API relay.
VOLUME_PROVISIONER = Spec(
    "volume-provisioner",
    address=lambda s: f"{provisioner.PROVISIONER} (host)",
    flags=lambda s: [
        f"--stack-dir={s.stack_path}",
        f"--api-port={s.cluster_api_port}",
        f"--node-name={s.cluster_node_name}",
    ],
    ready=lambda c: c.running() and "provisioner " in c.process.log_tail(20),
    binary=project_python,
    module="infra.cluster.provisioner",
    stop_timeout_s=5.0,
)
CONTAINERD = Spec(
    "containerd",
    address=lambda s: str(paths.containerd_socket(s)),
    flags=lambda s: [f"--config={configs.config_file(s, 'containerd.toml')}"],
    ready=_containerd_ready,
    binary=containerd_binary,
    stop_timeout_s=30.0,
    prepare=lambda s: paths.run_dir(s).mkdir(parents=True, exist_ok=True),
)
KUBELET = Spec(
    "kubelet",
    address=lambda s: f"{s.cluster_node_ip}:10250 (in netns)",
    flags=_kubelet_flags,
    ready=answers(10248, "/healthz", tls=False),
    stop_timeout_s=15.0,
    prepare=_make_kubelet_folders,
)
KUBE_PROXY = Spec(
    "kube-proxy",
    address=lambda s: "127.0.0.1:10256 (in netns, iptables)",
    flags=lambda s: [f"--config={configs.config_file(s, 'kube-proxy.yaml')}"],
    ready=answers(10256, "/healthz", tls=False),
)
COREDNS = Spec(
    "coredns",
    address=lambda s: f"{s.cluster_node_ip}:53 (in netns)",
    flags=lambda s: ["-conf", str(configs.config_file(s, "Corefile"))],
    ready=_coredns_ready,
    binary=tools_binary,
)

SPECS = (
    API_RELAY,
    ETCD,
    KUBE_APISERVER,
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    VOLUME_PROVISIONER,
    CONTAINERD,
    KUBELET,
    KUBE_PROXY,
    COREDNS,
)
"""Every component, in start order (stop in reverse)."""


def components(settings: Settings) -> list[Component]:
    """Every component on these settings, in start order (stop in reverse)."""
    return [Component(spec, settings) for spec in SPECS]
