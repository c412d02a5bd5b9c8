"""The chart on a real cluster, in the order a user goes: install, produce a workload, run the
batch layer through Airflow with Spark on Kubernetes, read every view through the serving
Service, reprocess Kappa from the UI, change architecture with `helm upgrade`, uninstall.

Each test builds on the one before (one release per run, `--k8s-architecture`); a test that
does not apply to the installed architecture is not collected (conftest).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from comparison.figures import ComparisonRun
from core import workload
from core.catalog import VIEW_NAMES
from core.oracle import OracleResult, load_jsonl_values, load_profiles_jsonl
from core.settings import Settings
from infra import dashboard as grafana
from infra.cluster import compare
from quality.context import safe_run_name
from tests import dashboard
from tests.airflow_api import AirflowApi
from tests.comparison_checks import BusyLoops, check_report_in_a_browser, check_run
from tests.k8s import netprobe
from tests.k8s.comparison_run import CheckerPod, LogLines
from tests.k8s.conftest import RELEASE, helm_install
from tests.k8s.faults import BATCH_STEP, BatchFault, Outcome, lambda_version
from tests.k8s.kube import Kube
from tests.k8s.prometheus_api import PrometheusApi
from tests.k8s.serving_views import ServingReader, difference, wait_until_exact
from tests.serving_pages import ANSWERS, oracle_answers, read_whole

BATCH_DAG = "lambda_batch"
REPROCESS_DAG = "kappa_reprocess"
DAG_RUN_TIMEOUT_S = 1800
CONVERGE_TIMEOUT_S = 900
COMPARISON_TIMEOUT_S = 3600
STORE_WAIT_S = 180
SERVING = f"svc/{RELEASE}-serving"
COMPONENT = "app.kubernetes.io/component"
VIEWS = VIEW_NAMES  # all eight
BATCH_RUNS: list[str] = []
"""The `lambda_batch` runs the tests triggered (the observability tests read what they left)."""


def _architectures(installed: str) -> tuple[str, ...]:
    return ("lambda", "kappa") if installed == "both" else (installed,)


def _component_ready(pod: dict[str, Any]) -> bool:
    conditions = pod["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.mark.usefixtures("prometheus")  # scraping from here on
def test_every_pod_becomes_ready_and_helm_test_passes(kube: Kube, release: str) -> None:
    # The release's own pods; Spark's executor pods belong to their drivers, not to the chart.
    pods = kube.items("pods", "-l", f"app.kubernetes.io/instance={RELEASE}")
    pods = [p for p in pods if p["metadata"]["labels"].get(COMPONENT) != "spark-executor"]
    running = [p for p in pods if p["status"]["phase"] != "Succeeded"]
    not_ready = [p["metadata"]["name"] for p in running if not _component_ready(p)]
    assert not not_ready, f"pods not Ready after helm install --wait: {not_ready}"
    components = {p["metadata"]["labels"].get(COMPONENT) for p in running}
    expected = {"kafka", "minio", "postgres", "serving"}
    if release in ("lambda", "both"):
        expected |= {"archiver", "speed-layer", "airflow-scheduler", "airflow-api-server"}
    if release in ("kappa", "both"):
        expected |= {"kappa-stream", "airflow-scheduler"}
    assert expected <= components, f"missing components: {expected - components}"
    out = kube.helm("test", RELEASE, timeout=900)
    assert "Phase:          Succeeded" in out or "Succeeded" in out, out


# -- NetworkPolicies, enforced (lk cluster up runs kube-network-policies) ------------------------

PROBE_NAMESPACE = "lk-netprobe"
_STORES = {"kafka": 9092, "minio": 9000, "postgres": 5432}
# What each long-running component connects to (templates/_networkpolicy.tpl's matrix), and
# what it must not reach: the serving API reads Postgres alone.
_ADMITTED = {
    "archiver": {"kafka", "minio", "postgres"},
    "speed-layer": {"kafka", "minio", "postgres"},
    "kappa-stream": {"kafka", "minio", "postgres"},
    "airflow-scheduler": {"kafka", "minio", "postgres"},
    "airflow-api-server": {"minio", "postgres"},
    "spark-history": {"minio"},
    "serving": {"postgres"},
}


def _store(kind: str) -> str:
    return f"{RELEASE}-{kind}"


def test_network_policies_admit_every_connection_the_release_makes(
    kube: Kube, release: str
) -> None:
    running = {
        p["metadata"]["labels"].get(COMPONENT)
        for p in kube.items("pods", "-l", f"app.kubernetes.io/instance={RELEASE}")
        if p["status"].get("phase") == "Running"
    }
    tried = {}
    for component, admitted in _ADMITTED.items():
        if component not in running:
            continue
        for store, port in _STORES.items():
            tried[(component, store)] = netprobe.app_pod_connects(
                kube, component, _store(store), port
            )
            assert tried[(component, store)] == (store in admitted), (component, store, tried)
    assert ("serving", "postgres") in tried, sorted(running)  # the release was there
    # A producer outside the release's components (the tests' own, the README's `lk produce`),
    # which is also the application writing its user table (`lk profiles`)
    with netprobe.probe_pod(kube, "lk-probe-producer", {"lambda-kappa.io/producer": "true"}):
        assert netprobe.probe_connects(kube, "lk-probe-producer", _store("kafka"), 9092)
        assert netprobe.probe_connects(kube, "lk-probe-producer", _store("postgres"), 5432)


def test_network_policies_refuse_what_they_do_not_admit(kube: Kube, release: str) -> None:
    # A pod with no labels, and one labelled as the release's but as no client of a store
    for name, labels in (
        ("lk-probe-bare", {}),
        ("lk-probe-stranger", {"app.kubernetes.io/instance": RELEASE,
                               "app.kubernetes.io/component": "probe"}),
    ):  # fmt: skip
        with netprobe.probe_pod(kube, name, labels):
            for store, port in _STORES.items():
                assert not netprobe.probe_connects(kube, name, _store(store), port), (name, store)
    # The serving pod cannot reach MinIO (tried with the rest in the test above), nor Kafka
    # Connect's REST port, which only the comparison Job reaches
    assert not netprobe.app_pod_connects(kube, "serving", _store("minio"), 9000)
    assert not netprobe.app_pod_connects(kube, "serving", _store("connect"), 8083)
    # A pod outside the release's namespace, even labelled as its serving pod, cannot reach
    # Postgres; the same labels inside the namespace can (the probe itself works).
    serving = {"app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/component": "serving"}
    postgres = _store("postgres")
    kube.run([kube.kubectl_bin, "create", "namespace", PROBE_NAMESPACE], check=False)
    try:
        with netprobe.probe_pod(kube, "lk-probe-outside", serving, PROBE_NAMESPACE):
            host = netprobe.service_host(kube, postgres, PROBE_NAMESPACE)
            assert not netprobe.probe_connects(
                kube, "lk-probe-outside", host, 5432, PROBE_NAMESPACE
            )
        with netprobe.probe_pod(kube, "lk-probe-inside", serving):
            assert netprobe.probe_connects(kube, "lk-probe-inside", postgres, 5432)
    finally:
        kube.run(
            [kube.kubectl_bin, "delete", "namespace", PROBE_NAMESPACE, "--wait=false"], check=False
        )


# -- the workload (conftest's `oracle`) and Airflow (conftest's `airflow`) ----------------------


@dataclass
class PodWatch:
    """Every pod of the release's Spark steps and executors seen during a window of time."""

    kube: Kube
    selector: str = "app.kubernetes.io/component in (spark-step,spark-executor)"
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                for pod in self.kube.items("pods", "-l", self.selector):
                    self._record(pod)
            except AssertionError:
                pass  # a transient API error; the next poll sees the pod again
            self._stop.wait(1.0)

    def _record(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        entry = self.seen.setdefault(
            name,
            {"component": pod["metadata"]["labels"].get(COMPONENT),
             "step": pod["metadata"]["labels"].get("lambda-kappa.io/step"),
             "running": False, "exit_codes": {}},
        )  # fmt: skip
        for status in pod["status"].get("containerStatuses", []):
            state = status.get("state", {})
            if "running" in state:
                entry["running"] = True
            if "terminated" in state:
                entry["running"] = True
                entry["exit_codes"][status["name"]] = state["terminated"]["exitCode"]

    def __enter__(self) -> PodWatch:
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def of(self, component: str) -> dict[str, dict[str, Any]]:
        return {n: e for n, e in self.seen.items() if e["component"] == component}


@pytest.mark.architectures("lambda", "both")
def test_lambda_batch_through_rest_on_driver_and_executor_pods_survives_its_driver_deleted(
    kube: Kube,
    airflow: AirflowApi,
    oracle: OracleResult,
    release: str,
    fault_outcomes: list[Outcome],
) -> None:
    """`lambda_batch` triggered through REST, each Spark step a driver pod that starts executor
    pods; while its compute step's Spark job writes the version, that driver pod is deleted
    (the fault suite's fault on a batch: this one run serves both). The half-written version is
    never served, Airflow's retry finishes the run, and every view is exact again."""
    airflow.wait_for_dag(BATCH_DAG)
    airflow.unpause(BATCH_DAG)
    outcome = Outcome(
        f"{BATCH_DAG}'s {BATCH_STEP} driver pod",
        "deleted while its Spark job (with its executors) writes the batch version",
    )
    fault_outcomes.append(outcome)
    with PodWatch(kube) as pods, ServingReader(kube) as reader:
        published = lambda_version(reader)
        run_id = airflow.trigger(BATCH_DAG)
        fault = BatchFault(kube, airflow, run_id)
        fault.start()
        deleted_at = fault.join()
        run = airflow.wait_for_run(BATCH_DAG, run_id, DAG_RUN_TIMEOUT_S)
        took = time.monotonic() - deleted_at
        states = airflow.task_states(BATCH_DAG, run_id)
        task = airflow.task_instance(BATCH_DAG, run_id, "compute_views")
        outcome.back = f"try {task['try_number']} of compute_views; run {run['state']} {took:.0f} s"
        assert run["state"] == "success", states
        BATCH_RUNS.append(run_id)
        assert task["try_number"] >= 2, (
            f"the deleted pod's try was not the one that succeeded: {task}"
        )
        assert set(states.values()) == {"success"}, states
        # Until the retry published it, readers kept what they were served before the run.
        assert fault.served == [published] * 2, (published, fault.served)
        wait_until_exact(reader, oracle, CONVERGE_TIMEOUT_S, architectures=_architectures(release))
        outcome.exact_s = time.monotonic() - deleted_at
        now = lambda_version(reader)
        assert now is not None and (published is None or now > published), (published, now)
        before = "no batch" if published is None else f"v{published}"
        outcome.note = f"served: {before} until the retry published v{now}"
    drivers, executors = pods.of("spark-step"), pods.of("spark-executor")
    # Each Spark step ran as a driver pod whose `base` container completed (exit 0), on its
    # first try or on a retry (tasks are idempotent and retried) ...
    done = {d["step"] for d in drivers.values() if d["exit_codes"].get("base") == 0}
    assert {"close-archive", "compute-views"} <= done, drivers
    # The hand-off needs no Spark (it recomputes on DuckDB): `publish` runs in the scheduler.
    assert "publish" not in {d["step"] for d in drivers.values()}, drivers
    # ... and started its executors as pods (named after the step's Spark application, unlike
    # the stream drivers' executors), which ran and were removed with their driver.
    ran = {n for n, e in executors.items() if n.startswith("lk-step-") and e["running"]}
    assert ran, f"no executor pod of a step ran: {sorted(executors)}"
    left = kube.names("pods", "-l", f"{COMPONENT}=spark-executor")
    assert not {n for n in left if n.startswith("lk-step-")}, f"executors left behind: {left}"


@pytest.mark.architectures("lambda", "both")
def test_the_batch_steps_log_no_error(airflow: AirflowApi) -> None:
    """A clean run logs no error: not Spark's pod watch (the API server on etcd 3.6 answers its
    watch progress requests), not the XCom sidecar's end, not the driver's own lines."""
    run_id = _batch_run()
    found = {}
    for task, state in airflow.task_states(BATCH_DAG, run_id).items():
        if state != "success":
            continue
        try_number = airflow.task_instance(BATCH_DAG, run_id, task)["try_number"]
        entries = airflow.task_log_entries(BATCH_DAG, run_id, task, try_number)
        errors = [
            str(e.get("event", ""))[:300]
            for e in entries
            if str(e.get("level", "")).lower() in ("error", "critical")
            or _SPARK_ERROR.search(str(e.get("event", "")))
        ]
        found[task] = len(entries)
        assert not errors, f"{task} (try {try_number}) logged errors:\n" + "\n".join(errors[:10])
    assert {"close_archive", "compute_views"} <= set(found), found


_SPARK_ERROR = re.compile(r"\b(ERROR|FATAL)\b")
"""A log4j line's level (`26/11/28 22:17:35 ERROR AbstractWatchManager: ...`), in the step
pod's output that the operator copies into the task's log."""


# -- serving -----------------------------------------------------------------------------------


def _answering(client: httpx.Client, path: str, **params: str) -> httpx.Response:
    """`path`'s first answer that is not a 503: the API answers 503, with the reason, while the
    store is away (on a node at load 13-17, Postgres's readiness probe timed out and the Service
    dropped it for a while); what the tests check is the data once it is back."""
    deadline = time.monotonic() + STORE_WAIT_S
    while True:
        response = client.get(path, params=params)
        if response.status_code != 503 or time.monotonic() > deadline:
            return response
        time.sleep(3)


def _served(url: str, view: str, architecture: str) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=30) as client:
        _answering(client, f"/v1/views/{view}", architecture=architecture, limit="1")
        return read_whole(client.get, view, architecture=architecture)


