"""The comparison's scenarios, in the order a run plays them, after the warm-up.

- warm-up (always, not a scenario): deployment → each architecture's first answer.
- steady: the workload produced at a steady rate; error and freshness over time.
- late: what each watermark dropped, and Lambda's next batch repairing it.
- logic-change: logic version 2, Lambda's batch recompute against Kappa's replay.
- bug-and-fix: a deliberately wrong logic version deployed, noticed, and reprocessed.
- segment-move: a batch of users moves to a new segment in one transaction of the user table:
  commit → visible in `segment_totals`, and the as-of join keeping old orders where they were.
- compaction: both profile joins after `profiles` is compacted (CONTRACT §2, §3): the as-of
  join (`revenue_by_segment`) and the table-table join (`segment_totals`).

Each one reads the context the run built (`Context`) and adds its figures to `ctx.run`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from comparison.context import Context, current_version, span
from comparison.figures import (
    AS_OF_JOIN,
    PROFILE_JOINS,
    TABLE_TABLE_JOIN,
    WARM_UP,
    Compaction,
    LateData,
    Warmup,
)
from comparison.sampler import ARCHITECTURES, served
from comparison.segment_move import segment_move
from comparison.version_change import bug_and_fix, deploy, logic_change, require
from core.cdc.publish import publish_profiles
from core.comparison import view_distance
from core.kafka_io import log_end, read_topic
from core.oracle import load_profiles_jsonl
from core.provision import configure_topic
from core.settings import Settings
from core.store import realtime, versions
from core.store.connection import connect
from core.store.streams import archiver_stream

SCENARIOS = ("steady", "late", "logic-change", "bug-and-fix", "segment-move", "compaction")


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
    def body(notes: list[str]) -> float:
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
        caught_up = ctx.clock.now()
        # A few reads with nothing in flight: what they miss is what a stream left out.
        for _ in range(3):
            ctx.sampler.sample()
        notes.append(
            f"{lines:,} lines produced in {produced_in:.0f} s (the schedule slipped "
            f"{feed.slipped_s:.1f} s); both streams caught up {waited:.0f} s after"
        )
        for f in ctx.sampler.freshness():
            if f.p50_s is not None and f.p99_s is not None:
                notes.append(
                    f"{f.architecture}: produced → visible p50 {f.p50_s:.1f} s, p99 {f.p99_s:.1f} s"
                )
        return caught_up

    span(ctx, "steady", "Steady state: the workload produced live, line by line", body)


# -- late -----------------------------------------------------------------------------------


def late(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        dropped = {a: _late_dropped(ctx.settings, a) for a in ARCHITECTURES}
        truly_late = ctx.run.workload.get("late_events")
        before = {a: ctx.sampler.views_off(a) for a in ARCHITECTURES}
        ctx.wait(
            lambda: _archived_all(ctx.settings), ctx.catch_up_timeout_s, "the archive catching up"
        )
        old = current_version(ctx.settings, "lambda")
        # Every event is produced: the batch closes all of them, as the night's batch would.
        job = ctx.deployment.job("lambda batch", "lambda", ["batch", "--drain"], ctx.job_timeout_s)
        require(job)
        ctx.wait(
            lambda: current_version(ctx.settings, "lambda") != old,
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

    span(ctx, "late", "Late and out-of-order data: Lambda's next batch repairs it", body)


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
            publish_profiles(settings, resend)
            ctx.extra_profiles += load_profiles_jsonl(resend)
            ctx.wait(lambda: _count(settings, topic) < before, COMPACTION_WAIT_S, "compaction")
        finally:
            configure_topic(
                settings, topic, {"segment.ms": None, "min.cleanable.dirty.ratio": None}
            )
        after = _count(settings, topic)
        replayed = deploy(ctx, "kappa", ctx.sampler.logic_version, "compaction")
        require(replayed.job)
        ctx.run.reprocessing.append(replayed.result)
        by_view: dict[str, dict[str, int]] = {view: {} for view in PROFILE_JOINS}
        for a in ARCHITECTURES:
            answers, oracle = served(settings, a), ctx.full_history_oracle(a)
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

    span(ctx, "compaction", "Compaction: both profile joins after `profiles` is compacted", body)


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
    "segment-move": segment_move,
    "compaction": compaction,
}
