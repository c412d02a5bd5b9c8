"""kubectl and helm against the real cluster of `lk cluster up`, for the chart's tests.

Everything reaches the cluster through its API (the kubeconfig `lk cluster up` writes): the
serving API and Airflow's UI through `kubectl port-forward`, never through a pod's address.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class KubeError(AssertionError):
    """A kubectl or helm call failed; the message has its stderr."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Kube:
    kubeconfig: Path
    namespace: str
    kubectl_bin: str
    helm_bin: str

    def env(self) -> dict[str, str]:
        """The environment kubectl and helm run in: this cluster's kubeconfig."""
        import os

        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def run(
        self, argv: Sequence[str], *, timeout: float = 300, check: bool = True, stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            list(argv),
            env=self.env(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise KubeError(f"{' '.join(argv[:4])}...: {result.stderr.strip()[-2000:]}")
        return result

    def kubectl(self, *args: str, timeout: float = 300, check: bool = True, stdin: str = "") -> str:
        argv = [self.kubectl_bin, "--namespace", self.namespace, *args]
        return self.run(argv, timeout=timeout, check=check, stdin=stdin).stdout

    def helm(self, *args: str, timeout: float = 1800, check: bool = True) -> str:
        argv = [self.helm_bin, "--namespace", self.namespace, *args]
        return self.run(argv, timeout=timeout, check=check).stdout

    def get(self, kind: str, *args: str) -> Any:
        return json.loads(self.kubectl("get", kind, *args, "-o", "json"))

    def items(self, kind: str, *args: str) -> list[dict[str, Any]]:
        return list(self.get(kind, *args)["items"])

    def names(self, kind: str, *args: str) -> set[str]:
        return {item["metadata"]["name"] for item in self.items(kind, *args)}

    @contextlib.contextmanager
    def port_forward(self, target: str, port: int) -> Iterator[str]:
        """`kubectl port-forward` of `target` (e.g. `svc/lk-serving`); yields the local URL."""
        local = _free_port()
        argv = [
            self.kubectl_bin,
            "--namespace",
            self.namespace,
            "port-forward",
            target,
            f"{local}:{port}",
            "--address",
            "127.0.0.1",
        ]
        proc = subprocess.Popen(
            argv, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert proc.stderr is not None  # stderr=PIPE
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise KubeError(f"port-forward {target} ended: {proc.stderr.read()[-500:]}")
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", local), timeout=1),
                ):
                    break
                time.sleep(0.3)
            else:
                raise KubeError(f"port-forward {target} did not open in 60 s")
            yield f"http://127.0.0.1:{local}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
