"""Issue 15, item 9: checkov finds nothing in the chart as rendered for each architecture, nor
in the Dockerfiles, beyond the checks skipped (each with its reason) in the one config file,
.checkov.yaml.

checkov is not a dependency of the project: it runs with `uv tool run` at a pinned version, in
an environment of its own (uv's cache), so the project's lock is untouched. The first run
downloads it; a machine where it cannot run fails this test, it does not skip it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.charts.chart_utils import ROOT, render_set

CHECKOV = "checkov==3.3.30"
CONFIG = ROOT / ".checkov.yaml"
DOCKER_DIR = ROOT / "infra" / "docker"
# The three architectures, and `both` with every optional part (step pods, executor pods,
# their RBAC and NetworkPolicies).
MODES = ("lambda", "kappa", "both", "pod-backend")
TIMEOUT_S = 300


def _uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv")  # `uv run` sets UV to itself
    assert found, "uv is missing: checkov runs with `uv tool run`"
    return found


def _checkov(target: Path, framework: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            _uv(),
            "tool",
            "run",
            "--from",
            CHECKOV,
            "checkov",
            "--directory",
            str(target),
            "--framework",
            framework,
            "--config-file",
            str(CONFIG),
            "--output",
            "json",
            "--compact",
            "--quiet",
            "--skip-download",  # no Prisma Cloud guidelines or policies: offline, same checks
        ],
        cwd=target,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    """Every checkov run at once (one process each, in parallel), then their JSON reports."""
    runs: dict[str, subprocess.Popen[str]] = {}
    for mode in MODES:
        folder = tmp_path_factory.mktemp(f"checkov-{mode}")
        objects = render_set(mode).objects
        (folder / "chart.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
        runs[mode] = _checkov(folder, "kubernetes")
    runs["dockerfiles"] = _checkov(DOCKER_DIR, "dockerfile")
    results = {}
    try:
        for name, run in runs.items():
            out, err = run.communicate(timeout=TIMEOUT_S)
            # 0: nothing failed; 1: something failed. Anything else: checkov did not run.
            assert run.returncode in (0, 1), f"checkov ({name}) did not run: {err[-2000:]}"
            report = json.loads(out)
            results[name] = report[0] if isinstance(report, list) else report
    finally:
        for run in runs.values():
            if run.poll() is None:
                run.kill()
    yield results


def _failures(report: dict[str, Any]) -> list[str]:
    failed = report.get("results", {}).get("failed_checks", [])
    return [f"{f['check_id']} {f['resource']}: {f['check_name']}" for f in failed]


@pytest.mark.parametrize("mode", MODES)
def test_rendered_chart_should_pass_checkov(mode: str, reports: dict[str, Any]) -> None:
    report = reports[mode]
    assert _failures(report) == []
    assert report["summary"]["failed"] == 0
    assert report["summary"]["passed"] > 500  # the Kubernetes checks did run


def test_dockerfiles_should_pass_checkov(reports: dict[str, Any]) -> None:
    report = reports["dockerfiles"]
    assert _failures(report) == []
    assert report["summary"]["passed"] > 100


def test_every_skipped_check_should_say_why() -> None:
    """One place, one line each: the id, then its reason."""
    lines = [line.strip() for line in CONFIG.read_text().splitlines()]
    skipped = yaml.safe_load(CONFIG.read_text())["skip-check"]
    assert skipped == sorted(set(skipped), key=skipped.index)  # no duplicate
    for check in skipped:
        (line,) = [entry for entry in lines if entry.startswith(f"- {check} ")]
        reason = line.split("#", 1)[1].strip()
        assert len(reason) > 30, check
