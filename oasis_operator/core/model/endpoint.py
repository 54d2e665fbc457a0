"""Which ``agent.endpoint`` the operator may call: never a place inside the operator itself.

Called by the run spec's validation (:mod:`oasis_operator.core.model.run`), by the operator before it
builds an HTTP agent, and by the HTTP agent adapter for every address it resolves and connects to.
The endpoint is the run creator's choice, and the operator fetches it from its own pod: pointed at
the pod's loopback it would reach the tool-plane back-ends (VictoriaMetrics deletes every series on
one GET), at a link-local address the cloud's metadata service (decision 0099, review finding M-2).

Two levels:

- :func:`url_problem` — the URL itself: an ``http(s)`` base URL without credentials, query or
  fragment (the identity question appends a path, which a fragment would swallow), no control
  character, and a host that is not, written as a literal or a well-known name, an address of the
  kinds below. Numeric hosts in the forms ``inet_aton`` accepts (``2130706433``, ``127.1``,
  ``0x7f.1``) are read as the address they mean.
- :func:`address_problem` — one IP address: unspecified, multicast, link-local, and (unless the
  operator runs locally and allows it) loopback. The operator's own non-loopback addresses are
  checked by the adapter, which alone knows them.

Pure: values in, a reason (or None) out.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

__all__ = ["LOCAL_NAMES", "address_problem", "host_address", "url_problem"]

#: Names that mean this very machine whatever a resolver says.
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_NUMERIC_PART = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_CONTROL = re.compile(r"[\x00-\x20\x7f-\x9f]")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """``host`` read as the C library reads a numeric IPv4 host (1 to 4 parts, each decimal, octal
    with a leading 0, or hex with 0x; the last part fills the remaining bytes); None when it is not
    numeric or out of range."""
    parts = host.lower().split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMERIC_PART.match(p) for p in parts):
        return None
    values = []
    for part in parts:
        if part.startswith("0x"):
            values.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not set(part) <= set("01234567"):
                return None
            values.append(int(part, 8))
        else:
            values.append(int(part))
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def host_address(host: str) -> Address | None:
    """The address a URL's host names when it is an address at all (IPv6 literal, dotted or any
    other numeric IPv4 form); None for a name."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return _inet_aton(host)


def _unwrapped(address: Address) -> Address:
    """An IPv6 address that carries an IPv4 one (mapped, compatible, 6to4, NAT64 well-known) is
    judged as that IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in ipaddress.IPv6Network("64:ff9b::/96"):
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address in ipaddress.IPv6Network("::/96") and int(address) > 1:
            return ipaddress.IPv4Address(int(address))
    return address


def address_problem(address: Address, *, allow_loopback: bool = False) -> str | None:
    """Why the operator must not connect to ``address``, or None."""
    ip = _unwrapped(address)
    if ip.is_unspecified:
        return f"{address} is the unspecified address (this machine)"
    if ip.is_multicast:
        return f"{address} is a multicast address"
    if ip.is_link_local:
        return f"{address} is a link-local address (a cloud's metadata service lives there)"
    if ip.is_loopback and not allow_loopback:
        return f"{address} is a loopback address (the operator's own pod)"
    return None


def url_problem(url: str, *, allow_loopback: bool = False) -> str | None:
    """Why ``url`` cannot be an agent's endpoint, or None when it can."""
    if _CONTROL.search(url):
        return "it holds a space or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port out of range
    except ValueError as exc:
        return f"it is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "expected an http:// or https:// URL"
    if "@" in parts.netloc:
        return "it carries credentials (user@host); put them in credentialsRef"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "it has a query or a fragment; expected a base URL (paths are appended to it)"
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return "it names no host"
    if host in LOCAL_NAMES or host.endswith(".localhost"):
        return None if allow_loopback else f"{host} is this machine (the operator's own pod)"
    address = host_address(host)
    if address is None:
        return None
    return address_problem(address, allow_loopback=allow_loopback)
