"""Validation results in the object store, where `dq-docs` reads every process's.

Great Expectations writes a result into the project folder of the process that validated
(``quality.context.validations_dir``): the scheduler's, a step pod's ``/tmp``, a developer's
stack. ``validate`` therefore copies each new result to ``s3://<dq_bucket>/validations/`` right
after writing it, under the same relative path, and ``build_docs`` first fetches the results it
lacks into its own folder, so Great Expectations builds the site from all of them. Pruning
(``quality.docs._prune``) deletes a result in both places.

A result file is written once per (suite, run, batch), so a path present locally is the same
result: only missing ones are fetched. ``Settings.dq_share_results`` off keeps everything local.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import quality.context as ctx
from core.provision import s3_client
from core.settings import Settings

PREFIX: Final = "validations/"
"""Where results go in the Data Docs bucket; never public (``quality.docs.PUBLIC_PREFIXES``)."""


def snapshot(store: Path) -> dict[Path, int]:
    """Each result file of a local store with its modification time (ns)."""
    if not store.is_dir():
        return {}
    return {p: p.stat().st_mtime_ns for p in store.rglob("*.json")}


def written_since(store: Path, before: dict[Path, int]) -> list[Path]:
    """The result files written (new or rewritten) since ``before``."""
    return sorted(p for p, mtime in snapshot(store).items() if before.get(p) != mtime)


def _key(store: Path, path: Path) -> str:
    return PREFIX + path.relative_to(store).as_posix()


def upload(settings: Settings, paths: Iterable[Path], *, client: Any = None) -> list[str]:
    """Copy these result files of the local store to the bucket; returns their keys."""
    store = ctx.validations_dir(settings)
    paths = list(paths)
    if not paths:
        return []
    s3 = client or s3_client(settings)
    keys = []
    for path in paths:
        key = _key(store, path)
        s3.put_object(
            Bucket=settings.dq_bucket,
            Key=key,
            Body=path.read_bytes(),
            ContentType="application/json",
        )
        keys.append(key)
    return keys


def download(settings: Settings, *, client: Any = None) -> list[Path]:
    """Fetch the bucket's results that the local store lacks; returns the new local paths."""
    store = ctx.validations_dir(settings).resolve()
    s3 = client or s3_client(settings)
    fetched = []
    if not _exists(s3, settings.dq_bucket):
        return []  # nothing validated with sharing on yet (publishing creates the bucket)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=settings.dq_bucket, Prefix=PREFIX)
    for page in pages:
        for item in page.get("Contents", []):
            key = item["Key"]
            path = (store / key.removeprefix(PREFIX)).resolve()
            if not key.endswith(".json") or not path.is_relative_to(store):
                continue  # not a result, or a key that would leave the store
            if path.exists():
                continue
            body = s3.get_object(Bucket=settings.dq_bucket, Key=key)["Body"].read()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
            fetched.append(path)
    return fetched


def _exists(s3: Any, bucket: str) -> bool:
    return bucket in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}


def delete(settings: Settings, relative: Iterable[Path], *, client: Any = None) -> int:
    """Delete these results (paths relative to the store) from the bucket; returns how many."""
    keys = [PREFIX + p.as_posix() for p in relative]
    if not keys:
        return 0
    s3 = client or s3_client(settings)
    for start in range(0, len(keys), 1000):  # the S3 limit per delete request
        batch = [{"Key": k} for k in keys[start : start + 1000]]
        s3.delete_objects(Bucket=settings.dq_bucket, Delete={"Objects": batch, "Quiet": True})
    return len(keys)
