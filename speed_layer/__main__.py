"""Run the Lambda speed layer as a service: `python -m speed_layer [--available-now]`.

It processes the log continuously (a micro-batch every `--trigger-seconds`) and, between
micro-batches, hands off to any batch version the batch layer has marked ready. SIGTERM or
Ctrl-C stops the query after the micro-batch in flight; the checkpoint and the serving store's
progress make the next start resume exactly where this one committed.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from core.settings import get_settings
from core.spark import build_spark_session
from speed_layer.lambda_speed import SpeedLayer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed_layer", description=__doc__)
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process what is in the log now, hand off, and exit",
    )
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    parser.add_argument(
        "--handoff-every",
        type=float,
        default=5.0,
        help="seconds between checks for a ready batch version",
    )
    args = parser.parse_args(argv)

    settings = get_settings()
    spark = build_spark_session(settings, "lk-speed-layer")
    speed = SpeedLayer(spark, settings)
    if args.available_now:
        speed.drain()
        return 0

    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    query = speed.engine.start(available_now=False, trigger_seconds=args.trigger_seconds)
    print(f"speed layer running ({query.name}); stop with SIGTERM", flush=True)
    try:
        while not stopping.is_set() and query.isActive:
            speed.handoff()
            stopping.wait(args.handoff_every)
    finally:
        query.stop()
        spark.stop()
    if query.exception() is not None:
        print(f"speed layer failed: {query.exception()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
