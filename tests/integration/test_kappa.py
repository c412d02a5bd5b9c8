"""Kappa on the real stack: the stream path alone equals the oracle, late data is dropped and
counted exactly, a replay on Spark ends with the same rows as the live stream's micro-batches,
a copy of a replayed event arriving after the switch counts once, and a reprocess survives
being killed mid-replay. (Readers during a reprocess into another logic version, whole old
answer or whole new one: tests/comparison.)

One workload and one Kappa deployment serve the whole module (Spark is slow to start here):
the tests run in file order and each leaves the deployment as the next expects it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from core import workload
from core.cdc import capture
from core.events import Event, parse_event
from core.kafka_io import partition_for, produce_file
from core.oracle import (
    OracleResult,
    compute_views,
    keep_all_of,
    load_jsonl_values,
    load_profiles_jsonl,
    logic_filter,
)
from core.settings import Architecture, Settings
from core.store import realtime, versions
from core.store import state as stream_state
from core.store.connection import connect
from core.store.streams import kappa_stream
from kappa.job import KAPPA, KappaError, KappaViews
from kappa.reprocess import ReplayPosition, Reprocess
from serving.main import create_app
from stream_engine.engine import StreamEngine
from stream_engine.inbox import PendingBatch
from tests.conftest import ROOT
from tests.integration.helpers import apply_profiles_through_faults, isolated_settings, settings_env
from tests.serving_pages import ANSWERS, oracle_answers, read_answers

WATERMARK_MS = 10 * 60_000
FIRST_PART = 300
"""Lines of the workload produced before version 1 starts."""


@pytest.fixture(scope="module")
def kappa(stack: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:  # type: ignore[type-arg]
    settings = isolated_settings(stack, "kappa").model_copy(
        update={
            "architecture": Architecture.KAPPA,
            "stream_max_offsets_per_trigger": 1000,
            # A history of any size replays on Spark's task slots, as a large log's does.
            "stream_history_min_records": 0,
        }
    )
    folder = tmp_path_factory.mktemp("kappa")
    events, profiles = folder / "events.jsonl", folder / "events.profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=57, events=3000), events, profiles)
    # The profiles through the application's table and change data capture, as deployed,
    # with Kafka Connect killed and Postgres restarted in the middle (no change lost).
    capture.start(settings)
    apply_profiles_through_faults(stack, settings, profiles)
    # A first part only: version 1's first start replays it (on Spark), the rest reaches it
    # live, micro-batch by micro-batch (the driver's merges), as a deployment's stream would.
    lines = events.read_bytes().splitlines(keepends=True)
    first, rest = folder / "first.jsonl", folder / "rest.jsonl"
    first.write_bytes(b"".join(lines[:FIRST_PART]))
    rest.write_bytes(b"".join(lines[FIRST_PART:]))
    produce_file(settings, first, settings.events_topic)
    yield {
        "settings": settings,
        "events": events,
        "profiles": profiles,
        "folder": folder,
        "rest": rest,
    }
    capture.stop(settings)


def _late_ids(spark, settings: Settings, version: int, logic: str) -> set[str]:  # type: ignore[no-untyped-def]
    with connect(settings) as conn:
        return stream_state.late_event_ids(conn, kappa_stream(version))


def _oracle(case: dict, late_ids: set[str], logic: str, extra: Path | None = None) -> OracleResult:  # type: ignore[type-arg]
    values = load_jsonl_values(case["events"])
    if extra is not None:
        values += load_jsonl_values(extra)
    return compute_views(
        values,
        load_profiles_jsonl(case["profiles"]),
        keep=keep_all_of(lambda e: e.event_id not in late_ids, logic_filter(logic)),
    )


def _served(settings: Settings) -> dict[str, dict]:  # type: ignore[type-arg]
    """Every view and pattern view's matches, as the API serves them (`ANSWERS`)."""
    with TestClient(create_app(settings)) as client:
        return read_answers(client.get, architecture="kappa")


