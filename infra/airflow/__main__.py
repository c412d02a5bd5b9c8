"""`python -m infra.airflow up|down|status`: the local Airflow (see infra/airflow/service.py)."""

from __future__ import annotations

import sys

from core.settings import get_settings
from infra.airflow import service
from infra.stack.process import StackError


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "status"
    settings = get_settings()
    try:
        if command == "up":
            service.up(settings)
        elif command == "down":
            service.down(settings)
        elif command == "status":
            states = service.status(settings)
            for state in states:
                running = f"running (pid {state.pid})" if state.pid else "not running"
                print(f"airflow {state.component}: {running}")
            return 0 if all(s.pid for s in states) else 1
        else:
            print("usage: python -m infra.airflow up|down|status", file=sys.stderr)
            return 2
    except StackError as exc:
        print(f"airflow: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
