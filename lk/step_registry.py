"""The steps the Airflow DAGs run, by name: one registry for every way of running them.

    lk step compute-views logic_version=2       # a terminal, or a KubernetesPodOperator's pod
    run_step("compute-views", {...}, settings, spark)   # a local Airflow task (dags/lk_dags)

Each step reads its arguments and calls one function of a layer (`batch_layer.pipeline`,
`kappa.reprocess`, `quality`, `serving.quality`, or `lk.pipelines` where two layers meet); the
rules (cutoffs, when a replay has caught up) live with those functions, never here. A step
returns plain JSON (the task's XCom), so it gives the same answer
whether Airflow runs it in its own process or in a pod. Arguments arrive as text (a command
line, a rendered Jinja template): each is read as JSON when it parses (``3``, ``null``,
``[["2026-11-01", 9]]``), else as the string itself (``2026-11-01``).

A step with nothing to do (a batch with nothing new to compute: `batch_layer.errors.
NothingNewError`) raises `NothingToDo`: the task skips rather than fails, in the worker (the
`local` backend) and in a pod (`lk step` exits with `SKIP_EXIT_CODE`, which the Kubernetes
backend's operator turns into a skip).

Every step is safe to run again: archiving and stream rounds resume from their checkpoints,
validations only record results, publishing a published version and switching to the alias's
own version change nothing, and retiring finds what is left to retire in the store.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Final, cast

from batch_layer.cutoff import until_cutoff
from batch_layer.errors import NothingNewError
from core.catalog import DEFAULT_LOGIC_VERSION, check_logic_version
from core.settings import Architecture, Settings
from core.store import step_runs
from core.store.connection import connect
from core.times import parse_iso
from lk.pipelines import publish_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from core.store.versions import Version
    from kappa.reprocess import Reprocess

log = logging.getLogger(__name__)

SparkProvider = Callable[[], "SparkSession"]
Json = Any
"""What a step returns: JSON-serialisable (None, numbers, strings, lists, dicts)."""


class StepError(RuntimeError):
    """A step was called wrongly (unknown step, missing or bad argument)."""


class NothingToDo(Exception):  # noqa: N818 - not an error: the task skips
    """The step found nothing to do; its one-line reason. Not a failure: the task skips."""


SKIP_EXIT_CODE: Final = 99
"""`lk step`'s exit code for `NothingToDo` (BashOperator's default `skip_on_exit_code` too)."""


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
    from batch_layer.pipeline import close_archive  # deferred: pyspark

    return [[day, hour] for day, hour in close_archive(spark(), settings)]


def _validate_raw(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    """The gate's result, and by default `snapshot`: the master events' Delta version it
    checked, for `compute-views` to read (None when partitions were given or nothing is
    archived)."""
    from batch_layer.pipeline import (  # deferred: pyspark
        open_input,
        partitions_between,
        validate_raw,
    )

    listed = args.optional("partitions")
    partitions: list[tuple[str, int]] | None = None
    if listed is not None:
        partitions = [(str(day), int(hour)) for day, hour in listed]
    elif "since" in args.values or "until" in args.values:
        # A date range, even open at both ends (every partition): a reprocess re-validates it.
        partitions = partitions_between(spark(), settings, args.day("since"), args.day("until"))
    run_name = args.text("run_name", "manual") or "manual"
    pinned = None if partitions is not None else open_input(spark(), settings)
    result = validate_raw(spark(), settings, run_name, partitions=partitions, batch_input=pinned)
    return {**_plain(result), "snapshot": None if pinned is None else pinned.snapshot}


def _compute_views(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from batch_layer.pipeline import compute_views  # deferred: pyspark

    cutoff = args.text("cutoff")
    until = args.day("until")
    logic = args.text("logic_version")
    if cutoff is not None and until is not None:
        raise StepError("compute-views: give cutoff or until, not both")
    cutoff_ms = parse_iso(cutoff) if cutoff is not None else None
    until_ms = until_cutoff(until) if until is not None else None
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
    from batch_layer.pipeline import validate_views  # deferred: pyspark

    run_name = args.text("run_name", "manual") or "manual"
    return _plain(validate_views(spark(), settings, args.integer("version"), run_name))


def _publish(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    return publish_batch(settings, args.integer("version"))


# -- Kappa -------------------------------------------------------------------------------------


class _NoSpark:
    """Stands in for the session of a step declared without Spark: touching it is a bug."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"a step declared without Spark used the Spark session ({name})")


