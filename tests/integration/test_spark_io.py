"""A Spark session round-trips data through s3a on MinIO and reads the log from Kafka."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from pyspark.sql import functions as F

from core import class_archive
from core.settings import Settings
from infra.stack.process import pid_alive
from tests.integration.helpers import fresh_topic


def test_dataframe_round_trips_through_s3a_parquet_and_delta(spark, stack: Settings) -> None:  # type: ignore[no-untyped-def]
    from pyspark.testing import assertDataFrameEqual

    rows = [(i, f"u{i % 7}", i * 10) for i in range(500)]
    df = spark.createDataFrame(rows, "id long, user_id string, amount_cents long")
    base = f"s3a://{stack.master_bucket}/it/{uuid.uuid4().hex[:8]}"

    df.write.partitionBy("user_id").parquet(f"{base}/parquet")
    assertDataFrameEqual(spark.read.parquet(f"{base}/parquet").select(df.columns), df)

    df.write.format("delta").save(f"{base}/delta")
    assertDataFrameEqual(spark.read.format("delta").load(f"{base}/delta"), df)


def test_spark_reads_the_log_from_kafka_with_partitions_and_offsets(spark, stack: Settings) -> None:  # type: ignore[no-untyped-def]
    topic = fresh_topic(stack, "spark-it", partitions=3)
    producer = Producer(
        {"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"}
    )
    sent = [(f"u{i % 5}", f'{{"n": {i}}}', 1_700_000_000_000 + i) for i in range(60)]
    for key, value, ts in sent:
        producer.produce(topic, key=key.encode(), value=value.encode(), timestamp=ts)
    assert producer.flush(30) == 0

    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", stack.kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr(
            "cast(key as string) as key",
            "cast(value as string) as value",
            "partition",
            "offset",
            "timestamp",
        )
        .collect()
    )
    assert sorted((r.key, r.value) for r in records) == sorted((k, v) for k, v, _ in sent)
    per_partition: dict[int, list[int]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        per_partition.setdefault(r.partition, []).append(r.offset)
        assert r.timestamp.timestamp() * 1000 == next(ts for k, v, ts in sent if v == r.value)
    assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())
    # One key, one partition: the log keeps a user's events in order.
    assert len({(r.key, r.partition) for r in records}) == 5


def _rate_to_noop(spark):  # type: ignore[no-untyped-def]
    """A stream with a local, temporary checkpoint: 5 rows a second into Spark's noop sink."""
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.format("noop")
        .trigger(processingTime="1 second")
        .start()
    )


def test_a_stream_on_minio_writes_its_checkpoint_in_place_and_a_local_one_still_starts(  # type: ignore[no-untyped-def]
    spark, stack: Settings
) -> None:
    """``start_checkpointed``: the direct file manager is the MinIO query's own setting (it
    refuses a local path), so a query checkpointed locally on the same session still runs; so
    is the conf it is given (a stream's state partitions), the session's left as it was."""
    from core.spark import start_checkpointed

    key = "spark.sql.streaming.checkpointFileManagerClass"
    counts = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 20)
        .load()
        .groupBy((F.col("value") % 3).alias("k"))
        .count()
    )
    checkpoint = f"s3a://{stack.checkpoints_bucket}/it-{uuid.uuid4().hex[:8]}"
    on_minio = start_checkpointed(
        spark,
        counts.writeStream.format("noop").outputMode("update").trigger(processingTime="1 second"),
        checkpoint,
        {"spark.sql.shuffle.partitions": "3"},  # the query's own, as a stream's state partitions
    )
    assert spark.conf.get(key, None) is None, "the session keeps Spark's default"
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(stack.spark_shuffle_partitions)
    local = _rate_to_noop(spark)
    try:
        deadline = time.monotonic() + 60
        while len(on_minio.recentProgress) < 3 or not local.recentProgress:
            assert on_minio.exception() is None and local.exception() is None
            assert time.monotonic() < deadline, "no progress in 60 s"
            time.sleep(0.5)
        # The store does not count its rows (`core.spark`): the updates show it wrote them.
        updated = sum(p["stateOperators"][0]["numRowsUpdated"] for p in on_minio.recentProgress)
        assert updated >= 3
        partitions = {
            p["stateOperators"][0]["numShufflePartitions"] for p in on_minio.recentProgress
        }
        assert partitions == {3}
    finally:
        on_minio.stop()
        local.stop()
    files = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(f"{checkpoint}/commits")  # type: ignore[union-attr]
    fs = files.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[union-attr]
    names = [status.getPath().getName() for status in fs.listStatus(files)]
    assert names and not [n for n in names if n.endswith(".tmp")], names


