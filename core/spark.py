"""The one place that builds a Spark session from the settings.

Nothing starts Spark at import time; callers ask for a session when they need one. The same
builder serves the batch layer, the speed layer, the Kappa job and the tests, locally
(`local[*]`) or against a Kubernetes master, by configuration alone.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import class_archive
from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery


_S3A = "org.apache.hadoop.fs.s3a"
_STATE = "org.apache.spark.sql.execution.streaming.state"
_CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
_DIRECT_CHECKPOINTS = "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"
_OBJECT_STORES = ("s3a://",)
_JVM_OPTIONS = (
    # Whole-stage code generation compiles the event parsing (`core.ingestion`) into methods
    # over HotSpot's 8,000-byte limit, which the JIT then leaves interpreted. Measured here on
    # 1M events: the parse went from 82k to 152k records/s, and a stream's micro-batches (Kafka,
    # parse, deduplication, to Arrow) from 32.8 to 23.0 s of Spark.
    "-XX:-DontCompileHugeMethods",
)


class SparkJarsMissingError(RuntimeError):
    pass


_JOB_DESCRIPTION = "spark.job.description"


@contextlib.contextmanager
def described(spark: SparkSession, text: str) -> Iterator[None]:
    """The Spark jobs this thread starts in the block carry `text` as their description: what
    the Spark UI and the History Server name them by, and what the bench's table of where a
    run's time goes groups them by (`tests/benchmarks/stages.py`). A property of the calling
    thread (PySpark pins each Python thread to a JVM thread), so concurrent writes, each from a
    thread of its own, each name their own; the description before the block comes back."""
    context = spark.sparkContext
    before = context.getLocalProperty(_JOB_DESCRIPTION)
    context.setJobDescription(text)
    try:
        yield
    finally:
        context.setLocalProperty(_JOB_DESCRIPTION, before)  # type: ignore[arg-type]  # None: unset


def all_at_once(spark: SparkSession, step: str, writes: Mapping[str, Callable[[], None]]) -> None:
    """Run each write (by what it writes: its Spark jobs described "`step`: write <name>") from
    a thread of its own: a small write's job is mostly fixed cost on the driver (planning,
    scheduling, a JDBC connection), and the others' tasks fill the cores meanwhile. The first
    failure is raised once every write has ended, so nothing still writes when it is."""

    def write(name: str, run: Callable[[], None]) -> None:
        with described(spark, f"{step}: write {name}"):
            run()

    with ThreadPoolExecutor(max_workers=max(len(writes), 1)) as pool:
        done = [pool.submit(write, name, run) for name, run in writes.items()]
    for future in done:
        future.result()


def connector_jars(settings: Settings) -> list[str]:
    jars = sorted(str(p) for p in settings.spark_jars_path.glob("*.jar"))
    if not jars:
        raise SparkJarsMissingError(
            f"no Spark connector jars in {settings.spark_jars_path}: run `lk stack up` "
            "(or `make setup`) to fetch them from Maven Central"
        )
    return jars


def ui_conf(settings: Settings) -> dict[str, str]:
    """The driver's Spark UI (`Settings.spark_ui_enabled`) and, with it, the driver's metrics in
    Prometheus's format at /metrics/prometheus (Spark's PrometheusServlet, a sink that only
    formats the metrics registry when scraped) and the executors' at
    /metrics/executors/prometheus."""
    if not settings.spark_ui_enabled:
        return {"spark.ui.enabled": "false"}
    return {
        "spark.ui.enabled": "true",
        "spark.ui.port": str(settings.spark_ui_port),
        "spark.ui.prometheus.enabled": "true",
        "spark.metrics.conf.*.sink.prometheusServlet.class": (
            "org.apache.spark.metrics.sink.PrometheusServlet"
        ),
        "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
        # Names that stay across restarts (`metrics_lk_driver_...`), not the application id's.
        "spark.metrics.namespace": "lk",
        # Each streaming query's rates, latency and event-time watermark as driver metrics.
        "spark.sql.streaming.metricsEnabled": "true",
    }


def event_log_conf(settings: Settings, *, long_running: bool) -> dict[str, str]:
    """Spark's event log, for the History Server, in `Settings.spark_event_log_dir`.

    The rule, in this one place: every driver that ends (a batch step, `lk batch`, a drain, a
    data-quality run) writes one when the directory is set; a long-running stream driver (the
    archiver, the speed layer, the Kappa job) never does. A stream logs every micro-batch's
    jobs, stages, tasks and query plans, forever, and on s3a an event log file is uploaded
    only when it is closed, so the History Server would not show a running stream before its
    file rolls: its live view is its Spark UI (`Settings.spark_ui_enabled`). Measured on the
    Kappa job at a trickle (5 events/s, a 2 s trigger): 159 kB of events per micro-batch,
    25 kB compressed, i.e. about 45 MB an hour per stream (1.1 GB a day), and about 6% of a
    core more for its JVM (docs/ARCHITECTURE.md, "Spark's own views").
    """
    if settings.spark_event_log_dir is None or long_running:
        return {}
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": settings.spark_event_log_dir,
        "spark.eventLog.compress": "true",
        "spark.eventLog.compression.codec": "zstd",
    }


def spark_conf(settings: Settings, *, long_running: bool = False) -> dict[str, str]:
    """Spark configuration for the Kafka source, s3a on MinIO, and Delta, and the JVMs' options
    (the driver's with `Settings.spark_driver_java_options` after them); the UI and the event
    log as the settings ask. `long_running`: a stream driver (see `event_log_conf`)."""
    classpath = ":".join(connector_jars(settings))
    driver_options = " ".join(
        (*_JVM_OPTIONS, *class_archive.java_options(settings), settings.spark_driver_java_options)
    ).strip()
    conf = {
        "spark.driver.extraJavaOptions": driver_options,
        "spark.executor.extraJavaOptions": " ".join(_JVM_OPTIONS),
        # On the JVM's own classpath rather than `spark.jars`: classes load once from the
        # application class loader instead of a per-task one (much faster with the AWS bundle).
        "spark.driver.extraClassPath": classpath,
        "spark.executor.extraClassPath": classpath,
        "spark.sql.shuffle.partitions": str(settings.spark_shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": settings.spark_driver_memory,
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Delta rebuilds a table's state (its files, its transaction ids) in this many tasks
        # before every commit; its default, 50, made each archiver commit cost 3.3 s here, and
        # 1.2 s with as many tasks as the shuffles have.
        "spark.databricks.delta.snapshotPartitions": str(settings.spark_shuffle_partitions),
        "spark.hadoop.fs.s3a.endpoint": settings.s3_endpoint,
        "spark.hadoop.fs.s3a.access.key": settings.minio_access_key,
        "spark.hadoop.fs.s3a.secret.key": settings.minio_secret_key,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.impl": _S3A + ".S3AFileSystem",
        "spark.hadoop.fs.s3a.aws.credentials.provider": _S3A + ".SimpleAWSCredentialsProvider",
        # Every object Spark and Delta write here has a new name (a UUID, a batch id that the
        # checkpoint checks first), so creating one need not first look for a file or a folder
        # at that path: measured on the archive of 5.1M events, whose `profiles` backfill writes
        # one file per hour (724), that micro-batch took 13.8 s instead of 22.5.
        "spark.hadoop.fs.s3a.create.performance": "true",
        # Local checkpoints and small files: no need for the S3A magic committer here.
        "spark.hadoop.fs.s3a.committer.name": "directory",
        # Streaming state (watermarked aggregations, per-user histories) off the JVM heap.
        "spark.sql.streaming.stateStore.providerClass": _STATE + ".RocksDBStateStoreProvider",
        # A micro-batch uploads the changes to its state (one small file per partition) and
        # snapshots go up in the background, instead of every batch zipping and uploading
        # its RocksDB files to the checkpoint on MinIO: measured at 200 events a batch, the
        # JVM's CPU per micro-batch went from 1.21 s to 1.05 s.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Counting the store's rows costs a read before every write; nothing here uses the
        # count (a query's `numRowsTotal`). Measured on the streams' deduplication of 1M events
        # in micro-batches of 200k: 17% less time.
        "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
        # A JSON object with a repeated key keeps its last value, as Python's json does.
        "spark.sql.variant.allowDuplicateKeys": "true",
        **ui_conf(settings),
        **event_log_conf(settings, long_running=long_running),
    }
    return conf


def build_spark_session(
    settings: Settings,
    app_name: str,
    jvm_log: Path | None = None,
    *,
    long_running: bool = False,
) -> SparkSession:
    """A session with the settings' configuration. `jvm_log`: a file that takes the driver
    JVM's own output (SLF4J's lines, Spark's WARN lines), which otherwise goes where this
    process's goes (a pod's log, a test's capture). `long_running`: a stream driver that runs
    until stopped (no event log, `event_log_conf`)."""
    from pyspark.sql import SparkSession

    if settings.spark_master.startswith("local"):
        # Keep a local driver on loopback: nothing here should listen on another interface.
        os.environ.setdefault("SPARK_LOCAL_IP", settings.host)
    options = {
        "spark.app.name": app_name,
        "spark.master": settings.spark_master,
        **spark_conf(settings, long_running=long_running),
    }
    event_log_dir = options.get("spark.eventLog.dir", "")
    if event_log_dir.startswith("file:"):  # Spark refuses a folder that is not there
        Path(event_log_dir.removeprefix("file:")).mkdir(parents=True, exist_ok=True)
    _start_driver_jvm(options, jvm_log, settings.spark_jvm_niceness)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()  # the context `_start_driver_jvm` started, if it did
    session.sparkContext.setLogLevel("WARN")
    return session


def _start_driver_jvm(options: dict[str, str], jvm_log: Path | None, niceness: int) -> None:
    """Start the driver's SparkContext, its JVM in a session of its own at `niceness` (see
    `Settings.spark_jvm_niceness`), with the JVM's stdout and stderr in `jvm_log` if given,
    through pyspark's `popen_kwargs` (the builder has neither option). A context already
    running is kept as it is. The JVM still ends with this process: it exits when its stdin,
    a pipe from here, closes."""
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._active_spark_context is not None:  # pyspark's own check
        return
    conf = SparkConf()
    for key, value in options.items():
        conf.set(key, value)
    with contextlib.ExitStack() as stack:
        popen_kwargs: dict[str, Any] = {"start_new_session": True}
        if jvm_log is not None:
            jvm_log.parent.mkdir(parents=True, exist_ok=True)
            out = stack.enter_context(jvm_log.open("ab"))  # the JVM keeps its own descriptor
            popen_kwargs |= {"stdout": out, "stderr": subprocess.STDOUT}
        gateway = launch_gateway(conf, popen_kwargs=popen_kwargs)
    _lower_session_weight(gateway.proc.pid, niceness)
    SparkContext(conf=conf, gateway=gateway)


def _lower_session_weight(pid: int, niceness: int) -> None:
    """Set the autogroup niceness of `pid`'s session. Without autogroup scheduling (turned
    off, or a container's cgroup, where CPU requests decide) there is nothing to do."""
    if niceness > 0:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/autogroup").write_text(str(niceness))


