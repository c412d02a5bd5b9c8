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


def isolated_settings(settings: Settings, name: str) -> Settings:
    """A copy of the stack's settings with its own topics, buckets and serving database, so a
    pipeline test sees only its own data (the services are shared)."""
    import psycopg

    from core.store.schema import create_all
    from infra.stack.minio import s3_client

    suffix = uuid.uuid4().hex[:6]
    isolated = settings.model_copy(
        update={
            "events_topic": f"events-{name}-{suffix}",
            "profiles_topic": f"profiles-{name}-{suffix}",
            "master_bucket": f"master-{name}-{suffix}",
            "views_bucket": f"views-{name}-{suffix}",
            "checkpoints_bucket": f"checkpoints-{name}-{suffix}",
            "postgres_db": f"serving_{name}_{suffix}".replace("-", "_"),
        }
    )
    fresh_topic_named(settings, isolated.events_topic, settings.events_partitions)
    fresh_topic_named(
        settings,
        isolated.profiles_topic,
        settings.profiles_partitions,
        {"cleanup.policy": "compact"},
    )
    s3 = s3_client(settings)
    for bucket in (isolated.master_bucket, isolated.views_bucket, isolated.checkpoints_bucket):
        s3.create_bucket(Bucket=bucket)
    with psycopg.connect(
        settings.postgres_dsn.rsplit("/", 1)[0] + "/postgres", autocommit=True
    ) as conn:
        conn.execute(f'create database "{isolated.postgres_db}"')
    with psycopg.connect(isolated.postgres_dsn, autocommit=True) as conn:
        create_all(conn)
    return isolated


def fresh_topic_named(
    settings: Settings, name: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    futures[name].result(timeout=30)


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a subprocess `lk` read these settings."""
    env = {}
    for name, value in settings.model_dump().items():
        if value is not None:
            env[f"LK_{name.upper()}"] = str(value.value if hasattr(value, "value") else value)
    return env
