"""The cluster's Prometheus (infra/prometheus.py) as the tests read it: its HTTP API through a
port-forward of its Service."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class PrometheusApi:
    url: str

    def get(self, path: str, **params: str) -> Any:
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=30)
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    def targets(self) -> list[dict[str, Any]]:
        return list(self.get("targets", state="active")["activeTargets"])

    def names(self) -> set[str]:
        return set(self.get("label/__name__/values"))

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.get("query", query=expr)["result"])

    def wait_for(self, what: str, check: Any, timeout_s: float = 180) -> Any:
        """`check()`'s first truthy answer; after `timeout_s`, an AssertionError with its last."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = check()
            if found or time.monotonic() > deadline:
                assert found, f"{what}: not within {timeout_s:.0f} s (last: {found!r})"
                return found
            time.sleep(5)
