"""The view suites on pandas: ``batch_views.<view>`` and ``realtime_views.<view>`` (quality).

Good rows are the oracle's on a generated workload (what the serving API answers, ISO times),
and the same rows as the serving store returns them (timezone-aware datetimes). Each kind of bad
data is one corrupted row and must fail with a one-line reason that names it.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from core.catalog import VIEW_NAMES
from core.oracle import OracleResult, compute_views, load_jsonl_values, load_profiles_jsonl
from core.settings import Settings
from quality import QualityGateError, gate, validate
from quality.checks import raise_on_failure
from tests.unit.test_spark_parsing import generated

Rows = list[dict[str, Any]]


@pytest.fixture(scope="module")
def dq_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    home = tmp_path_factory.mktemp("dq-views")
    return Settings(home=home, stack_dir=home / "stack", dq_share_results=False)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> OracleResult:
    events, profiles = generated(tmp_path_factory.mktemp("workload"), seed=11, events=1_500)
    return compute_views(load_jsonl_values(events), load_profiles_jsonl(profiles))


def rows_of(oracle: OracleResult, view: str) -> Rows:
    rows = copy.deepcopy(oracle.views[view])
    assert rows, f"the workload gives no {view} row: the test would check nothing"
    return rows


def as_store_returns(rows: Rows) -> pd.DataFrame:
    """Rows as ``psycopg`` gives them: ISO strings become aware datetimes."""
    frame = pd.DataFrame(rows)
    for column in ("window_start", "window_end", "session_start", "session_end"):
        if column in frame:
            frame[column] = [
                datetime.fromisoformat(v.replace("Z", "+00:00")).astimezone(UTC)
                for v in frame[column]
            ]
    return frame


@pytest.mark.parametrize("view", VIEW_NAMES)
def test_every_view_suite_passes_on_the_oracles_rows(
    view: str, oracle: OracleResult, dq_settings: Settings
) -> None:
    for family, rows in (
        ("batch_views", rows_of(oracle, view)),
        ("realtime_views", as_store_returns(rows_of(oracle, view))),
    ):
        result = validate(
            f"{family}.{view}", rows, settings=dq_settings, layer="lambda-batch", run_name="good"
        )
        assert result.success, (family, result.failures)
        assert result.rows == len(oracle.views[view])


def test_an_empty_view_passes(dq_settings: Settings) -> None:
    # A workload without searches has no search_ctr rows: nothing is wrong with that.
    empty = pd.DataFrame(
        columns=["query", "window_start", "window_end", "searches", "clicks", "ctr"]
    )
    result = validate(
        "batch_views.search_ctr", empty, settings=dq_settings, layer="kappa-serving", run_name="e"
    )
    assert result.success, result.failures
    assert result.rows == 0


def test_a_negative_count_fails_with_its_reason(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    rows = rows_of(oracle, "page_views")
    rows[0]["count"] = -3
    result = validate(
        "batch_views.page_views", rows, settings=dq_settings, layer="lambda-batch", run_name="neg"
    )
    assert not result.success
    assert result.failures == (
        f"count is never negative: 1 of {len(rows)} rows unexpected, e.g. [-3]",
    )


def test_a_ctr_outside_0_1_fails_with_its_reasons(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    rows = rows_of(oracle, "search_ctr")
    rows[0].update(searches=2, clicks=3, ctr=1.5)
    result = validate(
        "realtime_views.search_ctr", rows, settings=dq_settings, layer="kappa", run_name="ctr"
    )
    assert not result.success
    n = len(rows)
    assert result.failures == (
        f"ctr is in [0, 1]: 1 of {n} rows unexpected, e.g. [1.5]",
        # (searches, clicks) of the row
        f"clicks <= searches: 1 of {n} rows unexpected, e.g. [(2, 3)]",
    ), result.failures


def test_a_ctr_that_is_not_clicks_over_searches_fails(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    rows = rows_of(oracle, "search_ctr")
    rows[0].update(searches=4, clicks=1, ctr=0.5)
    result = validate(
        "batch_views.search_ctr", rows, settings=dq_settings, layer="lambda-batch", run_name="r"
    )
    assert result.failures == (
        f"ctr = clicks / searches: 1 of {len(rows)} rows unexpected, e.g. [0.25]",
    )


def test_a_conversion_out_of_its_pattern_fails_with_its_reasons(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    rows = rows_of(oracle, "search_conversions")
    rows[0].update(searches=2, clicked=1, converted=3, conversion_rate=1.5)
    rows[-1].update(searches=4, clicked=4, converted=1, conversion_rate=0.5)
    result = validate(
        "realtime_views.search_conversions", rows, settings=dq_settings, layer="kappa", run_name="c"
    )
    n = len(rows)
    assert result.failures == (
        f"conversion_rate is in [0, 1]: 1 of {n} rows unexpected, e.g. [1.5]",
        # (clicked, converted) of the row
        f"converted <= clicked: 1 of {n} rows unexpected, e.g. [(1, 3)]",
        # the last row's: 0.5 where 1 / 4 is 0.25 (the first's 1.5 is 3 / 2, only out of range)
        f"conversion_rate = converted / searches: 1 of {n} rows unexpected, e.g. [0.25]",
    ), result.failures


def test_a_misaligned_window_fails_with_its_reasons(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    rows = rows_of(oracle, "unique_users")
    start = rows[0]["window_start"]
    rows[0]["window_start"] = start.replace(":00:00Z", ":30:00Z")
    result = validate(
        "batch_views.unique_users", rows, settings=dq_settings, layer="lambda-batch", run_name="w"
    )
    n = len(rows)
    half_hour = 30 * 60_000
    assert result.failures == (
        f"window_start is on a 60-minute boundary (UTC): 1 of {n} rows unexpected, "
        f"e.g. [{half_hour}]",
        f"window_end = window_start + 60 min: 1 of {n} rows unexpected, e.g. [{half_hour}]",
    ), result.failures


def test_a_row_twice_and_a_session_ending_before_it_starts_fail(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    rows = rows_of(oracle, "sessions")
    first = rows[0]
    backwards = {**rows[1], "session_end": "2000-01-01T00:00:00Z", "events": 0}
    bad = [first, dict(first), backwards, *rows[2:]]
    result = validate(
        "realtime_views.sessions", bad, settings=dq_settings, layer="lambda-serving", run_name="s"
    )
    n = len(bad)
    expected = (
        f"events is at least 1: 1 of {n} rows unexpected, e.g. [0]",
        f"one row per user_id, session_start: 2 of {n} rows unexpected",
        f"session_end >= session_start: 1 of {n} rows unexpected",
    )
    for reason in expected:
        assert any(f.startswith(reason) for f in result.failures), (reason, result.failures)
    assert len(result.failures) == len(expected), result.failures


def test_a_missing_column_and_a_null_key_fail(oracle: OracleResult, dq_settings: Settings) -> None:
    frame = pd.DataFrame(rows_of(oracle, "revenue_by_segment")).drop(columns=["revenue_cents"])
    frame.loc[0, "segment"] = None
    result = validate(
        "batch_views.revenue_by_segment",
        frame,
        settings=dq_settings,
        layer="lambda-batch",
        run_name="col",
    )
    assert "expect_column_to_exist(column='revenue_cents'): failed" in result.failures
    assert any(
        f.startswith("expect_column_values_to_not_be_null(column='segment'): 1 of")
        for f in result.failures
    ), result.failures


def test_gate_raises_one_line_naming_every_failed_suite(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    good = gate(
        "batch_views.page_views",
        rows_of(oracle, "page_views"),
        settings=dq_settings,
        layer="lambda-batch",
        run_name="gate",
    )
    bad_rows = rows_of(oracle, "unique_users")
    bad_rows[0]["users"] = -1
    with pytest.raises(QualityGateError) as info:
        gate(
            "batch_views.unique_users",
            bad_rows,
            settings=dq_settings,
            layer="lambda-batch",
            run_name="gate",
        )
    bad = info.value.result
    assert str(info.value) == (
        "quality gate batch_views.unique_users@lambda-batch failed: "
        "users is never negative: "
        f"1 of {len(bad_rows)} rows unexpected, e.g. [-1]"
    )
    with pytest.raises(QualityGateError, match=r"\(also failed: batch_views.search_ctr\)$") as both:
        raise_on_failure([good, bad, dataclasses.replace(bad, suite="batch_views.search_ctr")])
    assert "\n" not in str(both.value)
    raise_on_failure([good])  # nothing failed: no error


def test_results_are_stored_for_data_docs(oracle: OracleResult, tmp_path: Path) -> None:
    from quality.docs import stored_results

    settings = Settings(home=tmp_path, stack_dir=tmp_path / "stack", dq_share_results=False)
    rows = rows_of(oracle, "page_views")
    validate("batch_views.page_views", rows, settings=settings, layer="kappa", run_name="a:b c")
    [stored] = stored_results(settings)
    assert (stored.suite, stored.layer, stored.run_name) == (
        "batch_views.page_views",
        "kappa",
        "a-b-c",
    )
    assert stored.success and stored.failed == 0 and stored.evaluated > 5


def test_a_hopping_window_starts_on_its_hop_and_lasts_its_length(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    rows = rows_of(oracle, "page_views_hopping")
    # Windows start on every whole minute, not only on 10-minute boundaries.
    assert any(not row["window_start"].endswith("0:00Z") for row in rows)
    rows[0]["window_start"] = rows[0]["window_start"].replace(":00Z", ":30Z")
    rows[1]["window_end"] = rows[1]["window_start"].replace(":00Z", ":00.000Z")  # length 0
    result = validate(
        "batch_views.page_views_hopping",
        rows,
        settings=dq_settings,
        layer="lambda-batch",
        run_name="hop",
    )
    n = len(rows)
    assert result.failures == (
        f"window_start is on a 1-minute boundary (UTC): 1 of {n} rows unexpected, e.g. [30000]",
        f"window_end = window_start + 10 min: 2 of {n} rows unexpected, e.g. [570000, 0]",
    ), result.failures


def test_the_current_state_has_no_time_checks_and_checks_its_values(
    oracle: OracleResult, dq_settings: Settings
) -> None:
    from quality.suites import build_suite

    checked = {
        str(getattr(e, name, ""))
        for e in build_suite("realtime_views.segment_totals").expectations
        for name in ("column", "column_A", "column_B")
    }
    assert not any("window" in c or "session" in c for c in checked), checked
    rows = rows_of(oracle, "segment_totals")
    assert len(rows) >= 2  # rows[0] and rows[-1] are two segments
    assert [set(row) for row in rows] == [{"segment", "users", "revenue_cents"}] * len(rows)
    bad = [
        {**rows[0], "users": 0},  # a segment holds only users with an event
        {**rows[0], "segment": "", "revenue_cents": -5},
        *rows[1:],
        dict(rows[-1]),  # a segment twice
    ]
    result = validate(
        "realtime_views.segment_totals",
        as_store_returns(bad),
        settings=dq_settings,
        layer="kappa-serving",
        run_name="state",
    )
    n = len(bad)
    expected = (
        f"segment is never empty: 1 of {n} rows unexpected",
        f"users is at least 1: 1 of {n} rows unexpected, e.g. [0]",
        f"revenue_cents is never negative: 1 of {n} rows unexpected, e.g. [-5]",
        f"one row per segment: 2 of {n} rows unexpected",
    )
    for reason in expected:
        assert any(f.startswith(reason) for f in result.failures), (reason, result.failures)
    assert len(result.failures) == len(expected), result.failures
