"""The `kubernetes` backend: a step as `lk step NAME ...` in a pod of the app image.

The pod is the Spark driver. With a `k8s://` master it runs in client mode and starts its
executors as pods, like the chart's stream drivers: its IP is the address executors call back,
its name owns them (deleted with it), and `spark-defaults.conf` comes from the chart's
ConfigMap (`LK_K8S_SPARK_CONF_CONFIGMAP`). With `local[N]` the pod is the whole job.

Configuration reaches the pod as the worker's own `LK_*` settings (those set explicitly), and
the credentials as references to the chart's Secret (`LK_K8S_CREDENTIALS_SECRET`), never as
values in the pod spec.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Final

from core.settings import Settings

if TYPE_CHECKING:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

XCOM_FILE: Final = "/airflow/xcom/return.json"
SPARK_CONF_DIR: Final = "/opt/lk/spark-conf"
APP_UID: Final = 10001
"""The app image's user (infra/docker/app.Dockerfile)."""

# Settings a pod must not inherit from the worker: its own folders (the image sets them),
# credentials (from the Secret below), and the backend's own wiring.
_NOT_INHERITED: Final = frozenset(
    {
        "home",
        "stack_dir",
        "cache_dir",
        "spark_jars_dir",
        "postgres_bin_dir",
        "minio_access_key",
        "minio_secret_key",
        "postgres_password",
        "airflow_port",
        "spark_backend",
        "k8s_namespace",
        "k8s_image",
        "k8s_service_account",
        "k8s_credentials_secret",
        "k8s_spark_conf_configmap",
    }
)
# Setting -> key of the chart's credentials Secret (charts/lambda-kappa credentials-secret). The
# step pods are Airflow's work: they get Airflow's own MinIO user (`lk.minio.access`), not root.
SECRET_KEYS: Final = {
    "LK_MINIO_ACCESS_KEY": "minio-airflow-user",
    "LK_MINIO_SECRET_KEY": "minio-airflow-password",
    "LK_POSTGRES_PASSWORD": "postgres-password",
}


def step_argv(step: str, args: dict[str, Any]) -> list[str]:
    """The container's arguments (the image's entrypoint runs them): `lk step NAME k=v ...`."""
    values = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in args.items()]
    return ["lk", "step", step, "--xcom-file", XCOM_FILE, *values]


def _env_value(value: Any) -> str:
    return str(value.value if hasattr(value, "value") else value)


def step_env(settings: Settings) -> list[Any]:
    from kubernetes.client import models as k8s

    env = [
        k8s.V1EnvVar(name=f"LK_{name.upper()}", value=_env_value(getattr(settings, name)))
        for name in sorted(settings.model_fields_set - _NOT_INHERITED)
        if getattr(settings, name) is not None
    ]
    env += [
        k8s.V1EnvVar(
            name=name,
            value_from=k8s.V1EnvVarSource(
                secret_key_ref=k8s.V1SecretKeySelector(
                    name=settings.k8s_credentials_secret, key=key
                )
            ),
        )
        for name, key in SECRET_KEYS.items()
    ]
    if settings.spark_master.startswith("k8s://"):
        env += _spark_driver_env()
    return env


def _field(name: str, path: str) -> Any:
    from kubernetes.client import models as k8s

    return k8s.V1EnvVar(
        name=name,
        value_from=k8s.V1EnvVarSource(field_ref=k8s.V1ObjectFieldSelector(field_path=path)),
    )


def _spark_driver_env() -> list[Any]:
    from kubernetes.client import models as k8s

    return [
        _field("POD_NAME", "metadata.name"),
        _field("POD_IP", "status.podIP"),
        k8s.V1EnvVar(name="SPARK_LOCAL_IP", value="$(POD_IP)"),
        k8s.V1EnvVar(name="SPARK_CONF_DIR", value=SPARK_CONF_DIR),
        k8s.V1EnvVar(
            name="PYSPARK_SUBMIT_ARGS",
            # The pod IP: a pod's hostname has no DNS record for executors to call back.
            value="--conf spark.kubernetes.driver.pod.name=$(POD_NAME) "
            "--conf spark.driver.host=$(POD_IP) pyspark-shell",
        ),
    ]


def _memory_mib(spark_memory: str) -> int:
    """Spark's `2g` / `768m` as MiB."""
    found = re.fullmatch(r"(\d+)([gGmM])", spark_memory.strip())
    if not found:
        return 2048
    number, unit = int(found.group(1)), found.group(2).lower()
    return number * 1024 if unit == "g" else number


def _restricted() -> Any:
    """A container of the "restricted" Pod Security Standard (the chart's own containers too)."""
    from kubernetes.client import models as k8s

    return k8s.V1SecurityContext(
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        capabilities=k8s.V1Capabilities(drop=["ALL"]),
    )


def step_pod(
    settings: Settings, task_id: str, step: str, args: dict[str, Any], **kwargs: Any
) -> KubernetesPodOperator:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    from kubernetes.client import models as k8s

    on_k8s_master = settings.spark_master.startswith("k8s://")
    volumes = [k8s.V1Volume(name="tmp", empty_dir=k8s.V1EmptyDirVolumeSource())]
    mounts = [k8s.V1VolumeMount(name="tmp", mount_path="/tmp")]  # noqa: S108 - an emptyDir
    ports = []
    if on_k8s_master and settings.k8s_spark_conf_configmap:
        volumes.append(
            k8s.V1Volume(
                name="spark-conf",
                config_map=k8s.V1ConfigMapVolumeSource(name=settings.k8s_spark_conf_configmap),
            )
        )
        mounts.append(
            k8s.V1VolumeMount(name="spark-conf", mount_path=SPARK_CONF_DIR, read_only=True)
        )
    if on_k8s_master:
        # Fixed ports for executors to call back (spark-defaults.conf of the chart).
        ports = [
            k8s.V1ContainerPort(name="spark-driver", container_port=7078),
            k8s.V1ContainerPort(name="spark-blockmgr", container_port=7079),
        ]
    # The driver's heap plus room for Python and the JVM's off-heap (RocksDB state, buffers).
    memory = f"{_memory_mib(settings.spark_driver_memory) + 768}Mi"
    return KubernetesPodOperator(
        task_id=task_id,
        name=f"lk-{step}",
        namespace=settings.k8s_namespace,
        image=settings.k8s_image,
        arguments=step_argv(step, args),
        env_vars=step_env(settings),
        labels={
            "app.kubernetes.io/part-of": "lambda-kappa",
            "app.kubernetes.io/component": "spark-step",
            "lambda-kappa.io/step": step,
        },
        service_account_name=settings.k8s_service_account,
        # Only a driver that starts executor pods talks to the Kubernetes API.
        automount_service_account_token=on_k8s_master,
        security_context=k8s.V1PodSecurityContext(
            run_as_non_root=True,
            run_as_user=APP_UID,
            run_as_group=APP_UID,
            fs_group=APP_UID,
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
        container_security_context=_restricted(),
        xcom_sidecar_container_security_context=_restricted(),
        container_resources=k8s.V1ResourceRequirements(
            requests={"cpu": "500m", "memory": memory},
            limits={"cpu": "2", "memory": memory},
        ),
        volumes=volumes,
        volume_mounts=mounts,
        ports=ports,
        # The step writes its JSON result to XCOM_FILE; the sidecar hands it to Airflow.
        do_xcom_push=True,
        get_logs=True,
        on_finish_action="delete_pod",
        startup_timeout_seconds=600,
        **kwargs,
    )
