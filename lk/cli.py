"""`lk`: the command line of CONTRACT §4.

Every command has `--help`, prints progress on long work, and on failure exits non-zero with a
one-line reason (`lk: error: ...`).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from core import workload
from core.kafka_io import produce_file
from core.settings import Settings, get_settings
from lk import (
    cluster_commands,
    demo,
    dq_command,
    drain_command,
    reprocess_command,
    run_commands,
    serve_command,
    stack_commands,
    step_commands,
)
from lk.errors import fail, guarded


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Lambda vs Kappa on Kafka, Spark, MinIO and Postgres: run, compare, reprocess."""
    ctx.obj = get_settings()


cli.add_command(stack_commands.stack)
cli.add_command(cluster_commands.cluster)


@cli.command()
@click.option(
    "--file",
    "file",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="JSONL file: one record per line, produced in file order.",
)
@click.option("--topic", default=None, help="Topic to append to (default: events).")
@click.pass_obj
@guarded
def produce(settings: Settings, file: Path, topic: str | None) -> None:
    """Append each line of a JSONL file to a topic, keyed by user_id."""

    if not file.is_file():
        fail(f"no such file: {file}")
    topic = topic or settings.events_topic
    report = produce_file(
        settings,
        file,
        topic,
        progress=lambda r: click.echo(f"  {r.records:,} records ({r.rate:,.0f}/s) ...", err=True),
    )
    click.echo(
        f"produced {report.records:,} records to {topic} in {report.seconds:.1f}s "
        f"({report.rate:,.0f}/s): {report.keyed:,} keyed, {report.raw_unparsed:,} not JSON, "
        f"{report.tombstones:,} tombstones"
    )


@cli.command()
@click.option(
    "--seed", type=int, required=True, help="Random seed: the same seed gives the same files."
)
@click.option(
    "--events",
    "events",
    type=click.IntRange(min=1),
    required=True,
    help="Number of lines in the events file (duplicates and bad records included).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="Events JSONL to write; profiles go to <stem>.profiles.jsonl beside it.",
)
@click.option(
    "--profiles-out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Where to write the profile changes instead.",
)
@click.option(
    "--hours",
    type=click.FloatRange(min=0.1),
    default=None,
    help="Event-time span of the workload (default: the generator's).",
)
@guarded
def generate(
    seed: int, events: int, out: Path, profiles_out: Path | None, hours: float | None
) -> None:
    """Write a deterministic, realistic workload (events and profile changes) as JSONL."""

    spec = workload.WorkloadSpec(
        seed=seed, events=events, watermark_delay_ms=get_settings().watermark_delay_ms
    )
    if hours is not None:
        spec = dataclasses.replace(spec, hours=hours)
    profiles_out = profiles_out or workload.default_profiles_path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stats = workload.generate(spec, out, profiles_out)
    click.echo(f"wrote {out} and {profiles_out}")
    click.echo(workload.summary(stats))


cli.add_command(serve_command.serve)
cli.add_command(reprocess_command.reprocess)
for command in (run_commands.init, run_commands.archive, run_commands.batch, run_commands.stream):
    cli.add_command(command)
cli.add_command(demo.demo)
cli.add_command(drain_command.drain)
cli.add_command(dq_command.dq)
cli.add_command(step_commands.step)


def main() -> None:
    cli(prog_name="lk")


if __name__ == "__main__":
    sys.exit(main())
