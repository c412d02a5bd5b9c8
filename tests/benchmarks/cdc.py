"""Change data capture under load (`make bench`, step `cdc`): how many changes a second one
connector carries from the user table into `profiles`, how long each takes from its commit to
Kafka, and what Kafka Connect costs when idle.

- Idle: Connect's worker process, its CPU and resident memory over `idle_s`, with the stack's
  connector running and nothing to capture (its heartbeats only).
- Load: `writers` connections write `changes` profile changes, `per_transaction` rows to a
  transaction (each row its own change event), as fast as they can: faster than one
  connector captures, so the capture rate is the connector's. A consumer notes when each
  change arrives in the topic. The commit rate, the capture rate (changes a second from the
  first commit to the last arrival) and the lag from each commit to its arrival (p50, p99,
  max) are the figures.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import psutil

from core.cdc import capture
from core.cdc.table import app_connection, upsert
from core.events import ProfileChange
from core.settings import Settings
from infra.stack.connect import KafkaConnect

SEGMENTS = ("free", "trial", "pro", "enterprise")


@dataclass(frozen=True)
class CdcConfig:
    changes: int = 60_000
    writers: int = 4
    per_transaction: int = 10
    users: int = 20_000
    idle_s: float = 30.0


def idle_cost(stack: Settings, seconds: float) -> dict[str, Any]:
    pid = KafkaConnect(stack).process.pid()
    if pid is None:
        raise RuntimeError("the stack's Kafka Connect is not running")
    worker = psutil.Process(pid)
    cpu_before = worker.cpu_times()
    time.sleep(seconds)
    cpu_after = worker.cpu_times()
    used = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    return {
        "seconds": seconds,
        "cpu_share_of_a_core": round(used / seconds, 4),
        "rss_mib": round(worker.memory_info().rss / 2**20),
    }


def _write(
    settings: Settings, keys: list[str], per_transaction: int, committed: dict[Any, float]
) -> None:
    rng = random.Random(keys[0] if keys else 0)
    with app_connection(settings) as conn:
        for start in range(0, len(keys), per_transaction):
            written = []
            with conn.transaction():
                for user in keys[start : start + per_transaction]:
                    ts = time.time_ns() // 1_000_000
                    upsert(conn, ProfileChange(user, rng.choice(SEGMENTS), ts))
                    written.append((user, ts))
            now = time.time()
            committed.update(dict.fromkeys(written, now))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def under_load(settings: Settings, config: CdcConfig) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    from core.kafka_io import end_offsets

    arrived: dict[tuple[str, int], float] = {}
    stop = threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": "lk-bench-cdc",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    start_at = end_offsets(settings, settings.profiles_topic)
    consumer.assign(
        [TopicPartition(settings.profiles_topic, p, high) for p, (_, high) in start_at.items()]
    )

    def consume() -> None:
        while not stop.is_set():
            for msg in consumer.consume(num_messages=10_000, timeout=0.1):
                key = msg.key()
                if msg.error() is None and key is not None:
                    arrived[(key.decode(), msg.timestamp()[1])] = time.time()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    rng = random.Random(52)
    users = [f"bench-{n}" for n in range(config.users)]
    plan = [rng.choice(users) for _ in range(config.changes)]
    committed: list[dict[Any, float]] = [{} for _ in range(config.writers)]
    threads = [
        threading.Thread(
            target=_write,
            args=(settings, plan[n :: config.writers], config.per_transaction, committed[n]),
        )
        for n in range(config.writers)
    ]
    started = time.time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    written = time.time()
    commits = {k: v for part in committed for k, v in part.items()}
    deadline = time.monotonic() + 300
    while len(arrived.keys() & commits.keys()) < len(commits) and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    reader.join()
    consumer.close()
    lags = [arrived[k] - commits[k] for k in commits if k in arrived]
    last = max(arrived[k] for k in commits if k in arrived)
    return {
        "changes": len(commits),
        "writers": config.writers,
        "per_transaction": config.per_transaction,
        "arrived": len(lags),
        "commit_rate_per_s": round(len(commits) / (written - started)),
        "capture_rate_per_s": round(len(lags) / (last - started)),
        "lag_p50_s": round(_percentile(lags, 0.5), 3),
        "lag_p99_s": round(_percentile(lags, 0.99), 3),
        "lag_max_s": round(max(lags), 3),
    }


def run(stack: Settings, own: Settings, config: CdcConfig) -> dict[str, Any]:
    """The idle cost on the stack's worker, then the load through a connector of `own`'s."""
    idle = idle_cost(stack, config.idle_s)
    print(
        f"  Kafka Connect idle: {idle['cpu_share_of_a_core']:.1%} of a core, "
        f"{idle['rss_mib']} MiB resident",
        flush=True,
    )
    capture.start(own)
    try:
        load = under_load(own, config)
    finally:
        capture.stop(own)
    print(
        f"  {load['changes']:,} changes by {load['writers']} writers, "
        f"{load['per_transaction']} a transaction: committed "
        f"{load['commit_rate_per_s']:,}/s, captured {load['capture_rate_per_s']:,}/s; "
        f"commit to Kafka p50 {load['lag_p50_s']}s, p99 {load['lag_p99_s']}s",
        flush=True,
    )
    return {"idle": idle, "load": load}
