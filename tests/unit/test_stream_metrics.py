"""The stream drivers' and the archiver's metrics, without Spark or services: what a micro-batch
records, what a scrape computes (watermark lag, freshness, state rows), the archiver's offsets,
and where `LK_METRICS_PORT` is served."""

from __future__ import annotations

import socket

import httpx
import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from batch_layer import metrics as archiver_metrics
from core import metrics_server
from core.event_clock import EventClocks
from core.settings import Settings
from stream_engine import log_bounds, metrics
from stream_engine.log_bounds import StreamLogBounds
from stream_engine.metrics import Freshness, Stopwatch, StreamMetrics

SETTINGS = Settings(events_topic="ev-test", profiles_topic="pr-test")


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _scraped() -> dict[str, list[tuple[dict[str, str], float]]]:
    """The default registry as Prometheus reads it: samples by name."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(REGISTRY).decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


class TestFreshness:
    def test_is_zero_until_the_log_holds_a_record_readers_do_not_see(self) -> None:
        fresh = Freshness()
        assert fresh.seconds(100.0) == 0.0
        fresh.commit({0: 5})
        fresh.observe({0: 5}, at=10.0)  # the log ends where readers are
        assert fresh.seconds(100.0) == 0.0

    def test_grows_from_when_the_oldest_unseen_record_was_first_observed(self) -> None:
        fresh = Freshness()
        fresh.commit({0: 5, 1: 0})
        fresh.observe({0: 8, 1: 0}, at=10.0)  # offsets 5-7 in the log from 10 s on
        fresh.observe({0: 12, 1: 3}, at=14.0)
        assert fresh.seconds(20.0) == pytest.approx(10.0)
        fresh.commit({0: 8})  # 5-7 visible; 8-11 (seen at 14 s) and partition 1 are not
        assert fresh.seconds(20.0) == pytest.approx(6.0)
        fresh.commit({0: 12, 1: 3})
        assert fresh.seconds(20.0) == 0.0

    def test_an_end_not_past_the_committed_offset_is_not_waiting(self) -> None:
        fresh = Freshness()
        fresh.commit({0: 9})
        fresh.observe({0: 9}, at=1.0)
        fresh.observe({0: 10}, at=3.0)
        assert fresh.seconds(4.0) == pytest.approx(1.0)


def test_a_stopwatch_gives_each_stage_the_time_since_the_previous_lap() -> None:
    watch = Stopwatch()
    watch.lap("split")
    watch.lap("watermark")
    assert [stage for stage, _ in watch.laps] == ["split", "watermark"]
    assert all(seconds >= 0 for _, seconds in watch.laps)


def _committed(stream: StreamMetrics, batch_id: int, **overrides: object) -> None:
    watch = Stopwatch()
    for stage in ("split", "watermark", "keyed_merge", "store_commit"):
        watch.lap(stage)
    values: dict[str, object] = {
        "records_in": {"ev-test": 7, "pr-test": 2},
        "late": 1,
        "quarantined": 2,
        "state_rows": {"page_views": 3, "sessions": 0},
        "clocks": EventClocks({0: 1_000_000, 1: 2_000_000}),
        "offsets": {"ev-test/0": 4, "ev-test/1": 3, "pr-test/0": 2},
    }
    values.update(overrides)
    stream.committed(batch_id, watch, **values)  # type: ignore[arg-type]


class TestStreamMetrics:
    def test_a_committed_micro_batch_moves_its_counters_and_stages(self) -> None:
        stream = StreamMetrics("unit-a", SETTINGS, delay_ms=600_000)
        before_total = _value(
            "lk_stream_micro_batch_duration_seconds_count", architecture="unit-a", stage="total"
        )
        spark_side = Stopwatch()
        for stage in ("offsets", "spark_job", "inbox_write", "queue_wait"):
            spark_side.lap(stage)
        stream.handed(4, started=0.0, watch=spark_side)
        _committed(stream, 4)
        assert _value("lk_stream_records_in_total", architecture="unit-a", topic="ev-test") == 7
        assert _value("lk_stream_records_in_total", architecture="unit-a", topic="pr-test") == 2
        assert _value("lk_stream_late_dropped_total", architecture="unit-a") == 1
        assert _value("lk_stream_quarantined_total", architecture="unit-a") == 2
        assert _value("lk_stream_commit_duration_seconds_count", architecture="unit-a") == 1
        assert _value("lk_stream_last_commit_timestamp_seconds", architecture="unit-a") > 0
        for stage in ("spark_job", "queue_wait", "split", "store_commit"):
            count = "lk_stream_micro_batch_duration_seconds_count"
            assert _value(count, architecture="unit-a", stage=stage) == 1, stage
        after_total = _value(
            "lk_stream_micro_batch_duration_seconds_count", architecture="unit-a", stage="total"
        )
        assert after_total == before_total + 1
        _committed(stream, 5)  # merged from the inbox at a start: no Spark side, no total
        assert (
            _value(
                "lk_stream_micro_batch_duration_seconds_count", architecture="unit-a", stage="total"
            )
            == after_total
        )

    def test_state_rows_follow_the_merges_once_counted_per_view(self) -> None:
        stream = StreamMetrics("unit-b", SETTINGS, delay_ms=0)
        _committed(stream, 0)
        assert stream.state_rows() is None  # not counted yet: no guess
        stream.count_state({"page_views": 10, "page_views:totals": 4, "search_ctr": 2})
        assert stream.state_rows() == {"page_views": 14, "search_ctr": 2}
        _committed(stream, 1, state_rows={"page_views": 3, "segment_totals": 5})
        assert stream.state_rows() == {"page_views": 17, "search_ctr": 2, "segment_totals": 5}

    def test_a_scrape_gives_each_partitions_watermark_its_lag_and_freshness(self) -> None:
        asked: list[str] = []

        def bounds(topic: str) -> dict[int, tuple[int, int]]:  # the log's end, at a scrape
            asked.append(topic)
            stream.freshness.observe({0: 9, 1: 3}, at=1.0)  # long ago: offsets 4-8 waiting
            return {0: (0, 9), 1: (0, 3)}

        stream = StreamMetrics("unit-c", SETTINGS, delay_ms=60_000, ask_log_end=bounds)
        _committed(stream, 0)
        stream.count_state({"page_views": 2})
        metrics.watch(stream)
        found = _scraped()
        assert asked == ["ev-test"]
        watermarks = {
            labels["partition"]: value
            for labels, value in found["lk_stream_watermark_seconds"]
            if labels["architecture"] == "unit-c"
        }
        assert watermarks == {"0": 1_000 - 60, "1": 2_000 - 60}
        lags = {
            labels["partition"]: value
            for labels, value in found["lk_stream_watermark_lag_seconds"]
            if labels["architecture"] == "unit-c"
        }
        assert lags["0"] > 1.7e9  # wall-clock time now, less a watermark in 1970
        assert lags["0"] - lags["1"] == pytest.approx(1_000)
        (fresh,) = [
            v for lab, v in found["lk_stream_freshness_seconds"] if lab["architecture"] == "unit-c"
        ]
        assert fresh > 1.7e9  # waiting since t=1 s, as observed
        rows = [
            (lab["view"], v)
            for lab, v in found["lk_stream_state_rows"]
            if lab["architecture"] == "unit-c"
        ]
        assert rows == [("page_views", 2)]

    def test_a_scrape_does_not_ask_the_log_while_micro_batches_do(self) -> None:
        asked: list[str] = []
        stream = StreamMetrics("unit-d", SETTINGS, delay_ms=0, ask_log_end=asked.append)
        stream.freshness.observe({0: 1}, at=100.0)
        stream.refresh_log_end(now=100.0 + metrics.LOG_END_MAX_AGE_S - 1)
        assert asked == []
        stream.refresh_log_end(now=100.0 + metrics.LOG_END_MAX_AGE_S + 1)
        assert asked == ["ev-test"]

    def test_a_scrape_survives_an_unreachable_log(self) -> None:
        stream, bounds = _fed_by_log_bounds("unit-e")
        bounds.close()  # as after the stream stopped: never reopened
        stream.refresh_log_end(now=1e9)
        assert stream.freshness.last_observed is None

    def test_a_stream_not_given_the_log_never_asks_it(self) -> None:
        stream = StreamMetrics("unit-h", SETTINGS, delay_ms=0)
        stream.refresh_log_end(now=1e9)  # no consumer of its own to ask
        assert stream.freshness.last_observed is None
        assert stream.freshness.seconds(1e9) == 0.0

    def test_the_bounds_note_the_end_of_events_only(self, monkeypatch: pytest.MonkeyPatch) -> None:
        stream, bounds = _fed_by_log_bounds("unit-f")
        ends = {"ev-test": {0: (0, 5)}, "pr-test": {0: (0, 50)}}
        monkeypatch.setattr(log_bounds.LogBounds, "__call__", lambda self, topic: ends[topic])
        assert bounds("pr-test") == {0: (0, 50)}
        assert stream.freshness.last_observed is None
        assert bounds("ev-test") == {0: (0, 5)}
        assert stream.freshness.last_observed is not None
        assert stream.freshness.seconds(1e12) > 0  # offsets 0-4 waiting, none committed
        bounds.close()
        with pytest.raises(RuntimeError, match="closed"):
            bounds("ev-test")


def _fed_by_log_bounds(architecture: str) -> tuple[StreamMetrics, StreamLogBounds]:
    """A stream's metrics and log bounds wired as the engine wires them: the metrics ask the
    bounds at a scrape, the bounds tell the metrics' freshness each end they read."""
    bounds = StreamLogBounds(SETTINGS)
    stream = StreamMetrics(architecture, SETTINGS, delay_ms=0, ask_log_end=bounds)
    bounds.observe_ends(stream.freshness.observe)
    return stream, bounds


