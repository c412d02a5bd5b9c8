"""Data Docs (quality.docs): the landing page, pruning, and the mirror to an S3 bucket.

Publishing against real MinIO, and fetching the pages anonymously over HTTP, is
tests/integration/test_dags.py's job; here the S3 client is an in-memory stand-in.
"""

from __future__ import annotations

import io
import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from core.settings import Settings
from quality import build_docs, docs, validate
from quality.reconciliation import reconcile

H9, H10 = "2026-11-01T09:00:00Z", "2026-11-01T10:00:00Z"


def page_views(count: int) -> list[dict[str, Any]]:
    return [{"page": "/", "window_start": H9, "window_end": "2026-11-01T09:01:00Z", "count": count}]


def revenue(segment: str, cents: int) -> dict[str, Any]:
    return {"segment": segment, "window_start": H9, "window_end": H10, "revenue_cents": cents}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Path]:
    """A site built from four validations: two layers, one failure, one reconciliation."""
    home = tmp_path_factory.mktemp("dq-docs")
    settings = Settings(home=home, stack_dir=home / "stack", dq_share_results=False)
    validate_run = partial(validate, settings=settings, run_name="run-1")
    validate_run("batch_views.page_views", page_views(2), layer="lambda-batch")
    validate_run("realtime_views.page_views", page_views(-1), layer="kappa-serving")
    table = reconcile(
        "revenue_by_segment",
        [revenue("gold", 700), revenue("silver", 300)],
        [revenue("gold", 1000)],
        [revenue("gold", 700), revenue("silver", 300)],
        closed_before=H10,
    )
    validate_run("reconciliation", table, layer="comparison")
    return settings, build_docs(settings)


def test_the_landing_page_shows_each_layers_last_results(site: tuple[Settings, Path]) -> None:
    _, index = site
    page = index.read_text()
    assert page.startswith("<!doctype html>")
    headings = re.findall(r"<h2>Layer ([a-z-]+)</h2>", page)
    assert headings == ["lambda-batch", "kappa-serving", "comparison"]  # in data-flow order
    assert "count is never negative: 1 of 1 rows unexpected, e.g. [-1]" in page
    # The reconciliation's disagreements, each with its cause.
    assert "revenue_by_segment segment=gold [2026-11-01T09:00:00Z, 2026-11-01T10:00:00Z)" in page
    assert "-&gt; <strong>profile history lost to compaction</strong>" in page


def test_every_link_of_the_landing_page_leads_to_a_page(site: tuple[Settings, Path]) -> None:
    _, index = site
    links = re.findall(r'href="([^"]+)"', index.read_text())
    assert len(links) > 10
    missing = [link for link in links if not (index.parent / link).is_file()]
    assert not missing, missing
    assert (index.parent / docs.GX_INDEX).is_file()  # Great Expectations' own index, kept


def test_only_the_last_results_of_a_suite_are_kept(
    site: tuple[Settings, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, _ = site
    monkeypatch.setattr(docs, "KEEP_RUNS", 2)
    for run in ("run-2", "run-3"):
        validate(
            "batch_views.page_views",
            page_views(3),
            settings=settings,
            layer="lambda-batch",
            run_name=run,
        )
    build_docs(settings)
    kept = [
        r.run_name
        for r in docs.stored_results(settings)
        if (r.suite, r.layer) == ("batch_views.page_views", "lambda-batch")
    ]
    assert sorted(kept) == ["run-2", "run-3"]
    # Other suites keep theirs.
    assert any(r.suite == "reconciliation" for r in docs.stored_results(settings))


class FakeS3:
    """The calls ``upload_site`` makes, on a dict."""

    def __init__(self, objects: dict[str, bytes] | None = None) -> None:
        self.objects = dict(objects or {})
        self.types: dict[str, str] = {}

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, ContentType: str) -> None:  # noqa: N803
        self.objects[Key] = Body
        self.types[Key] = ContentType

    def get_paginator(self, name: str) -> Any:
        assert name == "list_objects_v2"
        objects = self.objects

        class Pages:
            def paginate(self, *, Bucket: str, Prefix: str) -> list[dict[str, Any]]:  # noqa: N803
                return [{"Contents": [{"Key": k} for k in sorted(objects) if k.startswith(Prefix)]}]

        return Pages()

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> None:  # noqa: N803
        for item in Delete["Objects"]:
            del self.objects[item["Key"]]

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803
        return {"Body": io.BytesIO(self.objects[Key])}

    def list_buckets(self) -> dict[str, Any]:
        return {"Buckets": [{"Name": "lk-dq"}]}


def test_upload_mirrors_the_site_with_content_types(site: tuple[Settings, Path]) -> None:
    _, index = site
    s3 = FakeS3({"docs/validations/gone.html": b"old", "other/keep.txt": b"not ours"})
    uploaded = docs.upload_site(s3, index.parent, "lk-dq")
    files = [p for p in index.parent.rglob("*") if p.is_file()]
    assert uploaded == len(files)
    assert "docs/validations/gone.html" not in s3.objects  # stale pages go
    assert s3.objects["other/keep.txt"] == b"not ours"  # outside the prefix: untouched
    assert s3.objects["docs/index.html"] == index.read_bytes()
    assert s3.types["docs/index.html"] == "text/html"
    css = [k for k in s3.types if k.endswith(".css")]
    assert css and all(s3.types[k] == "text/css" for k in css)


def test_the_read_policy_opens_only_the_docs_prefix() -> None:
    import json

    policy = json.loads(docs._read_policy("lk-dq", docs.DOCS_PREFIX))
    [statement] = policy["Statement"]
    assert statement["Action"] == ["s3:GetObject"]
    assert statement["Resource"] == ["arn:aws:s3:::lk-dq/docs/*"]


def test_a_result_validated_in_another_project_is_on_the_site_and_pruned_in_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step pod's project (its own folder) and the scheduler's meet in the bucket: the site
    built in one shows what the other validated, and pruning deletes the bucket's copy too."""
    from quality import result_store

    s3 = FakeS3()
    monkeypatch.setattr(result_store, "s3_client", lambda _settings: s3)
    pod, scheduler = (
        Settings(home=tmp_path, stack_dir=tmp_path / name) for name in ("pod", "scheduler")
    )
    for run in ("pod-1", "pod-2"):
        validate(
            "batch_views.page_views",
            page_views(2),
            settings=pod,
            layer="lambda-batch",
            run_name=run,
        )
    shared = sorted(k for k in s3.objects if k.startswith(result_store.PREFIX))
    assert len(shared) == 2 and all(k.endswith(".json") for k in shared)

    monkeypatch.setattr(docs, "KEEP_RUNS", 1)
    page = docs.build_docs(scheduler, client=s3).read_text()
    assert "pod-2" in page and "pod-1" not in page  # the newest kept, from the other project
    [kept] = docs.stored_results(scheduler)
    assert (kept.run_name, kept.suite) == ("pod-2", "batch_views.page_views")
    assert (docs.ctx.site_dir(scheduler) / kept.page).is_file()  # GX's page of the result
    assert sorted(k for k in s3.objects if k.startswith(result_store.PREFIX)) == [
        result_store.PREFIX + kept.path.as_posix()
    ]
