"""`make cluster-compare`'s Job handling (infra/cluster/compare.py) against a scripted kubectl:
the Job is made from the CronJob, its log is followed until the Job ends, and the report's
address is read from the log. The real cluster runs it in tests/k8s."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from infra.cluster import compare

REPORT = "http://lk-minio:9000/lk-dq/comparison/20261124T200000Z/report.html"


class ScriptedKubectl:
    """Answers `create`, `get job` (the Job's status, in turn) and `logs` like kubectl."""

    def __init__(self, statuses: list[str], log: str, create_rc: int = 0) -> None:
        self.statuses: Iterator[str] = iter(statuses)
        self.log = log
        self.create_rc = create_rc
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if args[0] == "create":
            return subprocess.CompletedProcess(args, self.create_rc, "", "cronjob not found")
        if args[0] == "get":
            return subprocess.CompletedProcess(args, 0, next(self.statuses), "")
        return subprocess.CompletedProcess(args, 0, self.log, "")


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "POLL_S", 0.0)


def test_a_job_is_made_from_the_cronjob() -> None:
    kubectl = ScriptedKubectl([], "")
    name = compare.start(kubectl, "lk")
    assert name.startswith("lk-comparison-")
    assert kubectl.calls == [("create", "job", "--from=cronjob/lk-comparison", name)]


def test_without_the_cronjob_the_reason_names_the_architecture() -> None:
    with pytest.raises(RuntimeError, match="architecture=both"):
        compare.start(ScriptedKubectl([], "", create_rc=1), "lk")


def test_the_log_is_followed_until_the_job_succeeds_and_names_the_report() -> None:
    log = f"== the comparison took 900 s\n  published: {REPORT} (also at GET /v1/comparison)\n"
    kubectl = ScriptedKubectl(["/", "/", "1/"], log)
    echoed: list[str] = []
    job = compare.follow(kubectl, "lk-comparison-1", echoed.append, timeout_s=60)
    assert job.succeeded
    assert job.report_url == REPORT
    assert job.report_path == "/lk-dq/comparison/20261124T200000Z/report.html"
    assert echoed == log.splitlines()  # each line once, though the log was read twice


def test_a_failed_job_is_reported_without_a_report() -> None:
    job = compare.follow(ScriptedKubectl(["/1"], "lk: error: no Kafka\n"), "j", print, 60)
    assert not job.succeeded
    assert job.report_url is None and job.report_path is None


class ScalingKubectl:
    """Answers `get deployment` with the release's streams and records every `scale`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        found = "lk-archiver=1 lk-speed-layer=1 lk-kappa-stream=2 " if args[0] == "get" else ""
        return subprocess.CompletedProcess(args, 0, found, "")


def test_the_release_s_streams_pause_for_the_run_and_come_back_even_when_it_fails() -> None:
    kubectl = ScalingKubectl()
    with (
        pytest.raises(TimeoutError),
        compare.streams_paused(kubectl, "lk", lambda _line: None),
    ):
        assert kubectl.calls[-1] == (
            "scale", "deployment", "lk-archiver", "lk-speed-layer", "lk-kappa-stream",
            "--replicas=0",
        )  # fmt: skip
        raise TimeoutError
    assert kubectl.calls[-3:] == [
        ("scale", "deployment", "lk-archiver", "--replicas=1"),
        ("scale", "deployment", "lk-speed-layer", "--replicas=1"),
        ("scale", "deployment", "lk-kappa-stream", "--replicas=2"),
    ]
