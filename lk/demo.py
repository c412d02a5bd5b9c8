"""`lk demo`: the main job.

For now (foundation): bring the stack up, generate a workload, produce it, and show what landed
in each topic. The Lambda and Kappa runs and their comparison join here as they arrive.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from core.settings import Settings
from lk.errors import guarded


@click.command()
@click.option("--seed", type=int, default=7, show_default=True, help="Workload seed.")
@click.option(
    "--events",
    "events",
    type=click.IntRange(min=100),
    default=20000,
    show_default=True,
    help="Lines in the generated events file.",
)
@click.option(
    "--out-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("out/demo"),
    show_default=True,
    help="Where the workload is written.",
)
@click.pass_obj
@guarded
def demo(settings: Settings, seed: int, events: int, out_dir: Path) -> None:
    """Run the main job on one generated workload and report what happened."""
    from core import workload
    from core.kafka_io import end_offsets, produce_file
    from infra.stack import stack as local_stack

    started = time.monotonic()
    click.echo("== 1/3 local stack")
    local_stack.up(settings, progress=lambda line: click.echo(f"  {line}"))

    click.echo(f"== 2/3 workload: seed {seed}, {events:,} event lines")
    out_dir.mkdir(parents=True, exist_ok=True)
    events_file = out_dir / f"events-{seed}-{events}.jsonl"
    profiles_file = workload.default_profiles_path(events_file)
    stats = workload.generate(
        workload.WorkloadSpec(seed=seed, events=events), events_file, profiles_file
    )
    for line in workload.summary(stats).splitlines():
        click.echo(f"  {line}")

    click.echo("== 3/3 produce to the log")
    before = {
        t: _total(end_offsets(settings, t))
        for t in (settings.events_topic, settings.profiles_topic)
    }
    for file, topic in (
        (events_file, settings.events_topic),
        (profiles_file, settings.profiles_topic),
    ):
        report = produce_file(settings, file, topic)
        click.echo(
            f"  {topic}: produced {report.records:,} records in {report.seconds:.1f}s "
            f"({report.rate:,.0f}/s)"
        )

    click.echo("== what landed in each topic")
    for topic in (settings.events_topic, settings.profiles_topic, settings.quarantine_topic):
        offsets = end_offsets(settings, topic)
        parts = "  ".join(f"p{p}={high - low:,}" for p, (low, high) in offsets.items())
        added = _total(offsets) - before.get(topic, _total(offsets))
        click.echo(f"  {topic:<18} {_total(offsets):>9,} records (+{added:,} now)   {parts}")
    click.echo(
        f"demo finished in {time.monotonic() - started:.1f}s; the stack keeps running "
        "(`lk stack down` stops it)"
    )


def _total(offsets: dict[int, tuple[int, int]]) -> int:
    return sum(high - low for low, high in offsets.values())
