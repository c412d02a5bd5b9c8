"""The long-running drivers' /metrics, as Prometheus scrapes them: `lk stream` (Lambda's speed
layer, the Kappa job) and `lk archive`, each run as the chart runs it with `LK_METRICS_PORT`,
on topics, buckets and a database of their own; a few events produced; the metrics read over
HTTP until their values move. The state rows the stream reports, which it follows from its
merges, must equal what the store counts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core import workload
from core.kafka_io import produce_file
from core.settings import Settings
from core.store import realtime, state
from core.store.connection import connect
from core.store.streams import LAMBDA_SPEED, kappa_stream
from tests.conftest import ROOT
from tests.integration.helpers import isolated_settings, settings_env
from tests.processes import stop_group

EVENTS = 400
READY_S = 240.0  # a Spark driver's start on a busy 2-core machine
MOVED_S = 240.0

Samples = dict[str, list[tuple[dict[str, str], float]]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(url: str) -> Samples | None:
    try:
        answer = httpx.get(url, timeout=10)
    except httpx.TransportError:
        return None
    assert answer.status_code == 200
    found: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def _one(samples: Samples, name: str, **labels: str) -> float | None:
    for found, value in samples.get(name, []):
        if all(found.get(k) == v for k, v in labels.items()):
            return value
    return None


class Driver:
    def __init__(self, args: list[str], settings: Settings, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.log = log
        env = {**os.environ, **settings_env(settings), "LK_METRICS_PORT": str(self.port)}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        lk = Path(sys.executable).with_name("lk")
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [str(lk), *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_for(self, moved: object, timeout_s: float, what: str) -> Samples:
        """Scrape until `moved(samples)` holds; the last scrape."""
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            samples = _scrape(self.url)
            if samples is not None and moved(samples):  # type: ignore[operator]
                return samples
            assert time.monotonic() < deadline, f"{what}: {self.log.read_text()[-3000:]}"
            time.sleep(1.0)

    def stop(self) -> None:
        stop_group(self.process)


@pytest.fixture
def own(stack: Settings, tmp_path: Path) -> Iterator[tuple[Settings, Path, Path]]:
    settings = isolated_settings(stack, "metrics")
    events, profiles = tmp_path / "events.jsonl", tmp_path / "profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=31, events=EVENTS), events, profiles)
    yield settings, events, profiles


@pytest.mark.parametrize(
    ("architecture", "stream"), [("kappa", kappa_stream(1)), ("lambda", LAMBDA_SPEED)]
)
def test_a_stream_driver_serves_its_metrics_and_they_move(
    own: tuple[Settings, Path, Path], tmp_path: Path, architecture: str, stream: str
) -> None:
    settings, events, profiles = own
    driver = Driver(
        ["stream", "--architecture", architecture, "--trigger-seconds", "1"],
        settings,
        tmp_path / "stream.log",
    )
    try:
        first = driver.wait_for(
            lambda s: _one(s, "lk_stream_freshness_seconds", architecture=architecture) is not None,
            READY_S,
            "no freshness before any event",
        )
        assert _one(first, "lk_stream_freshness_seconds", architecture=architecture) == 0.0
        produce_file(settings, profiles, settings.profiles_topic)
        produce_file(settings, events, settings.events_topic)
        events_topic = settings.events_topic

        def caught_up(samples: Samples) -> bool:
            records = _one(
                samples, "lk_stream_records_in_total", architecture=architecture, topic=events_topic
            )
            fresh = _one(samples, "lk_stream_freshness_seconds", architecture=architecture)
            return records is not None and records >= EVENTS * 0.9 and fresh == 0.0

        samples = driver.wait_for(caught_up, MOVED_S, "the events never all came in")
        profiles_in = _one(
            samples,
            "lk_stream_records_in_total",
            architecture=architecture,
            topic=settings.profiles_topic,
        )
        assert profiles_in is not None and profiles_in > 0
        watermarks = {
            labels["partition"]: value
            for labels, value in samples["lk_stream_watermark_seconds"]
            if labels["architecture"] == architecture
        }
        with connect(settings) as conn:
            clocks = realtime.load_progress(conn, stream).clocks.greatest
        delay = settings.watermark_delay_ms
        assert len(clocks) > 1  # the workload's users spread over the partitions
        assert watermarks == {str(p): (ms - delay) / 1000 for p, ms in clocks.items()}
        for labels, lag in samples["lk_stream_watermark_lag_seconds"]:
            if labels["architecture"] == architecture:
                assert lag > 0  # the workload's event times are in the past
        for stage in ("spark_job", "inbox_write", "split", "keyed_merge", "store_commit", "total"):
            count = _one(
                samples,
                "lk_stream_micro_batch_duration_seconds_count",
                architecture=architecture,
                stage=stage,
            )
            assert count is not None and count >= 1, stage
        if architecture == "lambda":
            assert _one(
                samples,
                "lk_stream_micro_batch_duration_seconds_count",
                architecture="lambda",
                stage="accepted_log",
            )
        assert _one(samples, "lk_stream_commit_duration_seconds_count", architecture=architecture)
        last = _one(samples, "lk_stream_last_commit_timestamp_seconds", architecture=architecture)
        assert last is not None and time.time() - last < MOVED_S
        assert _one(samples, "lk_stream_quarantined_total", architecture=architecture) is not None
        assert _one(samples, "lk_stream_late_dropped_total", architecture=architecture) is not None

        reported = {
            labels["view"]: value
            for labels, value in samples["lk_stream_state_rows"]
            if labels["architecture"] == architecture
        }
        with connect(settings) as conn:
            counted: dict[str, int] = {}
            for name, rows in state.row_counts(conn, stream).items():
                view = name.split(":", 1)[0]
                counted[view] = counted.get(view, 0) + rows
        assert counted and reported == counted
    finally:
        driver.stop()


def test_the_archiver_serves_its_metrics_and_they_move(
    own: tuple[Settings, Path, Path], tmp_path: Path
) -> None:
    settings, events, profiles = own
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, events, settings.events_topic)
    driver = Driver(["archive"], settings, tmp_path / "archive.log")
    try:
        topic = settings.events_topic

        def archived(samples: Samples) -> bool:
            records = _one(samples, "lk_archiver_records_total", topic=topic)
            return records is not None and records >= EVENTS

        samples = driver.wait_for(archived, MOVED_S, "the archiver's records never moved")
        assert _one(samples, "lk_archiver_micro_batch_duration_seconds_count", topic=topic)
        last = _one(samples, "lk_archiver_last_commit_timestamp_seconds", topic=topic)
        assert last is not None and time.time() - last < MOVED_S
    finally:
        driver.stop()
