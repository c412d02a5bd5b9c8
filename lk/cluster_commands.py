"""`lk cluster up | down | status | reset`: a real one-node Kubernetes without Docker."""

from __future__ import annotations

import time

import click

from core.settings import Settings
from infra.cluster import cluster as local_cluster
from infra.cluster import paths
from infra.cluster.smoke import smoke_test
from lk.errors import fail, guarded


@click.group()
def cluster() -> None:
    """A real one-node Kubernetes (etcd, control plane, containerd, kubelet, kube-proxy,
    CoreDNS) inside a network namespace of its own; no Docker."""


@cluster.command()
@click.pass_obj
@guarded
def up(settings: Settings) -> None:
    """Build what is missing, start every component and wait until the node is Ready."""

    started = time.monotonic()
    local_cluster.up(settings, progress=click.echo)
    kubeconfig = paths.kubeconfig(settings)
    click.echo(
        f"cluster up in {time.monotonic() - started:.1f}s (state in {paths.cluster_dir(settings)})"
    )
    click.echo(f"  export KUBECONFIG={kubeconfig}")
    click.echo(f"  kubectl: {paths.kubectl_binary(settings)}   helm: {paths.helm_binary(settings)}")
    click.echo(
        f"  images: ctr --address {paths.containerd_socket(settings)} -n "
        f"{paths.CONTAINERD_NAMESPACE} images import <image.tar>"
    )


@cluster.command()
@click.pass_obj
@guarded
def build(settings: Settings) -> None:
    """Build (or fetch) what `up` needs and start nothing: Kubernetes, CoreDNS, helm, the pause
    image; cached, so a later `up` only starts."""

    started = time.monotonic()
    local_cluster.prepare(settings, progress=click.echo)
    click.echo(f"cluster build in {time.monotonic() - started:.1f}s")


@cluster.command()
@click.pass_obj
@guarded
def down(settings: Settings) -> None:
    """Stop every pod and component and undo what the cluster did to the host (mounts,
    cgroups, the network namespace, kernel settings). Data and images stay."""

    started = time.monotonic()
    local_cluster.down(settings, progress=click.echo)
    click.echo(f"cluster down in {time.monotonic() - started:.1f}s")


@cluster.command()
@click.pass_obj
@guarded
def status(settings: Settings) -> None:
    """Report each component, the node and the pods; exits 1 if the cluster is not up."""

    report = local_cluster.status(settings)
    for c in report.components:
        state = "up" if c.ready else ("starting" if c.running else "down")
        click.echo(f"{c.name:<24} {state:<9} {c.address}")
    node = "Ready" if report.node_ready else "not Ready"
    click.echo(f"{'node ' + settings.cluster_node_name:<24} {node}")
    if report.node_ready:
        click.echo(f"{'pods not ready':<24} {len(report.pods_not_ready)}")
        click.echo(f"{'kubeconfig':<24} {paths.kubeconfig(settings)}")
    if not report.up:
        fail(report.reason())


@cluster.command()
@click.option(
    "--images/--keep-images",
    "delete_images",
    default=False,
    help="Also delete containerd's images (default: keep them, so imports survive a reset).",
)
@click.pass_obj
@guarded
def reset(settings: Settings, delete_images: bool) -> None:
    """Stop the cluster and delete its data: etcd (every object), volumes,
    certificates, kubelet state, logs. The build cache stays; containerd's imported images
    stay too unless --images is given."""

    local_cluster.reset(settings, keep_images=not delete_images, progress=click.echo)


@cluster.command()
@click.option("--keep", is_flag=True, help="Leave the smoke test's namespace for a look.")
@click.pass_obj
@guarded
def smoke(settings: Settings, keep: bool) -> None:
    """Smoke-test the running cluster: a PVC binds, a pod reaches a Service by DNS name, and
    the host reaches a pod through kubectl port-forward (namespace lk-smoke, deleted after)."""

    smoke_test(settings, progress=click.echo, keep=keep)
