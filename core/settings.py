"""One settings object, read from the environment (prefix ``LK_``).

The CLI, the layers, the DAGs, the chart's values and the tests all read configuration from
here, so a value has one name everywhere: ``LK_KAFKA_PORT`` locally is ``kafka.port`` in the
chart and ``Settings().kafka_port`` in code.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.times import MINUTE_MS

NONE_ENV = "null"
"""An unset setting in the environment (`Settings.as_env`)."""


class Architecture(StrEnum):
    LAMBDA = "lambda"
    KAPPA = "kappa"
    BOTH = "both"


class SparkBackend(StrEnum):
    """Where the DAGs' Spark steps run: in the Airflow task, or in a pod of their own."""

    LOCAL = "local"
    KUBERNETES = "kubernetes"


def _project_home() -> Path:
    """Where the stack keeps its data and cache: ``LK_HOME``, else the working directory."""
    return Path(os.environ.get("LK_HOME", Path.cwd())).resolve()


class Settings(BaseSettings):
    # `null` in the environment is None: how `as_env` tells a child process that a setting is
    # unset, whatever the environment it inherits says.
    model_config = SettingsConfigDict(
        env_prefix="LK_", extra="ignore", frozen=True, env_parse_none_str=NONE_ENV
    )

    architecture: Architecture = Architecture.LAMBDA

    # Folders: data of the running stack (wiped by `lk stack reset`) and the download/build
    # cache (kept by reset, so a second `lk stack up` from nothing is fast).
    home: Path = Field(default_factory=_project_home)
    stack_dir: Path | None = None
    cache_dir: Path | None = None

    # Kafka (KRaft, single node) on loopback.
    host: str = "127.0.0.1"
    # Per-service hosts (Kubernetes: each service's DNS name); each defaults to `host`.
    kafka_host: str | None = None
    minio_host: str | None = None
    postgres_host: str | None = None
    kafka_port: int = 19092
    kafka_controller_port: int = 19093
    kafka_version: str = "4.1.1"
    kafka_heap: str = "512m"
    events_topic: str = "events"
    events_partitions: int = 6
    profiles_topic: str = "profiles"
    profiles_partitions: int = 3
    # Lambda only needs the log until it is archived, but retention is on record timestamps
    # (`received_ts`): a replayed or generated workload from the past would be deleted on
    # arrival by any finite time limit. -1 keeps it; set a limit for live traffic.
    lambda_events_retention_ms: int = -1
    # How long `lk drain` (the batch's `close_archive`) waits for a running archiver, which
    # holds the archive lease, to reach the log's end before it gives up with a reason.
    archive_wait_s: float = Field(default=600.0, gt=0)
    # Where `lk stream` and `lk archive` keep one heartbeat file per running query (the
    # chart's liveness probes read them); unset: none.
    stream_heartbeat_dir: Path | None = None

    # MinIO (S3 API) on loopback; the local defaults are development credentials only.
    minio_port: int = 19000
    minio_console_port: int = 19001
    minio_access_key: str = "lkminio"
    minio_secret_key: str = "lkminio-secret"  # noqa: S105 - local development default
    minio_version: str = "v0.0.0-20260212201848-7aac2a2c5b7c"
    master_bucket: str = "lk-master"
    views_bucket: str = "lk-views"
    checkpoints_bucket: str = "lk-checkpoints"
    dq_bucket: str = "lk-dq"
    # Spark's event logs, for the History Server (`spark_event_log_dir` names a folder in it).
    spark_events_bucket: str = "lk-spark-events"
    # Airflow's task logs (remote logging: `infra/airflow/config.py`, the chart's Airflow).
    logs_bucket: str = "lk-logs"
    # Every Great Expectations result is also written to the Data Docs bucket (its
    # `validations/` prefix) right after its validation, so `dq-docs` builds from every
    # process's results (a step pod's too); off: the local project folder only (tests without
    # MinIO).
    dq_share_results: bool = True

    # Postgres: the serving store.
    postgres_port: int = 15432
    postgres_user: str = "lk"
    postgres_password: str = "lk"  # noqa: S105 - local development default
    postgres_db: str = "serving"
    # The serving layer's login: it may read the store and write nothing. `lk init` (and the
    # local stack) create it with this password; the writers above never hand theirs to it.
    serving_postgres_user: str = "lk_reader"
    serving_postgres_password: str = "lk_reader"  # noqa: S105 - local development default
    postgres_bin_dir: Path | None = None

    # Change data capture: the application's user table, in a database of its own on the same
    # Postgres (not the serving store), written by `lk profiles` as the application's role and
    # read by Debezium's Postgres connector on Kafka Connect into `profiles_topic`
    # (core/cdc, docs/CONTRACT.md §2).
    # Off: no Kafka Connect runs, and the comparison and the demo produce profiles straight
    # into the topic (`core.cdc.publish`).
    cdc_enabled: bool = True
    app_db: str = "app"
    app_postgres_user: str = "lk_app"
    app_postgres_password: str = "lk_app"  # noqa: S105 - local development default
    cdc_postgres_user: str = "lk_cdc"  # the connector's login: REPLICATION, reads the table
    cdc_postgres_password: str = "lk_cdc"  # noqa: S105 - local development default
    cdc_connector: str = "lk-profiles"
    cdc_slot: str = "lk_profiles"
    cdc_publication: str = "lk_profiles"
    # Keys of Debezium's connector configuration set over `core.cdc.connector_config`'s (the
    # chart's `connect.connector.config`, as JSON in LK_CDC_CONNECTOR_CONFIG).
    cdc_connector_config: dict[str, str] = Field(default_factory=dict)
    # Debezium's heartbeat: a write to the app database's heartbeat table this often, so the
    # slot's confirmed position moves on while the captured table is idle and other databases
    # of the server write WAL (else the slot holds that WAL: docs/design/cdc.md).
    cdc_heartbeat_ms: int = Field(default=5_000, ge=100)
    # How long Debezium waits before it restarts its task after a retriable failure (the
    # database went away): the capture's pause after a Postgres restart. A restart that finds
    # the database still down fails the task for good (Kafka Connect does not restart it;
    # `lk stack up` does), so it waits longer than a restart takes (Debezium's default).
    cdc_restart_wait_ms: int = Field(default=10_000, ge=0)
    # The most WAL a slot may hold (Postgres `max_slot_wal_keep_size`) before Postgres
    # invalidates it: a connector away that long must start again from a snapshot.
    postgres_max_slot_wal_keep_size: str = "1GB"
    # How long `lk profiles` waits for its last change to be in Kafka (the slot's confirmed
    # position), and how long `lk stack up` waits for the connector to run.
    cdc_wait_timeout_s: float = Field(default=60.0, gt=0)
    # Kafka Connect, distributed mode (one worker locally): its REST port, heap, group (which
    # names its config, offset and status topics) and how often it commits source offsets,
    # which is when Debezium confirms a position to the slot.
    connect_host: str | None = None
    connect_port: int = 18083
    connect_heap: str = "384m"
    connect_group: str = "lk-connect"
    connect_offset_flush_ms: int = Field(default=500, ge=50)
    # KIP-618: source records and their offsets in one Kafka transaction (no duplicate after
    # a crash). Off: at least once, which the views absorb (docs/design/cdc.md, measured).
    connect_exactly_once: bool = False

    # Spark.
    spark_master: str = "local[2]"
    spark_shuffle_partitions: int = 4
    spark_driver_memory: str = "2g"
    # Connector jars (Kafka source, s3a, Delta); an image sets this to the jars it bakes in.
    spark_jars_dir: Path | None = None
    # Extra options of the Spark driver's JVM (`spark.driver.extraJavaOptions`). A comparison
    # run gives its short-lived JVMs the quick JIT compiler alone when this is empty.
    spark_driver_java_options: str = ""
    # Each driver's Spark UI, on `spark_ui_port` (Spark takes the next free port if it is in
    # use), with the driver's own metrics at /metrics/prometheus. Off by default: measured on
    # the Kappa job at a trickle (5 events/s, a 2 s trigger), its JVM took about 6% of a core
    # more and grew 370 MB more in 150 s (docs/ARCHITECTURE.md, "Spark's own views").
    spark_ui_enabled: bool = False
    spark_ui_port: int = Field(default=4040, ge=1, le=65535)
    # Where Spark's event log goes (`s3a://lk-spark-events/`, or a `file:` folder), for the
    # History Server; None: no event log. Which drivers write one: `core.spark.event_log_conf`.
    spark_event_log_dir: str | None = None

    # Stream processing.
    watermark_delay_minutes: int = 10
    # The local Spark driver JVM runs in a session of its own at this autogroup niceness (0-19):
    # Linux's default scheduler shares the CPU between sessions first, so on a machine the jobs
    # share with the serving API, their micro-batches take the CPU the API leaves (bench, api
    # step: filtered p99 40 -> 18 ms while the speed layer ingests). 0: an equal share.
    spark_jvm_niceness: int = Field(default=10, ge=0, le=19)
    # Upper bound of records per micro-batch (bounds memory and latency of one micro-batch).
    stream_max_offsets_per_trigger: int = 200_000
    # Partitions of a stream's deduplication state (RocksDB), fixed when its checkpoint is
    # made: each is a store opened, committed and checkpointed at every micro-batch, a fixed
    # cost that a trickle pays in full (docs/BENCHMARKS.md, what a small micro-batch costs).
    stream_state_partitions: int = Field(default=2, ge=1)
    # A stream that starts with nothing committed (a Kappa replay, a first start on a retained
    # log) reads the log up to its end as one micro-batch, computed on Spark's task slots
    # (`stream_engine.history`) when it holds at least this many records (both topics); a
    # smaller one is merged on the driver as any micro-batch: faster there (its Spark jobs and
    # their compilation cost more than they save), and the driver holds at most this many
    # records, whatever the history (docs/BENCHMARKS.md, a replay on every task slot).
    stream_history_min_records: int = Field(default=1_000_000, ge=0)
    # Kappa reprocessing: the new version has caught up when, after a replay round, it is at
    # most this many records behind the log end (all partitions) and its watermark is this
    # close to the live version's (`kappa.reprocess.caught_up`).
    kappa_catchup_max_lag: int = 2_000
    kappa_catchup_watermark_slack_s: int = 120
    kappa_catchup_max_rounds: int = 20

    # Airflow: when `lambda_batch` and `data_quality` run (cron expressions or presets); empty:
    # no schedule, the DAG runs only when triggered (the UI, the REST API).
    batch_schedule: str = "@hourly"
    dq_schedule: str = "@hourly"
    # The local Airflow (infra/airflow): its API server and UI port on loopback.
    airflow_port: int = 18080
    # Where a DAG's Spark step runs: `local` in the task's process (Spark master `spark_master`),
    # `kubernetes` in a pod of its own (`lk step ...`, KubernetesPodOperator) made from the pod
    # template file the chart renders and mounts (its image, identity, settings and Secret's
    # keys: charts/lambda-kappa, `lk.airflow.stepPod`).
    spark_backend: SparkBackend = SparkBackend.LOCAL
    k8s_pod_template_file: str | None = None

    # Serving API.
    serve_port: int = 8000
    # Worker processes of `lk serve`; None: one per core this process may run on. A container
    # sees the node's cores, not its CPU limit: the chart sets it.
    serve_workers: int | None = Field(default=None, ge=1)
    # One log line per request (uvicorn's access log). Off: at a thousand requests a second it
    # costs about 5% of a worker's CPU, and GET /metrics has the latencies by view and code.
    serve_access_log: bool = False
    # Store connections per worker: kept open, and the most a worker opens under load.
    serve_pool_min_size: int = Field(default=2, ge=1)
    serve_pool_max_size: int = Field(default=8, ge=1)
    # How long a request waits for a store connection before it gets 503 (the store is down,
    # or the pool is saturated): short, so an outage answers fast instead of piling up.
    serve_pool_timeout_s: float = Field(default=2.0, gt=0)
    # The longest one statement of a reader may run (Postgres `statement_timeout`): a request
    # stuck behind a lock or a bad plan answers 503 instead of holding a connection.
    serve_statement_timeout_ms: int = Field(default=5_000, ge=1)
    # Rows per page of `GET /v1/views/{view}`: without `limit`, and the most `limit` may ask.
    serve_page_limit: int = Field(default=1_000, ge=1)
    serve_page_limit_max: int = Field(default=10_000, ge=1)
    # Encoded answers each worker keeps by their ETag (MiB; 0: none): a query asked again
    # while the state it was read from holds costs one statement and no rows.
    serve_answer_cache_mib: int = Field(default=64, ge=0)

    # Prometheus metrics of the long-running drivers (`lk stream`, `lk archive`): the port of
    # their /metrics server; unset, none is started (docs/METRICS.md). The address it binds:
    # `metrics_host` (the chart: 0.0.0.0, a pod is scraped on its IP), else `host`.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str | None = None

    # How long `lk stack up` waits for each service to answer.
    startup_timeout_s: float = 120.0

    # The local Kubernetes cluster (`lk cluster`, infra/cluster): one node whose processes all
    # run inside a network namespace of its own; the host reaches its API through a relay on
    # loopback. Versions of what is built from the registries and cached under cache_path.
    kubernetes_version: str = "v1.34.4"  # kube-apiserver, kubelet, ... built from the Go proxy
    coredns_version: str = "v1.15.0"  # the cluster DNS, built with `go install`
    helm_version: str = "v3.22.0"  # helm, built with `go install` (the chart is apiVersion v2)
    etcd_version: str = "v3.6.16"  # the API's store, built from the Go proxy (1.34 expects 3.6)
    # The NetworkPolicy agent: kubernetes-sigs' kube-network-policies, kind's own, from the Go proxy
    network_policy_agent_version: str = "v0.8.0"
    cluster_node_name: str = "lk-node"  # the node's name (and its kubelet's user)
    cluster_netns: str = "lk-cluster"  # the network namespace (/run/netns/<name>) of the cluster
    # The node's IP: on the loopback interface of the netns; the apiserver, kubelet and CoreDNS
    # listen on it. Never routed from the host.
    cluster_node_ip: str = "10.200.0.1"
    cluster_pod_cidr: str = "10.244.0.0/24"  # pod IPs (CNI bridge, host-local IPAM), in the netns
    cluster_service_cidr: str = "10.96.0.0/16"  # Service IPs (kube-proxy, iptables, in the netns)
    cluster_domain: str = "cluster.local"
    # The API on host loopback (the relay into the netns): what the kubeconfig points at.
    cluster_api_port: int = 16443
    # Sockets and runtime state: a short fixed path (unix socket paths are limited to 108 bytes).
    cluster_run_dir: Path = Path("/run/lk-cluster")
    # How long `lk cluster up` waits for each component to become ready.
    cluster_startup_timeout_s: float = 180.0

    @model_validator(mode="after")
    def _serving_bounds(self) -> Self:
        if self.serve_page_limit > self.serve_page_limit_max:
            raise ValueError(
                f"serve_page_limit ({self.serve_page_limit}) is above serve_page_limit_max "
                f"({self.serve_page_limit_max})"
            )
        if self.serve_pool_min_size > self.serve_pool_max_size:
            raise ValueError(
                f"serve_pool_min_size ({self.serve_pool_min_size}) is above "
                f"serve_pool_max_size ({self.serve_pool_max_size})"
            )
        return self

    # Plain properties, not cached: `model_copy(update=...)` copies a cached value along, and a
    # copy with another stack_dir would keep the old path.
    @property
    def stack_path(self) -> Path:
        return (self.stack_dir or self.home / ".stack").resolve()

    @property
    def cache_path(self) -> Path:
        return (self.cache_dir or self.home / ".cache").resolve()

    @property
    def spark_jars_path(self) -> Path:
        return (self.spark_jars_dir or self.cache_path / "jars" / "spark").resolve()

    @property
    def watermark_delay_ms(self) -> int:
        """The event-time watermark's delay, as the streams and the cutoff rule use it."""
        return self.watermark_delay_minutes * MINUTE_MS

    @property
    def serve_worker_count(self) -> int:
        """`serve_workers`, or the cores this process may run on (its affinity, not the host's)."""
        return self.serve_workers or len(os.sched_getaffinity(0))

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.kafka_host or self.host}:{self.kafka_port}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.minio_host or self.host}:{self.minio_port}"

    @property
    def postgres_dsn(self) -> str:
        return (
            f"postgresql://{self.postgres_user}:{self.postgres_password}"
            f"@{self.postgres_host or self.host}:{self.postgres_port}/{self.postgres_db}"
        )

    @property
    def connect_url(self) -> str:
        """Kafka Connect's REST API."""
        return f"http://{self.connect_host or self.host}:{self.connect_port}"

    @property
    def postgres_jdbc_url(self) -> str:
        return (
            f"jdbc:postgresql://{self.postgres_host or self.host}:{self.postgres_port}"
            f"/{self.postgres_db}"
            "?reWriteBatchedInserts=true"
        )

    @property
    def buckets(self) -> tuple[str, ...]:
        return (
            self.master_bucket,
            self.views_bucket,
            self.checkpoints_bucket,
            self.dq_bucket,
            self.spark_events_bucket,
            self.logs_bucket,
        )

    def namespaced(self, name: str) -> Settings:
        """These settings with topics, buckets and a serving database of their own, named after
        `name`: for a run that must see only its own data on services others use. Each is
        its usual name with `-name` appended (`lk-master` → `lk-master-cmp-…`), so a policy can
        grant a family of runs by prefix (the chart's comparison user). The Data Docs bucket
        stays shared: what is published there is meant to be found. Such a run writes no Spark
        event log: its drivers are measured, and are not the deployment's history."""
        return self.model_copy(
            update={
                "events_topic": f"{self.events_topic}-{name}",
                "profiles_topic": f"{self.profiles_topic}-{name}",
                "master_bucket": f"{self.master_bucket}-{name}",
                "views_bucket": f"{self.views_bucket}-{name}",
                "checkpoints_bucket": f"{self.checkpoints_bucket}-{name}",
                "postgres_db": f"{self.postgres_db}_{name}".replace("-", "_"),
                "app_db": f"{self.app_db}_{name}".replace("-", "_"),
                "cdc_connector": f"{self.cdc_connector}-{name}",
                "cdc_slot": f"{self.cdc_slot}_{name}".replace("-", "_"),
                "cdc_publication": f"{self.cdc_publication}_{name}".replace("-", "_"),
                "spark_event_log_dir": None,
            }
        )

    def as_env(self) -> dict[str, str]:
        """The environment that makes another process (an `lk` command) read these settings.
        An unset one is written too (`NONE_ENV`): a child that inherits its parent's
        environment (a comparison run's drivers, in a pod that writes Spark event logs) must
        not take a value these settings do not have."""
        return {
            f"LK_{name.upper()}": _env_value(value) for name, value in self.model_dump().items()
        }


def _env_value(value: object) -> str:
    """One setting as its environment variable: a mapping or a list as JSON (as the settings
    read them back), an enum by its value."""
    if value is None:
        return NONE_ENV
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(getattr(value, "value", value))


def get_settings() -> Settings:
    """Read the settings now (never at import time, so tests can set the environment first)."""
    return Settings()
