"""Quality gates on the real stack: the batch steps publish only what passed both gates, Data
Docs are served from MinIO to anyone, the reconciliation explains Kappa's late data, a failing
suite stops a Kappa switch, and a corrupted raw partition stops the batch at its first gate.

One workload and one deployment (Lambda and Kappa, isolated topics, buckets and database) serve
the whole module: the tests run in file order and each leaves it as the next expects it. The
corrupting test is last.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from batch_layer import pipeline
from batch_layer.errors import BatchError
from batch_layer.pipeline import run_batch
from core import workload
from core.catalog import VIEW_NAMES, VIEWS
from core.kafka_io import produce_file
from core.master_dataset import MasterDataset
from core.provision import s3_client
from core.settings import Architecture, Settings
from core.store import versions
from core.store.connection import connect
from core.store.schema import realtime_table
from lk.pipelines import publish_batch
from quality import QualityGateError, publish_docs
from serving.main import create_app
from serving.quality import run_reconciliation, validate_realtime
from tests.conftest import run_lk
from tests.integration.helpers import isolated_settings, settings_env


@pytest.fixture(scope="module")
def dq(stack: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Both architectures on a workload with late events, its own Data Docs bucket."""
    settings = isolated_settings(stack, "dq").model_copy(
        update={
            "architecture": Architecture.BOTH,
            "dq_bucket": f"dq-{uuid.uuid4().hex[:6]}",
            # Several micro-batches: a partition's clock moves between them, and its late
            # events (the workload's 13) arrive behind it.
            "stream_max_offsets_per_trigger": 500,
        }
    )
    # Every validation writes its result there (quality.result_store): `lk init` makes the
    # deployment's, the test makes its own.
    s3_client(settings).create_bucket(Bucket=settings.dq_bucket)
    folder = tmp_path_factory.mktemp("dq")
    events, profiles = folder / "events.jsonl", folder / "events.profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=73, events=3000), events, profiles)
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, events, settings.events_topic)
    yield settings


def _alias(settings: Settings, architecture: str) -> int | None:
    with connect(settings) as conn:
        current = versions.current(conn, architecture)
    return None if current is None else current.version


def _status(settings: Settings, architecture: str, version: int) -> str | None:
    with connect(settings) as conn:
        found = versions.get(conn, architecture, version)
    return None if found is None else found.status


def test_the_batch_steps_publish_a_version_that_passed_both_gates(dq: Settings, spark: Any) -> None:
    partitions = pipeline.close_archive(spark, dq)
    assert len(partitions) >= 2 and all(0 <= hour < 24 for _, hour in partitions)

    raw = pipeline.validate_raw(spark, dq, "good-run", partitions)
    assert raw.success and raw.rows and raw.rows > 2000, raw.failures

    version = pipeline.compute_views(spark, dq)
    assert _status(dq, "lambda", version) == "building"  # written, not visible
    assert _alias(dq, "lambda") is None

    results = pipeline.validate_views(spark, dq, version, "good-run")
    assert [r.suite for r in results] == [f"batch_views.{v}" for v in VIEW_NAMES]
    assert all(r.success for r in results), [r.failures for r in results]

    assert publish_batch(dq, version) == version
    assert _alias(dq, "lambda") == version
    assert publish_batch(dq, version) == version  # a retry changes nothing
    assert pipeline.new_partitions(spark, dq) == []  # the published batch has seen everything


