"""The stream engine's log bounds and its data-loss check, without Spark or Kafka: the check
reads the engine's own bounds and needs nothing of its metrics; the bounds tell their
observers the ends of `events` only."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from core.settings import Settings
from core.store.realtime import StreamProgress
from stream_engine import engine as engine_module
from stream_engine import log_bounds
from stream_engine.engine import DataLossError, StreamEngine, StreamSpec
from stream_engine.log_bounds import StreamLogBounds

SETTINGS = Settings(events_topic="ev-test", profiles_topic="pr-test")


class _NoMetrics:
    """Stands for the engine's metrics: any use of them fails the test."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the data-loss check used the metrics ({name})")


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[int, tuple[int, int]]]:
    """The log Kafka would answer with: (log start, log end) per partition, per topic."""
    answers: dict[str, dict[int, tuple[int, int]]] = {}
    monkeypatch.setattr(log_bounds.LogBounds, "__call__", lambda self, topic: answers[topic])
    return answers


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> StreamEngine:
    """An engine whose previous micro-batch (0) read `ev-test/0` up to offset 5, with its
    metrics taken away; micro-batch 1 reads up to 8."""
    spec = StreamSpec("unit-stream", "s3a://unit/checkpoint", 0, "unit-loss")
    found = StreamEngine(None, SETTINGS, spec)  # type: ignore[arg-type]  # no Spark: not asked
    found.metrics = _NoMetrics()  # type: ignore[assignment]
    found._last_end = (0, {"ev-test/0": 5})
    monkeypatch.setattr(engine_module, "batch_offsets", lambda spark, ck, batch: {"ev-test/0": 8})
    return found


class TestDataLossCheck:
    def test_records_deleted_before_they_were_read_stop_the_stream_without_metrics(
        self, engine: StreamEngine, log: dict[str, dict[int, tuple[int, int]]]
    ) -> None:
        log["ev-test"] = {0: (7, 9)}  # retention took offsets 5 and 6 before they were read
        with pytest.raises(DataLossError, match=r"unit-stream: ev-test/0: records 5 to 6 left"):
            engine._read_range(1, StreamProgress("unit-stream"))

    def test_a_log_that_still_holds_them_lets_the_batch_read_on_without_metrics(
        self, engine: StreamEngine, log: dict[str, dict[int, tuple[int, int]]]
    ) -> None:
        log["ev-test"] = {0: (5, 9)}
        assert engine._read_range(1, StreamProgress("unit-stream")) == {"ev-test/0": 8}

    def test_a_recreated_topic_is_refused(
        self, engine: StreamEngine, log: dict[str, dict[int, tuple[int, int]]]
    ) -> None:
        log["ev-test"] = {0: (0, 2)}  # ends before offset 5, already read
        with pytest.raises(DataLossError, match="the topic was recreated"):
            engine._read_range(1, StreamProgress("unit-stream"))


class TestStreamLogBounds:
    def test_observers_are_told_the_ends_of_events_only(
        self, log: dict[str, dict[int, tuple[int, int]]]
    ) -> None:
        log.update({"ev-test": {0: (2, 9), 1: (0, 4)}, "pr-test": {0: (0, 50)}})
        told: list[tuple[Mapping[int, int], float]] = []
        bounds = StreamLogBounds(SETTINGS)
        assert bounds("ev-test") == {0: (2, 9), 1: (0, 4)}  # no observer: read all the same
        bounds.observe_ends(lambda ends, at: told.append((ends, at)))
        assert bounds("pr-test") == {0: (0, 50)}
        assert told == []
        bounds("ev-test")
        assert [ends for ends, _ in told] == [{0: 9, 1: 4}]
        assert told[0][1] > 1.7e9  # when, as Unix time

    def test_closed_it_refuses_until_the_engine_starts_another_query(
        self, log: dict[str, dict[int, tuple[int, int]]]
    ) -> None:
        log["ev-test"] = {0: (0, 1)}
        bounds = StreamLogBounds(SETTINGS)
        bounds.close()
        with pytest.raises(RuntimeError, match="closed"):
            bounds("ev-test")
        bounds.reopen()
        assert bounds("ev-test") == {0: (0, 1)}

    def test_the_engine_feeds_its_metrics_freshness_from_its_own_bounds(
        self, log: dict[str, dict[int, tuple[int, int]]]
    ) -> None:
        spec = StreamSpec("unit-stream", "s3a://unit/checkpoint", 0, "unit-fed")
        engine = StreamEngine(None, SETTINGS, spec)  # type: ignore[arg-type]
        log["ev-test"] = {0: (0, 3)}
        engine.metrics.refresh_log_end(now=1e9)  # a scrape of a stream that read nothing yet
        assert engine.metrics.freshness.last_observed is not None
        assert engine.metrics.freshness.seconds(1e12) > 0  # offsets 0-2 wait for readers
