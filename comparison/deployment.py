"""Both architectures deployed as local processes, the way the chart runs them in `both` mode.

Long-running: the archiver and the speed layer (Lambda), the Kappa job, and optionally the API
(`lk serve`, for the dashboard). One-shot: Lambda's batch runs and Kappa's reprocessing runs,
each measured from start to end. Every process's cost is kept for the report, per component.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import psutil

from comparison.errors import ComparisonError
from comparison.figures import ComponentCost
from comparison.processes import Finished, LkProcess, run_to_end
from core.settings import Settings
from infra.stack.stack import services


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    architecture: str
    finished: Finished


MAX_RESTARTS = 3
"""Restarts of one stream before the run gives up on it."""


class Deployment:
    """The running components of both architectures, and the jobs run against them."""

    def __init__(
        self,
        settings: Settings,
        logs: Path,
        serve_port: int | None = None,
        micro_batch_records: int | None = None,
    ) -> None:
        self.settings = settings
        self.logs = logs
        env = settings.as_env()
        self.env = env
        # The live streams read at most this much per micro-batch; the jobs read as they can.
        live = env if micro_batch_records is None else {
            **env, "LK_STREAM_MAX_OFFSETS_PER_TRIGGER": str(micro_batch_records)
        }  # fmt: skip
        self.streams = {
            "archiver": ("lambda", LkProcess("archiver", ["archive"], env, logs / "archiver.log")),
            "speed layer": (
                "lambda",
                LkProcess("speed layer", ["stream", "--architecture", "lambda"], live,
                          logs / "speed-layer.log"),
            ),
            "Kappa job": (
                "kappa",
                LkProcess("Kappa job", ["stream", "--architecture", "kappa"], live,
                          logs / "kappa-job.log"),
            ),
        }  # fmt: skip
        if serve_port is not None:
            self.streams["API"] = (
                "shared",
                LkProcess("API", ["serve", "--port", str(serve_port), "--workers", "1"], env,
                          logs / "api.log"),
            )  # fmt: skip
        self.jobs: list[Job] = []
        self.restarted: list[str] = []
        """Each restart of a stream, with the last words it died with."""
        self._service_cpu_at_start = _service_cpu(settings)

    def start(self) -> None:
        for _architecture, process in self.streams.values():
            process.start()

    def check(self) -> None:
        """Every long-running component is up. A dead one is restarted, as its Deployment
        would be (its checkpoint makes that exact: a transient fault, such as a store that did
        not answer in time on a saturated node, costs a restart, not the run); one that keeps
        dying stops the run with its last words. The API is not checked: it only serves the
        dashboard (its port may be taken)."""
        for name, (architecture, process) in self.streams.items():
            if architecture == "shared" or process.alive:
                continue
            last = process.tail(600).strip().splitlines()
            reason = last[-1] if last else "no output"
            if process.restarts >= MAX_RESTARTS:
                raise ComparisonError(
                    f"the {name} stopped {process.restarts + 1} times ({process.log}): {reason}"
                )
            self.restarted.append(f"{name}: {reason}")
            process.ensure_running()

    def stop(self) -> None:
        for _architecture, process in self.streams.values():
            process.stop()

    def job(self, name: str, architecture: str, args: list[str], timeout_s: float) -> Job:
        """Run one `lk` command to its end (a batch, a reprocess) and keep its cost."""
        log = self.logs / f"{name.replace(' ', '-')}-{len(self.jobs)}.log"
        finished = run_to_end(LkProcess(name, args, self.env, log), timeout_s)
        job = Job(name, architecture, finished)
        self.jobs.append(job)
        return job

    def costs(self) -> list[ComponentCost]:
        """CPU-seconds and peak RSS per component; jobs of one kind are added up (peak: the
        largest run's)."""
        costs = [
            ComponentCost(name, architecture, p.usage.cpu_seconds, p.usage.peak_rss_bytes)
            for name, (architecture, p) in self.streams.items()
        ]
        summed: dict[tuple[str, str], list[Finished]] = defaultdict(list)
        for job in self.jobs:
            summed[(job.name, job.architecture)].append(job.finished)
        for (name, architecture), runs in summed.items():
            costs.append(
                ComponentCost(
                    f"{name} ({len(runs)} run{'s' if len(runs) > 1 else ''})",
                    architecture,
                    sum(r.usage.cpu_seconds for r in runs),
                    max(r.usage.peak_rss_bytes for r in runs),
                )
            )
        now = _service_cpu(self.settings)
        for name, (cpu, rss) in now.items():
            before = self._service_cpu_at_start.get(name, (0.0, 0))[0]
            costs.append(ComponentCost(name, "shared", cpu - before, rss))
        return costs


def _service_cpu(settings: Settings) -> dict[str, tuple[float, int]]:
    """The stack's services (Kafka, MinIO, Postgres): CPU-seconds so far and resident memory
    now, of each one's process tree (its peak is not sampled: it is the same for both)."""
    found = {}
    for service in services(settings):
        pid = service.process.pid()
        if pid is None:
            continue
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
            cpu = sum(p.cpu_times().user + p.cpu_times().system for p in tree)
            rss = sum(p.memory_info().rss for p in tree)
        except psutil.Error:
            continue
        found[service.name] = (cpu, rss)
    return found
