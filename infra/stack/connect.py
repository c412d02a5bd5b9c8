"""Kafka Connect in distributed mode (one worker), from Maven jars, running Debezium's Postgres
connector on the application's user table (core/cdc).

Distributed mode keeps the connector's configuration, source offsets and status in Kafka
topics of the worker group's own, so a worker killed and started again resumes where its
last committed offset says, and the connector is registered through the REST API, as on the
cluster.
"""

from __future__ import annotations

from core.cdc import capture, connector, provision
from infra.stack import artifacts, jvm
from infra.stack.process import StackError, port_open
from infra.stack.service import Service, ServiceStatus


class KafkaConnect(Service):
    name = "connect"

    @property
    def port(self) -> int:
        return self.settings.connect_port

    def worker_properties(self) -> dict[str, str]:
        s = self.settings
        group = s.connect_group
        return {
            "bootstrap.servers": s.kafka_bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            # One worker: a partition each is enough, and each more is a log to open.
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "offset.flush.interval.ms": str(s.connect_offset_flush_ms),
            "listeners": f"http://{s.host}:{s.connect_port}",
            "rest.advertised.host.name": s.host,
            "rest.advertised.port": str(s.connect_port),
            "plugin.path": str(artifacts.connect_plugin_path(s)),
            # Every plugin here declares itself (META-INF/services): the worker loads those
            # declarations instead of scanning every class of every jar.
            "plugin.discovery": "service_load",
            "exactly.once.source.support": "enabled" if s.connect_exactly_once else "disabled",
        }

    def prepare(self) -> None:
        artifacts.connect_plugins(self.settings)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "worker.properties").write_text(
            "".join(f"{key}={value}\n" for key, value in self.worker_properties().items())
        )

    def launch(self) -> None:
        s = self.settings
        log_opts = jvm.write_log4j2(
            self.data_dir / "log4j2.properties",
            s.stack_path / "logs" / "connect-worker.log",
            {
                "org.apache.kafka": "WARN",
                "org.reflections": "ERROR",
                "io.debezium": "INFO",
                "org.apache.kafka.connect.runtime.WorkerSourceTask": "INFO",
            },
        )
        self.process.start(
            [
                jvm.java(self.name),
                f"-Xmx{s.connect_heap}",
                f"-Xms{s.connect_heap}",
                "-XX:+UseG1GC",
                "-Djava.awt.headless=true",
                *log_opts,
                "-cp",
                f"{artifacts.connect_jars(s)}/*",
                "org.apache.kafka.connect.cli.ConnectDistributed",
                str(self.data_dir / "worker.properties"),
            ]
        )

    def ready(self) -> bool:
        return port_open(self.settings.host, self.port) and connector.answers(self.settings)

    def provision(self) -> None:
        try:
            capture.start(self.settings)
        except connector.ConnectError as exc:
            raise StackError(f"connect: {exc} ({self.process.log_file})") from exc

    def status(self) -> ServiceStatus:
        base = super().status()
        if not base.running:
            return base
        states = connector.states(self.settings)
        held = provision.slot_retained_bytes(self.settings)
        detail = (
            f"connector {self.settings.cdc_connector}: "
            + ("not registered" if states is None else f"{states[0]}, tasks {states[1]}")
            + ("" if held is None else f"; slot {self.settings.cdc_slot} holds {held:,} B of WAL")
        )
        return ServiceStatus(base.name, True, base.owned, base.address, detail)
