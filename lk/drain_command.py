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


def _step(label: str, started: float) -> None:
    click.echo(f"  {label} ({time.monotonic() - started:.1f}s)")


def _drain_lambda(settings: Settings) -> None:
    from batch_layer import archiver
    from batch_layer.cutoff import drain_cutoff
    from batch_layer.job import BatchError, max_event_ts, read_master_events, run_batch
    from batch_layer.master_dataset import MasterDataset
    from core.spark import build_spark_session
    from core.timefmt import iso
    from speed_layer.lambda_speed import SpeedLayer

    started = time.monotonic()
    click.echo("lambda: starting Spark ...")
    spark = build_spark_session(settings, "lk-drain-lambda")
    try:
        archiver.drain(spark, settings)
        _step("archived the log into the master dataset", started)
        events = read_master_events(spark, MasterDataset.from_settings(settings))
        latest = max_event_ts(events)
        if latest is None:
            raise BatchError("the log holds no valid event yet: `lk produce` some first")
        result = run_batch(spark, settings, cutoff_ms=drain_cutoff(latest))
        _step(
            f"batch views v{result.version} up to {iso(result.cutoff_ms)}: "
            + ", ".join(f"{k} {v:,}" for k, v in result.row_counts.items()),
            started,
        )
        SpeedLayer(spark, settings).drain()
        _step("speed layer caught up; batch version published", started)
    except BatchError as exc:
        fail(str(exc))
    finally:
        spark.stop()
    click.echo(f"lambda: drained in {time.monotonic() - started:.1f}s")