def _wait_until_exact(
    kube: Kube, url: str, architecture: str, oracle: OracleResult
) -> dict[str, Any]:
    """Poll the serving API until every view of `architecture`, and the pattern view's matches,
    equal the oracle's; the answers."""
    deadline = time.monotonic() + CONVERGE_TIMEOUT_S
    expected = oracle_answers(oracle)
    while True:
        answers = {name: _served(url, name, architecture) for name in ANSWERS}
        if all(answers[n]["rows"] == expected[n] for n in ANSWERS):
            return answers
        if time.monotonic() > deadline:
            off = [n for n in ANSWERS if answers[n]["rows"] != expected[n]]
            why = "\n".join(difference(n, answers[n], expected[n]) for n in off)
            raise AssertionError(
                f"{architecture}: views still differ from the oracle: {off}\n{why}\n"
                + _streams_state(kube)
            )
        time.sleep(5)


def _streams_state(kube: Kube) -> str:
    """The release's pods with their restarts, and the last lines of each stream's log (of its
    previous container too, when it restarted): what a failed wait for the views needs."""
    lines = []
    for node in kube.items("nodes"):
        # DiskPressure or MemoryPressure evicts pods: the disk is shared with the VM's others.
        conditions = [c["type"] for c in node["status"]["conditions"] if c["status"] == "True"]
        lines.append(f"node {node['metadata']['name']}: {conditions}")
    for pod in kube.items("pods", "-l", f"app.kubernetes.io/instance={RELEASE}"):
        restarts = sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", []))
        reason = pod["status"].get("reason", "")  # Evicted, with the pressure in its message
        lines.append(
            f"{pod['metadata']['name']}: {pod['status']['phase']} {reason}, {restarts} restarts"
        )
    for component in ("archiver", "speed-layer", "kappa-stream"):
        selector = f"{COMPONENT}={component}"
        for previous in ("--previous=false", "--previous=true"):
            tail = kube.kubectl(
                "logs", "-l", selector, "--all-containers", "--tail=30", previous, check=False
            )
            lines.append(f"-- {component} {previous}:\n{tail.strip()}")
    return "\n".join(lines)


