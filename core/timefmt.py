"""Epoch-millisecond timestamps as ISO 8601 UTC strings, and tumbling-window arithmetic.

One formatter for every layer and the serving API, so a timestamp has one spelling everywhere:
``2026-11-01T10:00:00Z`` for a whole second, ``2026-11-01T10:00:00.123Z`` otherwise.
All arithmetic is on integers; no float ever touches a timestamp.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS

_EPOCH = datetime(1970, 1, 1)  # naive, read as UTC
_ONE_MS = timedelta(milliseconds=1)
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