def test_data_docs_are_published_and_readable_by_anyone(dq: Settings) -> None:
    url = publish_docs(dq)
    assert url == f"{dq.s3_endpoint}/{dq.dq_bucket}/docs/index.html"
    page = httpx.get(url, timeout=10)  # no credentials
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<h2>Layer lambda-batch</h2>" in page.text
    assert "master_partition" in page.text and "batch_views.sessions" in page.text
    gx_index = httpx.get(url.replace("index.html", "runs.html"), timeout=10)
    assert gx_index.status_code == 200 and "good-run" in gx_index.text
    # Only the docs are public: the bucket's listing and other buckets stay private.
    assert httpx.get(f"{dq.s3_endpoint}/{dq.dq_bucket}/", timeout=10).status_code == 403
    master = f"{dq.s3_endpoint}/{dq.master_bucket}/events/_delta_log/00000000000000000000.json"
    assert httpx.get(master, timeout=10).status_code == 403

    with TestClient(create_app(dq)) as client:
        body = client.get("/v1/quality").json()
    assert body["data_docs"] == url
    found = {(s["layer"], s["suite"]): s for s in body["suites"]}
    assert found[("lambda-batch", "master_partition")]["success"] is True
    assert found[("lambda-batch", "batch_views.search_ctr")]["run_name"] == "good-run"


def test_the_reconciliation_explains_what_kappa_dropped_as_late(dq: Settings, spark: Any) -> None:
    from kappa.job import KappaViews

    KappaViews(spark, dq).drain()
    with connect(dq) as conn:
        late = conn.execute(
            "select late_dropped from stream_progress where stream = 'kappa-v1'"
        ).fetchone()
    assert late is not None and late[0] > 0, "the workload must make Kappa drop late events"

    for architecture in ("lambda", "kappa"):
        results = validate_realtime(dq, architecture, "dq-run")
        assert len(results) == len(VIEW_NAMES)
        assert all(r.success for r in results), [r.failures for r in results]

    result = run_reconciliation(dq, "dq-run", spark=spark)
    assert result is not None
    assert result.success, result.failures
    # Lambda's batch saw every event; Kappa's windows short of late events are attributed,
    # and the landing page lists them.
    assert result.rows and result.rows > 0, "no closed window differs: nothing was attributed"
    text = httpx.get(publish_docs(dq), timeout=10).text
    assert "<strong>late data dropped by the stream path</strong>" in text