def test_every_view_served_through_the_service_equals_the_oracle(
    kube: Kube, release: str, oracle: OracleResult
) -> None:
    with kube.port_forward(SERVING, 8000) as url:
        for architecture in _architectures(release):
            answers = _wait_until_exact(kube, url, architecture, oracle)
            meta = answers["page_views"]["meta"]
            assert meta["architecture"] == architecture
            assert meta["quarantined"] == oracle.quarantined
            assert meta["late_dropped"] == 0
            if architecture == "lambda":
                assert meta["batch_cutoff"] is not None  # the batch run above published


@pytest.mark.architectures("kappa", "both")
def test_kappa_reprocess_clicked_in_the_ui_switches_readers_atomically(
    kube: Kube, airflow: AirflowApi, oracle: OracleResult, workdir: Path
) -> None:
    airflow.wait_for_dag(REPROCESS_DAG)
    airflow.unpause(REPROCESS_DAG)
    with kube.port_forward(SERVING, 8000) as url:
        # The live answer is exact first (the test before checks it only when it applies).
        before = _wait_until_exact(kube, url, "kappa", oracle)["page_views"]["meta"]["view_version"]
        # Each read's version, with its answer when that was not the oracle's.
        seen: list[tuple[int, dict[str, Any] | None]] = []
        stop = threading.Event()

        def read_throughout() -> None:
            # A reader during the whole reprocessing: always a complete, exact answer.
            while not stop.is_set():
                body = _served(url, "page_views", "kappa")
                exact = body["rows"] == oracle.views["page_views"]
                seen.append((body["meta"]["view_version"], None if exact else body))
                stop.wait(2)

        reader = threading.Thread(target=read_throughout, daemon=True)
        reader.start()
        try:
            run = airflow.click_trigger(
                REPROCESS_DAG,
                # The trigger form explains the param: its title, choices and description.
                expect_form_text=("Logic version", "The view logic the new Kappa version computes"),
                screenshot=workdir / "trigger.png",
            )
            assert run["conf"] == {"logic_version": "1"}  # the form's default
            done = airflow.wait_for_run(REPROCESS_DAG, run["dag_run_id"], DAG_RUN_TIMEOUT_S)
        finally:
            stop.set()
            reader.join(timeout=60)
        assert done["state"] == "success", airflow.task_states(REPROCESS_DAG, run["dag_run_id"])
        after = _served(url, "page_views", "kappa")["meta"]["view_version"]
        assert after == before + 1
        inexact = [(version, body) for version, body in seen if body is not None]
        assert not inexact, (
            f"a reader saw an answer that is not the oracle's, of versions "
            f"{[version for version, _ in inexact]} "
            f"(before {before}, after {after}, {len(seen)} reads)\n"
            + difference("page_views", inexact[-1][1], oracle.views["page_views"])
            + "\n"
            + _streams_state(kube)
        )
        assert {v for v, _ in seen} <= {before, after}
        _wait_until_exact(kube, url, "kappa", oracle)


