"""The step registry the DAGs and `lk step` share: how arguments are read, and how a wrong call
fails (one line, before any service is touched)."""

from __future__ import annotations

from datetime import date

import pytest
from click.testing import CliRunner

from core.settings import Settings
from lk.cli import cli
from lk.step_registry import STEPS, StepArgs, StepError, run_step


def test_arguments_are_json_where_they_parse_else_text() -> None:
    args = StepArgs(
        "validate-raw",
        {"partitions": '[["2026-11-01", 9]]', "since": "2026-11-01", "until": "null"},
        ("partitions", "since", "until"),
    )
    assert args.optional("partitions") == [["2026-11-01", 9]]
    assert args.day("since") == date(2026, 11, 1)
    assert args.day("until") is None  # an empty param renders as JSON null
    typed = StepArgs("publish", {"version": "7"}, ("version",))
    assert typed.integer("version") == 7
    quoted = StepArgs("kappa-start", {"logic_version": '"2"'}, ("logic_version",))
    assert quoted.text("logic_version") == "2"


def test_a_wrong_argument_names_what_the_step_accepts() -> None:
    with pytest.raises(StepError, match=r"unknown argument verson \(accepted: version\)"):
        StepArgs("publish", {"verson": "7"}, ("version",))
    with pytest.raises(StepError, match="version must be an integer"):
        StepArgs("publish", {"version": "seven"}, ("version",)).integer("version")
    with pytest.raises(StepError, match="version is required"):
        StepArgs("publish", {"version": "null"}, ("version",)).integer("version")
    with pytest.raises(StepError, match="must be a date"):
        StepArgs("validate-raw", {"since": "yesterday"}, ("since",)).day("since")


def test_an_unknown_step_is_refused_without_spark() -> None:
    def no_spark():  # type: ignore[no-untyped-def]
        raise AssertionError("Spark started for a wrong call")

    with pytest.raises(StepError, match="unknown step 'banana'"):
        run_step("banana", {}, Settings(), no_spark)
    with pytest.raises(StepError, match="give cutoff or until, not both"):
        run_step(
            "compute-views",
            {"cutoff": "2026-11-01T10:00:00Z", "until": "2026-11-01"},
            Settings(),
            no_spark,
        )


def test_every_step_says_what_it_does_and_is_a_command() -> None:
    result = CliRunner().invoke(cli, ["step", "--help"])
    assert result.exit_code == 0
    for name, step in STEPS.items():
        assert step.summary and name in result.output
    bad = CliRunner().invoke(cli, ["step", "publish", "seven"])
    assert bad.exit_code == 1
    assert "lk: error: expected KEY=VALUE, got 'seven'" in bad.output


class _NoSession:
    """Stands in for a Spark session where the step's layer function is replaced."""

    def stop(self) -> None:
        pass


def test_nothing_new_to_compute_is_a_skip_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch with nothing new (here: nothing archived yet) raises `NothingToDo` from the step,
    recorded as a run that did not fail; `lk step` prints one line, no `lk: error:`, and exits
    with the code the Kubernetes backend skips on."""
    import batch_layer.pipeline
    from batch_layer.errors import NothingNewError
    from lk import step_commands, step_registry
    from lk.step_registry import SKIP_EXIT_CODE, NothingToDo

    def empty(*_args: object, **_kwargs: object) -> int:
        raise NothingNewError("the master dataset is empty (s3a://lk-master/events): nothing\n yet")

    recorded: list[tuple[str, bool]] = []
    monkeypatch.setattr(batch_layer.pipeline, "compute_views", empty)
    monkeypatch.setattr(
        step_registry,
        "_record_run",
        lambda _settings, step, _seconds, *, success: recorded.append((step, success)),
    )
    with pytest.raises(NothingToDo, match=r"^nothing new to compute: the master dataset is empty"):
        run_step("compute-views", {}, Settings(), _NoSession)  # type: ignore[arg-type]
    assert recorded == [("compute-views", True)]

    monkeypatch.setattr(step_commands, "spark_session", lambda *_args: _NoSession())
    result = CliRunner().invoke(cli, ["step", "compute-views"])
    assert result.exit_code == SKIP_EXIT_CODE == 99
    assert result.output.strip() == (
        "lk step compute-views: skipped, nothing new to compute: the master dataset is empty "
        "(s3a://lk-master/events): nothing yet"
    )
    assert "error" not in result.output


def test_a_failing_step_still_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only "nothing new" skips: any other batch error is the step's failure, exit code 1."""
    import batch_layer.pipeline
    from batch_layer.errors import BatchError
    from lk import step_commands, step_registry

    def broken(*_args: object, **_kwargs: object) -> int:
        raise BatchError("cutoff 2026-11-01T09:00:00Z is before the published batch's")

    monkeypatch.setattr(batch_layer.pipeline, "compute_views", broken)
    monkeypatch.setattr(step_registry, "_record_run", lambda *_a, **_k: None)
    monkeypatch.setattr(step_commands, "spark_session", lambda *_args: _NoSession())
    result = CliRunner().invoke(cli, ["step", "compute-views"])
    assert result.exit_code == 1
    assert "lk: error: cutoff 2026-11-01T09:00:00Z is before" in result.output
