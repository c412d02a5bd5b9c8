"""The bench's micro-batch timers wrap attributes by name: each must still exist, or the
replay and speed steps fail at their first micro-batch (a rename once broke them silently)."""

from __future__ import annotations

import pytest

from tests.benchmarks import phases


@pytest.mark.parametrize(
    ("label", "target"),
    [
        *phases._SIDES.items(),
        *phases._STEPS.items(),
        *phases._CALLS.items(),
        *phases._DETAILS.items(),
    ],
)
def test_every_timed_attribute_should_exist(label: str, target: tuple[object, str]) -> None:
    owner, name = target
    assert callable(getattr(owner, name, None)), f"{label}: {owner!r} has no {name}"
