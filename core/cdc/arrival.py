"""Waiting until changes written to the user table are in the `profiles` topic.

The caller notes the topic's end before it writes (`profiles_end`), then waits for the last change
of each partition it wrote to: the connector keeps each partition in commit order, so once the
last change of a partition is there, every change before it is too. Watching the topic, not
the slot: the slot's confirmed position follows Debezium's offset commits, seconds after the
records are in Kafka (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from core.events import ProfileChange
from core.kafka_io import end_offsets, partition_for, quiet_client_logger
from core.settings import Settings


class NotCapturedError(TimeoutError):
    """A change did not reach the topic in time; one line for users."""


def profiles_end(settings: Settings) -> dict[int, int]:
    """The `profiles` topic's end offset per partition, now."""
    return {p: high for p, (_, high) in end_offsets(settings, settings.profiles_topic).items()}


def _matches(change: ProfileChange, key: bytes | None, value: bytes | None, ts: int) -> bool:
    return (
        key == change.user_id.encode()
        and ts == change.updated_ts
        and ((value is None) == change.is_tombstone)
    )


def wait_captured(
    settings: Settings,
    since: dict[int, int],
    changes: Sequence[ProfileChange],
    timeout_s: float | None = None,
) -> float:
    """Until the last change of each partition in `changes` is in the topic past `since`;
    seconds waited."""
    from confluent_kafka import Consumer, TopicPartition

    started = time.monotonic()
    awaited = {partition_for(c.user_id.encode(), len(since)): c for c in changes}
    if not awaited:
        return 0.0
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": "lk-profiles-wait",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 20,
            "logger": quiet_client_logger(),
        }
    )
    limit = timeout_s or settings.cdc_wait_timeout_s
    try:
        consumer.assign(
            [TopicPartition(settings.profiles_topic, p, since[p]) for p in sorted(awaited)]
        )
        while awaited and time.monotonic() - started < limit:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            partition = msg.partition()
            wanted = None if partition is None else awaited.get(partition)
            if (
                partition is not None
                and wanted is not None
                and _matches(wanted, msg.key(), msg.value(), msg.timestamp()[1])
            ):
                del awaited[partition]
    finally:
        consumer.close()
    if awaited:
        missing = ", ".join(f"{c.user_id}@{c.updated_ts}" for c in awaited.values())
        raise NotCapturedError(
            f"not in '{settings.profiles_topic}' after {limit:.0f}s: {missing}; "
            "`lk stack status` shows the connector"
        )
    return time.monotonic() - started
