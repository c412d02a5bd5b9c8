"""The comparison's verdict: one row per question, Lambda's figure beside Kappa's, which one is
ahead and by how much.

    rows = verdict(run)     # list[VerdictRow], in reading order

The report opens with it (`comparison/templates/verdict.html.j2`, each question linked to its
figure's section), and `comparison.publish` stores it beside the report's address, so that the
serving API's `GET /v1/comparison` and its dashboard show the same table without reading the
run. Every number comes from the `ComparisonRun` (`comparison.json`), computed as the figure it
links to computes it: the per-architecture sums below are the figures' own (the report's cost,
stored and weight figures read the same functions).

The rule is written once, in `QUESTIONS`: each question has its extractor (a figure per
architecture, None when not measured), its unit and whether lower is better. Within
`TOLERANCE` of each other the two are even; otherwise the better one is ahead by the ratio of
the two when both are non-zero ("1.3 times fresher", written with a multiplication sign), or by
their difference ("14 rows fewer") when one is 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from comparison.figures import (
    AS_OF_JOIN,
    TABLE_TABLE_JOIN,
    ComparisonRun,
    LateData,
)

ARCHITECTURES: Final = ("lambda", "kappa")
TOLERANCE: Final = 0.05
"""Two figures within 5% of the larger are even: a run's noise, not a difference."""
MISSING: Final = "\N{EN DASH}"
TIMES: Final = "\N{MULTIPLICATION SIGN}"
LOGIC_CHANGE: Final = "logic-change"
"""The scenario whose reprocessing the verdict compares: each architecture alone on the
machine (the bug's fix runs both at once, sharing it)."""

# The report's section ids, one per figure a question links to; comparison/report/ reads them here.
FRESHNESS: Final = "fig-freshness"
LATE: Final = "fig-late"
REPROCESSING: Final = "fig-reprocessing"
WRONG_ANSWERS: Final = "fig-wrong-answers"
COMPACTION: Final = "fig-compaction"
SEGMENT_MOVE: Final = "fig-segment-move"
COST_CPU: Final = "fig-cost-cpu"
COST_MEMORY: Final = "fig-cost-memory"
STORED: Final = "fig-stored"
WEIGHT: Final = "fig-weight"
CODE: Final = "fig-code"

_MIB: Final = 1024 * 1024
_GIB: Final = 1024 * _MIB

Ahead = Literal["lambda", "kappa", "even", ""]


@dataclass(frozen=True, slots=True)
class VerdictRow:
    question: str
    """e.g. "How fresh: produced → visible, p99"."""
    figure: str
    """The section id of the report it links to, e.g. "fig-freshness"."""
    lambda_figure: str
    """Lambda's figure, formatted, e.g. "4.2 s" (`MISSING`, an en dash, when not measured)."""
    kappa_figure: str
    ahead: str
    """"lambda", "kappa", "even", or "" when either is not measured."""
    by: str
    """e.g. "2.1× fresher"; "" when even or not measured."""  # noqa: RUF001


# --- units --------------------------------------------------------------------------------------


def seconds(value: float) -> str:
    """As the report writes seconds: "0.42 s", "4.2 s", "118 s"."""
    if value >= 100:
        return f"{value:,.0f} s"
    return f"{value:,.2g} s" if value < 1 else f"{value:.1f} s"


def size(value: float) -> str:
    """Bytes in the largest binary unit that keeps a whole number: "2.1 GiB"."""
    for unit, bytes_ in (("GiB", _GIB), ("MiB", _MIB), ("KiB", 1024)):
        if value >= bytes_:
            return f"{value / bytes_:,.1f} {unit}"
    return f"{value:,.0f} B"


def counted(noun: str) -> Callable[[float], str]:
    """Whole numbers of `noun`: "1 row", "14 rows"."""
    return lambda n: f"{n:,.0f} {noun}" if n == 1 else f"{n:,.0f} {noun}s"


def cpu_seconds(value: float) -> str:
    return f"{value:,.1f} CPU-s"


def cores(millicores: float) -> str:
    return f"{millicores / 1000:,.2f} cores"


# --- the figures per architecture, as the report's figures compute them -------------------------


def _measured(found: Mapping[str, float | None]) -> dict[str, float]:
    return {arch: value for arch, value in found.items() if value is not None}


