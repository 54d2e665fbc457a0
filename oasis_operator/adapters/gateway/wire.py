"""The recording gateway's wire helpers: its plain answers (no ``Server`` header), the caller's token,
a bounded body read, a route's rate and record-store bound, an MCP body's JSON-RPC method. Used by
:mod:`oasis_operator.adapters.gateway.server`."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json

import aiohttp
from aiohttp import web

from oasis_operator.adapters.gateway.route import Route


class Plain(web.Response):
    """A response without aiohttp's ``Server`` header (it would name the harness's software)."""

    async def _write_headers(self) -> None:
        self._headers.popall("Server", None)
        await super()._write_headers()


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def token_of(request: web.Request) -> str | None:
    value = request.headers.get("Authorization", "")
    scheme, _, credential = value.partition(" ")
    if scheme.lower() == "bearer" and credential:
        return credential.strip()
    if scheme.lower() == "basic" and credential:
        try:
            _, _, password = base64.b64decode(credential.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password or None
    return None


async def read_bounded(stream: aiohttp.StreamReader, limit: int) -> bytes:
    """The whole body, or its first ``limit + 1`` bytes when it is longer (``read(n)`` alone may stop at
    whatever had arrived)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await stream.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def bounded(route: Route, started: float) -> tuple[str, int]:
    """Why an authenticated call is refused by the route's rate or record store (with its status), or ``""``."""
    allowed, route.bucket = route.bucket.take(started, route.limits.rate_per_second, route.limits.burst)
    if not allowed:
        return "rate limit", 429
    if route.admitted >= route.limits.max_records:
        return f"more than {route.limits.max_records} calls in one scenario", 429
    return "", 0


def jsonrpc_method(body: bytes) -> str:
    """The JSON-RPC method of an MCP request body (``invalid`` when it is none: the SDK answered the error)."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "invalid"
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else "invalid"
