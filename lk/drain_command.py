"""`lk drain --architecture lambda|kappa`: process everything now in the log, then exit.

Lambda: archive the log into the master dataset, recompute the batch views up to a cutoff past
the last archived event, then run the speed layer until it has caught up and hand off to the
new batch version. When the command returns, the serving layer reflects the whole log.
"""

from __future__ import annotations

import time

import click

from core.settings import Architecture, Settings
from lk.errors import fail, guarded


@click.command()
@click.option(
    "--architecture",
    type=click.Choice(["lambda", "kappa"]),
    default=None,
    help="Which architecture processes the log (default: LK_ARCHITECTURE).",
)
@click.pass_obj
@guarded
def drain(settings: Settings, architecture: str | None) -> None:
    """Process everything now in the log and exit when the serving layer reflects it."""
    chosen = architecture or (
        "lambda" if settings.architecture == Architecture.BOTH else settings.architecture.value
    )
    if chosen == "kappa":
        fail("'lk drain --architecture kappa' arrives with Kappa mode (issue 4)")
    _drain_lambda(settings)


def _drain_lambda(settings: Settings) -> None:
    from core.spark import build_spark_session
    from lk.pipelines import PipelineError, drain_lambda

    started = time.monotonic()
    click.echo("lambda: starting Spark ...")
    spark = build_spark_session(settings, "lk-drain-lambda")
    try:
        drain_lambda(spark, settings, click.echo)
    except PipelineError as exc:
        fail(str(exc))
    finally:
        spark.stop()
    click.echo(f"lambda: drained in {time.monotonic() - started:.1f}s")
