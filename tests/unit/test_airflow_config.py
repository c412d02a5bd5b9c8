"""The local Airflow's environment (`infra/airflow/config.py`): whose DAGs it loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.settings import Settings
from infra.airflow.config import airflow_env


@pytest.mark.parametrize(
    ("environment", "expected"),
    [(None, "both"), ("lambda", "lambda"), ("kappa", "kappa"), ("both", "both")],
)
def test_the_local_airflow_loads_both_architectures_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, environment: str | None, expected: str
) -> None:
    """`make airflow-up` shows `kappa_reprocess` beside Lambda's DAGs, as the README's example
    needs; an explicit `LK_ARCHITECTURE` still decides, read through the settings."""
    monkeypatch.delenv("LK_ARCHITECTURE", raising=False)
    if environment is not None:
        monkeypatch.setenv("LK_ARCHITECTURE", environment)
    settings = Settings(stack_dir=tmp_path)
    assert airflow_env(settings)["LK_ARCHITECTURE"] == expected
