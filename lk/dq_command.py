"""`lk dq`: data quality by hand, what the `data_quality` DAG runs on a schedule.

    lk dq validate [--architecture lambda|kappa|both]   # the view suites, the reconciliation
    lk dq docs                                          # build Data Docs, publish to MinIO

`validate` checks what readers see now (the served views of each architecture that has
published something) and, when both architectures have, reconciles them with the oracle. One
line per suite; a failed suite makes the command exit 1 with its reasons in one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from core.settings import Architecture, Settings
from lk.errors import fail, guarded
from lk.spark_output import jvm_log

if TYPE_CHECKING:
    from quality import QualityResult


@click.group()
def dq() -> None:
    """Data quality: Great Expectations suites, reconciliation, Data Docs."""


@dq.command()
@click.option(
    "--architecture",
    type=click.Choice(["lambda", "kappa", "both"]),
    default="both",
    show_default=True,
    help="Whose served views to check; `both` also reconciles them with the oracle.",
)
@click.option(
    "--run-name",
    default=None,
    help="Groups this run's results in Data Docs (default: dq-<UTC time>).",
)
@click.pass_obj
@guarded
def validate(settings: Settings, architecture: str, run_name: str | None) -> None:
    """Run the suites on the served views (and the reconciliation); exit 1 if one fails."""
    run = run_name or f"dq-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    chosen = (
        (Architecture.LAMBDA, Architecture.KAPPA)
        if architecture == Architecture.BOTH
        else (architecture,)
    )
    click.echo("dq: loading Great Expectations ...", err=True)
    with _store_errors():
        results = _validate(settings, chosen, run)
    failed = [r for r in results if not r.success]
    if failed:
        first = failed[0]
        others = f" (and {len(failed) - 1} more suites)" if len(failed) > 1 else ""
        fail(f"{first.suite}@{first.layer} failed: {'; '.join(first.failures)}{others}")
    click.echo(f"{len(results)} suites passed; `lk dq docs` publishes the report")


def _validate(settings: Settings, architectures: tuple[str, ...], run: str) -> list[QualityResult]:
    from serving.quality import run_reconciliation, validate_realtime  # deferred: pandas

    results: list[QualityResult] = []
    for arch in architectures:
        found = validate_realtime(settings, arch, run)
        if not found:
            click.echo(f"{arch}: serves nothing yet, no suite run")
        for result in found:
            click.echo(result.summary())
        results += found
    if len(architectures) == 2:
        log = jvm_log(settings, "lk-dq-reconciliation")
        reconciliation = run_reconciliation(settings, run, jvm_log=log, echo=click.echo)
        if reconciliation is not None:
            click.echo(reconciliation.summary())
            results.append(reconciliation)
    return results


@contextmanager
def _store_errors() -> Iterator[None]:
    """The serving store down is an expected failure: one line, not a traceback."""
    import psycopg

    try:
        yield
    except psycopg.OperationalError as exc:
        fail(f"the serving store is unavailable: {' '.join(str(exc).split())}")


@dq.command()
@click.option("--local", is_flag=True, help="Only build the site here; print its index file.")
@click.pass_obj
@guarded
def docs(settings: Settings, local: bool) -> None:
    """Build Data Docs from the stored results and publish them to MinIO; print the URL."""
    from quality import build_docs, publish_docs  # deferred: pandas

    if local:
        click.echo(build_docs(settings).as_uri())
        return
    try:
        with _store_errors():
            url = publish_docs(settings)
    except Exception as exc:  # boto3's errors: MinIO down, no rights on the bucket
        if type(exc).__module__.startswith(("botocore", "boto3")):
            fail(f"could not publish Data Docs to MinIO: {' '.join(str(exc).split())}")
        raise
    click.echo(url)
