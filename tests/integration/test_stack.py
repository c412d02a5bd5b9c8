"""The local stack comes up from nothing, reports itself, survives a restart, and resets."""

from __future__ import annotations

import json
import socket

from confluent_kafka.admin import AdminClient, ConfigResource

from core.kafka_io import end_offsets, read_topic
from core.settings import Settings
from infra.stack import stack as local_stack
from infra.stack.minio import s3_client
from tests.conftest import run_lk
from tests.integration.helpers import fresh_topic


def _topic_config(settings: Settings, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in configs.items()}


def test_stack_started_from_nothing_has_topics_buckets_and_database(stack: Settings) -> None:
    offsets = end_offsets(stack, stack.events_topic)
    assert len(offsets) == 6
    assert len(end_offsets(stack, stack.profiles_topic)) == stack.profiles_partitions
    assert _topic_config(stack, stack.profiles_topic)["cleanup.policy"] == "compact"

    buckets = {b["Name"] for b in s3_client(stack).list_buckets()["Buckets"]}
    assert set(stack.buckets) <= buckets

    import psycopg

    with psycopg.connect(stack.postgres_dsn, connect_timeout=5) as conn:
        assert conn.execute("select current_database()").fetchone() == (stack.postgres_db,)


def test_status_reports_every_service_up(stack: Settings, stack_env: dict[str, str]) -> None:
    result = run_lk("stack", "status", env=stack_env)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert set(lines) == {"kafka", "minio", "postgres", "connect"}
    assert all(" up " in line for line in lines.values())
    assert "events" in lines["kafka"] and stack.master_bucket in lines["minio"]
    # The capture of the user table: its connector's state and the WAL its slot holds.
    assert f"connector {stack.cdc_connector}: RUNNING, tasks ['RUNNING']" in lines["connect"]
    assert f"slot {stack.cdc_slot} holds" in lines["connect"]


def test_up_again_is_idempotent(stack: Settings, stack_env: dict[str, str]) -> None:
    result = run_lk("stack", "up", env=stack_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("already running") == 4


def test_port_taken_by_another_process_gives_one_line_reason(
    stack: Settings, stack_env: dict[str, str], tmp_path
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        env = {**stack_env, "LK_STACK_DIR": str(tmp_path / "other"), "LK_KAFKA_PORT": str(port)}
        result = run_lk("stack", "up", env=env)
    assert result.returncode != 0
    error_lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert error_lines == [error_lines[0]] and error_lines[0].startswith("lk: error: kafka: port")
    assert str(port) in error_lines[0]


def test_data_survives_restart_and_reset_deletes_it(stack: Settings) -> None:
    topic = fresh_topic(stack, "restart", partitions=1)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    producer.produce(topic, key=b"u1", value=json.dumps({"n": 1}).encode())
    assert producer.flush(30) == 0
    s3_client(stack).put_object(Bucket=stack.master_bucket, Key="probe/x", Body=b"kept")

    local_stack.down(stack, progress=lambda _: None)
    assert all(not s.running for s in local_stack.status(stack))
    local_stack.up(stack, progress=lambda _: None)

    assert [r.value for r in read_topic(stack, topic)] == [b'{"n": 1}']
    body = s3_client(stack).get_object(Bucket=stack.master_bucket, Key="probe/x")["Body"].read()
    assert body == b"kept"

    cache_before = sorted(p.name for p in stack.cache_path.iterdir())
    local_stack.reset(stack, progress=lambda _: None)
    assert not stack.stack_path.exists()
    assert sorted(p.name for p in stack.cache_path.iterdir()) == cache_before

    local_stack.up(stack, progress=lambda _: None)  # from nothing again, for the tests after
    assert (
        topic
        not in AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
        .list_topics(timeout=10)
        .topics
    )
    assert "Contents" not in s3_client(stack).list_objects_v2(Bucket=stack.master_bucket)