def test_the_heartbeat_follows_each_running_query(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What the chart's liveness probes read: a file per running query, fresh, gone at its end."""
    import time

    from core.spark import install_heartbeat

    folder = tmp_path / "heartbeat"
    folder.mkdir()
    (folder / "left-by-an-earlier-run").touch()
    listener = install_heartbeat(spark, folder)
    try:
        query = _rate_to_noop(spark)
        try:
            deadline = time.monotonic() + 60
            while not (folder / str(query.id)).exists():
                assert time.monotonic() < deadline, "no heartbeat in 60 s"
                time.sleep(0.5)
            first = (folder / str(query.id)).stat().st_mtime
            while (folder / str(query.id)).stat().st_mtime <= first:
                assert time.monotonic() < deadline, "the heartbeat did not move"
                time.sleep(0.5)
            assert [p.name for p in folder.iterdir()] == [str(query.id)]
        finally:
            query.stop()
        deadline = time.monotonic() + 30
        while list(folder.iterdir()):
            assert time.monotonic() < deadline, "the heartbeat outlived its query"
            time.sleep(0.5)
    finally:
        spark.streams.removeListener(listener)


_SESSION_WITH_JVM_LOG = """
import sys
from pathlib import Path
from core.settings import get_settings
from core.spark import build_spark_session
session = build_spark_session(get_settings(), "lk-jvm-log", Path(sys.argv[1]))
print(session.range(3).count())
session.stop()
"""


def test_the_driver_jvm_s_own_output_goes_to_its_log_file_not_the_terminal(
    stack: Settings, stack_env: dict[str, str], tmp_path: Path
) -> None:
    """What `lk` does on a terminal (lk/spark_output.py): SLF4J's and Spark's WARN lines land in
    the file, and the terminal keeps only the command's own output."""
    log = tmp_path / "spark-lk-jvm-log.log"
    done = subprocess.run(
        [sys.executable, "-c", _SESSION_WITH_JVM_LOG, str(log)],
        env={**os.environ, **stack_env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "3"
    for noise in ("WARN", "log4j", "SLF4J", "Setting default log level"):
        assert noise not in done.stderr + done.stdout, noise
    assert "log4j" in log.read_text()  # "Using Spark's default log4j profile: ..."


_SESSION_THEN_WAIT = """
import os, sys, time
from core.settings import get_settings
from core.spark import build_spark_session
session = build_spark_session(get_settings(), "lk-jvm-session")
jvm = session.sparkContext._gateway.proc.pid
print(jvm, os.getsid(0), os.getsid(jvm), session.range(3).count(), flush=True)
time.sleep(300)
"""


def test_the_driver_jvm_has_a_session_of_its_own_maps_the_class_archive_and_dies_with_its_driver(
    stack: Settings, stack_env: dict[str, str]
) -> None:
    """Its own session, at `spark_jvm_niceness` against the others (the serving API's CPU comes
    first); it starts from the class-data archive `lk stack up` made (`core.class_archive`); a
    driver killed with SIGKILL still takes its JVM along (its stdin pipe closes)."""
    archive, made_in = class_archive.build(stack)
    assert archive is not None and archive.is_file()
    assert made_in is None, "`lk stack up` made it, later calls find it"
    driver = subprocess.Popen(
        [sys.executable, "-c", _SESSION_THEN_WAIT],
        env={**os.environ, **stack_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert driver.stdout is not None
        jvm, driver_session, jvm_session, count = map(int, driver.stdout.readline().split())
        assert count == 3
        assert jvm_session == jvm != driver_session
        autogroup = Path(f"/proc/{jvm}/autogroup")
        if autogroup.exists():  # a kernel with autogroup scheduling
            assert autogroup.read_text().split()[-1] == str(stack.spark_jvm_niceness)
        assert str(archive) in Path(f"/proc/{jvm}/maps").read_text()
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + 30
    while pid_alive(jvm) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_alive(jvm), "the JVM outlived its driver"
