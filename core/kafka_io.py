"""Writing records to the log and reading them back, with librdkafka (confluent-kafka).

`produce_file` is CONTRACT §4's `lk produce`: each JSONL line becomes one record, in file order,
keyed by `user_id` when the line parses, with the record timestamp the contract gives it
(`received_ts` for events, `updated_ts` for profiles). A line that is not JSON is still
produced, as its raw bytes with no key, so that the pipeline's quarantine sees it.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from core.events import profile_from_record
from core.settings import Settings

if TYPE_CHECKING:
    from core.events import ProfileChange

# Java clients' default partitioner: a key lands on the same partition whichever client wrote it.
_PRODUCER_CONFIG = {
    "enable.idempotence": True,  # retries keep per-partition order and write no duplicates
    "acks": "all",
    "linger.ms": 20,
    "batch.num.messages": 10000,
    "compression.type": "lz4",
    "partitioner": "murmur2_random",
    "queue.buffering.max.messages": 500000,
}


def partition_for(key: bytes, partitions: int) -> int:
    """The partition a record keyed `key` goes to: Java's default partitioner, which
    `line_producer`'s murmur2 partitioner matches (Kafka's ``Utils.murmur2``, made positive,
    modulo the partition count). What a user's events share, computed without a broker."""
    mask = 0xFFFFFFFF
    m = 0x5BD1E995
    length = len(key)
    h = (0x9747B28C ^ length) & mask
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = key[whole:]
    if tail:
        for shift, byte in enumerate(tail):
            h ^= byte << (8 * shift)
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


KAFKA_TIMESTAMP_MAX = 2**63 - 1
"""A record timestamp is a signed 64-bit count of milliseconds."""

REFUSED_LINES_SHOWN = 10


class ProduceError(RuntimeError):
    pass


