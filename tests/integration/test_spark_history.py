"""Issue 43, item 3: a batch driver's event log on MinIO, listed by Spark's own History Server.

A Spark driver that ends (as a batch step does) writes its event log over s3a into the event-log
bucket; the History Server, started as the chart starts it (pyspark's `spark-class`, the
connector jars on the daemon's classpath, the chart's own properties file and AWS_* keys),
lists the application at GET /api/v1/applications. Every process started here is stopped by
its PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.settings import Settings
from tests.conftest import ROOT
from tests.processes import stop_group

# A driver that ends: a tiny job, then stop (which closes, and so uploads, its event log).
DRIVER_TIMEOUT_S = 300.0
"""A guard against a hang, not a speed aim: alone the driver takes about 10 s; beside the
cluster's lane (a `helm upgrade` restarting pods) one took more than 180 s in CI."""
_DRIVER = """
import sys
from core.settings import get_settings
from core.spark import build_spark_session
spark = build_spark_session(get_settings(), sys.argv[1])
assert spark.range(1000).selectExpr("sum(id)").first()[0] == 499500
spark.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _history_conf(settings: Settings, log_dir: str, port: int) -> str:
    """The chart's own properties file, with this stack's endpoint and a quick poll appended
    (a later line of a properties file wins)."""
    from tests.charts.chart_utils import render

    (config,) = render().by_component("ConfigMap", "spark-history")
    return config["data"]["spark-history.conf"] + "\n".join(
        (
            f"spark.history.fs.logDirectory {log_dir}",
            f"spark.hadoop.fs.s3a.endpoint {settings.s3_endpoint}",
            f"spark.history.ui.port {port}",
            "spark.history.fs.update.interval 1s",
            "",
        )
    )


@contextlib.contextmanager
def _history_server(settings: Settings, conf: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_DAEMON_CLASSPATH": f"{settings.spark_jars_path}/*",
        "SPARK_DAEMON_MEMORY": "256m",
        "AWS_ACCESS_KEY_ID": settings.minio_access_key,
        "AWS_SECRET_ACCESS_KEY": settings.minio_secret_key,
    }
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                str(spark_home / "bin" / "spark-class"),
                "org.apache.spark.deploy.history.HistoryServer",
                "--properties-file",
                str(conf),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its group: spark-class's launcher and the JVM
        )
    try:
        yield server
    finally:
        stop_group(server, grace_s=20)


def _applications(port: int) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/applications"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return list(json.load(response))
    except OSError:
        return []  # not listening yet


def _rss_mib(pid: int) -> float:
    """Resident memory of the History Server's JVM (the launcher's child, or itself)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    target = int(children[0]) if children else pid
    for line in Path(f"/proc/{target}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_the_history_server_lists_a_batch_drivers_application(
    stack: Settings, tmp_path: Path
) -> None:
    from core.provision import ensure_buckets, s3_client

    ensure_buckets(stack)  # the event-log bucket, as `lk init` makes it
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    # An S3A "directory" is a key ending in "/": Spark wants the folder to exist.
    s3_client(stack).put_object(Bucket=stack.spark_events_bucket, Key=f"{prefix}/", Body=b"")
    log_dir = f"s3a://{stack.spark_events_bucket}/{prefix}/"
    app_name = f"lk-history-{prefix}"
    port = _free_port()
    conf = tmp_path / "spark-history.conf"
    conf.write_text(_history_conf(stack, log_dir, port))

    started = time.monotonic()
    with _history_server(stack, conf, tmp_path / "history.log") as server:
        try:
            driver = subprocess.run(
                [sys.executable, "-c", _DRIVER, app_name],
                cwd=ROOT,
                env={**os.environ, **stack.as_env(), "LK_SPARK_EVENT_LOG_DIR": log_dir},
                capture_output=True,
                text=True,
                timeout=DRIVER_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:  # a hang: where its log stopped
            err = exc.stderr or b""
            tail = err.decode(errors="replace") if isinstance(err, bytes) else err
            pytest.fail(f"the driver did not end in {DRIVER_TIMEOUT_S:.0f} s:\n{tail[-4000:]}")
        assert driver.returncode == 0, driver.stderr[-3000:]
        listed: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            listed = [a for a in _applications(port) if a.get("name") == app_name]
            if listed:
                break
            time.sleep(1)
        rss = _rss_mib(server.pid) if server.poll() is None else 0.0
        log = (tmp_path / "history.log").read_text(errors="replace")
        assert listed, f"not listed after {time.monotonic() - started:.0f} s:\n{log[-3000:]}"
    (app,) = listed
    (attempt,) = app["attempts"]
    assert attempt["completed"] is True  # the driver stopped: its log is whole
    keys = [
        o["Key"]
        for o in s3_client(stack)
        .list_objects_v2(Bucket=stack.spark_events_bucket, Prefix=f"{prefix}/")
        .get("Contents", [])
    ]
    assert [k for k in keys if k.endswith(".zstd")], keys  # compressed, as spark_conf asks
    print(f"listed in {time.monotonic() - started:.1f} s; History Server JVM RSS {rss:.0f} MiB")
