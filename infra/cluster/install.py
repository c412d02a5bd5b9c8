"""The chart on the cluster of `lk cluster up`: `helm upgrade --install --wait` with the values
for this one 2-CPU node (infra/cluster/values.yaml), the project's images at one tag, and the
batch layer's Spark steps as pods with Spark on Kubernetes (driver and executors as pods).

`make cluster-install ARCH=both` and the real-cluster tests (tests/k8s) install through here,
so that what the tests prove is what a user runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Final

from core.settings import Settings, get_settings
from infra.cluster import paths

ROOT: Final = Path(__file__).resolve().parents[2]
CHART: Final = ROOT / "charts" / "lambda-kappa"
VALUES: Final = Path(__file__).with_name("values.yaml")
NAMESPACE: Final = "lambda-kappa"
RELEASE: Final = "lk"
SPARK_MASTER: Final = "k8s://https://kubernetes.default.svc"
ARCHITECTURES: Final = ("lambda", "kappa", "both")


def helm_env(settings: Settings) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": str(paths.kubeconfig(settings))}


def install_argv(settings: Settings, architecture: str, tag: str, *extra: str) -> list[str]:
    """The `helm upgrade --install` command line of `architecture` at image tag `tag`."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {architecture!r}")
    return [
        str(paths.helm(settings)),
        "upgrade",
        "--install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "-f",
        str(VALUES),
        f"--set=architecture={architecture}",
        # --set-string: a commit's short hash can be all digits (5458245), which --set reads as a
        # number and the chart's schema refuses.
        f"--set-string=image.tag={tag}",  # every image's (the chart's image.tag)
        "--set=airflow.sparkBackend=kubernetes",
        f"--set=spark.master={SPARK_MASTER}",
        *extra,
        "--wait",
        "--timeout=20m",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.cluster.install", description=__doc__)
    parser.add_argument("architecture", choices=ARCHITECTURES)
    parser.add_argument("--tag", required=True, help="the images' tag (make's IMAGE_TAG)")
    args = parser.parse_args(argv)
    settings = get_settings()
    if not paths.kubeconfig(settings).is_file():
        print("lk: error: no cluster: run `lk cluster up` first", file=sys.stderr)
        return 1
    cmd = install_argv(settings, args.architecture, args.tag)
    result = subprocess.run(cmd, env=helm_env(settings), check=False)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
