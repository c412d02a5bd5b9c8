"""The comparison's verdict (issue 54, item 1): a row per question from a run's numbers, each
linked to its figure's section in the report, the rule of "ahead" written once; its template;
and the same rows as the serving API declares them."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from comparison.figures import ComparisonRun, ComponentCost, Freshness, LateData, WrongAnswers
from comparison.report import render
from comparison.verdict import QUESTIONS, VerdictRow, compare, verdict
from serving.api.routes.comparison import VerdictRow as ServedRow
from tests.unit.test_comparison_report import synthetic_run

TEMPLATES = Path(__file__).resolve().parents[2] / "comparison" / "templates"
DASH = "\N{EN DASH}"
X = "\N{MULTIPLICATION SIGN}"


def _rows(run: ComparisonRun) -> dict[str, VerdictRow]:
    return {row.question: row for row in verdict(run)}


def test_every_question_of_the_issue_has_its_row_from_the_run() -> None:
    rows = _rows(synthetic_run())
    assert list(rows) == [q.question for q in QUESTIONS]
    expected = [
        # question, figure, Lambda, Kappa, ahead, by
        ("How fresh: produced → visible, p99", "fig-freshness", "5.6 s", "4.4 s", "kappa",
         f"1.3{X} fresher"),
        ("How fresh: produced → visible, p50", "fig-freshness", "2.2 s", "1.7 s", "kappa",
         f"1.3{X} fresher"),
        ("Late events dropped behind the watermark", "fig-late",
         "402 events of 410 truly late", "398 events of 410 truly late", "even", ""),
        ("Late data repaired: rows still off after the batch", "fig-late",
         "0 rows, exact again at 300 s", "35 rows, never repaired", "lambda", "35 rows fewer"),
        ("Reprocessing after a logic change: start → readers switched", "fig-reprocessing",
         "62.0 s", "118 s", "lambda", f"1.9{X} faster"),
        ("How long wrong answers were served (bug → fix)", "fig-wrong-answers", "100 s",
         "70.0 s", "kappa", f"1.4{X} shorter"),
        ("Compaction: revenue_by_segment rows differing (as-of join)", "fig-compaction",
         "0 rows", "14 rows", "lambda", "14 rows fewer"),
        ("Compaction: segment_totals rows differing (table-table join)", "fig-compaction",
         "0 rows", "0 rows", "even", ""),
        # 180 + 441.5 + 260 against 275 + 574: the shared components' 321 CPU-s count for none.
        ("CPU: its own components over the run (shared ones aside)", "fig-cost-cpu",
         "881.5 CPU-s", "849.0 CPU-s", "even", ""),
        ("Memory: its own components' peak RSS, summed", "fig-cost-memory", "4.9 GiB",
         "2.9 GiB", "kappa", f"1.7{X} less"),
        ("Bytes stored at the end of the run", "fig-stored", "60.0 MiB", "45.0 MiB", "kappa",
         f"1.3{X} less"),
        ("Operational weight: Kubernetes objects the chart deploys", "fig-weight", "35 objects",
         "31 objects", "kappa", f"1.1{X} fewer"),
        ("Operational weight: CPU its pods request", "fig-weight", "1.56 cores", "1.36 cores",
         "kappa", f"1.1{X} less"),
        ("Operational weight: memory its pods request", "fig-weight", "5.9 GiB", "5.0 GiB",
         "kappa", f"1.2{X} less"),
        ("Code: lines specific to the architecture", "fig-code", "823 lines", "353 lines",
         "kappa", f"2.3{X} fewer"),
    ]  # fmt: skip
    assert [dataclasses.astuple(row) for row in verdict(synthetic_run())] == expected


@pytest.fixture(scope="module")
def report_page() -> str:
    return render(synthetic_run())


def test_each_row_links_to_a_section_of_the_report(report_page: str) -> None:
    figures = {row.figure for row in verdict(synthetic_run())}
    assert len(figures) == 10
    for figure in figures:
        assert f'id="{figure}"' in report_page, figure


def test_a_run_that_measured_nothing_has_every_row_unmeasured() -> None:
    rows = verdict(ComparisonRun(created_at="2026-11-24T15:30:00Z", workload={}))
    assert len(rows) == len(QUESTIONS)
    for row in rows:
        assert (row.lambda_figure, row.kappa_figure, row.ahead, row.by) == (DASH, DASH, "", "")


def test_one_architecture_measured_alone_is_ahead_of_nothing() -> None:
    run = replace(
        synthetic_run(),
        freshness=[Freshness.of("kappa", [1.0, 2.0, 3.0])],
        wrong_answers=[WrongAnswers("lambda", "v-bug", 10.0, 40.0, 20.0, 50.0)],
    )
    rows = _rows(run)
    p99 = rows["How fresh: produced → visible, p99"]
    assert (p99.lambda_figure, p99.ahead, p99.by) == (DASH, "", "")
    assert p99.kappa_figure.endswith(" s")
    wrong = rows["How long wrong answers were served (bug → fix)"]
    assert (wrong.lambda_figure, wrong.kappa_figure, wrong.ahead) == ("30.0 s", DASH, "")


def test_freshness_without_lags_is_not_measured() -> None:
    # The report draws only architectures with lags; the verdict reads the same ones.
    run = replace(synthetic_run(), freshness=[Freshness("lambda", [], 2.0, 4.0)])
    assert _rows(run)["How fresh: produced → visible, p50"].lambda_figure == DASH


@pytest.mark.parametrize(
    ("lam", "kappa", "ahead", "ratio"),
    [
        (100.0, 100.0, "even", None),
        (0.0, 0.0, "even", None),
        (100.0, 95.0, "even", None),  # 5% of the larger: even
        (100.0, 94.0, "kappa", 100 / 94),
        (2.0, 4.2, "lambda", 2.1),
        (0.0, 14.0, "lambda", None),  # one is 0: no ratio, the difference instead
        (None, 3.0, "", None),
        (3.0, None, "", None),
    ],
)
def test_lower_is_better_even_within_five_percent(
    lam: float | None, kappa: float | None, ahead: str, ratio: float | None
) -> None:
    found, by = compare(lam, kappa)
    assert found == ahead
    assert by == pytest.approx(ratio)


def test_higher_is_better_turns_the_rule_around() -> None:
    assert compare(2.0, 4.2, lower_is_better=False) == ("kappa", pytest.approx(2.1))


def test_a_large_ratio_and_the_late_counts_without_the_workloads_bound() -> None:
    run = replace(
        synthetic_run(),
        workload={"events": 100},
        late=[
            LateData("lambda", 3, 3, 0, None, {}, {}),
            LateData("kappa", 40, 40, 1, None, {}, {}),
        ],
        cost=[ComponentCost("batch", "lambda", 12.0, 1), ComponentCost("job", "kappa", 480.0, 1)],
    )
    rows = _rows(run)
    dropped = rows["Late events dropped behind the watermark"]
    assert (dropped.lambda_figure, dropped.kappa_figure) == ("3 events", "40 events")
    assert (dropped.ahead, dropped.by) == ("lambda", f"13{X} fewer")
    repaired = rows["Late data repaired: rows still off after the batch"]
    assert (repaired.lambda_figure, repaired.kappa_figure) == (
        "0 rows, exact",
        "1 row, never repaired",
    )
    assert repaired.by == "1 row fewer"
    assert rows["CPU: its own components over the run (shared ones aside)"].by == f"40{X} less"


# --- the template ---------------------------------------------------------------------------------


class _Table(HTMLParser):
    """The section's id, its heading, and per body row its cells' text and its links."""

    def __init__(self) -> None:
        super().__init__()
        self.section_id: str | None = None
        self.heading = ""
        self.rows: list[list[str]] = []
        self.links: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section":
            self.section_id = found.get("id")
        if tag == "tr" and "tbody" in self._in:
            self.rows.append([])
        if tag == "td":
            self.rows[-1].append("")
        if tag == "a":
            self.links.append(found.get("href") or "")
        self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self._in.pop()

    def handle_data(self, data: str) -> None:
        if "h2" in self._in:
            self.heading += data
        elif "td" in self._in:
            self.rows[-1][-1] += data


def _render_template(rows: list[VerdictRow]) -> str:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined
    )
    return env.get_template("verdict.html.j2").render(verdict=rows)


def test_the_template_is_one_table_linking_each_question_to_its_figure() -> None:
    rows = verdict(synthetic_run())
    table = _Table()
    table.feed(_render_template(rows))
    assert (table.section_id, table.heading) == ("verdict", "Verdict")
    assert table.links == [f"#{row.figure}" for row in rows]
    assert table.rows == [
        [r.question, r.lambda_figure, r.kappa_figure, r.ahead.capitalize(), r.by] for r in rows
    ]


def test_the_template_escapes_text() -> None:
    hostile = VerdictRow('<b>q</b> & "x"', 'fig"><script>', "<i>", "1 s", "kappa", f"2{X} less")
    page = _render_template([hostile])
    assert "<b>" not in page and "<i>" not in page and "<script>" not in page
    assert "&lt;b&gt;q&lt;/b&gt; &amp; &#34;x&#34;" in page
    table = _Table()
    table.feed(page)
    assert table.links == ['#fig"><script>']


# --- the same rows, as the serving API declares them ----------------------------------------------


def test_the_api_model_has_the_dataclass_fields_and_takes_its_json() -> None:
    assert list(ServedRow.model_fields) == [f.name for f in dataclasses.fields(VerdictRow)]
    for row in verdict(synthetic_run()):
        assert ServedRow.model_validate(asdict(row)).model_dump() == asdict(row)
