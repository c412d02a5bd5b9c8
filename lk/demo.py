"""`lk demo`: the main job.

Bring the stack up, generate a workload and produce it, run both architectures over the whole
log (Lambda: archive, batch, speed, hand-off; Kappa: the stream job), and print, side by side,
how far each one's served views are from the oracle computed from the same log, with a few
answers from each.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from core import workload
from core.catalog import VIEWS
from core.comparison import view_distance
from core.kafka_io import end_offsets, log_event_values, log_profile_changes, produce_file
from core.oracle import compute_views
from core.settings import Architecture, Settings
from core.spark import build_spark_session
from core.store.connection import connect
from infra.stack import stack as local_stack
from lk.errors import guarded
from lk.pipelines import drain_lambda
from serving.filters import parse_view_query
from serving.repository import read_view

ARCHITECTURES = (Architecture.LAMBDA, Architecture.KAPPA)


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
@click.option(
    "--kappa-micro-batches",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Micro-batches the Kappa job reads the log in, as a live stream would see it arrive "
    "(its watermark moves between them; one micro-batch would drop nothing as late).",
)
@click.pass_obj
@guarded
def demo(
    settings: Settings, seed: int, events: int, out_dir: Path, kappa_micro_batches: int
) -> None:
    """Run the main job on one generated workload and report what happened."""
    started = time.monotonic()
    click.echo("== 1/6 local stack")
    local_stack.up(settings, progress=lambda line: click.echo(f"  {line}"))

    click.echo(f"== 2/6 workload: seed {seed}, {events:,} event lines")
    out_dir.mkdir(parents=True, exist_ok=True)
    events_file = out_dir / f"events-{seed}-{events}.jsonl"
    profiles_file = workload.default_profiles_path(events_file)
    stats = workload.generate(
        workload.WorkloadSpec(
            seed=seed, events=events, watermark_delay_ms=settings.watermark_delay_ms
        ),
        events_file,
        profiles_file,
    )
    for line in workload.summary(stats).splitlines():
        click.echo(f"  {line}")

    click.echo("== 3/6 produce to the log")
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
    from kappa.job import KappaViews  # deferred: pyspark

    spark = build_spark_session(settings, "lk-demo")
    try:
        click.echo("== 4/6 lambda: archive, batch, speed, hand-off")
        lap = time.monotonic()
        drain_lambda(spark, settings, lambda line: click.echo(f"  {line.strip()}"))
        click.echo(f"  lambda drained in {time.monotonic() - lap:.1f}s")
        click.echo("== 5/6 kappa: the stream job over the whole log")
        lap = time.monotonic()
        per_trigger = max(100, -(-events // kappa_micro_batches))
        click.echo(f"  reading the log {per_trigger:,} records per micro-batch")
        kappa = KappaViews(
            spark, settings.model_copy(update={"stream_max_offsets_per_trigger": per_trigger})
        )
        version = kappa.drain()
        late_ids = kappa.late_event_ids(version)
        click.echo(f"  kappa v{version.version} drained in {time.monotonic() - lap:.1f}s")
    finally:
        spark.stop()

    click.echo("== 6/6 side by side: each architecture's answer vs the oracle over the whole log")
    side_by_side(settings, late_ids)
    click.echo(
        f"demo finished in {time.monotonic() - started:.1f}s; the stack keeps running "
        "(`lk serve` answers for both; `lk stack down` stops it)"
    )


def _total(offsets: dict[int, tuple[int, int]]) -> int:
    return sum(high - low for low, high in offsets.values())


def side_by_side(settings: Settings, kappa_late_ids: set[str]) -> None:
    """Each architecture's served views next to the oracle's, and a few answers from each.

    Kappa's stream path drops events behind its watermark, which Lambda's batch recovers: the
    second Kappa column is its distance from the oracle computed without those events, so a
    reader sees that the whole difference is the late data."""
    values, profiles = log_event_values(settings), log_profile_changes(settings)
    oracle = compute_views(values, profiles)
    on_time = compute_views(values, profiles, keep=lambda e: e.event_id not in kappa_late_ids)
    served: dict[str, dict[str, list[dict[str, Any]]]] = {}
    metas = {}
    with connect(settings) as conn:
        for arch in ARCHITECTURES:
            served[arch] = {}
            for view in oracle.views:
                rows, metas[arch] = read_view(conn, parse_view_query(view, [], arch))
                served[arch][view] = [dict(row) for row in rows]

    click.echo(f"  {'view':<19} {'oracle rows':>11}   {'lambda':<24} {'kappa':<24} kappa w/o late")
    for view, expected in oracle.views.items():
        lam = view_distance(view, served[Architecture.LAMBDA][view], expected)
        kap = view_distance(view, served[Architecture.KAPPA][view], expected)
        kap_on_time = view_distance(view, served[Architecture.KAPPA][view], on_time.views[view])
        click.echo(
            f"  {view:<19} {len(expected):>11,}   {lam.describe():<24} {kap.describe():<24} "
            f"{kap_on_time.describe()}"
        )
    for arch, meta in metas.items():
        click.echo(
            f"  {arch} meta: version {meta.view_version}, batch cutoff {meta.batch_cutoff}, "
            f"watermark {meta.speed_watermark}, quarantined {meta.quarantined:,} "
            f"(oracle {oracle.quarantined:,}), late dropped {meta.late_dropped:,}"
        )
    click.echo("  a few answers (oracle | lambda | kappa):")
    for view, value in (("page_views", "count"), ("revenue_by_segment", "revenue_cents")):
        for line in _sample(view, value, oracle.views[view], served):
            click.echo(f"    {line}")


def _sample(
    view: str, value: str, expected: list[dict[str, Any]], served: dict[str, dict[str, Any]]
) -> list[str]:
    """Three rows of `view`: those where the architectures disagree first, they tell most."""
    key_field = VIEWS[view].keys[0]

    def key(row: dict[str, Any]) -> tuple[Any, Any]:
        return row[key_field], row["window_start"]

    answers = {arch: {key(r): r[value] for r in rows[view]} for arch, rows in served.items()}
    rows = sorted(
        expected,
        key=lambda r: len({r[value], *(a.get(key(r)) for a in answers.values())}) == 1,
    )
    lines = []
    for row in rows[:3]:
        got = " | ".join(str(answers[arch].get(key(row), "-")) for arch in ARCHITECTURES)
        lines.append(f"{view} {row[key_field]} {row['window_start']}: {row[value]} | {got}")
    return lines
