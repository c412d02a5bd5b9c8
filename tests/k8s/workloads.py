"""Workloads for the chart's tests: generated files, produced into the cluster's Kafka from a pod
of the app image (as a user's backfill or producer would), and the oracle over what the log holds.

The first workload (conftest's `oracle`) is produced once, right after the install. The fault
suite produces a second one in parts while it deletes pods: `later_workload` makes it so that
it collides with nothing of the first (its events, users and profiles are its own, its event
time starts where the first's ends) and that no event of either is late for the streams'
watermark, so that every architecture's answer must equal `oracle_of` exactly.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import workload
from core.kafka_io import partition_for
from core.oracle import (
    OracleResult,
    compute_views,
    late_event_ids,
    load_jsonl_values,
    load_profiles_jsonl,
)
from core.settings import Settings
from infra.cluster.install import RELEASE
from tests.k8s.kube import Kube

PRODUCER_LABELS = {"app.kubernetes.io/part-of": "tests", "lambda-kappa.io/producer": "true"}
"""The chart's NetworkPolicy admits producers to Kafka by the second label."""


@dataclass(frozen=True)
class Workload:
    """An events file and its profiles file, as `lk generate` writes them."""

    events: Path
    profiles: Path

    def values(self) -> list[bytes]:
        return load_jsonl_values(self.events)


def generate(spec: workload.WorkloadSpec, events: Path) -> Workload:
    """`spec`'s files; no event of it is late (the spec's `late_fraction` must be 0)."""
    profiles = workload.default_profiles_path(events)
    stats = workload.generate(spec, events, profiles)
    assert stats.late_events == 0, stats.late_events
    return Workload(events, profiles)


_USER = re.compile(rb"\bu-(\d+)\b")


def later_workload(
    first: workload.WorkloadSpec, seed: int, events: int, folder: Path, *, hours: float = 2.0
) -> Workload:
    """A workload that starts where `first` ends (its event time), with its own events (ids
    carry the seed) and its own users (`u-N` renamed `u<seed>-N`, in every line, the profiles'
    too): no profile of it changes a segment the first's orders or users already have, no
    session or event of it merges with the first's, and no event of it is late."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = workload.WorkloadSpec(
        seed=seed, events=events, start_ms=first.end_ms, hours=hours, late_fraction=0.0
    )
    raw = generate(spec, folder / "raw-events.jsonl")
    renamed = Workload(folder / "events.jsonl", folder / "profiles.jsonl")
    for source, target in ((raw.events, renamed.events), (raw.profiles, renamed.profiles)):
        target.write_bytes(_USER.sub(rb"u" + str(seed).encode() + rb"-\1", source.read_bytes()))
    return renamed


def split(path: Path, parts: int) -> list[Path]:
    """`path`'s lines cut into `parts` files of consecutive lines, to produce one after another."""
    lines = path.read_bytes().splitlines(keepends=True)
    size = -(-len(lines) // parts)
    files = []
    for n in range(parts):
        part = path.with_name(f"{path.stem}-part{n}.jsonl")
        part.write_bytes(b"".join(lines[n * size : (n + 1) * size]))
        files.append(part)
    return files


def oracle_of(values: Sequence[bytes], workloads: Sequence[Workload]) -> OracleResult:
    """The views of every event value in `values` (in log order), with the profiles of every
    workload in `workloads` (in the order they were produced)."""
    profiles = [change for w in workloads for change in load_profiles_jsonl(w.profiles)]
    return compute_views(list(values), profiles)


def late_in(values: Sequence[bytes], settings: Settings) -> set[str]:
    """The events a stream could drop as late reading `values` from the cluster's topic, in
    the strictest case (every record a micro-batch of its own): what must be empty for the
    oracle to be every architecture's answer."""
    offsets: dict[int, int] = {}
    records = []
    for value in values:
        partition = 0  # a line that is not a JSON object has no key: it is never an event
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("user_id"), str):
            partition = partition_for(parsed["user_id"].encode(), settings.events_partitions)
        offset = offsets.get(partition, 0)
        offsets[partition] = offset + 1
        records.append((partition, offset, value))
    return late_event_ids(records, settings.watermark_delay_minutes * 60_000)


