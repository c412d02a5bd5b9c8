"""The API relay: host loopback -> the apiserver inside the cluster's network namespace.

``python -m infra.cluster.relay --listen 127.0.0.1:16443 --netns /run/netns/lk-cluster
--target 10.200.0.1:6443``. It binds its listening socket in the host's namespace first, then
moves itself (one thread, so the whole process) into the cluster's namespace with setns: every
connection it opens afterwards starts there. Bytes are copied both ways unchanged (TLS is end
to end between the client and the apiserver), so kubectl, helm and ``kubectl port-forward``
work from the host while nothing on the host routes to cluster addresses.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys
from pathlib import Path

from infra.cluster.network import setns


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            if writer.can_write_eof():
                writer.write_eof()


async def _handle(
    target: tuple[str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*target), 10)
    except (OSError, TimeoutError):
        writer.close()
        return
    try:
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    finally:
        for w in (writer, up_writer):
            with contextlib.suppress(Exception):
                w.close()


async def serve(listener: socket.socket, target: tuple[str, int]) -> None:
    server = await asyncio.start_server(
        lambda r, w: _handle(target, r, w), sock=listener, limit=1 << 20
    )
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.cluster.relay")
    parser.add_argument("--listen", required=True, help="host:port on the host (loopback)")
    parser.add_argument("--netns", required=True, help="the namespace file to enter")
    parser.add_argument("--target", required=True, help="host:port inside the namespace")
    args = parser.parse_args(argv)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(_split(args.listen))
    listener.listen(128)
    setns(Path(args.netns))  # after bind: the listener stays on the host, connections go in
    print(f"relay {args.listen} -> {args.target} in {args.netns}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(listener, _split(args.target)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
