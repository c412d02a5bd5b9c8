"""What every local service offers to the stack: prepare, start, wait until ready, stop."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from core.settings import Settings
from infra.stack.process import ManagedProcess, StackError, port_open, wait_until


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    owned: bool  # started by `lk stack up` (so `down` will stop it)
    address: str
    detail: str = ""


class Service(ABC):
    name: str

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.data_dir = settings.stack_path / self.name
        self.process = ManagedProcess(
            self.name, settings.stack_path / "run", settings.stack_path / "logs"
        )

    @property
    @abstractmethod
    def port(self) -> int: ...

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.port}"

    def prepare(self) -> None:  # noqa: B027 - an optional hook
        """Fetch or build what the service needs and initialise its data folder (idempotent)."""

    @abstractmethod
    def launch(self) -> None:
        """Start the server process in the background."""

    @abstractmethod
    def ready(self) -> bool:
        """True once the service answers requests."""

    def provision(self) -> None:  # noqa: B027 - an optional hook
        """Create what the pipeline needs inside the service (topics, buckets, databases)."""

    def stop(self) -> bool:
        return self.process.stop()

    def up(self) -> str:
        """Start if needed and wait until ready; returns what was done, for progress output."""
        if self.process.pid() is not None:
            action = "already running"
        else:
            if port_open(self.settings.host, self.port) and not self._port_let_go():
                raise StackError(
                    f"{self.name}: port {self.port} is in use by a process the stack did not "
                    f"start; stop it or set LK_{self.name.upper()}_PORT"
                )
            self.prepare()
            self.launch()
            action = "started"
        if not wait_until(self.ready, self.settings.startup_timeout_s, interval_s=0.3):
            alive = self.process.pid() is not None
            reason = "did not answer in time" if alive else "exited"
            tail = self.process.log_tail(3)
            raise StackError(
                f"{self.name} {reason} ({self.process.log_file}): {tail or 'no log output'}"
            )
        self.provision()
        return action

    def _port_let_go(self, timeout_s: float = 30.0) -> bool:
        """True once the port closes, when a process the stack started has just died (killed,
        crashed): a JVM's main thread is a zombie while its other threads still exit and hold
        its sockets, seconds on a busy machine. False at once for a port the stack never had."""
        if not self.process.pid_file.exists():
            return False
        return wait_until(
            lambda: not port_open(self.settings.host, self.port), timeout_s, interval_s=0.1
        )

    def status(self) -> ServiceStatus:
        owned = self.process.pid() is not None
        try:
            running = self.ready()
        except Exception:
            running = False
        return ServiceStatus(self.name, running, owned, self.address)