class ProducerPod:
    """A pod with the serving pod's image and settings (the cluster's Kafka) that runs
    `lk produce` on files copied into it, for as long as the block lasts."""

    def __init__(self, kube: Kube, name: str = "lk-producer") -> None:
        self.kube, self.name = kube, name

    def manifest(self) -> dict[str, Any]:
        serving = self.kube.get("deployment", f"{RELEASE}-serving")
        spec = serving["spec"]["template"]["spec"]
        container = spec["containers"][0]
        env = container.get("env", [])
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name, "labels": PRODUCER_LABELS},
            "spec": {
                "restartPolicy": "Never",
                "enableServiceLinks": False,
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 1,
                "securityContext": spec.get("securityContext", {}),
                "containers": [
                    {
                        "name": "producer",
                        "image": container["image"],
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sleep", "3600"],
                        "env": [*env, *self.application_env(env)],
                        "securityContext": container.get("securityContext", {}),
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }
                ],
                "volumes": [{"name": "tmp", "emptyDir": {}}],
            },
        }

    @staticmethod
    def application_env(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The application's login to its database (`lk profiles`), from the release's Secret,
        which the serving pod, whose variables `env` are, does not have."""
        refs = (e.get("valueFrom", {}).get("secretKeyRef") for e in env)
        secret = next(ref["name"] for ref in refs if ref)
        return [
            {
                "name": "LK_APP_POSTGRES_PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": secret, "key": "app-postgres-password"}},
            },
            # A Connect pod deleted mid-apply is back within minutes, not the default minute.
            {"name": "LK_CDC_WAIT_TIMEOUT_S", "value": "600"},
        ]

    def __enter__(self) -> ProducerPod:
        # A pod left by an interrupted run would be restarted by `apply`, under the exec below.
        self.delete(wait=True)
        self.kube.kubectl("create", "-f", "-", stdin=json.dumps(self.manifest()))
        self.kube.kubectl("wait", "--for=condition=Ready", f"pod/{self.name}", "--timeout=300s")
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete(wait=False)

    def delete(self, *, wait: bool) -> None:
        self.kube.kubectl(
            "delete", "pod", self.name, "--ignore-not-found", f"--wait={str(wait).lower()}",
            check=False, timeout=180,
        )  # fmt: skip

    def produce(self, path: Path, topic: str = "events") -> None:
        """`lk produce --file` of `path` (every line one record, in order) into `topic`."""
        remote = f"/tmp/{path.name}"
        self.kube.kubectl("cp", str(path), f"{self.name}:{remote}", timeout=120)
        self.kube.kubectl(
            "exec", self.name, "--", "lk", "produce", "--file", remote, "--topic", topic,
            timeout=300,
        )  # fmt: skip

    def apply_profiles(self, path: Path, rate: float) -> subprocess.Popen[str]:
        """`lk profiles apply --file` of `path` at `rate` changes/s, the application writing its
        user table, in the background: it returns once every change is in `profiles`."""
        remote = f"/tmp/{path.name}"
        self.kube.kubectl("cp", str(path), f"{self.name}:{remote}", timeout=120)
        argv = [
            self.kube.kubectl_bin, "--namespace", self.kube.namespace, "exec", self.name, "--",
            "lk", "profiles", "apply", "--file", remote, "--rate", f"{rate:.3f}",
        ]  # fmt: skip
        return subprocess.Popen(
            argv, env=self.kube.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def produce_workload(self, produced: Workload) -> None:
        """Its profiles, then its events: a user's segment is known before their first order."""
        self.produce(produced.profiles, "profiles")
        self.produce(produced.events, "events")