def test_hand_offs_are_counted_per_architecture() -> None:
    before = _value("lk_stream_handoffs_total", architecture="unit-g")
    metrics.handoff("unit-g")
    assert _value("lk_stream_handoffs_total", architecture="unit-g") == before + 1


class TestArchiverMetrics:
    def test_records_are_the_offsets_advanced_from_zero_for_a_new_partition(self) -> None:
        before = {"ev/0": 10, "ev/1": 4}
        after = {"ev/0": 15, "ev/1": 4, "ev/2": 3}
        assert archiver_metrics.advanced(before, after) == 5 + 0 + 3

    def test_a_committed_micro_batch_is_timed_counted_and_stamped(self) -> None:
        archiver_metrics.archived("unit-topic", 0.0, {"t/0": 1}, {"t/0": 4})
        assert _value("lk_archiver_records_total", topic="unit-topic") == 3
        assert _value("lk_archiver_micro_batch_duration_seconds_count", topic="unit-topic") == 1
        assert _value("lk_archiver_last_commit_timestamp_seconds", topic="unit-topic") > 0


class TestMetricsServer:
    def test_binds_loopback_locally_or_as_told(self) -> None:
        assert metrics_server.bind_address(Settings()) == "127.0.0.1"
        assert metrics_server.bind_address(Settings(metrics_host="0.0.0.0")) == "0.0.0.0"

    def test_the_port_setting_comes_from_the_environment(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        assert Settings().metrics_port is None
        monkeypatch.setenv("LK_METRICS_PORT", "9108")
        assert Settings().metrics_port == 9108

    def test_nothing_is_served_without_a_port(self) -> None:
        assert metrics_server.start(Settings()) is None

    def test_serves_the_registry_on_the_port(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        where = metrics_server.start(Settings(metrics_port=port))
        assert where == f"127.0.0.1:{port}"
        answer = httpx.get(f"http://{where}/metrics", timeout=5)
        assert answer.status_code == 200
        assert "lk_stream_freshness_seconds" in answer.text
        with pytest.raises(OSError):  # the port is taken now: `lk` says so in one line
            metrics_server.start(Settings(metrics_port=port))
