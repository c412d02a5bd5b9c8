"""What a comparison run measured: every figure of the report, as data.

`lk compare` (and `lk demo`) fill a `ComparisonRun` while both architectures run one workload;
`comparison.report` draws it, and it is written as JSON beside the report so that every number
in a figure can be checked, or plotted again, without the HTML. Times are seconds since the
run started; byte and CPU figures are measured, never estimated.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 5
"""5: a batch of users moved to a new segment in the database (`SegmentMove`); 4: when the
steady state had caught up (`ScenarioSpan.caught_up_s`), when each wrong version was noticed
(`WrongAnswers.noticed_s`); 3: compaction reports both profile joins
(`Compaction.rows_differing_by_view`), late data its rows off per view; 2: freshness per event
line (1: per produced chunk); the warm-up, the sweep, truly late. An older run reads back with
the new fields empty."""
AS_OF_JOIN = "revenue_by_segment"
"""The stream-table join, as of event time: it needs every profile version (CONTRACT §3)."""
TABLE_TABLE_JOIN = "segment_totals"
"""The table-table join with each user's current profile: the record compaction keeps."""
PROFILE_JOINS = (AS_OF_JOIN, TABLE_TABLE_JOIN)
"""The views that join with `profiles`, whose rows compaction can move (CONTRACT §2)."""
WARM_UP = "warm-up"
"""The scenario of the samples taken before the first one: deployment → first answer."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One architecture's served answer for one view, against the oracle over what was produced
    when it was read."""

    t_s: float
    scenario: str
    architecture: str
    view: str
    produced: int
    """Event lines produced to the log when the answer was read (the oracle's input)."""
    expected_rows: int
    rows_off: int
    """Rows missing, extra or differing (`core.comparison.ViewDistance.off`)."""
    version: int | None
    """The view version the answer came from (`meta.view_version`); None when unanswered."""
    status: int = 200
    """The API's HTTP status: a 503 while a store is down is a gap, not an error."""

    @property
    def share_off(self) -> float:
        return self.rows_off / max(self.expected_rows, 1)


@dataclass(frozen=True, slots=True)
class ScenarioSpan:
    name: str
    """`steady`, `late`, `logic-change`, `bug-and-fix`, `compaction`."""
    title: str
    started_s: float
    ended_s: float
    notes: list[str] = field(default_factory=list)
    caught_up_s: float | None = None
    """The steady state's: when both streams had caught up with every line produced. Reads
    before it count events in flight; reads after it, what a stream left out (late events)."""


@dataclass(frozen=True, slots=True)
class Warmup:
    """Deployment → first answer: from starting an architecture's processes to its stream's
    first committed micro-batch, when the API first answers from its view version."""

    architecture: str
    deployed_at_s: float
    first_answer_s: float

    @property
    def seconds(self) -> float:
        return self.first_answer_s - self.deployed_at_s


@dataclass(frozen=True, slots=True)
class Freshness:
    """Produced → visible in the serving store, one value per produced event line (from its
    hand-over to the producer to the poll that found its offset committed by the stream). The
    percentiles are kept beside the lags so that the JSON states them; `of` derives them."""

    architecture: str
    lags_s: list[float]
    p50_s: float | None
    p99_s: float | None

    @classmethod
    def of(cls, architecture: str, lags_s: list[float]) -> Freshness:
        return cls(architecture, lags_s, percentile(lags_s, 50), percentile(lags_s, 99))


def percentile(values: Sequence[float], q: int) -> float | None:
    """The `q`-th percentile (inclusive method); None without values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def all_seen_percentile(times: Sequence[float | None], q: int) -> float | None:
    """The `q`-th percentile of times that were all measured; None when one was not (a move
    not seen within its timeout) or there are none."""
    if not times or None in times:
        return None
    return percentile([t for t in times if t is not None], q)


@dataclass(frozen=True, slots=True)
class LateData:
    architecture: str
    late_dropped: int
    """Events its stream path dropped behind its watermark (`meta.late_dropped`), at most the
    workload's truly late events (`ComparisonRun.workload["late_events"]`)."""
    rows_off_before_batch: int
    rows_off_after_batch: int
    repaired_at_s: float | None
    """When its answer became exact again (Lambda: the next batch's hand-off); None: never."""
    views_off_before_batch: dict[str, int] = field(default_factory=dict)
    """Per view, the rows of `rows_off_before_batch` (empty in a run of schema 2)."""
    views_off_after_batch: dict[str, int] = field(default_factory=dict)
    """Per view, the rows of `rows_off_after_batch` (empty in a run of schema 2)."""


