"""The cluster's network namespace: everything of the cluster lives in it.

The host's routes, interfaces and iptables stay untouched: the node IP sits on the
namespace's loopback interface, pods hang off a bridge inside it, kube-proxy's rules are
written inside it, and its default route is a black hole (there is no interface to the host),
so nothing the cluster sends leaves it. Deleting the namespace deletes all of that.

The host reaches the namespace in two ways: processes started through
``nsenter --net=<netns> -- ...`` (which keeps the host's mount namespace, so the kubelet's
volume mounts are visible to containers), and a thread of our own that enters it with
``setns`` (``in_netns``) to check readiness.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import http.client
import os
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from core.settings import Settings
from infra.cluster import paths
from infra.stack.process import StackError

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
BRIDGE_INTERFACE = "lkbr0"
# Set inside the namespace (net.* sysctls are per namespace): bridged pod traffic goes through
# iptables (kube-proxy's Service rules), and the namespace routes between pods and Services.
NETNS_SYSCTLS = {
    "net/bridge/bridge-nf-call-iptables": "1",
    "net/ipv4/ip_forward": "1",
}


def setns(netns_file: Path) -> None:
    """Move the calling thread into a network namespace (a whole single-threaded process)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = os.open(netns_file, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({netns_file}): {os.strerror(err)}")
    finally:
        os.close(fd)


def in_netns(netns_file: Path, fn: Callable[[], T], timeout_s: float = 30.0) -> T:
    """Run ``fn`` in a new thread that first enters the namespace; its sockets stay there."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            setns(netns_file)
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, name="lk-netns", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"no answer inside {netns_file} in {timeout_s:.0f}s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def netns_exists(settings: Settings) -> bool:
    return paths.netns_path(settings).exists()


def netns_inode(settings: Settings) -> int | None:
    try:
        return paths.netns_path(settings).stat().st_ino
    except FileNotFoundError:
        return None


def _ip(*args: str, netns: str | None = None) -> None:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise StackError(f"{' '.join(argv)} failed: {result.stderr.strip() or 'no output'}")


def create_netns(settings: Settings) -> bool:
    """Create and wire the namespace (idempotent); True if it was created now."""
    name = settings.cluster_netns
    if netns_exists(settings):
        return False
    _ip("netns", "add", name)
    try:
        _ip("link", "set", "lo", "up", netns=name)
        _ip("addr", "add", f"{settings.cluster_node_ip}/32", "dev", "lo", netns=name)
        _ip("route", "add", "blackhole", "default", netns=name)
        in_netns(paths.netns_path(settings), lambda: _write_sysctls(NETNS_SYSCTLS))
    except Exception:
        delete_netns(settings)
        raise
    return True


def _write_sysctls(values: dict[str, str]) -> None:
    for key, value in values.items():
        Path("/proc/sys", key).write_text(value + "\n")


def delete_netns(settings: Settings) -> bool:
    if not netns_exists(settings):
        return False
    _ip("netns", "delete", settings.cluster_netns)
    return True


def pids_in_netns(settings: Settings) -> list[int]:
    """Every process whose network namespace is the cluster's: all of them are the cluster's
    (its components, containerd's shims, the containers)."""
    inode = netns_inode(settings)
    if inode is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "ns" / "net").stat().st_ino == inode:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def nsenter_argv(settings: Settings, argv: list[str]) -> list[str]:
    """``argv`` run inside the namespace, in the host's mount namespace (nsenter execs it, so
    the PID is the program's own)."""
    return ["nsenter", f"--net={paths.netns_path(settings)}", "--", *argv]


def _insecure_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # a component's self-signed health endpoint, in our netns
    return ctx


def http_get(
    settings: Settings, url_host: str, port: int, path: str, *, tls: bool = False
) -> tuple[int, str]:
    """GET inside the namespace; (status, body)."""

    def get() -> tuple[int, str]:
        conn: http.client.HTTPConnection
        if tls:
            conn = http.client.HTTPSConnection(
                url_host, port, timeout=3, context=_insecure_context()
            )
        else:
            conn = http.client.HTTPConnection(url_host, port, timeout=3)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            conn.close()

    return in_netns(paths.netns_path(settings), get, timeout_s=10)


def dns_query(name: str) -> bytes:
    """A DNS query packet for the A record of ``name``."""
    header = struct.pack(">HHHHHH", 0x4C4B, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split("."))
    return header + labels + b"\x00" + struct.pack(">HH", 1, 1)


def dns_answer_ips(packet: bytes) -> list[str]:
    """The A records of a DNS answer to one question (empty on an error code)."""
    if len(packet) < 12 or packet[3] & 0x0F:
        return []
    answers = struct.unpack(">H", packet[6:8])[0]
    pos = 12
    while packet[pos] != 0:  # the question's name
        pos += packet[pos] + 1
    pos += 5
    ips = []
    for _ in range(answers):
        if packet[pos] & 0xC0 == 0xC0:
            pos += 2
        else:
            while packet[pos] != 0:
                pos += packet[pos] + 1
            pos += 1
        rtype, _cls, _ttl, length = struct.unpack(">HHIH", packet[pos : pos + 10])
        pos += 10
        if rtype == 1 and length == 4:
            ips.append(socket.inet_ntoa(packet[pos : pos + 4]))
        pos += length
    return ips


def resolve(settings: Settings, name: str) -> list[str]:
    """Ask the cluster DNS (on the node IP, inside the namespace) for ``name``'s A records."""

    def ask() -> list[str]:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(2)
            sock.sendto(dns_query(name), (settings.cluster_node_ip, 53))
            return dns_answer_ips(sock.recv(1500))

    return in_netns(paths.netns_path(settings), ask, timeout_s=10)