# -- observability: metrics, dashboard, Spark's history, task logs, Data Docs -------------------

SCRAPED = {"kafka", "connect", "minio", "postgres", "serving", "statsd-exporter"}
"""Components every architecture's release exports metrics from; the streams' by architecture."""
STREAMS = {"lambda": {"archiver", "speed-layer"}, "kappa": {"kappa-stream"}}
HISTORY = f"svc/{RELEASE}-spark-history"
QUALITY_DAG = "data_quality"


def _batch_run() -> str:
    assert BATCH_RUNS, "no lambda_batch run: the batch test above failed or did not run"
    return BATCH_RUNS[-1]


def _down(targets: list[dict[str, Any]]) -> list[str]:
    return [
        f"{t['labels'].get('pod')} {t['scrapeUrl']}: {t['health']} {t.get('lastError', '')}"
        for t in targets
        if t["health"] != "up"
    ]


@pytest.mark.architectures("both")
def test_prometheus_scrapes_every_component_by_the_charts_annotations(
    kube: Kube, prometheus: Callable[[], AbstractContextManager[PrometheusApi]], release: str
) -> None:
    expected = SCRAPED | set().union(*(STREAMS[a] for a in _architectures(release)))
    with prometheus() as api:

        def all_up() -> list[dict[str, Any]]:
            targets = api.targets()
            components = {t["labels"].get("component") for t in targets}
            return targets if expected <= components and not _down(targets) else []

        try:
            targets = api.wait_for("every target up", all_up, timeout_s=300)
        except AssertionError:
            targets = api.targets()
            found = {t["labels"].get("component") for t in targets}
            raise AssertionError(
                f"missing {sorted(expected - found)}; down: {_down(targets)}"
            ) from None
        # Each scraped pod is a target once: the annotations name one port per pod.
        pods = [t["labels"]["pod"] for t in targets]
        assert len(pods) == len(set(pods)), pods
        for architecture in _architectures(release):
            fresh = api.wait_for(
                f"lk_stream_freshness_seconds of {architecture}",
                lambda a=architecture: api.query(
                    f'lk_stream_freshness_seconds{{architecture="{a}"}}'
                ),
            )
            assert float(fresh[0]["value"][1]) >= 0, fresh


