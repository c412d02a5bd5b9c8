"""Freshness per record (comparison.sampler.Visibility): a produced record is visible once the
stream's committed offset in its own partition passes it, whatever the other partitions'
progress; its lag is measured from its own produced time."""

from __future__ import annotations

from comparison.feed import Mark
from comparison.sampler import Visibility

P0, P1 = "events/0", "events/1"


def test_a_partition_read_ahead_is_visible_without_waiting_for_the_others() -> None:
    marks = [Mark(0.0, P0, 0), Mark(0.5, P1, 0), Mark(1.0, P0, 1), Mark(1.5, P1, 1)]
    visibility = Visibility(("lambda", "kappa"))
    visibility.take(marks[:3])
    # Lambda's stream has read partition 0 to its end, nothing of partition 1.
    assert visibility.advance("lambda", {P0: 2}, now=2.0) == [2.0, 1.0]
    assert visibility.advance("kappa", {}, now=2.0) == []
    assert not visibility.complete()
    visibility.take(marks)  # the feed's list grew: only the new mark is taken
    assert visibility.advance("lambda", {P0: 2, P1: 2}, now=3.0) == [2.5, 1.5]
    assert visibility.advance("kappa", {P0: 2, P1: 1}, now=3.0) == [3.0, 2.0, 2.5]
    assert not visibility.complete()  # kappa has not passed events/1 offset 1 yet
    assert visibility.advance("kappa", {P0: 2, P1: 2}, now=4.0) == [2.5]
    assert visibility.complete()
    assert visibility.advance("kappa", {P0: 2, P1: 2}, now=5.0) == []  # each record once
