"""Lambda end to end on the real stack: archive, batch, speed, merged serving, vs the oracle."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from core import workload
from core.kafka_io import produce_file
from core.oracle import OracleResult, compute_views, load_jsonl_values, load_profiles_jsonl
from core.settings import Settings
from serving.main import create_app
from tests.conftest import run_lk
from tests.integration.helpers import apply_profiles_through_faults
from tests.serving_pages import ANSWERS, oracle_answers, read_whole


@pytest.fixture(scope="module")
def lambda_workload(stack: Settings, tmp_path_factory: pytest.TempPathFactory) -> OracleResult:
    """A generated workload (late, duplicate and invalid records included) in the log; its
    profiles written to the application's table, which the stack's connector captures, with
    Kafka Connect killed and Postgres restarted in the middle (faults: no change lost, and one
    delivered twice changes no view)."""
    out = tmp_path_factory.mktemp("lambda") / "events.jsonl"
    profiles = workload.default_profiles_path(out)
    workload.generate(workload.WorkloadSpec(seed=21, events=4000), out, profiles)
    produce_file(stack, out, stack.events_topic)
    apply_profiles_through_faults(stack, stack, profiles)
    return compute_views(load_jsonl_values(out), load_profiles_jsonl(profiles))


def _served(settings: Settings, view: str) -> dict:
    with TestClient(create_app(settings)) as client:
        return read_whole(client.get, view, architecture="lambda")


def test_drain_makes_every_view_equal_the_oracle(
    stack: Settings, stack_env: dict[str, str], lambda_workload: OracleResult
) -> None:
    result = run_lk("drain", "--architecture", "lambda", env=stack_env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]

    expected = oracle_answers(lambda_workload)
    assert expected["search_conversions/matches"]  # the workload completes patterns
    for name in ANSWERS:  # the views, and the matches of the batch and of the speed layer
        assert _served(stack, name)["rows"] == expected[name], name
    meta = _served(stack, "page_views")["meta"]
    assert meta["architecture"] == "lambda"
    assert meta["quarantined"] == lambda_workload.quarantined
    assert meta["view_version"] is not None and meta["batch_cutoff"] is not None


def test_a_batch_written_but_not_handed_off_leaves_the_previous_version_served(
    stack: Settings,
    lambda_workload: OracleResult,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    from batch_layer.pipeline import run_batch

    before = _served(stack, "unique_users")
    # The batch layer writes a complete new version and marks it ready, then "crashes" before
    # the hand-off: readers must keep the published version, unchanged.
    result = run_batch(spark, stack, cutoff_ms=None)
    after = _served(stack, "unique_users")
    assert result.version > before["meta"]["view_version"]
    assert after == before
