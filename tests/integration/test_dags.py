"""The DAGs and the quality gates on the real test stack, on one deployment (Lambda and Kappa,
a workload with late events, a Data Docs bucket of its own).

Each DAG runs as `airflow dags test` does (every task in one process, as Airflow runs them;
with the `local` backend), in one process for every run of the module
(`tests.integration.dag_runner`): what each run leaves in the serving store and the gates'
results, a `lambda_batch` with nothing to compute (an empty log, nothing new since the
published version) skipping rather than failing, a corrupted raw partition stopping
`lambda_batch` at its gate with nothing published. Beside them, what the gates do when called
from the command line and in process: Data Docs served to anyone, a failing suite stopping a
Kappa switch, a master dataset from before raw archiving refused in one line.

The tests run in file order and each leaves the deployment as the next expects it: the first
runs on the empty log; the corrupting ones are last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient

from batch_layer import pipeline
from batch_layer.errors import BatchError
from batch_layer.pipeline import run_batch
from core import workload
from core.catalog import VIEW_NAMES, VIEWS
from core.events import Event, parse_event
from core.kafka_io import produce_file
from core.master_dataset import MasterDataset
from core.oracle import OracleResult, compute_views, load_jsonl_values, load_profiles_jsonl
from core.provision import s3_client
from core.settings import Architecture, Settings
from core.store import quality_results, versions
from core.store.connection import connect
from core.store.schema import realtime_table
from core.times import iso
from infra.airflow import config as airflow_config
from kappa.job import KAPPA, KappaViews
from lk.pipelines import publish_batch
from quality import QualityGateError, publish_docs
from quality.context import safe_run_name
from serving.main import create_app
from tests.conftest import ROOT, run_lk
from tests.integration.helpers import isolated_settings, settings_env
from tests.serving_pages import read_whole

LAMBDA = "lambda"
DAY_MS = 24 * 3_600_000
RUN_TIMEOUT_S = 1200
BATCH_TASKS = {"close_archive", "validate_raw", "compute_views", "validate_views", "publish"}


@dataclass(frozen=True)
class Done:
    """An `airflow dags test` run: its exit code and its output (the tasks' logs)."""

    returncode: int
    stdout: str


class DagRunner:
    """`tests.integration.dag_runner`, started once for the module, stopped at its end."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.folder = folder
        self.env = env
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.dag_runner"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.runs = 0

    def test(self, settings: Settings, *argv: str) -> Done:
        """`airflow dags test ARGV` with `settings` (their `LK_*` environment)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.runs += 1
        log = self.folder / f"run-{self.runs}.log"
        request = {"argv": ["dags", "test", *argv], "env": settings_env(settings), "log": str(log)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        timer = threading.Timer(RUN_TIMEOUT_S, self.stop)
        timer.start()
        try:
            answer = self.process.stdout.readline()
        finally:
            timer.cancel()
        output = log.read_text() if log.exists() else ""
        assert answer, f"the DAG runner ended (exit {self.process.poll()}):\n{output[-4000:]}"
        return Done(json.loads(answer)["returncode"], output)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()


@pytest.fixture(scope="module")
def runner(
    airflow_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DagRunner]:
    started = DagRunner({**os.environ, **airflow_env}, tmp_path_factory.mktemp("dag-runs"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def dq(airflow_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Both architectures, a Data Docs bucket of their own; the log empty until `workload`."""
    settings = isolated_settings(airflow_settings, "dags").model_copy(
        update={
            "architecture": Architecture.BOTH,
            "dq_bucket": f"dq-{uuid.uuid4().hex[:6]}",
            "stream_max_offsets_per_trigger": 500,
        }
    )
    # Every validation writes its result there (quality.result_store): `lk init` makes the
    # deployment's, the test makes its own.
    s3_client(settings).create_bucket(Bucket=settings.dq_bucket)
    return settings


@pytest.fixture(scope="module")
def produced(dq: Settings, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A workload with late events in the log (the first test ran on the empty log)."""
    folder = tmp_path_factory.mktemp("dags")
    events, profiles = folder / "events.jsonl", folder / "events.profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=73, events=3000), events, profiles)
    produce_file(dq, profiles, dq.profiles_topic)
    produce_file(dq, events, dq.events_topic)
    oracle = compute_views(load_jsonl_values(events), load_profiles_jsonl(profiles))
    return {"oracle": oracle, "events": events}


def dags_test(
    runner: DagRunner, settings: Settings, dag_id: str, *options: str
) -> tuple[Done, dict[str, str], str]:
    """`airflow dags test DAG_ID OPTIONS`, the state of each task of the run, and its run id."""
    done = runner.test(settings, dag_id, *options)
    url = airflow_config.database_url(settings).replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        run = conn.execute(
            "select run_id from dag_run where dag_id = %s order by id desc limit 1", (dag_id,)
        ).fetchone()
        assert run is not None, done.stdout[-6000:]
        rows = conn.execute(
            "select task_id, state from task_instance where dag_id = %s and run_id = %s",
            (dag_id, run[0]),
        ).fetchall()
    return done, {task: str(state) for task, state in rows}, run[0]


def _xcom(settings: Settings, dag_id: str, run_id: str, task: str) -> Any:
    url = airflow_config.database_url(settings).replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select value from xcom where dag_id = %s and run_id = %s and task_id = %s "
            "and key = 'return_value'",
            (dag_id, run_id, task),
        ).fetchone()
    assert row is not None, (dag_id, run_id, task)
    value = row[0]
    return json.loads(value) if isinstance(value, str | bytes) else value


def _results(settings: Settings, run_id: str) -> dict[tuple[str, str], tuple[bool, int | None]]:
    """(layer, suite) -> (success, rows) of the validations of one DAG run."""
    with connect(settings) as conn:
        rows = conn.execute(
            "select layer, suite, success, rows from dq_results where run_name = %s",
            (safe_run_name(run_id),),
        ).fetchall()
    return {(layer, suite): (success, count) for layer, suite, success, count in rows}


def _alias(settings: Settings, architecture: str) -> versions.Version | None:
    with connect(settings) as conn:
        return versions.current(conn, architecture)


def _newest(settings: Settings) -> int | None:
    with connect(settings) as conn:
        row = conn.execute(
            "select max(version) from view_versions where architecture = %s", (LAMBDA,)
        ).fetchone()
    return None if row is None else row[0]


def _served(settings: Settings, view: str, architecture: str = LAMBDA) -> dict[str, Any]:
    with TestClient(create_app(settings)) as client:
        return read_whole(client.get, view, architecture=architecture)


def _before(rows: list[dict[str, Any]], cutoff: str) -> list[dict[str, Any]]:
    return [row for row in rows if row["window_start"] < cutoff]


def _ok(done: Done, states: dict[str, str]) -> None:
    assert done.returncode == 0 and set(states.values()) == {"success"}, (
        f"{states}\n{done.stdout[-6000:]}"
    )


def _skipped_from_compute_views(done: Done, states: dict[str, str]) -> None:
    why = f"{states}\n{done.stdout[-4000:]}"
    assert done.returncode == 0, why
    assert states == {
        "close_archive": "success",
        "validate_raw": "success",
        "compute_views": "skipped",
        "validate_views": "skipped",
        "publish": "skipped",
    }, why


def test_on_an_empty_log_lambda_batch_and_reprocess_skip_rather_than_fail(
    runner: DagRunner, dq: Settings
) -> None:
    """A fresh install: the hourly run starts before anything was produced. The master dataset
    is empty, so there is nothing to compute: the run succeeds with the rest skipped."""
    done, states, _ = dags_test(runner, dq, "lambda_batch")
    _skipped_from_compute_views(done, states)
    # The archive ran, so the master dataset exists, with no record: no valid event to cut at.
    assert "nothing new to compute: the master dataset holds no valid event" in done.stdout, (
        done.stdout[-4000:]
    )
    # A reprocess of it: no partition to validate again, nothing to compute.
    done, states, _ = dags_test(runner, dq, "lambda_reprocess", "-c", '{"logic_version": "2"}')
    assert done.returncode == 0, done.stdout[-4000:]
    assert states == {
        "validate_raw": "success",
        "compute_views": "skipped",
        "validate_views": "skipped",
        "publish": "skipped",
    }
    assert _alias(dq, LAMBDA) is None and _newest(dq) is None


def test_lambda_batch_publishes_only_a_version_that_passed_both_gates(
    runner: DagRunner, dq: Settings, produced: dict[str, Any], spark: Any
) -> None:
    """The run up to its gates (its `publish` marked done without running), then the
    publication in process: the version is written and checked but invisible until then."""
    done, states, run_id = dags_test(
        runner, dq, "lambda_batch", "--mark-success-pattern", "publish"
    )
    _ok(done, states)
    assert set(states) == BATCH_TASKS
    partitions = _xcom(dq, "lambda_batch", run_id, "close_archive")
    assert len(partitions) >= 2 and all(0 <= hour < 24 for _, hour in partitions)
    results = _results(dq, run_id)
    raw_ok, raw_rows = results[("lambda-batch", "master_partition")]
    assert raw_ok and raw_rows is not None and raw_rows > 2000, results
    views = sorted(suite for layer, suite in results if suite.startswith("batch_views."))
    assert views == sorted(f"batch_views.{v}" for v in VIEW_NAMES)
    assert all(ok for ok, _ in results.values()), results

    version = _newest(dq)
    assert version is not None and _alias(dq, LAMBDA) is None  # written, not visible
    with connect(dq) as conn:
        written = versions.get(conn, LAMBDA, version)
    assert written is not None and written.status in ("building", "ready")
    assert publish_batch(dq, version) == version
    assert publish_batch(dq, version) == version  # a retry changes nothing
    alias = _alias(dq, LAMBDA)
    assert alias is not None and alias.version == version and alias.status == "published"
    assert pipeline.new_partitions(spark, dq) == []  # the published batch has seen everything

    assert alias.cutoff is not None
    cutoff = iso(int(alias.cutoff.timestamp() * 1000))
    oracle: OracleResult = produced["oracle"]
    for view in ("page_views", "search_ctr", "revenue_by_segment"):
        expected = _before(oracle.views[view], cutoff)
        assert expected, view  # the workload spans hours on both sides of the cutoff
        assert _before(_served(dq, view)["rows"], cutoff) == expected, view


def test_lambda_batch_with_nothing_new_skips_and_keeps_the_published_version(
    runner: DagRunner, dq: Settings
) -> None:
    """Nothing archived since the published version's snapshot, the same cutoff and logic: the
    run skips the recompute (no identical version), and the run is a success, not a failure."""
    before = _alias(dq, LAMBDA)
    assert before is not None
    done, states, _ = dags_test(runner, dq, "lambda_batch")
    _skipped_from_compute_views(done, states)
    assert f"nothing archived since batch version {before.version}" in done.stdout
    assert _alias(dq, LAMBDA) == before
    assert _newest(dq) == before.version  # no version written at all


def test_data_docs_are_published_and_readable_by_anyone(dq: Settings) -> None:
    url = publish_docs(dq)
    assert url == f"{dq.s3_endpoint}/{dq.dq_bucket}/docs/index.html"
    page = httpx.get(url, timeout=10)  # no credentials
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<h2>Layer lambda-batch</h2>" in page.text
    assert "master_partition" in page.text and "batch_views.sessions" in page.text
    gx_index = httpx.get(url.replace("index.html", "runs.html"), timeout=10)
    assert gx_index.status_code == 200
    # Only the docs are public: the bucket's listing and other buckets stay private.
    assert httpx.get(f"{dq.s3_endpoint}/{dq.dq_bucket}/", timeout=10).status_code == 403
    master = f"{dq.s3_endpoint}/{dq.master_bucket}/events/_delta_log/00000000000000000000.json"
    assert httpx.get(master, timeout=10).status_code == 403

    with TestClient(create_app(dq)) as client:
        body = client.get("/v1/quality").json()
    assert body["data_docs"] == url
    found = {(s["layer"], s["suite"]): s for s in body["suites"]}
    assert found[("lambda-batch", "master_partition")]["success"] is True
    batch_run = found[("lambda-batch", "batch_views.search_ctr")]["run_name"]
    assert batch_run and batch_run in gx_index.text


def test_lambda_reprocess_publishes_the_chosen_logic_up_to_until(
    runner: DagRunner, dq: Settings
) -> None:
    published = _alias(dq, LAMBDA)
    assert published is not None and published.cutoff is not None
    # The workload lies within one day, whose end is past what the archive closes: the new
    # version's cutoff is capped at the scheduled one.
    day = published.cutoff.date().isoformat()
    conf = json.dumps({"logic_version": "2", "since": day, "until": day})
    done, states, _ = dags_test(runner, dq, "lambda_reprocess", "-c", conf)
    _ok(done, states)
    alias = _alias(dq, LAMBDA)
    assert alias is not None and alias.version > published.version
    assert (alias.logic_version, alias.cutoff) == ("2", published.cutoff)
    assert _served(dq, "page_views")["meta"]["view_version"] == alias.version


def test_kappa_reprocess_replays_checks_and_switches(
    runner: DagRunner, dq: Settings, spark: Any
) -> None:
    assert KappaViews(spark, dq).drain().version == 1  # the live version, with rows
    with connect(dq) as conn:
        late = conn.execute(
            "select late_dropped from stream_progress where stream = 'kappa-v1'"
        ).fetchone()
    assert late is not None and late[0] > 0, "the workload must make Kappa drop late events"
    done, states, _ = dags_test(runner, dq, "kappa_reprocess", "-c", '{"logic_version": "2"}')
    _ok(done, states)
    alias = _alias(dq, KAPPA)
    assert alias is not None and (alias.version, alias.logic_version) == (2, "2")
    with connect(dq) as conn:
        old = versions.get(conn, KAPPA, 1)
        leftover = conn.execute(
            "select count(*) from stream_progress where stream = 'kappa-v1'"
        ).fetchone()
    assert old is not None and old.status == "retired"
    assert leftover == (0,)  # retired: its rows and progress are gone


def test_data_quality_checks_what_each_architecture_serves_and_explains_kappas_late_data(
    runner: DagRunner, dq: Settings
) -> None:
    """Both architectures on logic version 2: Lambda's batch saw every event, Kappa's windows
    short of late events are attributed to them, and the landing page lists them."""
    done, states, run_id = dags_test(runner, dq, "data_quality")
    _ok(done, states)
    assert set(states) == {
        "realtime_lambda",
        "realtime_kappa",
        "reconciliation",
        "data_docs",
        "verdict",
    }
    results = _results(dq, run_id)
    for layer in ("lambda-serving", "kappa-serving"):
        suites = {s: ok for (at, s), (ok, _) in results.items() if at == layer}
        assert sorted(suites) == sorted(f"realtime_views.{v}" for v in VIEW_NAMES), results
        assert all(suites.values()), results
    reconciled, attributed = results[("comparison", "reconciliation")]
    assert reconciled, results
    assert attributed and attributed > 0, "no closed window differs: nothing was attributed"

    with connect(dq) as conn:
        docs = quality_results.docs(conn)
    assert docs is not None
    page = httpx.get(docs[0], timeout=30)
    assert page.status_code == 200
    assert "<strong>late data dropped by the stream path</strong>" in page.text


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

    live_version = _alias(dq, KAPPA)
    assert live_version is not None
    reprocess = Reprocess(spark, dq)
    new = reprocess.start("2")
    live, stream = kappa_stream(live_version.version), kappa_stream(new.version)
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
    assert _alias(dq, KAPPA) == live_version  # the live version keeps serving


def _columns(view: str) -> list[str]:
    return [f'"{c}"' for c in VIEWS[view].columns]


def test_a_corrupted_raw_partition_stops_lambda_batch_at_the_gate_with_nothing_published(
    runner: DagRunner, dq: Settings, produced: dict[str, Any], spark: Any, tmp_path: Path
) -> None:
    """Three raw records the shared parsing accepts, which the raw gate refuses: an event
    produced to the log, sent 30 days after it happened (archived by the run's first step);
    appended to the master dataset as if archived, an order whose device clock claims it
    happened 8 days before it was sent and a page view filed under the wrong hour. The DAG
    stops at `validate_raw`, and `lk batch`'s gate (in process) says why."""
    from pyspark.sql import functions as F

    from core.ingestion import parse_events

    before = _alias(dq, LAMBDA)
    newest = _newest(dq)
    received = max(
        event.received_ts
        for line in produced["events"].read_bytes().splitlines()
        if isinstance(event := parse_event(line), Event)
    )
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(
        json.dumps(
            {
                "event_id": "corrupt-1",
                "type": "page_view",
                "user_id": "u-corrupt",
                "page": "/corrupt",
                "device_ts": received - 30 * DAY_MS,
                "sent_ts": received,
                "received_ts": received,
            }
        )
        + "\n"
    )
    produce_file(dq, corrupt, dq.events_topic)

    master = MasterDataset.from_settings(dq)
    records = spark.read.format("delta").load(master.events)
    parsed = parse_events(records).where(F.col("reason").isNull())
    order = parsed.where(F.col("type") == "order").limit(1)
    fields = ("event_id", "type", "user_id", "amount_cents", "sent_ts", "received_ts")
    stale = F.to_json(F.struct(*fields, (F.col("sent_ts") - 8 * DAY_MS).alias("device_ts")))
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

    done, states, _ = dags_test(runner, dq, "lambda_batch")
    assert done.returncode != 0
    assert states["close_archive"] == "success"
    assert states["validate_raw"] == "failed", states
    for task in ("compute_views", "validate_views", "publish"):
        assert states[task] == "upstream_failed", states
    assert "7 days" in done.stdout  # the reason is in the task's log
    assert _newest(dq) == newest  # no version computed, let alone published
    assert _alias(dq, LAMBDA) == before

    partitions = pipeline.close_archive(spark, dq)  # archived by the run: nothing new
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
        counted = conn.execute("select count(*) from view_versions").fetchone()
    with pytest.raises(
        BatchError, match=r"^nothing published: quality gate master_partition"
    ) as batch:
        run_batch(spark, dq)
    # run_batch's gate reads the new records from the one parse it shares with the recompute:
    # the same two failures (the records found among the files the published batch lacks).
    assert "event_ts is at most 7 days before received_ts" in str(batch.value)
    assert "record_date/record_hour are the UTC date and hour" in str(batch.value)
    with connect(dq) as conn:
        assert conn.execute("select count(*) from view_versions").fetchone() == counted
    assert _alias(dq, LAMBDA) == before


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
