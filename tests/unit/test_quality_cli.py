"""`lk dq` without services: its help, and one line (not a traceback) when the store is down.

Against the real stack, `lk dq validate` and `lk dq docs` are tests/integration/test_dags.py's.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from lk.cli import cli


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # free once closed: nothing answers there


@pytest.fixture
def no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LK_HOME", str(tmp_path))
    monkeypatch.setenv("LK_POSTGRES_PORT", str(_closed_port()))


def test_dq_lists_its_commands() -> None:
    result = CliRunner().invoke(cli, ["dq", "--help"])
    assert result.exit_code == 0
    assert "validate" in result.output and "docs" in result.output
    result = CliRunner().invoke(cli, ["dq", "validate", "--help"])
    assert "--architecture [lambda|kappa|both]" in result.output


def test_validate_with_the_store_down_fails_in_one_line(no_store: None) -> None:
    result = CliRunner().invoke(cli, ["dq", "validate", "--architecture", "kappa"])
    assert result.exit_code == 1
    [line] = [x for x in result.stderr.splitlines() if x.startswith("lk:")]
    assert line.startswith("lk: error: the serving store is unavailable: ")
    assert "Traceback" not in result.output + result.stderr


def test_an_unknown_architecture_is_refused(no_store: None) -> None:
    result = CliRunner().invoke(cli, ["dq", "validate", "--architecture", "delta"])
    assert result.exit_code == 2
    assert "'delta' is not one of 'lambda', 'kappa', 'both'" in result.stderr
