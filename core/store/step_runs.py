"""The last run of each pipeline step, and what the serving API's ``/metrics`` exports of the
batch runs from the store.

A step (``lk step``, an Airflow task: ``lk.step_registry``) is a process or a pod that ends,
so nothing would be left to scrape: ``run_step`` records its duration here instead, one row
per step, and the long-running serving API reads it at scrape time together with what the
store already holds (``BATCH_METRICS_SQL``):

- ``step_runs``: each step's last run (seconds, success, when it finished);
- ``view_versions``: the published Lambda version's rows per view (``row_counts``), when a
  batch was last published, and the Kappa versions being built;
- ``stream_progress``: the watermark of each Kappa version that serves or is being built
  (its ``kappa-v<N>`` stream): how far a replay has come, beside the live version's;
- ``dq_results``: each (layer, suite)'s latest gate result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.store.streams import KAPPA_PREFIX

if TYPE_CHECKING:
    import psycopg

DDL = [
    """create table if not exists step_runs (
        step text primary key,
        seconds double precision not null,
        success boolean not null,
        finished_at timestamptz not null default now())""",
]


def record(conn: psycopg.Connection, step: str, seconds: float, *, success: bool) -> None:
    """Keep ``step``'s last run (one row per step: the table never grows)."""
    conn.execute(
        "insert into step_runs (step, seconds, success) values (%s, %s, %s) "
        "on conflict (step) do update set seconds = excluded.seconds, "
        "success = excluded.success, finished_at = now()",
        (step, seconds, success),
    )


BATCH_METRICS_SQL = f"""
select 'step', step, null, seconds, null::double precision from step_runs
union all
select 'rows', r.key, null, r.value::double precision, null
  from view_alias a
  join view_versions v on v.architecture = a.architecture and v.version = a.version
  cross join lateral jsonb_each_text(coalesce(v.row_counts, '{{}}'::jsonb)) r
  where a.architecture = 'lambda'
union all
select 'published', null, null, extract(epoch from max(published_at))::double precision, null
  from view_versions where architecture = 'lambda' having max(published_at) is not null
union all
(select distinct on (layer, suite) 'gate', layer, suite, case when success then 1.0 else 0.0 end,
   failed::double precision
   from dq_results order by layer, suite, id desc)
union all
select 'kappa', v.version::text, v.status,
  extract(epoch from p.watermark)::double precision, null
  from view_versions v join stream_progress p on p.stream = '{KAPPA_PREFIX}' || v.version
  where v.architecture = 'kappa' and v.status <> 'retired' and p.watermark is not null
"""
"""One statement for a whole scrape: rows of (kind, label, label, value, value)."""


@dataclass
class BatchMetrics:
    """What ``BATCH_METRICS_SQL`` read, by metric."""

    step_seconds: dict[str, float] = field(default_factory=dict)
    view_rows: dict[str, float] = field(default_factory=dict)
    last_published_s: float | None = None
    gate_success: dict[tuple[str, str], float] = field(default_factory=dict)
    gate_failed: dict[tuple[str, str], float] = field(default_factory=dict)
    kappa_watermark_s: dict[tuple[str, str], float] = field(default_factory=dict)
    """By (version, status): `published` is the live one, `building` a replay."""


def batch_metrics(rows: list[tuple[Any, ...]]) -> BatchMetrics:
    """``BATCH_METRICS_SQL``'s rows, by metric."""
    metrics = BatchMetrics()
    for kind, first, second, value, other in rows:
        if kind == "step":
            metrics.step_seconds[first] = float(value)
        elif kind == "rows":
            metrics.view_rows[first] = float(value)
        elif kind == "published":
            metrics.last_published_s = float(value)
        elif kind == "gate":
            metrics.gate_success[(first, second)] = float(value)
            metrics.gate_failed[(first, second)] = float(other)
        elif kind == "kappa":
            metrics.kappa_watermark_s[(first, second)] = float(value)
    return metrics
