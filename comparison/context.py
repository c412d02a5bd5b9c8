"""What every scenario of a comparison run reads and adds to: the `Context`, and `span`, which
plays one scenario between its start and end on the run's clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from comparison.deployment import Deployment
from comparison.feed import Clock, SteadyFeed
from comparison.figures import ComparisonRun, ScenarioSpan
from comparison.sampler import Sampler, wait_for
from core.oracle import compute_views, keep_all_of, logic_filter
from core.settings import Settings
from core.store import state, versions
from core.store.connection import connect

Echo = Callable[[str], None]


@dataclass
class Context:
    settings: Settings
    clock: Clock
    deployment: Deployment
    feed: SteadyFeed
    sampler: Sampler
    run: ComparisonRun
    profiles_file: Path
    echo: Echo
    job_timeout_s: float
    catch_up_timeout_s: float
    deployed_at_s: float = 0.0
    """When the deployment's processes were started, on the run's clock."""
    progress: Callable[[int, int], None] = lambda done, total: None
    """Told (lines produced, lines in all) while the steady scenario produces."""
    extra_profiles: list[Any] = field(default_factory=list)
    moves: int = 1
    """How many times the segment-move scenario moves its users (`lk compare --moves`)."""

    def full_history_oracle(self, architecture: str) -> dict[str, list[dict[str, Any]]]:
        """Every view from every profile version, over the events `architecture` kept: Kappa's
        late-dropped events are left out, so a difference in a profile join is compaction's
        alone."""
        keep = logic_filter(self.sampler.logic_version)
        if architecture == "kappa":
            with connect(self.settings) as conn:
                live = versions.live_stream(conn, "kappa")
                late = set() if live is None else state.late_event_ids(conn, live)
            keep = keep_all_of(keep, lambda e: e.event_id not in late)
        return compute_views(
            self.feed.lines[: self.feed.produced_lines],
            [*self.sampler.profiles, *self.extra_profiles],
            keep=keep,
        ).views

    def wait(
        self, condition: Callable[[], bool], timeout_s: float, what: str, step_s: float = 1.0
    ) -> float:
        import psycopg  # deferred with the store's other users

        def checked() -> bool:
            self.deployment.check()
            try:
                return condition()
            except psycopg.OperationalError as exc:
                # The store down or slow to answer (a saturated node): not yet, ask again, as the
                # sampler does. A store that stays away ends the wait at its timeout.
                self.echo(f"  ({what}: the store did not answer: {' '.join(str(exc).split())})")
                return False

        return wait_for(checked, timeout_s, what, step_s)


def span(ctx: Context, name: str, title: str, body: Callable[[list[str]], float | None]) -> None:
    """Play one scenario; `body` adds its notes and may return when the streams caught up."""
    ctx.sampler.scenario = name
    started = ctx.clock.now()
    ctx.echo(f"== {title}")
    notes: list[str] = []
    caught_up = body(notes)
    ctx.sampler.sample()
    ctx.run.scenarios.append(
        ScenarioSpan(name, title, started, ctx.clock.now(), notes, caught_up_s=caught_up)
    )
    for note in notes:
        ctx.echo(f"  {note}")


def current_version(settings: Settings, architecture: str) -> int | None:
    with connect(settings) as conn:
        current = versions.current(conn, architecture)
    return None if current is None else current.version
