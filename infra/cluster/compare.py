"""One run of the side-by-side comparison on Kubernetes: a Job from the chart's suspended
CronJob `<release>-comparison` (architecture both), its log followed to the end, and where
its report is.

    python -m infra.cluster.compare                          # the cluster of `lk cluster up`
    python -m infra.cluster.compare --context kind-lambda-kappa   # another cluster (kind)
    python -m infra.cluster.compare --pause-streams          # a small node: see streams_paused

`make cluster-compare` and `make kind-compare` call this, and so does the real-cluster test,
so what the test proves is what a user runs. The run publishes its report to the cluster's
MinIO (lk-dq/comparison/<run>/report.html) and records it for the API's GET /v1/comparison.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from core.settings import get_settings
from infra.cluster import install, paths

POLL_S: Final = 5.0
STREAMS: Final = ("archiver", "speed-layer", "kappa-stream")
"""The release's own stream Deployments (`<release>-<name>`)."""
PUBLISHED: Final = re.compile(r"published: (?P<url>https?://\S+)")

Echo = Callable[[str], None]
Run = Callable[..., subprocess.CompletedProcess[str]]
"""kubectl's arguments → its outcome (a `Kubectl`; a fake one in the unit tests)."""


@dataclass(frozen=True, slots=True)
class Kubectl:
    """kubectl with the cluster and namespace it talks to."""

    argv: tuple[str, ...]
    env: dict[str, str]

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.argv, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@dataclass(frozen=True, slots=True)
class ComparisonJob:
    name: str
    succeeded: bool
    log: str
    report_url: str | None
    """The report's address inside the cluster (the MinIO Service), from the run's log."""

    @property
    def report_path(self) -> str | None:
        """The report's bucket and key, for a port-forwarded MinIO."""
        if self.report_url is None:
            return None
        return "/" + self.report_url.split("://", 1)[1].split("/", 1)[1]


def start(kubectl: Run, release: str = install.RELEASE) -> str:
    """Create a Job from the CronJob's template; its name."""
    name = f"{release}-comparison-{datetime.now(UTC):%Y%m%d%H%M%S}"
    made = kubectl("create", "job", f"--from=cronjob/{release}-comparison", name)
    if made.returncode != 0:
        raise RuntimeError(
            f"cannot start the comparison (is the release installed with architecture=both?): "
            f"{made.stderr.strip()}"
        )
    return name


def follow(kubectl: Run, name: str, echo: Echo, timeout_s: float = 5400) -> ComparisonJob:
    """Stream the Job's log until it ends (waiting while its pod starts); its outcome."""
    deadline = time.monotonic() + timeout_s
    log: list[str] = []
    while time.monotonic() < deadline:
        status = _status(kubectl, name)
        if status is None:  # running, or still waiting for `lk init` and the image
            followed = kubectl(
                "logs", "--follow", f"job/{name}", "-c", "comparison",
                timeout=max(1.0, deadline - time.monotonic()),
            )  # fmt: skip
            if followed.returncode == 0 and followed.stdout:
                for line in followed.stdout.splitlines()[len(log) :]:
                    echo(line)
                log = followed.stdout.splitlines()
            time.sleep(POLL_S)
            continue
        whole = kubectl("logs", f"job/{name}", "-c", "comparison").stdout
        for line in whole.splitlines()[len(log) :]:
            echo(line)
        found = PUBLISHED.search(whole)
        return ComparisonJob(name, status, whole, found["url"] if found else None)
    raise TimeoutError(f"the comparison Job {name} did not end within {timeout_s:.0f} s")


def _status(kubectl: Run, name: str) -> bool | None:
    """True once the Job succeeded, False once it failed, None while it runs."""
    got = kubectl(
        "get", "job", name, "-o",
        "jsonpath={.status.succeeded}/{.status.failed}",
    )  # fmt: skip
    succeeded, _, failed = got.stdout.partition("/")
    if succeeded.strip() not in ("", "0"):
        return True
    if failed.strip() not in ("", "0"):
        return False
    return None


@contextmanager
def streams_paused(kubectl: Run, release: str, echo: Echo) -> Iterator[None]:
    """The release's own streams scaled to zero while a run goes, then back to their replicas.

    A run deploys both architectures again inside its pod. On a 2-CPU node, the release's three
    drivers and their executors beside the run's own JVMs kept the load near 30: Postgres's
    probes timed out, the kubelet restarted it, and every stream lost its store."""
    wanted = [f"{release}-{name}" for name in STREAMS]
    got = kubectl(
        "get", "deployment", *wanted, "--ignore-not-found", "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.spec.replicas}{' '}{end}",
    )  # fmt: skip
    replicas = dict(item.split("=", 1) for item in got.stdout.split() if "=" in item)
    if replicas:
        kubectl("scale", "deployment", *replicas, "--replicas=0")
        echo(f"== paused the release's streams for the run: {', '.join(replicas)}")
    try:
        yield
    finally:
        for name, count in replicas.items():
            kubectl("scale", "deployment", name, f"--replicas={count}")
        if replicas:
            echo("== the release's streams are back")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.cluster.compare", description=__doc__)
    parser.add_argument("--context", help="a kubeconfig context (kind); default: lk cluster's")
    parser.add_argument("--namespace", default=install.NAMESPACE)
    parser.add_argument("--release", default=install.RELEASE)
    parser.add_argument(
        "--pause-streams", action="store_true",
        help="scale the release's own streams to zero during the run (a node of 2-3 CPUs)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.context:
        kubectl = Kubectl(
            ("kubectl", "--context", args.context, "--namespace", args.namespace), dict(os.environ)
        )
    else:
        settings = get_settings()
        if not paths.kubeconfig(settings).is_file():
            print("lk: error: no cluster: run `lk cluster up` first", file=sys.stderr)
            return 1
        kubectl = Kubectl(
            (str(paths.kubectl(settings)), "--namespace", args.namespace),
            install.helm_env(settings),
        )
    pausing = streams_paused(kubectl, args.release, print) if args.pause_streams else nullcontext()
    try:
        with pausing:
            name = start(kubectl, args.release)
            print(f"== job/{name}: both architectures live in one pod, then the report")
            job = follow(kubectl, name, print)
    except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
        print(f"lk: error: {exc}", file=sys.stderr)
        return 1
    if not job.succeeded:
        print(f"lk: error: the comparison failed: kubectl logs job/{name}", file=sys.stderr)
        return 1
    if job.report_path:
        minio = f"svc/{args.release}-minio"
        print(f"the report: kubectl -n {args.namespace} port-forward {minio} 9000:9000")
        print(f"  then open http://localhost:9000{job.report_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
