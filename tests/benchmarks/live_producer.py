"""The speed bench's producer: live events at a steady rate, with freshness markers.

It runs as a process of its own (spawned, so it imports nothing heavy and shares no GIL with
the stream's Python side). Events are valid, happen "now" (`received_ts` = the produce time, a
40 ms send), come from 20,000 users and mix the four types roughly as the generated workload
does; each is keyed by its user, as `lk produce` keys them. A marker is a page view of a page
no other event uses, `/bench/marker/<n>`; its number and the wall-clock time just before its
`produce()` call go to the `markers` queue for the freshness probe.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from core.workload import PAGES, QUERIES

if TYPE_CHECKING:
    import multiprocessing
    from multiprocessing.synchronize import Event as EventType

MARKER_PREFIX = "/bench/marker/"
USERS = 20_000


class LiveEvents:
    """Deterministic live events: each user's clicks name that user's latest search."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.last_search: dict[int, str] = {}
        self.seq = 0

    def next(self, now_ms: int) -> tuple[bytes, bytes]:
        """(value, key) of the next event."""
        rng = self.rng
        user = rng.randrange(USERS)
        event_id = f"live-{self.seq}"
        self.seq += 1
        draw = rng.random()
        if draw < 0.18:
            self.last_search[user] = event_id
            body = f'"type":"search","query":"{QUERIES[rng.randrange(len(QUERIES))]}"'
        elif draw < 0.30 and user in self.last_search:
            search_id = self.last_search.pop(user)
            body = f'"type":"click","page":"{PAGES[2]}","search_id":"{search_id}"'
        elif draw < 0.36:
            body = f'"type":"order","amount_cents":{rng.randrange(100, 50_000)}'
        else:
            body = f'"type":"page_view","page":"{PAGES[rng.randrange(len(PAGES))]}"'
        value = (
            f'{{"event_id":"{event_id}",{body},"user_id":"lu-{user}",'
            f'"device_ts":{now_ms - 40},"sent_ts":{now_ms - 40},"received_ts":{now_ms}}}'
        )
        return value.encode(), f"lu-{user}".encode()


def marker(seq: int, now_ms: int) -> bytes:
    return (
        f'{{"event_id":"marker-{seq}","type":"page_view","user_id":"bench-marker",'
        f'"page":"{MARKER_PREFIX}{seq}","device_ts":{now_ms},"sent_ts":{now_ms},'
        f'"received_ts":{now_ms}}}'
    ).encode()


def produce_live(
    bootstrap: str,
    topic: str,
    rate: float,
    seconds: float,
    markers_per_s: float,
    markers: multiprocessing.Queue[tuple[int, float]],
    results: multiprocessing.Queue[dict[str, Any]],
    stop: EventType,
) -> None:
    """Write `rate` events/s for `seconds`, plus `markers_per_s` markers; then report."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            # A collector's batching (`lk produce`: 20 ms). At 30k events/s over 6 partitions,
            # 5 ms gave the broker batches of about 25 records; 50 ms halved the broker's CPU
            # in the speed step (17-18 to 8-9 CPU-s) on the machine the stream shares.
            "linger.ms": 50,
            "compression.type": "lz4",
            "partitioner": "murmur2_random",  # Java's partitioner, as `lk produce`
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    events = LiveEvents()
    sent = marker_seq = 0
    started = time.monotonic()
    next_marker = started + 1.0 / markers_per_s
    while not stop.is_set():
        now = time.monotonic()
        elapsed = now - started
        if elapsed >= seconds:
            break
        now_ms = int(time.time() * 1000)
        # What is due by now; after a stall, caught up in bounded steps.
        for _ in range(min(int(rate * elapsed) - sent, 20_000)):
            value, key = events.next(now_ms)
            try:
                producer.produce(topic, value, key, timestamp=now_ms)
            except BufferError:  # the local queue is full: the broker is behind, wait a bit
                producer.poll(0.05)
                break
            sent += 1
        if now >= next_marker:
            produced_at = time.time()
            ms = int(produced_at * 1000)
            producer.produce(topic, marker(marker_seq, ms), b"bench-marker", timestamp=ms)
            markers.put((marker_seq, produced_at))
            marker_seq += 1
            next_marker += 1.0 / markers_per_s
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(60)
    results.put({"events": sent, "markers": marker_seq, "seconds": time.monotonic() - started})
