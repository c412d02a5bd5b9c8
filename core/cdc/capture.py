"""Start and stop the capture of one namespace's user table on a running Kafka Connect: what
`lk stack up` does for the stack's own, and a run with a namespace of its own (a test, the
comparison) does for its."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from core.cdc import connector, provision
from core.settings import Settings


def start(settings: Settings) -> None:
    """The table, roles and publication, then the connector, running (idempotent: a task
    that failed is restarted; the slot kept every change since)."""
    provision.ensure_app_side(settings)
    connector.start(settings)


def stop(settings: Settings, timeout_s: float = 30.0) -> None:
    """The connector deleted, then its slot, publication and database dropped: a slot left
    behind would hold WAL for ever. For a namespace of its own, never the stack's."""
    connector.delete(settings)
    deadline = time.monotonic() + timeout_s
    # The task lets go of its slot a moment after the connector is deleted.
    while provision.slot_active(settings) and time.monotonic() < deadline:
        time.sleep(0.2)
    provision.drop_app_side(settings)


@contextmanager
def running(settings: Settings) -> Iterator[None]:
    """The capture of a namespace of its own while the block runs (nothing when
    `cdc_enabled` is off)."""
    if not settings.cdc_enabled:
        yield
        return
    start(settings)
    try:
        yield
    finally:
        stop(settings)
