"""A namespace of one's own on a shared stack: topics, buckets and a serving database.

Integration tests (through `tests.integration.helpers`) and the benchmarks (`make bench`) run
against services someone else may be using; each run creates its own names, so it sees only its
own data and leaves everyone else's untouched. `drop_isolated` deletes such a namespace again.
"""

from __future__ import annotations

import uuid
from typing import Any

from core.settings import Settings


def _admin(settings: Settings) -> Any:
    from confluent_kafka.admin import AdminClient

    from core.kafka_io import quiet_client_logger

    # librdkafka's own log lines (as it purges its queue on close) go to logging, not stderr.
    config: dict[str, Any] = {
        "bootstrap.servers": settings.kafka_bootstrap,
        "logger": quiet_client_logger(),
    }
    return AdminClient(config)


def fresh_topic_named(
    settings: Settings, name: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(settings)  # held until the result is in: a collected client cancels it
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    futures[name].result(timeout=30)


def isolated_settings(settings: Settings, name: str) -> Settings:
    """A copy of the stack's settings with its own topics, buckets and serving database, so a
    pipeline run sees only its own data (the services are shared)."""
    import psycopg

    from core.provision import s3_client, topic_specs
    from core.store.connection import ensure_schema

    suffix = uuid.uuid4().hex[:6]
    isolated = settings.namespaced(f"{name}-{suffix}")
    fresh_topic_named(settings, isolated.events_topic, settings.events_partitions)
    profiles = next(t for t in topic_specs(isolated) if t.name == isolated.profiles_topic)
    fresh_topic_named(settings, profiles.name, profiles.partitions, profiles.config)
    s3 = s3_client(settings)
    for bucket in _own_buckets(isolated):
        s3.create_bucket(Bucket=bucket)
    with psycopg.connect(_admin_dsn(settings), autocommit=True) as conn:
        conn.execute(f'create database "{isolated.postgres_db}"')
    ensure_schema(isolated)  # the tables, and the serving login's grants on them
    return isolated


def drop_isolated(settings: Settings, isolated: Settings) -> list[str]:
    """Delete what `isolated_settings` created (topics, buckets and their objects, database).

    Best effort, step by step: returns the steps that failed, so a caller can say what is left.
    """
    import psycopg

    from core.provision import s3_client

    failed = []
    topics = [isolated.events_topic, isolated.profiles_topic]
    admin = _admin(settings)
    for topic, future in admin.delete_topics(topics, operation_timeout=30).items():
        try:
            future.result(timeout=60)
        except Exception as exc:
            failed.append(f"topic {topic}: {exc}")
    s3 = s3_client(settings)
    for bucket in _own_buckets(isolated):
        try:
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for page in pages:
                keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
                if keys:  # at most 1000 per page, the most one delete_objects call takes
                    s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            s3.delete_bucket(Bucket=bucket)
        except Exception as exc:
            failed.append(f"bucket {bucket}: {exc}")
    try:
        with psycopg.connect(_admin_dsn(settings), autocommit=True) as conn:
            # `force` ends sessions still open on it (a stopped API's pool, a JDBC writer).
            conn.execute(f'drop database if exists "{isolated.postgres_db}" with (force)')
    except Exception as exc:
        failed.append(f"database {isolated.postgres_db}: {exc}")
    return failed


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a subprocess (`lk`) read these
    settings."""
    return settings.as_env()


def _own_buckets(isolated: Settings) -> tuple[str, ...]:
    return (isolated.master_bucket, isolated.views_bucket, isolated.checkpoints_bucket)


def _admin_dsn(settings: Settings) -> str:
    """The stack's maintenance database, from which others are created and dropped."""
    return settings.postgres_dsn.rsplit("/", 1)[0] + "/postgres"
