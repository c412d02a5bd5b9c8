"""What a new user sees of long work: the units a build reports, the bars' lines off a
terminal, and where Spark's own output goes."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from core.settings import Settings
from infra.stack import artifacts
from kappa.reprocess import ReplayPosition
from lk.progress_bars import BuildBars, ReplayBars, produce_bar
from lk.spark_output import jvm_log


def test_maven_lines_name_each_file_fetched_or_copied() -> None:
    fetched = (
        "[INFO] Downloaded from central: https://repo.maven.apache.org/maven2/org/apache/kafka/"
        "kafka-clients/4.1.0/kafka-clients-4.1.0.jar (12 MB at 3.1 MB/s)"
    )
    assert artifacts._maven_file(fetched) == "kafka-clients-4.1.0.jar"
    copied = "[INFO] Copying delta-spark_2.13-4.0.0.jar to /c/jars/delta-spark_2.13-4.0.0.jar"
    assert artifacts._maven_file(copied) == "delta-spark_2.13-4.0.0.jar"
    assert artifacts._maven_file("[INFO] Downloading from central: https://x/y.jar") is None
    assert artifacts._maven_file("[INFO] BUILD SUCCESS") is None


def test_go_lines_name_each_module_downloaded_and_package_compiled() -> None:
    assert artifacts._go_unit("go: downloading github.com/minio/minio v0.0.0") == (
        "github.com/minio/minio v0.0.0"
    )
    assert artifacts._go_unit("github.com/minio/minio/internal/auth") == (
        "github.com/minio/minio/internal/auth"
    )
    for noise in ("", "go: finding module", "# github.com/x/y", "\tcompile error"):
        assert artifacts._go_unit(noise) is None


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []

    def started(self, build: str, unit: str) -> None:
        self.events.append(("started", build, unit))

    def advanced(self, item: str) -> None:
        self.events.append(("advanced", item))

    def finished(self) -> None:
        self.events.append(("finished",))


def test_a_build_reports_each_unit_as_it_runs_and_keeps_its_last_lines() -> None:
    recorder = Recorder()
    script = "echo 'go: downloading a v1'; echo pkg/b; echo; echo 'go: error here'; exit 3"
    code, lines = artifacts._run_reporting(["sh", "-c", script], recorder, artifacts._go_unit)
    assert code == 3
    assert recorder.events == [("advanced", "a v1"), ("advanced", "pkg/b")]
    assert lines[-1] == "go: error here"


def test_build_bars_off_a_terminal_say_what_was_done_in_lines() -> None:
    said: list[str] = []
    bars = BuildBars(echo=said.append, terminal=False)
    bars.started("building MinIO", "packages")
    for package in ("a", "b", "c"):
        bars.advanced(package)
    bars.finished()
    assert said[0] == "  building MinIO ..."
    assert said[1].startswith("  building MinIO: 3 packages in ")


def test_the_produce_and_replay_bars_take_their_updates_off_a_terminal() -> None:
    bar, update = produce_bar(None, terminal=False)
    with bar:
        update(10, None)
        update(20, 40)
    assert bar.tasks[0].completed == 20 and bar.tasks[0].total == 40
    replay = ReplayBars(terminal=False)
    with replay.bar:
        for at in (ReplayPosition(2, 1, 0, 0, 100), ReplayPosition(2, 1, 3, 100, 100)):
            replay(at)
        replay(ReplayPosition(2, 2, 1, 5, 5))
    first, second = replay.bar.tasks
    assert first.description == "replaying into kappa-v2, round 1" and first.finished
    assert first.fields["micro_batches"] == 3 and second.completed == 5


def test_spark_output_goes_to_a_file_named_at_the_end_only_on_a_terminal(
    tmp_path: Path,
) -> None:
    settings = Settings(stack_dir=tmp_path / "stack")
    assert jvm_log(settings, "lk-batch", terminal=False) is None

    @click.command()
    def command() -> None:
        path = jvm_log(settings, "lk-batch", terminal=True)
        click.echo(f"log at {path}")

    result = CliRunner().invoke(command)
    expected = tmp_path / "stack" / "logs" / "spark-lk-batch.log"
    assert result.output.splitlines() == [f"log at {expected}", f"Spark's own output: {expected}"]