@dataclass(frozen=True, slots=True)
class ReadersView:
    """What readers saw while a new version was built and switched to."""

    reads: int
    versions_seen: list[int]
    gaps: int
    """Reads that got no answer (an error status or no rows where rows were due)."""
    mixed: int
    """Reads whose rows matched neither the old version's answer nor the new one's."""


@dataclass(frozen=True, slots=True)
class Reprocessing:
    scenario: str
    architecture: str
    logic_version: str
    how: str
    """`batch recompute` (Lambda) or `replay` (Kappa)."""
    seconds: float
    """From the start of the job to the moment readers were switched to its answer."""
    cpu_seconds: float
    peak_rss_bytes: int
    readers: ReadersView


@dataclass(frozen=True, slots=True)
class WrongAnswers:
    """A deliberately wrong logic version deployed, noticed and reprocessed."""

    architecture: str
    wrong_logic_version: str
    wrong_from_s: float
    wrong_until_s: float
    repair_seconds: float
    repair_cpu_seconds: float
    noticed_s: float | None = None
    """From `wrong_from_s` to the first sample whose answer differed from the oracle's: how soon
    a check against the intended logic could have seen it (None in a run of schema 3)."""

    @property
    def seconds_wrong(self) -> float:
        return self.wrong_until_s - self.wrong_from_s


