"""The DAGs parse in every architecture and with both backends, without touching a service.

Parsing is what Airflow's DAG processor does every few seconds: it must import nothing heavy,
open no connection, and give each deployment exactly its DAGs. With the `kubernetes` backend
the Spark steps become KubernetesPodOperators; their pod spec is built here (no cluster) and
validated against the Kubernetes schema, and the command each pod runs is checked.
"""

from __future__ import annotations

import copy
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest

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
K8S_ENV = {
    "LK_ARCHITECTURE": "both",
    "LK_SPARK_BACKEND": "kubernetes",
    "LK_SPARK_MASTER": "k8s://https://kubernetes.default.svc",
    "LK_K8S_NAMESPACE": "lambda-kappa",
    "LK_K8S_IMAGE": "lambda-kappa/app:abc123",
    "LK_K8S_SERVICE_ACCOUNT": "lk-spark-batch",
    "LK_K8S_SPARK_CONF_CONFIGMAP": "lk-spark-conf",
    "LK_KAFKA_HOST": "lk-kafka",
    "LK_POSTGRES_HOST": "lk-postgres",
    "LK_POSTGRES_PASSWORD": "not-in-the-pod-spec",
    "LK_MINIO_HOST": "lk-minio",
}


class _Hook:
    """Stands in for the Kubernetes hook: no cluster here."""

    is_in_cluster = True

    def get_namespace(self) -> str:
        return "lambda-kappa"

    def get_xcom_sidecar_container_image(self) -> None:
        return None  # the provider's default

    def get_xcom_sidecar_container_resources(self) -> None:
        return None

    def get_xcom_sidecar_container_security_context(self) -> None:
        return None


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
            assert task.do_xcom_push and task.image == "lambda-kappa/app:abc123"
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
    assert "LK_SPARK_BACKEND" not in env and "LK_HOME" not in env
    assert env["SPARK_CONF_DIR"]["value"] == "/opt/lk/spark-conf"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert {p["containerPort"] for p in base["ports"]} == {7078, 7079}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["spark-conf"]["configMap"]["name"] == "lk-spark-conf"
    assert base["resources"]["limits"]["memory"] == "2816Mi"  # 2g driver + 768Mi
    assert any(c["name"] == "airflow-xcom-sidecar" for c in spec["containers"])


def test_kubernetes_pod_takes_params_and_upstream_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bag = parse(monkeypatch, **{**K8S_ENV, "LK_SPARK_MASTER": "local[2]"})
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
    bag = parse(monkeypatch, **{**K8S_ENV, "LK_SPARK_MASTER": "local[2]"})
    for gate, rendered in (({"success": True, "snapshot": 12}, "12"), (None, "null")):
        task = copy.deepcopy(bag.dags["lambda_batch"].get_task("compute_views"))  # rendered
        context = {"ti": _TaskInstance({"validate_raw": gate}), "run_id": "r", "params": {}}
        base = next(
            c for c in _pod(task, monkeypatch, context)["spec"]["containers"] if c["name"] == "base"
        )
        assert base["args"][2:] == ["compute-views", "--xcom-file", XCOM, f"snapshot={rendered}"]
