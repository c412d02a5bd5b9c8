"""The DAGs parse in every architecture and with both backends, without touching a service.

Parsing is what Airflow's DAG processor does every few seconds: it must import nothing heavy,
open no connection, and give each deployment exactly its DAGs. With the `kubernetes` backend
the Spark steps become KubernetesPodOperators; their pod spec is built here (no cluster) and
validated against the Kubernetes schema, and the command each pod runs is checked.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.charts.chart_utils import CI_DIR, load_values, render
from tests.conftest import ROOT

DAGS = ROOT / "dags"
ALL_DAGS = {"lambda_batch", "lambda_reprocess", "kappa_reprocess", "data_quality"}
EXPECTED = {
    "lambda": {"lambda_batch", "lambda_reprocess", "data_quality"},
    "kappa": {"kappa_reprocess", "data_quality"},
    "both": ALL_DAGS,
}
SPARK_TASKS = {
    "lambda_batch": ["close_archive", "validate_raw", "compute_views", "validate_views"],
    "lambda_reprocess": ["validate_raw", "compute_views", "validate_views"],
    # The switch: a version found behind the live one replays one more round first.
    "kappa_reprocess": ["start", "switch", "retire"],
}
WORKER_TASKS = {
    # The hand-off recomputes on DuckDB: no Spark session.
    "lambda_batch": ["publish"],
    "lambda_reprocess": ["publish"],
    "kappa_reprocess": ["check"],
    "data_quality": ["data_docs"],
}


@pytest.fixture(scope="module", autouse=True)
def airflow_home() -> Iterator[None]:
    """Airflow reads its home when first imported: a throwaway one, not ~/airflow."""
    home = tempfile.mkdtemp(prefix="lk-airflow-unit-")
    saved = {k: os.environ.get(k) for k in ("AIRFLOW_HOME", "AIRFLOW__CORE__LOAD_EXAMPLES")}
    os.environ["AIRFLOW_HOME"] = home
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    if str(DAGS) not in sys.path:
        sys.path.append(str(DAGS))  # as Airflow does for its DAGs folder
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    shutil.rmtree(home, ignore_errors=True)


def _no_network(*_args: Any, **_kwargs: Any) -> None:
    raise AssertionError("parsing a DAG file opened a network connection")


def parse(monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    for key in [k for k in os.environ if k.startswith("LK_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with monkeypatch.context() as patched:
        patched.setattr(socket.socket, "connect", _no_network)
        bag = DagBag(str(DAGS))
    assert bag.import_errors == {}, bag.import_errors
    return bag


@pytest.mark.parametrize("architecture", ["lambda", "kappa", "both"])
def test_each_architecture_has_exactly_its_dags(
    monkeypatch: pytest.MonkeyPatch, architecture: str
) -> None:
    bag = parse(monkeypatch, LK_ARCHITECTURE=architecture)
    assert set(bag.dag_ids) == EXPECTED[architecture]
    data_quality = bag.dags["data_quality"]
    suites = {t.task_id for t in data_quality.tasks} - {"data_docs", "verdict"}
    expected_suites = {
        "lambda": {"realtime_lambda"},
        "kappa": {"realtime_kappa"},
        "both": {"realtime_lambda", "realtime_kappa", "reconciliation"},
    }
    assert suites == expected_suites[architecture]


def test_every_dag_documents_itself_and_its_params(monkeypatch: pytest.MonkeyPatch) -> None:
    bag = parse(monkeypatch, LK_ARCHITECTURE="both")
    for dag in bag.dags.values():
        assert dag.doc_md and dag.tags, dag.dag_id
        assert dag.catchup is False and dag.start_date.tzinfo is not None
        assert dag.max_active_runs == 1
        for task in dag.tasks:
            assert task.doc_md, f"{dag.dag_id}.{task.task_id} has no doc"
        for name, param in dag.params.items():
            assert param.description and param.schema.get("title"), f"{dag.dag_id}.{name}"
            assert param.schema.get("type"), f"{dag.dag_id}.{name} has no type"
    assert set(bag.dags["lambda_reprocess"].params) == {"logic_version", "since", "until"}
    assert set(bag.dags["kappa_reprocess"].params) == {"logic_version"}
    logic = bag.dags["kappa_reprocess"].params.get_param("logic_version")
    assert logic.schema["enum"] == ["1", "2", "bug"]


def test_schedules_come_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    bag = parse(
        monkeypatch,
        LK_ARCHITECTURE="both",
        LK_BATCH_SCHEDULE="*/20 * * * *",
        LK_DQ_SCHEDULE="@daily",
    )
    assert bag.dags["lambda_batch"].schedule == "*/20 * * * *"
    assert bag.dags["data_quality"].schedule == "@daily"
    assert bag.dags["lambda_reprocess"].schedule is None


def test_an_empty_schedule_means_only_when_triggered(monkeypatch: pytest.MonkeyPatch) -> None:
    bag = parse(monkeypatch, LK_ARCHITECTURE="lambda", LK_BATCH_SCHEDULE="", LK_DQ_SCHEDULE="")
    assert bag.dags["lambda_batch"].schedule is None
    assert bag.dags["data_quality"].schedule is None


def test_the_pipelines_run_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    bag = parse(monkeypatch, LK_ARCHITECTURE="both")
    order = {
        "lambda_batch": [*SPARK_TASKS["lambda_batch"], "publish"],
        "lambda_reprocess": [*SPARK_TASKS["lambda_reprocess"], "publish"],
        "kappa_reprocess": ["start", "caught_up", "check", "switch", "retire"],
    }
    for dag_id, tasks in order.items():
        dag = bag.dags[dag_id]
        for before, after in pairwise(tasks):
            assert dag.get_task(before).downstream_task_ids == {after}, (dag_id, before)
    sensor = bag.dags["kappa_reprocess"].get_task("caught_up")
    assert type(sensor).__name__ == "DecoratedSensorOperator"
    assert sensor.mode == "poke"  # keeps its Spark session between rounds


def test_local_backend_runs_every_step_in_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.standard.operators.python import PythonOperator

    bag = parse(monkeypatch, LK_ARCHITECTURE="both")
    for dag in bag.dags.values():
        for task in dag.tasks:
            if task.task_id in ("caught_up", "verdict"):
                continue
            assert isinstance(task, PythonOperator), (dag.dag_id, task.task_id)
            assert task.op_kwargs["step"], task.task_id


XCOM = "/airflow/xcom/return.json"
# The step pod is the chart's (lk.airflow.stepPod): rendered below into the files the scheduler
# mounts at LK_K8S_POD_TEMPLATE_FILE, for a k8s:// master and for local[2].
STEP_PODS = Path(tempfile.mkdtemp(prefix="lk-unit-step-pods-"))
K8S_STEP_POD = STEP_PODS / "k8s-master.yaml"
LOCAL_STEP_POD = STEP_PODS / "local-master.yaml"
KUBERNETES_CONN = STEP_PODS / "kubernetes-connection.json"
# The scheduler's own settings: the pods get the chart's, never these (a worker's LK_HOME, its
# password as a value).
K8S_ENV = {
    "LK_ARCHITECTURE": "both",
    "LK_SPARK_BACKEND": "kubernetes",
    "LK_SPARK_MASTER": "k8s://https://kubernetes.default.svc",
    "LK_K8S_POD_TEMPLATE_FILE": str(K8S_STEP_POD),
    "LK_HOME": "/opt/airflow/lk-worker",
    "LK_KAFKA_HOST": "lk-kafka",
    "LK_POSTGRES_HOST": "lk-postgres",
    "LK_POSTGRES_PASSWORD": "not-in-the-pod-spec",
    "LK_MINIO_HOST": "lk-minio",
}
LOCAL_ENV = {
    **K8S_ENV,
    "LK_SPARK_MASTER": "local[2]",
    "LK_K8S_POD_TEMPLATE_FILE": str(LOCAL_STEP_POD),
}


@pytest.fixture(scope="module", autouse=True)
def step_pod_templates() -> Iterator[None]:
    """The chart's step pod for `pod-backend-values.yaml` (both, step pods, a 2g driver, the app
    image tagged abc123), with each master, and the operator's connection from the same render."""
    for path, master in (
        (K8S_STEP_POD, "k8s://https://kubernetes.default.svc"),
        (LOCAL_STEP_POD, "local[2]"),
    ):
        rendered = render(
            load_values(
                CI_DIR / "pod-backend-values.yaml",
                spark={"master": master},
                images={"app": {"tag": "abc123"}},
                airflow={"scheduler": {"sparkDriverMemory": "2g"}},
            )
        )
        (configmap,) = rendered.by_component("ConfigMap", "airflow-step-pod")
        path.write_text(configmap["data"]["step-pod.yaml"])
        (scheduler,) = rendered.by_component("Deployment", "airflow-scheduler")
        env = {e["name"]: e for e in scheduler["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["LK_K8S_POD_TEMPLATE_FILE"]["value"].endswith("/step-pod.yaml")
        KUBERNETES_CONN.write_text(env["AIRFLOW_CONN_KUBERNETES_DEFAULT"]["value"])
    yield
    shutil.rmtree(STEP_PODS, ignore_errors=True)


class _Hook:
    """Stands in for the Kubernetes hook: no cluster here. The XCom sidecar's settings are the
    chart's connection's (AIRFLOW_CONN_KUBERNETES_DEFAULT)."""

    is_in_cluster = True

    def _extra(self) -> dict[str, Any]:
        return dict(json.loads(KUBERNETES_CONN.read_text())["extra"])

    def get_namespace(self) -> str:
        return "lambda-kappa"

    def get_xcom_sidecar_container_image(self) -> str:
        return str(self._extra()["xcom_sidecar_container_image"])

    def get_xcom_sidecar_container_resources(self) -> None:
        return None

    def get_xcom_sidecar_container_security_context(self) -> dict[str, Any]:
        return dict(json.loads(self._extra()["xcom_sidecar_container_security_context"]))


class _TaskInstance:
    """What rendering and the pod's labels read of a task instance."""

    dag_id, task_id, map_index, try_number = "dag", "task", -1, 1

    def __init__(self, xcom: dict[str, Any]) -> None:
        self.xcom = xcom

    def xcom_pull(self, task_ids: str) -> Any:
        return self.xcom[task_ids]


def _pod(task: Any, monkeypatch: pytest.MonkeyPatch, context: dict[str, Any]) -> dict[str, Any]:
    from kubernetes.client import ApiClient

    monkeypatch.setattr(type(task), "hook", property(lambda _self: _Hook()))
    context = {**context, "dag": task.dag}
    task.render_template_fields(context)
    pod = task.build_pod_request_obj(context)
    return ApiClient().sanitize_for_serialization(pod)  # type: ignore[no-any-return]


def test_kubernetes_backend_runs_spark_steps_in_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    from airflow.providers.standard.operators.python import PythonOperator

    bag = parse(monkeypatch, **K8S_ENV)
    for dag_id, tasks in SPARK_TASKS.items():
        for task_id in tasks:
            task = bag.dags[dag_id].get_task(task_id)
            assert isinstance(task, KubernetesPodOperator), (dag_id, task_id)
            assert task.do_xcom_push and task.pod_template_file == str(K8S_STEP_POD)
            assert task.labels == {"lambda-kappa.io/step": task.arguments[2]}
    for dag_id, tasks in WORKER_TASKS.items():
        for task_id in tasks:
            assert isinstance(bag.dags[dag_id].get_task(task_id), PythonOperator)
    sensor = bag.dags["kappa_reprocess"].get_task("caught_up")
    assert sensor.mode == "reschedule"  # each poke is a pod: no worker slot held meanwhile


def test_kubernetes_pod_spec_is_valid_and_runs_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubernetes_validate

    bag = parse(monkeypatch, **K8S_ENV)
    task = bag.dags["lambda_batch"].get_task("validate_views")
    context = {
        "ti": _TaskInstance({"compute_views": 7}),
        "run_id": "scheduled__2026-11-01T10:00:00+00:00",
        "params": {},
    }
    pod = _pod(task, monkeypatch, context)
    kubernetes_validate.validate(pod, "1.33", strict=True)

    spec = pod["spec"]
    assert pod["metadata"]["namespace"] == "lambda-kappa"
    assert spec["serviceAccountName"] == "lk-spark-batch"
    assert spec["automountServiceAccountToken"] is True  # the driver starts executor pods
    assert spec["securityContext"]["runAsNonRoot"] is True
    base = next(c for c in spec["containers"] if c["name"] == "base")
    assert base["image"] == "lambda-kappa/app:abc123"
    assert base["args"] == [
        "lk",
        "step",
        "validate-views",
        "--xcom-file",
        XCOM,
        "version=7",
        "run_name=scheduled__2026-11-01T10:00:00+00:00",
    ]
    assert not base.get("command")  # empty: the image's entrypoint (tini) runs `lk`
    env = {e["name"]: e for e in base["env"]}
    assert env["LK_KAFKA_HOST"]["value"] == "lk-kafka"
    assert env["LK_SPARK_MASTER"]["value"] == "k8s://https://kubernetes.default.svc"
    assert env["LK_POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "lk-credentials",
        "key": "postgres-password",
    }
    assert "not-in-the-pod-spec" not in str(pod)
    # The pod's settings are the chart's: not the worker's backend, nor its folders.
    assert "LK_SPARK_BACKEND" not in env and env["LK_HOME"]["value"] == "/tmp/lk"
    assert env["SPARK_CONF_DIR"]["value"] == "/opt/lk/spark-conf"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert {p["containerPort"] for p in base["ports"]} == {7078, 7079}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["spark-conf"]["configMap"]["name"] == "lk-spark-conf"
    assert base["resources"]["limits"]["memory"] == "2816Mi"  # 2g driver + 768Mi
    assert any(c["name"] == "airflow-xcom-sidecar" for c in spec["containers"])
    # Per task, from the DAG: its name, step label and the operator's run labels.
    assert pod["metadata"]["name"].startswith("lk-validate-views")
    labels = pod["metadata"]["labels"]
    assert labels["lambda-kappa.io/step"] == "validate-views"
    assert labels["app.kubernetes.io/component"] == "spark-step"
    assert labels["run_id"] and labels["dag_id"] == "dag"
    # The sidecar: the app image (procps's pgrep stops it), restricted like every container.
    (sidecar,) = (c for c in spec["containers"] if c["name"] == "airflow-xcom-sidecar")
    assert sidecar["image"] == "lambda-kappa/app:abc123"
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True


def test_kubernetes_pod_takes_params_and_upstream_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bag = parse(monkeypatch, **LOCAL_ENV)
    task = bag.dags["lambda_reprocess"].get_task("compute_views")
    context = {
        "ti": _TaskInstance({}),
        "run_id": "manual__x",
        "params": {"since": None, "until": "2026-11-01", "logic_version": "2"},
    }
    pod = _pod(task, monkeypatch, context)
    base = next(c for c in pod["spec"]["containers"] if c["name"] == "base")
    assert base["args"][-2:] == ['until="2026-11-01"', 'logic_version="2"']
    # local[N] in the pod: no executors, so no API access and no Spark ports.
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert not base.get("ports")

    task = bag.dags["kappa_reprocess"].get_task("start")
    context["params"] = {"logic_version": "2"}
    base = next(
        c for c in _pod(task, monkeypatch, context)["spec"]["containers"] if c["name"] == "base"
    )
    assert base["args"][2:] == [
        "kappa-start",
        "--xcom-file",
        XCOM,
        'logic_version="2"',
    ]


def test_kubernetes_sensor_pokes_run_one_replay_round_in_a_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    from core.settings import Settings

    parse(monkeypatch, **K8S_ENV)  # the DAGs folder on sys.path, as in Airflow
    from lk_dags import backends

    ran: list[list[str]] = []

    def execute(self: KubernetesPodOperator, context: Any) -> dict[str, Any]:
        ran.append(list(self.arguments))
        return {"caught_up": False, "lag": {"events/3": 2500}}

    monkeypatch.setattr(KubernetesPodOperator, "execute", execute)
    monkeypatch.setattr(
        backends, "get_current_context", lambda: {"ti": _TaskInstance({}), "run_id": "r"}
    )
    result = backends._replay_round(Settings(), 4)
    assert result == {"caught_up": False, "lag": {"events/3": 2500}}
    assert ran == [["lk", "step", "kappa-replay-round", "--xcom-file", XCOM, "version=4"]]


def test_lambda_batch_computes_the_snapshot_its_raw_gate_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """compute_views reads the master dataset at the Delta version validate_raw pinned, so no
    record archived in between reaches a version unchecked."""
    bag = parse(monkeypatch, **LOCAL_ENV)
    for gate, rendered in (({"success": True, "snapshot": 12}, "12"), (None, "null")):
        task = copy.deepcopy(bag.dags["lambda_batch"].get_task("compute_views"))  # rendered
        context = {"ti": _TaskInstance({"validate_raw": gate}), "run_id": "r", "params": {}}
        base = next(
            c for c in _pod(task, monkeypatch, context)["spec"]["containers"] if c["name"] == "base"
        )
        assert base["args"][2:] == ["compute-views", "--xcom-file", XCOM, f"snapshot={rendered}"]


def test_a_step_with_nothing_new_skips_its_task_on_either_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`NothingToDo` is a skip in the worker; in a pod, `lk step`'s exit code for it is the one
    every step pod skips on (downstream tasks then skip, and the run succeeds)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from lk.step_registry import SKIP_EXIT_CODE, NothingToDo

    bag = parse(monkeypatch, **K8S_ENV)
    for dag_id, tasks in SPARK_TASKS.items():
        for task_id in tasks:
            task = bag.dags[dag_id].get_task(task_id)
            assert list(task.skip_on_exit_code) == [SKIP_EXIT_CODE], (dag_id, task_id)

    from lk_dags import backends

    def nothing_new(*_args: Any) -> None:
        raise NothingToDo("nothing new to compute: the master dataset is empty")

    monkeypatch.setattr(backends, "run_step", nothing_new)
    with pytest.raises(AirflowSkipException, match="the master dataset is empty"):
        backends.run_local_step("compute-views", {})
