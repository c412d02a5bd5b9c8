"""Kafka in KRaft mode, single node (broker and controller in one JVM), from Maven jars.

`KAFKA_HOME` names an existing Kafka installation to use instead (its libs/ folder).
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from pathlib import Path

from core.provision import ProvisionError, ensure_topics
from infra.stack import artifacts, jvm
from infra.stack.process import StackError, port_open
from infra.stack.service import Service


class Kafka(Service):
    name = "kafka"

    @property
    def port(self) -> int:
        return self.settings.kafka_port

    @property
    def config_file(self) -> Path:
        return self.data_dir / "server.properties"

    def _classpath(self) -> str:
        if home := os.environ.get("KAFKA_HOME"):
            return str(Path(home) / "libs" / "*")
        return str(artifacts.kafka_jars(self.settings) / "*")

    def _java(self) -> str:
        return jvm.java("kafka")

    def prepare(self) -> None:
        s = self.settings
        logs = self.data_dir / "data"
        logs.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@{s.host}:{s.kafka_controller_port}",
                    f"listeners=PLAINTEXT://{s.host}:{s.kafka_port},"
                    f"CONTROLLER://{s.host}:{s.kafka_controller_port}",
                    f"advertised.listeners=PLAINTEXT://{s.host}:{s.kafka_port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={logs}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=false",
                    # Retention is on record timestamps, and workloads replayed or generated here
                    # carry past ones: a time limit would delete them on arrival. Topics opt in.
                    "log.retention.ms=-1",
                    # A profile version may be compacted away as soon as a newer one exists.
                    "log.cleaner.min.compaction.lag.ms=0",
                    # An idle cleaner looks for dirty logs every second, not every 15 s: the
                    # comparison's compaction scenario waits for it (a look costs next to nothing).
                    "log.cleaner.backoff.ms=1000",
                    "",
                ]
            )
        )
        jvm.write_log4j2(
            self._log4j2,
            self.settings.stack_path / "logs" / "kafka-server.log",
            {"kafka": "WARN", "org.apache.kafka": "WARN"},
        )
        if not (logs / "meta.properties").exists():
            cluster_id = _cluster_id()
            result = subprocess.run(
                [
                    self._java(),
                    "-cp",
                    self._classpath(),
                    *self._log_opts(),
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cluster_id,
                    "-c",
                    str(self.config_file),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                detail = (result.stderr or result.stdout).strip().splitlines()[-1:]
                raise StackError(f"kafka: formatting the KRaft storage failed: {detail}")

    @property
    def _log4j2(self) -> Path:
        return self.data_dir / "log4j2.properties"

    def _log_opts(self) -> list[str]:
        return [f"-Dlog4j2.configurationFile={self._log4j2}"]

    def launch(self) -> None:
        self.process.start(
            [
                self._java(),
                f"-Xmx{self.settings.kafka_heap}",
                f"-Xms{self.settings.kafka_heap}",
                "-XX:+UseG1GC",
                "-Djava.awt.headless=true",
                *self._log_opts(),
                "-cp",
                self._classpath(),
                "kafka.Kafka",
                str(self.config_file),
            ]
        )

    def _admin(self):  # type: ignore[no-untyped-def]
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.settings.kafka_bootstrap})

    def ready(self) -> bool:
        if not port_open(self.settings.host, self.port):
            return False  # spares librdkafka's "connection refused" noise while the JVM starts
        metadata = self._admin().list_topics(timeout=2)
        return bool(metadata.brokers)

    def provision(self) -> None:
        try:
            ensure_topics(self.settings)
        except ProvisionError as exc:
            raise StackError(str(exc)) from exc

    def status(self):  # type: ignore[no-untyped-def]
        base = super().status()
        if not base.running:
            return base
        topics = sorted(
            t for t in self._admin().list_topics(timeout=5).topics if not t.startswith("__")
        )
        return type(base)(base.name, True, base.owned, base.address, "topics: " + ", ".join(topics))


def _cluster_id() -> str:
    """A random KRaft cluster id (Kafka's own form: a UUID in URL-safe base64). One that
    starts with "-" is drawn again: the storage tool would read it as an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