def start_checkpointed(
    spark: SparkSession,
    writer: DataStreamWriter,
    checkpoint: str,
    conf: Mapping[str, str] | None = None,
) -> StreamingQuery:
    """Start ``writer`` with its checkpoint (offsets, commits, state changelogs) at ``checkpoint``
    and the query's own `conf`: a query runs on a copy of the session taken when it starts, so
    these are set for the start only and the session's own values put back right after.

    On an object store each checkpoint file is written straight to its object: a PUT is atomic,
    and an aborted stream leaves nothing. Spark's default writes a temporary object and renames
    it, which is a copy and a delete on S3, for every file of every micro-batch; measured at 200
    events a micro-batch, the speed layer's JVM went from 1.07 s to 0.85 s of CPU per
    micro-batch. That file manager refuses a local path, so it is the query's setting only.
    """
    scoped = dict(conf or {})
    if checkpoint.startswith(_OBJECT_STORES):
        scoped[_CHECKPOINT_MANAGER] = _DIRECT_CHECKPOINTS
    before = {key: spark.conf.get(key, None) for key in scoped}
    for key, value in scoped.items():
        spark.conf.set(key, value)
    try:
        return writer.option("checkpointLocation", checkpoint).start()
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def wait_stopped(query: StreamingQuery, timeout_s: float | None = None) -> bool:
    """Wait for `query` to stop (at most `timeout_s`); whether it has. A failed query stops
    too: its failure is for the caller to read (`query.exception()`), not raised here, so that
    the caller can give the reason its own micro-batch function recorded."""
    from pyspark.errors import StreamingQueryException

    try:
        if timeout_s is None:
            query.awaitTermination()
            return True
        # The stub says int, but Spark takes float seconds (it waits int(timeout * 1000) ms).
        return bool(query.awaitTermination(timeout_s))  # type: ignore[arg-type]
    except StreamingQueryException:
        return True


def install_heartbeat(spark: SparkSession, folder: Path | None) -> Any:
    """With a `folder` (`LK_STREAM_HEARTBEAT_DIR`), keep one file per running streaming query
    there, touched when it starts, after each micro-batch and while it idles, removed when it
    stops: a liveness probe tells a hung driver by a stale file, with no Spark UI to ask. Files
    left by an earlier run of the container are cleared first. Returns the listener."""
    if folder is None:
        return None
    from pyspark.sql.streaming import StreamingQueryListener

    heartbeats: Path = folder  # narrowed for the listener's methods (mypy does not carry it in)
    heartbeats.mkdir(parents=True, exist_ok=True)
    for stale in heartbeats.iterdir():
        stale.unlink(missing_ok=True)

    class Heartbeat(StreamingQueryListener):
        def _touch(self, query_id: object) -> None:
            (heartbeats / str(query_id)).touch()

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            self._touch(event.id)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            self._touch(event.progress.id)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            self._touch(event.id)

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            (heartbeats / str(event.id)).unlink(missing_ok=True)

    listener = Heartbeat()
    spark.streams.addListener(listener)
    return listener
