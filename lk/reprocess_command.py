"""`lk reprocess --architecture kappa [--logic-version V]`: Kappa reprocessing by replay.

A new version of the Kappa views replays the retained log from its earliest offsets while the
current one keeps serving; once it has caught up and passed its checks, readers switch to it in
one transaction and the old version is retired. Any failure before the switch leaves the old
version serving. Run it again after a crash: it resumes the version it was building.
"""

from __future__ import annotations

import click

from core.catalog import DEFAULT_LOGIC_VERSION, LOGIC_VERSIONS
from core.settings import Architecture, Settings
from core.store.streams import kappa_stream
from lk.errors import fail, guarded
from lk.progress_bars import ReplayBars
from lk.spark_output import spark_session

_LOGIC_HELP = "; ".join(f"{v}: {what}" for v, what in LOGIC_VERSIONS.items())


@click.command()
@click.option(
    "--architecture",
    type=click.Choice(["kappa", "lambda"]),
    default="kappa",
    show_default=True,
    help="Only Kappa reprocesses by replay; Lambda recomputes with `lk batch`.",
)
@click.option(
    "--logic-version",
    type=click.Choice(sorted(LOGIC_VERSIONS)),
    default=DEFAULT_LOGIC_VERSION,
    show_default=True,
    help=f"The view logic the new version computes ({_LOGIC_HELP}).",
)
@click.pass_obj
@guarded
def reprocess(settings: Settings, architecture: str, logic_version: str) -> None:
    """Replay the log into a new Kappa version, switch readers atomically, retire the old."""
    if architecture != Architecture.KAPPA:
        fail("Lambda reprocesses through its batch layer: run `lk batch` (or the DAG)")
    from kappa.reprocess import Reprocess, ReprocessError  # deferred: pyspark

    click.echo("kappa: starting Spark ...")
    spark = spark_session(settings, "lk-reprocess")
    bars = ReplayBars()
    drawn = None if bars.bar.disable else bars  # off a terminal nothing polls the replay
    try:
        with bars.bar:
            result = Reprocess(spark, settings, click.echo, drawn).run(logic_version)
    except ReprocessError as exc:
        fail(str(exc))
    finally:
        spark.stop()
    old = f"; retired {kappa_stream(result.retired)}" if result.retired else ""
    counts = ", ".join(f"{k} {v:,}" for k, v in result.row_counts.items())
    click.echo(
        f"kappa: readers switched to {kappa_stream(result.version)} (logic version "
        f"{result.logic_version}) {result.seconds_to_switch:.1f}s after the start{old}"
    )
    click.echo(f"  rows: {counts}")
    click.echo("  steps (s): " + ", ".join(f"{k} {v}" for k, v in result.timings.items()))
