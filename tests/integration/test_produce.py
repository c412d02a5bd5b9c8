"""`lk produce` writes a workload to Kafka intact, keyed, timestamped and in per-partition order."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from core import workload
from core.kafka_io import partition_for, read_topic
from core.settings import Settings
from tests.conftest import run_lk
from tests.integration.helpers import fresh_topic


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("workload") / "events.jsonl"
    profiles = workload.default_profiles_path(out)
    workload.generate(workload.WorkloadSpec(seed=11, events=3000), out, profiles)
    return out, profiles


def _lines(path: Path) -> list[bytes]:
    return [line.rstrip(b"\n") for line in path.read_bytes().splitlines(keepends=True)]


def test_events_read_back_intact_keyed_and_in_partition_order(
    stack: Settings, stack_env: dict[str, str], generated: tuple[Path, Path]
) -> None:
    events_file, _ = generated
    topic = fresh_topic(stack, "events-it")
    result = run_lk("produce", "--file", str(events_file), "--topic", topic, env=stack_env)
    assert result.returncode == 0, result.stderr
    assert "produced 3,000 records" in result.stdout

    lines = _lines(events_file)
    records = list(read_topic(stack, topic))
    assert len(records) == len(lines)
    assert sorted(r.value or b"" for r in records) == sorted(lines)

    by_partition: dict[int, list[bytes]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        by_partition[record.partition].append(record.value or b"")
    partition_of = {r.value: r.partition for r in records}
    for partition, values in by_partition.items():
        # The file's lines that went to this partition, in file order, are its log order.
        expected = [line for line in lines if partition_of[line] == partition]
        assert values == expected

    not_json = 0
    for record in records:
        try:
            obj = json.loads(record.value or b"")
        except ValueError:
            not_json += 1
            assert record.key is None
            continue
        if isinstance(obj, dict) and isinstance(obj.get("user_id"), str):
            assert record.key == obj["user_id"].encode()
            # Where the workload and the oracle place a user's events without asking Kafka.
            assert record.partition == partition_for(obj["user_id"].encode(), 6)
            if type(obj.get("received_ts")) is int:
                assert record.timestamp_ms == obj["received_ts"]
    assert not_json > 0  # the workload has lines that are not JSON; they arrive as raw bytes


def test_profiles_tombstones_become_null_values_at_their_timestamp(
    stack: Settings, stack_env: dict[str, str], generated: tuple[Path, Path]
) -> None:
    _, profiles_file = generated
    topic = fresh_topic(stack, "profiles-it", partitions=3, config={"cleanup.policy": "compact"})
    env = {**stack_env, "LK_PROFILES_TOPIC": topic}
    result = run_lk("produce", "--file", str(profiles_file), "--topic", topic, env=env)
    assert result.returncode == 0, result.stderr

    lines = [json.loads(line) for line in _lines(profiles_file)]
    records = sorted(read_topic(stack, topic), key=lambda r: (r.partition, r.offset))
    assert len(records) == len(lines)
    tombstones = [r for r in records if r.value is None]
    assert len(tombstones) == sum(1 for line in lines if line.get("tombstone") is True) > 0
    expected = {(line["user_id"], line["updated_ts"]) for line in lines if line.get("tombstone")}
    assert {(r.key.decode(), r.timestamp_ms) for r in tombstones if r.key} == expected
    for record in records:
        if record.value is not None:
            assert record.timestamp_ms == json.loads(record.value)["updated_ts"]


def test_produce_of_a_missing_file_fails_with_one_line(stack_env: dict[str, str]) -> None:
    result = run_lk("produce", "--file", "/nonexistent/events.jsonl", env=stack_env)
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "events.jsonl" in result.stderr


def test_produce_to_a_stopped_broker_fails_with_one_line(tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    events.write_text('{"user_id": "u1"}\n')
    env = {"LK_KAFKA_PORT": "1", "LK_STACK_DIR": str(tmp_path / "none")}
    result = run_lk("produce", "--file", str(events), env=env, timeout=200)
    assert result.returncode != 0
    assert result.stderr.strip().startswith("lk: error:")


def test_a_line_over_the_message_size_is_refused_by_number_and_the_rest_delivered(
    stack: Settings, stack_env: dict[str, str], tmp_path: Path
) -> None:
    def event(n: int, received_ts: int) -> str:
        return json.dumps(
            {
                "event_id": f"e{n}",
                "type": "page_view",
                "user_id": "u1",
                "device_ts": 1,
                "sent_ts": 2,
                "received_ts": received_ts,
                "page": "/home",
            }
        )

    oversized = json.dumps({"event_id": "big", "page": "x" * 2_000_000})  # over 1 MB
    beyond_64_bits = event(3, 2**70)  # a timestamp no record carries: sent, quarantined later
    lines = [event(1, 1_000), oversized, beyond_64_bits, event(4, 2_000)]
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join(lines) + "\n")
    topic = fresh_topic(stack, "events-big")

    result = run_lk("produce", "--file", str(source), "--topic", topic, env=stack_env)

    assert result.returncode == 1
    assert result.stderr.startswith("lk: error: 1 line of ")
    assert "(line 2)" in result.stderr
    assert "the other 3 records were delivered" in result.stderr
    assert "Traceback" not in result.stderr
    delivered = sorted((r.value or b"").decode() for r in read_topic(stack, topic))
    assert delivered == sorted([lines[0], lines[2], lines[3]])
