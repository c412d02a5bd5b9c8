"""MinIO (S3 API) from a binary built with `go install`, or `MINIO_BINARY`."""

from __future__ import annotations

import urllib.request

from core.provision import ensure_buckets, s3_client
from infra.stack import artifacts
from infra.stack.service import Service, ServiceStatus


class MinIO(Service):
    name = "minio"

    @property
    def port(self) -> int:
        return self.settings.minio_port

    def prepare(self) -> None:
        self.binary = artifacts.minio_binary(self.settings)
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)

    def launch(self) -> None:
        s = self.settings
        self.process.start(
            [
                str(self.binary),
                "server",
                str(self.data_dir / "data"),
                "--address",
                f"{s.host}:{s.minio_port}",
                "--console-address",
                f"{s.host}:{s.minio_console_port}",
                "--quiet",
            ],
            env={
                "MINIO_ROOT_USER": s.minio_access_key,
                "MINIO_ROOT_PASSWORD": s.minio_secret_key,
                "MINIO_BROWSER": "on",
                "MINIO_UPDATE": "off",
                "MINIO_CALLHOME_ENABLE": "off",
            },
        )

    def ready(self) -> bool:
        url = f"{self.settings.s3_endpoint}/minio/health/live"
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback URL
            return bool(response.status == 200)

    def provision(self) -> None:
        ensure_buckets(self.settings)

    def status(self) -> ServiceStatus:
        base = super().status()
        if not base.running:
            return base
        names = sorted(b["Name"] for b in s3_client(self.settings).list_buckets()["Buckets"])
        return ServiceStatus(
            base.name, True, base.owned, base.address, "buckets: " + ", ".join(names)
        )
