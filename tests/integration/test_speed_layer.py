"""The speed layer alone: exact under late data and duplicates, and after being killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastapi.testclient import TestClient

from core import workload
from core.catalog import VIEW_NAMES
from core.kafka_io import produce_file
from core.oracle import compute_views, load_jsonl_values, load_profiles_jsonl
from core.settings import Settings
from core.store import realtime
from core.store import state as stream_state
from core.store.connection import connect
from core.store.streams import LAMBDA_SPEED
from serving.main import create_app
from tests.conftest import ROOT
from tests.integration.helpers import isolated_settings, settings_env
from tests.serving_pages import read_whole


def _speed_process(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as stderr:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [
                str(Path(sys.executable).with_name("lk")),
                "stream",
                "--architecture",
                "lambda",
                *args,
            ],
            cwd=ROOT,
            env={**os.environ, **env},
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def _tail(log: Path) -> str:
    text = log.read_text(errors="replace").splitlines()
    return "\n".join(line for line in text if " WARN " not in line)[-4000:] or "(empty)"


def _committed_batches(settings: Settings) -> int:
    with connect(settings) as conn:
        return realtime.load_progress(conn, LAMBDA_SPEED).last_batch_id


def test_speed_layer_killed_mid_stream_and_restarted_ends_exact(
    stack: Settings,
    spark,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    settings = isolated_settings(stack, "speed").model_copy(
        update={"stream_max_offsets_per_trigger": 1500}  # 3 micro-batches: killed after 1
    )
    events, profiles = tmp_path / "events.jsonl", tmp_path / "events.profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=31, events=3000), events, profiles)
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, events, settings.events_topic)
    env = settings_env(settings)

    log = tmp_path / "speed-layer.log"
    running = _speed_process(env, log)
    try:
        deadline = time.monotonic() + 600  # Spark's start and a first micro-batch, on 2 cores
        while _committed_batches(settings) < 0:  # a first micro-batch committed
            assert running.poll() is None, "the speed layer exited early"
            assert time.monotonic() < deadline, "the speed layer committed nothing in 600 s"
            time.sleep(0.5)
    finally:
        os.killpg(running.pid, signal.SIGKILL)  # no clean shutdown: a crash mid-stream
        running.wait(30)
    assert _committed_batches(settings) < 2, "the kill should land before the log's end"

    finished = _speed_process(env, log, "--available-now")
    assert finished.wait(900) == 0, _tail(log)

    with connect(settings) as conn:
        late_ids = stream_state.late_event_ids(conn, LAMBDA_SPEED)
    expected = compute_views(
        load_jsonl_values(events),
        load_profiles_jsonl(profiles),
        keep=lambda event: event.event_id not in late_ids,
    )
    with TestClient(create_app(settings)) as client:
        for view in VIEW_NAMES:
            body = read_whole(client.get, view)
            assert body["rows"] == expected.views[view], view
        meta = client.get("/v1/views/page_views").json()["meta"]
    assert meta["late_dropped"] == len(late_ids) > 0
    assert meta["view_version"] is None  # no batch yet: the speed layer answers alone
