"""`lk stack up | down | status | reset`."""

from __future__ import annotations

import time

import click

from core.settings import Settings
from infra.stack import stack as local_stack
from lk.errors import fail, guarded
from lk.progress_bars import BuildBars


@click.group()
def stack() -> None:
    """Start, stop and report the local services (Kafka, MinIO, Postgres) on loopback."""


@stack.command()
@click.pass_obj
@guarded
def up(settings: Settings) -> None:
    """Start every service (fetching and building what is missing) and wait until it answers."""
    started = time.monotonic()
    local_stack.up(settings, progress=click.echo, builds=BuildBars())
    click.echo(f"stack up in {time.monotonic() - started:.1f}s (data in {settings.stack_path})")


@stack.command()
@click.pass_obj
@guarded
def down(settings: Settings) -> None:
    """Stop the services that `lk stack up` started; their data stays."""
    local_stack.down(settings, progress=click.echo)


@stack.command()
@click.pass_obj
@guarded
def status(settings: Settings) -> None:
    """Report each service; exits 1 if any is not answering."""
    statuses = local_stack.status(settings)
    for s in statuses:
        state = "up" if s.running else "down"
        owner = "" if s.owned or not s.running else " (not started by the stack)"
        click.echo(f"{s.name:<9} {state:<5} {s.address:<16} {s.detail}{owner}".rstrip())
    if not all(s.running for s in statuses):
        fail("not every service is up: run `lk stack up`")


@stack.command()
@click.pass_obj
@guarded
def reset(settings: Settings) -> None:
    """Stop the stack and delete all its data (topics, buckets, databases, checkpoints).

    Cached downloads and builds stay, so the next `lk stack up` is fast.
    """
    local_stack.reset(settings, progress=click.echo)
