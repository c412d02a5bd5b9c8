"""The bench's results: a JSON file written after every step, and the closing table of figures
next to their aims (issue 3: batch, memory; issue 12: the archive, the speed layer, the
replay; issue 14: the API)."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.catalog import VIEW_NAMES
from tests.benchmarks import api

GIB = 1024**3


@dataclass(frozen=True)
class Figure:
    label: str
    path: tuple[str, ...]  # where the value sits in the results
    unit: str
    aim: float | None = None
    at_most: bool = False  # the aim is a ceiling (freshness, memory), not a floor
    complete: tuple[str, ...] = ()  # where a False says the figure is of a step cut short

    def value(self, results: dict[str, Any], path: tuple[str, ...] | None = None) -> Any:
        node: Any = results
        for part in self.path if path is None else path:
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node


def _api_aim(label: str, key: str, aim: tuple[int, float]) -> tuple[Figure, Figure]:
    """An API query's p99 at its aimed rate, and the rate it answered (the bench's aims)."""
    rate, p99_ms = aim
    return (
        Figure(f"{label} p99 at {rate:,}/s", ("api", key, "p99_ms"), "ms", p99_ms, at_most=True),
        Figure("  answered", ("api", key, "answered_per_s"), "/s", rate * api.HELD_SHARE),
    )


_SPEED_BATCHES = ("speed", "engine_phases", "batch_seconds_percentiles")

FIGURES = (
    Figure("generate (lk generate)", ("workload", "generate_lines_per_s"), "lines/s"),
    Figure("produce events (lk produce)", ("workload", "produce", "events", "records_per_s"), "/s"),
    Figure(
        "archive log -> master dataset", ("batch", "archive", "records_per_s"), "records/s", 100_000
    ),
    Figure(
        f"Lambda batch recompute ({len(VIEW_NAMES)} views)",
        ("batch", "events_per_s"),
        "events/s",
        1e6,
    ),
    Figure("  run_batch, quality gates too", ("batch", "run_batch_events_per_s"), "events/s"),
    Figure("  DuckDB reference, same files", ("duckdb", "events_per_s"), "events/s"),
    Figure("  DuckDB views only (loaded)", ("duckdb", "views_events_per_s"), "events/s"),
    Figure("  DuckDB = Spark (views equal)", ("duckdb", "views_equal"), f"of {len(VIEW_NAMES)}"),
    Figure("Speed layer sustained", ("speed", "sustained_events_per_s"), "events/s", 30_000),
    Figure("  freshness p50", ("speed", "freshness_s", "p50"), "s"),
    Figure("  freshness p99", ("speed", "freshness_s", "p99"), "s", 10.0, at_most=True),
    Figure(
        "  micro-batch p50", ("speed", "engine_phases", "batch_seconds_percentiles", "p50"), "s"
    ),
    Figure(
        "  micro-batch p99", ("speed", "engine_phases", "batch_seconds_percentiles", "p99"), "s"
    ),
    Figure(
        "  stream CPU a micro-batch, first 30 s",
        ("speed", "stream_cpu", "first_window", "cpu_s_per_micro_batch"),
        "CPU-s",
    ),
    Figure(
        "  stream CPU a micro-batch, last 30 s",
        ("speed", "stream_cpu", "last_window", "cpu_s_per_micro_batch"),
        "CPU-s",
        0.3,
        at_most=True,
    ),
    Figure("  stream CPU, last 30 s", ("speed", "stream_cpu", "last_window", "cores"), "cores"),
    *_api_aim("API filtered query", "filtered", api.FILTERED_AIM),
    *_api_aim("API 1,000-row page", "page_1000", api.PAGE_AIM),
    *_api_aim("API 304 revalidation", "revalidation_304", api.REVALIDATION_AIM),
    Figure("  GET /health p99 at 2,000/s (floor)", ("api", "health_floor", "p99_ms"), "ms"),
    Figure("  API CPU per filtered query", ("api", "filtered", "server_cpu_ms_per_request"), "ms"),
    Figure("API highest rate at p99 <= 10 ms", ("api", "highest_rate_held_p99_10ms"), "req/s"),
    Figure("  pgbench -S, same run", ("api", "pgbench_select_only", "tps"), "tx/s"),
    Figure("  API / pgbench -S", ("api", "ratio_to_pgbench"), "ratio"),
    Figure("Changes captured (one connector)", ("cdc", "load", "capture_rate_per_s"), "/s", 2_000),
    Figure("  commit to Kafka p50", ("cdc", "load", "lag_p50_s"), "s"),
    Figure("  commit to Kafka p99", ("cdc", "load", "lag_p99_s"), "s"),
    Figure("  Kafka Connect idle CPU", ("cdc", "idle", "cpu_share_of_a_core"), "cores"),
    Figure("  Kafka Connect idle RSS", ("cdc", "idle", "rss_mib"), "MiB"),
    Figure(
        "Kappa replay from offset 0",
        ("replay", "replay_events_per_s"),
        "events/s",
        150_000,
        complete=("replay", "complete"),
    ),
    Figure("  replay / a plain Kafka consumer", ("replay", "replay_vs_plain_consumer"), "ratio"),
    Figure("  reprocess start -> switch", ("replay", "seconds_to_switch"), "s"),
    Figure("  Lambda recompute, same history", ("batch", "seconds"), "s"),
    Figure("  Lambda run_batch, same history", ("batch", "run_batch_seconds"), "s"),
    Figure("Stack peak RSS (sum)", ("rss", "peak_total_gib"), "GiB", 8.0, at_most=True),
)


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value < 100:
        return f"{value:,.2f}"
    if isinstance(value, int | float):
        return f"{value:,.0f}"
    return "-" if value is None else str(value)


def table(results: dict[str, Any]) -> str:
    lines = [f"{'figure':<38} {'measured':>14} {'unit':<9} {'aim':>14}  verdict"]
    lines.append("-" * len(lines[0]))
    for figure in FIGURES:
        value = figure.value(results)
        aim = ""
        verdict = ""
        if figure.aim is not None:
            aim = ("<= " if figure.at_most else ">= ") + _number(figure.aim)
            if isinstance(value, int | float) and not isinstance(value, bool):
                met = value <= figure.aim if figure.at_most else value >= figure.aim
                verdict = "met" if met else "NOT met"
            else:
                verdict = "not measured"
        label = figure.label
        if figure.complete and figure.value(results, figure.complete) is False:
            label += " (partial)"
        lines.append(f"{label:<38} {_number(value):>14} {figure.unit:<9} {aim:>14}  {verdict}")
    return "\n".join(lines)


def state_lines(results: dict[str, Any]) -> str:
    """The Kappa replay's keyed state at its end, per view (its partials and its totals, the
    view rows' summed contributions): rows and bytes in the serving store."""
    views = results.get("replay", {}).get("state", {}).get("views", {})
    if not views:
        return "Keyed state after the replay: not measured"
    lines = ["Keyed state after the replay (rows, MB in stream_state):"]
    for name, size in views.items():
        lines.append(f"  {name:<30} {size['rows']:>12,} {size['bytes'] / 1e6:>10,.1f}")
    dedup = results["replay"]["state"].get("dedup_checkpoint_bytes")
    if dedup is not None:
        lines.append(f"  {'deduplication (checkpoint)':<30} {'':>12} {dedup / 1e6:>10,.1f}")
    return "\n".join(lines)


