"""Issue 43, item 4: Airflow's task logs go to MinIO (remote logging, the Amazon provider's S3
task handler), with a MinIO user of their own that reaches the logs bucket only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.settings import Settings
from tests.charts.chart_utils import Manifest, Rendered, containers, env_of, render, render_set

AIRFLOW_COMPONENTS = {"airflow-api-server", "airflow-scheduler", "airflow-dag-processor"}
"""The components that write or read task logs (the triggerer too, where it is deployed)."""


def _airflow_containers(rendered: Rendered) -> dict[str, Manifest]:
    found = {}
    for kind in ("Deployment", "StatefulSet"):
        for obj in rendered.of_kind(kind):
            component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
            if component.startswith("airflow-"):
                for c in containers(obj, init=False):
                    found[f"{component}/{c['name']}"] = c
    return found


def _policy(rendered: Rendered, user: str) -> dict[str, Any]:
    (config,) = rendered.by_component("ConfigMap", "minio-users")
    return dict(json.loads(config["data"][f"policy-{user}.json"]))


@pytest.mark.parametrize("value_set", ["lambda", "kappa", "both", "pod-backend"])
class TestRemoteLogging:
    def test_every_airflow_component_should_log_to_the_logs_bucket(self, value_set: str) -> None:
        found = _airflow_containers(render_set(value_set))
        assert {name.split("/")[0] for name in found} >= AIRFLOW_COMPONENTS
        settings = Settings()
        for name, container in found.items():
            env = env_of(container)
            assert env["AIRFLOW__LOGGING__REMOTE_LOGGING"]["value"] == "True", name
            folder = env["AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER"]["value"]
            assert folder == f"s3://{settings.logs_bucket}/airflow-logs", name
            conn_id = env["AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID"]["value"]
            assert f"AIRFLOW_CONN_{conn_id.upper()}" in env, name

    def test_the_connection_should_reach_minio_with_the_logs_user_from_the_secret(
        self, value_set: str
    ) -> None:
        found = _airflow_containers(render_set(value_set))
        for name, container in found.items():
            env = env_of(container)
            names = list(env)  # the kubelet expands $(VAR) from variables defined before
            conn = json.loads(env["AIRFLOW_CONN_LK_LOGS"]["value"])
            assert conn["conn_type"] == "aws"
            assert conn["extra"]["endpoint_url"].endswith(":9000"), name
            assert conn["extra"]["config_kwargs"] == {"s3": {"addressing_style": "path"}}
            for field, key in (("login", "user"), ("password", "password")):
                variable = conn[field].removeprefix("$(").removesuffix(")")
                assert names.index(variable) < names.index("AIRFLOW_CONN_LK_LOGS"), name
                ref = env[variable]["valueFrom"]["secretKeyRef"]
                assert ref["key"] == f"minio-airflow-logs-{key}", name

    def test_the_logs_user_should_reach_the_logs_bucket_only(self, value_set: str) -> None:
        policy = _policy(render_set(value_set), "airflow-logs")
        reached = {
            arn.removeprefix("arn:aws:s3:::").split("/")[0]
            for statement in policy["Statement"]
            for arn in statement["Resource"]
            if arn != "arn:aws:s3:::*"
        }
        assert reached == {Settings().logs_bucket}
        actions = {a for s in policy["Statement"] for a in s["Action"]}
        assert {"s3:GetObject", "s3:PutObject", "s3:ListBucket"} <= actions
        assert not actions & {"s3:PutBucketPolicy", "s3:CreateBucket", "s3:DeleteBucket"}


def test_the_folder_should_come_from_values() -> None:
    values = {"airflow": {"remoteLogging": {"folder": "logs/airflow"}}}
    for name, container in _airflow_containers(render(values)).items():
        folder = env_of(container)["AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER"]["value"]
        assert folder == "s3://lk-logs/logs/airflow", name


def test_remote_logging_off_should_leave_logs_local_and_create_no_user() -> None:
    rendered = render({"airflow": {"remoteLogging": {"enabled": False}}})
    for name, container in _airflow_containers(rendered).items():
        env = env_of(container)
        assert not [k for k in env if "REMOTE" in k or k.startswith("AIRFLOW_CONN_LK_LOGS")], name
    (config,) = rendered.by_component("ConfigMap", "minio-users")
    assert "policy-airflow-logs.json" not in config["data"]


def test_init_should_create_the_logs_bucket() -> None:
    create = [s for s in _policy(render(), "init")["Statement"] if s["Sid"] == "CreateBuckets"]
    assert f"arn:aws:s3:::{Settings().logs_bucket}" in create[0]["Resource"]