def quiet_client_logger() -> logging.Logger:
    """librdkafka's own log lines go to Python logging (quiet unless configured), not stderr."""
    logger = logging.getLogger("lk.kafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    return logger


def check_topic(settings: Settings, topic: str, timeout_s: float = 10.0) -> int:
    """Number of partitions of `topic`; a clear error if Kafka or the topic is missing."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            # The stub types conf values as scalars; the client takes a Logger here.
            "logger": quiet_client_logger(),  # type: ignore[dict-item]
        }
    )
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise ProduceError(
            f"Kafka is not reachable at {settings.kafka_bootstrap}: run `lk stack up`"
        ) from exc
    if topic not in metadata.topics:
        raise ProduceError(f"topic {topic} does not exist on {settings.kafka_bootstrap}")
    return len(metadata.topics[topic].partitions)


@dataclass
class ProduceReport:
    topic: str
    records: int = 0
    keyed: int = 0
    raw_unparsed: int = 0
    tombstones: int = 0
    failed: int = 0
    seconds: float = 0.0
    per_partition: Counter[int] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class LogRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


_DECODER = json.JSONDecoder()  # the configuration `json.loads` uses by default


def _loads(line: bytes) -> Any:
    """`json.loads(line)`, with the usual case (a line starting with `{"`) sent straight to the
    decoder's C scanner.

    That is the same computation: for such bytes `json.loads` detects UTF-8, decodes with
    `surrogatepass`, skips no leading whitespace and scans from 0; a document it accepts then
    ends at the text's end or is followed only by whitespace. Anything else (trailing text, an
    error) goes through `json.loads` itself, so results and errors are its own. This skips the
    per-call encoding detection and wrappers that were a third of `lk produce`'s time.
    """
    if line[:2] == b'{"':
        try:
            text = line.decode("utf-8", "surrogatepass")
            # `scan_once` is set by JSONDecoder.__init__; typeshed does not declare it.
            obj, end = _DECODER.scan_once(text, 0)  # type: ignore[attr-defined]
        except (ValueError, StopIteration):
            pass
        else:
            if end == len(text):
                return obj
    return json.loads(line)


def record_for(line: bytes, timestamp_field: str) -> tuple[bytes | None, bytes | None, int, bool]:
    """The record for one JSONL line, as CONTRACT §4 says: (key, value, timestamp, parsed).

    A timestamp of 0 means "none": the producer then stamps the broker-side current time, as it
    does for an explicit 0 (librdkafka's own convention). So does a timestamp no record can
    carry (negative, or beyond 64 bits): the line still goes to the log, where validation
    quarantines it with its reason.
    """
    try:
        obj = _loads(line)
    except (ValueError, RecursionError):  # not JSON (or not UTF-8, or too deep): raw bytes
        return None, line, 0, False
    if not isinstance(obj, dict):
        return None, line, 0, True
    user_id = obj.get("user_id")
    # A lone surrogate (JSON "\ud800") has no UTF-8 form: keep its code unit in the key, so
    # every record of that user still lands in one partition, instead of failing the file.
    key = user_id.encode("utf-8", "surrogatepass") if isinstance(user_id, str) else None
    ts = obj.get(timestamp_field)
    if isinstance(ts, int) and not isinstance(ts, bool) and 0 <= ts <= KAFKA_TIMESTAMP_MAX:
        timestamp = ts  # one a record can carry
    else:
        timestamp = 0
    value = None if obj.get("tombstone") is True else line
    return key, value, timestamp, True


def line_producer(settings: Settings) -> Any:
    """A producer as `lk produce`'s (idempotent, Java's partitioner): with `record_for`, what
    any writer of JSONL lines to the log uses, so their records land alike."""
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            **_PRODUCER_CONFIG,
            "logger": quiet_client_logger(),
        }
    )


def produce_file(
    settings: Settings,
    path: Path,
    topic: str,
    progress: Callable[[ProduceReport], None] | None = None,
) -> ProduceReport:
    from confluent_kafka import KafkaError, KafkaException

    timestamp_field = "updated_ts" if topic == settings.profiles_topic else "received_ts"
    report = ProduceReport(topic)
    errors: list[str] = []
    per_partition = [0] * check_topic(settings, topic)

    # Called once per record from poll()/flush(): kept to a list increment, as it runs millions
    # of times.
    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            per_partition[msg.partition()] += 1
        else:
            errors.append(str(err))

    producer = line_producer(settings)
    produce, poll = producer.produce, producer.poll
    records = keyed = tombstones = raw_unparsed = 0
    started = time.monotonic()

    def snapshot() -> ProduceReport:
        report.records, report.keyed = records, keyed
        report.tombstones, report.raw_unparsed = tombstones, raw_unparsed
        report.failed = len(errors)
        report.per_partition = Counter(
            {p: n for p, n in enumerate(per_partition) if n}  # partitions that got records
        )
        report.seconds = time.monotonic() - started
        return report

    refused: list[int] = []  # line numbers of records larger than Kafka takes
    try:
        with path.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                line = raw.rstrip(b"\r\n")
                if not line.strip():  # a blank line is no record (the oracle skips it too)
                    continue
                key, value, timestamp, parsed = record_for(line, timestamp_field)
                try:
                    while True:
                        try:
                            produce(topic, value, key, on_delivery=delivered, timestamp=timestamp)
                            break
                        except BufferError:  # local queue full: let deliveries drain, retry
                            poll(0.1)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.MSG_SIZE_TOO_LARGE:
                        raise
                    refused.append(number)  # refused alone: the rest of the file goes on
                    continue
                records += 1
                keyed += key is not None
                tombstones += value is None
                raw_unparsed += not parsed
                if records % 50000 == 0:
                    poll(0)
                    if progress:
                        progress(snapshot())
        remaining = producer.flush(120)
    except KafkaException as exc:
        raise ProduceError(f"producing to {topic} failed: {exc}") from exc
    snapshot()
    if remaining:
        raise ProduceError(f"{remaining} records to {topic} were not delivered within 120 s")
    if errors:
        raise ProduceError(f"{len(errors)} records to {topic} failed: {errors[0]}")
    if refused:
        shown = ", ".join(str(n) for n in refused[:REFUSED_LINES_SHOWN])
        more = (
            f" and {len(refused) - REFUSED_LINES_SHOWN} more"
            if len(refused) > REFUSED_LINES_SHOWN
            else ""
        )
        lines_word = "line" if len(refused) == 1 else "lines"
        raise ProduceError(
            f"{len(refused)} {lines_word} of {path} larger than Kafka's message size not sent "
            f"(line {shown}{more}); the other {records:,} records were delivered to {topic}"
        )
    return report


class LogBounds:
    """A consumer kept open to ask where each partition of a topic begins and ends. A stream
    asks at every micro-batch (`lost_records`): a new client each time cost 33 ms there, its
    connection and metadata round trips. Used by one thread at a time; `close` it after."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._consumer: Any = None

    def __call__(self, topic: str) -> dict[int, tuple[int, int]]:
        """(low, high) offsets per partition of `topic`."""
        from confluent_kafka import Consumer, TopicPartition

        if self._consumer is None:
            self._consumer = Consumer(
                {
                    "bootstrap.servers": self.settings.kafka_bootstrap,
                    "group.id": "lk-inspect",
                    "logger": quiet_client_logger(),
                    "enable.auto.commit": False,
                }
            )
        metadata = self._consumer.list_topics(topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions)
        return {p: _watermarks(self._consumer, TopicPartition(topic, p)) for p in partitions}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def end_offsets(settings: Settings, topic: str) -> dict[int, tuple[int, int]]:
    """(low, high) watermark offsets per partition."""
    bounds = LogBounds(settings)
    try:
        return bounds(topic)
    finally:
        bounds.close()


