"""The scenarios that change the logic version: a logic change (version 2), and a bug and its
fix. Each new version goes through its architecture's own path (`deploy`: Lambda's batch
recompute, Kappa's replay), with a reader watching that readers never see a gap or a mix."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from comparison.context import Context, current_version, span
from comparison.deployment import Job
from comparison.errors import ComparisonError
from comparison.figures import ReadersView, Reprocessing, Sample, WrongAnswers
from comparison.sampler import ARCHITECTURES, served
from core.comparison import view_distance
from core.settings import Settings

READ_EVERY_S = 0.5
"""How often the readers' watch reads during a version change."""
_Done = TypeVar("_Done")


@dataclass(frozen=True, slots=True)
class Deployed:
    result: Reprocessing
    job: Job
    started_s: float
    """When the job started, on the run's clock."""

    @property
    def live_from_s(self) -> float:
        """When readers first got the new version's answer."""
        return self.started_s + self.result.seconds


def deploy(ctx: Context, architecture: str, logic_version: str, scenario: str) -> Deployed:
    """A new logic version through the architecture's own path (Lambda: a batch recompute,
    published by the speed layer's hand-off; Kappa: a replay and an alias switch), with a
    reader watching the served answer throughout."""
    before = served(ctx.settings, architecture)
    old_version = before["page_views"][1].view_version
    watch = ReadersWatch(ctx.settings, architecture)
    watch.start()
    started, started_s = time.monotonic(), ctx.clock.now()
    if architecture == "lambda":
        args, how = ["batch", "--drain", "--logic-version", logic_version], "batch recompute"
        name = "lambda batch"
    else:
        args, how = (
            ["reprocess", "--architecture", "kappa", "--logic-version", logic_version],
            "replay",
        )
        name = "kappa reprocess"
    job = ctx.deployment.job(name, architecture, args, ctx.job_timeout_s)
    try:
        if job.finished.returncode == 0:
            ctx.wait(
                lambda: current_version(ctx.settings, architecture) != old_version,
                ctx.catch_up_timeout_s,
                f"{architecture} switching to logic version {logic_version}",
            )
            time.sleep(2 * READ_EVERY_S)  # a read or two of the new version
    finally:
        watch.stop()
    switched_after = watch.first_read_of_new(old_version, started)
    after = served(ctx.settings, architecture)
    result = Reprocessing(
        scenario=scenario,
        architecture=architecture,
        logic_version=logic_version,
        how=how,
        seconds=switched_after if switched_after is not None else job.finished.seconds,
        cpu_seconds=job.finished.usage.cpu_seconds,
        peak_rss_bytes=job.finished.usage.peak_rss_bytes,
        readers=watch.judge(before, after),
    )
    return Deployed(result, job, started_s)