def _reprocess(settings: Settings, spark: SparkProvider | None) -> Reprocess:
    from kappa.reprocess import Reprocess  # deferred: pyspark

    session = spark() if spark is not None else cast("SparkSession", _NoSpark())
    return Reprocess(session, settings)


def _kappa_version(settings: Settings, args: StepArgs) -> Version:
    from kappa.reprocess import find_version  # deferred: pyspark

    return find_version(settings, args.integer("version"))


def _kappa_start(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from kappa.reprocess import has_superseded_build  # deferred: pyspark

    logic = args.text("logic_version", DEFAULT_LOGIC_VERSION) or DEFAULT_LOGIC_VERSION
    check_logic_version(logic)
    # Spark only to discard a build of another logic version: most starts spare the session.
    needs_spark = has_superseded_build(settings, logic)
    return _reprocess(settings, spark if needs_spark else None).start(logic).version


def _kappa_replay_round(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    version = _kappa_version(settings, args)
    replayed = _reprocess(settings, spark).replay_round(version)
    return {**_plain(replayed), "lag_records": replayed.lag_records}


def _kappa_check(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    return _reprocess(settings, None).check(_kappa_version(settings, args))


def _kappa_switch(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    # Spark: a version found behind the live one replays one more round before the switch.
    return _reprocess(settings, spark).switch(_kappa_version(settings, args))


def _kappa_retire(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from kappa.reprocess import left_behind  # deferred: pyspark

    old = left_behind(settings)
    if old:
        reprocess = _reprocess(settings, spark)
        for version in old:
            reprocess.retire(version)
    return old


# -- Data quality ------------------------------------------------------------------------------


def _dq_realtime(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from quality.checks import raise_on_failure  # deferred: pandas
    from serving.quality import validate_realtime  # deferred: pandas

    architecture = args.text("architecture") or ""
    if architecture not in (Architecture.LAMBDA, Architecture.KAPPA):
        raise StepError(f"dq-realtime: architecture must be lambda or kappa, got {architecture!r}")
    run_name = args.text("run_name", "manual") or "manual"
    results = validate_realtime(settings, architecture, run_name)
    raise_on_failure(results)  # recorded either way: Data Docs show the failure
    return _plain(results)


def _dq_reconcile(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from quality.checks import raise_on_failure  # deferred: pandas
    from serving.quality import run_reconciliation  # deferred: pandas

    run_name = args.text("run_name", "manual") or "manual"
    result = run_reconciliation(settings, run_name, spark=spark())
    if result is not None:
        raise_on_failure([result])
    return _plain(result)


def _dq_docs(settings: Settings, spark: SparkProvider, args: StepArgs) -> Json:
    from quality import publish_docs  # deferred: pandas

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
        Step("publish", "Lambda: hand a checked version to readers", False, ("version",), _publish),
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
            True,
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
    """Run step `name` with `args`; `spark` is called only by steps that need a session.
    Raises `NothingToDo` when the step has nothing to do (a skip, recorded as a success).

    Its duration is recorded in the store (`core.store.step_runs`), where the serving API's
    `/metrics` finds it after this process or pod has ended."""
    step = get_step(name)
    step_args = StepArgs(name, args, step.accepts)
    started = time.monotonic()
    success = False
    try:
        result = _plain(step.run(settings, spark, step_args))
        success = True
        return result
    except NothingNewError as exc:
        success = True
        raise NothingToDo(f"nothing new to compute: {' '.join(str(exc).split())}") from exc
    finally:
        _record_run(settings, name, time.monotonic() - started, success=success)


def _record_run(settings: Settings, step: str, seconds: float, *, success: bool) -> None:
    """Best effort: a metric lost is no reason to fail (or mask the failure of) the step."""
    try:
        with connect(settings) as conn:
            step_runs.record(conn, step, seconds, success=success)
    except Exception as exc:  # the store down, an old schema: the step's outcome stands
        log.warning("step %s: its run (%.1f s) was not recorded: %s", step, seconds, exc)
