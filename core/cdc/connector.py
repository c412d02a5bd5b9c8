"""The Debezium connector that captures `profiles`, through Kafka Connect's REST API.

`connector_config` is the one place its configuration is written: `lk stack up` registers it,
and so does the chart's Connect pod (`lk cdc register --watch`), with the keys of the value
`connect.connector.config` set over it.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from core.cdc.provision import HEARTBEAT_QUERY, TABLE
from core.settings import Settings

TRANSFORM = "io.github.lambdakappa.connect.ProfileChange"
RUNNING = "RUNNING"


class ConnectError(RuntimeError):
    """Kafka Connect refused, or the connector failed; the message is one line for users."""


def connector_config(settings: Settings) -> dict[str, str]:
    s = settings
    return {**_defaults(s), **s.cdc_connector_config}


def _defaults(s: Settings) -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",  # one slot streams one table's changes in commit order
        "plugin.name": "pgoutput",
        "database.hostname": s.postgres_host or s.host,
        "database.port": str(s.postgres_port),
        "database.user": s.cdc_postgres_user,
        "database.password": s.cdc_postgres_password,
        "database.dbname": s.app_db,
        "topic.prefix": s.cdc_connector,
        "table.include.list": f"public.{TABLE}",
        "publication.name": s.cdc_publication,
        "publication.autocreate.mode": "disabled",  # provisioned with the table (core.cdc)
        "slot.name": s.cdc_slot,
        "snapshot.mode": "initial",
        # After a lost connection (Postgres restarted), Debezium restarts its task itself,
        # this long after (its default: 10 s).
        "retriable.restart.connector.wait.ms": str(s.cdc_restart_wait_ms),
        "heartbeat.interval.ms": str(s.cdc_heartbeat_ms),
        "heartbeat.action.query": HEARTBEAT_QUERY,
        # A delete becomes our transform's one tombstone: Debezium's own would be a second.
        "tombstones.on.delete": "false",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "transforms": "profile",
        "transforms.profile.type": TRANSFORM,
        "transforms.profile.topic": s.profiles_topic,
        # Only Debezium's heartbeat topic is created by the connector; `profiles` exists.
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1",
    }


def _client(settings: Settings) -> httpx.Client:
    return httpx.Client(base_url=settings.connect_url, timeout=30)


def _checked(response: httpx.Response) -> Any:
    if response.is_error:
        try:
            message = response.json().get("message", response.text)
        except ValueError:
            message = response.text
        raise ConnectError(f"Kafka Connect answered {response.status_code}: {message}")
    return response.json() if response.content else None


def register(settings: Settings) -> None:
    """Create the connector, or update its configuration (idempotent: PUT)."""
    with _client(settings) as client:
        _checked(
            client.put(
                f"/connectors/{settings.cdc_connector}/config", json=connector_config(settings)
            )
        )


def states(settings: Settings) -> tuple[str, list[str]] | None:
    """The connector's state and its tasks' (RUNNING, FAILED, ...), or None when unknown."""
    with _client(settings) as client:
        response = client.get(f"/connectors/{settings.cdc_connector}/status")
    if response.status_code == 404:
        return None
    status = _checked(response)
    tasks = [task["state"] for task in status.get("tasks", [])]
    return status["connector"]["state"], tasks


def answers(settings: Settings) -> bool:
    """Whether the worker's REST server answers `/connectors`: only once it has joined its
    group and read its config topic (its port opens before)."""
    try:
        with _client(settings) as client:
            return client.get("/connectors", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def start(settings: Settings, timeout_s: float | None = None) -> None:
    """Register the connector, restart a task that failed (the slot kept every change since),
    and wait until it runs."""
    register(settings)
    restart_failed(settings)
    wait_running(settings, timeout_s)


def is_running(found: tuple[str, list[str]] | None) -> bool:
    """Whether `states`' answer is a connector and every task of it running."""
    return (
        found is not None
        and found[0] == RUNNING
        and bool(found[1])
        and all(task == RUNNING for task in found[1])
    )


def failure(settings: Settings) -> str | None:
    """The first line of a failed task's trace, if one failed."""
    with _client(settings) as client:
        status = _checked(client.get(f"/connectors/{settings.cdc_connector}/status"))
    for task in status.get("tasks", []):
        if task["state"] == "FAILED":
            return str(task.get("trace", "?")).splitlines()[0]
    return None


def wait_running(settings: Settings, timeout_s: float | None = None) -> None:
    """Until the connector and its task run; a failed task's reason, or a timeout, raises."""
    deadline = time.monotonic() + (timeout_s or settings.cdc_wait_timeout_s)
    last: tuple[str, list[str]] | None = None
    while time.monotonic() < deadline:
        last = states(settings)
        if last is not None:
            if "FAILED" in last[1] or last[0] == "FAILED":
                reason = failure(settings)
                raise ConnectError(f"connector {settings.cdc_connector} failed: {reason}")
            if is_running(last):
                return
        time.sleep(0.3)
    raise ConnectError(f"connector {settings.cdc_connector} is not running: {last}")


def restart_failed(settings: Settings) -> bool:
    """Restart the connector's failed task, if one failed (Kafka Connect never does it on its
    own): what `lk stack up` does to a capture a long database outage stopped. Whether one
    was restarted."""
    found = states(settings)
    if found is None or "FAILED" not in (found[0], *found[1]):
        return False
    with _client(settings) as client:
        _checked(
            client.post(
                f"/connectors/{settings.cdc_connector}/restart",
                params={"includeTasks": "true", "onlyFailed": "true"},
            )
        )
    # The restart is asynchronous: until the task leaves FAILED, a wait would read the old state.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = states(settings)
        if now is not None and "FAILED" not in (now[0], *now[1]):
            break
        time.sleep(0.2)
    return True


def delete(settings: Settings) -> bool:
    """Remove the connector (its slot stays: `provision.drop_app_side`); False if absent."""
    with _client(settings) as client:
        response = client.delete(f"/connectors/{settings.cdc_connector}")
    if response.status_code == 404:
        return False
    _checked(response)
    return True
