"""`lk stack reset` deletes the services' data and leaves the local cluster's state alone."""

from __future__ import annotations

from pathlib import Path

from core.settings import Settings
from infra.stack import stack


def test_reset_keeps_the_cluster_folder(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, stack_dir=tmp_path / "stack", cache_dir=tmp_path / "cache")
    for folder in ("kafka/data", "minio/data", "cluster/etcd"):
        (settings.stack_path / folder).mkdir(parents=True)
    (settings.stack_path / "run.txt").write_text("x")
    stack.reset(settings, progress=lambda _: None)
    assert sorted(p.name for p in settings.stack_path.iterdir()) == ["cluster"]
    assert (settings.stack_path / "cluster" / "etcd").is_dir()


def test_reset_without_a_cluster_removes_the_stack_folder(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, stack_dir=tmp_path / "stack", cache_dir=tmp_path / "cache")
    (settings.stack_path / "kafka" / "data").mkdir(parents=True)
    stack.reset(settings, progress=lambda _: None)
    assert not settings.stack_path.exists()
