"""What the pipeline needs to exist before it runs: topics, buckets, the serving store's tables.

Shared by the local stack (`lk stack up`) and the Kubernetes init Job (`lk init`). Every step is
idempotent; topics that exist get the retention their architecture needs re-applied, since
Kappa replays history from `events` and so must never lose it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.kafka_io import quiet_client_logger
from core.settings import Architecture, Settings
from core.store.connection import connect, ensure_reader, ensure_schema
from core.times import DAY_MS


class ProvisionError(RuntimeError):
    pass


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str]


PROFILES_SEGMENT_MS = 365 * DAY_MS


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """The topics of the log. Kappa replays history from `events`, so it is never deleted."""
    keep_forever = settings.architecture in (Architecture.KAPPA, Architecture.BOTH)
    events_retention = "-1" if keep_forever else str(settings.lambda_events_retention_ms)
    return [
        TopicSpec(
            settings.events_topic,
            settings.events_partitions,
            {"retention.ms": events_retention, "message.timestamp.type": "CreateTime"},
        ),
        TopicSpec(
            settings.profiles_topic,
            settings.profiles_partitions,
            {
                "cleanup.policy": "compact",
                "message.timestamp.type": "CreateTime",
                # A segment also closes when its records' timestamps span segment.ms, and a
                # profile's is the application's `updated_ts`: a workload's versions spread
                # over days, arriving from the connector in small batches, would close segment
                # after segment at Kafka's default (7 days) and let the cleaner drop versions
                # no reader has seen yet. The comparison's compaction scenario shortens it.
                "segment.ms": str(PROFILES_SEGMENT_MS),
            },
        ),
    ]


def _admin(settings: Settings) -> Any:
    from confluent_kafka.admin import AdminClient

    # librdkafka logs every refused connection: keep a not-yet-started broker to one line.
    return AdminClient(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            # The stub types conf values as scalars; the client takes a Logger here.
            "logger": quiet_client_logger(),  # type: ignore[dict-item]
        }
    )


def ensure_topics(settings: Settings) -> list[str]:
    """Create missing topics and re-apply every topic's configuration; returns what it did."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(settings)
    existing = set(admin.list_topics(timeout=10).topics)
    done = []
    specs = topic_specs(settings)
    wanted = [t for t in specs if t.name not in existing]
    if wanted:
        futures = admin.create_topics(
            [
                NewTopic(t.name, num_partitions=t.partitions, replication_factor=1, config=t.config)
                for t in wanted
            ]
        )
        for name, future in futures.items():
            try:
                future.result(timeout=30)
                done.append(f"created topic {name}")
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise ProvisionError(f"kafka: could not create topic {name}: {exc}") from exc
    for spec in specs:
        if spec.name not in existing:
            continue
        configure_topic(settings, spec.name, spec.config, admin=admin)
        done.append(f"configured topic {spec.name} ({', '.join(spec.config)})")
    return done


def configure_topic(
    settings: Settings, topic: str, config: Mapping[str, str | None], *, admin: Any = None
) -> None:
    """Set a topic's configuration entries; None deletes an entry (back to the broker's)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry(
                key,
                value,
                incremental_operation=AlterConfigOpType.DELETE
                if value is None
                else AlterConfigOpType.SET,
            )
            for key, value in config.items()
        ],
    )
    client = admin if admin is not None else _admin(settings)  # held: a collected one cancels
    for future in client.incremental_alter_configs([resource]).values():
        try:
            future.result(timeout=30)
        except Exception as exc:
            raise ProvisionError(f"kafka: could not configure {topic}: {exc}") from exc


def s3_client(settings: Settings) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=settings.s3_endpoint,
        aws_access_key_id=settings.minio_access_key,
        aws_secret_access_key=settings.minio_secret_key,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
    )


def ensure_buckets(settings: Settings) -> list[str]:
    client = s3_client(settings)
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    created = []
    for bucket in settings.buckets:
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)
            created.append(f"created bucket {bucket}")
    return created


def ensure_store(settings: Settings) -> list[str]:
    ensure_schema(settings)
    ensure_reader(settings)
    return [
        "serving store tables ready",
        f"serving store reader {settings.serving_postgres_user} ready (read-only)",
    ]


def provision_all(settings: Settings) -> list[str]:
    return [*ensure_topics(settings), *ensure_buckets(settings), *ensure_store(settings)]


def missing(settings: Settings) -> list[str]:
    """What `provision_all` would still have to create (empty: ready). Creates nothing."""
    absent = []
    topics = set(_admin(settings).list_topics(timeout=10).topics)
    absent += [f"topic {t.name}" for t in topic_specs(settings) if t.name not in topics]
    buckets = {b["Name"] for b in s3_client(settings).list_buckets().get("Buckets", [])}
    absent += [f"bucket {b}" for b in settings.buckets if b not in buckets]
    with connect(settings) as conn:
        row = conn.execute("select to_regclass('view_alias')").fetchone()
    if row is None or row[0] is None:
        absent.append("serving store tables")
    return absent
