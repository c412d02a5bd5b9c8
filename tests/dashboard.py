"""The metric names the chart's Grafana dashboard selects, parsed from its panels' PromQL with
promql-parser (not by pattern), for the tests that check every name is one the project defines
(tests/charts) and one the running release exports (tests/k8s)."""

from __future__ import annotations

from typing import Any

import promql_parser

from infra.dashboard import expressions, load, panels

__all__ = ["exported_name", "expressions", "load", "panels", "queried_metrics", "selected_metrics"]


def selected_metrics(expr: str) -> set[str]:
    """The metric names an expression selects."""
    names: set[str] = set()

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def queried_metrics(dashboard: dict[str, Any]) -> dict[str, set[str]]:
    """Each metric name the dashboard queries, with the titles of the panels that query it."""
    found: dict[str, set[str]] = {}
    for title, expr in expressions(dashboard):
        for name in selected_metrics(expr):
            found.setdefault(name, set()).add(title)
    return found


def exported_name(name: str) -> str:
    """The family a sample name belongs to: a histogram's `_bucket`, `_sum` and `_count` series
    and a counter's `_total` are declared without those suffixes."""
    for suffix in ("_bucket", "_sum", "_count", "_total"):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name
