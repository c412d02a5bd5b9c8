"""The comparison's scenarios, in the order a run plays them, after the warm-up.

- warm-up (always, not a scenario): deployment → each architecture's first answer.
- steady: the workload produced at a steady rate; error and freshness over time.
- late: what each watermark dropped, and Lambda's next batch repairing it.
- logic-change: logic version 2, Lambda's batch recompute against Kappa's replay.
- bug-and-fix: a deliberately wrong logic version deployed, noticed, and reprocessed.
- compaction: both profile joins after `profiles` is compacted (CONTRACT §2, §3): the as-of
  join (`revenue_by_segment`) and the table-table join (`segment_totals`).

Each one reads the context the run built (`Context`) and adds its figures to `ctx.run`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from comparison.deployment import Deployment, Job
from comparison.errors import ComparisonError
from comparison.feed import Clock, SteadyFeed
from comparison.figures import (
    AS_OF_JOIN,
    PROFILE_JOINS,
    TABLE_TABLE_JOIN,
    WARM_UP,
    Compaction,
    ComparisonRun,
    LateData,
    ReadersView,
    Reprocessing,
    ScenarioSpan,
    Warmup,
    WrongAnswers,
)
from comparison.sampler import ARCHITECTURES, Sampler, served, wait_for
from core.comparison import view_distance
from core.kafka_io import log_end, produce_file, read_topic
from core.oracle import compute_views, keep_all_of, load_profiles_jsonl, logic_filter
from core.provision import configure_topic
from core.settings import Settings
from core.store import realtime, state, versions
from core.store.connection import connect
from core.store.streams import archiver_stream

Echo = Callable[[str], None]
SCENARIOS = ("steady", "late", "logic-change", "bug-and-fix", "compaction")
READ_EVERY_S = 0.5
"""How often the readers' watch reads during a version change."""


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


def _span(ctx: Context, name: str, title: str, body: Callable[[list[str]], None]) -> None:
    ctx.sampler.scenario = name
    started = ctx.clock.now()
    ctx.echo(f"== {title}")
    notes: list[str] = []
    body(notes)
    ctx.sampler.sample()
    ctx.run.scenarios.append(ScenarioSpan(name, title, started, ctx.clock.now(), notes))
    for note in notes:
        ctx.echo(f"  {note}")


def _current_version(settings: Settings, architecture: str) -> int | None:
    with connect(settings) as conn:
        current = versions.current(conn, architecture)
    return None if current is None else current.version


# -- warm-up, steady ------------------------------------------------------------------------


def warm_up(ctx: Context) -> None:
    """Deployment → first answer, per architecture: until its stream has committed a
    micro-batch (of the profiles), the API has no view version of it to answer from. The
    steady state starts once both answer and the archiver runs, so its figures are the running
    pipelines', not their processes' start."""
    ctx.sampler.scenario = WARM_UP
    pending = list(ARCHITECTURES)

    def answering() -> bool:
        for architecture in list(pending):
            if _answering(ctx.settings, architecture):
                ctx.run.warmup.append(Warmup(architecture, ctx.deployed_at_s, ctx.clock.now()))
                pending.remove(architecture)
        return not pending and _archiver_running(ctx.settings)

    ctx.echo("== warm-up: deployment → first answer")
    ctx.wait(answering, ctx.catch_up_timeout_s, "the streams' first micro-batch", step_s=0.5)
    for w in ctx.run.warmup:
        ctx.echo(f"  {w.architecture}: first answer {w.seconds:.1f} s after deployment")


