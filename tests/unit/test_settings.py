"""`core.settings.Settings`: the one settings object, read from the environment."""

from __future__ import annotations

from pathlib import Path

from core.settings import Settings


def test_a_copy_with_other_folders_uses_them(tmp_path: Path) -> None:
    # Explicit Nones: the environment (LK_CACHE_DIR in CI) must not decide this test.
    first = Settings(home=tmp_path / "a", stack_dir=None, cache_dir=None, spark_jars_dir=None)
    assert first.stack_path == (tmp_path / "a" / ".stack").resolve()  # read once, as code does
    assert first.spark_jars_path == (tmp_path / "a" / ".cache" / "jars" / "spark").resolve()
    copy = first.model_copy(update={"stack_dir": tmp_path / "b", "cache_dir": tmp_path / "c"})
    assert copy.stack_path == (tmp_path / "b").resolve()
    assert copy.cache_path == (tmp_path / "c").resolve()
    assert copy.spark_jars_path == (tmp_path / "c" / "jars" / "spark").resolve()


def test_every_spark_jvm_compiles_huge_methods_and_the_driver_takes_the_settings_options(
    tmp_path: Path,
) -> None:
    """Whole-stage code generation writes the event parsing as methods the JIT otherwise leaves
    interpreted (`core.spark`); a user's driver options come after, so they can override."""
    from core.spark import spark_conf

    (tmp_path / "connector.jar").touch()
    settings = Settings(spark_jars_dir=tmp_path, spark_driver_java_options="-XX:+UseSerialGC")
    conf = spark_conf(settings)
    assert conf["spark.driver.extraJavaOptions"].split() == [
        "-XX:-DontCompileHugeMethods",
        "-XX:+UseSerialGC",
    ]
    assert conf["spark.executor.extraJavaOptions"] == "-XX:-DontCompileHugeMethods"
    without = spark_conf(settings.model_copy(update={"spark_driver_java_options": ""}))
    assert without["spark.driver.extraJavaOptions"] == "-XX:-DontCompileHugeMethods"
