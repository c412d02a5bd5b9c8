"""Pod-level faults on the cluster, while both architectures stream a workload, ending exact.

The faults Kubernetes users meet, on the one release the other tests share: Kafka Connect's pod
deleted while the application writes its user table (change data capture); the speed layer's,
the Kappa job's and the archiver's pods deleted mid-stream; the Postgres pod (the API answers
503 meanwhile, never a wrong answer), then the Kafka pod, then the MinIO pod (the API answers
as if nothing happened); then the node restarted (`lk cluster down` SIGKILLs every container,
`lk cluster up` starts it again, volumes and etcd kept). The fault on a batch, its compute
step's driver pod deleted while its Spark job writes the version (never served half-written;
Airflow's retry finishes the run), is the chart's batch test's (`tests/k8s/faults.py`): one
batch run for both, whose row heads this suite's table. It is the project's one fault suite
(`make test-faults` runs it alone, the batch's fault with it); `tests/integration/
test_exactly_once.py` covers what no pod deletion reaches (two archivers at once, a lost
checkpoint, records gone unread).

A second workload is produced in parts from a pod while this happens, one part just before
each fault, so that each fault lands while the streams read. It collides with
nothing of the first (tests/k8s/workloads.py) and no event of either is late, so after each
fault every view of both architectures, read through the serving Service, must equal the
oracle of everything in the log. The fault-by-outcome table is printed and written to
`out/k8s-faults.md`.

They run after the views are checked and before `helm upgrade` (conftest orders them), and
leave the release healthy: every pod Ready, every view exact, Airflow's forward reopened.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.oracle import OracleResult, load_jsonl_values, load_profiles_jsonl
from core.settings import Settings
from tests.conftest import ROOT, run_lk
from tests.k8s import workloads
from tests.k8s.conftest import FIRST_WORKLOAD, RELEASE, ForwardedAirflow
from tests.k8s.faults import COMPONENT, Outcome, table, wait_for
from tests.k8s.kube import Kube
from tests.k8s.serving_views import (
    ARCHITECTURES,
    ServingReader,
    UnavailableError,
    wait_until_exact,
)

pytestmark = pytest.mark.architectures("both")  # it checks both architectures' every view

INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
STREAMS = ("speed-layer", "kappa-stream", "archiver")
EVENTS = 1500
STORES = ("postgres", "kafka", "minio")
PARTS = 2 + len(STORES)
"""One part before each fault: the streams' pods, each store's, the node."""
FAULTS = PARTS + 2  # and Kafka Connect's, and the chart's batch test's (its driver pod deleted)
CONNECT_APPLY_S = 30.0
"""How long the application takes to apply the second workload's profile changes."""
MID_STREAM_S = 3.0
"""After a part is produced, the fault waits this long: the streams are reading it."""
BACK_S = 600.0
EXACT_S = 600.0


@dataclass
class Faults:
    """The suite's state: the second workload, what of it is in the log, the outcomes."""

    kube: Kube
    settings: Settings
    first: workloads.Workload
    later: workloads.Workload
    parts: list[Path]
    producer: workloads.ProducerPod
    reader: ServingReader
    produced: list[Path] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    """The chart's batch fault first (conftest's `fault_outcomes`), then this suite's."""

    def produce_part(self) -> None:
        """The next part into the log, then a moment for the streams to start reading it."""
        part = self.parts[len(self.produced)]
        self.producer.produce(part)
        self.produced.append(part)
        time.sleep(MID_STREAM_S)

    def expected(self) -> OracleResult:
        values = self.first.values() + [v for p in self.produced for v in _values(p)]
        return workloads.oracle_of(values, [self.first, self.later])

    def until_exact(self, outcome: Outcome, started: float) -> None:
        """Every view of both architectures equals the oracle of the log: the fault's time to
        that, from `started` (its injection)."""
        wait_until_exact(self.reader, self.expected(), EXACT_S)
        outcome.exact_s = time.monotonic() - started

    def table(self) -> str:
        return table(self.outcomes)


