"""MinIO from Python, through pyarrow's S3 file system: files Spark does not need to write.

Spark reaches MinIO through s3a (``core.spark``); a driver writing or reading a small file of
its own (the speed layer's accepted log) goes through this, with the same endpoint and the
component's own credentials.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyarrow import fs

    from core.settings import Settings


def object_store(settings: Settings) -> fs.S3FileSystem:
    from pyarrow import fs  # deferred: pyarrow

    scheme, _, endpoint = settings.s3_endpoint.partition("://")
    return fs.S3FileSystem(
        access_key=settings.minio_access_key,
        secret_key=settings.minio_secret_key,
        endpoint_override=endpoint,
        scheme=scheme,
        region="us-east-1",
        # Retries ride out a MinIO restart, as s3a's do.
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=10),
    )
