"""A burst produced while both streams run drops exactly what CONTRACT §3 drops.

The speed layer and the Kappa job follow the log live, with micro-batches small enough to be
planned mid-burst: some partitions of a burst are read before others. Each partition keeps
its own event-time clock and judges each record against the records before it, so every
stream drops exactly the workload's truly late events, whatever micro-batches it ran (several
per burst, read back from its checkpoint's offsets log), and the served views are the oracle's
without those.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from core import workload
from core.catalog import VIEW_NAMES
from core.checkpoints import batch_offsets, last_committed
from core.events import Event
from core.kafka_io import log_end, produce_file, read_topic
from core.oracle import compute_views, late_event_ids, load_jsonl_values, load_profiles_jsonl
from core.settings import Architecture, Settings
from core.store import realtime
from core.store import state as stream_state
from core.store.connection import connect
from core.store.streams import LAMBDA_SPEED, kappa_stream
from kappa.job import KappaViews
from serving.main import create_app
from speed_layer.lambda_speed import SpeedLayer
from stream_engine.engine import StreamEngine
from tests.integration.helpers import isolated_settings
from tests.serving_pages import read_whole

BURSTS = 8
"""The workload's four hours of event time arrive in this many bursts of half an hour each:
more event time than the watermark's delay (10 minutes) in every one."""


def _batch_ends(spark, engine: StreamEngine, topic: str) -> list[dict[int, int]]:  # type: ignore[no-untyped-def]
    """Where each micro-batch the stream ran read up to in `topic`, from its checkpoint."""
    checkpoint = engine.spec.checkpoint
    last = last_committed(spark, checkpoint)
    assert last is not None
    ends = []
    for batch in range(last + 1):
        offsets = batch_offsets(spark, checkpoint, batch)
        ends.append(
            {
                int(tp.rsplit("/", 1)[1]): n
                for tp, n in offsets.items()
                if tp.startswith(f"{topic}/")
            }
        )
    return ends


def _without(dropped: set[str]) -> Callable[[Event], bool]:
    return lambda event: event.event_id not in dropped


def _caught_up(settings: Settings, stream: str) -> bool:
    topic = settings.events_topic
    end = {tp: n for tp, n in log_end(settings).items() if tp.startswith(f"{topic}/") and n}
    with connect(settings) as conn:
        offsets = realtime.load_progress(conn, stream).offsets
    return all(offsets.get(tp, 0) >= n for tp, n in end.items())


def test_a_burst_while_both_streams_run_drops_exactly_what_the_contract_drops(
    stack: Settings,
    spark,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    settings = isolated_settings(stack, "burst").model_copy(
        update={"architecture": Architecture.BOTH, "stream_max_offsets_per_trigger": 300}
    )
    events, profiles = tmp_path / "events.jsonl", tmp_path / "events.profiles.jsonl"
    stats = workload.generate(workload.WorkloadSpec(seed=23, events=4000), events, profiles)
    produce_file(settings, profiles, settings.profiles_topic)

    speed = SpeedLayer(spark, settings).engine
    kappa = KappaViews(spark, settings)
    kappa_engine = kappa.engine(kappa.active())
    streams = {LAMBDA_SPEED: speed, kappa_stream(1): kappa_engine}
    queries = [
        engine.start(available_now=False, trigger_seconds=0.5) for engine in streams.values()
    ]
    try:
        lines = events.read_bytes().splitlines(keepends=True)
        size = -(-len(lines) // BURSTS)
        for n in range(BURSTS):
            burst = tmp_path / f"burst-{n}.jsonl"
            burst.write_bytes(b"".join(lines[n * size : (n + 1) * size]))
            produce_file(settings, burst, settings.events_topic)
            time.sleep(0.7)  # a micro-batch or so: the next burst lands while one runs
        deadline = time.monotonic() + 600
        while not all(_caught_up(settings, stream) for stream in streams):
            assert time.monotonic() < deadline, "the streams did not catch up in 10 minutes"
            assert all(q.isActive for q in queries), [q.exception() for q in queries]
            time.sleep(1)
    finally:
        for query in queries:
            query.stop()
    for engine, query in zip(streams.values(), queries, strict=True):
        assert engine.finish(query) is None

    records = [
        (r.partition, r.offset, r.value) for r in read_topic(settings, settings.events_topic)
    ]
    delay = settings.watermark_delay_ms
    truly_late = late_event_ids(records, delay)
    assert len(truly_late) == stats.late_events > 0
    values = load_jsonl_values(events)
    profile_changes = load_profiles_jsonl(profiles)
    with TestClient(create_app(settings)) as client:
        for stream, engine in streams.items():
            ends = _batch_ends(spark, engine, settings.events_topic)
            assert len(ends) > BURSTS, f"{stream}: micro-batches must start mid-burst"
            with connect(settings) as conn:
                dropped = stream_state.late_event_ids(conn, stream)
            assert dropped == truly_late, stream
            architecture = "lambda" if stream == LAMBDA_SPEED else "kappa"
            expected = compute_views(values, profile_changes, keep=_without(dropped))
            for view in VIEW_NAMES:
                served = read_whole(client.get, view, architecture=architecture)
                assert served["rows"] == expected.views[view], (stream, view)
                assert served["meta"]["late_dropped"] == len(dropped)