def _values(path: Path) -> list[bytes]:
    return load_jsonl_values(path)


@pytest.fixture(scope="module")
def faults(
    request: pytest.FixtureRequest,
    kube: Kube,
    cluster_settings: Settings,
    first_workload: workloads.Workload,
    oracle: OracleResult,
    workdir: Path,
    fault_outcomes: list[Outcome],
) -> Iterator[Faults]:
    later = workloads.later_workload(FIRST_WORKLOAD, 12, EVENTS, workdir / "faults")
    everything = first_workload.values() + later.values()
    assert not workloads.late_in(everything, cluster_settings), "a workload event would be late"
    clock = time.monotonic()
    with (
        workloads.ProducerPod(kube, "lk-fault-producer") as producer,
        ServingReader(kube) as reader,
    ):
        state = Faults(
            kube, cluster_settings, first_workload, later,
            workloads.split(later.events, PARTS), producer, reader, outcomes=fault_outcomes,
        )  # fmt: skip
        # Before any fault: the release is whole and serves the first workload exactly.
        _wait_release_ready(kube, BACK_S)
        wait_until_exact(reader, oracle, EXACT_S)
        try:
            yield state
        finally:
            took = time.monotonic() - clock
            table = state.table()
            out = ROOT / "out"
            out.mkdir(exist_ok=True)
            (out / "k8s-faults.md").write_text(table + "\n")
            # Printed whatever happened (a failed fault's row says so), past pytest's capture,
            # as `capsys.disabled()` prints.
            capture = request.config.pluginmanager.getplugin("capturemanager")
            with capture.global_and_fixture_disabled():
                print(f"\n{table}")
                print(
                    f"pod faults: {len(state.produced)} of {PARTS} parts of the second "
                    f"workload produced, {took:.0f} s in all"
                )


# -- the release's pods -----------------------------------------------------------------------


def _pods(kube: Kube, selector: str) -> list[dict[str, Any]]:
    return kube.items("pods", "-l", f"{INSTANCE},{selector}")


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod["status"].get("conditions", [])
    deleting = pod["metadata"].get("deletionTimestamp") is not None
    return not deleting and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _restarts(kube: Kube) -> dict[str, tuple[str, int]]:
    """component -> (its pod's uid, its containers' restarts), of the release's long-running
    pods."""
    found = {}
    for pod in kube.items("pods", "-l", INSTANCE):
        component = pod["metadata"]["labels"].get(COMPONENT, "")
        if pod["status"].get("phase") != "Running" or component.startswith("spark-"):
            continue
        count = sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", []))
        found[component] = (pod["metadata"]["uid"], count)
    return found


def _restarted(before: dict[str, tuple[str, int]], after: dict[str, tuple[str, int]]) -> list[str]:
    """Components whose pod was replaced or whose container restarted in between."""
    return sorted(c for c, state in after.items() if c in before and before[c] != state)


def _release_ready(kube: Kube, since: datetime | None = None) -> bool:
    """Every Deployment and StatefulSet of the release has its replicas, and every pod of the
    release that runs is Ready (since `since`, when given: after a node restart the objects'
    status is the one from before until the kubelet reports again)."""
    owners = kube.items("deployments", "-l", INSTANCE) + kube.items("statefulsets", "-l", INSTANCE)
    if not owners or any(
        w["status"].get("readyReplicas", 0) < w["spec"].get("replicas", 1) for w in owners
    ):
        return False
    for pod in kube.items("pods", "-l", INSTANCE):
        component = pod["metadata"]["labels"].get(COMPONENT, "")
        if pod["status"].get("phase") in ("Succeeded", "Failed") or component.startswith("spark"):
            continue  # a Job's finished pod; Spark's executors and steps belong to their runs
        if pod["metadata"].get("deletionTimestamp"):
            return False  # a replaced pod still stopping
        ready = [c for c in pod["status"].get("conditions", []) if c["type"] == "Ready"]
        if not ready or ready[0]["status"] != "True":
            return False
        if since is not None and _timestamp(ready[0]["lastTransitionTime"]) < since:
            return False
    return True


