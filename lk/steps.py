"""The steps the Airflow DAGs run, by name: one registry for every way of running them.

    lk step compute-views logic_version=2       # a terminal, or a KubernetesPodOperator's pod
    run_step("compute-views", {...}, settings, spark)   # a local Airflow task (dags/lk_dags)

Each step wraps one function of the layers (`batch_layer.steps`, `speed_layer.kappa`,
`core.quality`) and returns plain JSON (the task's XCom), so a step gives the same answer
whether Airflow runs it in its own process or in a pod. Arguments arrive as text (a command
line, a rendered Jinja template): each is read as JSON when it parses (``3``, ``null``,
``[["2026-11-01", 9]]``), else as the string itself (``2026-11-01``).

Every step is safe to run again: archiving and stream rounds resume from their checkpoints,
validations only record results, publishing a published version and switching to the alias's
own version change nothing, and retiring finds what is left to retire in the store.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from core.catalog import DEFAULT_LOGIC_VERSION, check_logic_version
from core.settings import Architecture, Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from core.store.versions import Version
    from speed_layer.kappa import Reprocess

SparkProvider = Callable[[], "SparkSession"]
Json = Any
"""What a step returns: JSON-serialisable (None, numbers, strings, lists, dicts)."""

KAPPA = "kappa"


class StepError(RuntimeError):
    """A step was called wrongly (unknown step, missing or bad argument)."""


class StepArgs:
    """A step's arguments, read as JSON where they parse, else as plain text."""

    def __init__(self, step: str, raw: Mapping[str, Any], accepted: tuple[str, ...]) -> None:
        unknown = sorted(set(raw) - set(accepted))
        if unknown:
            known = ", ".join(accepted) or "none"
            raise StepError(f"{step}: unknown argument {', '.join(unknown)} (accepted: {known})")
        self.step = step
        self.values = {k: _decode(v) for k, v in raw.items()}

    def optional(self, name: str) -> Any:
        return self.values.get(name)

    def required(self, name: str) -> Any:
        value = self.values.get(name)
        if value is None:
            raise StepError(f"{self.step}: argument {name} is required")
        return value

    def integer(self, name: str) -> int:
        value = self.required(name)
        try:
            return int(value)
        except (TypeError, ValueError) as exc:
            raise StepError(f"{self.step}: {name} must be an integer, got {value!r}") from exc

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.values.get(name)
        return default if value is None or value == "" else str(value)

    def day(self, name: str) -> date | None:
        value = self.text(name)
        if value is None:
            return None
        try:
            return date.fromisoformat(value[:10])
        except ValueError as exc:
            raise StepError(
                f"{self.step}: {name} must be a date (YYYY-MM-DD), got {value!r}"
            ) from exc


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


@dataclass(frozen=True)
class Step:
    name: str
    summary: str
    needs_spark: bool
    """False: the step reads and writes Postgres (or Great Expectations' files) only, so it
    runs without a Spark session, in the Airflow worker whatever the backend."""
    accepts: tuple[str, ...]
    run: Callable[[Settings, SparkProvider, StepArgs], Json]


def _plain(result: Any) -> Json:
    """A step's result as JSON values (dataclasses such as QualityResult become dicts)."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return _plain(dataclasses.asdict(result))
    if isinstance(result, Mapping):
        return {str(k): _plain(v) for k, v in result.items()}
    if isinstance(result, list | tuple):
        return [_plain(v) for v in result]
    if isinstance(result, datetime | date):
        return result.isoformat()
    return result


# -- Lambda ------------------------------------------------------------------------------------


def _close_archive(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from batch_layer.steps import close_archive

    return [[day, hour] for day, hour in close_archive(spark(), settings)]


def _partitions_in_range(
    spark: SparkSession, settings: Settings, since: date | None, until: date | None
) -> list[tuple[str, int]]:
    """The master dataset's (date, hour) partitions with a date in [since, until]; an open end
    reaches the first or last partition. The dates are those the records reached the log (their
    Kafka timestamp), read from Delta's file list: nothing is parsed or scanned."""
    from batch_layer.inputs import partitions_of
    from batch_layer.job import read_master_events
    from core.master_dataset import MasterDataset

    if since is not None and until is not None and until < since:
        raise StepError(f"validate-raw: until ({until}) is before since ({since})")
    events = read_master_events(spark, MasterDataset.from_settings(settings))
    found = partitions_of(set(events.inputFiles()))
    return sorted(
        (day, hour)
        for day, hour in found
        if (since is None or day >= since.isoformat())
        and (until is None or day <= until.isoformat())
    )


