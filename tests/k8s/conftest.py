"""The chart on a real Kubernetes: `lk cluster up` (built and started by this run), the
project's images built with podman and imported into the cluster's containerd, then the chart
installed with Helm in one architecture (`--k8s-architecture`, `both` by default).

A cluster that cannot start fails every test here with its one-line reason; nothing skips.
The cluster is stopped at the end (its build cache and imported images stay).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from core import workload
from core.oracle import OracleResult, compute_views, load_profiles_jsonl
from core.settings import Settings, get_settings
from infra.cluster import install
from tests.airflow_api import AirflowApi
from tests.comparison_checks import SCENARIOS
from tests.conftest import run_lk
from tests.k8s import workloads
from tests.k8s.faults import Outcome
from tests.k8s.kube import Kube, KubeError
from tests.k8s.prometheus_api import PrometheusApi

NAMESPACE = install.NAMESPACE
RELEASE = install.RELEASE
AIRFLOW = f"svc/{RELEASE}-airflow-api-server"
FIRST_WORKLOAD = workload.WorkloadSpec(seed=11, events=2000, late_fraction=0.0)
"""The workload produced right after the install (`oracle`): four hours of event time."""
FAULTS_MODULE = "test_pod_faults.py"
"""Its tests run after the views are checked and before `helm upgrade` (which they leave the
release healthy for): they add a workload and restart the node, so nothing before them sees it."""
TEST_VALUES = (
    "--set=airflow.dagsArePausedAtCreation=true",
    "--set=batchLayer.schedule=",
    "--set=dataQuality.schedule=",
    # The comparison's Job on a small workload: every figure, as `make test-compare` runs it.
    "--set=comparison.events=900",
    "--set=comparison.seed=11",  # as test-compare's: its bug version has rows to go live with
    "--set=comparison.rate=30",
    "--set=comparison.scenarios=" + "\\,".join(SCENARIOS),
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `architectures(...)` exist only for those architectures."""
    arch = config.getoption("--k8s-architecture")
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("architectures")
        (keep if marker is None or arch in marker.args else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    faults = [item for item in items if item.path.name == FAULTS_MODULE]
    if faults:
        rest = [item for item in items if item.path.name != FAULTS_MODULE]
        at = next((n for n, i in enumerate(rest) if i.name.startswith("test_helm_")), len(rest))
        items[:] = rest[:at] + faults + rest[at:]


@pytest.fixture(scope="session")
def architecture(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--k8s-architecture"))


@pytest.fixture(scope="session")
def cluster_settings() -> Settings:
    return get_settings()


def _keep() -> bool:
    """LK_K8S_KEEP=1 leaves the cluster and the release running, to look at them after a run."""
    return os.environ.get("LK_K8S_KEEP") == "1"


def _lk_or_fail(*args: str, timeout: float) -> str:
    result = run_lk(*args, timeout=timeout)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.fail(f"lk {' '.join(args)} failed: {last}", pytrace=False)
    return result.stdout


@pytest.fixture(scope="session")
def cluster(cluster_settings: Settings) -> Iterator[Settings]:
    """The real cluster, up for the whole run and stopped (by PID, mounts and netns removed)."""
    try:
        _lk_or_fail("cluster", "up", timeout=3600)
        yield cluster_settings
    finally:
        if not _keep():
            run_lk("cluster", "down", timeout=600)


@pytest.fixture(scope="session")
def image_tag(cluster: Settings) -> str:
    """The project's five images, built with podman from the debootstrapped base (cached) and
    imported into the cluster's containerd; their tag (unique per commit and change)."""
    from infra import images
    from infra.cluster import paths

    tag = images.image_tag()
    try:
        built = images.build_all(cluster, tag, log=lambda _: None)
        images.load_into_containerd(
            paths.containerd_socket(cluster), [b.ref for b in built], log=lambda _: None
        )
    except images.ImagesError as exc:
        pytest.fail(f"images: {exc}", pytrace=False)
    return tag


@pytest.fixture(scope="session")
def kube(cluster: Settings) -> Kube:
    from infra.cluster import paths

    return Kube(
        kubeconfig=paths.kubeconfig(cluster),
        namespace=NAMESPACE,
        kubectl_bin=str(paths.kubectl(cluster)),
        helm_bin=str(paths.helm(cluster)),
    )


def helm_install(kube: Kube, settings: Settings, architecture: str, tag: str) -> str:
    """`helm upgrade --install --wait` of the chart, as `make cluster-install` runs it; only the
    DAGs' timing differs: they start paused and neither the batch nor data quality has an
    hourly run, so that nothing scheduled runs behind the tests' back (each test unpauses and
    triggers what it runs; a step pod left by a run that an upgrade cut short would outlive the
    release)."""
    argv = install.install_argv(settings, architecture, tag, *TEST_VALUES)
    return kube.run(argv, timeout=1800).stdout


@pytest.fixture(scope="session")
def release(
    kube: Kube, cluster_settings: Settings, architecture: str, image_tag: str
) -> Iterator[str]:
    """The chart installed in `architecture`; uninstalled (and its namespace removed) at the end."""
    try:
        helm_install(kube, cluster_settings, architecture, image_tag)
        yield architecture
    finally:
        if not _keep():
            kube.helm("uninstall", RELEASE, "--wait", check=False)
            kube.run(
                [kube.kubectl_bin, "delete", "namespace", NAMESPACE, "--wait=true"],
                check=False,
                timeout=600,
            )


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("k8s")


@pytest.fixture(scope="session")
def prometheus(
    kube: Kube, release: str, image_tag: str
) -> Iterator[Callable[[], AbstractContextManager[PrometheusApi]]]:
    """Debian's Prometheus in a namespace of its own, scraping the release by the chart's
    `prometheus.io/*` annotations as a user's would (infra/prometheus.py), from the install on:
    the first test asks for it, so that rates have samples by the time the others read them.
    Yields how to open its API (a port-forward for the block: none is held across tests)."""
    from infra import prometheus as server

    kubectl = [kube.kubectl_bin]
    monitoring = dataclasses.replace(kube, namespace=server.NAMESPACE)

    @contextlib.contextmanager
    def opened() -> Iterator[PrometheusApi]:
        with monitoring.port_forward(f"svc/{server.NAME}", server.PORT) as url:
            yield PrometheusApi(url)

    try:
        server.apply(kubectl, kube.env(), image_tag, [NAMESPACE])
        yield opened
    finally:
        if not _keep():
            server.delete(kubectl, kube.env())


# -- the workload and Airflow, shared by every module (one install, one workload) ----------------


@pytest.fixture(scope="session")
def first_workload(kube: Kube, release: str, workdir: Path) -> workloads.Workload:
    """A generated workload produced into the cluster's Kafka from a pod of the app image,
    while the streams run, as a backfill would be.

    No event is late for the stream paths' watermark (every other irregularity is there:
    disorder within the watermark, duplicates, clock skew, invalid records, profile changes),
    so that every architecture's served answer must equal the oracle exactly. The file holds
    four hours of event time produced within a second or so: a micro-batch may start when
    some partitions have their records and others not yet, which the event-time clock per
    partition (CONTRACT §3) leaves without effect."""
    produced = workloads.generate(FIRST_WORKLOAD, workdir / "events.jsonl")
    with workloads.ProducerPod(kube) as producer:
        producer.produce_workload(produced)
    return produced


@pytest.fixture(scope="session")
def fault_outcomes() -> list[Outcome]:
    """The fault table's rows: the chart's batch test's (its driver pod deleted mid-run), then
    the fault suite's (`test_pod_faults.py`), which prints and writes the table."""
    return []


@pytest.fixture(scope="session")
def oracle(first_workload: workloads.Workload) -> OracleResult:
    """The views of `first_workload` (every test module reads this one workload)."""
    return compute_views(first_workload.values(), load_profiles_jsonl(first_workload.profiles))


class ForwardedAirflow(AirflowApi):
    """Airflow's REST API and UI through a port-forward of its Service, as the admin user;
    `reconnect` opens a new forward after the API server's pod (or the node) restarted."""

    def __init__(self, kube: Kube) -> None:
        secret = kube.get("secret", f"{RELEASE}-credentials")
        self._kube = kube
        self._secret = base64.b64decode(secret["data"]["airflow-admin-password"]).decode()
        self._forward = contextlib.ExitStack()
        self.reconnect()

    def reconnect(self, timeout_s: float = 300) -> None:
        """A new forward and token, once the API server answers (within `timeout_s`)."""
        self.close()
        deadline = time.monotonic() + timeout_s
        while True:
            forward = contextlib.ExitStack()
            try:
                url = forward.enter_context(self._kube.port_forward(AIRFLOW, 8080))
                super().__init__(url, "admin", self._secret)
                self._forward = forward
                return
            except (KubeError, AssertionError, httpx.TransportError):
                forward.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(5)

    def close(self) -> None:
        with contextlib.suppress(AttributeError):
            self.client.close()
        self._forward.close()


@pytest.fixture(scope="session")
def airflow(kube: Kube, release: str) -> Iterator[ForwardedAirflow]:
    api = ForwardedAirflow(kube)
    try:
        yield api
    finally:
        api.close()