@pytest.mark.architectures("both")
def test_every_metric_the_dashboard_queries_is_exported_by_the_release(
    kube: Kube,
    prometheus: Callable[[], AbstractContextManager[PrometheusApi]],
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _batch_run()  # the batch and quality metrics exist once a batch has run
    wanted = dashboard.queried_metrics(dashboard.load())
    with prometheus() as api:

        def missing() -> dict[str, list[str]]:
            names = api.names()
            return {m: sorted(t) for m, t in wanted.items() if m not in names}

        left = missing()
        deadline = time.monotonic() + 120  # one more scrape of what the last tests made
        while left and time.monotonic() < deadline:
            time.sleep(10)
            left = missing()
        # The README's picture of the dashboard: its panels from this Prometheus (infra.dashboard).
        preview = workdir / "grafana-dashboard.png"
        with_data = grafana.draw(grafana.load(), grafana.prometheus_range(api.url, 30), preview)
    with capsys.disabled():  # the issue asks what the metrics path costs: the run's figures
        print("\n" + _observability_usage(kube))
    assert not left, f"queried by the dashboard, exported by nothing: {left}"
    shown = [p for p in grafana.panels(grafana.load()) if p["type"] != "row"]
    assert with_data >= len(shown) * 3 // 4, f"{with_data} of {len(shown)} panels have data"


OBSERVABILITY_CONTAINERS = {
    "exporter",
    "statsd-exporter",
    "spark-history",
    "prometheus",
    "discovery",
}
"""What watching the release adds: the exporters, the History Server, the test's Prometheus."""


def _observability_usage(kube: Kube) -> str:
    """CPU and memory of the observability containers now, from the kubelet's summary API."""
    node = next(iter(kube.names("nodes")))
    summary = json.loads(kube.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/stats/summary"))
    lines = ["observability containers: CPU (millicores, now) and memory (working set)"]
    for pod in summary["pods"]:
        for c in pod.get("containers", []):
            if c["name"] in OBSERVABILITY_CONTAINERS:
                cpu = (c.get("cpu") or {}).get("usageNanoCores", 0) / 1e6
                mem = (c.get("memory") or {}).get("workingSetBytes", 0) / 2**20
                lines.append(f"  {pod['podRef']['name'][:40]:40} {c['name']:16} "
                             f"{cpu:6.1f}m {mem:6.0f} MiB")  # fmt: skip
    return "\n".join(lines)


@pytest.mark.architectures("lambda", "both")
def test_the_spark_history_server_lists_the_batch_and_replay_applications(
    kube: Kube, release: str
) -> None:
    """The batch's steps, and (with Kappa) the reprocess's replay round, each a Spark
    application whose executors, pods of their own, ran its tasks: the replay is as parallel
    as the batch."""
    _batch_run()
    expected = {"close-archive", "compute-views"}
    on_executors = {"compute-views"}
    if "kappa" in _architectures(release):
        expected.add("kappa-replay-round")
        on_executors.add("kappa-replay-round")
    with kube.port_forward(HISTORY, 18080) as url:

        def applications() -> list[dict[str, Any]]:
            response = httpx.get(f"{url}/api/v1/applications", timeout=30)
            response.raise_for_status()
            return list(response.json())

        deadline = time.monotonic() + 180  # the server rescans its log folder every 10 s
        apps: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            apps = applications()
            if expected <= {_step_of(a["name"]) for a in apps}:
                break
            time.sleep(10)
        names = sorted(a["name"] for a in apps)
        assert expected <= {_step_of(n) for n in names}, names
        # Driver <-> executor traffic, through the NetworkPolicies: the executors ran tasks
        # the driver sent them and sent back their results.
        for step in on_executors:
            done: dict[str, int] = {}
            for app in (a for a in apps if _step_of(a["name"]) == step):
                executors = httpx.get(
                    f"{url}/api/v1/applications/{app['id']}/allexecutors", timeout=30
                ).json()
                done |= {e["id"]: e["completedTasks"] for e in executors if e["id"] != "driver"}
            assert any(done.values()), f"{step}: no executor completed a task: {done}"


def _step_of(app_name: str) -> str:
    """The step of a Spark application's name (`lk step compute-views` names it after it)."""
    return app_name.removeprefix("lk-").removeprefix("step-")


@pytest.mark.architectures("lambda", "both")
def test_a_task_log_with_its_step_pods_output_survives_the_scheduler_restart(
    kube: Kube, airflow: AirflowApi
) -> None:
    run_id = _batch_run()
    task = airflow.task_instance(BATCH_DAG, run_id, "compute_views")
    before = airflow.task_log(BATCH_DAG, run_id, "compute_views", task["try_number"])
    pods_output = _step_output(before)
    assert pods_output, f"no line of the step pod's output in the task's log:\n{before[-3000:]}"
    scheduler = f"{COMPONENT}=airflow-scheduler"
    old = kube.names("pods", "-l", scheduler)
    kube.kubectl("delete", "pod", "-l", scheduler, "--wait=true")
    kube.kubectl(
        "rollout", "status", f"deployment/{RELEASE}-airflow-scheduler", "--timeout=600s",
        timeout=660,
    )  # fmt: skip
    assert not old & kube.names("pods", "-l", scheduler)
    after = airflow.task_log(BATCH_DAG, run_id, "compute_views", task["try_number"])
    lost = [line for line in pods_output if line not in after]
    assert not lost, f"lost with the scheduler's pod: {lost[:5]}\nnow:\n{after[-3000:]}"


def _step_output(log: str) -> list[str]:
    """The lines of a task's log that its step pod wrote: KubernetesPodOperator copies them in
    with the container's name in brackets (`[base] ...`)."""
    return [line for line in log.splitlines() if "[base]" in line]


@pytest.mark.architectures("lambda", "both")
def test_the_data_docs_hold_the_batch_layers_gates(kube: Kube, airflow: AirflowApi) -> None:
    batch = _batch_run()
    airflow.wait_for_dag(QUALITY_DAG)
    airflow.unpause(QUALITY_DAG)
    run_id = airflow.trigger(QUALITY_DAG)
    run = airflow.wait_for_run(QUALITY_DAG, run_id, DAG_RUN_TIMEOUT_S)
    states = airflow.task_states(QUALITY_DAG, run_id)
    # Every task: the run's own state follows its last task alone (Data Docs run all_done).
    assert run["state"] == "success" and set(states.values()) == {"success"}, states
    with kube.port_forward(SERVING, 8000) as url, httpx.Client(base_url=url, timeout=30) as api:
        quality = _answering(api, "/v1/quality").json()
    docs = quality["data_docs"]
    path = docs.split("//", 1)[1].split("/", 1)[1]  # the site's path on MinIO
    with kube.port_forward(f"svc/{RELEASE}-minio", 9000) as minio:
        index = httpx.get(f"{minio}/{path}", timeout=30)  # anonymous, as a browser
    assert index.status_code == 200, (docs, index.status_code)
    # The landing page's table of the latest result per suite: the batch run's gates, which ran
    # in its step pods, are there with that run's name.
    rows = re.findall(r"<tr>.*?</tr>", index.text, flags=re.DOTALL)
    of_the_batch = [row for row in rows if safe_run_name(batch) in row or batch in row]
    suites = " ".join(of_the_batch)
    assert "master_partition" in suites, (batch, rows)
    assert "batch_views." in suites, (batch, rows)


# -- the side-by-side comparison -----------------------------------------------------------------


@pytest.mark.architectures("both")
def test_the_comparison_job_plays_every_scenario_on_a_busy_node_and_its_report_holds(
    kube: Kube, release: str, workdir: Path
) -> None:
    """`make cluster-compare`'s path: a Job from the chart's CronJob runs `lk compare` (a small
    workload, every scenario but the logic change: conftest's values) with two CPU-bound loops
    on the node beside its feed; it publishes to the cluster's MinIO and records the report for
    GET /v1/comparison. What the run shows is checked as `make test-compare` checks `lk demo`
    (`tests/comparison_checks.py`): its numbers against the log, the run's store and the oracle,
    read from a pod with the Job's identity; the report opens in Chromium through a
    port-forward, as NOTES.txt says."""
    kubectl = compare.Kubectl((kube.kubectl_bin, "--namespace", kube.namespace), kube.env())
    loops = BusyLoops()
    try:
        with compare.streams_paused(kubectl, RELEASE, lambda _line: None):  # as make's target
            name = compare.start(kubectl)
            with LogLines(kube, name, "comparison", loops.line):
                job = compare.follow(
                    kubectl, name, lambda _line: None, timeout_s=COMPARISON_TIMEOUT_S
                )
    finally:
        loops.stop()
    assert job.succeeded, job.log[-4000:]
    assert "Traceback" not in job.log
    assert loops.cpu_seconds > 0  # the loops ran beside the feed
    assert job.report_url is not None and job.report_path is not None, job.log[-2000:]
    with kube.port_forward(f"svc/{RELEASE}-minio", 9000) as minio:
        page = httpx.get(minio + job.report_path, timeout=30)  # anonymous, like a browser
        assert page.status_code == 200
        numbers = httpx.get(minio + job.report_path.replace("report.html", "comparison.json"))
        assert numbers.status_code == 200
        (workdir / "comparison.json").write_bytes(numbers.content)
        run = ComparisonRun.read(workdir / "comparison.json")
        # The app image has no Helm SDK: the chart's weight is `lk demo`'s figure alone.
        assert not run.chart_weight and "the chart's weight is not measured here" in job.log
        check_report_in_a_browser(minio + job.report_path, unmeasured=("fig-weight",))

    # The workload, generated again from what the run recorded of it (deterministic).
    events = workdir / "comparison-events.jsonl"
    profiles = workload.default_profiles_path(events)
    delay_ms = run.workload["watermark_delay_minutes"] * 60_000
    spec = workload.WorkloadSpec(
        seed=run.workload["seed"], events=run.workload["events"], watermark_delay_ms=delay_ms
    )
    workload.generate(spec, events, profiles)
    with CheckerPod(kube, RELEASE) as checker:
        state, logged = checker.snapshot(run.workload["namespace"])
    # The compaction scenario's resend: each partition's last profile, stamped at the run.
    changes = load_profiles_jsonl(profiles)
    latest = max(change.updated_ts for change in changes)
    changes += [change for change in logged if change.updated_ts > latest]
    check_run(run, page.text, load_jsonl_values(events), changes, state, delay_ms, in_a_pod=True)

    with kube.port_forward(SERVING, 8000) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            listed = _answering(client, "/v1/comparison")
        why = listed.text + "\n" + _log_tail(kube, SERVING)  # the API logs the store's error
        assert listed.status_code == 200, why
        assert listed.json()["report"] == job.report_url, why


def _log_tail(kube: Kube, target: str) -> str:
    return kube.kubectl("logs", target, "--all-containers", "--tail=40", check=False)


# -- upgrades and uninstall --------------------------------------------------------------------


def _volumes(kube: Kube) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pvc")}


def _store_pods(kube: Kube) -> dict[str, str]:
    """The log's and the stores' pods, by name: their uids (a replaced pod has a new one)."""
    pods = kube.items("pods", "-l", f"{COMPONENT} in (kafka,minio,postgres)")
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def _snapshot(kube: Kube, architectures: tuple[str, ...]) -> dict[tuple[str, str], Any]:
    with kube.port_forward(SERVING, 8000) as url:
        return {(arch, view): _served(url, view, arch) for arch in architectures for view in VIEWS}


@pytest.mark.architectures("both")
def test_helm_upgrade_lambda_kappa_both_keeps_the_data(
    kube: Kube, cluster_settings: Settings, image_tag: str, oracle: OracleResult
) -> None:
    """The volumes (log, object store, serving store) survive a change of architecture, the
    log's and the stores' pods run on untouched (only the pods whose work changes are
    replaced), and each architecture serves what it served before, once it is deployed
    again."""
    volumes = _volumes(kube)
    stores = _store_pods(kube)
    before = _snapshot(kube, ("lambda", "kappa"))
    for architecture in ("lambda", "kappa", "both"):
        helm_install(kube, cluster_settings, architecture, image_tag)
        assert _volumes(kube) == volumes, f"volumes changed on the upgrade to {architecture}"
        assert _store_pods(kube) == stores, f"a store restarted on the upgrade to {architecture}"
        now = _snapshot(kube, _architectures(architecture))
        for key, answer in now.items():
            assert answer["rows"] == before[key]["rows"], (architecture, key)
            assert answer["meta"]["view_version"] == before[key]["meta"]["view_version"], key


def test_helm_uninstall_leaves_only_what_the_chart_keeps(kube: Kube, release: str) -> None:
    kube.helm("uninstall", RELEASE, "--wait", timeout=900)
    deadline = time.monotonic() + 300
    while kube.names("pods") and time.monotonic() < deadline:
        time.sleep(3)
    assert not kube.names("pods")
    left = set()
    for kind in ("deployments", "statefulsets", "jobs", "services", "configmaps", "secrets",
                 "serviceaccounts", "roles", "rolebindings", "pvc"):  # fmt: skip
        left |= {f"{kind}/{name}" for name in kube.names(kind)}
    left -= {"configmaps/kube-root-ca.crt", "serviceaccounts/default"}
    kept = {f"secrets/{RELEASE}-credentials", f"configmaps/{RELEASE}-kafka"}
    volumes = {name for name in left if name.startswith("pvc/")}
    # NOTES.txt: the credentials Secret and the data volumes stay (a reinstall reuses them).
    assert left == kept | volumes, left - kept - volumes
    assert volumes, "the data volumes were deleted"