def _validate_raw(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    """The gate's result, and by default `snapshot`: the master events' Delta version it
    checked, for `compute-views` to read (None when partitions were given or nothing is
    archived)."""
    from batch_layer.steps import open_input, validate_raw

    listed = args.optional("partitions")
    partitions: list[tuple[str, int]] | None = None
    if listed is not None:
        partitions = [(str(day), int(hour)) for day, hour in listed]
    elif "since" in args.values or "until" in args.values:
        # A date range, even open at both ends (every partition): a reprocess re-validates it.
        partitions = _partitions_in_range(spark(), settings, args.day("since"), args.day("until"))
    run_name = args.text("run_name", "manual") or "manual"
    pinned = None if partitions is not None else open_input(spark(), settings)
    result = validate_raw(spark(), settings, run_name, partitions=partitions, batch_input=pinned)
    return {**_plain(result), "snapshot": None if pinned is None else pinned.snapshot}


def _end_of(until: date) -> int:
    """The end of `until` (midnight after it, UTC) in epoch ms: a reprocess's cutoff, which
    `compute` caps at what the archive closes (a later cutoff would publish windows whose
    events are not all archived yet) and keeps after the published batch's cutoff (the speed
    layer holds only the events after it)."""
    end = datetime.combine(until + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    return int(end.timestamp() * 1000)


def _compute_views(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from batch_layer.steps import compute_views
    from core.timefmt import parse_iso

    cutoff = args.text("cutoff")
    until = args.day("until")
    logic = args.text("logic_version")
    if cutoff is not None and until is not None:
        raise StepError("compute-views: give cutoff or until, not both")
    cutoff_ms = parse_iso(cutoff) if cutoff is not None else None
    until_ms = _end_of(until) if until is not None else None
    if logic is not None:
        check_logic_version(logic)
    snapshot = args.optional("snapshot")
    return compute_views(
        spark(),
        settings,
        cutoff_ms=cutoff_ms,
        logic_version=logic,
        until_ms=until_ms,
        snapshot=None if snapshot is None else args.integer("snapshot"),
    )


def _validate_views(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from batch_layer.steps import validate_views

    run_name = args.text("run_name", "manual") or "manual"
    return _plain(validate_views(spark(), settings, args.integer("version"), run_name))


def _publish(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from batch_layer.steps import publish

    return publish(spark(), settings, args.integer("version"))


# -- Kappa -------------------------------------------------------------------------------------


class _NoSpark:
    """Stands in for the session of a step declared without Spark: touching it is a bug."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"a step declared without Spark used the Spark session ({name})")


def _reprocess(settings: Settings, spark: SparkProvider | None) -> Reprocess:
    from speed_layer.kappa import Reprocess

    session = spark() if spark is not None else cast("SparkSession", _NoSpark())
    return Reprocess(session, settings)


def _kappa_version(settings: Settings, number: int) -> Version:
    from core.store import versions
    from core.store.connection import connect

    with connect(settings) as conn:
        found = versions.get(conn, KAPPA, number)
    if found is None:
        raise StepError(f"there is no Kappa version {number}")
    return found


def _kappa_start(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    logic = args.text("logic_version", DEFAULT_LOGIC_VERSION) or DEFAULT_LOGIC_VERSION
    check_logic_version(logic)
    # Spark only to discard a build of another logic version (its state and checkpoint on
    # MinIO): most starts find none and spare the session's start-up.
    return (
        _reprocess(settings, spark if _superseded(settings, logic) else None).start(logic).version
    )


def _superseded(settings: Settings, logic: str) -> bool:
    from core.store import versions
    from core.store.connection import connect
    from core.store.schema import create_all

    with connect(settings) as conn:
        create_all(conn)
        return any(v.logic_version != logic for v in versions.building(conn, KAPPA))


def _log_end(settings: Settings) -> dict[str, int]:
    from core.kafka_io import end_offsets

    ends = {}
    for topic in (settings.events_topic, settings.profiles_topic):
        for partition, (_low, high) in end_offsets(settings, topic).items():
            ends[f"{topic}/{partition}"] = high
    return ends


def _consumed(progress: list[Any]) -> dict[str, int]:
    """The offsets the round's last micro-batch read up to, per topic/partition."""
    consumed: dict[str, int] = {}
    for entry in progress:
        for source in _as_dict(entry).get("sources", []):
            end = source.get("endOffset")
            end = json.loads(end) if isinstance(end, str) else end
            for topic, partitions in (end or {}).items():
                for partition, offset in partitions.items():
                    consumed[f"{topic}/{partition}"] = int(offset)
    return consumed


def _as_dict(progress: Any) -> dict[str, Any]:
    if isinstance(progress, dict):
        return progress
    return cast("dict[str, Any]", json.loads(progress.json))


def _watermark_gap(settings: Settings, version: int) -> int | None:
    """How far `version`'s watermark trails the live version's (None: nothing to trail)."""
    from core.store import realtime, versions
    from core.store.connection import connect
    from core.store.streams import kappa_stream

    with connect(settings) as conn:
        live = versions.current(conn, KAPPA)
        if live is None or live.version == version:
            return None
        ours = realtime.load_progress(conn, kappa_stream(version)).watermark_ms
        theirs = realtime.load_progress(conn, kappa_stream(live.version)).watermark_ms
    if theirs is None:
        return None
    return theirs - (ours if ours is not None else 0)


def _kappa_replay_round(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    """One bounded replay round (what the log holds now, `availableNow`), then the lag per
    partition and the watermark gap: what the DAG's sensor decides on."""
    from speed_layer.kappa import ReprocessError

    version = _kappa_version(settings, args.integer("version"))
    before = _log_end(settings)
    engine = _reprocess(settings, spark).views.engine(version)
    query = engine.start(available_now=True)
    query.awaitTermination()
    if query.exception() is not None:
        raise ReprocessError(f"kappa-v{version.version} failed: {query.exception()}")
    # availableNow reads up to the log end at its start; the progress says exactly where.
    consumed = {**before, **_consumed(list(query.recentProgress))}
    after = _log_end(settings)
    lag = {tp: max(0, end - consumed.get(tp, 0)) for tp, end in sorted(after.items())}
    gap = _watermark_gap(settings, version.version)
    lag_records = sum(lag.values())
    # Caught up: no partition more than LK_KAPPA_CATCHUP_MAX_LAG records behind the log end,
    # and the watermark within LK_KAPPA_CATCHUP_WATERMARK_SLACK_S of the live version's.
    caught_up = max(lag.values(), default=0) <= settings.kappa_catchup_max_lag and (
        gap is None or gap <= settings.kappa_catchup_watermark_slack_s * 1000
    )
    return {
        "version": version.version,
        "micro_batches": len([o for o in engine.outcomes if not o.skipped]),
        "lag": {tp: n for tp, n in lag.items() if n},
        "lag_records": lag_records,
        "watermark_gap_ms": gap,
        "caught_up": caught_up,
    }


def _kappa_check(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    version = _kappa_version(settings, args.integer("version"))
    return _reprocess(settings, None).check(version)


def _kappa_switch(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    version = _kappa_version(settings, args.integer("version"))
    return _reprocess(settings, None).switch(version)


def _left_behind(settings: Settings) -> list[int]:
    """Kappa versions the alias has left (`retired`) whose output is still in the store."""
    from core.store.connection import connect

    with connect(settings) as conn:
        rows = conn.execute(
            "select v.version from view_versions v join stream_progress p "
            "on p.stream = %s || v.version::text "
            "where v.architecture = %s and v.status = 'retired' order by v.version",
            ("kappa-v", KAPPA),
        ).fetchall()
    return [int(row[0]) for row in rows]


def _kappa_retire(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    # From the store rather than the switch's answer: a retried switch answers "nothing
    # replaced" (the alias already points at the new version), yet the old one is still there.
    old = _left_behind(settings)
    if old:
        reprocess = _reprocess(settings, spark)
        for version in old:
            reprocess.retire(version)
    return old


# -- Data quality ------------------------------------------------------------------------------


def _dq_realtime(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from core.quality.checks import raise_on_failure
    from serving.quality import validate_realtime

    architecture = args.text("architecture") or ""
    if architecture not in (Architecture.LAMBDA, Architecture.KAPPA):
        raise StepError(f"dq-realtime: architecture must be lambda or kappa, got {architecture!r}")
    run_name = args.text("run_name", "manual") or "manual"
    results = validate_realtime(settings, architecture, run_name)
    raise_on_failure(results)  # recorded either way: Data Docs show the failure
    return _plain(results)


def _dq_reconcile(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from core.quality.checks import raise_on_failure
    from serving.quality import run_reconciliation

    run_name = args.text("run_name", "manual") or "manual"
    result = run_reconciliation(settings, run_name, spark=spark())
    if result is not None:
        raise_on_failure([result])
    return _plain(result)


def _dq_docs(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from core.quality import publish_docs

    return publish_docs(settings)


STEPS: dict[str, Step] = {
    step.name: step
    for step in (
        Step(
            "close-archive",
            "Lambda: archive what the log holds now; the new (date, hour) partitions",
            True,
            (),
            _close_archive,
        ),
        Step(
            "validate-raw",
            "Lambda: the raw-events suites on master partitions (a list, a date range) or, by "
            "default, on what the next batch adds; stops at the gate on failure",
            True,
            ("partitions", "since", "until", "run_name"),
            _validate_raw,
        ),
        Step(
            "compute-views",
            "Lambda: a new batch version (not published), up to a cutoff (ISO), the end of a "
            "day (until), or what the archive closes; from the master dataset's snapshot the "
            "raw gate checked (snapshot), else its latest",
            True,
            ("cutoff", "until", "logic_version", "snapshot"),
            _compute_views,
        ),
        Step(
            "validate-views",
            "Lambda: the batch-view suites on a version; a failure marks it failed",
            True,
            ("version", "run_name"),
            _validate_views,
        ),
        Step("publish", "Lambda: hand a checked version to readers", True, ("version",), _publish),
        Step(
            "kappa-start",
            "Kappa: a new version to replay into (or the unfinished one of the same logic)",
            True,
            ("logic_version",),
            _kappa_start,
        ),
        Step(
            "kappa-replay-round",
            "Kappa: replay what the log holds now into a version; its lag and watermark gap",
            True,
            ("version",),
            _kappa_replay_round,
        ),
        Step(
            "kappa-check",
            "Kappa: check a caught-up version before anyone reads it",
            False,
            ("version",),
            _kappa_check,
        ),
        Step(
            "kappa-switch",
            "Kappa: move readers to a version in one transaction",
            False,
            ("version",),
            _kappa_switch,
        ),
        Step(
            "kappa-retire",
            "Kappa: drop the rows, state and checkpoint of versions readers left",
            True,
            (),
            _kappa_retire,
        ),
        Step(
            "dq-realtime",
            "Data quality: the real-time view suites of one architecture",
            False,
            ("architecture", "run_name"),
            _dq_realtime,
        ),
        Step(
            "dq-reconcile",
            "Data quality: Lambda vs Kappa vs the oracle on windows both have closed",
            True,
            ("run_name",),
            _dq_reconcile,
        ),
        Step("dq-docs", "Data quality: build Data Docs and publish them", False, (), _dq_docs),
    )
}


def get_step(name: str) -> Step:
    try:
        return STEPS[name]
    except KeyError:
        raise StepError(f"unknown step {name!r}; known: {', '.join(STEPS)}") from None


def run_step(name: str, args: Mapping[str, Any], settings: Settings, spark: SparkProvider) -> Json:
    """Run step `name` with `args`; `spark` is called only by steps that need a session."""
    step = get_step(name)
    return _plain(step.run(settings, spark, StepArgs(name, args, step.accepts)))
