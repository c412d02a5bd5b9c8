"""The parts of `serving.quality`'s reconciliation that need no store: when a view of the current
state can be compared, and which late events Lambda's rows that span its cutoff lack."""

from __future__ import annotations

from core.events import Event
from core.settings import Settings
from serving.quality import Served, _not_in, _unsettled

END = {"events/0": 10, "events/1": 5, "profiles/0": 3}


def served(architecture: str, offsets: dict[str, int] | None, stream: str | None) -> Served:
    return Served(architecture, {}, 0, "1", stream, offsets=offsets)


def test_the_current_state_is_compared_only_when_both_sides_read_the_whole_log() -> None:
    settings = Settings()
    caught_up = served("kappa", dict(END), "kappa-v1")
    assert (
        _unsettled(settings, (served("lambda", dict(END), "lambda-speed"), caught_up), END, False)
        is None
    )
    behind = served("lambda", {"events/0": 8, "profiles/0": 3}, "lambda-speed")
    assert _unsettled(settings, (behind, caught_up), END, False) == (
        "lambda-speed is 7 records behind the log's end"
    )
    moved = served("kappa", None, "kappa-v1")
    never = served("lambda", {}, "lambda-speed")  # no micro-batch committed yet
    assert _unsettled(settings, (never, moved), END, False) == (
        "lambda-speed is 18 records behind the log's end; kappa moved while its views were read"
    )


def test_lambda_lacks_only_the_late_events_from_its_cutoff_on() -> None:
    def event(event_id: str, ts: int) -> Event:
        return Event(event_id, "page_view", "u1", ts, ts, ts, page="/a")

    late = {"early", "after"}
    everywhere = _not_in(late)
    from_cutoff = _not_in(late, before_ms=1_000)
    early, after, kept = event("early", 999), event("after", 1_000), event("kept", 5)
    assert [everywhere(e) for e in (early, after, kept)] == [False, False, True]
    # The batch counted every event before the cutoff, late for the speed layer or not.
    assert [from_cutoff(e) for e in (early, after, kept)] == [True, False, True]
