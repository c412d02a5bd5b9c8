"""A service's start (`infra.stack.service.Service.up`) and the port it needs: a port held by a
process the stack did not start is refused at once; one its own dead process still holds (a
killed JVM's threads exiting) is waited for."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from core.settings import Settings
from infra.stack.process import StackError
from infra.stack.service import Service


class _Listener(Service):
    name = "listener"

    def __init__(self, settings: Settings, port: int) -> None:
        self._port = port
        self.launched = False
        super().__init__(settings)

    @property
    def port(self) -> int:
        return self._port

    def launch(self) -> None:
        self.launched = True

    def ready(self) -> bool:
        return self.launched


@pytest.fixture
def held(tmp_path: Path) -> tuple[_Listener, socket.socket]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    settings = Settings(home=tmp_path, stack_dir=tmp_path / "stack", host="127.0.0.1")
    return _Listener(settings, sock.getsockname()[1]), sock


def test_a_port_someone_else_holds_is_refused_at_once(
    held: tuple[_Listener, socket.socket],
) -> None:
    service, sock = held
    with sock, pytest.raises(StackError, match="in use by a process the stack did not start"):
        service.up()
    assert not service.launched


def test_a_port_its_own_dead_process_still_holds_is_waited_for(
    held: tuple[_Listener, socket.socket],
) -> None:
    service, sock = held
    service.process.pid_file.parent.mkdir(parents=True, exist_ok=True)
    service.process.pid_file.write_text("999999999 0")  # started by the stack, now gone
    threading.Timer(0.5, sock.close).start()
    assert service.up() == "started"
    assert service.launched