def test_lk_dq_validate_and_docs_from_the_command_line(dq: Settings) -> None:
    env = settings_env(dq)
    result = run_lk("dq", "validate", "--architecture", "kappa", env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert sum(" passed 0/" in line for line in lines) == len(VIEW_NAMES), result.stdout

    result = run_lk("dq", "docs", env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    url = result.stdout.strip().splitlines()[-1]
    page = httpx.get(url, timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Data quality: Lambda vs Kappa" in page.text


def test_a_failing_suite_stops_a_kappa_switch(dq: Settings, spark: Any) -> None:
    from core.store.streams import kappa_stream
    from kappa.reprocess import Reprocess

    reprocess = Reprocess(spark, dq)
    new = reprocess.start("1")
    live, stream = kappa_stream(1), kappa_stream(new.version)
    with connect(dq) as conn, conn.transaction():
        # The new version's rows: the live one's, with one impossible count.
        for view in VIEW_NAMES:
            table = realtime_table(view)
            conn.execute(
                f"insert into {table} select %s, {', '.join(_columns(view))} "
                f"from {table} where stream = %s",
                (stream, live),
            )
        conn.execute(
            "update rt_page_views set count = -1 where stream = %s and ctid = "
            "(select ctid from rt_page_views where stream = %s limit 1)",
            (stream, stream),
        )
    with pytest.raises(QualityGateError, match=r"realtime_views.page_views@kappa-reprocess"):
        reprocess.check(new)
    assert _alias(dq, "kappa") == 1  # the live version keeps serving


def _columns(view: str) -> list[str]:
    return [f'"{c}"' for c in VIEWS[view].columns]


def test_a_corrupted_raw_partition_stops_the_batch_with_nothing_published(
    dq: Settings, spark: Any
) -> None:
    from pyspark.sql import functions as F

    from core.ingestion import parse_events

    published = _alias(dq, "lambda")
    master = MasterDataset.from_settings(dq)
    records = spark.read.format("delta").load(master.events)
    parsed = parse_events(records).where(F.col("reason").isNull())
    # Two raw records appended as if archived, both events the shared parsing accepts: an
    # order whose device clock claims it happened 8 days before it was sent (beyond any sane
    # delivery: the gate refuses it), and a page view filed under the wrong hour.
    order = parsed.where(F.col("type") == "order").limit(1)
    fields = ("event_id", "type", "user_id", "amount_cents", "sent_ts", "received_ts")
    stale = F.to_json(F.struct(*fields, (F.col("sent_ts") - 8 * 24 * 3_600_000).alias("device_ts")))
    page_view = parsed.where(F.col("type") == "page_view").select(*records.columns).limit(1)
    corrupted = (
        order.withColumn("value", stale.cast("binary"))
        .select(*records.columns)
        .unionByName(
            page_view.withColumn("record_hour", ((F.col("record_hour") + 1) % 24).cast("int"))
        )
    )
    (
        corrupted.withColumn("offset", F.col("offset") + 1_000_000_000)  # not a duplicate record
        .withColumn("archived_at", F.current_timestamp())
        .write.format("delta")
        .mode("append")
        .partitionBy("record_date", "record_hour")
        .save(master.events)
    )

    partitions = pipeline.close_archive(spark, dq)  # the log holds nothing new; the rows are new
    with pytest.raises(QualityGateError) as info:
        pipeline.validate_raw(spark, dq, "corrupted-run", partitions)
    failures = info.value.result.failures
    assert len(failures) == 2, failures
    assert failures[0].startswith("event_ts is at most 7 days before received_ts"), failures
    assert failures[1].startswith(
        "record_date/record_hour are the UTC date and hour of the Kafka timestamp: 1 of"
    )

    # `lk batch` and `lk drain` run the same gate: nothing new is even written.
    with connect(dq) as conn:
        before = conn.execute("select count(*) from view_versions").fetchone()
    with pytest.raises(
        BatchError, match=r"^nothing published: quality gate master_partition"
    ) as batch:
        run_batch(spark, dq)
    # run_batch's gate reads the new records from the one parse it shares with the recompute:
    # the same two failures (the records found among the files the published batch lacks).
    assert "event_ts is at most 7 days before received_ts" in str(batch.value)
    assert "record_date/record_hour are the UTC date and hour" in str(batch.value)
    with connect(dq) as conn:
        after = conn.execute("select count(*) from view_versions").fetchone()
    assert after == before
    assert _alias(dq, "lambda") == published


def test_a_master_dataset_from_before_raw_archiving_stops_lk_in_one_line(
    stack: Settings, spark: Any
) -> None:
    """A master dataset the archiver wrote before it kept raw records (parsed valid events by
    event date and hour) is neither appended to nor read: `lk drain` says what to do."""
    from pyspark.sql import functions as F

    from core.ingestion import parse_events
    from tests.unit.test_quality_events import LINES
    from tests.unit.test_spark_parsing import kafka_frame, kafka_rows

    old = isolated_settings(stack, "old")
    events = MasterDataset.from_settings(old).events
    parsed = parse_events(kafka_frame(spark, kafka_rows(LINES)))
    (
        parsed.where(F.col("reason").isNull())
        .drop("reason")
        .withColumn("event_date", F.date_format("event_time", "yyyy-MM-dd"))
        .withColumn("event_hour", F.hour("event_time"))
        .withColumn("archived_at", F.current_timestamp())
        .write.format("delta")
        .partitionBy("event_date", "event_hour")
        .save(events)
    )
    version = spark.sql(f"describe history delta.`{events}`").count()

    result = run_lk("drain", "--architecture", "lambda", env=settings_env(old), timeout=600)
    assert result.returncode == 1, result.stdout[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("lk: error:")]
    assert errors == [
        f"lk: error: {events} is a master dataset of parsed events, from before the archiver "
        "kept raw log records (it has no record_date, record_hour): run "
        "`lk stack reset`, or delete the master dataset and the archiver's checkpoints and "
        "archive the log again"
    ], result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert spark.sql(f"describe history delta.`{events}`").count() == version  # left as it was
