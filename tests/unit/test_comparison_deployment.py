"""comparison.deployment: a stream that dies is restarted as its Deployment would be, and one
that keeps dying stops the run with its last words (fake processes: nothing starts)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from comparison.deployment import MAX_RESTARTS, Deployment
from comparison.errors import ComparisonError
from core.settings import Settings


@dataclass
class DyingProcess:
    """Dies `deaths` times, then stays up."""

    deaths: int
    log: Path = Path("speed-layer.log")
    restarts: int = 0

    @property
    def alive(self) -> bool:
        return self.restarts >= self.deaths

    def tail(self, _chars: int = 0) -> str:
        return "psycopg.errors.ConnectionTimeout: connection timeout expired\n"

    def ensure_running(self) -> bool:
        self.restarts += 1
        return True


def _deployment(tmp_path: Path, process: DyingProcess) -> Deployment:
    settings = Settings(home=tmp_path, stack_dir=tmp_path / "stack", cache_dir=tmp_path)
    deployment = Deployment(settings, tmp_path)
    deployment.streams = {"speed layer": ("lambda", process)}  # type: ignore[dict-item]
    return deployment


def test_a_stream_that_died_once_is_restarted_and_the_run_goes_on(tmp_path: Path) -> None:
    process = DyingProcess(deaths=1)
    deployment = _deployment(tmp_path, process)
    deployment.check()
    deployment.check()
    assert process.restarts == 1
    assert deployment.restarted == [
        "speed layer: psycopg.errors.ConnectionTimeout: connection timeout expired"
    ]


def test_a_stream_that_keeps_dying_stops_the_run_with_its_last_words(tmp_path: Path) -> None:
    deployment = _deployment(tmp_path, DyingProcess(deaths=MAX_RESTARTS + 1))
    for _ in range(MAX_RESTARTS):
        deployment.check()
    with pytest.raises(ComparisonError, match=r"stopped 4 times.*ConnectionTimeout"):
        deployment.check()


def test_a_wait_asks_again_when_the_store_does_not_answer(tmp_path: Path) -> None:
    """On a saturated node a connection can time out: the wait asks again, as the sampler
    does, instead of ending the run with a traceback."""
    import psycopg

    from comparison.context import Context

    answers: Iterator[Exception | bool] = iter(
        [psycopg.errors.ConnectionTimeout("connection timeout expired"), False, True]
    )

    def condition() -> bool:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    said: list[str] = []
    ctx = Context.__new__(Context)  # only what `wait` uses
    ctx.deployment = _deployment(tmp_path, DyingProcess(deaths=0))
    ctx.echo = said.append
    assert ctx.wait(condition, timeout_s=30, what="the streams running") >= 0
    assert said == ["  (the streams running: the store did not answer: connection timeout expired)"]
