"""The views as a user reads them on the cluster: through a port-forward of the serving Service,
reopened whenever it breaks (the serving pod, the store behind it or the whole node restarted).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import httpx

from core.catalog import VIEW_NAMES
from core.oracle import OracleResult
from infra.cluster.install import RELEASE
from tests.k8s.kube import Kube, KubeError
from tests.serving_pages import read_whole

SERVING = f"svc/{RELEASE}-serving"
ARCHITECTURES = ("lambda", "kappa")


class UnavailableError(Exception):
    """The API did not answer a view (no connection, or a 503 while its store is away)."""


class ServingReader:
    """Every view of an architecture through `kubectl port-forward svc/<release>-serving`; the
    forward is opened on first use and again after it broke."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._forward: contextlib.ExitStack | None = None
        self._client: httpx.Client | None = None

    def __enter__(self) -> ServingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._forward is not None:
            self._forward.close()
        self._client = self._forward = None

    def _open(self) -> httpx.Client:
        if self._client is None:
            forward = contextlib.ExitStack()
            try:
                url = forward.enter_context(self.kube.port_forward(SERVING, 8000))
            except (KubeError, OSError) as exc:  # the API server or the Service is not back yet
                forward.close()
                raise UnavailableError(f"port-forward: {exc}") from exc
            self._forward, self._client = forward, httpx.Client(base_url=url, timeout=30)
        return self._client

    def get(self, path: str, **params: str) -> httpx.Response:
        try:
            return self._open().get(path, params=params)
        except httpx.TransportError as exc:
            self.close()  # the next call opens a new forward
            raise UnavailableError(f"{path}: {type(exc).__name__}") from exc

    def view(self, view: str, architecture: str) -> dict[str, Any]:
        def get(path: str, params: dict[str, str]) -> httpx.Response:
            response = self.get(path, **params)
            if response.status_code == 503:
                raise UnavailableError(f"{path}: 503 {response.text[:200]}")
            return response

        return read_whole(get, view, architecture=architecture)

    def views(self, architecture: str) -> dict[str, dict[str, Any]]:
        return {view: self.view(view, architecture) for view in VIEW_NAMES}


def difference(view: str, answer: dict[str, Any], expected: list[dict[str, Any]]) -> str:
    """How a served answer differs from the oracle's rows: its meta, the counts, a few rows."""
    rows = answer["rows"]
    extra = [r for r in rows if r not in expected][:3]
    missing = [r for r in expected if r not in rows][:3]
    return (
        f"{view}: {len(rows)} rows served, {len(expected)} expected; meta {answer['meta']}\n"
        f"  served, not expected: {extra}\n  expected, not served: {missing}"
    )


def inexact(
    answers: dict[str, dict[str, dict[str, Any]]], expected: OracleResult
) -> dict[tuple[str, str], str]:
    """(architecture, view) -> how it differs, for every served view that is not the oracle's."""
    return {
        (arch, view): difference(view, answer, expected.views[view])
        for arch, by_view in answers.items()
        for view, answer in by_view.items()
        if answer["rows"] != expected.views[view]
    }


def wait_until_exact(
    reader: ServingReader,
    expected: OracleResult,
    timeout_s: float,
    *,
    poll_s: float = 3.0,
    architectures: tuple[str, ...] = ARCHITECTURES,
) -> tuple[float, dict[str, dict[str, dict[str, Any]]]]:
    """Poll until every view of `architectures` (default both) equals `expected`; the seconds
    it took and the answers. On timeout, an AssertionError with what differs (or why nothing
    answered)."""
    started = time.monotonic()
    why = "nothing read yet"
    while True:
        try:
            answers = {arch: reader.views(arch) for arch in architectures}
            off = inexact(answers, expected)
            if not off:
                return time.monotonic() - started, answers
            why = f"{len(off)} views differ: {sorted(off)}\n" + "\n".join(off.values())
        except UnavailableError as exc:
            why = f"the API did not answer: {exc}"
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not equal to the oracle within {timeout_s:.0f} s: {why}")
        time.sleep(poll_s)
