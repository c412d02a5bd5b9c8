"""Each lane's longest tests, from the JUnit XML files its pytest runs wrote: the table
`.ci/run` prints at its end (docs/BENCHMARKS.md keeps its history).

    python .ci/longest.py out/ci/local.xml out/ci/cluster.xml [--top 12]

A test's time is pytest's whole report of it: setup (a module's fixture counts in its first
test), call and teardown.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def tests_of(path: Path) -> list[tuple[float, str]]:
    """(seconds, module::test) of every test case in a JUnit XML file."""
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):  # noqa: S314 - pytest wrote it
        module = case.get("classname", "").rsplit(".", 1)[-1]
        found.append((float(case.get("time", "0")), f"{module}::{case.get('name', '?')}"))
    return found


def table(lane: str, cases: list[tuple[float, str]], top: int) -> str:
    total = sum(seconds for seconds, _ in cases)
    lines = [
        f"{lane}: {len(cases)} tests, {total / 60:.1f} min of test time; the longest:",
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
            print(f"{path.stem}: no report (the lane stopped before its tests ended)")
            continue
        print(table(path.stem, tests_of(path), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