def freshness_p(run: ComparisonRun, q: Literal[50, 99]) -> dict[str, float]:
    """Produced → visible, the `q`-th percentile per architecture, of those measured."""
    return _measured(
        {f.architecture: f.p99_s if q == 99 else f.p50_s for f in run.freshness if f.lags_s}
    )


def late_dropped(run: ComparisonRun) -> dict[str, float]:
    return {x.architecture: float(x.late_dropped) for x in run.late}


def late_rows_off_after(run: ComparisonRun) -> dict[str, float]:
    """Rows still off the oracle after Lambda's batch: late data never repaired."""
    return {x.architecture: float(x.rows_off_after_batch) for x in run.late}


def reprocessing_seconds(run: ComparisonRun, scenario: str = LOGIC_CHANGE) -> dict[str, float]:
    """Start of the job → readers switched, in `scenario` (the first of each architecture)."""
    found: dict[str, float] = {}
    for r in run.reprocessing:
        if r.scenario == scenario:
            found.setdefault(r.architecture, r.seconds)
    return found


def seconds_wrong(run: ComparisonRun) -> dict[str, float]:
    return {w.architecture: w.seconds_wrong for w in run.wrong_answers}


def compaction_rows(run: ComparisonRun, view: str) -> dict[str, float]:
    """Rows of the join `view` differing from the full-history oracle after compaction."""
    if run.compaction is None:
        return {}
    return {a: float(n) for a, n in run.compaction.by_view().get(view, {}).items()}


