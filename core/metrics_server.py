"""The Prometheus exposition server of a long-running driver (`lk stream`, `lk archive`).

prometheus_client's own HTTP server, on a daemon thread, serving the process's default
registry at ``/metrics`` (every path answers the same) on ``LK_METRICS_PORT``. The metrics
themselves are defined beside their concept (``stream_engine.metrics``,
``batch_layer.metrics``); this module only decides where they are served.
"""

from __future__ import annotations

from core.settings import Settings


def bind_address(settings: Settings) -> str:
    """`metrics_host` (the chart: every interface, a pod is scraped on its IP), else `host`
    (loopback locally)."""
    return settings.metrics_host or settings.host


def start(settings: Settings) -> str | None:
    """Serve the metrics when `metrics_port` is set; where (``host:port``), else None.
    Raises OSError when the address cannot be listened on."""
    if settings.metrics_port is None:
        return None
    from prometheus_client import start_http_server

    address = bind_address(settings)
    start_http_server(settings.metrics_port, addr=address)
    return f"{address}:{settings.metrics_port}"
