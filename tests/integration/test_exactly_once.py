"""Exactly once where it is easiest to lose: two archivers at once, a lost checkpoint, records
gone from the log before they were read, and a Kappa switch while the live job runs ahead.

Each test has a namespace of its own (topics, buckets, database) on the shared real stack.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from batch_layer import archiver
from core.delta_io import delete_tree
from core.kafka_io import end_offsets, log_end, produce_file
from core.master_dataset import MasterDataset
from core.settings import Architecture, Settings
from core.store import realtime, versions
from core.store.connection import connect
from core.store.streams import archiver_stream, kappa_stream
from kappa.job import KAPPA, KappaError, KappaViews
from kappa.reprocess import Reprocess, left_behind
from tests.integration.helpers import isolated_settings, workload_in_parts
from tests.isolation import _admin


def _master_records(spark: Any, settings: Settings) -> tuple[int, int]:
    """(rows, distinct records) of the master dataset's events."""
    table = spark.read.format("delta").load(MasterDataset.from_settings(settings).events)
    return table.count(), table.select("partition", "offset").distinct().count()


def _active_archivers(spark: Any) -> list[str]:
    return [q.name for q in spark.streams.active if q.name.startswith("archiver-")]


def _remove_unread_records(settings: Settings) -> None:
    """What retention does to records no one read yet: the log now starts at its end."""
    from confluent_kafka import TopicPartition

    admin = _admin(settings)
    ends = end_offsets(settings, settings.events_topic)
    partitions = [TopicPartition(settings.events_topic, p, high) for p, (_, high) in ends.items()]
    for future in admin.delete_records(partitions).values():
        future.result(timeout=30)


def test_one_archiver_writes_while_another_drains(
    stack: Settings, spark: Any, tmp_path: Path
) -> None:
    """The continuous archiver holds the archive lease; a drain at the same time (the batch's
    `close_archive`) starts no second driver on the checkpoint: it waits for the holder to reach
    the log's end. Every record is archived exactly once."""
    settings = isolated_settings(stack, "lease")
    (first, second), profiles = workload_in_parts(tmp_path, 91, 1200, 2)[:2]
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, first, settings.events_topic)

    failures: list[BaseException] = []

    def run_follower() -> None:
        try:
            archiver.follow(spark, settings, lambda _: None)
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    follower = threading.Thread(target=run_follower, daemon=True)
    follower.start()
    try:
        deadline = time.monotonic() + 120
        while not archiver.archived(settings) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert archiver.archived(settings), failures
        produce_file(settings, second, settings.events_topic)
        target = log_end(settings)
        archiver.drain(spark, settings)  # without the lease: a second query on one checkpoint
        assert sorted(_active_archivers(spark)) == ["archiver-events", "archiver-profiles"]
        reached = archiver.archived(settings)
        assert all(reached.get(tp, 0) >= end for tp, end in target.items())
    finally:
        for query in spark.streams.active:
            if query.name.startswith("archiver-"):
                query.stop()
        follower.join(timeout=60)
    assert not failures
    produced = sum(high for _, high in end_offsets(settings, settings.events_topic).values())
    assert _master_records(spark, settings) == (produced, produced)

    # A lost checkpoint is refused: its new batch 0 is neither skipped as done nor archived twice.
    delete_tree(spark, f"s3a://{settings.checkpoints_bucket}/archiver/events")
    with pytest.raises(archiver.ArchiveError, match="checkpoint was lost or replaced"):
        archiver.drain(spark, settings)
    assert _master_records(spark, settings) == (produced, produced)


def test_records_gone_before_they_were_read_stop_with_a_reason(
    stack: Settings, spark: Any, tmp_path: Path
) -> None:
    settings = isolated_settings(stack, "loss").model_copy(
        update={"architecture": Architecture.KAPPA}
    )
    (first, second, third), profiles = workload_in_parts(tmp_path, 91, 900, 3)[:2]
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, first, settings.events_topic)
    views = KappaViews(spark, settings)
    views.drain()
    archiver.drain(spark, settings)

    produce_file(settings, second, settings.events_topic)
    _remove_unread_records(settings)  # neither the Kappa job nor the archiver read these
    produce_file(settings, third, settings.events_topic)

    with pytest.raises(KappaError, match="left the log before they were read"):
        views.drain()
    with pytest.raises(archiver.ArchiveError, match=r"(?i)data.*lost|lost.*data|offset"):
        archiver.drain(spark, settings)
    with connect(settings) as conn:
        assert realtime.load_progress(conn, archiver_stream("events")).offsets


def test_a_lost_stream_checkpoint_is_refused(stack: Settings, spark: Any, tmp_path: Path) -> None:
    settings = isolated_settings(stack, "ckpt").model_copy(
        update={"architecture": Architecture.KAPPA}
    )
    (first, second), profiles = workload_in_parts(tmp_path, 91, 600, 2)[:2]
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, first, settings.events_topic)
    views = KappaViews(spark, settings)
    version = views.drain()
    stream = kappa_stream(version.version)
    with connect(settings) as conn:
        before = realtime.row_counts(conn, stream)
    delete_tree(spark, f"s3a://{settings.checkpoints_bucket}/{stream}")
    produce_file(settings, second, settings.events_topic)
    with pytest.raises(KappaError, match="checkpoint was lost or replaced"):
        views.drain()
    with connect(settings) as conn:
        assert realtime.row_counts(conn, stream) == before  # nothing counted twice


def test_the_kappa_switch_never_goes_live_behind(
    stack: Settings, spark: Any, tmp_path: Path
) -> None:
    """The live job reads past the new version after its last replay round: the switch replays
    once more, under the live job's lock, and only then moves readers. A run killed between its
    switch and its retirement is finished by the next run."""
    settings = isolated_settings(stack, "switch").model_copy(
        update={"architecture": Architecture.KAPPA, "watermark_delay_ms": 10**12}
    )
    (first, second), profiles = workload_in_parts(tmp_path, 91, 800, 2)[:2]
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, first, settings.events_topic)
    views = KappaViews(spark, settings)
    live = views.drain()
    reprocess = Reprocess(spark, settings)
    new = reprocess.start("1")
    assert reprocess.replay_round(new).caught_up
    produce_file(settings, second, settings.events_topic)
    views.drain()  # the live version is now ahead of the new one

    assert reprocess.switch(new) == live.version  # (killed here: no retirement)
    with connect(settings) as conn:
        ours = realtime.load_progress(conn, kappa_stream(new.version)).offsets
        theirs = realtime.load_progress(conn, kappa_stream(live.version)).offsets
        assert versions.current(conn, KAPPA).version == new.version  # type: ignore[union-attr]
    assert all(ours.get(tp, 0) >= offset for tp, offset in theirs.items())
    with connect(settings) as conn:  # the same log read by both: the same rows
        counts = realtime.row_counts(conn, kappa_stream(new.version))
        assert counts == realtime.row_counts(conn, kappa_stream(live.version))

    assert left_behind(settings) == [live.version]
    result = Reprocess(spark, settings).run("1")
    assert result.retired == new.version
    assert left_behind(settings) == []
    with connect(settings) as conn:
        assert realtime.row_counts(conn, kappa_stream(live.version)) == dict.fromkeys(counts, 0)
