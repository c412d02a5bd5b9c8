"""`lk`: the command line of CONTRACT §4.

Every command has `--help`, prints progress on long work, and on failure exits non-zero with a
one-line reason (`lk: error: ...`).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from core import workload
from core.kafka_io import ProduceReport, produce_file
from core.settings import Settings, get_settings
from lk import (
    cdc_command,
    cluster_commands,
    demo,
    dq_command,
    drain_command,
    profiles_command,
    reprocess_command,
    run_commands,
    serve_command,
    stack_commands,
    step_commands,
)
from lk.errors import fail, guarded
from lk.progress_bars import produce_bar


class OneLineErrors(click.Group):
    """Every failure of `lk` ends in one line, `lk: error: <reason>`: bad arguments too (exit
    code 2, as click gives them), not click's usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # `lk stack`: the group's help
            click.echo(exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = f" (see {exc.ctx.command_path} -h)" if exc.ctx is not None else ""
            click.echo(f"lk: error: {exc.format_message()}{where}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("lk: error: interrupted", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
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
    bar, update = produce_bar(None)

    def progress(report: ProduceReport) -> None:
        if bar.disable:  # not a terminal: a line now and then
            click.echo(f"  {report.records:,} records ({report.rate:,.0f}/s) ...", err=True)
        update(report.records, None)

    with bar:
        report = produce_file(settings, file, topic, progress=progress)
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
    type=click.FloatRange(min=0.1, max=workload.MAX_HOURS),
    default=None,
    help="Event-time span of the workload (default: the generator's).",
)
@guarded
def generate(
    seed: int, events: int, out: Path, profiles_out: Path | None, hours: float | None
) -> None:
    """Write a deterministic, realistic workload (events and profile changes) as JSONL."""
    if hours is not None and not math.isfinite(hours):  # FloatRange lets nan through
        fail(f"--hours must be a number of hours, got {hours}")
    try:
        spec = workload.WorkloadSpec(
            seed=seed, events=events, watermark_delay_ms=get_settings().watermark_delay_ms
        )
        if hours is not None:
            spec = dataclasses.replace(spec, hours=hours)
    except ValueError as exc:
        fail(str(exc))
    profiles_out = profiles_out or workload.default_profiles_path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _check_room_for(spec, out.parent)
    with click.progressbar(
        length=events, label=f"generating {events:,} events", file=sys.stderr
    ) as bar:
        stats = workload.generate(
            spec, out, profiles_out, progress=lambda written: bar.update(written - bar.pos)
        )
    click.echo(f"wrote {out} and {profiles_out}")
    click.echo(workload.summary(stats))


def _check_room_for(spec: workload.WorkloadSpec, folder: Path) -> None:
    """Refuse, before writing anything, a workload this machine cannot hold or store."""
    memory, disk = workload.footprint(spec)
    available = _available_memory()
    if available is not None and memory > available:
        fail(
            f"--events {spec.events:,} needs about {memory / 2**30:,.1f} GiB of memory to "
            f"generate; {available / 2**30:,.1f} GiB is available: generate fewer events"
        )
    free = shutil.disk_usage(folder).free
    if disk > free:
        fail(
            f"--events {spec.events:,} needs about {disk / 2**30:,.1f} GiB in {folder}; "
            f"{free / 2**30:,.1f} GiB is free: generate fewer events, or write elsewhere"
        )


def _available_memory() -> int | None:
    """MemAvailable of /proc/meminfo, in bytes (None where there is no such file)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


cli.add_command(serve_command.serve)
cli.add_command(reprocess_command.reprocess)
for command in (run_commands.init, run_commands.archive, run_commands.batch, run_commands.stream):
    cli.add_command(command)
cli.add_command(demo.demo)
cli.add_command(demo.compare)
cli.add_command(drain_command.drain)
cli.add_command(profiles_command.profiles)
cli.add_command(cdc_command.cdc)
cli.add_command(dq_command.dq)
cli.add_command(step_commands.step)


def main() -> None:
    cli(prog_name="lk")


if __name__ == "__main__":
    main()  # click exits the process itself (standalone mode)
