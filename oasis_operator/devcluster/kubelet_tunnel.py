"""The API server's way to the simulated kubelets: an HTTP CONNECT tunnel on a Unix socket.

Started by :class:`~oasis_operator.devcluster.cluster.DevCluster` when pod logs are served. The API
server reaches a node's kubelet (``pods/log``, ``exec``, ``portforward``) at the node's address and
kubelet port; the simulated nodes have addresses that lead nowhere on this machine, and the node
simulator serves every node's kubelet API on one local port. The API server's egress selector
(``--egress-selector-config-file``, network context ``cluster``) sends those connections here as
``CONNECT <node>:10250``; each is joined to the simulator's server, so node objects keep ordinary
addresses and the API server's own code path (authorisation, audit, streaming) is what runs.

Besides the kubelet port, only the exact ``ADDRESS:PORT`` pairs given with ``--route`` are tunnelled
(an aggregated API server's endpoint, e.g. metrics-server's, to the local process serving it); any
other CONNECT (a service or pod proxy request) is refused with 403, as a cluster without a pod
network would fail it. ``--listen-tcp`` opens the same tunnel on a TCP port, for a client that
reaches kubelets itself through an HTTPS proxy (metrics-server).

Run as ``python kubelet_tunnel.py --socket PATH --target HOST:PORT [--route ADDRESS:PORT=HOST:PORT ...]
[--listen-tcp HOST:PORT]`` (standard library only, so it runs as a plain file).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path

KUBELET_PORT = 10250
_MAX_HEADER = 16 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(64 * 1024):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def parse_connect(head: bytes) -> tuple[str, int] | None:
    """The ``host, port`` of a ``CONNECT host:port HTTP/1.x`` request head, or None."""
    try:
        line = head.split(b"\r\n", 1)[0].decode("ascii")
        method, target, version = line.split(" ")
        host, _, port = target.rpartition(":")
    except ValueError:
        return None
    if method != "CONNECT" or not version.startswith("HTTP/1.") or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def split_host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


class Tunnel:
    def __init__(
        self, target_host: str, target_port: int, routes: dict[tuple[str, int], tuple[str, int]] | None = None
    ) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.routes = dict(routes or {})

    def destination(self, host: str, port: int) -> tuple[str, int] | None:
        """Where a CONNECT to ``host:port`` is joined, or None when it is refused."""
        if (host, port) in self.routes:
            return self.routes[(host, port)]
        if port == KUBELET_PORT:
            return self.target_host, self.target_port
        return None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        target = parse_connect(head)
        dest = self.destination(*target) if target is not None else None
        if target is None:
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
        elif dest is None:
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        else:
            try:
                up_reader, up_writer = await asyncio.open_connection(*dest)
            except OSError:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            else:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
                return
        with contextlib.suppress(Exception):
            await writer.drain()
            writer.close()


async def serve(socket_path: Path, tunnel: Tunnel, tcp: tuple[str, int] | None = None) -> None:
    server = await asyncio.start_unix_server(tunnel.handle, path=str(socket_path), limit=_MAX_HEADER)
    os.chmod(socket_path, 0o600)
    servers = [server]
    if tcp is not None:
        servers.append(await asyncio.start_server(tunnel.handle, tcp[0], tcp[1], limit=_MAX_HEADER))
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, type=Path, help="Unix socket to listen on")
    parser.add_argument("--target", required=True, help="HOST:PORT of the node simulator's server")
    parser.add_argument(
        "--route",
        action="append",
        default=[],
        metavar="ADDRESS:PORT=HOST:PORT",
        help="also join CONNECTs to ADDRESS:PORT to HOST:PORT",
    )
    parser.add_argument("--listen-tcp", metavar="HOST:PORT", help="also listen on this TCP address")
    args = parser.parse_args(argv)
    try:
        host, port = split_host_port(args.target)
        routes = {}
        for route in args.route:
            src, _, dst = route.partition("=")
            routes[split_host_port(src)] = split_host_port(dst)
        tcp = split_host_port(args.listen_tcp) if args.listen_tcp else None
    except ValueError as exc:
        parser.error(str(exc))
    with contextlib.suppress(FileNotFoundError):
        args.socket.unlink()
    try:
        asyncio.run(serve(args.socket, Tunnel(host, port, routes), tcp))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
