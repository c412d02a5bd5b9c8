"""Around the chart's comparison Job on the cluster: its log as it comes (the busy loops start
with its feed), and what the test reads itself once it has ended, from a pod that has the
Job's identity and policies (the run's namespace in Kafka and Postgres are reachable only so).
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from core.events import ProfileChange, profile_from_record
from tests.comparison_checks import RunState
from tests.k8s.kube import Kube

RELEASE_COMPARISON = "comparison"
CHECKER = "lk-comparison-check"

SNAPSHOT = """
import base64, json, sys
from comparison.sampler import served
from core.kafka_io import read_topic
from core.settings import get_settings
from core.store import state, versions
from core.store.connection import connect
from core.store.streams import LAMBDA_SPEED

ns = get_settings().namespaced(sys.argv[1])
with connect(ns) as conn:
    live = versions.live_stream(conn, "kappa")
    late = {"kappa": sorted(state.late_event_ids(conn, live)),
            "lambda": sorted(state.late_event_ids(conn, LAMBDA_SPEED))}
def b64(value):
    return None if value is None else base64.b64encode(value).decode()
events = [[r.partition, r.offset, b64(r.value)] for r in read_topic(ns, ns.events_topic)]
profiles = [[r.key.decode(), b64(r.value), r.timestamp_ms]
            for r in read_topic(ns, ns.profiles_topic)]
answers = {a: {v: rows for v, (rows, _) in served(ns, a).items()} for a in ("lambda", "kappa")}
json.dump({"late": late, "events": events, "profiles": profiles, "served": answers},
          sys.stdout, default=str)
"""
"""Run in the checker pod with the run's namespace: the log's records (both topics), each
stream's late events and every view each architecture serves, as JSON."""


class LogLines:
    """`kubectl logs --follow` of a Job's container, line by line to `line` as they come, from
    a thread; started again while the pod is not running yet, each line given once."""

    def __init__(self, kube: Kube, job: str, container: str, line: Callable[[str], None]) -> None:
        self.kube, self.job, self.container, self.line = kube, job, container, line
        self._stop = threading.Event()
        self._given = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> LogLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        argv = [self.kube.kubectl_bin, "--namespace", self.kube.namespace, "logs", "--follow"]
        while not self._stop.is_set():
            self._process = subprocess.Popen(
                [*argv, f"job/{self.job}", "-c", self.container],
                env=self.kube.env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert self._process.stdout is not None
            for number, text in enumerate(self._process.stdout):
                if number >= self._given:
                    self._given += 1
                    self.line(text)
            self._process.wait()
            self._stop.wait(3)  # the pod not started yet, or the stream broke: again


class CheckerPod:
    """A pod of the comparison CronJob's template (its image, settings, labels: what its
    NetworkPolicies admit) that only sleeps, for `snapshot` to run in; deleted after."""

    def __init__(self, kube: Kube, release: str) -> None:
        self.kube, self.release = kube, release

    def manifest(self) -> dict[str, Any]:
        cronjob = self.kube.get("cronjob", f"{self.release}-{RELEASE_COMPARISON}")
        template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
        spec = dict(template["spec"])
        spec.pop("initContainers", None)  # the release is up: nothing to wait for
        container = dict(spec["containers"][0])
        container.pop("args", None)
        container["command"] = ["sleep", "3600"]
        spec["containers"] = [container]
        spec["terminationGracePeriodSeconds"] = 1
        metadata = {"name": CHECKER, "labels": template["metadata"].get("labels", {})}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}

    def __enter__(self) -> CheckerPod:
        self.delete()
        self.kube.kubectl("create", "-f", "-", stdin=json.dumps(self.manifest()))
        self.kube.kubectl("wait", "--for=condition=Ready", f"pod/{CHECKER}", "--timeout=300s")
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def delete(self) -> None:
        self.kube.kubectl(
            "delete", "pod", CHECKER, "--ignore-not-found", "--wait=false", check=False
        )

    def snapshot(self, namespace: str) -> tuple[RunState, list[ProfileChange]]:
        """The run's log, late events and served views; and the profile changes its log holds
        (after compaction: each user's latest, and the compaction scenario's resend)."""
        deadline = time.monotonic() + 120
        while True:
            result = self.kube.run(
                [self.kube.kubectl_bin, "--namespace", self.kube.namespace, "exec", CHECKER,
                 "--", "python", "-c", SNAPSHOT, namespace],
                timeout=600, check=False,
            )  # fmt: skip
            if result.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(5)  # the pod's first connection to a store may be refused a moment
        assert result.returncode == 0, result.stderr[-3000:]
        found = json.loads(result.stdout)
        records = [
            (p, o, None if v is None else base64.b64decode(v)) for p, o, v in found["events"]
        ]
        profiles = [
            profile_from_record(key, None if v is None else base64.b64decode(v), ts)
            for key, v, ts in found["profiles"]
        ]
        late = {arch: set(ids) for arch, ids in found["late"].items()}
        return RunState(records, late, found["served"]), profiles
