"""`lk demo` (the main job) and `lk compare`: both architectures live on one workload.

    lk demo                                   # stack up, then the comparison with its defaults
    lk compare --events 20000 --rate 200      # on a running stack; or --duration 120

The workload is produced at a steady rate, as a live source would; every few seconds each
architecture's served answer is compared with the oracle over what was produced so far; the
scenarios play in order (steady, late data, a logic change, a bug and its fix, users moving
segment in the database, compaction).
It ends with the report: one HTML file with its figures, a JSON file with every number, both
published to MinIO next to the Data Docs (`GET /v1/comparison`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from comparison.errors import ComparisonError
from comparison.live import CompareSpec, Outcome, run_comparison
from comparison.scenarios import SCENARIOS
from core.settings import Settings
from infra.stack import artifacts
from infra.stack import stack as local_stack
from lk.errors import fail, guarded
from lk.progress_bars import BuildBars, produce_bar

FIRST_RUN = (
    "a first run on this machine builds MinIO from the Go module proxy and fetches Kafka's and "
    "Spark's jars from Maven Central before anything starts (about 4-7 minutes on 2 cores); "
    "they are cached in {cache}, so later runs start in about a minute"
)


def comparison_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options `lk demo` and `lk compare` share: size, rate, duration, scenarios."""
    options = [
        click.option("--seed", type=int, default=7, show_default=True, help="Workload seed."),
        click.option(
            "--events", type=click.IntRange(min=100), default=6000, show_default=True,
            help="Event lines in the generated workload.",
        ),
        click.option(
            "--rate", type=click.FloatRange(min=1.0), default=100.0, show_default=True,
            help="Event lines produced per second, as a live source would.",
        ),
        click.option(
            "--duration", type=click.FloatRange(min=1.0), default=None,
            help="Seconds to produce for: sets --events to rate x duration.",
        ),
        click.option(
            "--sample-every", type=click.FloatRange(min=0.5), default=3.0, show_default=True,
            help="Seconds between two samples of both architectures against the oracle.",
        ),
        click.option(
            "--scenarios", default=",".join(SCENARIOS), show_default=True,
            help="Which scenarios to play, in this order, comma-separated.",
        ),
        click.option(
            "--moves", type=click.IntRange(min=1), default=1, show_default=True,
            help="Times segment-move moves its users: each commit to visible is measured.",
        ),
        click.option(
            "--out-dir", type=click.Path(path_type=Path, file_okay=False),
            default=Path("out/compare"), show_default=True,
            help="Where the workload, the logs and the report are written.",
        ),
        click.option(
            "--serve-port", type=int, default=None,
            help="Run the API (and its dashboard at /) on this port during the run.",
        ),
        click.option("--no-publish", is_flag=True, help="Do not upload the report to MinIO."),
    ]  # fmt: skip
    return functools.reduce(lambda f, option: option(f), reversed(options), command)


def _spec(**given: Any) -> CompareSpec:
    scenarios = tuple(s.strip() for s in given["scenarios"].split(",") if s.strip())
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        fail(f"--scenarios: unknown {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    events = given["events"]
    if given["duration"] is not None:
        events = max(100, round(given["rate"] * given["duration"]))
    return CompareSpec(
        seed=given["seed"],
        events=events,
        rate_per_s=given["rate"],
        sample_every_s=given["sample_every"],
        scenarios=scenarios,
        moves=given["moves"],
        out_dir=given["out_dir"],
        serve_port=given["serve_port"],
        publish=not given["no_publish"],
    )


def _compare(settings: Settings, spec: CompareSpec) -> Outcome:
    started = time.monotonic()
    bar, progress = produce_bar(spec.events)
    try:
        with bar:
            outcome = run_comparison(settings, spec, click.echo, progress)
    except ComparisonError as exc:
        fail(str(exc))
    click.echo(f"== the comparison took {time.monotonic() - started:.0f} s")
    click.echo(f"  report: {outcome.report.resolve()}")
    click.echo(f"  every figure as JSON: {outcome.json.resolve()}")
    if outcome.url:
        click.echo(f"  published: {outcome.url} (also at GET /v1/comparison)")
    click.echo(f"  the components' logs (Spark's and the JVM's too): {outcome.logs.resolve()}")
    return outcome


@click.command()
@comparison_options
@click.pass_obj
@guarded
def compare(settings: Settings, **given: Any) -> None:
    """Run both architectures live on one workload and write the comparison report."""
    _compare(settings, _spec(**given))


@click.command()
@comparison_options
@click.pass_obj
@guarded
def demo(settings: Settings, **given: Any) -> None:
    """The main job: the stack, then both architectures live on one workload, and the report."""
    if not artifacts.cached(settings):
        click.echo("first run: " + FIRST_RUN.format(cache=settings.cache_path))
    click.echo("== local stack (its output: .stack/logs)")
    local_stack.up(settings, progress=lambda line: click.echo(f"  {line}"), builds=BuildBars())
    spec = _spec(**given)
    click.echo(
        f"  the comparison produces {spec.events:,} events at {spec.rate_per_s:g}/s "
        f"({spec.events / spec.rate_per_s:.0f} s), then plays {len(spec.scenarios)} scenarios: "
        "about 5 minutes on 2 cores"
    )
    outcome = _compare(settings, spec)
    click.echo(
        "the stack keeps running: `lk serve` answers for the run with "
        f"LK_POSTGRES_DB={outcome.settings.postgres_db}; `lk stack down` stops it"
    )
