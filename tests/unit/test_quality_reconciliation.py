"""Lambda vs Kappa vs the oracle (quality.reconciliation) and the ``reconciliation`` suite.

Hand-made rows: each disagreement is built to have exactly one cause, so the cause the code
gives can be checked, and the suite must fail, naming the window, only on an unexplained one.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.settings import Settings
from quality import combine, reconcile, validate
from quality.reconciliation import COMPACTION, LATE_DATA, UNEXPLAINED, notes

Rows = list[dict[str, Any]]
H9, H10, H11 = "2026-11-01T09:00:00Z", "2026-11-01T10:00:00Z", "2026-11-01T11:00:00Z"


@pytest.fixture(scope="module")
def dq_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    home = tmp_path_factory.mktemp("dq-reconciliation")
    return Settings(home=home, stack_dir=home / "stack")


def pv(minute: int, count: int, page: str = "/home") -> dict[str, Any]:
    start = f"2026-11-01T09:{minute:02d}:00Z"
    end = f"2026-11-01T09:{minute + 1:02d}:00Z"
    return {"page": page, "window_start": start, "window_end": end, "count": count}


def revenue(segment: str, cents: int, start: str = H9, end: str = H10) -> dict[str, Any]:
    return {"segment": segment, "window_start": start, "window_end": end, "revenue_cents": cents}


def test_agreement_gives_an_empty_table() -> None:
    rows = [pv(1, 3), pv(2, 1)]
    table = reconcile("page_views", rows, list(rows), rows, closed_before=H10)
    assert table.empty
    assert notes(table) == ["Lambda, Kappa and the oracle agree on every closed window."]


def test_a_window_short_of_late_events_is_late_data() -> None:
    oracle = [pv(1, 3), pv(2, 1)]
    kappa = [pv(1, 2), pv(2, 1)]  # one event of 09:01 came behind Kappa's watermark
    table = reconcile(
        "page_views",
        oracle,
        kappa,
        oracle,
        closed_before=H10,
        without_late={"kappa": [pv(1, 2), pv(2, 1)]},
    )
    [row] = table.to_dict("records")
    assert (row["cause"], row["lambda_cause"], row["kappa_cause"]) == (LATE_DATA, "", LATE_DATA)
    assert row["window"] == (
        "page_views page=/home [2026-11-01T09:01:00Z, 2026-11-01T09:02:00Z): "
        "lambda count=3; kappa count=2; oracle count=3"
    )


def test_open_windows_are_not_compared() -> None:
    oracle = [pv(1, 3), pv(30, 5)]
    kappa = [pv(1, 3), pv(30, 4)]  # 09:30 is still open for Kappa: it may still grow
    table = reconcile("page_views", oracle, kappa, oracle, closed_before="2026-11-01T09:30:00Z")
    assert table.empty


def test_the_same_revenue_split_otherwise_is_compaction() -> None:
    oracle = [revenue("gold", 700), revenue("silver", 300)]
    kappa = [revenue("gold", 1000)]  # the replay joined every order to the latest profile
    table = reconcile("revenue_by_segment", oracle, kappa, oracle, closed_before=H10)
    assert set(table["cause"]) == {COMPACTION}
    assert sorted(table["key"]) == ["segment=gold", "segment=silver"]


def test_a_difference_nothing_explains_is_unexplained() -> None:
    oracle = [revenue("gold", 700), revenue("gold", 50, H10, H11)]
    lam = [revenue("gold", 700), revenue("gold", 60, H10, H11)]  # 10 cents from nowhere
    table = reconcile("revenue_by_segment", lam, oracle, oracle, closed_before=H11)
    [row] = table.to_dict("records")
    assert (row["cause"], row["lambda_cause"], row["kappa_cause"]) == (UNEXPLAINED, UNEXPLAINED, "")


def test_a_session_is_compared_once_no_event_can_extend_it() -> None:
    def session(end: str, events: int) -> dict[str, Any]:
        return {"user_id": "u1", "session_start": H9, "session_end": end, "events": events}

    oracle = [session("2026-11-01T09:10:00Z", 4)]
    kappa = [session("2026-11-01T09:10:00Z", 3)]
    # Closed only after end + 30 min: an event at 09:40 would still belong to it.
    assert reconcile("sessions", oracle, kappa, oracle, closed_before="2026-11-01T09:40:00Z").empty
    table = reconcile("sessions", oracle, kappa, oracle, closed_before="2026-11-01T09:40:01Z")
    assert list(table["cause"]) == [UNEXPLAINED]


def test_the_suite_passes_on_explained_and_fails_naming_the_unexplained(
    dq_settings: Settings,
) -> None:
    oracle = [pv(1, 3), pv(2, 1)]
    explained = reconcile(
        "page_views",
        oracle,
        [pv(1, 2), pv(2, 1)],
        oracle,
        closed_before=H10,
        without_late={"kappa": [pv(1, 2), pv(2, 1)]},
    )
    result = validate(
        "reconciliation", explained, settings=dq_settings, layer="comparison", run_name="ok"
    )
    assert result.success, result.failures
    assert result.rows == 1

    unexplained = reconcile(
        "revenue_by_segment",
        [revenue("gold", 710)],
        [revenue("gold", 700)],
        [revenue("gold", 700)],
        closed_before=H10,
    )
    table = combine([explained, unexplained])
    result = validate(
        "reconciliation", table, settings=dq_settings, layer="comparison", run_name="x"
    )
    assert not result.success
    [reason] = result.failures
    assert reason.startswith(
        "every closed window where Lambda, Kappa and the oracle disagree has a known cause "
        "(listed below: the windows left unexplained): 1 of 2 rows unexpected, e.g. "
        "['revenue_by_segment segment=gold [2026-11-01T09:00:00Z, 2026-11-01T10:00:00Z): "
        "lambda revenue_cents=710; kappa revenue_cents=700; oracle revenue_cents=700']"
    ), reason


def test_no_disagreement_validates_as_an_empty_table(dq_settings: Settings) -> None:
    result = validate(
        "reconciliation", combine([]), settings=dq_settings, layer="comparison", run_name="none"
    )
    assert result.success, result.failures
    assert result.rows == 0
