"""Bad arguments to `lk` end in one line, `lk: error: <reason>`, and a non-zero exit: never a
traceback, never a file half written (fuzzed with hypothesis; no services needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import workload
from lk import cli as lk_cli
from lk.cli import cli

NUMBERISH = st.sampled_from(
    ["inf", "-inf", "nan", "1e30", "-1", "0", "0.05", "99999999999999999999", "", "x", "1_0", "3"]
)
ARGUMENT = NUMBERISH | st.text(max_size=12) | st.integers(-(2**70), 2**70).map(str)


def _one_line_failure(result) -> None:  # type: ignore[no-untyped-def]
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output + result.stderr
    if result.exit_code != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines, "a failure says why"
        assert lines[-1].startswith("lk: error: "), result.stderr


FUZZ_MEMORY_BYTES, _ = workload.footprint(workload.WorkloadSpec(seed=0, events=20_000))
"""The memory the fuzzed `generate`'s check sees: a machine that holds 20,000 events, so a draw
above it is refused in one line as on any machine too small. On the real one a valid draw of
tens of millions of events generated for over ten minutes and wrote gigabytes (a CI run's
`make test` stalled on it)."""


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=ARGUMENT, events=ARGUMENT, hours=ARGUMENT)
def test_generate_refuses_bad_sizes_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: str, events: str, hours: str
) -> None:
    monkeypatch.setattr(lk_cli, "_available_memory", lambda: FUZZ_MEMORY_BYTES)
    out = tmp_path / "fuzz.jsonl"
    out.unlink(missing_ok=True)  # tmp_path is the same for every example: not an earlier one's
    args = ["generate", "--seed", seed, "--events", events, "--hours", hours, "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    _one_line_failure(result)
    if result.exit_code == 0:
        assert out.is_file()


def test_a_workload_larger_than_memory_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    out = tmp_path / "huge.jsonl"
    result = CliRunner().invoke(
        cli, ["generate", "--seed", "1", "--events", "99999999999999999999", "--out", str(out)]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("lk: error: --events 99,999,999,999,999,999,999 needs about")
    assert not out.exists()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(ARGUMENT | st.sampled_from(["--architecture", "--port", "--cutoff", "-x"]), max_size=4)
)
def test_any_arguments_to_any_command_end_in_one_line(words: list[str]) -> None:
    for command in (["drain"], ["batch"], ["serve"], ["reprocess"], ["step"], ["nosuch"], []):
        _one_line_failure(CliRunner().invoke(cli, [*command, "--bogus", *words]))


def test_a_failed_spark_job_ends_in_one_line_naming_its_cause() -> None:
    import click
    from pyspark.errors import PySparkException

    from lk.errors import guarded

    nested = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: [FOREACH_BATCH_USER_FUNCTION"
        "_ERROR] An error occurred in the user provided function.\nTraceback (most recent call "
        "last):\n  ...\n[DELTA_METADATA_MISMATCH] A metadata mismatch was detected when writing "
        "to the Delta table.\n== Plan ==\n+- Project [a, b, c]"
    )

    @click.command()
    @guarded
    def failing() -> None:
        raise PySparkException(nested)

    result = CliRunner().invoke(failing, [])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "lk: error: Spark failed (STREAM_FAILED > FOREACH_BATCH_USER_FUNCTION_ERROR > "
        "DELTA_METADATA_MISMATCH): A metadata mismatch was detected when writing to the Delta "
        "table."
    )


def test_a_store_that_does_not_answer_ends_in_one_line() -> None:
    import click
    import psycopg

    from lk.errors import guarded

    @click.command()
    @guarded
    def waiting() -> None:
        raise psycopg.errors.ConnectionTimeout("connection timeout expired")

    result = CliRunner().invoke(waiting, [])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "lk: error: the serving store did not answer: connection timeout expired"
    )


def test_a_kafka_failure_ends_in_one_line() -> None:
    import click
    from confluent_kafka import KafkaError, KafkaException

    from lk.errors import guarded

    @click.command()
    @guarded
    def reading() -> None:
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION, "Unknown partition"))

    result = CliRunner().invoke(reading, [])
    assert result.exit_code == 1
    assert result.stderr.strip() == "lk: error: Kafka: Unknown partition"


def test_a_kafka_connect_that_does_not_answer_ends_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LK_CONNECT_PORT", "9")  # discard: nothing listens
    result = CliRunner().invoke(cli, ["cdc", "register", "--timeout", "0.1"])
    _one_line_failure(result)
    assert result.exit_code == 1
    assert "Kafka Connect at http://" in result.stderr and "did not answer" in result.stderr