def steady(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        feed, lines = ctx.feed, len(ctx.feed.lines)
        ctx.echo(f"  producing {lines:,} event lines at {feed.rate_per_s:g}/s, line by line")
        feed.start()
        while feed.running:
            ctx.deployment.check()
            ctx.progress(feed.produced_lines, lines)
            time.sleep(1.0)
        ctx.progress(feed.produced_lines, lines)
        feed.join()
        assert feed.started_s is not None and feed.ended_s is not None  # joined without error
        produced_in = feed.ended_s - feed.started_s
        ctx.run.workload["produced_in_s"] = round(produced_in, 1)
        ctx.run.workload["schedule_slipped_s"] = round(feed.slipped_s, 1)
        ctx.echo(f"  produced {lines:,} lines in {produced_in:.0f} s; both streams catching up")
        waited = ctx.wait(ctx.sampler.caught_up, ctx.catch_up_timeout_s, "both streams catching up")
        notes.append(
            f"{lines:,} lines produced in {produced_in:.0f} s (the schedule slipped "
            f"{feed.slipped_s:.1f} s); both streams caught up {waited:.0f} s after"
        )
        for f in ctx.sampler.freshness():
            if f.p50_s is not None and f.p99_s is not None:
                notes.append(
                    f"{f.architecture}: produced → visible p50 {f.p50_s:.1f} s, p99 {f.p99_s:.1f} s"
                )

    _span(ctx, "steady", "Steady state: the workload produced live, line by line", body)


# -- late -----------------------------------------------------------------------------------


def late(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        dropped = {a: _late_dropped(ctx.settings, a) for a in ARCHITECTURES}
        truly_late = ctx.run.workload.get("late_events")
        before = {a: ctx.sampler.views_off(a) for a in ARCHITECTURES}
        ctx.wait(
            lambda: _archived_all(ctx.settings), ctx.catch_up_timeout_s, "the archive catching up"
        )
        old = _current_version(ctx.settings, "lambda")
        # Every event is produced: the batch closes all of them, as the night's batch would.
        job = ctx.deployment.job("lambda batch", "lambda", ["batch", "--drain"], ctx.job_timeout_s)
        _require(job)
        ctx.wait(
            lambda: _current_version(ctx.settings, "lambda") != old,
            ctx.catch_up_timeout_s,
            "the speed layer's hand-off to the new batch",
        )
        handed_off = ctx.clock.now()
        after = {a: ctx.sampler.views_off(a) for a in ARCHITECTURES}
        for a in ARCHITECTURES:
            off_before, off_after = sum(before[a].values()), sum(after[a].values())
            repaired = handed_off if a == "lambda" and off_after == 0 else None
            ctx.run.late.append(
                LateData(a, dropped[a], off_before, off_after, repaired, before[a], after[a])
            )
            notes.append(
                f"{a}: {dropped[a]:,} events dropped behind its watermark (truly late in the "
                f"workload: {truly_late}); rows off {off_before:,} before Lambda's batch, "
                f"{off_after:,} after" + _per_view(after[a])
            )

    _span(ctx, "late", "Late and out-of-order data: Lambda's next batch repairs it", body)


def _per_view(views_off: dict[str, int]) -> str:
    off = [f"{view} {n:,}" for view, n in views_off.items() if n]
    return f" ({', '.join(off)})" if off else ""


def _answering(settings: Settings, architecture: str) -> bool:
    """Whether the stream `architecture`'s readers see has committed a micro-batch."""
    with connect(settings) as conn:
        live = versions.live_stream(conn, architecture)
        return live is not None and realtime.load_progress(conn, live).last_batch_id >= 0


def _archiver_running(settings: Settings) -> bool:
    with connect(settings) as conn:
        return realtime.load_progress(conn, archiver_stream("profiles")).last_batch_id >= 0


def _archived_all(settings: Settings) -> bool:
    """Whether the master dataset holds the whole log (the archiver's recorded offsets)."""
    end = log_end(settings)
    with connect(settings) as conn:
        archived = realtime.archived(conn)
    return all(archived.get(tp, 0) >= n for tp, n in end.items())


def _late_dropped(settings: Settings, architecture: str) -> int:
    answers = served(settings, architecture)
    return max(int(meta.late_dropped or 0) for _rows, meta in answers.values())


# -- version changes: logic change, bug and fix ----------------------------------------------


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


def _deploy(ctx: Context, architecture: str, logic_version: str, scenario: str) -> Deployed:
    """A new logic version through the architecture's own path (Lambda: a batch recompute,
    published by the speed layer's hand-off; Kappa: a replay and an alias switch), with a
    reader watching the served answer throughout."""
    before = served(ctx.settings, architecture)
    old_version = before["page_views"][1].view_version
    watch = _ReadersWatch(ctx.settings, architecture)
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
                lambda: _current_version(ctx.settings, architecture) != old_version,
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


class _ReadersWatch:
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


def _require(job: Job) -> None:
    if job.finished.returncode != 0:
        last = job.finished.output_tail.strip().splitlines()
        raise ComparisonError(f"{job.name} failed: {last[-1] if last else 'no output'}")


def logic_change(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        ctx.sampler.logic_version = "2"
        for architecture in ARCHITECTURES:  # one after the other: their times compare
            deployed = _deploy(ctx, architecture, "2", "logic-change")
            _require(deployed.job)
            ctx.run.reprocessing.append(deployed.result)
            notes.append(_describe(deployed.result))

    _span(ctx, "logic-change", "A logic change (version 2): batch recompute vs replay", body)


def bug_and_fix(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        intended = ctx.sampler.logic_version
        # Both at once, as one team would ship one wrong release to both: a scenario of
        # answers over time, whose timings the logic change measured in isolation.
        bugs = _on_both(lambda a: _deploy(ctx, a, "bug", "bug"))
        live = {a: d for a, d in bugs.items() if d.job.finished.returncode == 0}
        for architecture, deployed in bugs.items():
            ctx.run.reprocessing.append(deployed.result)
            if architecture not in live:
                last = deployed.job.finished.output_tail.strip().splitlines()
                notes.append(
                    f"{architecture}: the wrong version never went live "
                    f"({last[-1] if last else 'refused'})"
                )
        noticed = {
            a: ctx.wait(
                lambda a=a: ctx.sampler.rows_off(a) > 0,  # type: ignore[misc]
                ctx.catch_up_timeout_s,
                f"{a}'s wrong answers being noticed",
            )
            for a in live
        }
        fixes = _on_both(lambda a: _deploy(ctx, a, intended, "fix"), only=list(live))
        for architecture, fix in fixes.items():
            _require(fix.job)
            ctx.run.reprocessing.append(fix.result)
            wrong = WrongAnswers(
                architecture,
                "bug",
                live[architecture].live_from_s,
                fix.live_from_s,
                fix.result.seconds,
                fix.result.cpu_seconds,
            )
            ctx.run.wrong_answers.append(wrong)
            notes.append(
                f"{architecture}: wrong answers served {wrong.seconds_wrong:.0f} s (noticed "
                f"after {noticed[architecture]:.0f} s; the repair took {fix.result.seconds:.0f} "
                f"s, {fix.result.cpu_seconds:.0f} CPU-s)"
            )

    _span(ctx, "bug-and-fix", "A bug and its fix: a wrong logic version, noticed, repaired", body)


def _on_both(
    deploy: Callable[[str], Deployed], only: list[str] | None = None
) -> dict[str, Deployed]:
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


# -- compaction -----------------------------------------------------------------------------

COMPACTION_WAIT_S = 180.0


def compaction(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        settings, topic = ctx.settings, ctx.settings.profiles_topic
        before = _count(settings, topic)
        # The cleaner compacts closed segments only. A short segment.ms closes a partition's
        # segment at its next record whose timestamp is later than the segment's by more than
        # that: one new profile version per partition, stamped now (a no-op change of segment),
        # closes them all; the cleaner then keeps each user's latest version.
        configure_topic(settings, topic, {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"})
        try:
            time.sleep(2.0)  # the new configuration reaches the partitions
            resend = ctx.profiles_file.with_name("profiles-resend.jsonl")
            resend.write_bytes(_new_versions_now(settings, topic))
            produce_file(settings, resend, topic)
            ctx.extra_profiles += load_profiles_jsonl(resend)
            ctx.wait(lambda: _count(settings, topic) < before, COMPACTION_WAIT_S, "compaction")
        finally:
            configure_topic(
                settings, topic, {"segment.ms": None, "min.cleanable.dirty.ratio": None}
            )
        after = _count(settings, topic)
        replayed = _deploy(ctx, "kappa", ctx.sampler.logic_version, "compaction")
        _require(replayed.job)
        ctx.run.reprocessing.append(replayed.result)
        by_view: dict[str, dict[str, int]] = {view: {} for view in PROFILE_JOINS}
        for a in ARCHITECTURES:
            answers, oracle = served(settings, a), _full_history_oracle(ctx, a)
            for view in PROFILE_JOINS:
                by_view[view][a] = view_distance(view, answers[view][0], oracle[view]).off
        ctx.run.compaction = Compaction(
            before,
            after,
            by_view[AS_OF_JOIN],
            "Compaction keeps only each user's latest profile record. Lambda's master dataset "
            "kept every version, so its as-of join still finds the segment a user had when "
            "ordering; Kappa's replay of the compacted log cannot, and attributes old orders to "
            "the user's latest segment (or `unknown` after a tombstone). The table-table join "
            f"({TABLE_TABLE_JOIN}) needs only that latest record, which compaction keeps: "
            "a replay of the compacted log rebuilds it exactly.",
            by_view,
        )
        notes.append(f"profiles: {before:,} records before compaction, {after:,} after")
        for view in PROFILE_JOINS:
            notes.append(
                f"{view} rows differing from the full-history oracle: "
                + ", ".join(f"{a} {n:,}" for a, n in by_view[view].items())
            )

    _span(ctx, "compaction", "Compaction: both profile joins after `profiles` is compacted", body)


def _full_history_oracle(ctx: Context, architecture: str) -> dict[str, list[dict[str, Any]]]:
    """Every view from every profile version, over the events `architecture` kept: Kappa's
    late-dropped events are left out, so a difference in a profile join is compaction's alone."""
    keep = logic_filter(ctx.sampler.logic_version)
    if architecture == "kappa":
        with connect(ctx.settings) as conn:
            live = versions.live_stream(conn, "kappa")
            late = set() if live is None else state.late_event_ids(conn, live)
        keep = keep_all_of(keep, lambda e: e.event_id not in late)
    return compute_views(
        ctx.feed.lines[: ctx.feed.produced_lines],
        [*ctx.sampler.profiles, *ctx.extra_profiles],
        keep=keep,
    ).views


def _new_versions_now(settings: Settings, topic: str) -> bytes:
    """Per partition, its last user's latest profile again, stamped now: JSON lines."""
    last: dict[int, bytes] = {}
    for record in read_topic(settings, topic, timeout_s=30):
        if record.value is not None:
            last[record.partition] = record.value
    now_ms = int(time.time() * 1000)
    lines = []
    for value in last.values():
        profile = json.loads(value)
        profile["updated_ts"] = now_ms
        lines.append(json.dumps(profile).encode() + b"\n")
    return b"".join(lines)


def _count(settings: Settings, topic: str) -> int:
    return sum(1 for _ in read_topic(settings, topic, timeout_s=30))


PLAYS: dict[str, Callable[[Context], None]] = {
    "steady": steady,
    "late": late,
    "logic-change": logic_change,
    "bug-and-fix": bug_and_fix,
    "compaction": compaction,
}
