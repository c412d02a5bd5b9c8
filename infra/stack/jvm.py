"""What the stack's Java services (Kafka, Kafka Connect) share: the `java` they run on and a
Log4j 2 file that sends their log to one file of the stack's logs folder."""

from __future__ import annotations

import shutil
from pathlib import Path

from infra.stack.process import StackError

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
{loggers}"""


def java(service: str) -> str:
    """The `java` on PATH, or a one-line StackError naming the service that needs it."""
    found = shutil.which("java")
    if found is None:
        raise StackError(f"{service}: 'java' is not installed ({service} needs a JDK 17+)")
    return found


def write_log4j2(config: Path, log: Path, quiet: dict[str, str]) -> list[str]:
    """Write a Log4j 2 file logging to `log`, with each logger of `quiet` at its level; the
    JVM option that reads it."""
    loggers = "".join(
        f"logger.l{i}.name = {name}\nlogger.l{i}.level = {level}\n"
        for i, (name, level) in enumerate(quiet.items())
    )
    config.write_text(_LOG4J2.format(log=log, loggers=loggers))
    return [f"-Dlog4j2.configurationFile={config}"]
