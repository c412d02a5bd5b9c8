"""`lk profiles set|delete|apply`: the application writing its user table, which change data
capture streams into the `profiles` topic (core/cdc, docs/CONTRACT.md §2).

Each change is a transaction of its own. A command returns once its last change is in Kafka
(the connector's slot has confirmed it), so a `lk drain` after it sees every change; with
`--no-wait` it returns at once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import click

from core.cdc.arrival import profiles_end, wait_captured
from core.cdc.table import ProfileTableError, apply_all, read_changes
from core.events import ProfileChange
from core.settings import Settings
from lk.errors import fail, guarded

_NO_WAIT = click.option(
    "--no-wait", is_flag=True, help="Return once committed, without waiting for the capture."
)
_AT = click.option(
    "--at",
    "at",
    type=int,
    default=None,
    help="The change's time, epoch ms (default: now). A delete takes effect as of it.",
)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@click.group()
def profiles() -> None:
    """Change the application's user table; change data capture carries it to `profiles`."""


def _apply(
    settings: Settings,
    changes: Sequence[ProfileChange],
    where: Sequence[str],
    no_wait: bool,
    rate: float | None = None,
) -> None:
    if not changes:
        click.echo("no change to apply")
        return
    started = time.monotonic()
    since = None if no_wait else profiles_end(settings)
    try:
        reconnects = apply_all(settings, changes, where, rate)
        again = (
            f" (connected again {reconnects} time(s): the database went away)" if reconnects else ""
        )
        click.echo(
            f"{len(changes):,} change(s) committed in {time.monotonic() - started:.2f}s{again}"
        )
        if since is not None:
            waited = wait_captured(settings, since, changes)
            click.echo(f"captured into '{settings.profiles_topic}' {waited:.2f}s after the commit")
    except ProfileTableError as exc:
        fail(str(exc))


@profiles.command("set")
@click.option("--user", "user_id", required=True, help="The user's id.")
@click.option("--segment", required=True, help="The user's new segment.")
@_AT
@_NO_WAIT
@click.pass_obj
@guarded
def set_profile(
    settings: Settings, user_id: str, segment: str, at: int | None, no_wait: bool
) -> None:
    """Create or update a user's profile."""
    if not user_id or not segment:
        fail("--user and --segment must not be empty")
    change = ProfileChange(user_id, segment, _now_ms() if at is None else at)
    _apply(settings, [change], ["set"], no_wait)


@profiles.command("delete")
@click.option("--user", "user_id", required=True, help="The user's id.")
@_AT
@_NO_WAIT
@click.pass_obj
@guarded
def delete_profile(settings: Settings, user_id: str, at: int | None, no_wait: bool) -> None:
    """Delete a user's profile, as of --at: a tombstone in `profiles` at that time."""
    change = ProfileChange(user_id, None, _now_ms() if at is None else at)
    _apply(settings, [change], ["delete"], no_wait)


@profiles.command("apply")
@click.option(
    "--file",
    "file",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Profile lines as `lk generate` writes them (and `lk produce --topic profiles` takes).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="At most this many changes a second, as an application writes them (default: at once).",
)
@_NO_WAIT
@click.pass_obj
@guarded
def apply_file(settings: Settings, file: Path, rate: float | None, no_wait: bool) -> None:
    """Apply a file's profile changes in file order, one transaction each."""
    try:
        changes, where = read_changes(file)
    except ProfileTableError as exc:
        fail(str(exc))
    _apply(settings, changes, where, no_wait, rate)
