"""The long-running parts as commands, for a terminal, the chart's pods and the DAGs.

lk init                                 # topics (retention per mode), buckets, store tables
lk archive [--available-now]            # Lambda: the log into the master dataset
lk batch [--cutoff ISO]                 # Lambda: one batch recomputation, marked ready
lk stream --architecture lambda|kappa   # the speed layer, or the Kappa job
"""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING

import click

from batch_layer.errors import BatchError
from core import metrics_server
from core.catalog import LOGIC_VERSIONS
from core.cdc.provision import ensure_app_side
from core.provision import missing, provision_all
from core.settings import Architecture, Settings
from core.spark import install_heartbeat
from core.store.connection import check_readable
from core.times import iso, parse_iso
from lk.errors import fail, guarded
from lk.spark_output import spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def serve_metrics(settings: Settings) -> None:
    """The driver's /metrics on `LK_METRICS_PORT`, when set; a busy port fails in one line."""
    try:
        where = metrics_server.start(settings)
    except OSError as exc:
        fail(f"cannot serve metrics on port {settings.metrics_port}: {exc.strerror or exc}")
    if where is not None:
        click.echo(f"metrics on http://{where}/metrics")


def stream_architecture(settings: Settings, given: str | None) -> str:
    """An explicit choice, else the deployment's. `both` runs two stream jobs, one process
    each (as the chart does), so it needs the choice."""
    if given is not None:
        return given
    if settings.architecture == Architecture.BOTH:
        fail("LK_ARCHITECTURE is both: run one job per architecture, --architecture lambda|kappa")
    return settings.architecture.value


@click.command()
@click.option(
    "--check",
    is_flag=True,
    help="Create nothing; exit 0 when everything exists (what pods wait on), else 1.",
)
@click.option(
    "--serving",
    is_flag=True,
    help="With --check: only whether the serving layer's read-only login can read the store "
    "(what the serving pod waits on; it has no other credentials).",
)
@click.pass_obj
@guarded
def init(settings: Settings, check: bool, serving: bool) -> None:
    """Create the topics, buckets and serving-store tables, and the serving layer's read-only
    login (idempotent)."""
    if serving and not check:
        fail("--serving goes with --check")
    if serving:
        try:
            check_readable(settings)
        except Exception as exc:  # not up, no tables, no grants yet: "not ready", in one line
            fail(f"not ready: {' '.join(str(exc).split())[:200]}")
        click.echo("ready")
        return
    if check:
        try:
            absent = missing(settings)
        except Exception as exc:  # a service not up yet is "not ready", in one line
            fail(f"not ready: {' '.join(str(exc).split())[:200]}")
        if absent:
            fail(f"not ready: missing {', '.join(absent)}")
        click.echo("ready")
        return
    for line in provision_all(settings):
        click.echo(line)
    if settings.cdc_enabled:
        ensure_app_side(settings)
        click.echo(f"application database {settings.app_db} ready for change data capture")
    click.echo(f"ready for architecture {settings.architecture.value}")


@click.command()
@click.option("--available-now", is_flag=True, help="Archive what the log holds now, then exit.")
@click.pass_obj
@guarded
def archive(settings: Settings, available_now: bool) -> None:
    """Lambda: append the log to the master dataset, exactly once, continuously."""
    from batch_layer import archiver  # deferred: pyspark

    serve_metrics(settings)
    spark = spark_session(settings, "lk-archiver", long_running=not available_now)
    install_heartbeat(spark, settings.stream_heartbeat_dir)
    try:
        if available_now:
            archiver.drain(spark, settings, click.echo)
        else:
            archiver.follow(spark, settings, click.echo)
    except archiver.ArchiveError as exc:
        fail(" ".join(str(exc).split()))
    finally:
        spark.stop()


@click.command()
@click.option(
    "--cutoff",
    default=None,
    help="ISO instant (an hour boundary) to recompute up to; default: what the archive closes.",
)
@click.option(
    "--logic-version",
    type=click.Choice(sorted(LOGIC_VERSIONS)),
    default=None,
    help="The view logic the new batch version computes (default: the published one's). The "
    "speed layer follows it from the hand-off on.",
)
@click.option(
    "--drain",
    is_flag=True,
    help="Close everything archived: the cutoff is the hour after the last archived event "
    "(as `lk drain` does), not what the watermark closes.",
)
@click.pass_obj
@guarded
def batch(settings: Settings, cutoff: str | None, logic_version: str | None, drain: bool) -> None:
    """Lambda: recompute the batch views from the master dataset; the speed layer publishes."""
    from batch_layer.pipeline import run_batch  # deferred: pyspark

    cutoff_ms = None
    if cutoff is not None and drain:
        fail("give --cutoff or --drain, not both")
    if cutoff is not None:
        try:
            cutoff_ms = parse_iso(cutoff)
        except ValueError as exc:
            fail(f"--cutoff: {exc}")
    spark = spark_session(settings, "lk-batch")
    try:
        result = run_batch(
            spark, settings, cutoff_ms=cutoff_ms, logic_version=logic_version, drain=drain
        )
    except BatchError as exc:
        fail(str(exc))
    finally:
        spark.stop()
    counts = ", ".join(f"{k} {v:,}" for k, v in result.row_counts.items())
    click.echo(f"batch views v{result.version} ready up to {iso(result.cutoff_ms)}: {counts}")


@click.command()
@click.option(
    "--architecture",
    type=click.Choice(["lambda", "kappa"]),
    default=None,
    help="lambda: the speed layer; kappa: the Kappa job (default: LK_ARCHITECTURE).",
)
@click.option("--available-now", is_flag=True, help="Process what the log holds now, then exit.")
@click.option("--trigger-seconds", type=float, default=2.0, show_default=True)
@click.pass_obj
@guarded
def stream(
    settings: Settings, architecture: str | None, available_now: bool, trigger_seconds: float
) -> None:
    """Run the stream job: Lambda's speed layer, or the active Kappa version's job.

    SIGTERM or Ctrl-C stops after the micro-batch in flight; the checkpoint and the store's
    progress make the next start resume where this one committed."""
    chosen = stream_architecture(settings, architecture)
    serve_metrics(settings)
    spark = spark_session(settings, f"lk-stream-{chosen}", long_running=not available_now)
    install_heartbeat(spark, settings.stream_heartbeat_dir)
    try:
        if chosen == Architecture.KAPPA:
            _run_kappa(spark, settings, available_now, trigger_seconds)
        else:
            _run_speed_layer(spark, settings, available_now, trigger_seconds)
    except RuntimeError as exc:
        fail(str(exc))
    finally:
        spark.stop()


def _stop_on_signals() -> threading.Event:
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    return stopping


def _run_speed_layer(
    spark: SparkSession, settings: Settings, available_now: bool, trigger_seconds: float
) -> None:
    from speed_layer import service  # deferred: pyspark
    from speed_layer.lambda_speed import SpeedLayer  # deferred: pyspark

    if available_now:
        SpeedLayer(spark, settings).drain()
        return
    service.run(
        spark, settings, _stop_on_signals(), trigger_seconds=trigger_seconds, echo=click.echo
    )


def _run_kappa(
    spark: SparkSession, settings: Settings, available_now: bool, trigger_seconds: float
) -> None:
    from kappa.job import KappaViews  # deferred: pyspark

    views = KappaViews(spark, settings)
    if available_now:
        views.drain()
        return
    views.follow(_stop_on_signals(), trigger_seconds, poll_s=5.0, echo=click.echo)
