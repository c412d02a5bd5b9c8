"""Where Spark's own output goes when `lk` runs on a terminal.

The driver JVM prints SLF4J's lines and Spark's WARN lines of its internals; on a terminal they
bury the command's progress, so they go to a log file of the stack instead, named when the
command ends. Off a terminal (a pod, a pipe, a test) they stay where the process's output goes,
which is where a pod's log is read.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from core.settings import Settings
from core.spark import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def jvm_log(settings: Settings, app_name: str, *, terminal: bool | None = None) -> Path | None:
    """The log file for `app_name`'s JVM output, or None off a terminal. The command names the
    file when it ends, failed or not."""
    if not (sys.stdout.isatty() if terminal is None else terminal):
        return None
    path = settings.stack_path / "logs" / f"spark-{app_name}.log"
    context = click.get_current_context(silent=True)
    if context is not None:
        context.call_on_close(lambda: click.echo(f"Spark's own output: {path}"))
    return path


def spark_session(settings: Settings, app_name: str, *, long_running: bool = False) -> SparkSession:
    """A Spark session for an `lk` command, its JVM's output kept off the terminal.
    `long_running`: a stream that runs until stopped (`core.spark.event_log_conf`)."""
    return build_spark_session(
        settings, app_name, jvm_log(settings, app_name), long_running=long_running
    )
