"""The chart on a real Kubernetes: `lk cluster up` (built and started by this run), the
project's images built with podman and imported into the cluster's containerd, then the chart
installed with Helm in one architecture (`--k8s-architecture`, `both` by default).

A cluster that cannot start fails every test here with its one-line reason; nothing skips.
The cluster is stopped at the end (its build cache and imported images stay).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from core.settings import Settings, get_settings
from infra.cluster import install
from tests.conftest import run_lk
from tests.k8s.kube import Kube
from tests.k8s.prometheus_api import PrometheusApi

NAMESPACE = install.NAMESPACE
RELEASE = install.RELEASE
COMPARISON_SCENARIOS = ("steady", "bug-and-fix")  # the Job's path; every scenario: test-compare
TEST_VALUES = (
    "--set=airflow.dagsArePausedAtCreation=true",
    "--set=batchLayer.schedule=",
    "--set=dataQuality.schedule=",
    # The comparison's Job on a small workload: every figure, as `make test-compare` runs it.
    "--set=comparison.events=600",
    "--set=comparison.rate=30",
    "--set=comparison.scenarios=" + "\\,".join(COMPARISON_SCENARIOS),
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
