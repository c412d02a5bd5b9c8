"""The two rules the redesign gave one home each: the batch cutoff (`batch_layer.cutoff`) and
when a Kappa replay has caught up (`kappa.reprocess.caught_up`)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from batch_layer.cutoff import (
    CutoffError,
    NoValidEventError,
    choose_cutoff,
    until_cutoff,
)
from batch_layer.errors import BatchError, NothingNewError
from core.settings import Settings
from core.times import HOUR_MS, MINUTE_MS, parse_iso

T = parse_iso("2026-11-01T10:45:00Z")
DELAY = 10 * MINUTE_MS


def test_a_scheduled_cutoff_closes_what_the_watermark_and_the_lookahead_allow() -> None:
    # 10:45 less 10 min of watermark less 60 min of lookahead (a search's pattern: its order
    # up to 60 min later) is 9:35: floored to 9:00.
    assert choose_cutoff(None, None, T, DELAY) == parse_iso("2026-11-01T09:00:00Z")
    # With 25 more minutes archived (11:10 less 70 min is 10:00), 10:00 closes.
    assert choose_cutoff(None, None, T + 25 * MINUTE_MS, DELAY) == parse_iso("2026-11-01T10:00:00Z")


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


def test_without_a_valid_event_a_batch_has_nothing_new_to_compute() -> None:
    """Not a failure: the DAG's step skips on `NothingNewError` (`lk.step_registry`)."""
    assert issubclass(NoValidEventError, NothingNewError)
    assert issubclass(NothingNewError, BatchError)  # `lk batch`, `lk drain`: still an error


def test_a_batch_that_would_equal_the_published_version_is_nothing_new() -> None:
    """Nothing archived since the published version's snapshot, and the same cutoff and
    logic: the new version would be the published one again. Anything else is new."""
    from batch_layer.inputs import Added
    from batch_layer.job import BatchInput
    from batch_layer.pipeline import unchanged_since
    from core.store.versions import Version

    cutoff = parse_iso("2026-11-01T10:00:00Z")
    published = Version("lambda", 4, "published", datetime.fromtimestamp(cutoff / 1000, UTC), "1")
    same = BatchInput(12, Added(frozenset(), []), raw=None)  # type: ignore[arg-type]
    with pytest.raises(NothingNewError, match=r"^nothing archived since batch version 4 "):
        unchanged_since(published, same, cutoff, "1")
    added = Added(frozenset({"s3a://m/events/record_date=2026-11-01/record_hour=11/a"}), [])
    unchecked = Added(frozenset(), [], everything=True)  # the published snapshot is gone
    for batch_input, at, logic in (
        (BatchInput(13, added, raw=None), cutoff, "1"),  # type: ignore[arg-type]
        (BatchInput(12, unchecked, raw=None), cutoff, "1"),  # type: ignore[arg-type]
        (same, cutoff + HOUR_MS, "1"),  # a later cutoff (the published one was capped)
        (same, cutoff, "2"),  # another logic (lambda_reprocess)
    ):
        unchanged_since(published, batch_input, at, logic)  # new: no exception


def test_caught_up_needs_both_a_small_lag_and_a_close_watermark() -> None:
    from kappa.reprocess import caught_up  # deferred: pyspark

    s = Settings(kappa_catchup_max_lag=100, kappa_catchup_watermark_slack_s=60)
    assert caught_up(s, {}, None)
    assert caught_up(s, {"events/0": 60, "events/1": 40}, 60_000)
    assert not caught_up(s, {"events/0": 60, "events/1": 41}, 0)  # all partitions together
    assert not caught_up(s, {}, 60_001)
