"""`lk cdc register [--watch S]`: the connector that captures the user table, registered on
Kafka Connect, and kept running. The chart's Connect pod runs it beside the worker (the REST
port is the pod's own: nothing outside it registers anything); `lk stack up` registers the
stack's through `core.cdc.capture.start`.

Kafka Connect never restarts a failed task itself: a database away for longer than Debezium's
retries fails it for good. `--watch` restarts it, as `lk stack up` does at its start.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import httpx

from core.cdc import connector
from core.settings import Settings
from lk.errors import fail, guarded


def _until_connect_answers(settings: Settings, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not connector.answers(settings):
        if time.monotonic() > deadline:
            fail(f"Kafka Connect at {settings.connect_url} did not answer in {timeout_s:.0f} s")
        time.sleep(2)


@click.group()
def cdc() -> None:
    """The change data capture connector on Kafka Connect."""


@cdc.command()
@click.option(
    "--watch",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Then check it this often, for ever, and restart a failed task.",
)
@click.option(
    "--timeout", type=float, default=600.0, show_default=True, help="Wait for Connect (s)."
)
@click.option(
    "--heartbeat",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --watch: a file touched by each round that finds the connector running "
    "(the chart's probes read its age).",
)
@click.pass_obj
@guarded
def register(
    settings: Settings, watch: float | None, timeout: float, heartbeat: Path | None
) -> None:
    """Create or update the connector (idempotent), and wait until it runs."""
    _until_connect_answers(settings, timeout)
    if watch is None:
        try:
            _registered_and_running(settings, timeout)
        except connector.ConnectError as exc:
            fail(str(exc))
        return
    # Watching: a connector that does not run yet (the init Job has not made its database)
    # is tried again every round, as is one whose task failed later.
    while True:
        try:
            if connector.states(settings) is None:
                _registered_and_running(settings, watch)
            elif connector.restart_failed(settings):
                click.echo(f"connector {settings.cdc_connector}: a failed task restarted")
            if heartbeat is not None and connector.is_running(connector.states(settings)):
                heartbeat.parent.mkdir(parents=True, exist_ok=True)
                heartbeat.touch()
        except (connector.ConnectError, httpx.HTTPError) as exc:
            click.echo(f"connector {settings.cdc_connector}: not running yet ({exc})")
        time.sleep(watch)


def _registered_and_running(settings: Settings, timeout_s: float) -> None:
    connector.start(settings, timeout_s)
    click.echo(f"connector {settings.cdc_connector} running")
