"""A comparison report published on the real stack: its page and JSON are on MinIO beside the
Data Docs, readable by anyone over plain HTTP (that prefix only); `GET /v1/comparison` and
`GET /v1/quality` link to the latest, and `GET /v1/comparison` answers its verdict; the serving
login reads where it is and writes nothing.

The module has its own serving database and Data Docs bucket; its tests run in file order.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient

from comparison.figures import ComparisonRun
from comparison.publish import publish
from comparison.report import write_report
from comparison.verdict import verdict
from core.provision import s3_client
from core.settings import Settings
from core.store.connection import connection_kwargs
from serving.main import create_app
from tests.isolation import drop_isolated, isolated_settings
from tests.unit.test_comparison_report import synthetic_run


@pytest.fixture(scope="module")
def published(stack: Settings) -> Iterator[Settings]:
    """An isolated namespace with a Data Docs bucket of its own, removed afterwards."""
    settings = isolated_settings(stack, "cmp").model_copy(
        update={"dq_bucket": f"dq-cmp-{uuid.uuid4().hex[:6]}"}
    )
    yield settings
    s3 = s3_client(settings)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.dq_bucket):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=settings.dq_bucket, Key=item["Key"])
    s3.delete_bucket(Bucket=settings.dq_bucket)
    assert drop_isolated(stack, settings) == []


def _api(settings: Settings, path: str) -> dict[str, object]:
    with TestClient(create_app(settings)) as client:
        response = client.get(path)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_before_the_first_run_the_api_links_to_nothing(published: Settings) -> None:
    assert _api(published, "/v1/comparison") == {
        "report": None,
        "json": None,
        "published_at": None,
        "verdict": None,
    }
    assert _api(published, "/v1/quality")["comparison_report"] is None


def test_a_published_report_is_readable_by_anyone_and_linked_by_the_api(
    published: Settings, tmp_path: Path
) -> None:
    run = synthetic_run()
    write_report(run, tmp_path)
    url = publish(published, tmp_path)
    folder = f"{published.s3_endpoint}/{published.dq_bucket}/comparison/20261124T153000Z/"
    assert url == folder + "report.html"

    page = httpx.get(url, timeout=10)  # no credentials
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert 'id="fig-error"' in page.text and 'href="comparison.json"' in page.text
    data = httpx.get(folder + "comparison.json", timeout=10)
    assert data.status_code == 200 and data.headers["content-type"] == "application/json"
    assert ComparisonRun.from_json(data.json()) == run

    body = _api(published, "/v1/comparison")
    assert (body["report"], body["json"]) == (url, folder + "comparison.json")
    assert body["published_at"] is not None
    # The verdict as the report's table has it, from the JSON: the API never reads the run.
    rows = [asdict(row) for row in verdict(run)]
    assert body["verdict"] == rows
    assert {row["ahead"] for row in rows} >= {"lambda", "kappa", "even"}
    assert _api(published, "/v1/quality")["comparison_report"] == url


def test_only_the_public_prefixes_of_the_bucket_are_readable(published: Settings) -> None:
    s3 = s3_client(published)
    bucket, base = published.dq_bucket, f"{published.s3_endpoint}/{published.dq_bucket}"
    # One bucket policy names both public prefixes: the comparison's publication leaves the
    # Data Docs readable (and the reverse: quality.docs sets the same policy).
    s3.put_object(Bucket=bucket, Key="docs/probe.html", Body=b"<p>docs</p>")
    s3.put_object(Bucket=bucket, Key="private/probe.txt", Body=b"secret")
    assert httpx.get(f"{base}/docs/probe.html", timeout=10).status_code == 200
    assert httpx.get(f"{base}/private/probe.txt", timeout=10).status_code == 403
    assert httpx.get(f"{base}/", timeout=10).status_code == 403  # no listing


def test_the_latest_run_is_linked_and_earlier_reports_stay(
    published: Settings, tmp_path: Path
) -> None:
    first = _api(published, "/v1/comparison")["report"]
    later = dataclasses.replace(synthetic_run(), created_at="2026-11-24T17:45:10Z")
    write_report(later, tmp_path)
    url = publish(published, tmp_path)
    assert url.endswith("/comparison/20261124T174510Z/report.html") and url != first
    body = _api(published, "/v1/comparison")
    assert body["report"] == url
    assert body["verdict"] == [asdict(row) for row in verdict(later)]
    assert httpx.get(str(first), timeout=10).status_code == 200


def test_the_serving_login_reads_the_reports_and_writes_none(published: Settings) -> None:
    with psycopg.connect(**connection_kwargs(published, reader=True), autocommit=True) as conn:
        urls = [row[0] for row in conn.execute("select url from comparison_reports order by id")]
        assert len(urls) == 2 and all(u.endswith("/report.html") for u in urls)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("insert into comparison_reports (url, json_url) values ('x', 'y')")
