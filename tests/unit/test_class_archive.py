"""`core.class_archive`: which archive a Spark driver JVM maps, and when none."""

from __future__ import annotations

import os
from pathlib import Path

from core import class_archive
from core.settings import Settings
from core.spark import spark_conf


def _settings(tmp_path: Path) -> Settings:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "connector-1.0.jar").write_bytes(b"jar")
    return Settings(cache_dir=tmp_path / "cache", spark_jars_dir=jars)


def test_no_archive_no_option(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert class_archive.java_options(settings) == ()
    assert "SharedArchiveFile" not in spark_conf(settings)["spark.driver.extraJavaOptions"]


def test_an_archive_in_the_cache_is_mapped_by_the_driver_only(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    path = class_archive.archive_path(settings)
    assert path is not None and path.parent.parent == settings.cache_path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    conf = spark_conf(settings)
    assert f"-XX:SharedArchiveFile={path}" in conf["spark.driver.extraJavaOptions"].split()
    assert "SharedArchiveFile" not in conf["spark.executor.extraJavaOptions"]


def test_another_classpath_is_another_archive(tmp_path: Path) -> None:
    """An archive is only good for the classpath it was made with: a changed connector jar
    set names another file, which does not exist until `lk stack up` makes it."""
    settings = _settings(tmp_path)
    before = class_archive.archive_path(settings)
    (settings.spark_jars_path / "connector-2.0.jar").write_bytes(b"jar")
    assert class_archive.archive_path(settings) != before
    (settings.spark_jars_path / "connector-2.0.jar").write_bytes(b"a larger jar")
    larger = class_archive.archive_path(settings)
    assert larger not in (before, None)
    # The same jar installed anew (a venv made again, a fresh clone): the JVM checks its time.
    os.utime(settings.spark_jars_path / "connector-2.0.jar", (1_000_000, 1_000_000))
    assert class_archive.archive_path(settings) not in (larger, before, None)


def test_making_an_archive_keeps_the_two_most_recent_others(tmp_path: Path) -> None:
    """Several checkouts share one cache, each with an archive of its own: the oldest go."""
    folder = tmp_path / "jvm"
    folder.mkdir()
    names = [f"spark-driver-{n}.jsa" for n in "abcd"]
    for age, name in enumerate(reversed(names)):  # d the oldest, a the newest
        (folder / name).write_bytes(b"archive")
        os.utime(folder / name, (1_000_000 + age, 1_000_000 + age))
    class_archive._forget_old_archives(folder / "spark-driver-new.jsa")
    assert sorted(p.name for p in folder.iterdir()) == ["spark-driver-a.jsa", "spark-driver-b.jsa"]
