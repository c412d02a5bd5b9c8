"""`lk demo`, the main job, as a user runs it: both architectures on one workload, side by side.

Lambda must equal the oracle in every view; Kappa must equal the oracle once the events its
watermark dropped are left out (the demo's last column), which is the whole difference.
"""

from __future__ import annotations

from pathlib import Path

from core.catalog import VIEW_NAMES
from core.settings import Settings
from tests.conftest import run_lk
from tests.integration.helpers import isolated_settings, settings_env


def test_demo_runs_both_architectures_side_by_side(
    stack: Settings, stack_env: dict[str, str], tmp_path: Path
) -> None:
    # Its own topics, buckets and database: the demo must not feed other tests' default topics.
    env = {**stack_env, **settings_env(isolated_settings(stack, "demo"))}
    done = run_lk(
        "demo", "--seed", "11", "--events", "1000", "--kappa-micro-batches", "2",
        "--out-dir", str(tmp_path),
        env=env,
        timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for step in ("lambda drained in", "kappa v1 drained in", "side by side"):
        assert step in out, out[-3000:]
    rows = [line.split() for line in out.splitlines()]
    table = {
        cells[0]: cells
        for cells in rows
        if len(cells) > 2 and cells[0] in VIEW_NAMES and cells[1].replace(",", "").isdigit()
    }
    assert set(table) == set(VIEW_NAMES), out[-3000:]
    for view, cells in table.items():
        # view, oracle rows, lambda distance, kappa distance..., kappa without late
        assert cells[2] == "exact", f"lambda {view}: {' '.join(cells)}"
        assert cells[-1] == "exact", f"kappa without late {view}: {' '.join(cells)}"
    assert "lambda meta: version" in out and "kappa meta: version" in out
    assert "a few answers (oracle | lambda | kappa):" in out
