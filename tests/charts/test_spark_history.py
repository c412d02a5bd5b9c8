"""Issue 43, item 3: Spark's own views. A History Server over the event logs on MinIO, the event
log's folder on the drivers that write one, and each driver's Spark UI as a value."""

from __future__ import annotations

import pytest

from tests.charts.chart_utils import (
    WORKLOAD_KINDS,
    Manifest,
    Rendered,
    containers,
    env_of,
    pod_metadata,
    pod_spec,
    render,
    render_set,
)

EVENT_LOG_DIR = "s3a://lk-spark-events/"
STREAM_DRIVERS = ("archiver", "speed-layer", "kappa-stream")


def _history(rendered: Rendered) -> Manifest:
    (deployment,) = rendered.by_component("Deployment", "spark-history")
    return deployment


def _conf(rendered: Rendered) -> dict[str, str]:
    (config,) = rendered.by_component("ConfigMap", "spark-history")
    lines = config["data"]["spark-history.conf"].splitlines()
    return dict(line.split(None, 1) for line in lines if line.strip() and not line.startswith("#"))


def _main_env(obj: Manifest) -> dict[str, Manifest]:
    return env_of(next(containers(obj, init=False)))


class TestSparkHistoryServer:
    def test_should_run_sparks_history_server_class_from_the_app_image(self) -> None:
        rendered = render()
        deployment = _history(rendered)
        main = next(containers(deployment, init=False))
        (serving,) = rendered.by_component("Deployment", "serving")
        assert main["image"] == next(containers(serving, init=False))["image"]
        command = " ".join(main["args"])
        assert '"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.history.HistoryServer' in (
            command
        )
        assert "--properties-file /opt/lk/spark-history/spark-history.conf" in command
        env = env_of(main)
        # The connector jars the image bakes in (hadoop-aws, the AWS SDK) beside pyspark's.
        assert env["SPARK_DAEMON_CLASSPATH"]["value"] == "/opt/lk/jars/*"
        mounts = {m["mountPath"]: m for m in main["volumeMounts"]}
        assert mounts["/opt/lk/spark-history"]["readOnly"] is True
        assert "/tmp" in mounts  # s3a's buffers: the root filesystem is read-only

    def test_should_read_the_event_logs_the_drivers_write(self) -> None:
        rendered = render()
        conf = _conf(rendered)
        assert conf["spark.history.fs.logDirectory"] == EVENT_LOG_DIR
        assert conf["spark.history.ui.port"] == "18080"
        assert conf["spark.history.fs.cleaner.enabled"] == "true"
        assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://lk-minio:9000"
        assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
        (scheduler,) = rendered.by_component("Deployment", "airflow-scheduler")
        assert _main_env(scheduler)["LK_SPARK_EVENT_LOG_DIR"]["value"] == EVENT_LOG_DIR

    def test_should_reach_minio_with_its_own_key_from_the_secret(self) -> None:
        env = _main_env(_history(render()))
        for name, key in (
            ("AWS_ACCESS_KEY_ID", "minio-spark-history-user"),
            ("AWS_SECRET_ACCESS_KEY", "minio-spark-history-password"),
        ):
            assert env[name]["valueFrom"]["secretKeyRef"] == {"name": "lk-credentials", "key": key}
        assert not [e for e in env.values() if "value" in e and "secret" in str(e["value"])]

    def test_should_wait_for_its_bucket_and_be_probed_on_its_rest_api(self) -> None:
        deployment = _history(render())
        (wait,) = pod_spec(deployment)["initContainers"]
        assert "head_bucket(Bucket=s.spark_events_bucket)" in " ".join(wait["command"])
        assert env_of(wait)["LK_MINIO_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["key"] == (
            "minio-spark-history-user"
        )
        main = next(containers(deployment, init=False))
        assert main["ports"] == [{"name": "http", "containerPort": 18080}]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert main[probe]["httpGet"] == {"path": "/api/v1/version", "port": "http"}
        assert main["resources"]["limits"]["memory"]
        assert pod_spec(deployment)["automountServiceAccountToken"] is False
        assert "checksum/config" in pod_metadata(deployment)["annotations"]

    def test_should_be_a_service_on_18080_admitted_by_its_network_policy(self) -> None:
        rendered = render()
        (service,) = rendered.by_component("Service", "spark-history")
        assert service["spec"]["ports"] == [{"name": "http", "port": 18080, "targetPort": "http"}]
        labels = pod_metadata(_history(rendered))["labels"]
        assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
        (policy,) = rendered.by_component("NetworkPolicy", "spark-history")
        (rule,) = policy["spec"]["ingress"]
        assert rule == {"ports": [{"protocol": "TCP", "port": "http"}]}

    def test_should_be_in_the_notes_with_a_port_forward(self) -> None:
        assert "port-forward svc/lk-spark-history 18080:18080" in render().notes

    def test_disabled_should_render_no_server_no_user_and_no_event_log(self) -> None:
        rendered = render({"sparkHistory": {"enabled": False}})
        assert "spark-history" not in rendered.components(*WORKLOAD_KINDS, "Service", "ConfigMap")
        for obj in rendered.of_kind(*WORKLOAD_KINDS):
            for c in containers(obj):
                assert "LK_SPARK_EVENT_LOG_DIR" not in env_of(c), obj["metadata"]["name"]
        (users,) = rendered.by_component("ConfigMap", "minio-users")
        assert "policy-spark-history.json" not in users["data"]


@pytest.mark.parametrize("value_set", ["lambda", "kappa", "both", "pod-backend"])
def test_only_the_drivers_that_end_get_the_event_log_folder(value_set: str) -> None:
    """The scheduler's tasks (and, inherited, its step pods) run the batch steps; the stream
    drivers write no event log (core.spark.event_log_conf), so their user may not write it."""
    rendered = render_set(value_set)
    holders = {
        str(obj["metadata"]["labels"]["app.kubernetes.io/component"])
        for obj in rendered.of_kind(*WORKLOAD_KINDS)
        for c in containers(obj)
        if "LK_SPARK_EVENT_LOG_DIR" in env_of(c)
    }
    assert holders == {"airflow-scheduler"}


class TestSparkUi:
    def test_should_be_off_on_every_driver_by_default(self) -> None:
        rendered = render_set("both")
        for component in (*STREAM_DRIVERS, "airflow-scheduler"):
            (driver,) = rendered.by_component("Deployment", component)
            assert _main_env(driver)["LK_SPARK_UI_ENABLED"]["value"] == "false"
            ports = {p["name"] for p in next(containers(driver, init=False)).get("ports", [])}
            assert "spark-ui" not in ports
        assert "--set spark.ui.enabled=true" in rendered.notes

    def test_enabled_should_reach_every_driver_with_its_port(self) -> None:
        rendered = render({"architecture": "both", "spark": {"ui": {"enabled": True}}})
        for component in (*STREAM_DRIVERS, "airflow-scheduler"):
            (driver,) = rendered.by_component("Deployment", component)
            env = _main_env(driver)
            assert env["LK_SPARK_UI_ENABLED"]["value"] == "true"
            assert env["LK_SPARK_UI_PORT"]["value"] == "4040"
            ports = next(containers(driver, init=False))["ports"]
            assert {"name": "spark-ui", "containerPort": 4040} in ports, component
        assert "port-forward deploy/lk-speed-layer 4040:4040" in rendered.notes