class ReadersWatch:
    """A reader polling one architecture's answer while its version changes."""

    def __init__(self, settings: Settings, architecture: str) -> None:
        self.settings = settings
        self.architecture = architecture
        self.reads: list[tuple[float, dict[str, tuple[list[dict[str, Any]], Any]] | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                answer = served(self.settings, self.architecture)
            except Exception:  # an unanswered read is a gap
                answer = None
            self.reads.append((time.monotonic(), answer))
            self._stop.wait(READ_EVERY_S)

    def first_read_of_new(self, old_version: int | None, started: float) -> float | None:
        for at, answer in self.reads:
            if answer is not None and answer["page_views"][1].view_version != old_version:
                return at - started
        return None

    def judge(self, before: dict[str, Any], after: dict[str, Any]) -> ReadersView:
        """Every read must be the whole old answer or the whole new one, view by view."""
        gaps = mixed = 0
        seen: list[int] = []
        for _at, answer in self.reads:
            if answer is None:
                gaps += 1
                continue
            version = answer["page_views"][1].view_version
            if version is not None and version not in seen:
                seen.append(version)
            for view, (rows, _meta) in answer.items():
                if not rows and before[view][0]:
                    gaps += 1
                    break
                if not (
                    view_distance(view, rows, before[view][0]).exact
                    or view_distance(view, rows, after[view][0]).exact
                ):
                    mixed += 1
                    break
        return ReadersView(len(self.reads), seen, gaps, mixed)


def require(job: Job) -> None:
    if job.finished.returncode != 0:
        last = job.finished.output_tail.strip().splitlines()
        raise ComparisonError(f"{job.name} failed: {last[-1] if last else 'no output'}")


def logic_change(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        ctx.sampler.logic_version = "2"
        for architecture in ARCHITECTURES:  # one after the other: their times compare
            deployed = deploy(ctx, architecture, "2", "logic-change")
            require(deployed.job)
            ctx.run.reprocessing.append(deployed.result)
            notes.append(_describe(deployed.result))

    span(ctx, "logic-change", "A logic change (version 2): batch recompute vs replay", body)


def bug_and_fix(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        intended = ctx.sampler.logic_version
        # Both at once, as one team would ship one wrong release to both, but each its own
        # sequence (wrong version, noticed, fixed), so that neither waits on the other: each
        # architecture's wrong-answer time is its own. They share the machine's cores.
        found = on_both(lambda a: _bug_then_fix(ctx, a, intended))
        for architecture in ARCHITECTURES:
            note, wrong = found[architecture]
            notes.append(note)
            if wrong is not None:
                ctx.run.wrong_answers.append(wrong)

    span(ctx, "bug-and-fix", "A bug and its fix: a wrong logic version, noticed, repaired", body)


def _bug_then_fix(
    ctx: Context, architecture: str, intended: str
) -> tuple[str, WrongAnswers | None]:
    """One architecture's bug and fix: the wrong version deployed, waited on until a sample
    sees its answers off, then the intended version deployed again."""
    bug = deploy(ctx, architecture, "bug", "bug")
    ctx.run.reprocessing.append(bug.result)
    if bug.job.finished.returncode != 0:
        last = bug.job.finished.output_tail.strip().splitlines()
        why = last[-1] if last else "refused"
        return f"{architecture}: the wrong version never went live ({why})", None
    ctx.wait(
        lambda: ctx.sampler.rows_off(architecture) > 0,
        ctx.catch_up_timeout_s,
        f"{architecture}'s wrong answers being noticed",
    )
    ctx.sampler.sample()  # the sample that records it, if the sampler's own has not yet
    fix = deploy(ctx, architecture, intended, "fix")
    require(fix.job)
    ctx.run.reprocessing.append(fix.result)
    wrong = WrongAnswers(
        architecture,
        "bug",
        bug.live_from_s,
        fix.live_from_s,
        fix.result.seconds,
        fix.result.cpu_seconds,
        noticed_s=_first_off(ctx.sampler.samples, architecture, bug.live_from_s),
    )
    noticed = "never" if wrong.noticed_s is None else f"{wrong.noticed_s:.0f} s"
    return (
        f"{architecture}: wrong answers served {wrong.seconds_wrong:.0f} s (noticed after "
        f"{noticed}; the repair took {fix.result.seconds:.0f} s, "
        f"{fix.result.cpu_seconds:.0f} CPU-s)"
    ), wrong


def _first_off(samples: Sequence[Sample], architecture: str, since_s: float) -> float | None:
    """Seconds from `since_s` to the first answered sample of `architecture` off the oracle."""
    for s in sorted(samples, key=lambda s: s.t_s):
        if s.architecture == architecture and s.t_s >= since_s and s.status == 200 and s.rows_off:
            return s.t_s - since_s
    return None


def on_both(deploy: Callable[[str], _Done], only: list[str] | None = None) -> dict[str, _Done]:
    architectures = only if only is not None else list(ARCHITECTURES)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {a: pool.submit(deploy, a) for a in architectures}
        return {a: f.result() for a, f in futures.items()}


def _describe(result: Reprocessing) -> str:
    r = result.readers
    return (
        f"{result.architecture} ({result.how}): readers switched after {result.seconds:.0f} s, "
        f"{result.cpu_seconds:.0f} CPU-s, peak {result.peak_rss_bytes / 2**20:,.0f} MiB; "
        f"{r.reads} reads saw versions {r.versions_seen}, {r.gaps} gaps, {r.mixed} mixed"
    )
