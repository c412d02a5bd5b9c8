"""Data Docs: built locally from the stored results, published to MinIO.

The site is Great Expectations' own (a page per suite and per validation), with two changes:

- its landing page ``index.html`` is ours: per layer, each suite's last result (status,
  failed expectations with their reasons, a link to the full GX page), and the windows where
  Lambda and Kappa disagree with their cause. GX's own index (every run, every suite) moves to
  ``runs.html``; the GX pages' "home" link leads back to the landing page;
- only the last ``KEEP_RUNS`` results of each suite and layer are kept, so hourly runs do not
  grow the store and the build time without bound.

The results come from every process that validated, not only this one: each validation also
writes its result to the object store, and the build fetches those first
(``quality.result_store``), so the batch layer's gates, run in step pods on Kubernetes, are on
the site too.

``publish_docs`` uploads the site under ``docs/`` in the ``dq_bucket`` and makes that prefix
(and ``comparison/``, where the comparison's reports go) readable anonymously, so the serving
API and ``lk dq docs`` can link to it.
"""

from __future__ import annotations

import html
import json
import mimetypes
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import core.store.quality_results as records
import quality.context as ctx
import quality.layers as layers
import quality.result_store as result_store
import quality.suites as suites
from core.provision import s3_client
from core.settings import Settings
from core.store.connection import connect
from quality.result import failure_reason

KEEP_RUNS: Final = 20
"""Results kept per (suite, layer)."""
DOCS_PREFIX: Final = "docs/"
COMPARISON_PREFIX: Final = "comparison/"
"""Where `comparison.publish` puts the side-by-side reports, beside the Data Docs."""
PUBLIC_PREFIXES: Final = (DOCS_PREFIX, COMPARISON_PREFIX)
"""The prefixes of the Data Docs bucket anyone may read: one bucket policy names them all, so
that whichever publisher sets it last leaves the other's pages readable."""
GX_INDEX: Final = "runs.html"
LAYER_ORDER: Final = (
    layers.LAMBDA_BATCH,
    layers.LAMBDA_SERVING,
    layers.KAPPA_REPROCESS,
    layers.KAPPA_SERVING,
    layers.COMPARISON,
)
"""The landing page's order: data flow, Lambda then Kappa, then the comparison."""


@dataclass(frozen=True, slots=True)
class StoredResult:
    """One validation result file of the store, with what the landing page shows."""

    path: Path
    """Relative to the validations store; the GX page is the same path with ``.html``."""
    suite: str
    layer: str
    run_name: str
    run_time: str
    success: bool
    evaluated: int
    failed: int
    failures: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def page(self) -> str:
        return "validations/" + self.path.with_suffix(".html").as_posix()


def _load(store: Path, path: Path) -> StoredResult:
    data = json.loads(path.read_text())
    meta = data.get("meta", {})
    run = meta.get("run_id") or {}
    results = data.get("results", [])
    notes: list[str] = []
    for r in results:
        config = r.get("expectation_config") or {}
        value = config.get("notes")
        notes += [value] if isinstance(value, str) else list(value or [])
    failures = tuple(failure_reason(_Evr(r)) for r in results if not r.get("success"))
    return StoredResult(
        path=path.relative_to(store),
        suite=data.get("suite_name", "?"),
        layer=(meta.get("active_batch_definition") or {}).get("data_asset_name", "?"),
        run_name=str(run.get("run_name") or ""),
        run_time=str(run.get("run_time") or ""),
        success=bool(data.get("success")),
        evaluated=len(results),
        failed=len(failures),
        failures=failures,
        notes=tuple(notes),
    )


class _Evr:
    """The attributes ``failure_reason`` reads, over a stored (JSON) expectation result."""

    def __init__(self, raw: dict[str, Any]) -> None:
        config = raw.get("expectation_config") or {}
        self.expectation_config = _Config(config)
        self.exception_info = raw.get("exception_info") or {}
        self.result = raw.get("result") or {}