def _timestamp(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _wait_release_ready(kube: Kube, timeout_s: float, since: datetime | None = None) -> float:
    ready = lambda: _release_ready(kube, since)  # noqa: E731
    return wait_for("every pod of the release Ready", ready, timeout_s)


def _replaced(kube: Kube, component: str, old: set[str]) -> Callable[[], bool]:
    """A pod of `component` that is not one of `old` (by uid) is Ready."""

    def check() -> bool:
        pods = _pods(kube, f"{COMPONENT}={component}")
        return any(p["metadata"]["uid"] not in old and _ready(p) for p in pods)

    return check


def _uids(kube: Kube, component: str) -> set[str]:
    return {p["metadata"]["uid"] for p in _pods(kube, f"{COMPONENT}={component}")}


def _delete(kube: Kube, selector: str) -> None:
    """`kubectl delete pod` as a user or an eviction does it: graceful (SIGTERM, then the grace
    period), not waiting for the pod to be gone."""
    kube.kubectl("delete", "pod", "-l", f"{INSTANCE},{selector}", "--wait=false")


def _api_answer(reader: ServingReader) -> str:
    """What a reader of the serving API gets now (its store may be away): the status code."""
    try:
        response = reader.get("/v1/views/page_views", architecture="kappa", limit="1")
    except UnavailableError:
        return "no answer"
    return str(response.status_code)


# -- the faults --------------------------------------------------------------------------------


def test_connect_deleted_mid_apply_loses_no_change(faults: Faults) -> None:
    """The application writes the second workload's profile changes into its user table (`lk
    profiles apply`, a transaction each, first: a user's segment is known before their first
    order), and a third of the way in Kafka Connect's pod is deleted. The new pod resumes from
    the worker's last committed offset (a change may come twice, which changes no view) and
    the replication slot kept every change since (none is lost): the apply returns once every
    change is in `profiles`."""
    kube = faults.kube
    outcome = Outcome("Kafka Connect (change data capture)", "pod deleted mid `lk profiles apply`")
    faults.outcomes.append(outcome)
    before = _restarts(kube)
    old = _uids(kube, "connect")
    assert old, "no Kafka Connect pod"
    changes = len(load_profiles_jsonl(faults.later.profiles))
    apply = faults.producer.apply_profiles(faults.later.profiles, changes / CONNECT_APPLY_S)
    time.sleep(CONNECT_APPLY_S / 3)
    started = time.monotonic()
    _delete(kube, f"{COMPONENT}=connect")
    back = wait_for("a new Kafka Connect pod Ready", _replaced(kube, "connect", old), BACK_S)
    _, err = apply.communicate(timeout=BACK_S + 120)
    assert apply.returncode == 0, err
    captured = time.monotonic() - started
    outcome.back = f"pod Ready {back:.0f} s, every change in the topic {captured:.0f} s"
    faults.until_exact(outcome, started)
    outcome.restarted = _restarted(before, _restarts(kube))


def test_the_streams_pods_deleted_mid_stream_come_back_exact(faults: Faults) -> None:
    kube = faults.kube
    outcome = Outcome("speed layer, Kappa job, archiver", "their 3 pods deleted mid-stream")
    faults.outcomes.append(outcome)
    before = _restarts(kube)
    old = {c: _uids(kube, c) for c in STREAMS}
    assert all(old.values()), old
    faults.produce_part()
    started = time.monotonic()
    _delete(kube, f"{COMPONENT} in ({','.join(STREAMS)})")
    back: dict[str, float] = {}  # seconds from the deletion until each one's new pod is Ready

    def all_back() -> bool:
        for c in STREAMS:
            if c not in back and _replaced(kube, c, old[c])():
                back[c] = time.monotonic() - started
        return len(back) == len(STREAMS)

    wait_for("a new pod of each stream Ready", all_back, BACK_S)
    outcome.back = "new pods Ready: " + ", ".join(f"{c} {back[c]:.0f} s" for c in STREAMS)
    faults.until_exact(outcome, started)
    outcome.restarted = _restarted(before, _restarts(kube))


@pytest.mark.parametrize("store", STORES)
def test_a_deleted_store_pod_comes_back_with_its_data_and_the_views_exact(
    faults: Faults, store: str
) -> None:
    kube = faults.kube
    what = {"postgres": "Postgres (serving store, checkpoints' offsets, Airflow's database)",
            "kafka": "Kafka (the log; KRaft)",
            "minio": "MinIO (master dataset, checkpoints, task logs)"}[store]  # fmt: skip
    outcome = Outcome(what, "its StatefulSet's pod deleted mid-stream")
    faults.outcomes.append(outcome)
    before = _restarts(kube)
    old = _uids(kube, store)
    faults.produce_part()
    started = time.monotonic()
    _delete(kube, f"{COMPONENT}={store}")
    answers: Counter[str] = Counter()
    replaced = _replaced(kube, store, old)

    def back_while_reading() -> bool:
        answers[_api_answer(faults.reader)] += 1  # what a reader meets meanwhile
        return replaced()

    back = wait_for(f"a new {store} pod Ready", back_while_reading, BACK_S)
    ready = back + _wait_release_ready(kube, BACK_S)
    outcome.back = f"pod Ready {back:.0f} s, whole release Ready {ready:.0f} s"
    outcome.note = "reads meanwhile: " + ", ".join(f"{a} ({n})" for a, n in sorted(answers.items()))
    # The API reads Postgres alone: without it, a 503 with the reason (never a wrong or empty
    # answer, never a hang); without the log or the object store, every answer as before.
    if store == "postgres":
        assert "503" in answers and set(answers) <= {"200", "503"}, answers
    else:
        assert set(answers) == {"200"}, answers
    faults.until_exact(outcome, started)
    outcome.restarted = _restarted(before, _restarts(kube))


def test_a_node_restart_keeps_the_release_and_its_data(
    faults: Faults, airflow: ForwardedAirflow
) -> None:
    """`lk cluster down` kills every container and stops the node; `lk cluster up` starts it
    again on the kept etcd and volumes: the release comes back by itself, as after a reboot."""
    kube = faults.kube
    outcome = Outcome("the node", "`lk cluster down`, `lk cluster up` (etcd, volumes kept)")
    faults.outcomes.append(outcome)
    volumes = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pvc")}
    before = _restarts(kube)
    faults.produce_part()
    assert len(faults.produced) == PARTS, "every part is in the log before the node goes"
    faults.producer.delete(wait=True)  # its pod would not come back (restartPolicy Never)
    faults.reader.close()
    airflow.close()
    started, wall = time.monotonic(), datetime.now(UTC)
    for action, timeout in (("down", 600), ("up", 1800)):
        result = run_lk("cluster", action, timeout=timeout)
        assert result.returncode == 0, f"lk cluster {action}: {result.stderr[-2000:]}"
    up = time.monotonic() - started
    ready = up + _wait_release_ready(kube, BACK_S, since=wall)
    outcome.back = f"node up {up:.0f} s, whole release Ready {ready:.0f} s"
    airflow.reconnect()
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pvc")} == volumes
    faults.until_exact(outcome, started)
    outcome.restarted = _restarted(before, _restarts(kube))


def test_after_the_faults_every_view_equals_the_oracle_of_the_whole_log(faults: Faults) -> None:
    assert [o.exact_s is not None for o in faults.outcomes] == [True] * FAULTS, faults.table()
    expected = faults.expected()
    assert len(faults.produced) == PARTS
    _, answers = wait_until_exact(faults.reader, expected, EXACT_S)
    for architecture in ARCHITECTURES:
        meta = answers[architecture]["page_views"]["meta"]
        assert meta["architecture"] == architecture
        assert meta["quarantined"] == expected.quarantined, (architecture, meta)
        assert meta["late_dropped"] == 0, (architecture, meta)
    assert answers["lambda"]["page_views"]["meta"]["batch_cutoff"] is not None