def cpu_lines(results: dict[str, Any], groups: int = 4) -> str:
    """Each step's share of the machine's CPU that was busy, and its largest users."""
    lines = ["CPU by step (busy share of the machine; CPU-seconds of the largest users):"]
    for step, used in results.get("cpu", {}).items():
        busy, idle = used.get("busy_s", 0.0), used.get("idle_s", 0.0)
        if busy + idle <= 0:
            continue
        top = list(used["groups_cpu_s"].items())[:groups]
        users = ", ".join(f"{name} {seconds:,.0f}" for name, seconds in top)
        lines.append(
            f"  {step:<10} {busy / (busy + idle):4.0%} of {busy + idle:,.0f} CPU-s: {users}"
        )
    return "\n".join(lines)


def _kind() -> str:
    """The CPU's model, and whether Linux runs under a hypervisor (the `hypervisor` flag)."""
    model, virtual = platform.processor() or "unknown CPU", False
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            model = value.strip()
        elif key.strip() == "flags":
            virtual = "hypervisor" in value.split()
    return f"{'a virtual machine' if virtual else 'a physical machine'}, {model}"


def machine() -> dict[str, Any]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(memory / GIB, 1),
        "kind": _kind(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


class Results:
    """The results so far, saved to `path` as JSON whenever a step ends (so an interrupted run
    still leaves what it measured)."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        tmp.replace(self.path)
