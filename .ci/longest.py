"""Each lane's longest tests, from the report logs its pytest writes as it goes
(`--report-log`, pytest-reportlog: a JSON line per test phase): the table `.ci/run` prints at
its end, or when it is stopped, since a log read half-way still holds every test that ended
(docs/BENCHMARKS.md keeps the tables' history).

    python .ci/longest.py out/ci/local.jsonl out/ci/cluster.jsonl [--top 12]

A test's time is the sum of its phases: setup (a module's fixture counts in its first test),
call and teardown.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def tests_of(path: Path) -> tuple[list[tuple[float, str]], str | None]:
    """(seconds, module::test) of every test with a phase in the log, and the last phase's
    test and name (where a stopped lane was)."""
    seconds: dict[str, float] = defaultdict(float)
    last = None
    for line in path.read_text().splitlines():
        try:
            report = json.loads(line)
        except json.JSONDecodeError:  # the line being written when the lane was stopped
            continue
        if report.get("$report_type") != "TestReport":
            continue
        name = report["nodeid"].rsplit("/", 1)[-1]
        seconds[name] += float(report.get("duration", 0.0))
        last = f"{name} ({report.get('when')}, {report.get('outcome')})"
    return [(s, name) for name, s in seconds.items()], last


def table(lane: str, cases: list[tuple[float, str]], last: str | None, top: int) -> str:
    total = sum(seconds for seconds, _ in cases)
    lines = [
        f"{lane}: {len(cases)} tests, {total / 60:.1f} min of test time; the last reported: "
        f"{last or 'none'}; the longest:",
        f"  {'s':>7}  test",
    ]
    for seconds, name in sorted(cases, reverse=True)[:top]:
        lines.append(f"  {seconds:7.0f}  {name}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    for path in args.files:
        if not path.exists():
            print(f"{path.stem}: no report (the lane stopped before its tests began)")
            continue
        print(table(path.stem, *tests_of(path), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
