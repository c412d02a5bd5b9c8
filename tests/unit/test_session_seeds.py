"""The speed layer's session seeds (`stream_engine.session_seeds.dedupe_seeds`): a seed inside
another is dropped, so a batch session the stream already continued is not merged twice."""

from __future__ import annotations

import random

from stream_engine.session_seeds import dedupe_seeds


def _by_definition(seeds: list[tuple]) -> list[tuple]:
    """The rule as stated: drop a seed some other seed of its user strictly contains (a
    different interval reaching from no later to no earlier); keep exact copies once."""
    kept = []
    for user, start, end, events in dict.fromkeys(seeds):
        covered = any(
            o[0] == user and o[1] <= start and o[2] >= end and (o[1], o[2]) != (start, end)
            for o in seeds
        )
        if not covered:
            kept.append((user, start, end, events))
    return kept


def test_a_contained_seed_is_dropped_and_copies_are_kept_once() -> None:
    batch_open = ("u1", 10, 20, 3)  # open at the cutoff
    continued = ("u1", 10, 35, 7)  # the stream's session that continued it
    other_user = ("u2", 12, 18, 2)
    seeds = [batch_open, continued, continued, other_user]
    assert sorted(dedupe_seeds(seeds)) == [continued, other_user]


def test_same_interval_with_other_counts_are_both_kept() -> None:
    seeds = [("u1", 0, 5, 1), ("u1", 0, 5, 2)]
    assert sorted(dedupe_seeds(seeds)) == seeds


def test_matches_the_definition_on_random_seeds() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        seeds = []
        for _ in range(rng.randint(0, 12)):
            start = rng.randint(0, 6)
            seeds.append((rng.choice("abc"), start, start + rng.randint(0, 4), rng.randint(1, 2)))
        if seeds and rng.random() < 0.3:
            seeds.append(rng.choice(seeds))
        assert sorted(dedupe_seeds(seeds)) == sorted(_by_definition(seeds)), seeds


def test_many_seeds_take_linear_time() -> None:
    # 200k seeds of 5k users: the quadratic version took minutes in a 1M-event replay.
    seeds = [(f"u{i % 5000}", i, i + i % 11, 1) for i in range(200_000)]
    assert len(dedupe_seeds(seeds)) == 200_000
