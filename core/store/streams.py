"""Names of the streams that write to the serving store, and exact time conversions.

Writers (speed layer, Kappa job) and the reader (serving) take these names from here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

LAMBDA_SPEED = "lambda-speed"
"""The Lambda speed layer's real-time rows and progress."""

KAPPA_PREFIX = "kappa-v"
"""Kappa stream job version N writes stream `kappa-vN`."""


def kappa_stream(version: int) -> str:
    return f"{KAPPA_PREFIX}{version}"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_ONE_US = timedelta(microseconds=1)


def to_ms(value: datetime) -> int:
    """A timestamptz as epoch milliseconds, in integer arithmetic (no float ever rounds it)."""
    return (value - _EPOCH) // _ONE_MS


def to_us(value: datetime) -> int:
    """A timestamptz as epoch microseconds: Postgres's own precision (`now()` of a commit)."""
    return (value - _EPOCH) // _ONE_US


def to_timestamp(ms: int) -> datetime:
    return _EPOCH + ms * _ONE_MS
