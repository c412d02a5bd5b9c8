"""`airflow dags test`, many times in one process: what `tests/integration/test_dags.py` runs
its DAGs with.

Each run is the CLI's own `airflow dags test DAG_ID [-c CONF]` (parsed by Airflow's parser and
run by its command: the DAG parsed anew, every task in this process, as Airflow runs them), so
only what a process pays once is shared: Python and Airflow's imports, the `local` backend's
Spark session (``dags/lk_dags/backends.py``), Great Expectations' import. Those took about two
minutes of every run's time on two busy cores, where an empty log's run has nothing else to do.

Run as ``python -m tests.integration.dag_runner`` with Airflow's environment. One request a
line on stdin, JSON: ``{"argv": [...], "env": {...}, "log": PATH}``: `env` is set first (the
``LK_*`` settings of the run's deployment), the run's output (its tasks' logs) goes to `log`;
one answer a line on stdout: ``{"returncode": 0 | 1}``. It ends when stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO


@contextmanager
def output_to(path: str) -> Iterator[None]:
    """This process's stdout and stderr (the file descriptors: Airflow's and the task's
    loggers hold the streams) into `path` for the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def run(argv: list[str]) -> int:
    """`airflow ARGV` as the CLI runs it; its exit code."""
    from airflow.cli import cli_parser

    args = cli_parser.get_parser().parse_args(argv)
    try:
        args.func(args)
    except SystemExit as exit_:  # `dags test` exits so when the run failed
        return 0 if exit_.code in (None, 0) else 1
    except Exception:
        traceback.print_exc()
        return 1
    return 0


def serve(requests: TextIO, answers: TextIO) -> None:
    for line in requests:
        request: dict[str, Any] = json.loads(line)
        os.environ.update(request["env"])
        with output_to(request["log"]):
            code = run(request["argv"])
        answers.write(json.dumps({"returncode": code}) + "\n")
        answers.flush()


if __name__ == "__main__":
    # Answers on a copy of stdout taken now: the runs' own output goes to their logs.
    serve(sys.stdin, os.fdopen(os.dup(1), "w"))
