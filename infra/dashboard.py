"""The chart's Grafana dashboard (charts/lambda-kappa/dashboards/lambda-kappa.json) outside
Grafana: its panels and queries, and a preview drawn from a Prometheus's answers to them.

Grafana is AGPL and not packaged here, so the picture in the README is this preview: each
panel's own PromQL, over the last minutes, from the Prometheus that scraped the release
(`make cluster-prometheus`; the real-cluster tests draw one after each run), laid out on the
dashboard's grid. In Grafana the same panels look alike, with its styling.

    python -m infra.dashboard --prometheus http://127.0.0.1:9090 --out dashboard.png
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import httpx

FILE: Final = (
    Path(__file__).resolve().parents[1]
    / "charts"
    / "lambda-kappa"
    / "dashboards"
    / "lambda-kappa.json"
)
# Grafana's variables, given values any Prometheus accepts: every namespace, a one-minute rate.
VARIABLES: Final = {"$__rate_interval": "1m", "$namespace": ".*"}
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")

Series = tuple[dict[str, str], list[tuple[float, float]]]
"""One answer of a range query: its labels and its (time, value) points."""
QueryRange = Callable[[str], list[Series]]


def load(path: Path = FILE) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def query(target: dict[str, Any]) -> str:
    """A target's PromQL with Grafana's variables replaced."""
    expr = str(target["expr"])
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def expressions(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL) of every query of the dashboard."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield panel["title"], query(target)


def legend(template: str, labels: dict[str, str]) -> str:
    """A series' name in the legend: Grafana's `{{label}}` template filled in."""
    return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), template).strip() or "value"


def prometheus_range(url: str, minutes: float, step_s: float = 15) -> QueryRange:
    """Range queries over the last `minutes` against the Prometheus at `url`."""
    end = time.time()
    start = end - minutes * 60

    def run(expr: str) -> list[Series]:
        params = {"query": expr, "start": str(start), "end": str(end), "step": str(step_s)}
        response = httpx.get(f"{url}/api/v1/query_range", params=params, timeout=60)
        response.raise_for_status()
        return [
            (dict(r["metric"]), [(float(t), float(v)) for t, v in r["values"]])
            for r in response.json()["data"]["result"]
        ]

    return run


def draw(dashboard: dict[str, Any], run: QueryRange, out: Path) -> int:
    """The panels on the dashboard's grid (24 columns), each with its queries' series; returns
    how many panels had data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    laid = [p for p in panels(dashboard)]
    top = 2  # grid units above the first row, for the dashboard's title
    height = top + max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in laid)
    plt.style.use("dark_background")
    fig = plt.figure(figsize=(20, height * 0.28))
    fig.suptitle(dashboard["title"], x=0.01, ha="left", fontsize=16)
    with_data = 0
    now = time.time()  # every panel's time axis: minutes before the drawing
    for panel in laid:
        g = {**panel["gridPos"], "y": panel["gridPos"]["y"] + top}
        box = (g["x"] / 24 + 0.005, 1 - (g["y"] + g["h"]) / height + 0.01,
               g["w"] / 24 - 0.03, g["h"] / height - 0.045)  # fmt: skip
        if panel["type"] == "row":
            fig.text(0.01, 1 - (g["y"] + 0.8) / height, panel["title"], fontsize=13,
                     weight="bold", color="#8ab8ff")  # fmt: skip
            continue
        ax = fig.add_axes(box)
        ax.set_title(panel["title"], fontsize=9, loc="left")
        ax.tick_params(labelsize=7)
        drawn = 0
        for target in panel.get("targets", []):
            for labels, points in run(query(target)):
                if points:
                    ax.plot([(t - now) / 60 for t, _ in points], [v for _, v in points],
                            label=legend(target.get("legendFormat", ""), labels))  # fmt: skip
                    drawn += 1
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        ax.set_ylabel(unit, fontsize=7)
        ax.set_xlabel("minutes ago", fontsize=7)
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        if drawn:
            with_data += 1
            ax.legend(fontsize=6, loc="upper left", ncol=2, framealpha=0.3)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return with_data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.dashboard", description=__doc__)
    parser.add_argument("--prometheus", required=True, help="its URL (e.g. a port-forward)")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--minutes", type=float, default=30, help="the time range drawn")
    args = parser.parse_args(argv)
    try:
        n = draw(load(), prometheus_range(args.prometheus, args.minutes), args.out)
    except httpx.HTTPError as exc:
        print(f"lk: error: Prometheus at {args.prometheus}: {exc}", file=sys.stderr)
        return 1
    print(f"{args.out}: {n} panels with data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