def _summed(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    found: dict[str, float] = {}
    for arch, value in pairs:
        found[arch] = found.get(arch, 0.0) + value
    return found


def cpu_by_architecture(run: ComparisonRun) -> dict[str, float]:
    """CPU-seconds over the run, summed over each architecture's components (`shared` too)."""
    return _summed((c.architecture, c.cpu_seconds) for c in run.cost)


def memory_by_architecture(run: ComparisonRun) -> dict[str, float]:
    """Peak RSS summed over each architecture's components (`shared` too): what to request."""
    return _summed((c.architecture, float(c.peak_rss_bytes)) for c in run.cost)


def stored_by_architecture(run: ComparisonRun) -> dict[str, float]:
    """Bytes kept at the end of the run, summed over what each architecture stores."""
    return _summed((s.architecture, float(s.bytes)) for s in run.stored)


def chart_objects(run: ComparisonRun) -> dict[str, float]:
    return {w.mode: float(w.objects) for w in run.chart_weight}


def chart_cpu_requests(run: ComparisonRun) -> dict[str, float]:
    return {w.mode: float(w.cpu_requests_millicores) for w in run.chart_weight}


def chart_memory_requests(run: ComparisonRun) -> dict[str, float]:
    return {w.mode: float(w.memory_requests_bytes) for w in run.chart_weight}


def code_lines(run: ComparisonRun) -> dict[str, float]:
    """Lines of Python specific to each architecture (the shared lines serve both)."""
    if run.code is None:
        return {}
    return {"lambda": float(run.code.lambda_only), "kappa": float(run.code.kappa_only)}


# --- details beside a figure --------------------------------------------------------------------


def _of_truly_late(run: ComparisonRun, _: str) -> str:
    truly_late = run.workload.get("late_events")
    return "" if truly_late is None else f" of {truly_late:,} truly late"


def _repaired(run: ComparisonRun, arch: str) -> str:
    found: list[LateData] = [x for x in run.late if x.architecture == arch]
    if not found:
        return ""
    x = found[0]
    if x.repaired_at_s is not None:
        return f", exact again at {seconds(x.repaired_at_s)}"
    return ", exact" if x.rows_off_after_batch == 0 else ", never repaired"


# --- the questions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    figure: str
    """The report's section it links to."""
    extract: Callable[[ComparisonRun], Mapping[str, float]]
    """Each architecture's figure; an architecture left out was not measured."""
    unit: Callable[[float], str]
    better: str
    """The comparative the "by" column says: "fresher" in "2.1× fresher", "14 rows fewer"."""  # noqa: RUF001
    lower_is_better: bool = True
    detail: Callable[[ComparisonRun, str], str] | None = None
    """Words after an architecture's figure ("of 410 truly late"), from the run."""


QUESTIONS: Final = (
    Question(
        "How fresh: produced → visible, p99",
        FRESHNESS,
        lambda run: freshness_p(run, 99),
        seconds,
        "fresher",
    ),
    Question(
        "How fresh: produced → visible, p50",
        FRESHNESS,
        lambda run: freshness_p(run, 50),
        seconds,
        "fresher",
    ),
    Question(
        "Late events dropped behind the watermark",
        LATE,
        late_dropped,
        counted("event"),
        "fewer",
        detail=_of_truly_late,
    ),
    Question(
        "Late data repaired: rows still off after the batch",
        LATE,
        late_rows_off_after,
        counted("row"),
        "fewer",
        detail=_repaired,
    ),
    Question(
        "Reprocessing after a logic change: start → readers switched",
        REPROCESSING,
        reprocessing_seconds,
        seconds,
        "faster",
    ),
    Question(
        "How long wrong answers were served (bug → fix)",
        WRONG_ANSWERS,
        seconds_wrong,
        seconds,
        "shorter",
    ),
    Question(
        f"Compaction: {AS_OF_JOIN} rows differing (as-of join)",
        COMPACTION,
        lambda run: compaction_rows(run, AS_OF_JOIN),
        counted("row"),
        "fewer",
    ),
    Question(
        f"Compaction: {TABLE_TABLE_JOIN} rows differing (table-table join)",
        COMPACTION,
        lambda run: compaction_rows(run, TABLE_TABLE_JOIN),
        counted("row"),
        "fewer",
    ),
    Question(
        "CPU: its own components over the run (shared ones aside)",
        COST_CPU,
        cpu_by_architecture,
        cpu_seconds,
        "less",
    ),
    Question(
        "Memory: its own components' peak RSS, summed",
        COST_MEMORY,
        memory_by_architecture,
        size,
        "less",
    ),
    Question(
        "Bytes stored at the end of the run",
        STORED,
        stored_by_architecture,
        size,
        "less",
    ),
    Question(
        "Operational weight: Kubernetes objects the chart deploys",
        WEIGHT,
        chart_objects,
        counted("object"),
        "fewer",
    ),
    Question(
        "Operational weight: CPU its pods request",
        WEIGHT,
        chart_cpu_requests,
        cores,
        "less",
    ),
    Question(
        "Operational weight: memory its pods request",
        WEIGHT,
        chart_memory_requests,
        size,
        "less",
    ),
    Question(
        "Code: lines specific to the architecture",
        CODE,
        code_lines,
        counted("line"),
        "fewer",
    ),
)
"""The verdict's questions, in the report's reading order: correctness and freshness, then
cost, then weight."""


# --- the rule -----------------------------------------------------------------------------------


def compare(
    lam: float | None, kappa: float | None, *, lower_is_better: bool = True
) -> tuple[Ahead, float | None]:
    """Which one is ahead ("" when either is not measured), and by what ratio (the larger
    over the smaller) when both are non-zero; None otherwise, for the caller to give the
    difference instead."""
    if lam is None or kappa is None:
        return "", None
    if abs(lam - kappa) <= TOLERANCE * max(abs(lam), abs(kappa)):  # equal ones included
        return "even", None
    ahead: Ahead = "lambda" if (lam < kappa) == lower_is_better else "kappa"
    low, high = sorted((abs(lam), abs(kappa)))
    return ahead, (high / low if low else None)


def _times(ratio: float) -> str:
    return f"{ratio:,.1f}{TIMES}" if ratio < 10 else f"{ratio:,.0f}{TIMES}"


def row(run: ComparisonRun, q: Question) -> VerdictRow:
    """One question's row for `run`."""
    found = q.extract(run)
    lam, kappa = found.get("lambda"), found.get("kappa")

    def figure(arch: str, value: float | None) -> str:
        if value is None:
            return MISSING
        return q.unit(value) + (q.detail(run, arch) if q.detail else "")

    ahead, ratio = compare(lam, kappa, lower_is_better=q.lower_is_better)
    by = ""
    if ahead in ARCHITECTURES and lam is not None and kappa is not None:
        by = f"{_times(ratio) if ratio else q.unit(abs(lam - kappa))} {q.better}"
    return VerdictRow(
        q.question, q.figure, figure("lambda", lam), figure("kappa", kappa), ahead, by
    )


def verdict(run: ComparisonRun) -> list[VerdictRow]:
    """The verdict of `run`: a row per question of `QUESTIONS`, in their order."""
    return [row(run, q) for q in QUESTIONS]