def test_drain_equals_the_oracle_with_late_data_dropped_and_counted(kappa, spark) -> None:  # type: ignore[no-untyped-def]
    settings: Settings = kappa["settings"]
    version = KappaViews(spark, settings).drain()  # the first part: the history, on Spark
    assert (version.version, version.logic_version) == (1, "1")
    assert _committed(settings, 1) == 0  # one micro-batch
    produce_file(settings, kappa["rest"], settings.events_topic)
    version = KappaViews(spark, settings).drain()  # the rest: micro-batches of 1,000 records
    assert _committed(settings, 1) >= 3

    late_ids = _late_ids(spark, settings, 1, "1")
    expected = oracle_answers(_oracle(kappa, late_ids, "1"))
    served = _served(settings)
    assert expected["search_conversions/matches"]  # the workload completes patterns
    for name in ANSWERS:
        assert served[name]["rows"] == expected[name], name
    meta = served["page_views"]["meta"]
    assert meta["view_version"] == 1 and meta["late_dropped"] == len(late_ids) > 0
    assert meta["quarantined"] == _oracle(kappa, late_ids, "1").quarantined

    # Exactly the events behind their partition's watermark are dropped: append a few events
    # around it, on the partition of their user.
    with connect(settings) as conn:
        clocks = realtime.load_progress(conn, kappa_stream(1)).clocks
    watermark = clocks.threshold(partition_for(b"u-edge", settings.events_partitions), WATERMARK_MS)
    assert watermark is not None
    extra = kappa["folder"] / "extra.jsonl"
    behind = [watermark - 60_000, watermark - 1]  # behind the watermark: dropped
    ahead = [watermark, watermark + 60_000]  # at or after it: counted
    lines = [
        {
            "event_id": f"edge-{i}",
            "type": "page_view",
            "user_id": "u-edge",
            "page": "/edge",
            "device_ts": ts,
            "sent_ts": ts,
            "received_ts": ts,
        }
        for i, ts in enumerate(behind + ahead)
    ]
    extra.write_text("".join(json.dumps(line) + "\n" for line in lines))
    produce_file(settings, extra, settings.events_topic)
    KappaViews(spark, settings).drain()

    late_after = _late_ids(spark, settings, 1, "1")
    assert late_after - late_ids == {"edge-0", "edge-1"}
    served = _served(settings)
    assert served["page_views"]["meta"]["late_dropped"] == len(late_ids) + 2
    edge_rows = [r for r in served["page_views"]["rows"] if r["page"] == "/edge"]
    assert sum(r["count"] for r in edge_rows) == 2
    expected = oracle_answers(_oracle(kappa, late_after, "1", extra))
    for name in ANSWERS:
        assert served[name]["rows"] == expected[name], name
    kappa["extra"] = extra


def _committed(settings: Settings, version: int) -> int:
    with connect(settings) as conn:
        return realtime.load_progress(conn, kappa_stream(version)).last_batch_id


def _half_written(settings: Settings, version: int) -> bool:
    """The history's bulk writes have begun (its late events go first) and its micro-batch is
    not committed."""
    stream = kappa_stream(version)
    with connect(settings) as conn:
        row = conn.execute("select count(*) from stream_late where stream = %s", (stream,))
        written = row.fetchone()
    return written is not None and written[0] > 0 and _committed(settings, version) < 0


