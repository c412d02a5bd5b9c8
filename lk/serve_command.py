"""`lk serve --architecture lambda|kappa|both [--port P] [--host H]`: run the serving API.

The API reads only the serving store (Postgres). `--architecture` is what a request without
`?architecture=` reads (`both`: Lambda); either architecture can always be asked for by name.
The store is checked (and its tables created) before the server starts, so an unreachable
Postgres or a busy port fails with one line instead of a traceback. Stop it with Ctrl-C or
SIGTERM: uvicorn finishes the requests in flight, then `lk serve` exits 0.
"""

from __future__ import annotations

import signal
import socket
from types import FrameType

import click

from core.settings import Architecture, Settings
from lk.errors import fail, guarded


class _Stopped(BaseException):  # like KeyboardInterrupt: not caught by `except Exception`
    """SIGINT or SIGTERM, re-raised by uvicorn once it has shut down gracefully."""


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise _Stopped(signal.Signals(signum).name)


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
@click.pass_obj
@guarded
def serve(settings: Settings, architecture: str | None, port: int | None, host: str | None) -> None:
    """Run the serving API (GET /health, GET /v1/views/{view}) until interrupted."""
    import psycopg
    import uvicorn

    from serving.filters import default_architecture
    from serving.main import create_app, ensure_store

    if architecture is not None:
        settings = settings.model_copy(update={"architecture": Architecture(architecture)})
    host = host or settings.host
    port = port or settings.serve_port

    try:
        ensure_store(settings)
    except psycopg.OperationalError as exc:
        reason = " ".join(str(exc).split())
        fail(
            f"cannot reach the serving store at {settings.host}:{settings.postgres_port} "
            f"(is the stack up? `lk stack up`): {reason}"
        )
    _check_port_free(host, port)
    click.echo(
        f"serving {settings.architecture.value} views (default: "
        f"{default_architecture(settings)}) on http://{host}:{port} (Ctrl-C to stop)",
        err=True,
    )
    # uvicorn handles SIGINT/SIGTERM itself (finishing requests in flight), then re-raises the
    # signal for its caller: a requested stop is a normal end here, exit 0.
    previous = {sig: signal.signal(sig, _stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        uvicorn.run(create_app(settings), host=host, port=port, log_level="info")
    except _Stopped as stop:
        click.echo(f"serving stopped ({stop})", err=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
