"""Issue 52: change data capture in the chart. Kafka Connect runs as a Deployment beside a
sidecar that registers Debezium's connector over localhost; Postgres decodes logically; the
application's and the connector's logins come from the Secret; connect.enabled: false leaves
none of it, and the comparison produces its profiles into the topic."""

from __future__ import annotations

import json
from typing import Any

from tests.charts.chart_utils import Manifest, Rendered, load_values, pod_spec, render, render_set


def _env(container: Manifest) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _containers(rendered: Rendered, kind: str, component: str) -> dict[str, Manifest]:
    (obj,) = rendered.by_component(kind, component)
    return {c["name"]: c for c in pod_spec(obj)["containers"]}


def _properties(text: str) -> dict[str, str]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_connect_should_run_the_worker_and_register_its_connector_from_inside_the_pod() -> None:
    rendered = render_set("defaults")
    containers = _containers(rendered, "Deployment", "connect")
    assert set(containers) == {"connect", "register"}
    worker = containers["connect"]
    assert worker["image"].startswith("lambda-kappa/kafka:")  # the Kafka image's /opt/connect
    assert "org.apache.kafka.connect.cli.ConnectDistributed" in worker["command"]
    assert "/opt/connect/libs/*" in worker["command"]
    register = containers["register"]
    assert register["args"][:4] == ["lk", "cdc", "register", "--watch=30"]
    # Ready while the capture runs: the heartbeat the sidecar touches when it finds it running.
    assert "--heartbeat=/tmp/lk/cdc-running" in register["args"]
    assert "/tmp/lk/cdc-running" in register["readinessProbe"]["exec"]["command"][-1]
    env = _env(register)
    assert env["LK_CONNECT_HOST"] == "127.0.0.1"
    assert env["LK_CDC_POSTGRES_PASSWORD"]["secretKeyRef"]["key"] == "cdc-postgres-password"
    assert "LK_POSTGRES_PASSWORD" not in env  # no login of the store's owner
    assert list(env).count("LK_CONNECT_HOST") == 1


def test_worker_properties_should_keep_its_state_in_kafka() -> None:
    rendered = render_set("defaults")
    config = rendered.named("ConfigMap", "lk-connect")
    props = _properties(config["data"]["worker.properties"])
    assert props["bootstrap.servers"] == "lk-kafka:9092"
    assert {props[f"{t}.storage.topic"] for t in ("config", "offset", "status")} == {
        "lk-connect-configs",
        "lk-connect-offsets",
        "lk-connect-status",
    }
    assert props["plugin.path"] == "/opt/connect/plugins"
    assert props["exactly.once.source.support"] == "disabled"  # at least once: docs/design/cdc.md


def test_connector_config_value_should_reach_the_register_sidecar() -> None:
    overrides = {"heartbeat.interval.ms": "10000"}
    rendered = render(load_values(connect={"connector": {"config": overrides}}))
    env = _env(_containers(rendered, "Deployment", "connect")["register"])
    assert json.loads(env["LK_CDC_CONNECTOR_CONFIG"]) == overrides


def test_postgres_should_decode_logically_and_export_the_slots_wal() -> None:
    rendered = render_set("defaults")
    (scripts,) = rendered.by_component("ConfigMap", "postgres")
    start = scripts["data"]["start.sh"]
    assert "-c wal_level=logical" in start
    assert "-c max_slot_wal_keep_size='1GB'" in start or '"1GB"' in start
    assert "pg_replication_slots" in scripts["data"]["queries.yaml"]
    exporter = _containers(rendered, "StatefulSet", "postgres")["exporter"]
    assert "--extend.query-path=/opt/lk/postgres/queries.yaml" in exporter["args"]


def test_writers_should_get_the_application_logins_and_readers_none() -> None:
    rendered = render_set("both")
    init = _env(_containers(rendered, "Job", "init")["init"])
    assert init["LK_CDC_ENABLED"] == "true"
    assert init["LK_APP_POSTGRES_PASSWORD"]["secretKeyRef"]["key"] == "app-postgres-password"
    assert init["LK_CONNECT_HOST"] == "lk-connect"
    serving = _env(_containers(rendered, "Deployment", "serving")["serving"])
    assert "LK_APP_POSTGRES_PASSWORD" not in serving
    (secret,) = rendered.by_component("Secret", "credentials")
    assert {"app-postgres-password", "cdc-postgres-password"} <= set(secret["data"])


def test_connect_disabled_should_leave_no_capture() -> None:
    rendered = render(load_values(connect={"enabled": False}))
    assert not [o for o in rendered.objects if "connect" in o["metadata"]["name"]]
    init = _env(_containers(rendered, "Job", "init")["init"])
    assert init["LK_CDC_ENABLED"] == "false"
    assert "LK_CONNECT_HOST" not in init
