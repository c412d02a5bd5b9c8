"""The serving API's connection pool across a restart of the store: requests get 503 while
Postgres is down and answers again once it is back, with the same app (no process restart).

Postgres here is one of this test's own (its own folder and port), so stopping it disturbs no
other test; nothing else of the stack is needed.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from core.settings import Settings
from core.store.connection import connect
from core.store.schema import create_all
from core.times import parse_iso, to_timestamp
from infra.stack.postgres import Postgres
from serving.main import create_app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def own_postgres(stack_env: dict[str, str]) -> Iterator[tuple[Postgres, Settings]]:
    home = Path(tempfile.mkdtemp(prefix="lk-restart-"))
    home.chmod(0o755)  # Postgres runs as `postgres` when the tests run as root
    settings = Settings(
        home=home,
        stack_dir=home / "stack",
        cache_dir=Path(stack_env["LK_CACHE_DIR"]),
        postgres_port=_free_port(),
        serve_pool_timeout_s=1.0,
    )
    postgres = Postgres(settings)
    try:
        postgres.up()
        yield postgres, settings
    finally:
        postgres.stop()
        shutil.rmtree(home, ignore_errors=True)


def _seed(settings: Settings) -> None:
    with connect(settings) as conn:
        create_all(conn)
        conn.execute("insert into view_alias (architecture, version) values ('kappa', 1)")
        conn.execute(
            "insert into rt_page_views (stream, page, window_start, window_end, count) "
            "values ('kappa-v1', '/a', %s, %s, 7)",
            (to_timestamp(parse_iso("2026-11-01T10:00:00Z")),) * 2,
        )


def test_the_pool_survives_a_store_restart(own_postgres: tuple[Postgres, Settings]) -> None:
    postgres, settings = own_postgres
    _seed(settings)
    params = {"architecture": "kappa"}
    with TestClient(create_app(settings)) as client:
        answer = client.get("/v1/views/page_views", params=params)
        assert answer.status_code == 200, answer.text
        rows = answer.json()["rows"]
        assert [row["count"] for row in rows] == [7]

        postgres.stop()
        for _ in range(3):
            started = time.monotonic()
            response = client.get("/v1/views/page_views", params=params)
            assert response.status_code == 503, response.text
            assert "the serving store is unavailable" in response.json()["detail"]
            # No request hangs: a broken connection fails at once, a missing one after the
            # pool's timeout (1 s here).
            assert time.monotonic() - started < 10
        assert client.get("/health").status_code == 200  # the process itself is fine
        assert client.get("/metrics").status_code == 200

        postgres.up()
        deadline = time.monotonic() + 60
        while (response := client.get("/v1/views/page_views", params=params)).status_code != 200:
            assert response.status_code == 503, response.text
            assert time.monotonic() < deadline, "the API did not recover"
            time.sleep(0.2)
        # Recovered for good: every connection of the pool works again.
        for _ in range(20):
            response = client.get("/v1/views/page_views", params=params)
            assert response.status_code == 200, response.text
            assert response.json()["rows"] == rows
        metrics = client.get("/metrics").text
        assert 'lk_serving_pool_errors_total{kind="' in metrics
