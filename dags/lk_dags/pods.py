"""The `kubernetes` backend: a step as `lk step NAME ...` in a pod of the app image.

The pod is defined once, by the chart (`lk.airflow.stepPod` in charts/lambda-kappa): the
scheduler mounts it as a file (`LK_K8S_POD_TEMPLATE_FILE`), which KubernetesPodOperator reads as
its `pod_template_file` when the step starts. It holds the namespace, the image, the
ServiceAccount, the tasks' `LK_*` settings and the Secret's keys, the security context,
resources and scheduling, and with a `k8s://` master what a client-mode Spark driver needs (its
pod IP, ports and spark-defaults.conf). Only what differs per task is here: the pod's name, the
step's arguments and a label naming the step. The operator adds its own labels (the DAG, task,
run id and try) and the XCom sidecar, whose image and security context come from its connection
(the chart's `AIRFLOW_CONN_KUBERNETES_DEFAULT`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from core.settings import Settings

if TYPE_CHECKING:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

XCOM_FILE: Final = "/airflow/xcom/return.json"


def step_argv(step: str, args: dict[str, Any]) -> list[str]:
    """The container's arguments (the image's entrypoint runs them): `lk step NAME k=v ...`."""
    values = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in args.items()]
    return ["lk", "step", step, "--xcom-file", XCOM_FILE, *values]


def step_pod(
    settings: Settings, task_id: str, step: str, args: dict[str, Any], **kwargs: Any
) -> KubernetesPodOperator:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    if not settings.k8s_pod_template_file:
        raise ValueError(
            "LK_SPARK_BACKEND=kubernetes needs LK_K8S_POD_TEMPLATE_FILE, the step pod's template "
            "(the chart sets it with airflow.sparkBackend: kubernetes)"
        )
    return KubernetesPodOperator(
        task_id=task_id,
        name=f"lk-{step}",
        pod_template_file=settings.k8s_pod_template_file,
        arguments=step_argv(step, args),
        labels={"lambda-kappa.io/step": step},
        # The step writes its JSON result to XCOM_FILE; the sidecar hands it to Airflow.
        do_xcom_push=True,
        get_logs=True,
        on_finish_action="delete_pod",
        startup_timeout_seconds=600,
        **kwargs,
    )
