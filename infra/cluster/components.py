"""The processes of the cluster, each a small object in the shape of envtest's: its flags in
one place (``flags``), ``start``, ``ready``, ``stop``.

Every component but the relay runs inside the cluster's network namespace, started as
``nsenter --net=/run/netns/<name> -- <binary> <flags>`` so it keeps the host's mount namespace
(the kubelet's volume mounts must be visible to containerd's containers). Each is a
``ManagedProcess``: a PID file with the start time, its own process group, a log file.
"""

from __future__ import annotations

import json
import shutil
import sys
from abc import ABC, abstractmethod
from pathlib import Path

from core.settings import Settings
from infra.cluster import configs, images, network, paths, provisioner
from infra.cluster.kubeconfigs import component_kubeconfig
from infra.cluster.pki import service_ip
from infra.stack.process import ManagedProcess, StackError, port_open, wait_until


class Component(ABC):
    name: str
    stop_timeout_s: float = 20.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.process = ManagedProcess(self.name, paths.pid_dir(settings), paths.log_dir(settings))

    @property
    @abstractmethod
    def address(self) -> str:
        """Where it answers, for `lk cluster status`."""

    @abstractmethod
    def binary(self) -> Path: ...

    @abstractmethod
    def flags(self) -> list[str]: ...

    @abstractmethod
    def ready(self) -> bool: ...

    def argv(self) -> list[str]:
        return network.nsenter_argv(self.settings, [str(self.binary()), *self.flags()])

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

    def _launch(self, cwd: Path | None = None) -> None:
        self.process.start(self.argv(), cwd=cwd)
        self.argv_file.write_text(json.dumps(self.argv()) + "\n")

    def start(self) -> None:
        binary = self.binary()
        if not binary.is_file():
            raise StackError(f"{self.name}: {binary} is missing")
        self._launch()

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

    def _kube_binary(self) -> Path:
        return paths.kubernetes_bin_dir(self.settings) / self.name

    def _https_ok(self, host: str, port: int, path: str) -> bool:
        status, _ = network.http_get(self.settings, host, port, path, tls=True)
        return status == 200

    def _http_ok(self, host: str, port: int, path: str) -> bool:
        status, _ = network.http_get(self.settings, host, port, path)
        return status == 200


class ProjectProcess(Component):
    """A module of this project run by its own Python on the host, not in the namespace."""

    module: str
    stop_timeout_s = 5.0

    def binary(self) -> Path:
        return Path(sys.executable)

    @abstractmethod
    def module_flags(self) -> list[str]: ...

    def flags(self) -> list[str]:
        return ["-m", self.module, *self.module_flags()]

    def argv(self) -> list[str]:
        return [str(self.binary()), *self.flags()]  # no nsenter: it runs on the host

    def start(self) -> None:
        self._launch(cwd=Path(__file__).resolve().parents[2])  # the project root: `-m` finds it


class ApiRelay(ProjectProcess):
    """Host loopback -> the apiserver in the namespace (infra/cluster/relay.py): it binds on
    the host, then enters the namespace itself."""

    name = "api-relay"
    module = "infra.cluster.relay"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.settings.cluster_api_port}"

    def module_flags(self) -> list[str]:
        s = self.settings
        return [
            f"--listen=127.0.0.1:{s.cluster_api_port}",
            f"--netns={paths.netns_path(s)}",
            f"--target={s.cluster_node_ip}:6443",
        ]

    def start(self) -> None:
        if port_open("127.0.0.1", self.settings.cluster_api_port):
            raise StackError(
                f"port {self.settings.cluster_api_port} is in use by a process the cluster did "
                "not start; stop it or set LK_CLUSTER_API_PORT"
            )
        super().start()

    def ready(self) -> bool:
        return self.running() and port_open("127.0.0.1", self.settings.cluster_api_port)


class Etcd(Component):
    """etcd (built from the Go proxy: build.etcd), plain HTTP on the namespace's loopback only."""

    name = "etcd"

    @property
    def address(self) -> str:
        return "127.0.0.1:2379 (in netns)"

    def binary(self) -> Path:
        return paths.tools_bin_dir(self.settings) / "etcd"

    @property
    def version_file(self) -> Path:
        """The minor version that wrote the data: etcd upgrades one minor version at a time."""
        return paths.cluster_dir(self.settings) / "etcd.version"

    def start(self) -> None:
        minor = ".".join(self.settings.etcd_version.lstrip("v").split(".")[:2])
        data = paths.etcd_dir(self.settings)
        if data.is_dir() and any(data.iterdir()):
            try:
                written = self.version_file.read_text().strip()
            except FileNotFoundError:
                written = "3.4"  # clusters before this record ran Debian's etcd 3.4
            if written != minor:
                raise StackError(
                    f"the cluster's etcd data was written by etcd {written}, and etcd {minor} "
                    "cannot read it: `lk cluster reset` deletes the cluster's data"
                )
        super().start()
        self.version_file.write_text(minor + "\n")

    def flags(self) -> list[str]:
        return [
            f"--name={self.settings.cluster_node_name}",
            f"--data-dir={paths.etcd_dir(self.settings)}",
            "--listen-client-urls=http://127.0.0.1:2379",
            "--advertise-client-urls=http://127.0.0.1:2379",
            "--listen-peer-urls=http://127.0.0.1:2380",
            "--initial-advertise-peer-urls=http://127.0.0.1:2380",
            f"--initial-cluster={self.settings.cluster_node_name}=http://127.0.0.1:2380",
            "--listen-metrics-urls=http://127.0.0.1:2381",
            "--quota-backend-bytes=4294967296",
            "--snapshot-count=10000",
        ]

    def ready(self) -> bool:
        status, body = network.http_get(self.settings, "127.0.0.1", 2379, "/health")
        return status == 200 and '"true"' in body


