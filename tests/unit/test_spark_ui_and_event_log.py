"""`core.spark`: each driver's Spark UI and Spark's event log, as the settings ask.

The UI is off unless asked for; with it come the driver's metrics at /metrics/prometheus. The
event log goes to `spark_event_log_dir` from every driver that ends (a batch step), never from
a long-running stream driver (`core.spark.event_log_conf`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.settings import NONE_ENV, Settings
from core.spark import spark_conf

EVENTS = "s3a://lk-spark-events/"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    (tmp_path / "connector.jar").touch()
    # Explicit values: the environment must not decide these tests.
    return Settings(
        spark_jars_dir=tmp_path,
        spark_ui_enabled=False,
        spark_ui_port=4040,
        spark_event_log_dir=None,
    )


def test_the_ui_and_its_metrics_servlet_are_off_by_default(settings: Settings) -> None:
    conf = spark_conf(settings)
    assert conf["spark.ui.enabled"] == "false"
    assert not [key for key in conf if key.startswith(("spark.metrics.conf", "spark.ui.port"))]


def test_an_enabled_ui_serves_the_drivers_metrics_in_prometheus_format(
    settings: Settings,
) -> None:
    conf = spark_conf(settings.model_copy(update={"spark_ui_enabled": True, "spark_ui_port": 4050}))
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.ui.port"] == "4050"
    assert conf["spark.ui.prometheus.enabled"] == "true"
    sink = "spark.metrics.conf.*.sink.prometheusServlet"
    assert conf[f"{sink}.class"] == "org.apache.spark.metrics.sink.PrometheusServlet"
    assert conf[f"{sink}.path"] == "/metrics/prometheus"
    assert conf["spark.metrics.namespace"] == "lk"  # the same names after a restart


def test_no_event_log_without_a_folder(settings: Settings) -> None:
    for long_running in (False, True):
        conf = spark_conf(settings, long_running=long_running)
        assert not [key for key in conf if key.startswith("spark.eventLog")]


def test_a_batch_driver_writes_a_compressed_event_log_to_the_folder(settings: Settings) -> None:
    conf = spark_conf(settings.model_copy(update={"spark_event_log_dir": EVENTS}))
    assert conf["spark.eventLog.enabled"] == "true"
    assert conf["spark.eventLog.dir"] == EVENTS
    assert conf["spark.eventLog.compress"] == "true"
    assert conf["spark.eventLog.compression.codec"] == "zstd"
    # A driver that ends writes one file, closed (and so uploaded to s3a) when it stops.
    assert "spark.eventLog.rolling.enabled" not in conf


def test_a_long_running_stream_driver_writes_no_event_log(settings: Settings) -> None:
    """A stream would log every micro-batch for ever, and on s3a its file shows only once
    closed: its live view is its Spark UI."""
    conf = spark_conf(
        settings.model_copy(update={"spark_event_log_dir": EVENTS}), long_running=True
    )
    assert not [key for key in conf if key.startswith("spark.eventLog")]


def test_no_folder_is_none_and_a_child_process_is_told_so(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comparison run's drivers inherit its pod's environment: `as_env` must turn the event
    log off where the run's settings have none (`Settings.namespaced`)."""
    monkeypatch.setenv("LK_SPARK_EVENT_LOG_DIR", NONE_ENV)
    assert Settings().spark_event_log_dir is None
    with_log = settings.model_copy(update={"spark_event_log_dir": EVENTS})
    assert with_log.as_env()["LK_SPARK_EVENT_LOG_DIR"] == EVENTS
    run = with_log.namespaced("cmp-20261128000000")
    assert run.spark_event_log_dir is None
    assert run.as_env()["LK_SPARK_EVENT_LOG_DIR"] == NONE_ENV
    monkeypatch.setenv("LK_SPARK_EVENT_LOG_DIR", EVENTS)  # the pod's, which the child inherits
    for name, value in run.as_env().items():
        monkeypatch.setenv(name, value)
    assert Settings().spark_event_log_dir is None


def test_lk_init_creates_the_event_log_bucket_and_a_run_shares_it() -> None:
    settings = Settings()
    assert settings.spark_events_bucket == "lk-spark-events"
    assert settings.spark_events_bucket in settings.buckets
    assert settings.namespaced("cmp-x").spark_events_bucket == settings.spark_events_bucket


def test_a_step_pod_inherits_the_schedulers_event_log_and_ui() -> None:
    """The kubernetes backend's step pods are the batch steps' drivers: the chart's step pod
    (its pod_template_file) gets the scheduler's own LK_SPARK_* settings (lk.airflow.taskEnv),
    so the chart sets them once."""
    import yaml

    from tests.charts.chart_utils import CI_DIR, load_values, render

    rendered = render(
        load_values(
            CI_DIR / "pod-backend-values.yaml", spark={"ui": {"enabled": True, "port": 4041}}
        )
    )
    (scheduler,) = rendered.by_component("Deployment", "airflow-scheduler")
    (configmap,) = rendered.by_component("ConfigMap", "airflow-step-pod")
    pod = yaml.safe_load(configmap["data"]["step-pod.yaml"])
    ours = {
        e["name"]: e.get("value")
        for e in scheduler["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["LK_SPARK_EVENT_LOG_DIR"] == ours["LK_SPARK_EVENT_LOG_DIR"] == EVENTS
    assert env["LK_SPARK_UI_ENABLED"] == ours["LK_SPARK_UI_ENABLED"] == "true"
    assert env["LK_SPARK_UI_PORT"] == "4041"