def _watermarks(consumer: Any, partition: Any, timeout_s: float = 10.0) -> tuple[int, int]:
    """A partition's (low, high) offsets. librdkafka answers "unknown partition" until its own
    metadata has the partition the broker just listed (seen on a saturated node): ask again."""
    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=timeout_s)
            return int(low), int(high)
        except KafkaException as exc:
            unknown = exc.args[0].code() == KafkaError._UNKNOWN_PARTITION
            if not unknown or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def log_bounds(settings: Settings) -> dict[str, tuple[int, int]]:
    """The first offset still retained and the next to be written, per ``topic/partition`` of
    both topics: what a replay from the start has to read."""
    return {
        f"{topic}/{partition}": bounds
        for topic in (settings.events_topic, settings.profiles_topic)
        for partition, bounds in end_offsets(settings, topic).items()
    }


def log_end(settings: Settings) -> dict[str, int]:
    """The next offset to be written, per ``topic/partition`` of both topics: where a replay
    that has read everything stands."""
    return {tp: high for tp, (_low, high) in log_bounds(settings).items()}


def lost_records(
    settings: Settings, topic: str, start: Mapping[str, int], bounds: LogBounds | None = None
) -> str | None:
    """Why records of `topic` that a reader standing at `start` (per ``topic/partition``) has
    not read yet are no longer in the log, or None when they all are (`bounds`: a consumer to
    ask, kept by a caller that asks often).

    Spark's Kafka source cannot tell this for a source that also reads a compacted topic
    (`profiles`, whose compaction leaves offset gaps by design), so a stream of both topics
    runs with `failOnDataLoss=false` and asks here instead, for `events`."""
    ends = end_offsets(settings, topic) if bounds is None else bounds(topic)
    for partition, (low, high) in ends.items():
        at = start.get(f"{topic}/{partition}")
        if at is None:
            continue
        if low > at:
            return (
                f"{topic}/{partition}: records {at} to {low - 1} left the log before they were "
                "read (retention removed them, or the topic was recreated)"
            )
        if high < at:
            return (
                f"{topic}/{partition}: the log ends at offset {high}, before offset {at} that "
                "was already read (the topic was recreated)"
            )
    return None


READ_BATCH: Final = 5000
"""Records `read_topic` asks the client for at once."""


def read_topic(settings: Settings, topic: str, timeout_s: float = 60.0) -> Iterator[LogRecord]:
    """Every record of the topic from the start to the current end, partition by partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    ends = end_offsets(settings, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": "lk-inspect",
            "logger": quiet_client_logger(),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        for partition, (low, high) in ends.items():
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
            deadline = time.monotonic() + timeout_s
            next_offset = low
            while next_offset < high:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {topic}[{partition}] stopped at {next_offset}")
                # A batch returns once full or at its timeout: the last records of a partition
                # come one by one, and the end of the partition (compaction may have left fewer
                # records than offsets) says when there are no more.
                if high - next_offset >= READ_BATCH:
                    batch = consumer.consume(num_messages=READ_BATCH, timeout=1.0)
                else:
                    one = consumer.poll(1.0)
                    batch = [] if one is None else [one]
                for msg in batch:
                    if (error := msg.error()) is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            next_offset = high
                            break
                        raise RuntimeError(str(error))
                    offset = msg.offset()
                    assert offset is not None  # a consumed record always has its offset
                    yield LogRecord(
                        topic, partition, offset, msg.key(), msg.value(), msg.timestamp()[1]
                    )
                    next_offset = offset + 1
                    if next_offset >= high:
                        break
    finally:
        consumer.close()


def log_event_values(settings: Settings) -> list[bytes | None]:
    """Every record value of the `events` topic, in log order per partition: the oracle's input."""
    return [record.value for record in read_topic(settings, settings.events_topic)]


def log_profile_changes(settings: Settings) -> list[ProfileChange]:
    """Every profile version and tombstone the `profiles` topic still holds (compaction may
    have dropped older ones; the master dataset keeps them)."""
    return [
        profile_from_record(r.key or b"", r.value, r.timestamp_ms)
        for r in read_topic(settings, settings.profiles_topic)
    ]