class KubeApiserver(Component):
    name = "kube-apiserver"

    @property
    def address(self) -> str:
        s = self.settings
        return f"{s.cluster_node_ip}:6443 (host: 127.0.0.1:{s.cluster_api_port})"

    def binary(self) -> Path:
        return self._kube_binary()

    def flags(self) -> list[str]:
        s, pki = self.settings, paths.pki_dir(self.settings)
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

    def ready(self) -> bool:
        return self._https_ok(self.settings.cluster_node_ip, 6443, "/readyz")


class KubeControllerManager(Component):
    name = "kube-controller-manager"

    @property
    def address(self) -> str:
        return "127.0.0.1:10257 (in netns)"

    def binary(self) -> Path:
        return self._kube_binary()

    def flags(self) -> list[str]:
        s, pki = self.settings, paths.pki_dir(self.settings)
        kubeconfig = component_kubeconfig(s, self.name)
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
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

    def ready(self) -> bool:
        return self._https_ok("127.0.0.1", 10257, "/healthz")


class KubeScheduler(Component):
    name = "kube-scheduler"

    @property
    def address(self) -> str:
        return "127.0.0.1:10259 (in netns)"

    def binary(self) -> Path:
        return self._kube_binary()

    def flags(self) -> list[str]:
        kubeconfig = component_kubeconfig(self.settings, self.name)
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
        ]

    def ready(self) -> bool:
        return self._https_ok("127.0.0.1", 10259, "/healthz")


class VolumeProvisioner(ProjectProcess):
    """Volumes for PVCs of the default StorageClass (infra/cluster/provisioner.py), on the
    host, through the API relay."""

    name = "volume-provisioner"
    module = "infra.cluster.provisioner"

    @property
    def address(self) -> str:
        return f"{provisioner.PROVISIONER} (host)"

    def module_flags(self) -> list[str]:
        s = self.settings
        return [
            f"--stack-dir={s.stack_path}",
            f"--api-port={s.cluster_api_port}",
            f"--node-name={s.cluster_node_name}",
        ]

    def ready(self) -> bool:
        return self.running() and "provisioner " in self.process.log_tail(20)


class Containerd(Component):
    name = "containerd"
    stop_timeout_s = 30.0

    @property
    def address(self) -> str:
        return str(paths.containerd_socket(self.settings))

    def binary(self) -> Path:
        found = shutil.which("containerd")
        if found is None:
            raise StackError("containerd is not installed: apt-get install containerd runc")
        return Path(found)

    def flags(self) -> list[str]:
        return [f"--config={configs.config_file(self.settings, 'containerd.toml')}"]

    def start(self) -> None:
        paths.run_dir(self.settings).mkdir(parents=True, exist_ok=True)
        super().start()

    def ready(self) -> bool:
        if not paths.containerd_socket(self.settings).is_socket():
            return False
        images.ctr(self.settings, "version", timeout_s=5)
        return True


class Kubelet(Component):
    name = "kubelet"
    stop_timeout_s = 15.0

    @property
    def address(self) -> str:
        return f"{self.settings.cluster_node_ip}:10250 (in netns)"

    def binary(self) -> Path:
        return self._kube_binary()

    def flags(self) -> list[str]:
        s = self.settings
        return [
            f"--config={configs.config_file(s, 'kubelet.yaml')}",
            f"--kubeconfig={component_kubeconfig(s, 'kubelet')}",
            f"--root-dir={paths.kubelet_dir(s)}",
            f"--cert-dir={paths.kubelet_dir(s) / 'pki'}",
            f"--hostname-override={s.cluster_node_name}",
            f"--node-ip={s.cluster_node_ip}",
            "--v=1",
        ]

    def start(self) -> None:
        paths.kubelet_dir(self.settings).mkdir(parents=True, exist_ok=True)
        paths.pod_logs_dir(self.settings).mkdir(parents=True, exist_ok=True)
        super().start()

    def ready(self) -> bool:
        return self._http_ok("127.0.0.1", 10248, "/healthz")


class KubeProxy(Component):
    name = "kube-proxy"

    @property
    def address(self) -> str:
        return "127.0.0.1:10256 (in netns, iptables)"

    def binary(self) -> Path:
        return self._kube_binary()

    def flags(self) -> list[str]:
        return [f"--config={configs.config_file(self.settings, 'kube-proxy.yaml')}"]

    def ready(self) -> bool:
        return self._http_ok("127.0.0.1", 10256, "/healthz")


class CoreDNS(Component):
    name = "coredns"

    @property
    def address(self) -> str:
        return f"{self.settings.cluster_node_ip}:53 (in netns)"

    def binary(self) -> Path:
        return paths.tools_bin_dir(self.settings) / "coredns"

    def flags(self) -> list[str]:
        return ["-conf", str(configs.config_file(self.settings, "Corefile"))]

    def ready(self) -> bool:
        if not self._http_ok("127.0.0.1", 8181, "/ready"):
            return False
        name = f"kubernetes.default.svc.{self.settings.cluster_domain}"
        return network.resolve(self.settings, name) == [service_ip(self.settings)]


def components(settings: Settings) -> list[Component]:
    """Every component, in start order (stop in reverse)."""
    return [
        ApiRelay(settings),
        Etcd(settings),
        KubeApiserver(settings),
        KubeControllerManager(settings),
        KubeScheduler(settings),
        VolumeProvisioner(settings),
        Containerd(settings),
        Kubelet(settings),
        KubeProxy(settings),
        CoreDNS(settings),
    ]
