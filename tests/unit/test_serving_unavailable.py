"""The serving API's 503: a reason a client can act on, and never where the store is."""

from __future__ import annotations

import psycopg
from psycopg_pool import PoolTimeout

from core.settings import Settings
from core.store.connection import reader_pool
from serving.main import unavailable_reason


def test_each_failure_has_its_reason_without_host_or_port() -> None:
    refused = psycopg.OperationalError(
        'connection failed: connection to server at "10.1.2.3", port 5432 failed'
    )
    reasons = [
        unavailable_reason(PoolTimeout("couldn't get a connection after 2.00 sec")),
        unavailable_reason(psycopg.errors.QueryCanceled("canceling statement")),
        unavailable_reason(refused),
    ]
    assert len(set(reasons)) == 3
    assert not any("10.1.2.3" in r or "5432" in r for r in reasons)


def test_readers_run_under_a_statement_timeout() -> None:
    pool = reader_pool(Settings(serve_statement_timeout_ms=1234))
    assert isinstance(pool.kwargs, dict)
    assert "-c statement_timeout=1234" in pool.kwargs["options"]
