"""`lk drain --architecture lambda|kappa`: process everything now in the log, then exit.

Without `--architecture`, LK_ARCHITECTURE decides; `both` drains Lambda, then Kappa.

Lambda: archive the log into the master dataset, recompute the batch views up to a cutoff past
the last archived event, then run the speed layer until it has caught up and hand off to the
new batch version. Kappa: run the active version's stream job until it has processed the log
(version 1 is created on the first run). When the command returns, the serving layer reflects
the whole log.
"""

from __future__ import annotations

import time

import click

from core.settings import Architecture, Settings
from core.store.streams import kappa_stream
from lk.errors import fail, guarded
from lk.pipelines import PipelineError, drain_lambda
from lk.spark_output import spark_session


@click.command()
@click.option(
    "--architecture",
    type=click.Choice(["lambda", "kappa"]),
    default=None,
    help="Which architecture processes the log (default: LK_ARCHITECTURE; both: each in turn).",
)
@click.pass_obj
@guarded
def drain(settings: Settings, architecture: str | None) -> None:
    """Process everything now in the log and exit when the serving layer reflects it."""
    chosen = architecture or settings.architecture.value
    if chosen in (Architecture.LAMBDA, Architecture.BOTH):
        _drain_lambda(settings)
    if chosen in (Architecture.KAPPA, Architecture.BOTH):
        _drain_kappa(settings)


def _drain_lambda(settings: Settings) -> None:
    started = time.monotonic()
    click.echo("lambda: starting Spark ...")
    spark = spark_session(settings, "lk-drain-lambda")
    try:
        drain_lambda(spark, settings, click.echo)
    except PipelineError as exc:
        fail(str(exc))
    finally:
        spark.stop()
    click.echo(f"lambda: drained in {time.monotonic() - started:.1f}s")


def _drain_kappa(settings: Settings) -> None:
    from kappa.job import KappaError, KappaViews  # deferred: pyspark

    started = time.monotonic()
    click.echo("kappa: starting Spark ...")
    spark = spark_session(settings, "lk-drain-kappa")
    try:
        version = KappaViews(spark, settings).drain()
    except KappaError as exc:
        fail(str(exc))
    finally:
        spark.stop()
    click.echo(
        f"kappa: {kappa_stream(version.version)} drained in {time.monotonic() - started:.1f}s"
    )
