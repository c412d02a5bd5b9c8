"""The sessions another layer leaves open, as seeds a stream's session merge continues.

Lambda's speed layer merges the batch's sessions open at the cutoff into the sessions of new
events (``stream_engine.keyed_merge``); a seed the stream already continued is also in its own
sessions, and merging both would count its events twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

SessionSeeds = Callable[["psycopg.Connection", list[str], int | None], list[tuple]]
"""Sessions of other layers the stream must continue: (conn, users, cutoff) -> intervals."""


def dedupe_seeds(seeds: list[tuple]) -> list[tuple]:
    """Drop a seed that lies inside another (a batch session the stream already continued):
    merging it again would count its events twice. Exact copies are kept once.

    Per user, seeds sorted by start (and longest first): a seed is covered exactly when an
    earlier one with a different interval reaches at least as far, so one pass suffices.
    """
    by_user: dict[str, list[tuple]] = {}
    for seed in dict.fromkeys(seeds):
        by_user.setdefault(seed[0], []).append(seed)
    kept = []
    for user_seeds in by_user.values():
        user_seeds.sort(key=lambda seed: seed[2], reverse=True)
        user_seeds.sort(key=lambda seed: seed[1])  # stable: by start, then longest first
        reach = None  # the furthest end among earlier seeds with another interval
        previous: tuple | None = None
        group_reach = None  # reach before the current run of equal intervals
        for seed in user_seeds:
            interval = (seed[1], seed[2])
            if previous is None or interval != (previous[1], previous[2]):
                group_reach = reach
            if group_reach is None or group_reach < seed[2]:
                kept.append(seed)
            reach = seed[2] if reach is None else max(reach, seed[2])
            previous = seed
    return kept
