"""The two rules the redesign gave one home each: the batch cutoff (`batch_layer.cutoff`) and
when a Kappa replay has caught up (`kappa.reprocess.caught_up`)."""

from __future__ import annotations

from datetime import date

import pytest

from batch_layer.cutoff import (
    CutoffError,
    NoValidEventError,
    choose_cutoff,
    until_cutoff,
)
from core.settings import Settings
from core.times import HOUR_MS, MINUTE_MS, parse_iso

T = parse_iso("2026-11-01T10:45:00Z")
DELAY = 10 * MINUTE_MS


def test_a_scheduled_cutoff_closes_what_the_watermark_and_the_click_window_allow() -> None:
    # 10:45 less 10 min of watermark less 30 min of click window is 10:05: floored to 10:00.
    assert choose_cutoff(None, None, T, DELAY) == parse_iso("2026-11-01T10:00:00Z")


def test_a_drain_closes_the_hour_after_the_last_event() -> None:
    assert choose_cutoff(None, None, T, DELAY, drain=True) == parse_iso("2026-11-01T11:00:00Z")


def test_a_reprocess_range_caps_the_cutoff_at_the_end_of_its_last_day() -> None:
    until = until_cutoff(date(2026, 10, 31))
    assert until == parse_iso("2026-11-01T00:00:00Z")
    assert choose_cutoff(None, None, T, DELAY, until_ms=until) == until


def test_the_cutoff_never_goes_before_the_published_one() -> None:
    published = parse_iso("2026-11-01T12:00:00Z")
    assert choose_cutoff(None, published, T, DELAY) == published
    with pytest.raises(CutoffError, match="before the published batch"):
        choose_cutoff(published - HOUR_MS, published, T, DELAY)
    assert choose_cutoff(published + HOUR_MS, published, T, DELAY) == published + HOUR_MS


def test_without_a_valid_event_there_is_no_cutoff_to_choose() -> None:
    with pytest.raises(NoValidEventError):
        choose_cutoff(None, None, None, DELAY)


def test_caught_up_needs_both_a_small_lag_and_a_close_watermark() -> None:
    from kappa.reprocess import caught_up  # deferred: pyspark

    s = Settings(kappa_catchup_max_lag=100, kappa_catchup_watermark_slack_s=60)
    assert caught_up(s, {}, None)
    assert caught_up(s, {"events/0": 60, "events/1": 40}, 60_000)
    assert not caught_up(s, {"events/0": 60, "events/1": 41}, 0)  # all partitions together
    assert not caught_up(s, {}, 60_001)
