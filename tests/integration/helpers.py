"""Small helpers for integration tests: fresh topics, the env a subprocess `lk` needs."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from core.settings import Settings


def fresh_topic(
    settings: Settings, prefix: str, partitions: int = 6, config: dict[str, str] | None = None
) -> str:
    """Create a topic no other test uses, so assertions see only this test's records."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    futures[name].result(timeout=30)
    return name