def test_reprocess_killed_mid_replay_reaches_the_live_versions_rows(kappa, spark) -> None:  # type: ignore[no-untyped-def]
    """Killed while the executors write the history, the rerun resumes the same version,
    deletes what the killed run wrote and ends exact: the rows and late events of the live
    version, which read the same log micro-batch by micro-batch (CONTRACT §3: the late set is
    the log's, not the batching's)."""
    settings: Settings = kappa["settings"]
    env = settings_env(settings)
    lk = Path(sys.executable).with_name("lk")
    running = subprocess.Popen(
        [str(lk), "reprocess", "--architecture", "kappa", "--logic-version", "1"],
        cwd=ROOT,
        env={**os.environ, **env},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while not _half_written(settings, 2):
            assert running.poll() is None, "the reprocess exited before its history was written"
            assert _committed(settings, 2) < 0, "the history committed before it was caught"
            assert time.monotonic() < deadline, "no bulk write of v2 in 600 s"
            time.sleep(0.1)
    finally:
        os.killpg(running.pid, signal.SIGKILL)  # a crash mid-replay
        running.wait(30)
    assert _committed(settings, 2) < 0
    with connect(settings) as conn:
        assert versions.current(conn, KAPPA).version == 1  # type: ignore[union-attr]
        assert versions.get(conn, KAPPA, 2).status == "building"  # type: ignore[union-attr]
    live = _served(settings)
    live_late = _late_ids(spark, settings, 1, "1")

    replayed: list[ReplayPosition] = []  # what `lk reprocess` draws its bar from
    result = Reprocess(spark, settings, on_replay=replayed.append).run("1")
    assert (result.version, result.retired) == (2, 1)  # resumed v2, not a fresh v3
    assert {p.version for p in replayed} == {2}
    assert all(p.read <= p.to_read for p in replayed)
    assert replayed[-1].read == replayed[-1].to_read  # a round reads what the log held at its start

    late_ids = _late_ids(spark, settings, 2, "1")
    assert late_ids == live_late
    expected = oracle_answers(_oracle(kappa, late_ids, "1", kappa["extra"]))
    served = _served(settings)
    for name in ANSWERS:  # the matches too: the replay's, written on Spark
        assert served[name]["rows"] == expected[name], name
        assert served[name]["rows"] == live[name]["rows"], name
    assert served["page_views"]["meta"]["late_dropped"] == len(late_ids)


def test_a_copy_of_a_replayed_event_arriving_after_the_switch_counts_once(kappa, spark) -> None:  # type: ignore[no-untyped-def]
    """The replay's deduplication state holds every event id of the history: a producer's
    retry of an event replayed on Spark, arriving after the switch, is dropped."""
    settings: Settings = kappa["settings"]
    before = _served(settings)
    copies = kappa["folder"] / "copies.jsonl"
    late = _late_ids(spark, settings, 2, "1")
    counted = [
        line
        for line in kappa["events"].read_text().splitlines()
        if isinstance(event := parse_event(line.encode()), Event) and event.event_id not in late
    ]
    copies.write_text("".join(line + "\n" for line in counted[:5]))
    produce_file(settings, copies, settings.events_topic)
    version = KappaViews(spark, settings).drain()
    assert version.version == 2
    assert _committed(settings, 2) >= 1  # a micro-batch after the history read the copies
    after = _served(settings)
    for name in ANSWERS:
        assert after[name]["rows"] == before[name]["rows"], name


def test_a_batch_spark_committed_before_the_store_is_merged_from_the_inbox_at_a_restart(
    kappa, spark, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The merge of the last micro-batch fails after Spark committed the batch in its
    checkpoint (the micro-batch function had handed it over): Spark will not read it again,
    and the next start, with nothing new in the log, merges it from the inbox. The views end
    exact, nothing lost or counted twice."""
    settings: Settings = kappa["settings"]
    views = KappaViews(spark, settings)
    version = views.active()
    stream = kappa_stream(version.version)
    with connect(settings) as conn:
        before = realtime.load_progress(conn, stream)
    assert before.max_event_ts is not None
    start = before.max_event_ts + 60_000  # behind no partition's clock: none of them late
    lines = [
        {
            "event_id": f"inbox-{i}",
            "type": "page_view",
            "user_id": f"u-inbox-{i % 7}",
            "page": "/inbox",
            "device_ts": start + i * 100,
            "sent_ts": start + i * 100,
            "received_ts": start + i * 100,
        }
        for i in range(500)
    ]
    new = kappa["folder"] / "inbox.jsonl"
    new.write_text("".join(json.dumps(line) + "\n" for line in lines))
    produce_file(settings, new, settings.events_topic)  # one micro-batch (of at most 1,000)

    merged: list[int] = []

    def failing_merge(engine: StreamEngine, pending: PendingBatch) -> None:
        merged.append(pending.batch_id)
        raise RuntimeError("injected: the driver died in this merge")

    monkeypatch.setattr(StreamEngine, "_merge", failing_merge)
    with pytest.raises(KappaError, match="injected"):
        views.run_available_now(version)
    monkeypatch.undo()
    with connect(settings) as conn:
        assert realtime.load_progress(conn, stream).last_batch_id == before.last_batch_id
    inbox = views.engine(version).inbox
    assert inbox.batch_ids() == merged, "Spark committed it: only the inbox holds it now"

    views.run_available_now(version)
    assert inbox.batch_ids() == []
    with connect(settings) as conn:
        assert realtime.load_progress(conn, stream).last_batch_id == merged[-1]
    late_ids = _late_ids(spark, settings, version.version, "1")
    everything = kappa["folder"] / "extra-and-inbox.jsonl"
    everything.write_text(kappa["extra"].read_text() + new.read_text())
    expected = oracle_answers(_oracle(kappa, late_ids, "1", everything))
    served = _served(settings)
    for name in ANSWERS:
        assert served[name]["rows"] == expected[name], name
    assert sum(r["count"] for r in served["page_views"]["rows"] if r["page"] == "/inbox") == 500
