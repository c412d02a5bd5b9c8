"""`python -m speed_layer [--architecture lambda|kappa] [--available-now]`: the stream job.

The same as `lk stream`; see `speed_layer.service`.
"""

from __future__ import annotations

import argparse
import sys

from core.settings import Architecture, get_settings
from speed_layer.service import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed_layer", description=__doc__)
    parser.add_argument("--architecture", choices=["lambda", "kappa"], default=None)
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process what is in the log now (Lambda: and hand off), then exit",
    )
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    settings = get_settings()
    architecture = args.architecture or (
        "kappa" if settings.architecture == Architecture.KAPPA else "lambda"
    )
    try:
        run(
            settings,
            architecture,
            available_now=args.available_now,
            trigger_seconds=args.trigger_seconds,
            poll_s=args.poll_seconds,
            echo=lambda line: print(line, flush=True),
        )
    except RuntimeError as exc:
        print(f"stream job failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
