"""Where the batch layer stops and the speed layer takes over: the cutoff, chosen here only.

The cutoff is an hour boundary, so no tumbling window (a minute or an hour) straddles it: every
window belongs to the batch side or to the speed side, never to both.

- A scheduled batch run closes only what the archive already holds in full: the archive's
  watermark (its greatest event time less the watermark delay), less the lookahead (a search
  just before the cutoff needs the clicks of the 30 minutes after it and the orders of the 60
  minutes after it, ``core.catalog.LOOKAHEAD_MS``), floored to the hour.
- `lk drain` closes everything: the hour after the greatest archived event time.
- A reprocess of a date range stops at the end of its last day, or earlier if the archive does.
- Never before the published batch's cutoff: the speed layer dropped the events before it at
  the hand-off, so an earlier cutoff would leave windows in between on neither side.
"""

from __future__ import annotations

from datetime import date

from batch_layer.errors import BatchError, NothingNewError
from core.catalog import LOOKAHEAD_MS
from core.times import HOUR_MS, end_of_day_ms, iso, window_start


class CutoffError(BatchError):
    """No cutoff can be chosen, or the one asked for would lose events."""


class NoValidEventError(CutoffError, NothingNewError):
    """The master dataset holds no valid event: there is nothing to place a cutoff after."""


def scheduled_cutoff(max_event_ts: int, watermark_delay_ms: int) -> int:
    return window_start(max_event_ts - watermark_delay_ms - LOOKAHEAD_MS, HOUR_MS)


def drain_cutoff(max_event_ts: int) -> int:
    return window_start(max_event_ts, HOUR_MS) + HOUR_MS


def until_cutoff(until: date) -> int:
    """A reprocess of the days up to ``until``: the midnight (UTC) after it."""
    return end_of_day_ms(until)


def choose_cutoff(
    requested_ms: int | None,
    published_cutoff_ms: int | None,
    max_event_ts: int | None,
    watermark_delay_ms: int,
    *,
    drain: bool = False,
    until_ms: int | None = None,
) -> int:
    """The cutoff of a batch run: ``requested_ms`` when given (refused if before the published
    one), else what the archive closes (scheduled; capped at ``until_ms``, a reprocess's
    range), or with ``drain`` the hour after the last event; never before the published
    cutoff."""
    if requested_ms is not None:
        if published_cutoff_ms is not None and requested_ms < published_cutoff_ms:
            raise CutoffError(
                f"cutoff {iso(requested_ms)} is before the published batch's "
                f"({iso(published_cutoff_ms)}): choose a later one"
            )
        return requested_ms
    if max_event_ts is None:
        raise NoValidEventError("the master dataset holds no valid event yet")
    if drain:
        cutoff_ms = drain_cutoff(max_event_ts)
    else:
        cutoff_ms = scheduled_cutoff(max_event_ts, watermark_delay_ms)
        if until_ms is not None:
            cutoff_ms = min(cutoff_ms, until_ms)
    return cutoff_ms if published_cutoff_ms is None else max(cutoff_ms, published_cutoff_ms)
