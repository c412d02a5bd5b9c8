"""One business logic: the view logic lives in core/views only; the layers call it.

Lambda's classic flaw is the same logic written twice (batch and speed). This test fails if a
layer grows view logic of its own: grouping, windowing or session-merging code outside
core/views, or a layer that computes views without the shared functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("batch_layer", "speed_layer", "serving", "lk")

# DataFrame and SQL operations that define a view's grouping, windows or sessions.
VIEW_LOGIC_CALLS = {
    "groupBy",
    "groupby",
    "rollup",
    "cube",
    "window",
    "session_window",
    "countDistinct",
    "count_distinct",
    "approx_count_distinct",
    "partitionBy",
    "orderBy",
    "mapInPandas",
    "applyInPandas",
    "transformWithStateInPandas",
}
ALLOWED: set[tuple[str, str]] = set()
"""(file, call) pairs that are not view logic, each with why (none today: Delta's partitioned
layout goes through ``core.delta_io.append_once``)."""


def _python_files(layer: str) -> list[Path]:
    return sorted((ROOT / layer).rglob("*.py"))


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return names


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_defines_no_view_logic_of_its_own(layer: str) -> None:
    offenders = []
    for path in _python_files(layer):
        relative = path.relative_to(ROOT).as_posix()
        for name in sorted(_calls(path) & VIEW_LOGIC_CALLS):
            if (relative, name) not in ALLOWED:
                offenders.append(f"{relative}: {name}()")
    assert not offenders, "view logic outside core/views: " + ", ".join(offenders)


@pytest.mark.parametrize("module", ["batch_layer/job.py", "stream_engine/engine.py"])
def test_batch_and_speed_compute_views_with_the_shared_functions(module: str) -> None:
    tree = ast.parse((ROOT / module).read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "core.views" in imported, f"{module} must compute views with core.views"


def test_the_detector_sees_a_grouping() -> None:
    sample = ROOT / "tests" / "unit" / "_sample_layer.py"
    sample.write_text("def f(df):\n    return df.groupBy('page').count()\n")
    try:
        assert "groupBy" in _calls(sample) & VIEW_LOGIC_CALLS
    finally:
        sample.unlink()
