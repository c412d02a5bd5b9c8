"""Faults, injected while both architectures stream a workload. The node is lost: the speed
layer, the Kappa job and the archiver are killed with SIGKILL mid-stream, and a batch between
its write and its publication, and the streams are restarted. Then Kafka, MinIO and Postgres
are stopped together for longer than their clients retry and started again. At the end every
view equals the oracle: nothing lost, nothing counted twice.

The suite runs on a stack of its own (its own folder and ports), since it stops Kafka, MinIO
and Postgres; every component runs as the `lk` process an operator would run. It writes the
fault-by-outcome table to `out/faults.md` and prints it.

    make test-faults
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from comparison.processes import LK
from comparison.processes import LkProcess as Component
from core.catalog import VIEW_NAMES
from core.kafka_io import log_end, produce_file
from core.oracle import compute_views, load_jsonl_values, load_profiles_jsonl
from core.settings import Architecture, Settings
from core.store import realtime, versions
from core.store import state as stream_state
from core.store.connection import connect
from infra.stack import stack as local_stack
from infra.stack.kafka import Kafka
from infra.stack.minio import MinIO
from infra.stack.postgres import Postgres
from infra.stack.service import Service
from serving.main import create_app
from tests.conftest import ROOT, _free_port
from tests.integration.helpers import settings_env, workload_in_parts
from tests.serving_pages import read_whole

PARTS = 3
"""The workload's parts: one before the faults, one produced as each of the two begins."""
EVENTS = 1500
"""500 lines a part: two micro-batches of each stream (`stream_max_offsets_per_trigger`), so a
kill lands in the middle of the part's reading."""
OUTAGE_S = 65.0
"""A service stays down longer than its clients retry: Kafka's consumers time out after 60 s
(`default.api.timeout.ms`), Postgres's connections fail at once, MinIO's S3 client retries
for well under a minute."""
CAUGHT_UP_S = 450.0


@dataclass
class Outcome:
    fault: str
    how: str
    restarted: list[str] = field(default_factory=list)
    api_during: str = "-"
    recovered_s: float = 0.0


@pytest.fixture(scope="module")
def own_stack() -> Iterator[Settings]:
    home = Path(tempfile.mkdtemp(prefix="lk-faults-"))
    home.chmod(0o755)  # Postgres runs as `postgres` when the tests run as root
    settings = Settings(
        architecture=Architecture.BOTH,
        home=home,
        stack_dir=home / "stack",
        cache_dir=Path(os.environ.get("LK_CACHE_DIR", str(ROOT / ".cache"))),
        kafka_port=_free_port(),
        kafka_controller_port=_free_port(),
        minio_port=_free_port(),
        minio_console_port=_free_port(),
        postgres_port=_free_port(),
        stream_max_offsets_per_trigger=250,  # several micro-batches per part: kills land mid-way
        serve_pool_timeout_s=1.0,
    )
    try:
        local_stack.up(settings, progress=lambda _: None)
        yield settings
    finally:
        if not os.environ.get("LK_FAULTS_KEEP"):  # keep: its stack and data, to look at
            local_stack.down(settings, progress=lambda _: None)
            shutil.rmtree(home, ignore_errors=True)


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(1.0)
    return time.monotonic() - started


def _read(settings: Settings) -> dict[str, dict[str, int]]:
    """The offsets the archive and each stream have committed, per ``topic/partition``."""
    with connect(settings) as conn:
        streams = [versions.live_stream(conn, a) for a in ("lambda", "kappa")]
        read = {s: realtime.load_progress(conn, s).offsets for s in streams if s is not None}
        return read | {"archiver": realtime.archived(conn)}


def _caught_up(settings: Settings, components: list[Component]) -> Callable[[], bool]:
    def check() -> bool:
        for component in components:
            component.ensure_running()
        try:
            end = log_end(settings)
            read = _read(settings)
        except Exception:  # a service is still coming back
            return False
        return len(read) == 3 and all(
            offsets.get(tp, 0) >= n for offsets in read.values() for tp, n in end.items()
        )

    return check


def _api_while_store_down(settings: Settings) -> str:
    with TestClient(create_app(settings)) as client:
        started = time.monotonic()
        try:
            response = client.get("/v1/views/page_views", params={"architecture": "kappa"})
        except httpx.HTTPError as exc:
            return f"error {type(exc).__name__}"
        return f"{response.status_code} in {time.monotonic() - started:.1f} s"


