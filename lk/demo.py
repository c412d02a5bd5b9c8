"""`lk demo`: the main job.

Bring the stack up, generate a workload and produce it, run the Lambda architecture over the
whole log, and compare what the serving layer answers with the oracle computed from the same
log. Kappa and the side-by-side comparison join here with the Kappa issue.
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
    click.echo("== 1/5 local stack")
    local_stack.up(settings, progress=lambda line: click.echo(f"  {line}"))

    click.echo(f"== 2/5 workload: seed {seed}, {events:,} event lines")
    out_dir.mkdir(parents=True, exist_ok=True)
    events_file = out_dir / f"events-{seed}-{events}.jsonl"
    profiles_file = workload.default_profiles_path(events_file)
    stats = workload.generate(
        workload.WorkloadSpec(seed=seed, events=events), events_file, profiles_file
    )
    for line in workload.summary(stats).splitlines():
        click.echo(f"  {line}")

    click.echo("== 3/5 produce to the log")
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
    for topic in (settings.events_topic, settings.profiles_topic):
        offsets = end_offsets(settings, topic)
        parts = "  ".join(f"p{p}={high - low:,}" for p, (low, high) in offsets.items())
        added = _total(offsets) - before.get(topic, _total(offsets))
        click.echo(f"  {topic:<18} {_total(offsets):>9,} records (+{added:,} now)   {parts}")
    click.echo("== 4/5 lambda: archive, batch, speed, hand-off")
    from core.spark import build_spark_session
    from lk.pipelines import drain_lambda

    spark = build_spark_session(settings, "lk-demo")
    try:
        drain_lambda(spark, settings, lambda line: click.echo(f"  {line.strip()}"))
    finally:
        spark.stop()

    click.echo("== 5/5 lambda's answers vs the oracle over the whole log")
    _compare_with_oracle(settings)
    click.echo(
        f"demo finished in {time.monotonic() - started:.1f}s; the stack keeps running "
        "(`lk stack down` stops it)"
    )


def _total(offsets: dict[int, tuple[int, int]]) -> int:
    return sum(high - low for low, high in offsets.values())


def _compare_with_oracle(settings: Settings) -> None:
    from core.events import profile_from_record
    from core.kafka_io import read_topic
    from core.oracle import compute_views
    from core.store.connection import connect
    from serving.filters import parse_view_query
    from serving.repository import read_view

    values = [r.value for r in read_topic(settings, settings.events_topic)]
    profiles = [
        profile_from_record(r.key or b"", r.value, r.timestamp_ms)
        for r in read_topic(settings, settings.profiles_topic)
    ]
    oracle = compute_views(values, profiles)
    with connect(settings) as conn:
        for view, expected in oracle.views.items():
            rows, meta = read_view(conn, parse_view_query(view, [], "lambda"))
            served = [dict(row) for row in rows]
            differing = len({repr(r) for r in served} ^ {repr(r) for r in expected})
            verdict = "equal to the oracle" if served == expected else f"{differing} rows differ"
            click.echo(f"  {view:<19} {len(served):>7,} rows   {verdict}")
    click.echo(
        f"  meta: version {meta.view_version}, batch cutoff {meta.batch_cutoff}, "
        f"quarantined {meta.quarantined:,} (oracle {oracle.quarantined:,}), "
        f"late dropped by the speed layer {meta.late_dropped:,}"
    )
    sample = oracle.views["page_views"][:3]
    click.echo(
        "  a few page_views rows: "
        + "; ".join(f"{r['page']} {r['window_start']} = {r['count']}" for r in sample)
    )
