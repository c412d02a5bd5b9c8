"""`lk serve --architecture lambda|kappa|both [--port P] [--host H] [--workers N]
[--access-log]`: run the serving API.

The API reads only the serving store (Postgres). `--architecture` is what a request without
`?architecture=` reads (`both`: Lambda); either architecture can always be asked for by name.
The store is checked (and its tables created) before the server starts, so an unreachable
Postgres or a busy port fails with one line instead of a traceback. Stop it with Ctrl-C or
SIGTERM: uvicorn finishes the requests in flight, then `lk serve` exits 0.

It runs one worker process per core (`--workers`, `LK_SERVE_WORKERS`): uvicorn's supervisor
shares the listening socket among them, each builds its own app and connection pool from the
environment (`serving.main:app_from_environment`), and their Prometheus metrics meet in a
folder of this run (`PROMETHEUS_MULTIPROC_DIR`, removed at the end).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
from types import FrameType
from typing import Any

import click

from core.settings import Architecture, Settings
from core.store.connection import check_readable
from lk.errors import fail, guarded
from serving.filters import default_architecture

WORKER_HEALTHCHECK_TIMEOUT_S = 60


class _Stopped(BaseException):  # like KeyboardInterrupt: not caught by `except Exception`
    """SIGINT or SIGTERM, re-raised by uvicorn once it has shut down gracefully."""


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise _Stopped(signal.Signals(signum).name)


def _run_workers(settings: Settings, host: str, port: int, workers: int) -> str | None:
    """Run `workers` processes under uvicorn's supervisor until a signal stops them; returns
    that signal's name, or None when the workers could not start."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    class Supervisor(Multiprocess):
        stopped_by: str | None = None

        def handle_int(self) -> None:
            self.stopped_by = "SIGINT"
            super().handle_int()

        def handle_term(self) -> None:
            self.stopped_by = "SIGTERM"
            super().handle_term()

    # Each worker builds its settings from the environment: what `settings` overrode goes there.
    os.environ["LK_ARCHITECTURE"] = settings.architecture.value
    own_metrics_dir = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if own_metrics_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="lk-serve-metrics-")
    config = uvicorn.Config(
        "serving.main:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="info",
        access_log=settings.serve_access_log,
        # The supervisor kills a worker that has not answered its ping in this long, and a
        # starting worker answers only once its imports are done: 2.4 s here when idle, more
        # than uvicorn's 5 s on a busy node, where workers would then be killed in a loop.
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_TIMEOUT_S,
    )
    try:
        supervisor = Supervisor(config, sockets=[config.bind_socket()])
        supervisor.run()
        return supervisor.stopped_by
    finally:
        if own_metrics_dir:
            shutil.rmtree(os.environ.pop("PROMETHEUS_MULTIPROC_DIR"), ignore_errors=True)


def _check_port_free(host: str, port: int) -> None:
    """Fail now, in one line, if the address cannot be listened on (uvicorn would log it)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


@click.command()
@click.option(
    "--architecture",
    type=click.Choice([a.value for a in Architecture]),
    default=None,
    help="What requests read by default (both: lambda). Default: LK_ARCHITECTURE.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port to listen on (default: LK_SERVE_PORT, 8000).",
)
@click.option("--host", default=None, help="Address to listen on (default: LK_HOST, 127.0.0.1).")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default: LK_SERVE_WORKERS, else one per core).",
)
@click.option(
    "--access-log/--no-access-log",
    default=None,
    help="One log line per request (default: LK_SERVE_ACCESS_LOG, off; GET /metrics has the "
    "latencies).",
)
@click.pass_obj
@guarded
def serve(
    settings: Settings,
    architecture: str | None,
    port: int | None,
    host: str | None,
    workers: int | None,
    access_log: bool | None,
) -> None:
    """Run the serving API (GET /v1/views/{view}, /v1/quality, /v1/comparison, /health,
    /metrics) and its dashboard at / until interrupted."""
    import psycopg
    import uvicorn

    from serving.main import create_app  # deferred: fastapi

    if architecture is not None:
        settings = settings.model_copy(update={"architecture": Architecture(architecture)})
    if access_log is not None:
        settings = settings.model_copy(update={"serve_access_log": access_log})
    host = host or settings.host
    port = port or settings.serve_port
    workers = workers or settings.serve_worker_count

    try:
        check_readable(settings)  # as the serving layer's read-only login, creating nothing
    except psycopg.OperationalError as exc:
        reason = " ".join(str(exc).split())
        fail(
            f"cannot reach the serving store at {settings.host}:{settings.postgres_port} "
            f"(is the stack up? `lk stack up`): {reason}"
        )
    except psycopg.errors.UndefinedTable:
        fail("the serving store has no tables yet: run `lk init`")
    except psycopg.errors.InsufficientPrivilege:
        fail(f"{settings.serving_postgres_user} may not read the serving store: run `lk init`")
    _check_port_free(host, port)
    click.echo(
        f"serving {settings.architecture.value} views (default: "
        f"{default_architecture(settings)}) on http://{host}:{port} with {workers} "
        f"worker{'s' if workers > 1 else ''} (Ctrl-C to stop)",
        err=True,
    )
    # uvicorn handles SIGINT/SIGTERM itself (finishing requests in flight), then re-raises the
    # signal for its caller (one process) or returns (its supervisor, several): a requested
    # stop is a normal end here, exit 0.
    previous: dict[int, Any] = {
        sig: signal.signal(sig, _stopped) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        if workers == 1:
            uvicorn.run(
                create_app(settings),
                host=host,
                port=port,
                log_level="info",
                access_log=settings.serve_access_log,
            )
        elif (stopped_by := _run_workers(settings, host, port, workers)) is not None:
            raise _Stopped(stopped_by)
        else:
            fail("the serving workers exited before serving (see the lines above)")
    except _Stopped as stop:
        click.echo(f"serving stopped ({stop})", err=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
