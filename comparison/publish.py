"""Publish a comparison's report beside the Data Docs, and record where it is.

    url = publish(settings, out_dir)    # out_dir holds report.html and comparison.json

Both files go to the Data Docs bucket (`dq_bucket`) under `comparison/<run>/`, a folder per run
named from its `created_at` (publishing the same run again replaces its files), in one folder
because the page links to its JSON by a relative name. The prefix is readable anonymously,
by the same bucket policy as the Data Docs (`quality.docs.open_public_prefixes`). The
addresses go to the serving store (`core.store.comparison_reports`) with the run's verdict
(`comparison.verdict`, computed here from the JSON: the API reads only Postgres and never the
run), which the API's `GET /v1/comparison` and its dashboard read.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from comparison.errors import ComparisonError
from comparison.figures import ComparisonRun
from comparison.report import JSON_FILE, REPORT_FILE
from comparison.verdict import verdict
from core.provision import s3_client
from core.settings import Settings
from core.store import comparison_reports
from core.store.connection import connect
from quality.docs import COMPARISON_PREFIX, open_public_prefixes

CONTENT_TYPES: Final = {
    REPORT_FILE: "text/html; charset=utf-8",
    JSON_FILE: "application/json",
}


def run_folder(run: ComparisonRun) -> str:
    """The run's folder under the prefix: its `created_at` in letters and digits only
    (`2026-11-24T16:00:00Z` → `20261124T160000Z`), or the time of publication without one."""
    name = re.sub(r"[^0-9A-Za-z]", "", run.created_at)
    return name or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def publish(settings: Settings, out_dir: Path, *, client: Any = None) -> str:
    """Upload `out_dir`'s report and JSON to MinIO, record their addresses in the serving
    store with the run's verdict; returns the report's URL, readable by anyone."""
    missing = [name for name in CONTENT_TYPES if not (out_dir / name).is_file()]
    if missing:
        raise ComparisonError(f"nothing to publish in {out_dir}: no {' or '.join(missing)}")
    run = ComparisonRun.read(out_dir / JSON_FILE)
    folder = f"{COMPARISON_PREFIX}{run_folder(run)}/"
    s3 = client or s3_client(settings)
    bucket = settings.dq_bucket
    open_public_prefixes(s3, bucket)
    # The JSON first: once the page is there, its link works.
    for name in (JSON_FILE, REPORT_FILE):
        s3.put_object(
            Bucket=bucket,
            Key=folder + name,
            Body=(out_dir / name).read_bytes(),
            ContentType=CONTENT_TYPES[name],
        )
    base = f"{settings.s3_endpoint}/{bucket}/{folder}"
    url, json_url = base + REPORT_FILE, base + JSON_FILE
    with connect(settings) as conn:
        comparison_reports.record_report(conn, url, json_url, [asdict(row) for row in verdict(run)])
    return url