def test_faults_leave_every_view_equal_to_the_oracle(own_stack: Settings, tmp_path: Path) -> None:
    settings = own_stack
    env = settings_env(settings)
    subprocess.run([str(LK), "init"], cwd=ROOT, env={**os.environ, **env}, check=True)
    parts, profiles, events = workload_in_parts(tmp_path, 23, EVENTS, PARTS)
    produce_file(settings, profiles, settings.profiles_topic)

    def component(name: str, *args: str) -> Component:
        return Component(name, list(args), env, tmp_path / f"{name}.log", cwd=ROOT)

    speed = component("speed layer", "stream", "--architecture", "lambda")
    kappa = component("Kappa job", "stream", "--architecture", "kappa")
    archive = component("archiver", "archive")
    running = [speed, kappa, archive]
    clock = time.monotonic()
    for c in running:
        c.start()
    produce_file(settings, parts[0], settings.events_topic)
    _wait(_caught_up(settings, running), CAUGHT_UP_S, "the first part")
    spent = {"start and the first part": time.monotonic() - clock}

    outcomes: list[Outcome] = []
    next_part = iter(parts[1:])

    def fault(name: str, how: str, inject: Callable[[Outcome], None]) -> None:
        clock = time.monotonic()
        outcome = Outcome(name, how)
        restarts = {c.name: c.restarts for c in running}
        produce_file(settings, next(next_part), settings.events_topic)
        inject(outcome)
        outcome.recovered_s = _wait(_caught_up(settings, running), CAUGHT_UP_S, name)
        outcome.restarted = [c.name for c in running if c.restarts > restarts[c.name]]
        outcomes.append(outcome)
        spent[name] = time.monotonic() - clock

    def node_lost(outcome: Outcome) -> None:
        # The three streams mid-stream, and a batch between its write and its publication: the
        # half-written version is never served (the speed layer, which publishes a ready batch
        # at its hand-off, is down meanwhile, so nothing can publish it behind the test's back).
        batch = component("batch", "batch")
        batch.start()
        with connect(settings) as conn:
            before = versions.current(conn, "lambda")
        time.sleep(3)  # mid-stream: the part is being read
        for stream in running:
            stream.kill()
        _wait(lambda: _building_version(settings) is not None or not batch.alive, 600, "batch")
        if batch.alive:
            batch.kill()
        with connect(settings) as conn:
            after = versions.current(conn, "lambda")
        assert (after and after.version) == (before and before.version)
        # The next batch (here the `lk drain` at the end) recomputes and hands off.
        outcome.api_during = "the batch's version never served; the old one until a hand-off"

    def outage(*services: type[Service], api: bool = False) -> Callable[[Outcome], None]:
        def inject(outcome: Outcome) -> None:
            time.sleep(3)
            down = [service(settings) for service in services]
            for svc in down:
                svc.stop()
            try:
                if api:
                    outcome.api_during = _api_while_store_down(settings)
                time.sleep(OUTAGE_S)
            finally:
                for svc in down:
                    svc.up()

        return inject

    fault("speed layer, Kappa job, archiver, batch",
          "SIGKILL all four: the streams mid-stream, the batch between its write and publication",
          node_lost)  # fmt: skip
    # The log, the object store and the serving store at once: each client must outlast its own
    # service's outage, and the API answers 503 meanwhile.
    fault("Kafka, MinIO and Postgres", f"all stopped {OUTAGE_S:.0f} s",
          outage(Kafka, MinIO, Postgres, api=True))  # fmt: skip

    assert next(next_part, None) is None, "every part is produced: the oracle reads them all"
    clock = time.monotonic()
    for c in running:
        c.stop()
    drains = {
        architecture: subprocess.Popen(
            [str(LK), "drain", "--architecture", architecture],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for architecture in ("lambda", "kappa")
    }  # side by side, as both architectures' jobs run in `both` mode
    for architecture, drain in drains.items():
        _out, err = drain.communicate(timeout=900)
        assert drain.returncode == 0, (architecture, err.decode()[-800:])
    spent["stop, then lk drain of each"] = time.monotonic() - clock

    values = load_jsonl_values(events)
    profile_changes = load_profiles_jsonl(profiles)
    with connect(settings) as conn:
        live = versions.live_stream(conn, "kappa")
        assert live is not None
        late = stream_state.late_event_ids(conn, live)
    expected = {
        "lambda": compute_views(values, profile_changes),
        "kappa": compute_views(values, profile_changes, keep=lambda e: e.event_id not in late),
    }
    with TestClient(create_app(settings)) as client:
        for architecture, oracle in expected.items():
            for view in VIEW_NAMES:
                served = read_whole(client.get, view, architecture=architecture)
                assert served["rows"] == oracle.views[view], (
                    architecture,
                    view,
                    served["meta"],
                    len(served["rows"]),
                    len(oracle.views[view]),
                )

    table = [
        "| fault | how | restarted | API while down | caught up after |",
        "|---|---|---|---|---|",
        *(
            f"| {o.fault} | {o.how} | {', '.join(o.restarted) or 'none'} | {o.api_during} | "
            f"{o.recovered_s:.0f} s |"
            for o in outcomes
        ),
        "",
        f"Then `lk drain` per architecture: every view of both equals the oracle "
        f"({len(values):,} log lines; Kappa without its {len(late)} late events).",
    ]
    out = ROOT / "out"
    out.mkdir(exist_ok=True)
    (out / "faults.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    print("time spent: " + ", ".join(f"{k} {v:.0f} s" for k, v in spent.items()))
    for o in outcomes:
        if "Postgres" in o.fault:
            assert o.api_during.startswith("503"), o.api_during


def _building_version(settings: Settings) -> int | None:
    with connect(settings) as conn:
        row = conn.execute(
            "select max(version) from view_versions where architecture = 'lambda' "
            "and status in ('building', 'ready')"
        ).fetchone()
    return None if row is None or row[0] is None else int(row[0])
