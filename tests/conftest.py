"""Shared fixtures.

Integration tests run against a real local stack that this test run starts itself, from
nothing, in a temporary folder and on free loopback ports (so a developer's own stack is left
alone). The download/build cache is shared. If a service cannot start, every integration test
errors: a missing service fails the run, it is never skipped.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def stack_home() -> Iterator[Path]:
    # Not pytest's tmp_path: that folder is private to root, and Postgres runs as `postgres`.
    home = Path(tempfile.mkdtemp(prefix="lk-test-"))
    home.chmod(0o755)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def stack_env(stack_home: Path) -> dict[str, str]:
    """Environment variables naming the test stack: what `lk` run as a subprocess reads."""
    home = stack_home
    env = {
        "LK_HOME": str(home),
        "LK_STACK_DIR": str(home / "stack"),
        "LK_CACHE_DIR": os.environ.get("LK_CACHE_DIR", str(ROOT / ".cache")),
        "LK_KAFKA_PORT": str(_free_port()),
        "LK_KAFKA_CONTROLLER_PORT": str(_free_port()),
        "LK_MINIO_PORT": str(_free_port()),
        "LK_MINIO_CONSOLE_PORT": str(_free_port()),
        "LK_POSTGRES_PORT": str(_free_port()),
        "LK_CONNECT_PORT": str(_free_port()),
    }
    return env


@pytest.fixture(scope="session")
def stack_settings(stack_env: dict[str, str]) -> Settings:
    # Strings, as the environment would give them: pydantic converts each to its field's type.
    fields: dict[str, Any] = {k.removeprefix("LK_").lower(): v for k, v in stack_env.items()}
    return Settings(**fields)


@pytest.fixture(scope="session")
def stack(stack_settings: Settings) -> Iterator[Settings]:
    """The real local stack, up for the whole run, stopped (by PID) at the end."""
    from infra.stack import stack as local_stack

    lines: list[str] = []
    try:
        local_stack.up(stack_settings, progress=lines.append)
        yield stack_settings
    finally:
        local_stack.down(stack_settings, progress=lines.append)


@pytest.fixture(scope="session")
def spark(stack_settings: Settings):  # type: ignore[no-untyped-def]
    """One Spark session for the whole run (it takes 7-20 s to start here).

    It needs the connector jars (fetched once, then cached) but no running service, so the
    Spark unit tests run without the stack; integration tests ask for ``stack`` as well.
    """
    from core.spark import build_spark_session
    from infra.stack.artifacts import spark_jars

    spark_jars(stack_settings)
    session = build_spark_session(stack_settings, "lk-tests")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, when
    # pytest has closed the stream it logs to: a "Logging error" traceback after the summary.
    logging.getLogger("py4j").setLevel(logging.WARNING)


def run_lk(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the `lk` CLI as a user would, in a subprocess."""
    lk = Path(sys.executable).with_name("lk")  # the installed console script
    return subprocess.run(
        [str(lk), *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lambda-kappa")
    group.addoption(
        "--k8s",
        action="store_true",
        help="run tests/k8s: the chart on a real cluster (`lk cluster up`); `make test-k8s`",
    )
    group.addoption(
        "--k8s-architecture",
        default="both",
        choices=("lambda", "kappa", "both"),
        help="the architecture tests/k8s installs (default both)",
    )
    group.addoption(
        "--comparison",
        action="store_true",
        help="run tests/comparison: `lk demo`'s live comparison and its report (10 minutes); "
        "`make test-compare`",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # The real-cluster tests build a cluster and images: only `make test-k8s` (--k8s) runs them.
    if collection_path.name == "k8s" and collection_path.parent == ROOT / "tests":
        return not config.getoption("--k8s")
    # The live comparison runs both architectures through five scenarios: `make test-compare`.
    if collection_path.name == "comparison" and collection_path.parent == ROOT / "tests":
        return not config.getoption("--comparison")
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Anything under tests/integration is an integration test.
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _recursion_limit_restored() -> Iterator[None]:
    """Put back the interpreter's recursion limit after each test: Airflow's operator
    ``__deepcopy__`` raises it to 5000 for the whole process, and the JSON spec's deep-nesting
    cases depend on Python's own limit (tests/unit/test_spark_parsing.py)."""
    limit = sys.getrecursionlimit()
    yield
    sys.setrecursionlimit(limit)
