"""Data Docs hold every gate, wherever it ran: a validation in one process with a Great
Expectations folder of its own (as a step pod has, in its /tmp) appears in the Data Docs that
another process builds and publishes (as `dq-docs` does in the scheduler), through the object
store (`quality.result_store`) on the real MinIO.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.provision import s3_client
from core.settings import Settings
from quality import docs, publish_docs, result_store
from tests.conftest import ROOT
from tests.integration.helpers import settings_env

STEP_POD = """
from core.settings import get_settings
from quality import gate

rows = [{"page": "/", "window_start": "2026-11-01T09:00:00Z",
         "window_end": "2026-11-01T09:01:00Z", "count": 2}]
gate("batch_views.page_views", rows, settings=get_settings(), layer="lambda-batch",
     run_name="scheduled__2026-11-01T10:00:00+00:00")
"""


@pytest.fixture
def shared(stack: Settings, tmp_path: Path) -> Iterator[tuple[Settings, Settings]]:
    """Two projects (a step pod's, the scheduler's) on one Data Docs bucket of the test's own."""
    bucket = f"dq-shared-{uuid.uuid4().hex[:6]}"
    s3 = s3_client(stack)
    s3.create_bucket(Bucket=bucket)
    pod, scheduler = (
        stack.model_copy(update={"dq_bucket": bucket, "stack_dir": tmp_path / name})
        for name in ("pod", "scheduler")
    )
    try:
        yield pod, scheduler
    finally:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for page in pages:
            for item in page.get("Contents", []):
                s3.delete_object(Bucket=bucket, Key=item["Key"])
        s3.delete_bucket(Bucket=bucket)


def test_a_gate_run_in_another_process_is_in_the_published_data_docs(
    shared: tuple[Settings, Settings], tmp_path: Path
) -> None:
    pod, scheduler = shared
    # A script file, as `lk step` is, not `python -c`: Great Expectations imports
    # pyspark.sql.connect, whose dependency check takes a __main__ without a file for a doctest
    # run and exits 0 on the spot when Spark Connect's libraries are absent (they are: the
    # project uses classic PySpark only).
    script = tmp_path / "step_pod.py"
    script.write_text(STEP_POD)
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={**os.environ, **settings_env(pod)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    s3 = s3_client(scheduler)
    listed = s3.list_objects_v2(Bucket=scheduler.dq_bucket, Prefix=result_store.PREFIX)
    assert [o["Key"] for o in listed.get("Contents", [])], "the pod's result is in the bucket"
    assert not (scheduler.stack_path / "dq").exists()  # nothing shared through the disk

    url = publish_docs(scheduler)
    landing = httpx.get(url, timeout=10)
    assert landing.status_code == 200
    assert "batch_views.page_views" in landing.text
    assert "scheduled__2026-11-01T10-00-00-00-00" in landing.text  # the pod's run
    [result] = docs.stored_results(scheduler)
    page = httpx.get(url.removesuffix("index.html") + result.page, timeout=10)
    assert page.status_code == 200  # Great Expectations' own page of the pod's result
    # The results themselves stay private: only docs/ and comparison/ are public.
    [key] = [o["Key"] for o in listed["Contents"]]
    private = httpx.get(f"{scheduler.s3_endpoint}/{scheduler.dq_bucket}/{key}", timeout=10)
    assert private.status_code == 403
