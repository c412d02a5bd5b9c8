"""Every time conversion of the project: epoch milliseconds to and from ISO 8601 UTC strings
and datetimes, and tumbling-window arithmetic.

Epoch milliseconds are the one representation in code. One formatter for every layer and the
serving API, so a timestamp has one spelling everywhere: ``2026-11-01T10:00:00Z`` for a whole
second, ``2026-11-01T10:00:00.123Z`` otherwise. All arithmetic is on integers; no float ever
touches a timestamp.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

_EPOCH = datetime(1970, 1, 1)  # naive, read as UTC
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_ONE_US = timedelta(microseconds=1)

MIN_TIMESTAMP_MS: Final = (datetime.min.replace(tzinfo=UTC) - _EPOCH_UTC) // _ONE_MS
"""0001-01-01T00:00:00Z in epoch ms: the earliest instant a datetime (and Spark) can hold."""
MAX_TIMESTAMP_MS: Final = (datetime.max.replace(tzinfo=UTC) - _EPOCH_UTC) // _ONE_MS
"""9999-12-31T23:59:59.999Z in epoch ms: the latest instant a datetime (and Spark) can hold."""
_ISO_UTC = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:Z|\+00:00)",
    re.ASCII,
)


def iso(ms: int) -> str:
    """Format epoch milliseconds as ISO 8601 UTC with a ``Z``; the fraction only when non-zero."""
    seconds, millis = divmod(ms, 1000)
    base = (_EPOCH + timedelta(seconds=seconds)).isoformat(timespec="seconds")
    return f"{base}Z" if millis == 0 else f"{base}.{millis:03d}Z"


def parse_iso(s: str) -> int:
    """Parse ``YYYY-MM-DDTHH:MM:SS[.fff]`` ending in ``Z`` or ``+00:00`` into epoch milliseconds.

    Strict on purpose, so a filter means one instant: any other offset, a missing offset, or a
    fraction finer than a millisecond (``.1234``; ``.123000`` is fine) raises ``ValueError``.
    """
    match = _ISO_UTC.fullmatch(s)
    if match is None:
        raise ValueError(
            f"not an ISO 8601 UTC timestamp (expected e.g. 2026-11-01T10:00:00Z): {s!r}"
        )
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = match.group(7) or ""
    if fraction[3:].strip("0"):
        raise ValueError(f"timestamp finer than a millisecond: {s!r}")
    millis = int(fraction[:3].ljust(3, "0"))
    moment = datetime(year, month, day, hour, minute, second)  # ValueError on e.g. month 13
    return (moment - _EPOCH) // _ONE_MS + millis


def window_start(ts_ms: int, size_ms: int) -> int:
    """Start of the tumbling window of ``size_ms`` holding ``ts_ms`` (windows are [start, end))."""
    if size_ms <= 0:
        raise ValueError(f"window size must be positive, got {size_ms}")
    return ts_ms - ts_ms % size_ms


def to_ms(value: datetime) -> int:
    """A timestamptz (an aware datetime; a naive one is read as UTC) as epoch milliseconds, in
    integer arithmetic (no float ever rounds it)."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (aware - _EPOCH_UTC) // _ONE_MS


def to_us(value: datetime) -> int:
    """A timestamptz as epoch microseconds: Postgres's own precision (`now()` of a commit)."""
    return (value - _EPOCH_UTC) // _ONE_US


def to_timestamp(ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime (what a timestamptz column takes)."""
    return _EPOCH_UTC + ms * _ONE_MS


def optional_ms(value: datetime | None) -> int | None:
    return None if value is None else to_ms(value)


def optional_timestamp(ms: int | None) -> datetime | None:
    return None if ms is None else to_timestamp(ms)


def instant_ms(moment: datetime | int | str) -> int:
    """Epoch ms of an instant given as ms, an ISO string or a datetime (naive = UTC)."""
    if isinstance(moment, int):
        return moment
    if isinstance(moment, str):
        return parse_iso(moment)
    return to_ms(moment)


def end_of_day_ms(day: date) -> int:
    """The midnight (UTC) after ``day``, in epoch ms."""
    return to_ms(datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC))