class _Config:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.type = raw.get("type", "?")
        self.kwargs = raw.get("kwargs") or {}
        self.description = raw.get("description")


def stored_results(settings: Settings) -> list[StoredResult]:
    """Every result in the store, newest first."""
    store = ctx.validations_dir(settings)
    if not store.is_dir():
        return []
    found = [_load(store, p) for p in store.rglob("*.json")]
    return sorted(found, key=lambda r: r.run_time, reverse=True)


def _prune(
    settings: Settings, results: list[StoredResult], *, client: Any = None
) -> list[StoredResult]:
    """Delete all but the newest ``KEEP_RUNS`` results per (suite, layer), locally and (with
    ``dq_share_results``) in the object store; return the kept."""
    store = ctx.validations_dir(settings)
    seen: dict[tuple[str, str], int] = {}
    kept, pruned = [], []
    for r in results:  # newest first
        n = seen[(r.suite, r.layer)] = seen.get((r.suite, r.layer), 0) + 1
        if n <= KEEP_RUNS:
            kept.append(r)
            continue
        pruned.append(r.path)
        (store / r.path).unlink(missing_ok=True)
        parent = (store / r.path).parent
        while parent != store and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    if settings.dq_share_results:
        result_store.delete(settings, pruned, client=client)
    return kept


def build_docs(settings: Settings, *, client: Any = None) -> Path:
    """Build the Data Docs site from the stored results (with ``dq_share_results``, every
    process's: ``quality.result_store``); returns its ``index.html``."""
    site = ctx.site_dir(settings)
    with ctx.locked_context(settings) as context:
        if settings.dq_share_results:
            result_store.download(settings, client=client)
        ctx.add_all_suites(context)
        kept = _prune(settings, stored_results(settings), client=client)
        # A clean build: pages of pruned results must not linger.
        shutil.rmtree(site, ignore_errors=True)
        context.build_data_docs()
        (site / "index.html").replace(site / GX_INDEX)
        index = site / "index.html"
        index.write_text(_landing_page(kept))
    return index


