"""Where the batch layer stops and the speed layer takes over.

The cutoff is an hour boundary, so no tumbling window (a minute or an hour) straddles it: every
window belongs to the batch side or to the speed side, never to both.

A scheduled batch run only closes what the archive already holds in full: the archive's
watermark (its greatest event time less the watermark delay), less the click window (a search
just before the cutoff needs the clicks of the 30 minutes after it), floored to the hour.
`lk drain` closes everything: the hour after the greatest archived event time.
"""

from __future__ import annotations

from core.catalog import CLICK_WINDOW_MS
from core.timefmt import HOUR_MS, window_start


def scheduled_cutoff(max_event_ts: int, watermark_delay_ms: int) -> int:
    return window_start(max_event_ts - watermark_delay_ms - CLICK_WINDOW_MS, HOUR_MS)


def drain_cutoff(max_event_ts: int) -> int:
    return window_start(max_event_ts, HOUR_MS) + HOUR_MS
