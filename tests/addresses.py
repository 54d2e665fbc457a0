"""Addresses of this machine for live tests."""

from __future__ import annotations

import socket


def this_hosts_address() -> str:
    """An IPv4 address of this host that is not loopback (the route a packet out would take), or a
    loopback address other than 127.0.0.1 on a host with no network at all."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # a UDP connect sends nothing; it only picks the source
            address = str(s.getsockname()[0])
        except OSError:
            address = ""
    return address if address and not address.startswith("127.") else "127.0.0.2"