@dataclass(frozen=True, slots=True)
class Compaction:
    """Both profile joins after `profiles` was compacted (CONTRACT §2, §3): the as-of join
    (`revenue_by_segment`) and the table-table join (`segment_totals`)."""

    profile_records_before: int
    profile_records_after: int
    rows_differing: dict[str, int]
    """Per architecture: `revenue_by_segment` rows that differ from the full-history oracle (the
    as-of join's; kept as schema 2 named it, and equal to its entry in the field below)."""
    explanation: str
    rows_differing_by_view: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per join view (`PROFILE_JOINS`), per architecture: rows missing, extra or differing from
    the full-history oracle. Empty in a run of schema 2, which measured the as-of join only."""

    def by_view(self) -> dict[str, dict[str, int]]:
        """Per join view, per architecture, the rows differing that the run measured: the as-of
        join always (from `rows_differing` in a run of schema 2), the table-table join when it
        was measured."""
        return {AS_OF_JOIN: self.rows_differing, **self.rows_differing_by_view}


@dataclass(frozen=True, slots=True)
class SegmentMove:
    """A batch of users moved to a segment of their own in one transaction of the user table
    (`through` "database", captured by change data capture; "topic" where no Kafka Connect
    runs, produced in one batch instead), and what each profile join made of it."""

    users: int
    segment: str
    through: str
    visible_s: dict[str, float | None]
    """Per architecture: from the commit to `segment_totals` counting every moved user in the
    new segment, as the serving layer reads it, the median over the moves (None: a move not
    seen within the scenario's timeout). The other fields are of the last move."""
    expected_moved_cents: dict[str, int]
    """Per architecture: the moved users' revenue, every order of theirs, by the oracle over the
    events it kept (Kappa's without those its watermark dropped): what `segment_totals` moves."""
    served_moved_cents: dict[str, int]
    """Per architecture: the new segment's `segment_totals` revenue as served."""
    as_of_new_segment_cents: dict[str, int]
    """Per architecture: `revenue_by_segment` revenue in the new segment as served: orders
    placed after the change only, 0 when there were none (the as-of join keeps old orders
    with the segment their user had then)."""
    each_visible_s: dict[str, list[float | None]] = field(default_factory=dict)
    """Per architecture, each move's commit to visible (`lk compare --moves`, one by default;
    empty in a run from before moves were counted); `visible_s` is their median."""

    def percentiles(self, architecture: str) -> tuple[float | None, float | None]:
        """p50 and p99 of `architecture`'s moves, None where a move was not seen in time."""
        each = self.each_visible_s.get(architecture, [])
        return all_seen_percentile(each, 50), all_seen_percentile(each, 99)


@dataclass(frozen=True, slots=True)
class ComponentCost:
    component: str
    architecture: str
    """`lambda`, `kappa`, or `shared` (the log, the store, the API)."""
    cpu_seconds: float
    peak_rss_bytes: int


@dataclass(frozen=True, slots=True)
class StoredBytes:
    architecture: str
    what: str
    """`master dataset`, `batch views`, `retained log`, `view versions`, ..."""
    bytes: int


@dataclass(frozen=True, slots=True)
class ChartWeight:
    """What the chart deploys for one mode (`helm template`)."""

    mode: str
    objects: int
    by_kind: dict[str, int]
    cpu_requests_millicores: int
    memory_requests_bytes: int


@dataclass(frozen=True, slots=True)
class CodeSize:
    """Lines of code, from the tree: shared by both architectures, or specific to one."""

    shared: int
    lambda_only: int
    kappa_only: int
    by_room: dict[str, dict[str, str | int]]
    """room → {"part": shared|lambda|kappa|tooling|unclassified, "lines": n}."""


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One reprocessing of a history of `events` events, from `make bench`'s sweep."""

    architecture: str
    events: int
    seconds: float
    """From the start to readers switched to the new version."""
    cpu_seconds: float | None = None
    peak_rss_bytes: int | None = None

    @property
    def cores(self) -> float | None:
        """The cores its drivers kept busy on average (CPU-seconds over seconds)."""
        if self.cpu_seconds is None or self.seconds <= 0:
            return None
        return self.cpu_seconds / self.seconds


@dataclass(frozen=True, slots=True)
class Sweep:
    """Lambda's batch recompute and Kappa's replay over histories of growing size
    (`docs/bench/sweep-<date>.json`), drawn beside the run's own reprocessing."""

    date: str
    machine: dict[str, Any]
    """cpus, memory_gib, kind: where the sweep was measured."""
    points: list[SweepPoint]
    source: str = ""
    """The file it was read from (its name)."""


@dataclass(slots=True)
class ComparisonRun:
    created_at: str
    workload: dict[str, Any]
    """seed, events, rate_per_s, duration_s, late_events (truly late: behind their partition's
    watermark when every record is a micro-batch of its own), event_time_span_s,
    produced_in_s, ..."""
    scenarios: list[ScenarioSpan] = field(default_factory=list)
    warmup: list[Warmup] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    freshness: list[Freshness] = field(default_factory=list)
    late: list[LateData] = field(default_factory=list)
    reprocessing: list[Reprocessing] = field(default_factory=list)
    wrong_answers: list[WrongAnswers] = field(default_factory=list)
    compaction: Compaction | None = None
    segment_move: SegmentMove | None = None
    cost: list[ComponentCost] = field(default_factory=list)
    stored: list[StoredBytes] = field(default_factory=list)
    chart_weight: list[ChartWeight] = field(default_factory=list)
    code: CodeSize | None = None
    sweep: Sweep | None = None
    """The latest cost sweep over history sizes, if one was committed when the run started."""
    log_file: str | None = None
    schema: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")
        return path

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ComparisonRun:
        reprocessing = [
            Reprocessing(**{**r, "readers": ReadersView(**r["readers"])})
            for r in data.get("reprocessing", [])
        ]
        compaction = data.get("compaction")
        segment_move = data.get("segment_move")
        code = data.get("code")
        sweep = data.get("sweep")
        return cls(
            created_at=data["created_at"],
            workload=data["workload"],
            scenarios=[ScenarioSpan(**s) for s in data.get("scenarios", [])],
            warmup=[Warmup(**w) for w in data.get("warmup", [])],
            samples=[Sample(**s) for s in data.get("samples", [])],
            freshness=[Freshness(**f) for f in data.get("freshness", [])],
            late=[LateData(**x) for x in data.get("late", [])],
            reprocessing=reprocessing,
            wrong_answers=[WrongAnswers(**w) for w in data.get("wrong_answers", [])],
            compaction=None if compaction is None else Compaction(**compaction),
            segment_move=None if segment_move is None else SegmentMove(**segment_move),
            cost=[ComponentCost(**c) for c in data.get("cost", [])],
            stored=[StoredBytes(**s) for s in data.get("stored", [])],
            chart_weight=[ChartWeight(**c) for c in data.get("chart_weight", [])],
            code=None if code is None else CodeSize(**code),
            sweep=None if sweep is None else read_sweep(sweep),
            log_file=data.get("log_file"),
            schema=data.get("schema", SCHEMA_VERSION),
        )

    @classmethod
    def read(cls, path: Path) -> ComparisonRun:
        return cls.from_json(json.loads(path.read_text()))


def read_sweep(data: Any, source: str = "") -> Sweep:
    """A sweep from its JSON (a committed file or a run's JSON), validated: pydantic raises
    `ValidationError` naming the field that is missing or of the wrong type."""
    from pydantic import TypeAdapter  # deferred: only runs that read a sweep need it

    sweep = TypeAdapter(Sweep).validate_python(data)
    return sweep if sweep.source or not source else replace(sweep, source=source)
