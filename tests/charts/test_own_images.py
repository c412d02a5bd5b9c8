"""The chart runs only the project's own images (infra/docker) and gives each one its command
and configuration: no third-party image, no image entrypoint conventions."""

from __future__ import annotations

import ast
import re
from typing import Any

import helm_python as helm
import pytest
import yaml

from core.catalog import VIEW_NAMES
from tests.charts.chart_utils import (
    CHART_DIR,
    NAMESPACE,
    containers,
    env_of,
    pod_metadata,
    pod_spec,
    render,
    render_set,
)

APP_VERSION = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["appVersion"]
COMPONENT_IMAGES = {
    "kafka": "lambda-kappa/kafka",
    "minio": "lambda-kappa/minio",
    "postgres": "lambda-kappa/postgres",
    "helm-test": "lambda-kappa/app",
}


def _workload(component: str) -> dict[str, Any]:
    rendered = render_set("both")
    kinds = ("StatefulSet", "Pod")
    (obj,) = [o for kind in kinds for o in rendered.by_component(kind, component)]
    return obj


def _configmap(name: str) -> dict[str, str]:
    data: dict[str, str] = render_set("both").named("ConfigMap", name)["data"]
    return data


@pytest.mark.parametrize("value_set", ["defaults", "both", "kind-both", "pod-backend"])
def test_every_container_should_run_a_project_image_at_the_app_version(value_set: str) -> None:
    for obj in render_set(value_set).objects:
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job", "Pod"):
            continue
        for c in containers(obj):
            assert re.fullmatch(
                rf"lambda-kappa/(app|airflow|kafka|minio|postgres|statsd):{re.escape(APP_VERSION)}",
                c["image"],
            ), (obj["metadata"]["name"], c["name"], c["image"])


@pytest.mark.parametrize(("component", "repository"), COMPONENT_IMAGES.items())
def test_one_tag_should_select_each_image(component: str, repository: str) -> None:
    tags = {
        name: {"tag": "abc1234"}
        for name in ("app", "airflow", "kafka", "minio", "postgres", "statsd")
    }
    rendered = render({"architecture": "both", "images": tags})
    kinds = ("StatefulSet", "Pod")
    (obj,) = [o for kind in kinds for o in rendered.by_component(kind, component)]
    assert {c["image"] for c in containers(obj)} == {f"{repository}:abc1234"}


class TestKafka:
    def test_server_properties_should_be_rendered_by_the_chart(self) -> None:
        props = _configmap("lk-kafka")["server.properties"]
        lines = dict(
            line.split("=", 1) for line in props.splitlines() if line and not line.startswith("#")
        )
        assert lines["process.roles"] == "broker,controller"
        assert lines["controller.quorum.voters"] == "1@localhost:9093"
        assert lines["listeners"] == "PLAINTEXT://:9092,CONTROLLER://:9093"
        assert (
            lines["advertised.listeners"]
            == f"PLAINTEXT://lk-kafka-0.lk-kafka-headless.{NAMESPACE}.svc:9092"
        )
        assert lines["log.dirs"] == "/var/lib/kafka/data/logs"
        assert lines["auto.create.topics.enable"] == "false"
        assert lines["log.retention.ms"] == "-1"

    def test_storage_should_be_formatted_with_the_kept_cluster_id_by_the_same_image(
        self,
    ) -> None:
        spec = pod_spec(_workload("kafka"))
        (init,) = spec["initContainers"]
        (broker,) = spec["containers"]
        assert init["image"] == broker["image"]
        script = init["command"][-1]
        assert "kafka.tools.StorageTool format --ignore-formatted" in script
        assert '--cluster-id "$CLUSTER_ID" --config /etc/kafka/server.properties' in script
        ref = env_of(init)["CLUSTER_ID"]["valueFrom"]["configMapKeyRef"]
        assert ref == {"name": "lk-kafka", "key": "cluster-id"}

    def test_broker_should_start_with_an_explicit_java_command(self) -> None:
        (broker,) = pod_spec(_workload("kafka"))["containers"]
        cmd = broker["command"]
        assert cmd[0] == "java"
        assert "-Xmx384m" in cmd and "-Xms384m" in cmd
        assert cmd[cmd.index("-cp") + 1] == "/opt/kafka/libs/*"
        assert cmd[-2:] == ["kafka.Kafka", "/etc/kafka/server.properties"]
        assert not [e for e in broker.get("env", []) if e["name"].startswith("KAFKA_")]

    def test_config_should_be_mounted_read_only_and_roll_the_pod_when_it_changes(self) -> None:
        obj = _workload("kafka")
        for c in containers(obj):
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            assert mounts["/etc/kafka"]["readOnly"] is True
        before = pod_metadata(obj)["annotations"]["checksum/config"]
        changed = render({"architecture": "both", "kafka": {"port": 9094}}).by_component(
            "StatefulSet", "kafka"
        )[0]
        assert pod_metadata(changed)["annotations"]["checksum/config"] != before


