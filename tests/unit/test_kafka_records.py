"""`lk produce`'s records (CONTRACT §4): each JSONL line's key, value and timestamp."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.kafka_io import partition_for, record_for


def test_a_valid_line_is_keyed_by_user_and_stamped_with_its_time() -> None:
    line = b'{"event_id":"e1","user_id":"u-1","received_ts":1700000000000}'
    assert record_for(line, "received_ts") == (b"u-1", line, 1700000000000, True)


def test_a_line_that_is_not_json_goes_as_raw_bytes_without_a_key() -> None:
    assert record_for(b"not json", "received_ts") == (None, b"not json", 0, False)


def test_a_lone_surrogate_in_user_id_still_gives_a_key() -> None:
    line = b'{"event_id":"e1","user_id":"\\ud800x","received_ts":5}'
    key, value, timestamp, parsed = record_for(line, "received_ts")
    assert key == "\ud800x".encode("utf-8", "surrogatepass") and key != b"\xef\xbf\xbdx"
    assert (value, timestamp, parsed) == (line, 5, True)


def test_a_tombstone_has_no_value() -> None:
    line = b'{"user_id":"u-2","tombstone":true,"updated_ts":9}'
    assert record_for(line, "updated_ts") == (b"u-2", None, 9, True)


def test_a_timestamp_no_record_can_carry_goes_without_one() -> None:
    for ts in (2**63, 2**70, -1):
        line = b'{"user_id":"u-3","received_ts":%d}' % ts
        assert record_for(line, "received_ts") == (b"u-3", line, 0, True)
    top = b'{"user_id":"u-3","received_ts":%d}' % (2**63 - 1)
    assert record_for(top, "received_ts")[2] == 2**63 - 1


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300)
    | st.from_regex(rb'\{"user_id": ?"[^"]{0,5}", ?"received_ts": ?-?\d{1,30}\}')
)
def test_any_line_gives_a_record_that_kafka_can_take(line: bytes) -> None:
    key, value, timestamp, _ = record_for(line, "received_ts")
    assert 0 <= timestamp <= 2**63 - 1
    assert value is None or isinstance(value, bytes)
    assert key is None or isinstance(key, bytes)


def test_watermarks_are_asked_again_while_librdkafka_does_not_know_the_partition() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from core.kafka_io import _watermarks

    class Consumer:
        calls = 0

        def get_watermark_offsets(self, _partition: object, timeout: float) -> tuple[int, int]:
            self.calls += 1
            if self.calls < 3:
                raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
            return 0, 42

    consumer = Consumer()
    assert _watermarks(consumer, object(), timeout_s=10) == (0, 42)
    assert consumer.calls == 3


@pytest.mark.parametrize(
    ("key", "murmur2"),
    # Kafka's own Utils.murmur2 of these keys (signed 32-bit), quoted by clients that match it.
    [
        ("1", -1993445489),
        ("12", 126087238),
        ("123", -267702483),
        ("1234", -1614185708),
        ("12345", -1188365604),
    ],
)
def test_partition_for_is_kafkas_murmur2_made_positive(key: str, murmur2: int) -> None:
    assert partition_for(key.encode(), 2**31) == murmur2 & 0x7FFFFFFF
    assert partition_for(key.encode(), 6) == (murmur2 & 0x7FFFFFFF) % 6