# --- the landing page ---------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5rem; }
th, td { border: 1px solid #ccc; padding: .3rem .6rem; text-align: left; vertical-align: top; }
.ok { color: #1a7f37; font-weight: bold; } .fail { color: #cf222e; font-weight: bold; }
td ul { margin: 0; padding-left: 1.1rem; }
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _suite_page(suite: str) -> str:
    return "expectations/" + suite.replace(".", "/") + ".html"


def _layer_table(results: list[StoredResult]) -> str:
    rows = []
    for r in results:
        status = (
            '<span class="ok">passed</span>' if r.success else '<span class="fail">FAILED</span>'
        )
        reasons = "".join(f"<li>{_e(f)}</li>" for f in r.failures[:10])
        rows.append(
            f'<tr><td><a href="{_e(_suite_page(r.suite))}">{_e(r.suite)}</a></td>'
            f"<td>{status}</td><td>{r.failed}/{r.evaluated}</td>"
            f"<td>{_e(r.run_name)}</td><td>{_e(r.run_time[:19])}Z</td>"
            f'<td><a href="{_e(r.page)}">result</a>'
            f"{f'<ul>{reasons}</ul>' if reasons else ''}</td></tr>"
        )
    head = (
        "<tr><th>suite</th><th>status</th><th>failed</th><th>run</th><th>run time (UTC)</th>"
        "<th>details</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _note(markdown: str) -> str:
    """A note line (markdown for GX's pages) as HTML: the list dash dropped, ``**x**`` bold."""
    text = _e(markdown.removeprefix("- "))
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)


def _reconciliation_section(results: list[StoredResult]) -> str:
    latest = next((r for r in results if r.suite == suites.RECONCILIATION), None)
    if latest is None:
        return "<p>No reconciliation has run yet.</p>"
    items = "".join(f"<li>{_note(n)}</li>" for n in latest.notes)
    return (
        f'<p>Last run <a href="{_e(latest.page)}">{_e(latest.run_name)}</a> '
        f"({_e(latest.run_time[:19])}Z): windows where Lambda, Kappa and the oracle disagree, "
        f"and why.</p><ul>{items}</ul>"
    )


def _landing_page(results: list[StoredResult]) -> str:
    latest: dict[tuple[str, str], StoredResult] = {}
    for r in results:  # newest first: the first seen is the last result
        latest.setdefault((r.layer, r.suite), r)
    order = {name: i for i, name in enumerate(suites.SUITE_NAMES)}
    known = {name: i for i, name in enumerate(LAYER_ORDER)}
    shown = sorted({layer for layer, _ in latest}, key=lambda x: (known.get(x, len(known)), x))
    sections = []
    for layer in shown:
        mine = sorted(
            (r for (lay, _), r in latest.items() if lay == layer),
            key=lambda r: order.get(r.suite, len(order)),
        )
        sections.append(f"<h2>Layer {_e(layer)}</h2>{_layer_table(mine)}")
    if not sections:
        sections.append("<p>No validation has run yet.</p>")
    suite_links = "".join(
        f'<li><a href="{_e(_suite_page(s))}">{_e(s)}</a></li>' for s in suites.SUITE_NAMES
    )
    built = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        "<title>Data quality: Lambda vs Kappa</title>"
        f"<style>{_STYLE}</style></head><body>"
        "<h1>Data quality: Lambda vs Kappa</h1>"
        f"<p>Built {built}. Each layer's suites with their last result; "
        f'<a href="{GX_INDEX}">every run and suite</a> in Great Expectations\' index.</p>'
        f"{''.join(sections)}"
        f"<h2>Reconciliation</h2>{_reconciliation_section(results)}"
        f"<h2>Suites</h2><ul>{suite_links}</ul>"
        "</body></html>"
    )


# --- publishing ---------------------------------------------------------------------------------


def _read_policy(bucket: str, *prefixes: str) -> str:
    """Anonymous read of these prefixes only (the bucket's other objects stay private)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": ["*"]},
                    "Action": ["s3:GetObject"],
                    "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*" for prefix in prefixes],
                }
            ],
        }
    )


def upload_site(client: Any, site: Path, bucket: str, prefix: str = DOCS_PREFIX) -> int:
    """Mirror ``site`` to ``s3://bucket/prefix``: upload every file with its content type,
    delete objects no longer in the site. Returns the number of files uploaded."""
    uploaded = set()
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        key = prefix + path.relative_to(site).as_posix()
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes(), ContentType=content_type)
        uploaded.add(key)
    stale = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        stale += [o["Key"] for o in page.get("Contents", []) if o["Key"] not in uploaded]
    for start in range(0, len(stale), 1000):  # the S3 limit per delete request
        batch = [{"Key": k} for k in stale[start : start + 1000]]
        client.delete_objects(Bucket=bucket, Delete={"Objects": batch})
    return len(uploaded)


def open_public_prefixes(client: Any, bucket: str) -> None:
    """Create ``bucket`` if missing and let anyone read its ``PUBLIC_PREFIXES`` (only those)."""
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)
    client.put_bucket_policy(Bucket=bucket, Policy=_read_policy(bucket, *PUBLIC_PREFIXES))


def docs_url(settings: Settings) -> str:
    """Where the published site's landing page is."""
    return f"{settings.s3_endpoint}/{settings.dq_bucket}/{DOCS_PREFIX}index.html"


def publish_docs(settings: Settings, *, client: Any = None) -> str:
    """Build the site, upload it to MinIO and record where it is (``core.store.quality_results``);
    returns the landing page's URL."""
    s3 = client or s3_client(settings)
    bucket = settings.dq_bucket
    open_public_prefixes(s3, bucket)  # first: the build reads the bucket's results
    site = build_docs(settings, client=s3).parent
    upload_site(s3, site, bucket)
    url = docs_url(settings)
    with connect(settings) as conn:
        records.record_docs(conn, url)  # what the serving API's /v1/quality links to
    return url