class TestPostgres:
    def test_should_run_the_chart_s_start_script(self) -> None:
        obj = _workload("postgres")
        pg = pod_spec(obj)["containers"][0]  # the exporter sidecar follows (metrics)
        assert pg["command"] == ["bash", "/opt/lk/postgres/start.sh"]
        mounts = {m["mountPath"]: m["name"] for m in pg["volumeMounts"]}
        assert mounts["/opt/lk/postgres"] == "scripts"
        assert "/docker-entrypoint-initdb.d" not in mounts
        volumes = {v["name"]: v for v in pod_spec(obj)["volumes"]}
        assert volumes["scripts"]["configMap"]["name"] == "lk-postgres-scripts"

    def test_start_script_should_initdb_once_with_scram_then_exec_postgres(self) -> None:
        script = _configmap("lk-postgres-scripts")["start.sh"]
        assert 'if [ ! -s "$PGDATA/PG_VERSION" ]' in script
        assert '--username="$POSTGRES_USER" --pwfile="$pwfile"' in script
        assert "--auth-local=scram-sha-256 --auth-host=scram-sha-256" in script
        assert "host all all 0.0.0.0/0 scram-sha-256" in script
        assert "--file=/opt/lk/postgres/init.sql" in script
        assert 'mv "$staging" "$PGDATA"' in script
        assert script.rstrip().endswith(
            'exec postgres -D "$PGDATA" -c listen_addresses=\'*\' "${server_options[@]}"'
        )
        # A server that holds a logical slot starts only with wal_level=logical: every start.
        assert script.count("${server_options[*]}") == script.count("pg_ctl --pgdata=") // 2
        assert 'POSTGRES_PASSWORD" psql' in script  # never in the ConfigMap itself

    def test_init_sql_should_create_both_databases_without_a_password_in_it(self) -> None:
        sql = _configmap("lk-postgres-scripts")["init.sql"]
        assert 'CREATE DATABASE "serving" OWNER "lk";' in sql
        assert "CREATE ROLE \"airflow\" LOGIN PASSWORD :'pw';" in sql
        assert 'CREATE DATABASE "airflow" OWNER "airflow";' in sql

    def test_script_should_run_where_debian_s_binaries_are(self) -> None:
        pg = pod_spec(_workload("postgres"))["containers"][0]
        env = env_of(pg)
        assert env["PGDATA"]["value"] == "/var/lib/postgresql/data/pgdata"
        assert env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "postgres-password"


class TestMinio:
    def test_should_serve_data_with_an_explicit_command(self) -> None:
        (minio,) = pod_spec(_workload("minio"))["containers"]
        assert minio["command"] == ["minio"]
        assert minio["args"][:2] == ["server", "/data"]
        assert "--address=:9000" in minio["args"]
        assert "--console-address=:9001" in minio["args"]


def _assigned(script: str, name: str) -> Any:
    """The literal a Python script assigns to `name` at its top level."""
    (value,) = [
        node.value
        for node in ast.parse(script).body
        if isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == [name]
    ]
    return ast.literal_eval(value)


class TestHelmTest:
    def test_should_ask_the_serving_api_with_python_from_the_app_image(self) -> None:
        pod = _workload("helm-test")
        (c,) = pod_spec(pod)["containers"]
        assert c["command"][:2] == ["python", "-c"]
        script = c["command"][2]
        compile(script, "helm-test", "exec")  # valid Python
        assert "import httpx" in script
        assert 'BASE = "http://lk-serving:8000"' in script
        assert 'get("/health", 10)' in script
        assert 'get(f"/v1/views/{view}", 3)' in script
        assert _assigned(script, "VIEWS") == VIEW_NAMES  # every view, the catalogue's order
        assert pod_spec(pod)["securityContext"]["runAsUser"] == 10001


def test_airflow_should_run_as_the_app_image_s_user() -> None:
    for obj in render_set("both").objects:
        if obj["metadata"]["name"].startswith("lk-airflow") and obj["kind"] in (
            "Deployment",
            "Job",
        ):
            ctx = pod_spec(obj)["securityContext"]
            assert (ctx["runAsUser"], ctx["runAsGroup"]) == (10001, 10001)


@pytest.mark.parametrize(
    "values",
    [
        {"images": {"kafka": {"tag": "latest"}}},
        {"images": {"minio": {"repository": "lambda-kappa/minio:latest"}}},
        {"images": {"test": {"repository": "curlimages/curl"}}},
    ],
)
def test_schema_should_refuse_latest_and_the_old_test_image(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        render(values)
